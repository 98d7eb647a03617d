"""Partition: one topic-partition replica on this broker, leader or follower (Kafka's Partition).

Owns the Log and the replica's role as the controller last committed it
(`registration`: replicas, ISR, leader, leader epoch, partition epoch). The
replication rules themselves are pure and live in `replica_state`; this class
applies them to the real log:

- **Leader** (`leader_state` set): appends client batches in its leader epoch
  (and the transaction coordinator's end-transaction markers, `allow_control`),
  tracks each follower from its fetches (`fetch_for_follower`, which first runs
  the KIP-320 diverging-epoch check), and moves the high watermark to the
  smallest log end offset over the maximal ISR. ISR changes are proposals
  (`IsrProposal`) the ReplicaManager sends to the controller as AlterPartition;
  the ISR changes only when the controller's committed registration comes back
  through the metadata log (`apply_registration`).
- **Follower** (`leader_state` None): appends the leader's batches as sent
  (`append_as_follower`), truncates where the leader says its log diverges,
  and keeps the high watermark the leader reports, capped by its own log end.

Becoming leader in a new epoch writes (epoch, log end offset) to the
leader-epoch checkpoint before any batch of that epoch, as Kafka's makeLeader
does. Every change of the high watermark or of the role calls `on_change`
(the ReplicaManager wakes waiting fetches and acks=all produces).

KIP-112: an OSError from the log (a failing disk) is reported through
``on_storage_error`` and answered KAFKA_STORAGE_ERROR; once ``offline`` is set
every append and read is answered so without touching the disk. During a move
between log dirs (KIP-113) ``log`` is replaced by the ReplicaManager between
two requests. Called on the event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kavka.common import TopicPartition
from kavka.metadata.image import PartitionRegistration
from kavka.replication.replica_state import (
    DivergingEpoch,
    IsrProposal,
    LeaderState,
    diverging_epoch,
    truncation_offset,
)
from kavka.storage.errors import OffsetOutOfRangeError
from kavka.storage.leader_epoch import UNDEFINED_EPOCH
from kavka.storage.local_log import FetchDataInfo
from kavka.storage.unified_log import AppendInfo, Log


class PartitionError(Exception):
    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class FollowerRead:
    """What the leader answers one follower's fetch of this partition."""

    data: FetchDataInfo | None
    diverging: DivergingEpoch | None
    proposal: IsrProposal | None
    high_watermark: int
    log_start_offset: int


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        *,
        topic_id: str,
        log: Log,
        local_broker_id: int,
        registration: PartitionRegistration,
        high_watermark: int,
        now_ms: int,
        min_insync_replicas: int = 1,
        on_storage_error: Callable[[Log, OSError], None] | None = None,
        on_change: Callable[[TopicPartition], None] | None = None,
    ) -> None:
        self.tp = tp
        self.offline = False
        # This broker lost its controller session (broker.session_watch) and the partition may be
        # led elsewhere (`review_step_down`), so as a leader it takes no writes and acknowledges none.
        self.stepped_down = False
        self.on_storage_error = on_storage_error
        self.on_change = on_change or (lambda tp: None)
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.registration = registration
        self.leader_state: LeaderState | None = None
        self.min_insync_replicas = min_insync_replicas
        # Each follower's log start offset from its last fetch in this leadership (KIP-392: a consumer is
        # sent only to a replica that holds its fetch offset).
        self._follower_log_starts: dict[int, int] = {}
        # The log end offset when this replica last became leader (Kafka's leaderEpochStartOffsetOpt):
        # until the high watermark reaches it, the leader cannot tell a client its end offset.
        self.leader_epoch_start_offset: int | None = None
        self._follower_hw = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._leader_hw_seen = False  # a fetch answer of the current leadership gave the high watermark
        self._leader_hw = -1  # the last one it gave
        if registration.leader == local_broker_id:
            self._become_leader(registration, now_ms)

    # ------------------------------------------------------------------ role

    @property
    def min_insync_replicas(self) -> int:
        return self._min_isr

    @min_insync_replicas.setter
    def min_insync_replicas(self, value: int) -> None:
        """The topic's min.insync.replicas; the leader's high watermark waits while the ISR is below it."""
        self._min_isr = value
        ls = self.leader_state
        if ls is not None:
            ls.min_isr = value
            if ls.maybe_increment_high_watermark(self.log.log_end_offset):
                self.on_change(self.tp)

    @property
    def leader(self) -> int:
        return self.registration.leader

    @property
    def leader_epoch(self) -> int:
        return self.registration.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self.registration.partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.registration.replicas

    @property
    def isr(self) -> tuple[int, ...]:
        return self.registration.isr

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def high_watermark(self) -> int:
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        return self._follower_hw

    @property
    def high_watermark_known(self) -> bool:
        """Leader, or a follower that heard the high watermark from the current leader and holds
        every record below it (after a restart or a leader change, the checkpointed one may be far
        behind the partition's, and a follower still catching up caps it at its own log end)."""
        return self.leader_state is not None or (self._leader_hw_seen and self._follower_hw >= self._leader_hw)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark) (KIP-98): read_committed consumers read below it."""
        self.check_online()
        try:
            return self.log.last_stable_offset(self.high_watermark)
        except OSError as e:
            raise self._storage_error(e) from e

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def _become_leader(self, reg: PartitionRegistration, now_ms: int) -> None:
        cache = self.log.leader_epoch_cache
        latest = cache.latest_epoch
        if latest is None or reg.leader_epoch > latest:
            # Not written until the epoch's first batch: see LeaderEpochFileCache.assign.
            cache.assign(reg.leader_epoch, self.log.log_end_offset, flush=False)
        self.leader_epoch_start_offset = self.log.log_end_offset
        self._follower_log_starts = {}
        self.leader_state = LeaderState.become_leader(
            self.local_broker_id,
            reg,
            high_watermark=self.high_watermark,
            log_end_offset=self.log.log_end_offset,
            now_ms=now_ms,
        )
        self.leader_state.min_isr = self._min_isr
        self.leader_state.maybe_increment_high_watermark(self.log.log_end_offset)

    def apply_registration(self, reg: PartitionRegistration, *, now_ms: int) -> bool:
        """A committed registration from the metadata log. Returns True when this replica's role
        changed (it became leader, or follower of a new leader or epoch)."""
        old = self.registration
        if reg.leader_epoch < old.leader_epoch or (
            reg.leader_epoch == old.leader_epoch and reg.partition_epoch < old.partition_epoch
        ):
            return False  # stale
        hw_before = self.high_watermark
        self.registration = reg
        changed = False
        if reg.leader == self.local_broker_id:
            ls = self.leader_state
            if ls is None or not ls.on_registration(reg, log_end_offset=self.log.log_end_offset):
                self._follower_hw = self.high_watermark
                self._become_leader(reg, now_ms)
                changed = True
        else:
            if self.leader_state is not None:
                self._follower_hw = min(self.leader_state.high_watermark, self.log.log_end_offset)
                self.leader_state = None
                changed = True
            elif reg.leader != old.leader or reg.leader_epoch != old.leader_epoch:
                changed = True
            if changed:
                self._leader_hw_seen = False
        if changed or self.high_watermark != hw_before:
            self.on_change(self.tp)
        return changed

    def review_step_down(self, lapsed: bool, *, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """Step down as leader, or lead again, as this broker's controller session (`lapsed`) and
        the followers' fetches say (LeaderState.may_lead_while_lapsed). True when it changed."""
        ls = self.leader_state
        down = lapsed and ls is not None and not ls.may_lead_while_lapsed(
            now_ms=now_ms, replica_lag_time_max_ms=replica_lag_time_max_ms)
        changed, self.stepped_down = down != self.stepped_down, down
        return changed

    # ------------------------------------------------------------------ checks

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: fence clients whose view of the leader epoch is off."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.unknown_leader_epoch)
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.fenced_leader_epoch)

    def check_online(self) -> None:
        if self.offline:
            raise PartitionError(
                ErrorCode.kafka_storage_error, f"{self.tp} is on an offline log dir"
            )

    def _storage_error(self, exc: OSError) -> PartitionError:
        if self.on_storage_error is not None:
            self.on_storage_error(self.log, exc)
        self.offline = True
        return PartitionError(ErrorCode.kafka_storage_error, f"{self.tp}: {exc}")

    def _require_leader(self) -> LeaderState:
        if self.leader_state is None:
            raise PartitionError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.local_broker_id} is not the leader of {self.tp} (leader: {self.leader})",
            )
        return self.leader_state

    # ------------------------------------------------------------------ reads

    def read_records(
        self, fetch_offset: int, *, max_bytes: int, max_offset: int | None, min_one_message: bool
    ) -> FetchDataInfo:
        self.check_online()
        try:
            return self.log.read(
                fetch_offset, max_bytes=max_bytes, max_offset=max_offset, min_one_message=min_one_message
            )
        except OSError as e:
            raise self._storage_error(e) from e

    # ------------------------------------------------------------------ leader

    def append_records_to_leader(
        self, records: memoryview | bytes, *, required_acks: int, now_ms: int, allow_control: bool = False,
        in_place: bool = False,
    ) -> AppendInfo:
        """Append as leader. `allow_control` only for the broker's own writers (the transaction
        coordinator's markers, Kafka's AppendOrigin.COORDINATOR); a client's control batch is refused.
        `in_place`: writable `records` are the caller's to give up (Log.append_as_leader)."""
        self.check_online()
        ls = self._require_leader()
        if self.stepped_down:
            raise PartitionError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.local_broker_id} has not reached the active controller for a session and a follower "
                f"of {self.tp} stopped fetching: it may have been fenced and {self.tp} led elsewhere",
            )
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr requirement of {self.min_insync_replicas} for partition {self.tp}",
            )
        try:
            info = self.log.append_as_leader(
                records, leader_epoch=self.leader_epoch, now_ms=now_ms, allow_control=allow_control,
                in_place=in_place,
            )
        except OSError as e:
            raise self._storage_error(e) from e
        if ls.maybe_increment_high_watermark(self.log.log_end_offset):
            self.on_change(self.tp)
        return info

    def acks_all_state(self, required_offset: int) -> ErrorCode | None:
        """Where an acks=all produce that needs the high watermark at `required_offset` stands
        (Kafka's checkEnoughReplicasReachOffset): None while it must wait, else its answer."""
        ls = self.leader_state
        if ls is None or self.offline or self.stepped_down:
            return ErrorCode.not_leader_or_follower
        if ls.high_watermark < required_offset:
            return None
        if len(ls.maximal_isr) < self.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    def fetch_for_follower(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        max_bytes: int,
        min_one_message: bool,
        now_ms: int,
        log_start_offset: int = -1,
        hold_back: bool = False,
        isr_eligible: bool = True,
    ) -> FollowerRead:
        """The leader's side of a follower's fetch: the diverging-epoch check, the read (up to the
        log end: followers see everything), then the follower's new position (KIP-320 first,
        so only a position that is a prefix of this log ever counts). `hold_back`: a replication
        throttle holds the records back (Kafka's shouldLeaderThrottle); the position still counts."""
        self.check_online()
        self.check_leader_epoch(current_leader_epoch)
        ls = self._require_leader()
        if replica_id not in self.replicas:
            raise PartitionError(
                ErrorCode.not_leader_or_follower, f"broker {replica_id} is not a replica of {self.tp}"
            )
        leo, start = self.log.log_end_offset, self.log.log_start_offset
        div = diverging_epoch(
            self.log.leader_epoch_cache,
            fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch,
            log_end_offset=leo,
            log_start_offset=start,
        )
        if div is not None:
            return FollowerRead(None, div, None, ls.high_watermark, start)
        if fetch_offset < start or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"follower {replica_id} fetch offset {fetch_offset} is outside [{start}, {leo}] of {self.tp}",
                log_start_offset=start,
                log_end_offset=leo,
            )
        data = None
        if fetch_offset < leo and not hold_back:
            data = self.read_records(fetch_offset, max_bytes=max_bytes, max_offset=None, min_one_message=min_one_message)
        proposal = ls.on_follower_fetch(replica_id, fetch_offset=fetch_offset, now_ms=now_ms, log_end_offset=leo,
                                        isr_eligible=isr_eligible)
        self._follower_log_starts[replica_id] = log_start_offset
        if ls.maybe_increment_high_watermark(leo):
            self.on_change(self.tp)
        return FollowerRead(data, None, proposal, ls.high_watermark, start)

    def follower_log_start_offset(self, replica_id: int) -> int:
        """A follower's log start offset as its last fetch said (0 when it has not said)."""
        return max(self._follower_log_starts.get(replica_id, 0), 0)

    def maybe_shrink_isr(self, *, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
        if self.leader_state is None:
            return None
        return self.leader_state.maybe_shrink_isr(now_ms=now_ms, replica_lag_time_max_ms=replica_lag_time_max_ms)

    # ------------------------------------------------------------------ follower

    @property
    def last_fetched_epoch(self) -> int:
        latest = self.log.leader_epoch_cache.latest_epoch
        return UNDEFINED_EPOCH if latest is None else latest

    def append_as_follower(self, records: bytes | memoryview, *, now_ms: int) -> AppendInfo | None:
        self.check_online()
        if self.leader_state is not None:
            raise PartitionError(ErrorCode.not_leader_or_follower, f"{self.tp}: this replica leads")
        try:
            return self.log.append_as_follower(records, now_ms=now_ms)
        except OSError as e:
            raise self._storage_error(e) from e

    def truncate_on_divergence(self, diverging: DivergingEpoch, *, now_ms: int) -> int:
        """Truncate where the leader says this log diverges; the new log end offset."""
        self.check_online()
        offset, _done = truncation_offset(
            self.log.leader_epoch_cache,
            diverging,
            log_end_offset=self.log.log_end_offset,
            log_start_offset=self.log.log_start_offset,
        )
        return self.truncate_to(offset, now_ms=now_ms)

    def truncate_to(self, offset: int, *, now_ms: int) -> int:
        try:
            if offset < self.log.log_start_offset:
                self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)
            else:
                self.log.truncate_to(offset, now_ms=now_ms)
        except OSError as e:
            raise self._storage_error(e) from e
        self._follower_hw = min(self._follower_hw, self.log.log_end_offset)
        return self.log.log_end_offset

    def restart_at(self, offset: int, *, now_ms: int) -> None:
        """The leader's log starts above everything here: start over at its log start offset."""
        try:
            self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)
        except OSError as e:
            raise self._storage_error(e) from e
        self._follower_hw = offset

    def restart_at_remote_boundary(
        self,
        next_offset: int,
        *,
        log_start_offset: int,
        epoch_entries: list[tuple[int, int]],
        producer_snapshot: bytes,
        now_ms: int,
    ) -> None:
        """KIP-405 follower fetch: the leader moved the offsets this replica needs to tiered
        storage; start the local log at ``next_offset`` with the remote segment's epochs and
        producer state (storage.unified_log.Log.start_at_remote_boundary). Followers only."""
        self.check_online()
        if self.leader_state is not None:
            raise PartitionError(ErrorCode.not_leader_or_follower, f"{self.tp}: this replica leads")
        try:
            self.log.start_at_remote_boundary(
                next_offset,
                log_start_offset=log_start_offset,
                epoch_entries=epoch_entries,
                producer_snapshot=producer_snapshot,
                now_ms=now_ms,
            )
        except OSError as e:
            raise self._storage_error(e) from e
        self._follower_hw = next_offset

    def update_follower_state(self, *, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """The high watermark and log start offset the leader reported (Kafka's follower rule:
        the high watermark is the leader's, capped by this log's end)."""
        if self.leader_state is not None:
            return
        self._leader_hw_seen = True
        self._leader_hw = leader_high_watermark
        log = self.log
        if leader_log_start_offset > log.log_start_offset:
            target = min(leader_log_start_offset, log.log_end_offset)
            if target > log.log_start_offset:
                try:
                    log.maybe_increment_log_start_offset(target, "the leader's log start offset moved")
                except OSError as e:
                    raise self._storage_error(e) from e
        hw = min(max(leader_high_watermark, log.log_start_offset), log.log_end_offset)
        if hw != self._follower_hw:
            self._follower_hw = hw
            self.on_change(self.tp)
