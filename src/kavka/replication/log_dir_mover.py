"""Moves of replicas between this broker's log dirs (KIP-113): Kafka's ReplicaAlterLogDirsThread.

`ReplicaAlterLogDirsManager` owns ``num.replica.alter.log.dirs.threads``
mover tasks on the event loop and a queue of partitions to move. A mover
copies the current log into the future log the LogManager created in the
destination dir (``<topic>-<partition>.<hex>-future``), batch by batch as a
follower would (``Log.read`` from the future's log end, then
``append_as_follower``: offsets, leader epochs and batches unchanged), while
produce and fetch keep using the current log. Once the future has caught up
with the log end offset, the swap runs with no ``await`` in it, so no request
sees a half-swapped partition; the old copy is renamed ``-delete`` and
removed on a worker thread. The future is fsynced every ``FLUSH_EVERY`` bytes
during the copy, and both copies once more just before the swap, each time on a
worker thread (``offload``, the broker's StorageIoManager: `Log.prepare_flush`
hands the worker duplicated descriptors), so the fsync the swap itself needs
(the future must be durable before the source is renamed away) covers only what
arrived in the last moments. The chunk reads and appends (1 MiB, page cache)
stay on the loop: the future log is a Log like any other, owned by the loop.

The copy rate is limited by the dynamic broker config
``replica.alter.log.dirs.io.max.bytes.per.second`` (read before every chunk,
shared by all movers, as Kafka's quota is): a pacing throttle that adds
``bytes / rate`` seconds per chunk to a schedule and sleeps until it.

A move stops if its source or destination dir fails (the LogManager drops
the future; the partition goes offline with its source). Test hook:
the broker passes a ``crash_point`` callable (kavka.testing: only with
``kavka.test.fault.injection.enable``) that kills it with SIGKILL at a named
step of a move -- ``future-created``, ``copying``,
``caught-up``, ``source-renamed``, ``future-promoted`` -- so tests can check
KIP-113's recovery after a crash at each. Event-loop thread only (the fsyncs it
hands off touch no Log object).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kavka.replication.partition import TopicPartition
from kavka.replication.replica_manager import ReplicaManager
from kavka.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from kavka.storage.log_manager import LogManager
    from kavka.storage.unified_log import Log

log = logging.getLogger("kavka.replication")

MOVE_STEPS = ("future-created", "copying", "caught-up", "source-renamed", "future-promoted")
UNLIMITED = 2**63 - 1
MAX_CHUNK = 1 << 20
# fsync the future every this many bytes, so the swap (which must fsync the
# future before renaming anything) only flushes a short tail and does not
# stall the event loop for a whole partition's worth of dirty pages.
FLUSH_EVERY = 16 << 20


def _no_crash(step: str) -> None:
    return None


class Throttle:
    """Pacing: each chunk of n bytes takes n / rate seconds of a shared schedule."""

    def __init__(self, rate: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self._next: float | None = None

    def limited(self) -> int | None:
        r = self.rate()
        return None if r <= 0 or r >= UNLIMITED else r

    def delay_for(self, n: int) -> float:
        rate = self.limited()
        if rate is None:
            self._next = None
            return 0.0
        now = self.clock()
        if self._next is None or self._next < now - 1.0:
            self._next = now  # idle for a while: no burst credit beyond one second
        self._next += n / rate
        return max(self._next - now, 0.0)


class ReplicaAlterLogDirsManager:
    def __init__(
        self,
        *,
        replica_manager: ReplicaManager,
        num_threads: int,
        throttle_bytes_per_second: Callable[[], int],
        crash_point: Callable[[str], None] | None = None,
        offload: Callable[[Callable[[], None]], Awaitable[None]] | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        # Runs a callable on a worker thread (the broker's StorageIoManager.run); inline if None.
        self.offload = offload
        self.num_threads = num_threads
        self.throttle = Throttle(throttle_bytes_per_second)
        self.crash_point = crash_point or _no_crash
        self._queue: asyncio.Queue[TopicPartition] | None = None
        self._queued: set[TopicPartition] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._deletes: set[asyncio.Task[None]] = set()
        self.completed: dict[TopicPartition, tuple[int, float]] = {}  # bytes, seconds

    def start(self) -> None:
        self._queue = asyncio.Queue()
        for tp in sorted(self._queued, key=str):
            self._queue.put_nowait(tp)
        loop = asyncio.get_running_loop()
        for i in range(self.num_threads):
            self._tasks.append(loop.create_task(self._worker(), name=f"log-dir-mover-{i}"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
        if self._deletes:
            await asyncio.gather(*self._deletes, return_exceptions=True)

    def add(self, tp: TopicPartition) -> None:
        if tp in self._queued:
            return
        self._queued.add(tp)
        if self._queue is not None:
            self._queue.put_nowait(tp)

    async def _worker(self) -> None:
        assert self._queue is not None
        while True:
            tp = await self._queue.get()
            try:
                await self._move(tp)
            except Exception:
                log.exception("the move of %s failed", tp)
            finally:
                self._queued.discard(tp)

    def _chunk_size(self) -> int:
        rate = self.throttle.limited()
        if rate is None:
            return MAX_CHUNK
        return min(max(rate // 20, 4096), MAX_CHUNK)

    async def _move(self, tp: TopicPartition) -> None:
        rm = self.replica_manager
        lm = rm.log_manager
        key = (tp.topic, tp.partition)
        self.crash_point("future-created")
        started = time.monotonic()
        moved = unflushed = 0
        while True:
            p = rm.partitions.get(tp)
            fut = lm.future_log(key)
            if p is None or fut is None or p.offline:
                log.info("the move of %s stopped: %s", tp, "its future log is gone" if fut is None else "the replica is gone or offline")
                return
            src = p.log
            if fut.log_end_offset < src.log_start_offset:
                # Retention or DeleteRecords passed the copy: skip ahead.
                fut.truncate_fully_and_start_at(src.log_start_offset)
            if fut.log_end_offset >= src.log_end_offset:
                # fsync both copies on a worker first, so the swap's own flush (which must
                # happen before the source is renamed away) covers only what came meanwhile.
                if not await self._flush_off_loop(fut, lm, tp) or not await self._flush_off_loop(src, lm, tp):
                    return
                if lm.future_log(key) is not fut or rm.partitions.get(tp) is not p or p.log is not src:
                    continue  # changed while we waited: look again
                if fut.log_end_offset < src.log_end_offset:
                    continue  # appends arrived meanwhile: copy them first
                try:
                    new = rm.swap_in_future(tp, crash_point=self.crash_point)
                except KafkaStorageError as e:
                    log.error("the move of %s stopped: %s", tp, e)
                    return
                elapsed = time.monotonic() - started
                self.completed[tp] = (moved, elapsed)
                log.info(
                    "moved %s to %s: %d bytes copied in %.3fs (%.0f bytes/s)",
                    tp, new.dir.parent, moved, elapsed, moved / elapsed if elapsed > 0 else 0.0,
                )
                self._schedule_deletes()
                return
            try:
                data = src.read(fut.log_end_offset, max_bytes=self._chunk_size(), min_one_message=True)
            except OSError as e:
                rm.handle_storage_error(src, e)
                return
            n = len(data.records)
            if n:
                try:
                    fut.append_as_follower(data.records, now_ms=rm.now_ms())
                except OSError as e:
                    lm.handle_io_error(fut.dir, e)
                    return
                if moved == 0:
                    self.crash_point("copying")
                moved += n
                unflushed += n
                if unflushed >= FLUSH_EVERY:
                    if not await self._flush_off_loop(fut, lm, tp):
                        return
                    unflushed = 0
            await asyncio.sleep(self.throttle.delay_for(n))

    async def _flush_off_loop(self, lg: Log, lm: LogManager, tp: TopicPartition) -> bool:
        """fsync ``lg`` up to its log end on a worker (`Log.prepare_flush`); False after an I/O error."""
        try:
            job = lg.prepare_flush()
        except OSError as e:
            lm.handle_io_error(lg.dir, e)
            return False
        if job is None:
            return True
        ok = False
        try:
            if self.offload is None:
                job.run()
            else:
                await self.offload(job.run)
            ok = True
        except OSError as e:
            log.error("the move of %s stopped: fsync of %s failed: %s", tp, lg.dir, e)
            lm.handle_io_error(lg.dir, e)
            return False
        finally:
            lg.complete_flush(job, ok=ok)
        return True

    def _schedule_deletes(self) -> None:
        for path in self.replica_manager.log_manager.take_pending_deletes():
            task = asyncio.get_running_loop().create_task(self._delete(path))
            self._deletes.add(task)
            task.add_done_callback(self._deletes.discard)

    async def _delete(self, path: Path) -> None:
        await asyncio.to_thread(shutil.rmtree, path, True)
        log.info("deleted %s", path)
