"""The raft core for the metadata log: a deterministic state machine driven by poll(now).

Theory of operation (Kafka's KafkaRaftClient; KIP-595, KIP-996). Every call
is `poll(now_ms, inbound) -> PollResult(outbound, next_deadline_ms,
flush_needed)`: the caller delivers the messages that arrived, the core
handles them, fires its timers and returns what to send, when to poll next
and whether the log needs a flush. It
never reads the clock, never draws its own randomness (a `random.Random` is
injected) and never touches a socket, so a seeded simulation replays exactly.

- Elections. An Unattached voter, or a Follower that heard nothing from its
  leader for `controller.quorum.fetch.timeout.ms`, becomes Prospective and
  asks every voter for a pre-vote (KIP-996); a majority makes it Candidate in
  epoch+1, which votes for itself (written to quorum-state first) and asks for
  votes. A voter grants one vote per epoch, to a candidate whose log (last
  epoch, end offset) is at least its own. Election timeouts are randomized:
  `controller.quorum.election.timeout.ms` plus up to as much again.
- Leadership. The new leader writes a control record (Kafka's LeaderChange)
  at the epoch start offset and sends BeginQuorumEpoch until each voter has
  fetched. Voters replicate by fetching (KIP-595): the leader checks the
  fetch's last fetched epoch against its epoch cache and answers with
  DivergingEpoch when they differ; the follower truncates and fetches again.
  An idle fetch is parked up to its max wait.
- High watermark. The leader's is the largest offset that a majority of
  voters (its own *flushed* end offset, the followers' validated fetch
  offsets) have reached, and it moves only once past the epoch start offset
  (a leader commits nothing of older epochs until its own record commits).
  A follower's appended records are flushed before it fetches again, so a
  fetch offset is a durable acknowledgement. High watermarks never move back.
- Flushing. The core never fsyncs: a poll whose log holds unflushed entries
  says so (`PollResult.flush_needed`); the caller flushes (the driver on a
  worker thread, the simulation after a seeded delay) and polls again. The
  leader counts only its flushed end offset toward the high watermark and a
  follower sends no fetch until its log is flushed, so a flush that is slow,
  or lost in a crash, delays commits but never fakes one.
- A leader that has not heard from a majority for 1.5 x the fetch timeout
  resigns (check quorum) and sends EndQuorumEpoch.

- Snapshots (KIP-630). The state machine (the controller) hands the core a
  snapshot of its committed state at a batch boundary `end_offset` <= high
  watermark: `prepare_snapshot` names it (end offset, epoch of the record
  before it), the caller encodes and writes it (raft/snapshot.py; on a worker
  thread in the driver), and `snapshot_frozen` makes it the latest, after
  which the log below it may go. A follower whose fetch offset is below the
  leader's log start offset (or whose log the leader can no longer check
  against its epoch cache) is answered with the leader's latest SnapshotId;
  it fetches that snapshot in chunks (FetchSnapshot), installs it (its log
  emptied and restarted at the snapshot's end offset, its high watermark at
  least that end: a snapshot holds only committed records) and fetches on.
  A listener behind the log start offset, or starting from nothing while a
  snapshot exists, gets `handle_load_snapshot` first, then batches from the
  snapshot's end offset.

- Voter changes (KIP-853; raft/voters.py holds the format). With a static
  quorum (kraft.version 0) the voters are `RaftConfig.voters`. With a dynamic
  one (kraft.version 1: `RaftConfig.bootstrap_voters` from the bootstrap
  checkpoint that `kavka storage format --standalone/--initial-controllers`
  writes, or a VotersRecord in the log or a snapshot) the voter set in force is
  the latest VotersRecord in the log, committed or not; a truncation that drops
  one falls back to the one before. A leader whose log holds none yet writes the
  bootstrap set with its epoch's LeaderChange record, so observers and new
  voters learn it by fetching. `add_voter`/`remove_voter` (AddRaftVoter,
  RemoveRaftVoter) change it by one voter at a time (single-server changes:
  any majority of the old set meets any majority of the new), only once the
  leader has committed a record of its own epoch and only while no other
  change is uncommitted; a new voter must be an observer that fetched up to the
  leader's log end within the fetch timeout. Votes and the high watermark count
  the set in force; a leader that removed itself leads, not counting itself,
  until the change commits and then resigns. A replica is a voter only with the
  directory id it was added with: a voter whose disk was wiped comes back as an
  observer.

`describe_quorum()` answers DescribeQuorum on the leader. Called only from the
thread that drives it.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from kavka.common import ErrorCode
from kavka.raft import control_records
from kavka.raft import messages as m
from kavka.raft import snapshot as snapshots
from kavka.raft.api import LeaderAndEpoch, NotLeaderError, RaftListener, SnapshotId
from kavka.raft.replicated_log import LogEntry, ReplicatedLog
from kavka.raft.state import ElectionState, EpochState, QuorumStateStore, check_transition
from kavka.raft.voters import (
    VoterEndpoint,
    VoterNode,
    VoterSet,
    encode_kraft_version,
    encode_voters,
    voters_in,
)

_S = EpochState
NEVER = 2**62
# kavka: a follower whose connection to its leader closed stands this long (plus up to as much
# again, randomized, so the followers of one dead leader do not split their votes) before its
# pre-vote round, instead of waiting out controller.quorum.fetch.timeout.ms (`peer_unreachable`).
LEADER_LOSS_GRACE_MS = 250


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's controller.quorum.* settings (milliseconds), parsed once by the caller."""

    node_id: int
    voters: tuple[int, ...]  # controller.quorum.voters (static); with bootstrap_voters: whom to ask first
    cluster_id: str
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # KafkaRaftClient's FETCH_MAX_WAIT_MS
    max_fetch_entries: int = 64
    fetch_snapshot_max_bytes: int = 1024 * 1024  # FetchSnapshot MaxBytes per chunk
    # KIP-853: this replica's metadata log directory id, and the voter set of the bootstrap
    # checkpoint (kraft.version 1; None with a static quorum or a node formatted to join one).
    directory_id: str | None = None
    bootstrap_voters: VoterSet | None = None
    dynamic: bool = False  # kraft.version 1 even without a bootstrap set (a node that will join)

    def __post_init__(self) -> None:
        if not self.voters:
            raise ValueError("controller.quorum.voters is empty")
        if len(set(self.voters)) != len(self.voters):
            raise ValueError(f"controller.quorum.voters repeats a voter: {self.voters}")


@dataclass(frozen=True, slots=True)
class PollResult:
    outbound: list[m.Envelope]
    next_deadline_ms: int
    # The log has unflushed entries: flush it (begin_flush / run / end_flush, off this thread
    # if the caller likes) and poll again. The core never fsyncs itself.
    flush_needed: bool = False


@dataclass(slots=True)
class _ParkedFetch:
    src: int
    correlation_id: int
    request: m.FetchRequest
    deadline_ms: int


@dataclass(slots=True)
class _Volatile:
    """Per-state bookkeeping, reset on every transition."""

    deadline_ms: int = NEVER  # election / fetch timeout / resign deadline
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    # Leader only.
    epoch_start_offset: int = 0
    fetch_offsets: dict[int, int] = field(default_factory=dict)
    last_fetch_ms: dict[int, int] = field(default_factory=dict)
    fetched_at: dict[int, int] = field(default_factory=dict)  # DescribeQuorum timestamps
    fetch_requests: dict[int, int] = field(default_factory=dict)  # Fetch requests received, per node
    directory_ids: dict[int, str] = field(default_factory=dict)  # ReplicaDirectoryId of each fetcher, as it last named it
    caught_up_at: dict[int, int] = field(default_factory=dict)
    caught_up_directory: dict[int, str | None] = field(default_factory=dict)  # the disk that caught up
    begin_acked: set[int] = field(default_factory=set)
    next_begin_ms: int = 0
    parked: dict[int, _ParkedFetch] = field(default_factory=dict)
    # Follower only.
    fetch_correlation: int | None = None
    snapshot_fetch: SnapshotId | None = None  # being fetched with FetchSnapshot
    snapshot_buf: bytearray = field(default_factory=bytearray)
    fetch_sent_ms: int = 0
    last_fetch_ok_ms: int = -NEVER
    # Prospective only: the leader this voter followed until its fetch timeout (KIP-996).
    lost_leader: int | None = None
    end_quorum_sent: bool = False


class RaftClient:
    def __init__(
        self,
        config: RaftConfig,
        log: ReplicatedLog,
        store: QuorumStateStore,
        rng: random.Random,
        *,
        now_ms: int,
        wall_clock_offset_ms: int = 0,
    ) -> None:
        """`wall_clock_offset_ms` is the wall clock minus the clock `poll`'s `now_ms` comes from,
        measured once by the caller: the LeaderChange record this node writes as a new leader
        carries `now + offset` as its timestamp (Kafka stamps metadata records with its wall
        clock); 0 in simulations. Records given to `append` carry the `now_ms` passed with them
        (the controller's wall clock)."""
        self.config = config
        self._wall_clock_offset_ms = wall_clock_offset_ms
        self.node_id = config.node_id
        self.log = log
        # KIP-853: (offset, voter set) of each VotersRecord in the log, and of the latest
        # snapshot's (at its end offset - 1); the last one is in force (see _voters_changed).
        self._voter_history: list[tuple[int, VoterSet]] = []
        self.voters: tuple[int, ...] = config.voters
        self.is_voter = False
        self.state = _S.UNATTACHED
        self._v = _Volatile()
        self._now = now_ms
        self._high_watermark = 0
        self._rebuild_voter_history()
        self.store = store
        self.rng = rng
        self._listeners: list[_ListenerCursor] = []
        self._outbound: list[m.Envelope] = []
        self._next_correlation = 0
        # The snapshot each follower or observer is fetching in chunks, by node (one entry per
        # fetcher, so fetchers of different snapshots never evict each other's).
        self._snapshot_cache: dict[int, tuple[SnapshotId, bytes]] = {}
        # A restarted voter starts Unattached in its last epoch and keeps its vote: it may
        # have been leader or follower, but it must learn that again (Kafka resigns/forgets).
        saved = store.read() or ElectionState(epoch=0)
        voted = saved.voted_id if saved.voted_id is not None else None
        self.state = _S.UNATTACHED
        self.epoch = saved.epoch
        self.leader_id: int | None = None
        self.voted_id: int | None = voted
        # The only voter need not wait for anyone: it stands at once (as Kafka's QuorumState does).
        sole = self.is_voter and self.voters == (config.node_id,)
        # An observer looks for the leader at once.
        soon = sole or not self.is_voter
        self._v = _Volatile(deadline_ms=now_ms if soon else now_ms + self._election_timeout())
        self.store.write(ElectionState(epoch=self.epoch, voted_id=self.voted_id))

    # ---- the controller's interface (api.MetadataQuorum) --------------------------------

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.leader_id, self.epoch)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def leader_ready(self) -> bool:
        """Leader whose epoch's first record (LeaderChange) is committed and delivered to listeners."""
        return self.state is _S.LEADER and self._high_watermark > self._v.epoch_start_offset

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        """The transport lost its connection to `peer`, or could not open one (kavka, not Kafka:
        the kernel closes a killed process's sockets at once). A follower whose leader that is
        gives it `LEADER_LOSS_GRACE_MS` (randomized) instead of the rest of its fetch timeout,
        then goes to its pre-vote round as after a fetch timeout, and no longer vouches for that
        leader (it grants other followers' pre-votes: they lost it too); an observer forgets it
        as soon, and an observer looking for the leader asks another voter. When the leader is
        in fact alive (a connection merely reset) this costs at most a needless election: the
        next Fetch reaches the leader and the follower stays with it."""
        self._now = max(self._now, now_ms)
        grace = LEADER_LOSS_GRACE_MS + self.rng.randint(0, LEADER_LOSS_GRACE_MS)
        if self.state is _S.FOLLOWER and peer == self.leader_id:
            self._v.deadline_ms = min(self._v.deadline_ms, self._now + grace)
            self._v.last_fetch_ok_ms = min(self._v.last_fetch_ok_ms, self._now - self.config.election_timeout_ms - 1)
        elif self.state is _S.UNATTACHED and not self.is_voter:
            self._v.deadline_ms = min(self._v.deadline_ms, self._now + LEADER_LOSS_GRACE_MS)

    def fetched_this_epoch(self) -> frozenset[int]:
        """As leader: the nodes (voters and observers) whose Fetch it answered in this epoch, i.e.
        that are alive and found it (the controller's activation check); elsewhere empty."""
        return frozenset(self._v.fetched_at) if self.state is _S.LEADER else frozenset()

    def quorum_contact_ms(self) -> int | None:
        """As leader: when a majority of the voters (this one counting) had last fetched from it,
        on the clock of `poll` -- no other leader can have been elected before then (kavka: the
        broker on this node dates its heartbeat answers by it, broker.session_watch); elsewhere
        None. The time check-quorum resigns by, without its window."""
        if self.state is not _S.LEADER:
            return None
        others = sorted(
            (self._v.last_fetch_ms.get(v, self._now) for v in self.voters if v != self.node_id), reverse=True
        )
        need = self.majority - 1 if self.is_voter else self.majority
        return others[need - 1] if 1 <= need <= len(others) else self._now

    def fetch_requests_from(self, node: int) -> int:
        """As leader: how many Fetch requests `node` sent in this epoch (0 elsewhere). Counted on
        arrival, not on answer: a parked long-poll answered after its sender died is not a sign
        of life, a new request is."""
        return self._v.fetch_requests.get(node, 0) if self.state is _S.LEADER else 0

    def metadata_ready(self) -> bool:
        """Caught up enough to serve: a ready leader, or a follower that has learnt a high watermark."""
        return self.leader_ready() or (self.state is _S.FOLLOWER and self._high_watermark > 0)

    @property
    def state_name(self) -> str:
        return self.state.value

    def register_listener(self, listener: RaftListener) -> None:
        self._listeners.append(_ListenerCursor(listener))

    def append(self, records: Sequence[tuple[bytes | None, bytes | None]], *, now_ms: int) -> int:
        if self.state is not _S.LEADER:
            raise NotLeaderError(f"node {self.node_id} is {self.state.value} in epoch {self.epoch}")
        if not records:
            raise ValueError("empty batch")
        base = self.log.end_offset
        self.log.append(
            [LogEntry(base + i, self.epoch, base, k, v, timestamp=now_ms) for i, (k, v) in enumerate(records)]
        )
        return base + len(records) - 1

    def describe_quorum(self) -> m.QuorumDescription:
        """DescribeQuorum: the leader's view of every voter (NOT_LEADER_OR_FOLLOWER elsewhere)."""
        if self.state is not _S.LEADER:
            return m.QuorumDescription(
                ErrorCode.not_leader_or_follower, self.leader_id, self.epoch, self._high_watermark, ()
            )
        v = self._v
        voter_set = self.voter_set()
        voters = tuple(
            m.ReplicaDescription(
                replica_id=voter,
                log_end_offset=(
                    self.log.end_offset if voter == self.node_id else v.fetch_offsets.get(voter, -1)
                ),
                last_fetch_timestamp=self._now if voter == self.node_id else v.fetched_at.get(voter, -1),
                last_caught_up_timestamp=(
                    self._now if voter == self.node_id else v.caught_up_at.get(voter, -1)
                ),
                directory_id=voter_set.voters[i].directory_id,
            )
            for i, voter in enumerate(self.voters)
        )
        observers = tuple(
            m.ReplicaDescription(
                replica_id=node,
                log_end_offset=offset,
                last_fetch_timestamp=v.fetched_at.get(node, -1),
                last_caught_up_timestamp=v.caught_up_at.get(node, -1),
                directory_id=v.directory_ids.get(node),
            )
            for node, offset in sorted(v.fetch_offsets.items())
            if node not in self.voters
        )
        endpoints = tuple(
            (n.node_id, tuple((e.name, e.host, e.port) for e in n.endpoints)) for n in voter_set.voters if n.endpoints
        )
        return m.QuorumDescription(
            ErrorCode.none, self.node_id, self.epoch, self._high_watermark, voters, observers, endpoints
        )

    # ---- KIP-853 voter changes ---------------------------------------------------------------

    @property
    def kraft_version(self) -> int:
        """The kraft.version in force: 1 when the voter set lives in the log (KIP-853)."""
        return 1 if self.config.dynamic or self.config.bootstrap_voters is not None or self._voter_history else 0

    def voter_set(self) -> VoterSet:
        """The voter set in force (the static one as a VoterSet with no directory ids)."""
        if self._voter_history:
            return self._voter_history[-1][1]
        if self.config.bootstrap_voters is not None:
            return self.config.bootstrap_voters
        if self.config.dynamic:
            return VoterSet(())  # a node formatted to join: it learns the set from the leader's log
        return VoterSet.of([VoterNode(v, None) for v in self.config.voters])

    def voter_set_at(self, end_offset: int) -> VoterSet | None:
        """The voter set of the log below `end_offset` (what a snapshot ending there holds);
        None with a static quorum."""
        found = [vs for off, vs in self._voter_history if off < end_offset]
        if found:
            return found[-1]
        return self.config.bootstrap_voters

    def voter_change_pending(self) -> bool:
        """A VotersRecord is in the log but not yet committed."""
        return bool(self._voter_history) and self._voter_history[-1][0] >= self._high_watermark

    def add_voter(self, voter: VoterNode) -> tuple[ErrorCode, int]:
        """AddRaftVoter on the leader: (error, offset of the new VotersRecord or -1). The change is
        done once the high watermark passes the offset (the caller answers then).

        The voter changes take no clock: they are judged at the time of the last poll. The caller
        (the controller) reads another clock, the wall clock it stamps records with; taking its
        time moved this core's clock some 56 years ahead of the driver's, after which no deadline
        of the node ever came (it resigned at once, then stayed Unattached for good)."""
        error = self._voter_change_error()
        if error is None:
            current = self.voter_set()
            if current.get(voter.node_id) is not None:
                error = ErrorCode.duplicate_voter
            elif not self._caught_up(voter.node_id, voter.directory_id):
                error = ErrorCode.request_timed_out  # Kafka: the new voter has not caught up
        if error is not None:
            return error, -1
        return ErrorCode.none, self._append_voters(self.voter_set().with_voter(voter))

    def remove_voter(self, node_id: int, directory_id: str | None) -> tuple[ErrorCode, int]:
        """RemoveRaftVoter on the leader: (error, offset of the new VotersRecord or -1)."""
        error = self._voter_change_error()
        if error is not None:
            return error, -1
        current = self.voter_set()
        node = current.get(node_id)
        if node is None or (node.directory_id is not None and node.directory_id != directory_id):
            return ErrorCode.voter_not_found, -1
        if current.ids == (node_id,):
            return ErrorCode.invalid_request, -1  # the last voter cannot go
        return ErrorCode.none, self._append_voters(current.without(node_id))

    def update_voter(self, voter: VoterNode) -> tuple[ErrorCode, int]:
        """UpdateRaftVoter on the leader: a voter's new endpoints (same id and directory id)."""
        error = self._voter_change_error()
        if error is not None:
            return error, -1
        current = self.voter_set()
        node = current.get(voter.node_id)
        if node is None or node.directory_id != voter.directory_id:
            return ErrorCode.voter_not_found, -1
        if node == voter:
            return ErrorCode.none, -1  # nothing to change
        return ErrorCode.none, self._append_voters(current.without(voter.node_id).with_voter(voter))

    def upgrade_kraft_version(
        self, level: int, endpoints: dict[int, tuple[VoterEndpoint, ...]], *, validate_only: bool = False
    ) -> tuple[ErrorCode, str | None, int]:
        """UpdateFeatures kraft.version on the leader (Kafka 4.1, KAFKA-16538): a static quorum
        becomes dynamic. One control batch -- KRaftVersionRecord 1 and a VotersRecord of the static
        voters, each with the directory id its fetches in this epoch named and its `endpoints`
        (the caller's: controller.quorum.voters on the controller listener) -- after which the voter
        set lives in the log and AddRaftVoter/RemoveRaftVoter work. (error, message, offset of the
        batch or -1); done once the high watermark passes the offset."""
        if self.state is not _S.LEADER:
            return ErrorCode.not_leader_or_follower, None, -1
        current = self.kraft_version
        if level == current:
            return ErrorCode.none, None, -1
        if level < current:
            return (ErrorCode.invalid_update_version, f"Invalid upgrade of kraft.version from version {current} to "
                    f"{level} because the new version is a downgrade", -1)
        if not self.leader_ready():
            return ErrorCode.request_timed_out, None, -1
        directories = {**self._v.directory_ids}
        if self.config.directory_id is not None:
            directories[self.node_id] = self.config.directory_id
        missing = [vid for vid in self.voters if vid not in directories or not endpoints.get(vid)]
        if missing:
            return (ErrorCode.invalid_update_version, f"Invalid upgrade of kraft.version to {level} because not all "
                    f"of the voters support it (no directory id or endpoint known yet for voters {missing}: "
                    "each must fetch from the leader in this epoch)", -1)
        if validate_only:
            return ErrorCode.none, None, -1
        voters = VoterSet.of([VoterNode(vid, directories[vid], endpoints[vid]) for vid in self.voters])
        base = self.log.end_offset
        records = [encode_kraft_version(level), encode_voters(voters)]
        self._append_entries(
            [LogEntry(base + i, self.epoch, base, k, v, control=True) for i, (k, v) in enumerate(records)]
        )
        return ErrorCode.none, None, base + 1

    def _voter_change_error(self) -> ErrorCode | None:
        """Kafka's AddVoterHandler/RemoveVoterHandler checks common to both, in its order."""
        if self.state is not _S.LEADER:
            return ErrorCode.not_leader_or_follower
        if self.kraft_version < 1:
            return ErrorCode.unsupported_version
        # Until a record of this epoch commits, an older epoch's uncommitted change may still
        # be in force on some voters (the known single-server-change bug the rule closes).
        if not self.leader_ready():
            return ErrorCode.request_timed_out
        if self.voter_change_pending():
            return ErrorCode.request_timed_out  # at most one change in flight
        return None

    def _caught_up(self, node_id: int, directory_id: str | None) -> bool:
        """An observer that fetched up to our log end within the fetch timeout, from the disk it is
        added with (Kafka's ReplicaKey): a replica whose disk was lost just after it caught up
        must catch up again."""
        v = self._v
        at = v.caught_up_at.get(node_id)
        return (
            at is not None
            and at >= self._now - self.config.fetch_timeout_ms
            and v.caught_up_directory.get(node_id) == directory_id
        )

    def _append_voters(self, voters: VoterSet) -> int:
        base = self.log.end_offset
        key, value = encode_voters(voters)
        self._append_entries([LogEntry(base, self.epoch, base, key, value, control=True)])
        return base

    def _append_entries(self, entries: Sequence[LogEntry]) -> None:
        """Append to the log and track the VotersRecords among them (any control batch)."""
        self.log.append(entries)
        changed = False
        for e in entries:
            if e.control:
                vs = voters_in(e.key, e.value)
                if vs is not None:
                    self._voter_history.append((e.offset, vs))
                    changed = True
        if changed:
            self._voters_changed()

    def _truncate_log(self, offset: int) -> None:
        self.log.truncate_to(offset)
        if self._voter_history and self._voter_history[-1][0] >= offset:
            self._voter_history = [(o, vs) for o, vs in self._voter_history if o < offset]
            self._voters_changed()

    def _rebuild_voter_history(self) -> None:
        """From the latest snapshot and the log (at start, after installing a snapshot)."""
        history: list[tuple[int, VoterSet]] = []
        snap = self.log.latest_snapshot_id
        if snap is not None:
            data = self.log.read_snapshot(snap)
            vs = snapshots.decode_voters(data) if data is not None else None
            if vs is not None:
                history.append((snap.end_offset - 1, vs))
        offset = self.log.start_offset
        while offset < self.log.end_offset:
            chunk = self.log.read(offset, 4096)
            if not chunk:
                break
            for e in chunk:
                if e.control:
                    vs = voters_in(e.key, e.value)
                    if vs is not None:
                        history.append((e.offset, vs))
            offset = chunk[-1].offset + 1
        self._voter_history = history
        self._voters_changed()

    def _voters_changed(self) -> None:
        vs = self.voter_set()
        self.voters = vs.ids
        # A node outside the voter set is an observer (a broker-only node, a controller not yet
        # added or removed, one whose disk was wiped): it follows the leader's log by fetching,
        # never stands, and never counts towards a commit.
        if self.kraft_version >= 1:
            self.is_voter = vs.contains(self.node_id, self.config.directory_id)
        else:
            self.is_voter = self.node_id in self.voters
        if self.state is _S.LEADER:
            for voter in self.voters:
                self._v.last_fetch_ms.setdefault(voter, self._now)

    def _can_stand(self) -> bool:
        """A voter may stand for election; so may a voter that the latest VotersRecord removed
        while that change is not known to be committed (KIP-853, the Raft thesis 4.2.2): if the
        leader that removed itself dies before the change commits, the voters still holding the
        older set may need its vote, and it refuses anyone whose log is shorter than its own, so
        it must be able to lead (counting only the new set's votes) to commit its removal."""
        if self.is_voter:
            return True
        if not self.voter_change_pending():
            return False
        previous = self._voter_history[-2][1] if len(self._voter_history) > 1 else self.config.bootstrap_voters
        return previous is not None and previous.contains(self.node_id, self.config.directory_id)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def prepare_snapshot(self, end_offset: int) -> SnapshotId | None:
        """Name a snapshot of the committed records below `end_offset` (a batch boundary the
        listener has applied); None if it would not be newer than the latest one."""
        if end_offset > self._high_watermark:
            raise ValueError(f"snapshot end offset {end_offset} is above the high watermark {self._high_watermark}")
        latest = self.log.latest_snapshot_id
        if end_offset <= self.log.start_offset or (latest is not None and end_offset <= latest.end_offset):
            return None
        last = self.log.read(end_offset - 1, 1)
        return SnapshotId(end_offset, last[0].epoch)

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        """A prepared snapshot is written and durable: make it the latest (the log may shrink)."""
        self.log.snapshot_frozen(snapshot_id)

    def create_snapshot(
        self, end_offset: int, records: Sequence[tuple[bytes | None, bytes | None]]
    ) -> SnapshotId | None:
        """prepare, encode, write and freeze in one call (simulations and tests; blocks)."""
        sid = self.prepare_snapshot(end_offset)
        if sid is None:
            return None
        self.log.write_snapshot(sid, snapshots.encode(sid, records, voters=self.voter_set_at(sid.end_offset)))
        self.snapshot_frozen(sid)
        return sid

    # ---- poll ------------------------------------------------------------------------------

    def poll(self, now_ms: int, inbound: list[m.Envelope] | tuple = ()) -> PollResult:
        self._now = max(self._now, now_ms)
        for env in inbound:
            self._handle(env)
        self._fire_timers()
        if self.state is _S.LEADER:
            self._fetch_offset_update(self.node_id, self.log.flushed_end_offset)
            self._leader_send()
        elif self.state is _S.FOLLOWER:
            self._maybe_send_fetch()
        self._deliver_committed()
        out, self._outbound = self._outbound, []
        return PollResult(out, self._next_deadline(), flush_needed=not self._log_durable())

    def _log_durable(self) -> bool:
        return self.log.flushed_end_offset >= self.log.end_offset

    def _next_deadline(self) -> int:
        d = self._v.deadline_ms
        if self.state is _S.LEADER:
            for p in self._v.parked.values():
                d = min(d, p.deadline_ms)
            if self._begin_unacked():
                d = min(d, self._v.next_begin_ms)
            if not self.is_voter and self._voter_history and self._high_watermark > self._voter_history[-1][0]:
                d = min(d, self._now)  # resign now
        elif self.state is _S.FOLLOWER:
            if self._v.fetch_correlation is None:
                # Not before the last append is durable: the caller polls when its flush ends.
                if self._log_durable() or self._v.snapshot_fetch is not None:
                    d = min(d, self._now)
            else:
                d = min(d, self._v.fetch_sent_ms + self._fetch_request_timeout())
        return d

    def _begin_unacked(self) -> bool:
        return any(v != self.node_id and v not in self._v.begin_acked for v in self.voters)

    def _fetch_request_timeout(self) -> int:
        return min(self.config.request_timeout_ms, 2 * self.config.fetch_max_wait_ms)

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randint(0, t)

    # ---- transitions -----------------------------------------------------------------------

    def _transition(
        self, to: EpochState, epoch: int, *, leader_id: int | None = None, voted_id: int | None = None
    ) -> None:
        check_transition(self.state, self.epoch, to, epoch)
        # Durable first: a crash right after must not forget an epoch or a vote.
        self.store.write(ElectionState(epoch=epoch, leader_id=leader_id, voted_id=voted_id))
        old_leader, old_epoch = self.leader_id, self.epoch
        granted = self._v.granted
        self.state, self.epoch, self.leader_id, self.voted_id = to, epoch, leader_id, voted_id
        self._v = _Volatile()
        now = self._now
        if to is _S.UNATTACHED or to is _S.PROSPECTIVE or to is _S.CANDIDATE:
            self._v.deadline_ms = now + self._election_timeout()
        elif to is _S.FOLLOWER:
            self._v.deadline_ms = now + self.config.fetch_timeout_ms
        elif to is _S.LEADER:
            self._v.deadline_ms = now + self.config.fetch_timeout_ms * 3 // 2
            self._v.epoch_start_offset = self.log.end_offset
            self._v.last_fetch_ms = {v: now for v in self.voters}
            base = self.log.end_offset
            control = [control_records.leader_change(self.node_id, self.voters, granted)]
            if self.kraft_version >= 1 and all(off < 0 for off, _vs in self._voter_history):
                # KIP-853: the bootstrap voter set goes into the log with the first leader's record.
                control += [encode_kraft_version(1), encode_voters(self.voter_set())]
            stamp = now + self._wall_clock_offset_ms
            self._append_entries(
                [LogEntry(base + i, epoch, base, k, v, control=True, timestamp=stamp) for i, (k, v) in enumerate(control)]
            )
        elif to is _S.RESIGNED:
            self._v.deadline_ms = now + self._election_timeout()
        if (old_leader, old_epoch) != (leader_id, epoch):
            for cursor in self._listeners:
                cursor.listener.handle_leader_change(leader_id, epoch)
        if to is _S.PROSPECTIVE:
            self._start_vote_round(pre_vote=True)
        elif to is _S.CANDIDATE:
            self._start_vote_round(pre_vote=False)

    def _start_vote_round(self, *, pre_vote: bool) -> None:
        self._v.granted = {self.node_id}
        candidate_epoch = self.epoch + 1 if pre_vote else self.epoch
        req = m.VoteRequest(
            cluster_id=self.config.cluster_id,
            candidate_epoch=candidate_epoch,
            candidate_id=self.node_id,
            last_offset_epoch=self.log.last_epoch,
            last_offset=self.log.end_offset,
            pre_vote=pre_vote,
        )
        voter_set = self.voter_set()
        for v in self.voters:
            if v != self.node_id:
                node = voter_set.get(v)
                directory = node.directory_id if node is not None else None
                self._send(v, req if directory is None else dataclasses.replace(req, voter_directory_id=directory))
        self._maybe_win()

    def _maybe_win(self) -> None:
        # Only the grants of voters in our own voter set count (KIP-853: a granting peer may
        # hold another set; single-server changes make any two majorities meet).
        if not self._can_stand() or len(self._v.granted & set(self.voters)) < self.majority:
            return
        if self.state is _S.PROSPECTIVE:
            self._transition(_S.CANDIDATE, self.epoch + 1, voted_id=self.node_id)
        elif self.state is _S.CANDIDATE:
            self._transition(_S.LEADER, self.epoch, leader_id=self.node_id, voted_id=self.node_id)

    def _observe(self, epoch: int, leader_id: int | None) -> None:
        """A peer showed an epoch/leader: move to it if it is newer (Kafka's maybeTransition)."""
        if epoch > self.epoch:
            if leader_id is not None and leader_id != self.node_id:
                self._transition(_S.FOLLOWER, epoch, leader_id=leader_id)
            else:
                self._transition(_S.UNATTACHED, epoch)
        elif (
            epoch == self.epoch
            and leader_id is not None
            and leader_id != self.node_id
            and leader_id != self._v.lost_leader
            and self.state in (_S.UNATTACHED, _S.PROSPECTIVE, _S.CANDIDATE)
        ):
            self._transition(_S.FOLLOWER, epoch, leader_id=leader_id, voted_id=self.voted_id)

    def _fire_timers(self) -> None:
        if self.state is _S.LEADER:
            self._check_quorum()
            return
        if self._now < self._v.deadline_ms:
            return
        if not self._can_stand():
            self._observer_timer()
            return
        # Unattached, Follower (fetch timeout), Resigned, a lost pre-vote round, a lost or
        # split election: all go (back) to Prospective in the same epoch (KIP-996).
        if self.state is _S.PROSPECTIVE and self._v.lost_leader is not None:
            # KIP-996: a lost pre-vote round goes back to the leader it knew; if that leader
            # is really gone the fetch times out again, and by then its peers grant.
            self._transition(
                _S.FOLLOWER, self.epoch, leader_id=self._v.lost_leader, voted_id=self.voted_id
            )
            return
        lost = self.leader_id if self.state is _S.FOLLOWER else None
        self._transition(_S.PROSPECTIVE, self.epoch, voted_id=self.voted_id)
        self._v.lost_leader = lost

    def _observer_timer(self) -> None:
        """An observer whose leader went quiet forgets it; an unattached one asks a random voter
        (its Fetch is answered with the leader's id and epoch, or with data by the leader)."""
        if self.state is _S.FOLLOWER:
            self._transition(_S.UNATTACHED, self.epoch)
        self._v.deadline_ms = self._now + self.config.request_timeout_ms
        # A removed voter asks the others; one that knows no voter set yet, its bootstrap servers.
        ask = [v for v in self.voters if v != self.node_id] or [v for v in self.config.voters if v != self.node_id]
        if ask:
            self._send(self.rng.choice(ask), self._fetch_request(max_wait_ms=0))

    def _fetch_request(self, *, max_wait_ms: int) -> m.FetchRequest:
        """A Fetch from this log's end: a follower's to its leader, or an observer's to any voter."""
        return m.FetchRequest(
            cluster_id=self.config.cluster_id,
            replica_id=self.node_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_epoch,
            high_watermark=self._high_watermark,
            max_wait_ms=max_wait_ms,
            replica_directory_id=self.config.directory_id,
        )

    def _check_quorum(self) -> None:
        """Kafka's check-quorum: resign unless a majority fetched within 1.5 x fetch timeout."""
        window = self.config.fetch_timeout_ms * 3 // 2
        if (
            not self.is_voter
            and self._voter_history
            and self._high_watermark > self._voter_history[-1][0]
        ):
            self._resign()  # KIP-853: our own removal is committed
            return
        others = sorted(
            (self._v.last_fetch_ms.get(v, self._now) for v in self.voters if v != self.node_id), reverse=True
        )
        if not others:
            self._v.deadline_ms = NEVER
            return
        # The quorum holds while the (majority-1)-th most recent other voter is within the window
        # (the majority-th when we are no voter ourselves: a leader that removed itself).
        need = self.majority - 1 if self.is_voter else self.majority
        expires = others[need - 1] + window if need >= 1 else NEVER
        if self._now < expires:
            self._v.deadline_ms = expires
            return
        self._resign()

    def _resign(self) -> None:
        self._transition(_S.RESIGNED, self.epoch, leader_id=self.node_id, voted_id=self.voted_id)
        req = m.EndQuorumEpochRequest(
            cluster_id=self.config.cluster_id,
            leader_id=self.node_id,
            leader_epoch=self.epoch,
            preferred_successors=tuple(v for v in self.voters if v != self.node_id),
        )
        for v in self.voters:
            if v != self.node_id:
                self._send(v, req)

    # ---- sending ---------------------------------------------------------------------------

    def _send(self, dst: int, message: m.Message) -> int:
        self._next_correlation += 1
        self._outbound.append(m.Envelope(self.node_id, dst, self._next_correlation, message))
        return self._next_correlation

    def _reply(self, req: m.Envelope, message: m.Message) -> None:
        self._outbound.append(m.Envelope(self.node_id, req.src, req.correlation_id, message))

    def _leader_send(self) -> None:
        v = self._v
        if self._begin_unacked() and self._now >= v.next_begin_ms:
            req = m.BeginQuorumEpochRequest(self.config.cluster_id, self.node_id, self.epoch)
            for voter in self.voters:
                if voter != self.node_id and voter not in v.begin_acked:
                    self._send(voter, req)
            v.next_begin_ms = self._now + self.config.request_timeout_ms // 4
        for src, parked in list(v.parked.items()):
            req = parked.request
            if (
                self._now >= parked.deadline_ms
                or self.log.end_offset > req.fetch_offset
                or self._high_watermark > req.high_watermark
            ):
                del v.parked[src]
                self._answer_fetch(src, parked.correlation_id, req)

    def _maybe_send_fetch(self) -> None:
        v = self._v
        if v.fetch_correlation is not None and self._now < v.fetch_sent_ms + self._fetch_request_timeout():
            return
        if v.snapshot_fetch is None and not self._log_durable():
            return  # a fetch offset is an acknowledgement the leader counts: it must survive a crash
        assert self.leader_id is not None
        if v.snapshot_fetch is not None:
            v.fetch_correlation = self._send(
                self.leader_id,
                m.FetchSnapshotRequest(
                    cluster_id=self.config.cluster_id,
                    replica_id=self.node_id,
                    current_leader_epoch=self.epoch,
                    snapshot_id=v.snapshot_fetch,
                    position=len(v.snapshot_buf),
                    max_bytes=self.config.fetch_snapshot_max_bytes,
                ),
            )
            v.fetch_sent_ms = self._now
            return
        v.fetch_correlation = self._send(self.leader_id, self._fetch_request(max_wait_ms=self.config.fetch_max_wait_ms))
        v.fetch_sent_ms = self._now

    # ---- inbound ---------------------------------------------------------------------------

    def _handle(self, env: m.Envelope) -> None:
        msg = env.message
        handler = getattr(self, _HANDLERS[type(msg)])
        if isinstance(msg, _REQUESTS):
            error = self._validate_request(env)
            if error is not None:
                self._reply(env, _error_response(msg, error, self.leader_id, self.epoch))
                return
        handler(env)

    def _validate_request(self, env: m.Envelope) -> ErrorCode | None:
        msg = env.message
        if getattr(msg, "cluster_id", None) != self.config.cluster_id:
            return ErrorCode.inconsistent_cluster_id
        if (
            self.kraft_version < 1
            and env.src not in self.voters
            and not isinstance(msg, m.FetchRequest | m.FetchSnapshotRequest)
        ):
            return ErrorCode.inconsistent_voter_set  # observers only fetch (static quorum)
        return None

    def _handle_vote_request(self, env: m.Envelope) -> None:
        req = env.message
        assert isinstance(req, m.VoteRequest)
        # A pre-vote names the epoch its sender would stand in, one above its own. A sender in
        # a higher epoch than ours proves that epoch exists, and we join it (else a voter that
        # reached a higher epoch with a short log could never be brought back).
        self._observe(req.candidate_epoch - 1 if req.pre_vote else req.candidate_epoch, None)
        log_ok = (req.last_offset_epoch, req.last_offset) >= (self.log.last_epoch, self.log.end_offset)
        # KIP-853: the candidate asks the voter (id, directory id) of its voter set; this replica on
        # another disk (its metadata dir wiped) is not that voter, whose acknowledgements it lost.
        # A replica that does not know it is a voter yet still votes (it may not have fetched the
        # VotersRecord that added it).
        if req.voter_directory_id is not None and req.voter_directory_id != self.config.directory_id:
            log_ok = False
        if req.pre_vote:
            # KIP-996: never changes our state; refused while we follow a live leader.
            granted = (
                req.candidate_epoch > self.epoch
                and log_ok
                and self.state is not _S.LEADER
                and (
                    self.state is not _S.FOLLOWER
                    or self._v.last_fetch_ok_ms < self._now - self.config.election_timeout_ms
                )
            )
        else:
            granted = (
                req.candidate_epoch == self.epoch
                and log_ok
                and self.state in (_S.UNATTACHED, _S.PROSPECTIVE, _S.CANDIDATE)
                and self.voted_id in (None, req.candidate_id)
            )
            if granted and self.voted_id is None:
                # A vote is durable before it is sent. Unattached/Prospective keep their state.
                self.voted_id = req.candidate_id
                self.store.write(ElectionState(epoch=self.epoch, voted_id=req.candidate_id))
        self._reply(env, m.VoteResponse(ErrorCode.none, self.leader_id, self.epoch, granted, req.pre_vote))

    def _handle_vote_response(self, env: m.Envelope) -> None:
        resp = env.message
        assert isinstance(resp, m.VoteResponse)
        if resp.error_code != ErrorCode.none:
            return
        self._observe(resp.leader_epoch, resp.leader_id)
        if resp.pre_vote and self.state is _S.PROSPECTIVE and resp.leader_epoch <= self.epoch:
            (self._v.granted if resp.vote_granted else self._v.rejected).add(env.src)
            self._maybe_win()
        elif not resp.pre_vote and self.state is _S.CANDIDATE and resp.leader_epoch == self.epoch:
            (self._v.granted if resp.vote_granted else self._v.rejected).add(env.src)
            self._maybe_win()

    def _handle_begin_quorum_epoch_request(self, env: m.Envelope) -> None:
        req = env.message
        assert isinstance(req, m.BeginQuorumEpochRequest)
        if req.leader_epoch < self.epoch:
            self._reply(env, m.BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, self.leader_id, self.epoch))
            return
        self._observe(req.leader_epoch, req.leader_id)
        self._reply(env, m.BeginQuorumEpochResponse(ErrorCode.none, self.leader_id, self.epoch))

    def _handle_begin_quorum_epoch_response(self, env: m.Envelope) -> None:
        resp = env.message
        assert isinstance(resp, m.BeginQuorumEpochResponse)
        self._observe(resp.leader_epoch, resp.leader_id)
        if self.state is _S.LEADER and resp.error_code == ErrorCode.none and resp.leader_epoch == self.epoch:
            self._v.begin_acked.add(env.src)

    def _handle_end_quorum_epoch_request(self, env: m.Envelope) -> None:
        req = env.message
        assert isinstance(req, m.EndQuorumEpochRequest)
        if req.leader_epoch < self.epoch:
            self._reply(env, m.EndQuorumEpochResponse(ErrorCode.fenced_leader_epoch, self.leader_id, self.epoch))
            return
        if req.leader_epoch > self.epoch:
            self._transition(_S.UNATTACHED, req.leader_epoch)
        elif self.state is _S.FOLLOWER and self.leader_id == req.leader_id:
            self._transition(_S.UNATTACHED, self.epoch, voted_id=self.voted_id)
            # Successors try sooner, in preference order (Kafka's EndQuorumEpoch backoff).
            rank = req.preferred_successors.index(self.node_id) if self.node_id in req.preferred_successors else 0
            self._v.deadline_ms = self._now + self.rng.randint(0, self.config.election_backoff_max_ms // 4) * (rank + 1)
        self._reply(env, m.EndQuorumEpochResponse(ErrorCode.none, self.leader_id, self.epoch))

    def _handle_end_quorum_epoch_response(self, env: m.Envelope) -> None:
        resp = env.message
        assert isinstance(resp, m.EndQuorumEpochResponse)
        self._observe(resp.leader_epoch, resp.leader_id)

    def _handle_fetch_request(self, env: m.Envelope) -> None:
        req = env.message
        assert isinstance(req, m.FetchRequest)
        if req.current_leader_epoch > self.epoch:
            self._observe(req.current_leader_epoch, None)
        if self.state is not _S.LEADER:
            self._reply(env, self._fetch_error(ErrorCode.not_leader_or_follower))
            return
        if req.current_leader_epoch < self.epoch:
            self._reply(env, self._fetch_error(ErrorCode.fenced_leader_epoch))
            return
        self._v.parked.pop(env.src, None)  # a newer fetch replaces a parked one
        self._v.fetch_requests[env.src] = self._v.fetch_requests.get(env.src, 0) + 1
        self._answer_fetch(env.src, env.correlation_id, req, park=True)

    def _fetch_error(self, error: ErrorCode) -> m.FetchResponse:
        return m.FetchResponse(error, self.leader_id, self.epoch, self._high_watermark, (), None)

    def _answer_fetch(self, src: int, correlation_id: int, req: m.FetchRequest, *, park: bool = False) -> None:
        v = self._v
        if req.replica_directory_id is not None:
            v.directory_ids[src] = req.replica_directory_id  # DescribeQuorum; a kraft.version upgrade's voters
        voter = self.voter_set().get(src) if self.kraft_version >= 1 else None
        if voter is not None and voter.directory_id is not None and voter.directory_id != req.replica_directory_id:
            # KIP-853: the voter's node id on another disk (its metadata dir was wiped): it holds
            # none of what the voter acknowledged, so it is answered as an observer and counts
            # for nothing -- not the voter's fetch offset, liveness or catch-up.
            self._outbound.append(m.Envelope(self.node_id, src, correlation_id, self._observer_answer(req)))
            return
        if src in self.voters:
            v.last_fetch_ms[src] = self._now
            v.begin_acked.add(src)
        invalid = self._validate_fetch_position(req)
        if invalid is not None:
            self._outbound.append(m.Envelope(self.node_id, src, correlation_id, invalid))
            return
        # Validated: the follower's log matches ours below fetch_offset (and it is flushed).
        self._fetch_offset_update(src, req.fetch_offset)
        v.fetched_at[src] = self._now
        if req.fetch_offset >= self.log.end_offset:
            v.caught_up_at[src] = self._now
            v.caught_up_directory[src] = req.replica_directory_id
        if (
            park
            and req.fetch_offset >= self.log.end_offset
            and req.high_watermark >= self._high_watermark
            and req.max_wait_ms > 0
        ):
            v.parked[src] = _ParkedFetch(src, correlation_id, req, self._now + req.max_wait_ms)
            return
        self._outbound.append(m.Envelope(self.node_id, src, correlation_id, self._records_answer(req)))

    def _observer_answer(self, req: m.FetchRequest) -> m.FetchResponse:
        invalid = self._validate_fetch_position(req)
        if invalid is not None:
            return invalid
        return self._records_answer(req)

    def _records_answer(self, req: m.FetchRequest) -> m.FetchResponse:
        entries = self.log.read(req.fetch_offset, self.config.max_fetch_entries)
        # Whole batches only, so a fetch offset (and hence the high watermark) is a batch boundary.
        if entries and req.fetch_offset + len(entries) < self.log.end_offset:
            last_base = entries[-1].batch_base
            if last_base > entries[0].offset:
                entries = [e for e in entries if e.offset < last_base]
            else:
                # One batch larger than a fetch: it goes whole (read once, not entry by entry).
                entries = entries + self._rest_of_batch(entries[-1].offset + 1, last_base)
        return m.FetchResponse(ErrorCode.none, self.node_id, self.epoch, self._high_watermark, tuple(entries), None)

    def _validate_fetch_position(self, req: m.FetchRequest) -> m.FetchResponse | None:
        """None if the follower's log matches ours below its fetch offset; else the answer that
        repairs it: DivergingEpoch (KIP-595) or, below our log start, a SnapshotId (KIP-630)."""
        log = self.log
        snap = log.latest_snapshot_id
        if req.fetch_offset < log.start_offset:
            assert snap is not None, "a log start offset above 0 needs a snapshot"
            return m.FetchResponse(ErrorCode.none, self.node_id, self.epoch, self._high_watermark, (), None, snap)
        if req.fetch_offset == 0 and req.last_fetched_epoch == 0:
            return None
        if snap is not None and (req.fetch_offset, req.last_fetched_epoch) == (snap.end_offset, snap.epoch):
            return None  # a follower that has just installed our snapshot
        epoch, end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if epoch == req.last_fetched_epoch and req.fetch_offset <= end:
            return None
        if snap is not None and end <= log.start_offset:
            # Where it diverges is below what our epoch cache still knows: start it over.
            return m.FetchResponse(ErrorCode.none, self.node_id, self.epoch, self._high_watermark, (), None, snap)
        return m.FetchResponse(ErrorCode.none, self.node_id, self.epoch, self._high_watermark, (), (epoch, end))

    def _handle_fetch_snapshot_request(self, env: m.Envelope) -> None:
        req = env.message
        assert isinstance(req, m.FetchSnapshotRequest)
        if req.current_leader_epoch > self.epoch:
            self._observe(req.current_leader_epoch, None)
        sid = req.snapshot_id

        def answer(error: ErrorCode, size: int = -1, data: bytes = b"") -> None:
            resp = m.FetchSnapshotResponse(error, self.leader_id, self.epoch, sid, size, req.position, data)
            self._reply(env, resp)

        if self.state is not _S.LEADER:
            answer(ErrorCode.not_leader_or_follower)
            return
        if req.current_leader_epoch < self.epoch:
            answer(ErrorCode.fenced_leader_epoch)
            return
        self._v.last_fetch_ms[env.src] = self._now  # a voter busy fetching a snapshot is alive
        self._v.begin_acked.add(env.src)
        cache = self._snapshot_cache.get(env.src)
        if cache is None or cache[0] != sid:
            # Any snapshot still kept; the one a fetcher is reading stays cached for it even
            # after the log drops it, so a slow fetcher is not sent back to the start by newer
            # snapshots (nor by another fetcher reading a different one).
            data = next((d for s, d in self._snapshot_cache.values() if s == sid), None)
            if data is None:
                data = self.log.read_snapshot(sid)
            if data is None:
                answer(ErrorCode.snapshot_not_found)
                return
            cache = self._snapshot_cache[env.src] = (sid, data)
        data = cache[1]
        if not 0 <= req.position < len(data):
            answer(ErrorCode.position_out_of_range)
            return
        answer(ErrorCode.none, len(data), data[req.position : req.position + max(req.max_bytes, 1)])

    def _handle_fetch_snapshot_response(self, env: m.Envelope) -> None:
        resp = env.message
        assert isinstance(resp, m.FetchSnapshotResponse)
        v = self._v
        if self.state is not _S.FOLLOWER or env.correlation_id != v.fetch_correlation:
            self._observe(resp.leader_epoch, resp.leader_id)
            return
        v.fetch_correlation = None
        if resp.error_code != ErrorCode.none or resp.leader_epoch != self.epoch:
            if resp.error_code in (ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range):
                v.snapshot_fetch = None  # the leader moved on: fetch again to learn its snapshot
                v.snapshot_buf = bytearray()
            self._observe(resp.leader_epoch, resp.leader_id)
            return
        v.deadline_ms = self._now + self.config.fetch_timeout_ms
        v.last_fetch_ok_ms = self._now
        if resp.snapshot_id != v.snapshot_fetch or resp.position != len(v.snapshot_buf) or not resp.data:
            v.snapshot_fetch, v.snapshot_buf = None, bytearray()
            return
        v.snapshot_buf += resp.data
        if len(v.snapshot_buf) < resp.size:
            return
        sid, data = resp.snapshot_id, bytes(v.snapshot_buf)
        v.snapshot_fetch, v.snapshot_buf = None, bytearray()
        try:
            snapshots.decode(data)
        except snapshots.CorruptSnapshotError:
            return  # fetch again; the leader's answer will name a snapshot again
        self.log.install_snapshot(sid, data)
        # Everything in a snapshot is committed.
        self._high_watermark = max(self._high_watermark, sid.end_offset)
        self._rebuild_voter_history()

    def _rest_of_batch(self, start: int, base: int) -> list[LogEntry]:
        """The entries of batch `base` from `start` on, read in chunks (never the rest of the log)."""
        out: list[LogEntry] = []
        while start < self.log.end_offset:
            chunk = self.log.read(start, 4096)
            if not chunk:
                break
            for e in chunk:
                if e.batch_base != base:
                    return out
                out.append(e)
            start = chunk[-1].offset + 1
        return out

    def _fetch_offset_update(self, voter: int, offset: int) -> None:
        v = self._v
        if offset > v.fetch_offsets.get(voter, -1):
            v.fetch_offsets[voter] = offset
        offsets = sorted((v.fetch_offsets.get(x, 0) for x in self.voters), reverse=True)
        candidate = offsets[self.majority - 1]
        if candidate > v.epoch_start_offset and candidate > self._high_watermark:
            self._high_watermark = candidate

    def _handle_fetch_response(self, env: m.Envelope) -> None:
        resp = env.message
        assert isinstance(resp, m.FetchResponse)
        if self.state is not _S.FOLLOWER or env.correlation_id != self._v.fetch_correlation:
            self._observe(resp.leader_epoch, resp.leader_id)
            return  # stale: delayed, duplicated, or from an older state
        self._v.fetch_correlation = None
        if resp.error_code != ErrorCode.none or resp.leader_epoch != self.epoch:
            self._observe(resp.leader_epoch, resp.leader_id)
            return
        self._v.deadline_ms = self._now + self.config.fetch_timeout_ms
        self._v.last_fetch_ok_ms = self._now
        if resp.snapshot_id is not None:
            self._v.snapshot_fetch, self._v.snapshot_buf = resp.snapshot_id, bytearray()
            return
        if resp.diverging_epoch is not None:
            epoch, end = resp.diverging_epoch
            _mine, my_end = self.log.end_offset_for_epoch(epoch)
            target = min(end, my_end)
            if target < self._high_watermark:
                raise AssertionError(f"truncation to {target} below high watermark {self._high_watermark}")
            self._truncate_log(target)
            return
        if resp.records:
            if resp.records[0].offset != self.log.end_offset:
                return
            self._append_entries(resp.records)  # flushed before the next fetch (PollResult.flush_needed)
        hw = min(resp.high_watermark, self.log.end_offset)
        if hw > self._high_watermark:
            self._high_watermark = hw

    # ---- listeners -------------------------------------------------------------------------

    def _deliver_committed(self) -> None:
        hw = self._high_watermark
        snap = self.log.latest_snapshot_id
        for cursor in self._listeners:
            if (
                snap is not None
                and cursor.next_offset < snap.end_offset
                and (cursor.next_offset == 0 or cursor.next_offset < self.log.start_offset)
            ):
                data = self.log.read_snapshot(snap)
                if data is None:
                    raise AssertionError(f"the latest snapshot {snap} cannot be read")
                cursor.listener.handle_load_snapshot(snap, snapshots.decode(data))
                cursor.next_offset = snap.end_offset
            while cursor.next_offset < hw:
                entries = self.log.read(cursor.next_offset, min(hw - cursor.next_offset, 1024))
                batch: list[LogEntry] = []
                for e in entries:
                    if batch and e.batch_base != batch[0].batch_base:
                        self._hand(cursor, batch)
                        batch = []
                    batch.append(e)
                if batch:
                    self._hand(cursor, batch)

    @staticmethod
    def _hand(cursor: _ListenerCursor, batch: list[LogEntry]) -> None:
        cursor.next_offset = batch[-1].offset + 1
        if not batch[0].control:
            cursor.listener.handle_commit(
                batch[0].offset, batch[0].epoch, [(e.offset, e.key, e.value) for e in batch]
            )


@dataclass(slots=True)
class _ListenerCursor:
    listener: RaftListener
    next_offset: int = 0


_REQUESTS = (
    m.VoteRequest,
    m.BeginQuorumEpochRequest,
    m.EndQuorumEpochRequest,
    m.FetchRequest,
    m.FetchSnapshotRequest,
)


def _error_response(msg: m.Message, error: ErrorCode, leader_id: int | None, epoch: int) -> m.Message:
    if isinstance(msg, m.VoteRequest):
        return m.VoteResponse(error, leader_id, epoch, False, msg.pre_vote)
    if isinstance(msg, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(error, leader_id, epoch)
    if isinstance(msg, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(error, leader_id, epoch)
    if isinstance(msg, m.FetchSnapshotRequest):
        return m.FetchSnapshotResponse(error, leader_id, epoch, msg.snapshot_id, -1, msg.position, b"")
    return m.FetchResponse(error, leader_id, epoch, 0, (), None)


# Message type -> handler method name (looked up on the instance, so a test may override one).
_HANDLERS: dict[type, str] = {
    m.VoteRequest: "_handle_vote_request",
    m.VoteResponse: "_handle_vote_response",
    m.BeginQuorumEpochRequest: "_handle_begin_quorum_epoch_request",
    m.BeginQuorumEpochResponse: "_handle_begin_quorum_epoch_response",
    m.EndQuorumEpochRequest: "_handle_end_quorum_epoch_request",
    m.EndQuorumEpochResponse: "_handle_end_quorum_epoch_response",
    m.FetchRequest: "_handle_fetch_request",
    m.FetchResponse: "_handle_fetch_response",
    m.FetchSnapshotRequest: "_handle_fetch_snapshot_request",
    m.FetchSnapshotResponse: "_handle_fetch_snapshot_response",
}
