"""A broker's own view of its controller session (broker.session_watch): it stops acting as a
leader once no heartbeat it sent within the last session was answered, never later than the
controller fences it, and never while its heartbeats get through.

Besides the rule's edges, a seeded simulation runs one broker heartbeating a controller over a
network with delays, drops and partitions, and with the broker's own process stalling (SIGSTOP, a
loaded event loop). The controller fences as QuorumController does (no heartbeat received for a
session, checked every 250 ms) and unfences on the next heartbeat. Two invariants: the broker never
acts as a leader while the controller has fenced it (beyond one poll, or the hold after its own
stall), and in seeds whose heartbeats always get through and whose stalls are shorter than the
controller would notice, it never steps down. Three broken watches must each fail a seed: one
that never steps down (Kafka's broker), one that times the session from when answers arrive
instead of when heartbeats were sent, one without the hold after a stall.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from kavka.broker.session_watch import STALL_HOLD_MS, SessionWatch

SESSION_MS = 9000
HEARTBEAT_MS = 2000  # broker.heartbeat.interval.ms
RETRY_MS = 200  # after a heartbeat that got no answer (broker.lifecycle)
REQUEST_TIMEOUT_MS = 2000  # a heartbeat's own timeout
CONTROLLER_CHECK_MS = 250
POLL_MS = 250
STEP_MS = 10


def _armed(now: int = 0) -> SessionWatch:
    w = SessionWatch(SESSION_MS)
    w.answered(now, fenced=False)
    w.poll(now, image_unfenced=True)
    return w


def _poll_through(w: SessionWatch, start: int, end: int, *, image_unfenced: bool = True) -> bool:
    """Poll every POLL_MS from `start` to `end` (inclusive), as the broker does; the last answer."""
    t = start
    while t < end:
        w.poll(t, image_unfenced=image_unfenced)
        t += POLL_MS
    return w.poll(end, image_unfenced=image_unfenced)


def test_not_armed_before_the_first_unfenced_answer():
    w = SessionWatch(SESSION_MS)
    w.answered(0, fenced=True)  # registered, fenced until caught up: it leads nothing anyway
    assert not w.poll(60_000, image_unfenced=False)


def test_lapses_a_session_after_the_last_answered_heartbeat_was_sent():
    w = _armed(1000)
    assert not _poll_through(w, 1000, 1000 + SESSION_MS - 1)
    assert w.poll(1000 + SESSION_MS, image_unfenced=True)
    assert w.next_deadline_ms(1000 + SESSION_MS) == 1000 + SESSION_MS + 250


def test_heartbeats_answered_in_time_keep_the_session():
    w = _armed(0)
    for t in range(0, 60_000, POLL_MS):
        if t % HEARTBEAT_MS == 0:
            w.answered(t, fenced=False)
        assert not w.poll(t, image_unfenced=True)


def test_a_fenced_answer_does_not_renew_the_session():
    w = _armed(0)
    w.answered(5000, fenced=True)
    assert _poll_through(w, 0, SESSION_MS)


def test_resumes_only_after_an_answer_to_a_heartbeat_sent_since_and_an_unfenced_image():
    w = _armed(0)
    assert _poll_through(w, 0, SESSION_MS)
    w.answered(SESSION_MS - 100, fenced=False)  # sent before the lapse, answered late
    assert w.poll(SESSION_MS + 250, image_unfenced=True)
    w.answered(SESSION_MS + 300, fenced=False)
    # The controller fenced it meanwhile: the image shows it fenced once the fence arrives, and
    # unfenced only after the later unfence, when the fence's leader changes are applied.
    assert w.poll(SESSION_MS + 500, image_unfenced=False)
    assert not w.poll(SESSION_MS + 750, image_unfenced=True)
    # The new session runs from the heartbeat that brought it back.
    assert not _poll_through(w, SESSION_MS + 750, SESSION_MS + 300 + SESSION_MS - 1)
    assert w.poll(SESSION_MS + 300 + SESSION_MS, image_unfenced=True)


def test_after_its_own_stall_it_holds_for_a_heartbeat_round_trip():
    w = _armed(0)
    _poll_through(w, 0, 1900)
    # Stopped from 1.9 s to 9.5 s: no heartbeat could go, but the controller fences only a
    # session after the last one it received, so the broker waits for the one due now.
    assert not w.poll(9500, image_unfenced=True)
    w.answered(9500, fenced=False)
    assert not w.poll(9700, image_unfenced=True)
    # Without an answer, it lapses when the hold ends.
    w2 = _armed(0)
    _poll_through(w2, 0, 1900)
    assert not w2.poll(9500, image_unfenced=True)
    assert not _poll_through(w2, 9500, 9500 + STALL_HOLD_MS - 1)
    assert w2.poll(9500 + STALL_HOLD_MS, image_unfenced=True)


# ------------------------------------------------------------------ the seeded simulation


class NeverLapses(SessionWatch):
    """Kafka's broker: leads on until the metadata log says otherwise."""

    def poll(self, now_ms: int, *, image_unfenced: bool) -> bool:
        super().poll(now_ms, image_unfenced=image_unfenced)
        self.lapsed = False
        return False


class FromAnswers(SessionWatch):
    """Times the session from when answers arrive, not from when their heartbeats were sent."""

    def __init__(self, session_timeout_ms: int) -> None:
        super().__init__(session_timeout_ms)
        self.now = 0

    def answered(self, sent_ms: int, *, fenced: bool) -> None:
        super().answered(self.now, fenced=fenced)


class NoStallHold(SessionWatch):
    def poll(self, now_ms: int, *, image_unfenced: bool) -> bool:
        self._last_poll_ms = None
        return super().poll(now_ms, image_unfenced=image_unfenced)


@dataclass
class Run:
    seed: int
    watch: SessionWatch
    rng: random.Random
    faults: bool  # partitions and drops; else only delays, and stalls the controller cannot notice
    now: int = 0
    inflight: list[tuple[int, str, int]] = field(default_factory=list)  # (arrival, kind, heartbeat sent)
    cut: list[tuple[int, int]] = field(default_factory=list)  # windows where nothing gets through
    frozen: list[tuple[int, int]] = field(default_factory=list)  # the broker's own stalls
    last_received = 0  # controller: when it last heard a heartbeat
    fenced_at: int | None = None
    image_fenced_at: int | None = None  # the broker's image: when it learnt it was fenced
    next_beat = 0
    beat_deadline: int | None = None  # an unanswered heartbeat's timeout
    next_poll = 0
    next_check = 0
    woke_at = -10**9
    lapses = 0

    def in_any(self, windows: list[tuple[int, int]], t: int) -> bool:
        return any(a <= t < b for a, b in windows)

    def delay(self) -> int:
        return self.rng.randint(1, 250)

    def send(self, kind: str, sent: int) -> None:
        if self.in_any(self.cut, self.now) or (self.faults and self.rng.random() < 0.05):
            return
        arrival = self.now + self.delay()
        if self.in_any(self.cut, arrival):
            return
        self.inflight.append((arrival, kind, sent))

    def fail(self, what: str) -> None:
        raise AssertionError(f"seed {self.seed} at {self.now} ms: {what}")

    def run(self, duration_ms: int) -> None:
        rng = self.rng
        t = 2000
        while t < duration_ms:
            if self.faults and rng.random() < 0.5:
                length = rng.randint(500, 20_000)
                self.cut.append((t, t + length))
                t += length
            else:
                # Without faults, stalls shorter than a session: the controller may fence the
                # broker only if its last heartbeat came at least that long before the next one
                # arrives; the hold after a stall keeps the broker from stepping down before
                # the heartbeat sent as it wakes is answered.
                length = rng.randint(100, 15_000 if self.faults else SESSION_MS - 300)
                self.frozen.append((t, t + length))
                t += length
            t += rng.randint(1000, 15_000)
        while self.now < duration_ms:
            self.step()
            self.now += STEP_MS

    def step(self) -> None:
        now = self.now
        # The controller (not stalled): heartbeats in, fences every 250 ms.
        for msg in [m for m in self.inflight if m[0] <= now and m[1] == "beat"]:
            self.inflight.remove(msg)
            self.last_received = now
            if self.fenced_at is not None:
                self.fenced_at = None  # caught up: unfenced on this heartbeat
                self.send("unfenced", msg[2])
            self.send("answer", msg[2])
        if now >= self.next_check:
            self.next_check = now + CONTROLLER_CHECK_MS
            if self.fenced_at is None and now - self.last_received >= SESSION_MS:
                self.fenced_at = now
                self.send("fenced", now)
        if self.in_any(self.frozen, now):
            return
        if self.in_any(self.frozen, now - STEP_MS):
            self.woke_at = now
        if isinstance(self.watch, FromAnswers):
            self.watch.now = now
        for msg in sorted(m for m in self.inflight if m[0] <= now and m[1] != "beat"):
            self.inflight.remove(msg)
            if msg[1] == "answer":
                self.watch.answered(msg[2], fenced=False)
                self.beat_deadline = None
            elif msg[1] == "fenced":
                self.image_fenced_at = msg[2]
            elif msg[1] == "unfenced":
                self.image_fenced_at = None
        if self.beat_deadline is not None and now >= self.beat_deadline:
            self.beat_deadline = None
            self.next_beat = min(self.next_beat, now + RETRY_MS)
        if now >= self.next_beat and self.beat_deadline is None:
            self.send("beat", now)
            self.beat_deadline = now + REQUEST_TIMEOUT_MS
            self.next_beat = now + HEARTBEAT_MS
        if now >= self.next_poll:
            self.next_poll = now + POLL_MS
            was = self.watch.lapsed
            lapsed = self.watch.poll(now, image_unfenced=self.image_fenced_at is None)
            self.lapses += lapsed and not was
            if not self.faults and lapsed:
                self.fail("stepped down though every heartbeat got through and no stall was long enough to matter")
            slack = POLL_MS + CONTROLLER_CHECK_MS + STEP_MS
            if (
                not lapsed
                and self.fenced_at is not None
                and now - self.fenced_at > slack
                and now - self.woke_at > STALL_HOLD_MS + slack
            ):
                self.fail(f"acts as a leader {now - self.fenced_at} ms after the controller fenced it")


def run_seed(seed: int, watch_cls: type[SessionWatch] = SessionWatch) -> Run:
    rng = random.Random(seed)
    r = Run(seed, watch_cls(SESSION_MS), rng, faults=seed % 3 != 0)
    r.watch.answered(0, fenced=False)
    r.run(120_000)
    return r


def test_seeded_runs_hold_both_invariants():
    lapses = sum(run_seed(seed).lapses for seed in range(60))
    assert lapses > 20  # the partitions do make brokers step down


@pytest.mark.slow
def test_seeded_runs_hold_both_invariants_more_seeds():
    for seed in range(60, 1060):
        run_seed(seed)


@pytest.mark.parametrize("broken", [NeverLapses, FromAnswers, NoStallHold])
def test_a_broken_watch_fails_a_seed(broken: type[SessionWatch]):
    for seed in range(60):
        try:
            run_seed(seed, broken)
        except AssertionError:
            return
    pytest.fail(f"{broken.__name__} passed 60 seeds")
