"""TransactionCoordinatorManager: runs the pure TransactionCoordinator on the event loop, over
`__transaction_state`.

It owns what the core (coordinator.transaction) does not:

- the waits: a request handler hands the core a `request_id` and awaits the future parked
  under it, resolved when the core's `TxnReply` for it comes out of `poll`;
- durability: every `AppendTxnRecord` is appended to its `__transaction_state` partition
  acks=all (as Kafka's TransactionStateManager appends with required acks -1), and the core
  hears `on_append` once the high watermark passes it (or the append's error);
- markers: a `WriteMarkers` for partitions this broker leads goes through
  `ReplicaManager.append_end_txn_markers`; those led by other brokers go to `remote_markers`
  (the broker sends WriteTxnMarkers to their leaders, Kafka's marker channel); any failure is
  reported to the core, which resends on a later poll;
- loading: when this broker gains leadership of a `__transaction_state` partition its records
  are replayed into the core (`load`, coordinator epoch = the partition's leader epoch); when
  it loses it, `unload`;
- the timer: `poll` every transaction.abort.timed.out.transaction.cleanup.interval.ms (and after
  every request and outcome, to hand the outbox over at once).

Producer ids: the core's `allocate_producer_id` is synchronous, the controller's blocks are
not; a handler reserves one id (`reserve_producer_id`) before calling the core, and the core
takes it if it needs one (an unused one is simply skipped, as ids are plentiful).

`__transaction_state` is created on the first FindCoordinator for a transaction key, as Kafka
does. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.coordinator.transaction import (
    AppendTxnRecord,
    TransactionCoordinator,
    TxnConfig,
    TxnReply,
    WriteMarkers,
)
from kavka.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kavka.protocol.control_records import ControlRecordType
from kavka.protocol.records import build_batch
from kavka.replication.partition import PartitionError, TopicPartition
from kavka.replication.replica_manager import ReplicaManager

log = logging.getLogger("kavka.coordinator.txn")

# Markers for partitions led by other brokers: (the markers, those partitions) -> error per partition.
RemoteMarkers = Callable[[WriteMarkers, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]

_POLL_TICK_S = 0.1  # how soon a marker write that failed is retried


class NoProducerId(Exception):
    """The core asked for a producer id the handler did not reserve (a bug)."""


# Kafka's partition-load-time sensor keeps metrics.num.samples (2) windows of
# metrics.sample.window.ms (30 s): a load counts for at most this long.
LOAD_TIME_WINDOW_MS = 60_000


class TransactionCoordinatorManager:
    def __init__(
        self,
        *,
        config: TxnConfig,
        replica_manager: ReplicaManager,
        create_topic: Callable[[int], Awaitable[None]],
        now_ms: Callable[[], int],
        topic_partitions: Callable[[str], int | None] = lambda _t: None,
        cleanup_interval_ms: int = 10_000,
        write_timeout_s: float = 5.0,
        remote_markers: RemoteMarkers | None = None,
        crash_point: Callable[[str], None] = lambda _step: None,
    ) -> None:
        """`crash_point` is kavka.faults' test hook: called with "txn-before-commit-markers" as a
        commit's markers are about to be written (after its PrepareCommit is in the log)."""
        self.config = config
        self.core = TransactionCoordinator(config, allocate_producer_id=self._take_producer_id)
        self.replica_manager = replica_manager
        self._create_topic = create_topic
        self.now_ms = now_ms
        self._topic_partitions = topic_partitions
        self.cleanup_interval_ms = cleanup_interval_ms
        self.write_timeout_s = write_timeout_s
        self._remote_markers = remote_markers
        self._crash_point = crash_point
        self._reserved: int | None = None
        self._request_ids = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[TxnReply]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer_task: asyncio.Task[None] | None = None
        self._created = False
        self._led: set[int] = set()
        self._gained = asyncio.Event()  # set when this broker becomes a coordinator: wakes the timer
        # (when, milliseconds) of each partition load, for partition-load-time-max/-avg
        self._load_times: deque[tuple[int, float]] = deque(maxlen=1024)

    def partition_load_time(self, now_ms: int) -> tuple[float, float]:
        """Kafka's ``partition-load-time-max`` and ``-avg`` (group transaction-coordinator-metrics):
        over the loads of the last sample windows, in ms; NaN when there were none (as Kafka's Max
        and Avg with no samples)."""
        recent = [ms for at, ms in self._load_times if now_ms - at < LOAD_TIME_WINDOW_MS]
        if not recent:
            return math.nan, math.nan
        return max(recent), sum(recent) / len(recent)

    # ------------------------------------------------------------ producer ids

    def reserve_producer_id(self, pid: int) -> None:
        self._reserved = pid

    def _take_producer_id(self) -> int:
        pid, self._reserved = self._reserved, None
        if pid is None:
            raise NoProducerId("no producer id reserved for the transaction coordinator")
        return pid

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._timer_task = asyncio.get_running_loop().create_task(self._timer(), name="txn-coordinator")

    async def stop(self) -> None:
        if self._timer_task is not None:
            self._timer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer_task
        for t in list(self._tasks):
            t.cancel()
        for f in self._waiters.values():
            if not f.done():
                f.cancel()
        self._waiters.clear()

    async def _timer(self) -> None:
        # The core's poll fires timeouts and expiry and retries failed marker writes and Complete
        # appends; it runs at least every cleanup interval (in fact every tick, so a retry is prompt).
        # A broker that leads no `__transaction_state` partition has nothing to time out or
        # retry: it sleeps until it gains one (or a cleanup interval passes).
        tick_s = min(_POLL_TICK_S, self.cleanup_interval_ms / 1000)
        while True:
            if self._led:
                await asyncio.sleep(tick_s)
            else:
                self._gained.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._gained.wait(), self.cleanup_interval_ms / 1000)
            try:
                self.drive(self.now_ms())
            except Exception:
                log.exception("transaction coordinator timer failed")

    def transaction_partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self.replica_manager.partitions if tp.topic == TRANSACTION_STATE_TOPIC)

    def sync_leadership(self) -> None:
        """Follow the leadership of `__transaction_state` partitions (after every metadata change)."""
        hosted = set()
        now = self.now_ms()
        for p in self.transaction_partitions():
            part = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, p)
            if part is None:
                continue
            hosted.add(p)
            if part.is_leader and p not in self._led:
                started = time.monotonic()
                records = [(r.key, r.value) for r in part.log.replay_records() if r.key is not None]
                self.core.load(p, part.leader_epoch, records, now)
                self._load_times.append((now, (time.monotonic() - started) * 1000))
                self._led.add(p)
                self._gained.set()
                log.info("became the transaction coordinator of %s-%d (%d records)", TRANSACTION_STATE_TOPIC, p,
                         len(records))
            elif not part.is_leader and p in self._led:
                self._led.discard(p)
                self.core.unload(p)
                log.info("no longer the transaction coordinator of %s-%d", TRANSACTION_STATE_TOPIC, p)
        for p in self._led - hosted:
            self._led.discard(p)
            self.core.unload(p)
        self.drive(now)

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_of(transactional_id)

    async def ensure_topic(self) -> bool:
        """Create `__transaction_state` if it is not there; False if that failed (logged)."""
        if self._created:
            return True
        if self._topic_partitions(TRANSACTION_STATE_TOPIC) is None:
            try:
                await self._create_topic(self.config.transaction_state_log_num_partitions)
            except Exception:
                log.exception("cannot create %s", TRANSACTION_STATE_TOPIC)
                return False
        self._created = True
        return True

    # ------------------------------------------------------------ requests

    async def call(self, request: Callable[[int, int], None]) -> TxnReply:
        """Run `request(request_id, now_ms)` (a core handle_* call) and await its reply."""
        rid = next(self._request_ids)
        fut: asyncio.Future[TxnReply] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        try:
            request(rid, self.now_ms())
            self.drive(self.now_ms())
            return await fut
        finally:
            self._waiters.pop(rid, None)

    # ------------------------------------------------------------ the outbox

    def drive(self, now_ms: int) -> None:
        for action in self.core.poll(now_ms):
            if isinstance(action, TxnReply):
                fut = self._waiters.get(action.request_id)
                if fut is not None and not fut.done():
                    fut.set_result(action)
            elif isinstance(action, AppendTxnRecord):
                self._spawn(self._append(action))
            elif isinstance(action, WriteMarkers):
                self._spawn(self._markers(action))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _append(self, a: AppendTxnRecord) -> None:
        error = ErrorCode.none
        try:
            part = self.replica_manager.get_partition(a.partition.topic, a.partition.partition)
            if part is None:
                raise PartitionError(ErrorCode.not_leader_or_follower)
            now = self.now_ms()
            info = part.append_records_to_leader(build_batch([(now, a.key, a.value)]), required_acks=-1, now_ms=now)
            self.replica_manager.notify_append(a.partition)
            acked = await self.replica_manager.wait_for_acks([(a.partition, info.last_offset + 1)],
                                                             self.write_timeout_s)
            error = next(iter(acked.values()))
        except PartitionError as e:
            error = e.error
        except OSError:
            error = ErrorCode.kafka_storage_error
        except Exception:
            log.exception("appending to %s failed", a.partition)
            error = ErrorCode.unknown_server_error
        self.core.on_append(a.append_id, error, self.now_ms())
        self.drive(self.now_ms())

    async def _markers(self, m: WriteMarkers) -> None:
        if m.commit:
            self._crash_point("txn-before-commit-markers")
        error = ErrorCode.none
        local: list[TopicPartition] = []
        remote: list[TopicPartition] = []
        for tp in sorted(m.partitions):
            part = self.replica_manager.get_partition(tp.topic, tp.partition)
            (local if part is not None and part.is_leader else remote).append(tp)
        if remote:
            if self._remote_markers is None:
                error = ErrorCode.not_leader_or_follower
            else:
                try:
                    for tp, e in (await self._remote_markers(m, remote)).items():
                        if e not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                            log.warning("marker for %s of %s: %s", tp, m.transactional_id, e.name)
                            error = e
                except Exception as e:
                    log.warning("sending markers of %s failed: %r", m.transactional_id, e)
                    error = ErrorCode.not_leader_or_follower
        if local:
            control = ControlRecordType.COMMIT if m.commit else ControlRecordType.ABORT
            try:
                result = self.replica_manager.append_end_txn_markers(
                    local,
                    control,
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    coordinator_epoch=m.coordinator_epoch,
                    timeout_s=self.write_timeout_s,
                    respond=lambda r: r,
                )
                answers = result if isinstance(result, dict) else await result.future
                for tp, resp in answers.items():
                    if resp.error not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                        # A deleted partition needs no marker (Kafka's marker handler drops it).
                        log.warning("marker for %s of %s: %s", tp, m.transactional_id, resp.error.name)
                        error = resp.error
            except Exception:
                log.exception("writing markers for %s failed", m.transactional_id)
                error = ErrorCode.unknown_server_error
        if error != ErrorCode.none:
            await asyncio.sleep(_POLL_TICK_S)  # not a busy loop of resends
        self.core.on_markers(m.markers_id, error, self.now_ms())
        self.drive(self.now_ms())
