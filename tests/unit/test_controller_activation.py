"""The activation check of a new active controller (controller.heartbeats): brokers on voter nodes
must show they are alive within ACTIVATION_GRACE_MS, or are fenced; no other broker is.

A seeded simulation of controller failovers drives BrokerSessions the way QuorumController does
(activate, confirm on raft fetches, touch on heartbeats, expired() every 250 ms) with live brokers
that find the new controller after a random delay inside what the real system allows, and dead ones
that never do, and voters paused across the activation (SIGSTOP, up to most of a session) whose
kernel takes the controller's held probe (controller.liveness_probe) while a dead voter's refuses
or resets it. It must catch six deliberately broken sessions: one that fences at once, one that
never checks (Kafka's fresh session only), one that holds observers to the grace as well, one that
ignores refusals, one that ignores the probe (fencing paused voters), and one for which a probe
once taken vouches for good (a dying process's reset ignored).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from kavka.controller.heartbeats import ACTIVATION_GRACE_MS, BrokerSessions
from kavka.metadata import records as mr
from tests.unit.test_controller import _apply, _cluster

SESSION_MS = 9000
HEARTBEAT_MS = 2000
REQUEST_TIMEOUT_MS = 2000  # controller.quorum.request.timeout.ms: an observer's voter probes are this far apart
POLL_MS = 250  # how often the active controller looks for expired sessions
STEP_MS = 50  # the simulation's time step


def test_a_silent_voter_is_fenced_after_the_grace_and_a_live_one_keeps_its_session():
    image = _cluster(5)  # brokers 1..5
    s = BrokerSessions(SESSION_MS)
    s.activate(image.brokers, 1000, must_confirm={2, 3, 4})  # 1 is this node; 5 an observer
    s.confirm({3})  # node 3 fetched from this leader
    s.touch(4, 1200, object())  # broker 4 heartbeated
    assert s.expired(image, 1000 + ACTIVATION_GRACE_MS - 1) == []
    assert s.expired(image, 1000 + ACTIVATION_GRACE_MS) == [2]
    assert s.unconfirmed(2) and not s.unconfirmed(3) and not s.unconfirmed(5)
    # The observer and this node's own broker keep the whole fresh session, as in Kafka.
    assert s.expired(image, 1000 + SESSION_MS) == [2]
    assert s.expired(image, 1000 + SESSION_MS + 1) == [1, 2, 3, 5]  # oldest contact first; 4 heartbeated at 1200
    # A late sign of life lifts the check (a broker fenced wrongly heartbeats and is unfenced).
    s.confirm({2})
    assert s.expired(image, 1000 + ACTIVATION_GRACE_MS + 1) == []
    # A refused connection (nothing listens on the node's controller listener) fences at the
    # next check; a fetch or heartbeat first lifts it, and a refusal from a broker that already
    # confirmed is no reason.
    s.deactivate()
    s.activate(image.brokers, 20_000, must_confirm={2, 3, 4})
    s.confirm({4})
    s.refused({2, 3, 4})
    s.touch(3, 20_010, object())
    assert s.refused_connection(2) and not s.refused_connection(3) and not s.refused_connection(4)
    assert s.expired(image, 20_050) == [2]
    # Deactivation forgets it; the next activation checks afresh.
    s.deactivate()
    s.activate(image.brokers, 50_000, must_confirm={2})
    assert s.expired(image, 50_000 + ACTIVATION_GRACE_MS) == [2]


def test_a_fenced_or_unregistered_broker_is_not_held_to_the_grace():
    image = _cluster(3)
    image, _ = _apply(image, [mr.BrokerRegistrationChangeRecord(3, image.brokers[3].epoch, fenced=True)])
    s = BrokerSessions(SESSION_MS)
    s.activate(image.brokers, 0, must_confirm={2, 3, 7})  # 7: a voter node with no broker role
    assert s.expired(image, ACTIVATION_GRACE_MS) == [2]


def test_the_grace_never_exceeds_the_session():
    assert BrokerSessions(500).activation_grace_ms == 500


# ---- the seeded failover simulation ---------------------------------------------------------


@dataclass(frozen=True)
class Broker:
    broker_id: int
    voter: bool
    alive: bool
    found_ms: int  # after the activation: its node's first raft Fetch from the new leader
    heartbeat_ms: int  # after the activation: its first heartbeat to the new controller
    refused_ms: int | None = None  # dead voter: when its node refused the new leader's connection
    paused_ms: int = 0  # live voter: stopped (SIGSTOP) this long from the activation
    # The controller's held probe of its listener (controller.liveness_probe): when it is taken
    # (live, paused or not; a dead voter's, during its teardown) and when it is reset or refused
    # (dead); neither: not taken within the grace (the machine vanished).
    probe_taken_ms: int | None = None
    probe_dead_ms: int | None = None
    probe_unreachable_ms: int | None = None


def _scenario(rng: random.Random) -> list[Broker]:
    """3 or 5 voters (combined or controller-only) and 0-3 broker-only observers; the node that
    died with the old controller (a voter) and sometimes one more broker are dead."""
    voters = rng.choice((3, 5))
    observers = rng.randrange(4)
    combined = rng.random() < 0.6 or observers == 0
    dead = {rng.randrange(2, voters + 1)} if combined else set()
    if observers and rng.random() < 0.3:
        dead.add(voters + 1 + rng.randrange(observers))
    out = []
    for b in range(1, voters + observers + 1):
        voter = b <= voters
        if voter and not combined:
            continue  # controller-only node: no broker
        # A live voter fetches within a round trip of its BeginQuorumEpoch (a loaded event loop:
        # up to a few hundred ms); an observer asks voters at random, REQUEST_TIMEOUT_MS apart.
        found = rng.randrange(0, 300, STEP_MS) if voter else rng.randrange(0, 2 * REQUEST_TIMEOUT_MS + 300, STEP_MS)
        heartbeat = found + rng.randrange(0, HEARTBEAT_MS + 200, STEP_MS)
        # A dead voter's kernel refuses the new leader's BeginQuorumEpoch (sent at the election,
        # before the activation) unless the whole machine vanished; the transport may also
        # notice only later, on a retry.
        refused = taken = dead_at = unreachable = None
        paused = 0
        if voter and b in dead and rng.random() < 0.8:  # the process died; else the machine vanished
            dead_at = rng.choice((0, rng.randrange(0, 600, STEP_MS)))  # the probe refused or reset
            if rng.random() < 0.3:
                taken = rng.randrange(0, dead_at + STEP_MS, STEP_MS)  # taken during the teardown
            if rng.random() < 0.7:  # the transport's own connection refused too (or first)
                refused = rng.choice((0, rng.randrange(0, 600, STEP_MS)))
        elif voter and b in dead:
            unreachable = rng.randrange(0, ACTIVATION_GRACE_MS + STEP_MS, STEP_MS)  # not taken in time
        elif voter:
            if rng.random() < 0.3:
                paused = rng.randrange(ACTIVATION_GRACE_MS, SESSION_MS - 2 * HEARTBEAT_MS, STEP_MS)
                found, heartbeat = found + paused, heartbeat + paused
            if paused or rng.random() < 0.8:
                taken = rng.randrange(0, 200, STEP_MS)  # its kernel answers, paused or busy
            else:
                unreachable = rng.randrange(0, ACTIVATION_GRACE_MS + STEP_MS, STEP_MS)  # a full backlog
        out.append(Broker(b, voter, b not in dead, found, heartbeat, refused, paused, taken, dead_at, unreachable))
    return out


def _run(make: type[BrokerSessions], seed: int) -> None:
    rng = random.Random(seed)
    brokers = _scenario(rng)
    image = _cluster(max(b.broker_id for b in brokers))
    keep = {b.broker_id for b in brokers}
    image, _ = _apply(image, [mr.BrokerRegistrationChangeRecord(i, image.brokers[i].epoch, fenced=True)
                              for i in image.brokers if i not in keep])
    me = next(b.broker_id for b in brokers if b.voter and b.alive) if any(b.voter for b in brokers) else None
    s = make(SESSION_MS)
    t0 = 10_000 + rng.randrange(1000)
    s.activate(image.brokers, t0, must_confirm={b.broker_id for b in brokers if b.voter} - {me})
    probed = [b for b in brokers if b.voter and b.broker_id != me]
    for b in probed:
        s.probe_started(b.broker_id)
    fenced_at: dict[int, int] = {}
    for now in range(t0, t0 + SESSION_MS + 2 * POLL_MS, STEP_MS):
        for b in probed:
            if b.probe_taken_ms is not None and now == t0 + b.probe_taken_ms:
                s.probe_taken(b.broker_id)
            if b.probe_dead_ms is not None and now == t0 + b.probe_dead_ms:
                s.probe_dead(b.broker_id)
            if b.probe_unreachable_ms is not None and now == t0 + b.probe_unreachable_ms:
                s.probe_ended(b.broker_id)  # not taken: the connect failed or timed out
            if not s.awaits(b.broker_id) and now >= t0 + (b.probe_taken_ms or 0):
                s.probe_ended(b.broker_id)  # heard from: the probe is closed
        for b in brokers:
            if b.alive and b.broker_id != me and now >= t0 + b.found_ms:
                s.confirm({b.broker_id})
            since = now - t0 - b.heartbeat_ms
            if b.alive and (b.broker_id == me or since >= 0) and since % HEARTBEAT_MS == 0:
                s.touch(b.broker_id, now)  # then every HEARTBEAT_MS
        if (now - t0) % POLL_MS == 0:
            # What QuorumController passes at each check: the refusals of this epoch so far.
            s.refused(b.broker_id for b in brokers if b.refused_ms is not None and now - t0 >= b.refused_ms)
            for x in s.expired(image, now):
                fenced_at.setdefault(x, now - t0)
                image, _ = _apply(image, [mr.BrokerRegistrationChangeRecord(x, image.brokers[x].epoch, fenced=True)])
    for b in brokers:
        if b.alive:
            assert b.broker_id not in fenced_at, f"seed {seed}: live {b} fenced at +{fenced_at[b.broker_id]} ms"
        elif b.refused_ms is not None or b.probe_dead_ms is not None:
            # Fenced at the first check that knows of the refusal or reset (or by the grace, if sooner).
            first = min(x for x in (b.refused_ms, b.probe_dead_ms) if x is not None)
            bound = min(first + POLL_MS, ACTIVATION_GRACE_MS + POLL_MS)
            assert fenced_at.get(b.broker_id, 1 << 30) <= bound, (
                f"seed {seed}: dead voter {b} refused a connection but was fenced at "
                f"+{fenced_at.get(b.broker_id)} ms"
            )
        elif b.voter:
            assert fenced_at.get(b.broker_id, 1 << 30) <= ACTIVATION_GRACE_MS + POLL_MS, (
                f"seed {seed}: dead voter {b} fenced at +{fenced_at.get(b.broker_id)} ms, not within the grace"
            )
        else:
            assert fenced_at.get(b.broker_id, 1 << 30) <= SESSION_MS + POLL_MS, f"seed {seed}: dead observer {b}"


SEEDS = range(300)


def test_failover_simulation_fences_the_dead_and_only_them():
    for seed in SEEDS:
        _run(BrokerSessions, seed)


class _FencesAtOnce(BrokerSessions):
    """Broken: no grace, a voter not heard from at the activation is fenced at the first look."""

    def __init__(self, session_timeout_ms: int) -> None:
        super().__init__(session_timeout_ms, activation_grace_ms=0)


class _NeverChecks(BrokerSessions):
    """Broken (Kafka's behaviour): every broker gets the whole fresh session, nothing more."""

    def activate(self, broker_ids, now_ms, *, must_confirm=()):  # noqa: ANN001, ANN201
        super().activate(broker_ids, now_ms)


class _ChecksObservers(BrokerSessions):
    """Broken: observers held to the grace too, though they find a new leader more slowly."""

    def activate(self, broker_ids, now_ms, *, must_confirm=()):  # noqa: ANN001, ANN201
        ids = list(broker_ids)
        rest = set(ids) - set(must_confirm)  # this node's broker (the lowest) and the observers
        super().activate(ids, now_ms, must_confirm=set(ids) - {min(rest, default=None)})


class _IgnoresRefusals(BrokerSessions):
    """Broken (kavka before): a refused connection changes nothing; the grace runs out first."""

    def refused(self, broker_ids):  # noqa: ANN001, ANN201
        pass

    def probe_dead(self, broker_id):  # noqa: ANN001, ANN201
        self.probe_ended(broker_id)


class _IgnoresProbes(BrokerSessions):
    """Broken (kavka before the held probe): a taken probe vouches for nothing, so a voter paused
    across the activation is fenced when the grace runs out."""

    def vouched(self, broker_id):  # noqa: ANN001, ANN201
        return False


class _TakenMeansAlive(BrokerSessions):
    """Broken (the withdrawn rule): a probe once taken vouches for good, even after the dying
    process's teardown reset it."""

    def probe_dead(self, broker_id):  # noqa: ANN001, ANN201
        if broker_id not in self._held:
            super().probe_dead(broker_id)


@pytest.mark.parametrize("broken", [_FencesAtOnce, _NeverChecks, _ChecksObservers, _IgnoresRefusals, _IgnoresProbes,
                                    _TakenMeansAlive])
def test_failover_simulation_catches_a_broken_session(broken: type[BrokerSessions]) -> None:
    caught = 0
    for seed in SEEDS:
        try:
            _run(broken, seed)
        except AssertionError:
            caught += 1
    assert caught > 0, f"{broken.__name__} passed every seed"


def test_a_lost_broker_whose_listener_refuses_is_fenced_at_the_next_check():
    """After its heartbeat connection closes, a broker whose listener refuses the controller's
    probe is fenced at once; one that heartbeats again, fetches, or was never lost is not."""
    from kavka.controller.heartbeats import CONNECTION_LOSS_GRACE_MS

    image = _cluster(4)
    s = BrokerSessions(SESSION_MS)
    s.activate(image.brokers, 0)
    conns = {b: object() for b in (2, 3, 4)}
    for b, c in conns.items():
        s.touch(b, 100, c)
    s.probe_dead(4)  # not lost: a refusal alone proves nothing
    for b in (2, 3):
        assert s.connection_lost(conns[b], 1000) == [b]
    s.probe_dead(2)
    s.probe_dead(3)
    s.touch(3, 1010, object())  # heartbeated again on a new connection: alive
    s.checked(1000)
    assert s.expired(image, 1050) == [2]
    assert s.refuses_connections(2) and not s.refuses_connections(3) and not s.refuses_connections(4)
    # Without the refusal, the grace decides.
    assert s.connection_lost(conns[4], 2000) == [4]
    s.checked(1250)
    s.checked(1500)
    s.checked(1750)
    s.checked(2000)
    assert s.expired(image, 2000 + CONNECTION_LOSS_GRACE_MS - 1) == [2]
    s.fetching([2])  # its node keeps fetching the metadata log: alive after all
    assert s.expired(image, 2000 + CONNECTION_LOSS_GRACE_MS) == [4]


def test_a_held_probe_leaves_a_silent_broker_to_its_session_and_a_reset_fences_it():
    """controller.liveness_probe: a voter node silent across the activation, or a broker whose
    heartbeat connection closed, is not fenced by the short rules while a probe of its listener is
    in flight or held open (a paused or busy process); the session still bounds it. A probe that
    is refused or reset (a dying process) fences at the next check; one not taken in time leaves
    the grace to decide."""
    from kavka.controller.heartbeats import CONNECTION_LOSS_GRACE_MS

    image = _cluster(5)
    s = BrokerSessions(SESSION_MS)
    s.activate(image.brokers, 1000, must_confirm={2, 3, 4, 5})
    for b in (2, 3, 4, 5):
        assert s.awaits(b)
        s.probe_started(b)
    s.probe_taken(2)  # paused: its kernel took the probe and keeps it
    s.probe_taken(3)
    s.probe_dead(3)  # taken during a kill -9's teardown, then reset
    s.probe_ended(4)  # not taken within the grace: cut off
    # 5's connect is still in flight: it waits for the outcome.
    grace = 1000 + ACTIVATION_GRACE_MS
    assert s.expired(image, grace - 1) == [3]
    assert s.expired(image, grace) == [3, 4]
    s.probe_ended(5)
    assert s.expired(image, grace) == [3, 4, 5]
    assert 2 not in s.expired(image, 1000 + SESSION_MS)  # the session still bounds a paused one
    assert 2 in s.expired(image, 1000 + SESSION_MS + 1)
    s.touch(2, 1000 + SESSION_MS, object())  # woke and heartbeated: the probe is no longer needed
    assert not s.awaits(2)

    # The lost-connection rule, the same way.
    s = BrokerSessions(SESSION_MS)
    s.activate(image.brokers, 0)
    conns = {b: object() for b in (2, 3, 4)}
    for b, c in conns.items():
        s.touch(b, 100, c)
        assert s.connection_lost(c, 1000) == [b]
        s.probe_started(b)
    s.checked(1000)
    s.probe_taken(2)
    s.probe_taken(3)
    s.probe_dead(3)
    s.probe_ended(4)
    assert s.expired(image, 1050) == [3]
    assert s.expired(image, 1000 + CONNECTION_LOSS_GRACE_MS) == [3, 4]
    assert s.refuses_connections(3) and not s.refuses_connections(2)
    s.deactivate()
    assert not s.vouched(2)
