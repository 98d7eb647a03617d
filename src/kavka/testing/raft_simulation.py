"""A seeded event simulation of RaftClient voters (Kafka's RaftEventSimulationTest as the model).

Nodes run `RaftClient` over `MemoryLog` and a crash-proof quorum-state store;
messages travel through `SimNetwork` (delays, drops, duplicates, partitions).
An event heap orders deliveries, node timers, client appends and faults
(partitions, heals, hard kills that lose unflushed data, restarts) and the
log flushes the core asks for, which end after a seeded delay (a kill before
then loses them, as a kill during an fsync on a worker thread does). Some seeds
also kill a voter the moment it grants a vote, becomes leader or moves its high
watermark, and restart it within a network delay. `run_figure8()` scripts
figure 8 of the Raft paper with partitions instead of random faults. After
every event the invariants are checked; `run()` ends with every fault healed
and asserts liveness: a leader elected and a new record committed on all voters.

Invariants (checked on the node that just ran, after every event):
- at most one leader per epoch, over the whole run;
- no follower is told to truncate below its high watermark (the core's own guard, reported here);
- a node's epoch never goes back (across restarts: quorum-state survives);
- a node's high watermark never goes back while it lives, nor passes its log end;
- every record below a node's high watermark equals the record the cluster
  first saw committed at that offset, and stays in its log afterwards;
- with a dynamic quorum (`spares` > 0, KIP-853): a node never added as a voter stays an observer,
  a leader's log never holds two VotersRecords above what the cluster committed (at most one
  voter change in flight), and a node is added as a voter only once it holds a record of the
  leader's epoch (it caught up as an observer first);
- each node runs a state machine (the list of committed data records) that
  takes a snapshot every few records (seeded; some seeds never): a snapshot
  it loads, its own or fetched from the leader with FetchSnapshot, holds
  exactly the cluster's committed data records below its end offset, and
  batches handed to it continue exactly where the state stands.
With `spares` (KIP-853), the quorum is dynamic: the first `voters` nodes start from a bootstrap
voter set, the spares start as observers, and a "membership" event (its own seeded stream) asks
the leader to add a spare or an earlier voter that is not a voter now, or to remove a voter (the
leader too), and on some draws asks for a second change at once, which a correct core refuses.
With `wipes` as well, some membership events lose a voter's disk instead: the node is killed and
comes back with an empty log and quorum-state and a new directory id (formatted to join, as an
operator does), and later events replace it (remove the voter set's entry with the old directory
id, add the node with the new one), as `kavka metadata-quorum remove-controller/add-controller`
do. A disk is lost only from a voter set of three or more with no other lost voter still in it:
beyond that, no protocol can keep what only the lost disks held.
`client_factory` lets a test run a deliberately broken core to show the
simulation catches it. Used by tests only.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kavka.common import ErrorCode
from kavka.protocol.messages import uuid_to_str
from kavka.raft.api import SnapshotId
from kavka.raft.client import RaftClient, RaftConfig
from kavka.raft.messages import Envelope, VoteResponse
from kavka.raft.state import EpochState, MemoryQuorumStateStore
from kavka.raft.voters import VoterNode, VoterSet, voters_in
from kavka.testing import ManualClock, MemoryLog, SimNetwork

CLUSTER_ID = "sim-cluster-id-00000000"


class InvariantViolation(AssertionError):
    pass


@dataclass
class StateMachine:
    """A listener whose state is the list of committed data records, checked against the cluster."""

    sim: Sim
    node_id: int
    records: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    next_offset: int = 0  # the offset after the last batch applied
    since_snapshot: int = 0
    loaded: int = 0  # snapshots loaded

    def handle_commit(self, base_offset: int, epoch: int, records: list) -> None:
        if base_offset < self.next_offset:
            raise InvariantViolation(f"node {self.node_id}: batch at {base_offset} below {self.next_offset}")
        for offset, key, value in records:
            self.records.append((key, value))
            self.next_offset = offset + 1
        self.since_snapshot += len(records)

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: list) -> None:
        expected = self.sim.committed_data_below(snapshot_id.end_offset)
        if list(records) != expected:
            raise InvariantViolation(f"node {self.node_id} loaded snapshot {snapshot_id} that differs from the log")
        self.records = list(records)
        self.next_offset = snapshot_id.end_offset
        self.since_snapshot = 0
        self.loaded += 1

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        pass


@dataclass
class Node:
    node_id: int
    log: MemoryLog
    store: MemoryQuorumStateStore
    client: RaftClient | None = None
    alive: bool = True
    deadline: int = 0
    last_epoch: int = 0
    last_hw: int = 0
    checked_hw: int = 0  # committed offsets below this were checked against the cluster record
    incarnation: int = 0  # bumped by every start: a flush begun before a crash never ends
    flushing: bool = False
    machine: StateMachine | None = None


@dataclass
class Sim:
    seed: int
    voters: int
    observers: int = 0  # broker-only nodes: they follow the log and never vote
    spares: int = 0  # KIP-853: controllers that start as observers and may be added as voters
    check_in_flight: bool = True  # off: only the safety invariants may catch two changes in flight
    wipes: bool = False  # with spares: membership events also lose voters' disks (see the module doc)
    rng: random.Random = field(init=False)
    clock: ManualClock = field(default_factory=ManualClock)
    events: list = field(default_factory=list)
    seq: int = 0
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader id
    committed: list = field(default_factory=list)  # offset -> (epoch, key, value, control)
    appended: int = 0
    client_factory: type[RaftClient] = RaftClient
    max_fetch_entries: int = 64  # small in run_figure8: a follower then catches up in steps

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        r = self.rng
        # Snapshot settings from their own stream, so the other draws of a seed stay as they were.
        sr = random.Random(self.seed * 7919 + 17)
        self.snapshot_every: int | None = sr.choice([None, 3, 10, 40])
        self.snapshot_chunk_bytes = sr.choice([512, 4096, 1 << 20])
        self.snapshots_taken = 0
        # The fsync the core asks for ends after a seeded delay (0: at once); a kill meanwhile loses it.
        self.flush_delay_ms = sr.choice([0, 2, 10, 50])
        self._flush_rng = random.Random(sr.random())
        # Kills drawn at the moments a crash hurts most, each with a quick restart: right after a voter
        # grants a vote (other candidates' requests still in flight: a vote answered before it was
        # durable is forgotten and given again in that epoch), right after a voter becomes leader
        # (its LeaderChange record, flushed or not, on no follower yet) and right after a leader's
        # high watermark moves (a follower may hold older epochs' entries but not the new leader's
        # record: figure 8 of the Raft paper). Own stream, as above.
        self.moment_kill_rate = sr.choice([0.0, 0.0, 0.3, 0.7])
        self._moment_kill_rng = random.Random(sr.random())
        # What the driver tells the core when a connection closes or is refused
        # (RaftClient.peer_unreachable): the survivors of a kill hear it at once, and on some seeds a
        # live peer is reported unreachable too (a connection reset while it is alive, the leader
        # included): safety must not depend on the report being true. Own stream, as above.
        self._suspect_rng = random.Random(self.seed * 104_729 + 3)
        self.false_suspicion_rate = self._suspect_rng.choice([0.0, 0.3, 0.8])
        self.net = SimNetwork(
            random.Random(r.random()),
            max_delay_ms=r.choice([5, 20, 100]),
            drop_rate=r.choice([0.0, 0.05, 0.2]),
            duplicate_rate=r.choice([0.0, 0.05, 0.2]),
        )
        # Timeouts near the network delay make elections contested: the runs that find bugs.
        self.election_timeout_ms = r.choice([50, 150, 500, 1000])
        self.ids = tuple(range(1, self.voters + 1))
        self.all_ids = tuple(range(1, self.voters + self.spares + self.observers + 1))
        # KIP-853: the nodes that may ever be voters, their directory ids, and the changes made.
        self.dynamic = self.spares > 0
        self.pool = tuple(range(1, self.voters + self.spares + 1))
        self.ever_voters = set(self.ids)
        self.directory_ids = {i: uuid_to_str(uuid.UUID(int=(self.seed << 16) + i)) for i in self.pool}
        self.bootstrap = VoterSet.of([VoterNode(i, self.directory_ids[i]) for i in self.ids])
        self.voter_changes = 0
        self.refused_second_changes = 0
        self.disks_lost = 0
        self.rejoined = 0  # voter additions of nodes whose disk was lost (the second half of a replacement)
        self.wiped: set[int] = set()  # nodes formatted again after a lost disk: no bootstrap voter set
        self._member_rng = random.Random(self.seed * 15_485_863 + 11)
        self.nodes = {i: Node(i, MemoryLog(), MemoryQuorumStateStore()) for i in self.all_ids}
        for n in self.nodes.values():
            self._start(n)

    # -- plumbing ------------------------------------------------------------------------------

    def _push(self, when: int, kind: str, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, kind, payload))

    def _start(self, n: Node) -> None:
        t = self.election_timeout_ms
        # A node formatted again after a lost disk asks the other controllers until it learns the
        # voter set (its controller.quorum.bootstrap.servers); everyone else the initial voters.
        wiped = n.node_id in self.wiped
        config = RaftConfig(
            node_id=n.node_id,
            voters=tuple(i for i in self.pool if i != n.node_id) if wiped else self.ids,
            cluster_id=CLUSTER_ID,
            election_timeout_ms=t,
            election_backoff_max_ms=t,
            fetch_timeout_ms=2 * t,
            request_timeout_ms=2 * t,
            fetch_max_wait_ms=min(500, t // 2),
            fetch_snapshot_max_bytes=self.snapshot_chunk_bytes,
            max_fetch_entries=self.max_fetch_entries,
            directory_id=self.directory_ids.get(n.node_id),
            bootstrap_voters=(
                self.bootstrap if self.dynamic and n.node_id in self.ids and not wiped else None
            ),
            dynamic=self.dynamic,
        )
        n.client = self.client_factory(
            config, n.log, n.store, random.Random(self.rng.random()), now_ms=self.clock.now_ms
        )
        n.machine = StateMachine(self, n.node_id)
        n.client.register_listener(n.machine)
        n.alive = True
        n.incarnation += 1
        n.flushing = False
        n.last_hw = 0
        n.checked_hw = 0
        self._poll(n, [])

    def _poll(self, n: Node, inbound: list[Envelope]) -> None:
        assert n.client is not None
        was_leader, hw_before = n.client.state is EpochState.LEADER, n.client.high_watermark
        try:
            result = n.client.poll(self.clock.now_ms, inbound)
        except AssertionError as e:
            # The core's own guard: a follower told to truncate below its high watermark.
            if "below high watermark" in str(e) and not isinstance(e, InvariantViolation):
                raise InvariantViolation(f"node {n.node_id} would lose committed data: {e}") from e
            raise
        for env in result.outbound:
            for t in self.net.send(env.src, env.dst, self.clock.now_ms):
                self._push(t, "deliver", env)
        n.deadline = result.next_deadline_ms
        self._push(max(n.deadline, self.clock.now_ms + 1), "timer", (n.node_id, n.deadline))
        if result.flush_needed and not n.flushing:
            ticket = n.log.begin_flush()
            if ticket is not None:
                n.flushing = True
                delay = self._flush_rng.randint(0, self.flush_delay_ms)
                self._push(self.clock.now_ms + delay, "flushed", (n.node_id, n.incarnation, ticket))
        if self.moment_kill_rate and self._kill_moment(n, result.outbound, was_leader, hw_before):
            kr = self._moment_kill_rng
            if kr.random() < self.moment_kill_rate:
                # Pushed after the flush: with no flush delay it ends first, else either may.
                when = self.clock.now_ms + kr.randint(0, self.flush_delay_ms)
                self._push(when, "kill", (n.node_id, kr.randint(1, self.net.max_delay_ms)))
        self.check(n)
        self._maybe_snapshot(n)

    @staticmethod
    def _kill_moment(n: Node, outbound: list[Envelope], was_leader: bool, hw_before: int) -> bool:
        c = n.client
        assert c is not None
        if c.state is EpochState.LEADER:
            return not was_leader or c.high_watermark > hw_before
        return any(
            isinstance(env.message, VoteResponse) and env.message.vote_granted and not env.message.pre_vote
            for env in outbound
        )

    def _maybe_snapshot(self, n: Node) -> None:
        sm, c = n.machine, n.client
        assert sm is not None and c is not None
        if self.snapshot_every is None or sm.since_snapshot < self.snapshot_every:
            return
        before = n.log.latest_snapshot_id
        installed = before is not None and before.end_offset > sm.next_offset - 1
        sid = c.create_snapshot(sm.next_offset, sm.records)
        sm.since_snapshot = 0
        if sid is not None:
            self.snapshots_taken += 1
        elif not installed and sm.next_offset > n.log.start_offset:
            raise InvariantViolation(f"node {n.node_id} could not snapshot at {sm.next_offset}")

    def committed_data_below(self, end_offset: int) -> list[tuple[bytes | None, bytes | None]]:
        if end_offset > len(self.committed):
            raise InvariantViolation(f"a snapshot ends at {end_offset}, beyond what was committed ({len(self.committed)})")
        return [(k, v) for (_e, k, v, control) in self.committed[:end_offset] if not control]

    # -- invariants ----------------------------------------------------------------------------

    def check(self, n: Node) -> None:
        c = n.client
        assert c is not None
        if c.epoch < n.last_epoch:
            raise InvariantViolation(f"node {n.node_id} epoch went back {n.last_epoch} -> {c.epoch}")
        n.last_epoch = c.epoch
        if n.node_id not in self.ever_voters and c.state not in (EpochState.UNATTACHED, EpochState.FOLLOWER):
            raise InvariantViolation(f"observer {n.node_id} became {c.state.value}")
        if c.state is EpochState.LEADER:
            prev = self.leaders.setdefault(c.epoch, n.node_id)
            if prev != n.node_id:
                raise InvariantViolation(f"two leaders in epoch {c.epoch}: {prev} and {n.node_id}")
            if self.dynamic and self.check_in_flight:
                self._check_one_change_in_flight(n)
        hw = c.high_watermark
        if hw < n.last_hw:
            raise InvariantViolation(f"node {n.node_id} high watermark went back {n.last_hw} -> {hw}")
        n.last_hw = hw
        if hw > len(self.committed) and n.log.start_offset > len(self.committed):
            raise InvariantViolation(f"node {n.node_id} starts its log at {n.log.start_offset}, past all commits")
        if hw > n.log.end_offset:
            raise InvariantViolation(f"node {n.node_id} high watermark {hw} beyond log end {n.log.end_offset}")
        for off in range(max(n.checked_hw, n.log.start_offset), hw):
            e = n.log.entry(off)
            assert e is not None
            rec = (e.epoch, e.key, e.value, e.control)
            if off < len(self.committed):
                if self.committed[off] != rec:
                    raise InvariantViolation(
                        f"node {n.node_id} committed {rec} at {off}, cluster committed {self.committed[off]}"
                    )
            else:
                self.committed.append(rec)
        n.checked_hw = max(n.checked_hw, hw)

    def _check_one_change_in_flight(self, n: Node) -> None:
        """Read from the leader's log itself, not from the core's bookkeeping. Above what the
        cluster committed (a new leader learns its high watermark only after a while)."""
        c = n.client
        assert c is not None
        start = max(c.high_watermark, len(self.committed), n.log.start_offset)
        pending = [
            e.offset
            for e in n.log.entries[start - n.log.start_offset :]
            if e.control and voters_in(e.key, e.value) is not None
        ]
        if len(pending) > 1:
            raise InvariantViolation(
                f"leader {n.node_id} has {len(pending)} voter changes in flight at offsets {pending} "
                f"(high watermark {c.high_watermark})"
            )

    def check_committed_prefix(self) -> None:
        """A committed record stays in every live log that has reached past it (never truncated away)."""
        for n in self.nodes.values():
            for off in range(n.log.start_offset, min(n.checked_hw, n.log.end_offset)):
                e = n.log.entry(off)
                assert e is not None
                if (e.epoch, e.key, e.value, e.control) != self.committed[off]:
                    raise InvariantViolation(f"node {n.node_id} lost committed offset {off}")

    # -- driving -------------------------------------------------------------------------------

    def leader(self) -> Node | None:
        for n in self.nodes.values():
            if n.alive and n.client is not None and n.client.state is EpochState.LEADER:
                return n
        return None

    def step(self) -> None:
        when, _, kind, payload = heapq.heappop(self.events)
        self.clock.advance_to(when)
        if kind == "deliver":
            n = self.nodes[payload.dst]
            if n.alive:
                self._poll(n, [payload])
        elif kind == "timer":
            node_id, deadline = payload
            n = self.nodes[node_id]
            if n.alive and n.deadline == deadline:
                self._poll(n, [])
        elif kind == "append":
            leader = self.leader()
            if leader is not None and leader.client is not None:
                self.appended += 1
                recs = [(b"k%d" % self.appended, b"v%d-%d" % (self.seed, i)) for i in range(self.rng.randint(1, 3))]
                leader.client.append(recs, now_ms=self.clock.now_ms)
                self._poll(leader, [])
            self._push(self.clock.now_ms + self.rng.randint(10, 200), "append", None)
        elif kind == "fault":
            self.fault()
            self._push(self.clock.now_ms + self.rng.randint(100, 1500), "fault", None)
        elif kind == "membership":
            self.membership()
            self._push(self.clock.now_ms + self._member_rng.randint(50, 800), "membership", None)
        elif kind == "flushed":
            node_id, incarnation, ticket = payload
            n = self.nodes[node_id]
            if n.alive and n.incarnation == incarnation:
                ticket.run()
                n.log.end_flush(ticket, ok=True)
                n.flushing = False
                self._poll(n, [])
        elif kind == "kill":
            node_id, restart_after_ms = payload
            n = self.nodes[node_id]
            if n.alive and sum(x.alive for x in self.nodes.values()) > 1:
                self._kill(n, restart_after_ms)
        elif kind == "restart":
            n = self.nodes[payload]
            if not n.alive:
                self._start(n)

    def fault(self) -> None:
        r = self.rng.random()
        ids = list(self.all_ids)
        if r < 0.35:
            self.rng.shuffle(ids)
            cuts = sorted(self.rng.sample(range(1, len(ids)), self.rng.randint(1, min(2, len(ids) - 1))))
            bounds = [0, *cuts, len(ids)]
            self.net.partition([ids[a:b] for a, b in itertools.pairwise(bounds)])
        elif r < 0.55:
            self.net.heal()
            self._maybe_false_suspicion()
        elif r < 0.9:
            alive = [n for n in self.nodes.values() if n.alive]
            if len(alive) > 1:
                victim = self.rng.choice(alive)
                if self.rng.random() < 0.7:
                    leader = self.leader()
                    victim = leader if leader is not None else victim
                self._kill(victim, self.rng.randint(50, 5000))
        else:  # a quiet spell
            self._maybe_false_suspicion()

    def membership(self) -> None:
        """Ask the leader for one voter change, and on some draws for a second one at once."""
        leader = self.leader()
        if leader is None or leader.client is None:
            return
        mr = self._member_rng
        if self.wipes and mr.random() < 0.25:
            self._maybe_lose_a_disk(leader)
            return
        for attempt in range(2 if mr.random() < 0.5 else 1):
            c = leader.client
            voter_set = c.voter_set()
            current = voter_set.ids
            addable = [i for i in self.pool if i not in current and self.nodes[i].alive]
            # A voter whose disk was lost is removed first (before any other change).
            lost = [i for i in current if voter_set.get(i).directory_id != self.directory_ids[i]]  # type: ignore[union-attr]
            if addable and not lost and (len(current) == 1 or mr.random() < 0.5):
                node_id = mr.choice(addable)
                error, _offset = c.add_voter(VoterNode(node_id, self.directory_ids[node_id]))
                if error is ErrorCode.none:
                    self.ever_voters.add(node_id)
                    self.rejoined += node_id in self.wiped
                    self._check_caught_up(leader, self.nodes[node_id])
            else:
                node_id = mr.choice(lost or list(current))
                error, _offset = c.remove_voter(node_id, voter_set.get(node_id).directory_id)  # type: ignore[union-attr]
            if error is ErrorCode.none:
                self.voter_changes += 1
            elif attempt == 1:
                self.refused_second_changes += 1
        self._poll(leader, [])

    def _check_caught_up(self, leader: Node, added: Node) -> None:
        """KIP-853: a new voter catches up as an observer first, so adding it costs the quorum no
        availability: its log holds the leader's epoch (the LeaderChange record it fetched)."""
        assert leader.client is not None
        if not added.alive or added.log.last_epoch != leader.client.epoch:
            raise InvariantViolation(
                f"leader {leader.node_id} added voter {added.node_id} whose log ends in epoch "
                f"{added.log.last_epoch}, not the leader's {leader.client.epoch}: it had not caught up"
            )

    def _maybe_lose_a_disk(self, leader: Node) -> None:
        """A voter's metadata disk is lost: killed, formatted again (empty log and quorum-state, a
        new directory id) and restarted, it comes back as an observer that no longer is the voter."""
        c = leader.client
        assert c is not None
        voter_set = c.voter_set()
        # Every node holds this set in force (a stale leader's view, or a change one log holds and
        # another not, could leave a lost disk in a set of two, which nothing can recover).
        views = {n.client.voter_set() for n in self.nodes.values() if n.client is not None}
        if len(voter_set.ids) < 3 or c.voter_change_pending() or views != {voter_set}:
            return
        if any(n.directory_id != self.directory_ids[n.node_id] for n in voter_set.voters):
            return  # another lost disk is not replaced yet
        n = self.nodes[self._member_rng.choice(voter_set.ids)]
        if n.alive:
            self._kill(n, self._member_rng.randint(1, 1000))
        self.disks_lost += 1
        self.wiped.add(n.node_id)
        self.directory_ids[n.node_id] = uuid_to_str(uuid.UUID(int=(self.seed << 32) + (self.disks_lost << 16) + n.node_id))
        n.log, n.store = MemoryLog(), MemoryQuorumStateStore()
        n.last_epoch = 0  # a new disk: its epoch starts over

    def _maybe_false_suspicion(self) -> None:
        sr = self._suspect_rng
        alive = [n for n in self.nodes.values() if n.alive and n.client is not None]
        if len(alive) > 1 and sr.random() < self.false_suspicion_rate:
            a, b = sr.sample(alive, 2)
            leader = self.leader()
            if leader is not None and leader is not a and sr.random() < 0.5:
                b = leader  # the worst lie: the live leader reported gone
            a.client.peer_unreachable(b.node_id, self.clock.now_ms)  # type: ignore[union-attr]
            self._poll(a, [])

    def _kill(self, n: Node, restart_after_ms: int) -> None:
        """A hard kill: the log loses what was not flushed; quorum-state keeps what was written. The
        survivors' connections to it close: each hears `peer_unreachable`, as from the driver."""
        n.alive = False
        n.log.crash()
        self._push(self.clock.now_ms + restart_after_ms, "restart", n.node_id)
        for o in self.nodes.values():
            if o.alive and o.client is not None:
                o.client.peer_unreachable(n.node_id, self.clock.now_ms)
                self._poll(o, [])

    def run_until(self, until_ms: int) -> None:
        while self.events and self.events[0][0] <= until_ms:
            self.step()

    def run_lagging_voter(self, lagging: int, *, apart_ms: int = 6000, heal_ms: int = 20000) -> None:
        """No random faults: `lagging` is cut off while the others commit and snapshot, then rejoins.

        It must catch up through the leader's snapshot (its log then starts above 0) and commit
        a new record with the rest.
        """
        self.net.drop_rate = 0.0
        self.moment_kill_rate = 0.0
        # Liveness is owed only when the round trip is well inside the election timeout.
        self.net.max_delay_ms = min(self.net.max_delay_ms, max(1, self.election_timeout_ms // 10))
        self.net.partition([[i for i in self.ids if i != lagging], [lagging]])
        self._push(1, "append", None)
        self.run_until(apart_ms)
        self.net.heal()
        target = None
        lag = self.nodes[lagging]

        def caught_up() -> bool:
            nonlocal target
            leader = self.leader()
            if target is None and leader is not None and leader.client is not None:
                target = leader.client.append([(b"final", b"%d" % self.seed)], now_ms=self.clock.now_ms) + 1
            return target is not None and lag.client is not None and lag.client.high_watermark >= target

        if self._step_until(caught_up, heal_ms):
            self.check_committed_prefix()
            return
        assert lag.client is not None
        raise InvariantViolation(
            f"voter {lagging} did not catch up (seed {self.seed}): hw {lag.client.high_watermark}, "
            f"log [{lag.log.start_offset}, {lag.log.end_offset}), target {target}"
        )

    def _step_until(self, done: Callable[[], bool], within_ms: int) -> bool:
        """Step until `done()` (asked after every event) or `within_ms` of simulated time have
        passed or nothing is left to happen; whether it came true."""
        deadline = self.clock.now_ms + within_ms
        while self.clock.now_ms < deadline and self.events:
            self.step()
            if done():
                return True
        return False

    def _leader_among(self, ids: list[int], above_epoch: int) -> Node | None:
        for i in ids:
            n = self.nodes[i]
            if n.alive and n.client is not None and n.client.state is EpochState.LEADER:
                if n.client.epoch > above_epoch:
                    return n
        return None

    def run_figure8(self, *, appends: int = 8, phase_ms: int = 6000, heal_ms: int = 20000) -> None:
        """No random faults: figure 8 of the Raft paper, scripted with partitions (3 voters).

        A leader `a` is cut off and appends alone; `b` is elected by the other two and cut off the
        moment it leads, its LeaderChange record at the offset where `a`'s lone entries sit; `a`
        and `c` are joined, `a` is elected again and `c` fetches its older-epoch entries a few at a
        time (set `max_fetch_entries` small). The moment `a`'s high watermark passes `b`'s record,
        `a` is cut off and `b` joined with `c`. A core that committed `a`'s older-epoch entries by
        counting replicas lets `b` win `c`'s vote and overwrite them; a correct one has its own
        epoch's record on `c` by then, and `c` refuses `b`. Then everything heals and, as in
        `run()`, a new record must commit everywhere. Phases that do not happen in time are skipped.
        """
        assert self.voters == 3 and self.observers == 0
        self.net.drop_rate = 0.0
        self.moment_kill_rate = 0.0
        self.net.max_delay_ms = min(self.net.max_delay_ms, max(1, self.election_timeout_ms // 10))
        self._push(1, "append", None)
        self._step_until(lambda: self._leader_among(list(self.ids), 0) is not None, phase_ms)
        first = self._leader_among(list(self.ids), 0)
        self.events = [e for e in self.events if e[2] != "append"]  # appends from here are scripted
        heapq.heapify(self.events)
        if first is not None and first.client is not None:
            a, rest = first, [i for i in self.ids if i != first.node_id]
            self.net.partition([[a.node_id], rest])
            for _ in range(appends):
                if a.client.state is EpochState.LEADER:
                    self.appended += 1
                    a.client.append([(b"k%d" % self.appended, b"alone")], now_ms=self.clock.now_ms)
                    self._poll(a, [])
                self.run_until(self.clock.now_ms + 5)
            found = self._step_until(lambda: self._leader_among(rest, a.client.epoch) is not None, phase_ms)
            b = self._leader_among(rest, a.client.epoch) if found else None
            if b is not None and b.client is not None:
                c = next(i for i in rest if i != b.node_id)
                record_at, b_epoch = b.log.end_offset - 1, b.client.epoch
                self.net.partition([[a.node_id], [b.node_id], [c]])
                self.net.partition([[a.node_id, c], [b.node_id]])
                if self._step_until(
                    lambda: (x := self._leader_among([a.node_id], b_epoch)) is not None
                    and x.client is not None
                    and x.client.high_watermark > record_at,
                    phase_ms,
                ):
                    self.net.partition([[a.node_id], [b.node_id, c]])
                    self._step_until(lambda: False, phase_ms)
        self.net.heal()
        # No more client appends: with fetches of a record or two, followers could fall behind for good.
        self._await_progress(heal_ms)

    def run(self, *, chaos_ms: int = 8000, heal_ms: int = 20000) -> None:
        self._push(1, "append", None)
        self._push(self.rng.randint(100, 1500), "fault", None)
        if self.dynamic:
            self._push(self._member_rng.randint(100, 800), "membership", None)
        self.run_until(chaos_ms)
        # Heal everything; no new faults (nor voter changes) from here on.
        self.events = [e for e in self.events if e[2] not in ("fault", "kill", "membership")]
        heapq.heapify(self.events)
        self.net.heal()
        self.net.drop_rate = 0.0
        self.moment_kill_rate = 0.0
        # Liveness is owed only when the round trip is well inside the election timeout.
        self.net.max_delay_ms = min(self.net.max_delay_ms, max(1, self.election_timeout_ms // 10))
        for n in self.nodes.values():
            if not n.alive:
                self._start(n)
        self.check_committed_prefix()
        self._await_progress(heal_ms)

    def _await_progress(self, heal_ms: int) -> None:
        target = None

        def committed_everywhere() -> bool:
            nonlocal target
            leader = self.leader()
            if target is None and leader is not None and leader.client is not None:
                if leader.client.high_watermark >= leader.log.end_offset:
                    target = leader.client.append([(b"final", b"%d" % self.seed)], now_ms=self.clock.now_ms) + 1
            return target is not None and all(
                n.client is not None and n.client.high_watermark >= target for n in self.nodes.values()
            )

        if self._step_until(committed_everywhere, heal_ms):
            self.check_committed_prefix()
            return
        states = {i: (n.client.state.value, n.client.epoch, n.client.high_watermark, n.log.end_offset)
                  for i, n in self.nodes.items() if n.client}
        raise InvariantViolation(f"no progress after healing (seed {self.seed}): {states}")
