"""GroupCoordinatorManager: runs the pure GroupCoordinator on the event loop, over `__consumer_offsets`.

It owns three things the core does not:

- the waits: a parked JoinGroup/SyncGroup is an asyncio future keyed by the
  core's token, resolved when `drain()` hands out its answer;
- the timer task (which also expires the offsets of empty groups every
  offsets.retention.check.interval.ms): it sleeps until the core's next deadline (at most a short
  tick, so a deadline a request just made earlier is not missed) and calls
  `poll(now)`;
- durability: the records the core emits are appended to the group's
  partition of `__consumer_offsets` (Kafka's key/value formats,
  coordinator.records) and an answer that depends on them (a join, a sync, a
  commit) waits until the high watermark passes them -- they are on every
  in-sync replica, acks=all as Kafka's coordinator writes -- and on
  leadership of a partition every record of it is replayed into the core, so
  the coordinator's state is the log's, not a side file's. When this broker
  stops leading a partition its groups are dropped and their parked joins and
  syncs answer NOT_COORDINATOR (Kafka's onResignation).

Transactional offsets (TxnOffsetCommit, `commit_txn_offsets`) are appended as the producer's
transactional batch and held pending in the core until the transaction's marker reaches the
partition: ReplicaManager's `txn_marker_listeners` call `complete_txn` for each replicated
marker, and a load replays markers in log order (`UnifiedLog.replay_batches`), so an offset
whose marker is not in the log yet stays pending.

`__consumer_offsets` is created on first use (as Kafka does on the first
FindCoordinator for a group), with `offsets.topic.num.partitions` partitions
and cleanup.policy=compact. Time comes from the injected `now_ms`.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.coordinator import records as rec
from kavka.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatResult,
)
from kavka.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupDescription,
    GroupRecord,
    JoinResult,
    MemberDescription,
    OffsetAndMetadata,
    OffsetRecord,
    Parked,
    SyncResult,
)
from kavka.protocol.control_records import ControlRecordType, control_record_type
from kavka.protocol.records import build_batch
from kavka.replication.errors import error_for
from kavka.replication.partition import PartitionError, TopicPartition
from kavka.replication.replica_manager import ReplicaManager

# Kafka's GroupMetadataManager: the error a client gets when storing group metadata or
# offsets in __consumer_offsets fails, by the append's error.
_GROUP_STORE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}
_OFFSET_STORE_ERRORS = {
    **_GROUP_STORE_ERRORS,
    ErrorCode.request_timed_out: ErrorCode.request_timed_out,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
}


@dataclasses.dataclass(frozen=True, slots=True)
class _Waiter:
    group_id: str
    future: asyncio.Future[Any]
    error_result: Callable[[ErrorCode], Any]


def _with_error(result: Any, error: ErrorCode) -> Any:
    """`result` answering `error` instead of success (an error it already carries stays)."""
    if error == ErrorCode.none or getattr(result, "error", ErrorCode.none) != ErrorCode.none:
        return result
    return dataclasses.replace(result, error=error)


def _store_error(exc: BaseException, table: dict[ErrorCode, ErrorCode]) -> ErrorCode:
    if isinstance(exc, PartitionError):
        code = exc.error
    elif isinstance(exc, OSError):
        code = ErrorCode.kafka_storage_error
    else:
        code = ErrorCode.unknown_server_error
    return table.get(code, code)


log = logging.getLogger("kavka.coordinator")

_TIMER_TICK_S = 0.05  # how late a newly earlier deadline (a join, a short session) may fire


class GroupCoordinatorManager:
    def __init__(
        self,
        *,
        config: GroupConfig,
        replica_manager: ReplicaManager,
        num_partitions: int,
        create_offsets_topic: Callable[[int], Awaitable[None]],
        now_ms: Callable[[], int],
        offset_metadata_max_bytes: int = 4096,
        offsets_retention_ms: int = 7 * 24 * 3600 * 1000,
        offsets_retention_check_interval_ms: int = 600_000,
        consumer_config: ConsumerGroupConfig | None = None,
        topic_partitions: Callable[[str], int | None] = lambda _t: None,
    ) -> None:
        self.core = GroupCoordinator(config)
        # KIP-848 groups (ConsumerGroupHeartbeat); their committed offsets live in `core`, like every group's.
        self.consumer = ConsumerGroupCoordinator(consumer_config, topic_partitions=topic_partitions)
        self._topic_partitions = topic_partitions
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self._create_offsets_topic = create_offsets_topic
        self.now_ms = now_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.offsets_retention_ms = offsets_retention_ms
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        self._next_expiry_check_ms = 0
        # parked JoinGroup/SyncGroup: token -> (group, future, the answer carrying an error)
        self._waiters: dict[int, _Waiter] = {}
        self._ack_tasks: set[asyncio.Task[None]] = set()  # answers waiting for their records' replication
        self._task: asyncio.Task[None] | None = None
        self._created = False
        self._led: set[int] = set()  # __consumer_offsets partitions this broker leads and has loaded
        self._written_end: dict[int, int] = {}  # partition -> end of what this coordinator wrote there

    # ------------------------------------------------------------ lifecycle

    def offsets_partitions(self) -> list[int]:
        rm = self.replica_manager
        return sorted(tp.partition for tp in rm.partitions if tp.topic == rec.OFFSETS_TOPIC)

    def load(self) -> int:
        """Replay every `__consumer_offsets` partition this broker leads into the core; records read."""
        hosted = self.offsets_partitions()
        if hosted:
            self.num_partitions = self._topic_partitions(rec.OFFSETS_TOPIC) or max(hosted) + 1
        n = 0
        for p in hosted:
            part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, p)
            if part is not None and part.is_leader:
                n += self._load_partition(p)
        now = self.now_ms()
        self.core.poll(now)  # members whose sessions ran out while the broker was down
        self.core.drain()
        return n

    def _load_partition(self, p: int) -> int:
        """Replay one partition's log (Kafka's GroupMetadataManager.loadGroupsAndOffsets)."""
        part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, p)
        self._led.add(p)
        if part is None:
            return 0
        n = 0
        now = self.now_ms()
        for header, records in part.log.replay_batches():
            if header.is_control:
                # A transaction's marker: its offsets held since their TxnOffsetCommit batch are
                # committed or dropped; a transaction with no marker yet stays pending.
                kind = control_record_type(records[0].key) if header.producer_id >= 0 else None
                if kind is not None:
                    self.core.complete_txn(header.producer_id, kind == ControlRecordType.COMMIT,
                                           lambda g: self.partition_for(g) == p)
                continue
            for r in records:
                n += 1
                try:
                    if header.is_transactional:
                        self._replay_txn_offset(header.producer_id, r.key, r.value, now, r.offset)
                    else:
                        self._replay(r.key, r.value, now, r.offset)
                except (rec.RecordFormatError, UnicodeDecodeError) as e:
                    log.warning("skipping unreadable record at %s-%d@%d: %s", rec.OFFSETS_TOPIC, p, r.offset, e)
        return n

    def _replay_txn_offset(self, producer_id: int, key: bytes | None, value: bytes | None, now: int,
                           position: int) -> None:
        parsed = rec.parse_key(key) if key is not None else None
        if parsed is None or len(parsed) != 3 or value is None:
            return
        group, topic, partition = parsed  # type: ignore[misc]
        tp = (topic, partition)
        self.core.add_pending_txn_offsets(group, producer_id, {tp: rec.parse_offset_value(value)}, now, {tp: position})

    def _unload_partition(self, p: int) -> None:
        """This broker no longer leads `p`: forget its groups (Kafka's onResignation)."""
        self._led.discard(p)
        self._written_end.pop(p, None)
        # Kafka's onResignation: parked joins and syncs of these groups learn the coordinator moved.
        for token, w in list(self._waiters.items()):
            if self.partition_for(w.group_id) == p:
                del self._waiters[token]
                if not w.future.done():
                    w.future.set_result(w.error_result(ErrorCode.not_coordinator))
        for g in [g for g in self.core.groups if self.partition_for(g) == p]:
            del self.core.groups[g]
        for g in [g for g in self.consumer.groups if self.partition_for(g) == p]:
            del self.consumer.groups[g]

    def sync_leadership(self) -> None:
        """Follow the leadership of `__consumer_offsets` partitions: a partition this broker now
        leads is replayed from its log (it becomes the coordinator of its groups); one it stopped
        leading is dropped. Called after every metadata change."""
        hosted = set()
        for p in self.offsets_partitions():
            part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, p)
            if part is None:
                continue
            hosted.add(p)
            if part.is_leader and p not in self._led:
                started = time.monotonic()
                n = self._load_partition(p)
                log.info("became the coordinator of %s-%d: loaded %d records in %.2fs", rec.OFFSETS_TOPIC, p, n,
                         time.monotonic() - started)
            elif not part.is_leader and p in self._led:
                self._unload_partition(p)
                log.info("no longer the coordinator of %s-%d", rec.OFFSETS_TOPIC, p)
        for p in self._led - hosted:
            self._unload_partition(p)

    def _replay(self, key: bytes | None, value: bytes | None, now: int, position: int = -1) -> None:
        if key is None:
            return
        parsed = rec.parse_key(key)
        if parsed is None:
            return
        if len(parsed) == 3:
            group, topic, partition = parsed  # type: ignore[misc]
            v = rec.parse_offset_value(value) if value is not None else None
            self.core.load_offset(group, topic, partition, v, now, position)
        else:
            (group,) = parsed
            self.core.load_group(group, rec.parse_group_value(value) if value is not None else None, now)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer(), name="group-coordinator")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for w in self._waiters.values():
            if not w.future.done():
                w.future.cancel()
        self._waiters.clear()
        for t in list(self._ack_tasks):
            t.cancel()

    async def _timer(self) -> None:
        # A plain bounded sleep, not wait_for on an event: Python 3.11's wait_for can swallow
        # a cancellation that races with the event, and then stop() would wait forever.
        while True:
            deadlines = [d for d in (self.core.next_deadline(), self.consumer.next_deadline()) if d is not None]
            deadline = min(deadlines, default=None)
            now = self.now_ms()
            sleep = _TIMER_TICK_S if deadline is None else min(max(deadline - now, 1) / 1000, _TIMER_TICK_S)
            await asyncio.sleep(sleep)
            try:
                now = self.now_ms()
                self.core.poll(now)
                self.consumer.poll(now)
                if now >= self._next_expiry_check_ms:
                    self._next_expiry_check_ms = now + self.offsets_retention_check_interval_ms
                    active = frozenset(g for g, cg in self.consumer.groups.items() if cg.members)
                    n = self.core.expire_offsets(now, self.offsets_retention_ms, keep=active)
                    if n:
                        log.info("expired %d committed offsets (offsets.retention.ms)", n)
                self._after()
            except Exception:
                log.exception("group coordinator timer failed")

    # ------------------------------------------------------------ plumbing

    def partition_for(self, group_id: str) -> int:
        # The topic as created (the metadata image), whatever offsets.topic.num.partitions says now.
        n = self._topic_partitions(rec.OFFSETS_TOPIC) or self.num_partitions
        return rec.partition_for(group_id, n)

    def owns(self, group_id: str) -> bool:
        """This node leads the group's `__consumer_offsets` partition: it is the group's coordinator.

        In a cluster the partitions are spread over the brokers; a request for a group
        coordinated elsewhere answers NOT_COORDINATOR, and the client asks FindCoordinator again.
        """
        if self._topic_partitions(rec.OFFSETS_TOPIC) is None:
            return True  # no offsets topic yet: the first request creates it (ensure_offsets_topic)
        part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, self.partition_for(group_id))
        return part is not None and part.is_leader

    async def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` if it is not there (awaiting its commit); False if that failed (logged)."""
        if self._created:
            return True
        if not self.offsets_partitions():
            try:
                await self._create_offsets_topic(self.num_partitions)
            except Exception:
                log.exception("cannot create %s", rec.OFFSETS_TOPIC)
                return False
        self._created = True
        return True

    write_timeout_s = 5.0  # Kafka's offsets.commit.timeout.ms default

    def _after(self) -> None:
        """Write what the core emitted, then answer parked requests once their group's records
        are on every in-sync replica (durable first, as Kafka's coordinator answers after the
        high watermark passes its append).

        When the write fails, or does not replicate, every answer waiting on it carries Kafka's
        error for a failed group metadata store (GroupMetadataManager.storeGroup's mapping)
        instead of success: a member must not believe in a generation the log does not hold.
        """
        completions, records = self.core.drain()
        failure = ErrorCode.none
        if records:
            try:
                self._write(records)
            except Exception as e:
                log.exception("writing group metadata to %s failed", rec.OFFSETS_TOPIC)
                failure = _store_error(e, _GROUP_STORE_ERRORS)
        deferred: list[tuple[_Waiter, Any]] = []
        for token, result in completions:
            w = self._waiters.pop(token, None)
            if w is None or w.future.done():
                continue
            if failure == ErrorCode.none and getattr(result, "error", ErrorCode.none) == ErrorCode.none:
                state = self._ack_state(self.partition_for(w.group_id))
                if state is None:
                    deferred.append((w, result))
                    continue
                failure_here = _GROUP_STORE_ERRORS.get(state, state)
            else:
                failure_here = failure
            w.future.set_result(_with_error(result, failure_here))
        if deferred:
            task = asyncio.get_running_loop().create_task(self._answer_when_replicated(deferred))
            self._ack_tasks.add(task)
            task.add_done_callback(self._ack_tasks.discard)

    async def _answer_when_replicated(self, deferred: list[tuple[_Waiter, Any]]) -> None:
        parts = {self.partition_for(w.group_id) for w, _ in deferred}
        errors = {p: await self._replicated(p) for p in parts}
        for w, result in deferred:
            if not w.future.done():
                error = errors[self.partition_for(w.group_id)]
                w.future.set_result(_with_error(result, _GROUP_STORE_ERRORS.get(error, error)))

    def _ack_state(self, p: int) -> ErrorCode | None:
        """NONE if what this coordinator wrote to `p` is replicated (or nothing was), None while
        it is not yet, else the error it will not get there with."""
        end = self._written_end.get(p)
        if end is None:
            return ErrorCode.none
        part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, p)
        return ErrorCode.not_leader_or_follower if part is None else part.acks_all_state(end)

    def _write(self, records: Sequence[GroupRecord | OffsetRecord], *, producer_id: int = -1,
               producer_epoch: int = -1) -> dict[int, int]:
        """Append the records to their groups' partitions; with a producer id, as that
        producer's transactional batch (TxnOffsetCommit: Kafka's AppendOrigin.COORDINATOR, no
        sequence), so the transaction's marker on that partition closes it. Returns the offset
        of the first record written to each partition."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for r in records:
            if isinstance(r, OffsetRecord):
                key = rec.offset_key(r.group_id, r.topic, r.partition)
                value = rec.offset_value(r.value) if r.value is not None else None
            else:
                key = rec.group_key(r.group_id)
                value = rec.group_value(r.snapshot) if r.snapshot is not None else None
            by_partition[self.partition_for(r.group_id)].append((key, value))
        now = self.now_ms()
        firsts: dict[int, int] = {}
        for p, kvs in by_partition.items():
            part = self.replica_manager.get_partition(rec.OFFSETS_TOPIC, p)
            if part is None:
                raise OSError(f"{rec.OFFSETS_TOPIC}-{p} is not hosted here")
            if producer_id >= 0:
                batch = build_batch([(now, k, v) for k, v in kvs], producer_id=producer_id,
                                    producer_epoch=producer_epoch, is_transactional=True)
                info = part.append_records_to_leader(batch, required_acks=-1, now_ms=now, allow_control=True)
            else:
                batch = build_batch([(now, k, v) for k, v in kvs])
                info = part.append_records_to_leader(batch, required_acks=-1, now_ms=now)
            self.replica_manager.notify_append(TopicPartition(rec.OFFSETS_TOPIC, p))
            self._written_end[p] = max(self._written_end.get(p, 0), info.last_offset + 1)
            firsts[p] = info.last_offset + 1 - len(kvs)
        return firsts

    async def _replicated(self, p: int) -> ErrorCode:
        """Wait until what this coordinator wrote to `p` is on every in-sync replica (acks=all, as
        Kafka's coordinator appends); the error to answer with if it did not get there."""
        end = self._written_end.get(p)
        if end is None:
            return ErrorCode.none
        acked = await self.replica_manager.wait_for_acks([(TopicPartition(rec.OFFSETS_TOPIC, p), end)],
                                                         self.write_timeout_s)
        return next(iter(acked.values()))

    async def _wait(self, group_id: str, result: Any, error_result: Callable[[ErrorCode], Any]) -> Any:
        if not isinstance(result, Parked):
            self._after()
            if getattr(result, "error", ErrorCode.none) != ErrorCode.none:
                return result
            error = await self._replicated(self.partition_for(group_id))
            return _with_error(result, _GROUP_STORE_ERRORS.get(error, error))
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[result.token] = _Waiter(group_id, fut, error_result)
        self._after()
        try:
            return await fut
        finally:
            self._waiters.pop(result.token, None)

    # ------------------------------------------------------------ group membership

    async def join_group(self, **kwargs: Any) -> JoinResult:
        if not await self.ensure_offsets_topic():
            return JoinResult(ErrorCode.coordinator_not_available, kwargs.get("member_id", ""))
        if not self.owns(kwargs["group_id"]):
            return JoinResult(ErrorCode.not_coordinator, kwargs.get("member_id", ""))
        cg = self.consumer.groups.get(kwargs["group_id"])
        if cg is not None and cg.members:
            # A classic member cannot join a group run by the consumer protocol (no online migration yet).
            return JoinResult(ErrorCode.inconsistent_group_protocol, kwargs.get("member_id", ""))
        member_id = kwargs.get("member_id", "")
        return await self._wait(kwargs["group_id"], self.core.join_group(now_ms=self.now_ms(), **kwargs),
                                lambda e: JoinResult(e, member_id))

    async def sync_group(self, **kwargs: Any) -> SyncResult:
        if not self.owns(kwargs["group_id"]):
            return SyncResult(ErrorCode.not_coordinator)
        return await self._wait(kwargs["group_id"], self.core.sync_group(now_ms=self.now_ms(), **kwargs),
                                SyncResult)

    def heartbeat(self, **kwargs: Any) -> ErrorCode:
        if not self.owns(kwargs["group_id"]):
            return ErrorCode.not_coordinator
        error = self.core.heartbeat(now_ms=self.now_ms(), **kwargs)
        self._after()
        return error

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        if not self.owns(group_id):
            return ErrorCode.not_coordinator, [ErrorCode.not_coordinator] * len(members)
        out = self.core.leave_group(group_id=group_id, members=members, now_ms=self.now_ms())
        self._after()
        return out

    async def consumer_group_heartbeat(self, **kwargs: Any) -> HeartbeatResult:
        """KIP-848 ConsumerGroupHeartbeat; a classic group with members is not a consumer group."""
        if not await self.ensure_offsets_topic():
            return HeartbeatResult(ErrorCode.coordinator_not_available)
        if not self.owns(kwargs["group_id"]):
            return HeartbeatResult(ErrorCode.not_coordinator)
        classic = self.core.groups.get(kwargs["group_id"])
        if classic is not None and classic.members:
            return HeartbeatResult(ErrorCode.group_id_not_found, f"Group {kwargs['group_id']} is not a consumer group.")
        return self.consumer.heartbeat(now_ms=self.now_ms(), **kwargs)

    # ------------------------------------------------------------ offsets

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        partition_exists: Callable[[str, int], bool],
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Validate, write to the log, then make visible; per-partition Kafka error codes."""
        if not await self.ensure_offsets_topic():
            return dict.fromkeys(offsets, ErrorCode.coordinator_not_available)
        if not self.owns(group_id):
            return dict.fromkeys(offsets, ErrorCode.not_coordinator)
        now = self.now_ms()
        if group_id in self.consumer.groups:
            error = self.consumer.validate_offset_commit(group_id, member_id, generation_id)
            if error == ErrorCode.none and group_id not in self.core.groups:
                # The offsets of a consumer group are kept with every group's (an Empty classic entry).
                self.core.validate_offset_commit(group_id=group_id, generation_id=-1, member_id="",
                                                 group_instance_id=None, now_ms=now)
        else:
            error = self.core.validate_offset_commit(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                now_ms=now,
                unknown_group_error=unknown_group_error,
            )
        self._after()
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        errors, good = self._checked_offsets(offsets, partition_exists, now)
        if good:
            try:
                first = self._write(self.core.offset_records(group_id, good))[self.partition_for(group_id)]
            except Exception as e:
                log.exception("writing committed offsets of group %s failed", group_id)
                errors.update(dict.fromkeys(good, _store_error(e, _OFFSET_STORE_ERRORS)))
                return errors
            acked = await self._replicated(self.partition_for(group_id))
            if acked != ErrorCode.none:
                errors.update(dict.fromkeys(good, _OFFSET_STORE_ERRORS.get(acked, acked)))
                return errors
            self.core.apply_offsets(group_id, good, {tp: first + i for i, tp in enumerate(good)})
            errors.update(dict.fromkeys(good, ErrorCode.none))
        return errors

    def _checked_offsets(
        self, offsets: dict[tuple[str, int], OffsetAndMetadata], partition_exists: Callable[[str, int], bool], now: int
    ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
        """The offsets a commit may write (stamped `now`), and the errors of the others: an unknown
        partition, or metadata over offset.metadata.max.bytes."""
        errors: dict[tuple[str, int], ErrorCode] = {}
        good: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if not partition_exists(*tp):
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(om.metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                good[tp] = OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata, now)
        return errors, good

    async def commit_txn_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        partition_exists: Callable[[str, int], bool],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: write the offsets as `producer_id`'s transactional batch and hold
        them pending until the transaction's marker (`complete_txn`); per-partition errors."""
        if not await self.ensure_offsets_topic():
            return dict.fromkeys(offsets, ErrorCode.coordinator_not_available)
        if not self.owns(group_id):
            return dict.fromkeys(offsets, ErrorCode.not_coordinator)
        now = self.now_ms()
        error = self.core.validate_txn_offset_commit(group_id=group_id, generation_id=generation_id,
                                                     member_id=member_id, group_instance_id=group_instance_id,
                                                     now_ms=now)
        self._after()
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        errors, good = self._checked_offsets(offsets, partition_exists, now)
        if good:
            try:
                first = self._write(self.core.offset_records(group_id, good), producer_id=producer_id,
                                    producer_epoch=producer_epoch)[self.partition_for(group_id)]
            except Exception as e:
                code = error_for(e)[0] if not isinstance(e, OSError) else ErrorCode.kafka_storage_error
                if code != ErrorCode.invalid_producer_epoch:
                    log.exception("writing transactional offsets of group %s failed", group_id)
                errors.update(dict.fromkeys(good, _OFFSET_STORE_ERRORS.get(code, code)))
                return errors
            # Pending from the append on, so a marker written while this waits for the replicas
            # (the coordinator aborting a timed-out transaction) finds them (Kafka adds them
            # before its append and fails them if the append fails).
            positions = {tp: first + i for i, tp in enumerate(good)}
            self.core.add_pending_txn_offsets(group_id, producer_id, good, now, positions)
            acked = await self._replicated(self.partition_for(group_id))
            if acked != ErrorCode.none:
                self.core.fail_pending_txn_offsets(group_id, producer_id, positions)
                errors.update(dict.fromkeys(good, _OFFSET_STORE_ERRORS.get(acked, acked)))
                return errors
            errors.update(dict.fromkeys(good, ErrorCode.none))
        return errors

    def complete_txn(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        """A transaction's marker was written to `tp` (ReplicaManager.txn_marker_listeners): on a
        `__consumer_offsets` partition this broker coordinates, that producer's pending offsets
        are committed or dropped (Kafka's GroupCoordinator.onTransactionCompleted)."""
        if tp.topic != rec.OFFSETS_TOPIC or tp.partition not in self._led:
            return
        self.core.complete_txn(producer_id, commit, lambda g: self.partition_for(g) == tp.partition)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        """An open transaction holds an offset for `tp`: OffsetFetch asking for stable offsets
        answers UNSTABLE_OFFSET_COMMIT for it (KIP-447)."""
        return self.core.has_pending_txn_offset(group_id, tp)

    def fetch_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        return self.core.fetch_offsets(group_id, partitions)

    # ------------------------------------------------------------ admin

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups' view; a KIP-848 group is shown the classic way (assignments encoded as
        ConsumerProtocolAssignment) so classic tools, kavka's CLI among them, can read it."""
        cg = self.consumer.groups.get(group_id)
        if cg is None or not cg.members:
            return self.core.describe_group(group_id)
        members = tuple(
            MemberDescription(m.member_id, m.instance_id, m.client_id, m.client_host, b"",
                              rec.consumer_assignment_bytes(m.assigned))
            for m in cg.members.values()
        )
        assignors = [m.assignor for m in cg.members.values() if m.assignor]
        return GroupDescription(group_id, cg.state, "consumer", max(set(assignors), key=assignors.count) if assignors else "uniform", members)

    def consumer_group_describe(self, group_id: str) -> ConsumerGroup | ErrorCode:
        """ConsumerGroupDescribe's view (KIP-848): the consumer-protocol group, or NOT_COORDINATOR
        when this node is not its coordinator, or GROUP_ID_NOT_FOUND when no such group exists
        (a classic group included: Kafka's admin client then asks DescribeGroups)."""
        if not self.owns(group_id):
            return ErrorCode.not_coordinator
        cg = self.consumer.groups.get(group_id)
        return ErrorCode.group_id_not_found if cg is None else cg

    def list_groups(self, states: Sequence[str] = ()) -> list[tuple[str, str, str]]:
        wanted = {s.lower() for s in states}
        consumer = {
            g: ("consumer", cg.state) for g, cg in self.consumer.groups.items()
            if cg.members and (not wanted or cg.state.lower() in wanted)
        }
        classic = [x for x in self.core.list_groups(states) if x[0] not in consumer]
        return sorted(classic + [(g, pt, st) for g, (pt, st) in consumer.items()])

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        now = self.now_ms()
        out = {}
        for g in group_ids:
            cg = self.consumer.groups.get(g)
            if cg is not None and cg.members:
                out[g] = ErrorCode.non_empty_group
                continue
            self.consumer.groups.pop(g, None)
            out[g] = self.core.delete_group(g, now)
        self._after()
        return out

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        out = self.core.delete_offsets(group_id, partitions, rec.consumer_subscription_topics)
        self._after()
        return out
