"""The broker's remote log manager (KIP-405's RemoteLogManager): the task that tiers, expires and
reads remote data on the partitions this broker leads.

Owns the RemoteStorageManager (loaded from ``remote.log.storage.manager.class.name`` and the
``rsm.config.*`` keys), the remote log metadata manager (tiered.topic_metadata) and the remote
reader (tiered.remote_reader). Started and stopped by BrokerNode when
``remote.log.storage.system.enable=true``. Every ``remote.log.manager.task.interval.ms`` it runs one
pass over each partition it leads whose topic has ``remote.storage.enable=true``:

1. **Clean up**: a segment left in COPY_SEGMENT_STARTED (a copy that died, e.g. kill -9) or
   DELETE_SEGMENT_STARTED is deleted from remote storage and marked DELETE_SEGMENT_FINISHED. It was
   never readable (only COPY_SEGMENT_FINISHED segments are), so no reader saw half a segment.
2. **Copy** (unless ``remote.log.copy.disable``): closed segments past the highest copied offset and
   wholly below the last stable offset (tiered.remote_log_rules.segments_to_copy; never the
   active segment), oldest first: COPY_SEGMENT_STARTED is written to ``__remote_log_metadata``, the
   segment's files, producer snapshot, leader-epoch entries and the seed's three remote indexes
   (built here) go to remote storage on a worker thread, then COPY_SEGMENT_FINISHED. The log's
   ``highest_offset_in_remote`` then moves, and only then may local retention (Log) delete the
   segment. Copies are throttled by ``remote.log.manager.copy.max.bytes.per.second``: Kafka's
   quota rule, checked before a copy (a copy starts only once the bytes already sent fit the rate),
   waited for on the event loop, never in a worker.
3. **Expire**: remote segments past total retention (``retention.ms`` / ``retention.bytes`` over
   both tiers) or wholly below the log start offset are deleted (DELETE_SEGMENT_STARTED, delete,
   DELETE_SEGMENT_FINISHED) and the log start offset moves past them (never above the high
   watermark).
4. A topic switched to ``remote.storage.enable=false`` with ``remote.log.delete.on.disable=true``
   (KIP-950) has all its remote segments deleted and its log start offset moved to the local log
   start offset.
5. A deleted topic's remote segments are deleted (found by topic id in the metadata).

Leadership (KIP-405 with replication): every broker runs the task, but only a partition's leader
copies, expires and cleans up; the others only take ``highest_offset_in_remote`` from the metadata
(every broker tails ``__remote_log_metadata``, tiered.topic_metadata), so their local retention
deletes a segment only once the leader's copy of it is finished, as Kafka's followers do
(UnifiedLog.deleteOldSegments with ``highestOffsetInRemoteStorage``). ``sync_leadership`` (called by
BrokerNode when the metadata moves partitions) wakes the task: a new leader starts at once, from
the highest offset the metadata says was copied, and only after it has applied every committed
metadata event of the partition (``ready``): so it never copies again what the old leader
finished, and never leaves a gap (its first segment may start below that offset when its segment
boundaries differ from the old leader's: that overlap is Kafka's too, and the reader takes each
offset from one segment). A copy whose leader epoch changed while it ran is abandoned (its remote
data deleted) instead of being made visible. A follower the leader answers
OFFSET_MOVED_TO_TIERED_STORAGE rebuilds its epochs and producer state from remote storage
(``build_remote_log_aux_state``, tiered.follower) and fetches only the local tail.

Threading: the pass runs on the event loop; every remote-storage call and every file read runs
in ``run_io`` (the broker's StorageIoManager) or in the reader's bounded pool. The logs are only
touched on the event loop. Crash points (kavka.faults, KAVKA_TEST_CRASH_POINT):
``tiered-copy-before-finished`` (the data is in remote storage, COPY_SEGMENT_FINISHED not yet
written).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kavka.protocol.messages import uuid_from_str
from kavka.quota import UNLIMITED, SampledRate
from kavka.storage.txn_index import AbortedTxn
from kavka.storage.unified_log import Log
from kavka.tiered.api import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    TopicIdPartition,
)
from kavka.tiered.metadata import RemoteLogSegmentMetadataUpdate
from kavka.tiered.remote_index import build_remote_indexes
from kavka.tiered.remote_log_rules import (
    LocalSegmentView,
    TieredTopicConfig,
    remote_segments_to_delete,
    segments_to_copy,
    unreferenced_segments,
    within_leader_epochs,
)
from kavka.tiered.remote_reader import RemoteFetch, RemoteLogReader
from kavka.tiered.topic_metadata import TopicBasedRemoteLogMetadataManager

log = logging.getLogger("kavka.tiered")
T = TypeVar("T")
S = RemoteLogSegmentState


def _topic_config(log_: Log) -> TieredTopicConfig:
    c = log_.config
    return TieredTopicConfig(
        remote_storage_enable=c.remote_storage_enable,
        retention_ms=c.retention_ms,
        retention_bytes=c.retention_bytes,
        local_retention_ms=c.local_retention_ms,
        local_retention_bytes=c.local_retention_bytes,
        remote_log_copy_disable=c.remote_log_copy_disable,
        remote_log_delete_on_disable=c.remote_log_delete_on_disable,
    )


def _views(log_: Log) -> list[LocalSegmentView]:
    segs = log_.segments
    out = []
    for i, s in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else log_.log_end_offset
        out.append(LocalSegmentView(base_offset=s.base_offset, last_offset=nxt - 1,
                                    size_in_bytes=s.size, largest_timestamp_ms=s.largest_timestamp))
    return out


def _stage_segment(log_dir: Path, base: int, next_offset: int, segment_id: uuid.UUID,
                   epochs: list[tuple[int, int]]) -> tuple[Path, LogSegmentData]:
    """On a worker: the files of one closed segment, as LogSegmentData (indexes copied into a
    staging dir so a roll or trim of the live index cannot change what is shipped)."""
    stage = Path(tempfile.mkdtemp(prefix="kavka-rlm-"))
    stem = f"{base:020d}"
    seg = log_dir / f"{stem}.log"
    if not seg.exists():
        raise FileNotFoundError(seg)

    def copy_or_empty(src: Path, name: str) -> Path:
        dst = stage / name
        if src.exists():
            shutil.copyfile(src, dst)
        else:
            dst.write_bytes(b"")
        return dst

    offset_index = copy_or_empty(log_dir / f"{stem}.index", f"{stem}.index")
    time_index = copy_or_empty(log_dir / f"{stem}.timeindex", f"{stem}.timeindex")
    txn = log_dir / f"{stem}.txnindex"
    if txn.exists():  # staged like the others: compaction or truncation may rewrite the live file
        txn = copy_or_empty(txn, f"{stem}.txnindex")
    snapshot = copy_or_empty(log_dir / f"{next_offset:020d}.snapshot", f"{next_offset:020d}.snapshot")
    epoch_text = "0\n" + f"{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs)
    idx = build_remote_indexes(seg, base_offset=base, segment_id=segment_id, out_dir=stage)
    data = LogSegmentData(
        log_segment=seg, offset_index=offset_index, time_index=time_index,
        transaction_index=txn if txn.exists() else None, producer_snapshot_index=snapshot,
        leader_epoch_index=epoch_text.encode(), remote_log_index=idx.remote_log_index,
        remote_offset_index=idx.remote_offset_index, remote_time_index=idx.remote_time_index)
    return stage, data


class RemoteLogManager:
    def __init__(
        self,
        *,
        broker_id: int,
        rsm: RemoteStorageManager,
        metadata: TopicBasedRemoteLogMetadataManager,
        replica_manager: Any,
        run_io: Callable[[Callable[[], Any]], Awaitable[Any]],
        now_ms: Callable[[], int],
        interval_ms: int,
        copy_bytes_per_second: Callable[[], int],
        fetch_bytes_per_second: Callable[[], int] = lambda: UNLIMITED,
        fetch_quota_windows: tuple[int, float] = (11, 1.0),
        reader_threads: int = 10,
        crash_point: Callable[[str], None] = lambda _step: None,
        topic_exists: Callable[[uuid.UUID], bool] = lambda _tid: True,
    ) -> None:
        self.broker_id = broker_id
        self.rsm = rsm
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.run_io = run_io
        self.now_ms = now_ms
        self.interval_ms = interval_ms
        self.copy_bytes_per_second = copy_bytes_per_second
        self.crash_point = crash_point
        self.topic_exists = topic_exists
        self.reader = RemoteLogReader(rsm, threads=reader_threads)
        self.fetch_bytes_per_second = fetch_bytes_per_second
        self.fetch_rate = SampledRate(*fetch_quota_windows)  # bytes read from remote storage (KIP-956)
        self.remote_fetches_throttled = 0  # partitions of Fetches not read because of the quota
        self._task: asyncio.Task[None] | None = None
        self._quota_free_at = 0.0  # monotonic time at which the bytes copied so far fit the rate
        self._lineage_cache: dict[Any, tuple[Any, list[RemoteLogSegmentMetadata], list[int]]] = {}
        self.bytes_copied = 0
        self.segments_copied = 0
        self.segments_deleted = 0
        self._wake = asyncio.Event()
        self._led: dict[Any, int] = {}  # partitions this broker leads -> the leader epoch it took
        # followed partitions -> (leader epoch, offset) where the last rebuild from remote storage
        # started them: sent back again from there, the replica is chasing the leader's local start
        self._rebuilt_at: dict[Any, tuple[int, int]] = {}

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> int:
        """Replay __remote_log_metadata and tell each hosted log its highest copied offset."""
        n = self.metadata.load()
        self.sync_logs()
        return n

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="remote-log-manager")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.metadata.close()
        await asyncio.to_thread(self.reader.close)
        await asyncio.to_thread(self.rsm.close)

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # not wait_for: 3.11's can lose stop()'s cancel
                async with asyncio.timeout(max(self.interval_ms, 10) / 1000):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager pass failed")

    # ------------------------------------------------------------------ state

    def tip(self, part: Any) -> TopicIdPartition:
        return TopicIdPartition(uuid_from_str(part.topic_id), part.tp.topic, part.tp.partition)

    def sync_logs(self) -> None:
        for part in list(self.replica_manager.partitions.values()):
            if part.log.config.remote_storage_enable:
                part.log.highest_offset_in_remote = self.highest_in_remote(part)

    # Remote segments on this replica's epoch lineage (remote_log_rules.within_leader_epochs):
    # after an unclean election, what the old leader copied past the point where this log's
    # history diverged is neither read, nor counted as copied, nor counted for retention.

    def _on_lineage(self, part: Any, *, check_end: bool) -> list[RemoteLogSegmentMetadata]:
        lg: Log = part.log
        cache = self.metadata.cache(self.tip(part))
        lineage = tuple((e.epoch, e.start_offset) for e in lg.leader_epoch_cache.epoch_entries())
        if check_end:
            return [m for m in cache.readable() if within_leader_epochs(m, lineage, lg.log_end_offset)]
        return self._on_lineage_by_start(part)[0]

    def _on_lineage_by_start(self, part: Any) -> tuple[list[RemoteLogSegmentMetadata], list[int]]:
        """The lineage's segments by start offset, and their start offsets (cached per metadata
        version and lineage: the read path asks for every remote fetch)."""
        lg: Log = part.log
        cache = self.metadata.cache(self.tip(part))
        lineage = tuple((e.epoch, e.start_offset) for e in lg.leader_epoch_cache.epoch_entries())
        key = (cache.version, lineage)
        hit = self._lineage_cache.get(part.tp)
        if hit is None or hit[0] != key:
            segments = [m for m in cache.readable() if within_leader_epochs(m, lineage)]
            hit = (key, segments, [m.start_offset for m in segments])
            self._lineage_cache[part.tp] = hit
        return hit[1], hit[2]

    def highest_in_remote(self, part: Any) -> int:
        """Kafka's highestOffsetInRemoteStorage on this replica's lineage: -1 when nothing is copied."""
        return max((m.end_offset for m in self._on_lineage(part, check_end=True)), default=-1)

    def sync_leadership(self) -> None:
        """The replica manager applied a metadata change: note the tiered partitions this broker
        now leads or stopped leading, and wake the task so a new leader starts copying at once
        (a copy in flight on a lost leadership is abandoned by ``_copy``)."""
        led: dict[Any, int] = {}
        for part in list(self.replica_manager.partitions.values()):
            if part.is_leader and not part.offline and part.log.config.remote_storage_enable:
                led[part.tp] = part.leader_epoch
        for tp, epoch in led.items():
            if self._led.get(tp) != epoch:
                log.info("remote log manager: leading %s (leader epoch %d): copying from remote offset %d + 1",
                         tp, epoch, self.replica_manager.partitions[tp].log.highest_offset_in_remote)
        for tp in self._led.keys() - led.keys():
            log.info("remote log manager: no longer leading %s: copies and expiry stop here", tp)
        if led != self._led:
            self._led = led
            self._wake.set()

    def remote_size(self, part: Any) -> int:
        return self.metadata.cache(self.tip(part)).remote_size_in_bytes

    # ------------------------------------------------------------------ the pass

    async def _move_log_start(self, lg: Log, offset: int, reason: str) -> None:
        """Advance the log start offset; the local files it drops are unlinked on a worker."""
        lg.deferred_unlinks = []
        try:
            lg.maybe_increment_log_start_offset(offset, reason)
        finally:
            doomed, lg.deferred_unlinks = lg.deferred_unlinks, None
        if doomed:
            await self.run_io(functools.partial(_unlink, doomed))

    def _tiered_hosted(self) -> list[TopicIdPartition]:
        return [self.tip(p) for p in list(self.replica_manager.partitions.values())
                if p.log.config.remote_storage_enable or p.log.config.remote_log_delete_on_disable]

    async def run_once(self) -> None:
        self.metadata.poll()
        try:
            await self.metadata.poll_remote(self._tiered_hosted())
        except (OSError, ConnectionError, TimeoutError, EOFError) as e:
            log.warning("reading __remote_log_metadata from its leaders failed: %r", e)
        self.sync_logs()
        self.sync_leadership()
        for part in list(self.replica_manager.partitions.values()):
            if not part.is_leader or part.offline:
                continue
            cfg = part.log.config
            if (cfg.remote_storage_enable or cfg.remote_log_delete_on_disable) and not self.metadata.ready(self.tip(part)):
                continue  # a new leader: the old one's last events are not applied here yet
            cache = self.metadata.cache(self.tip(part))
            if not cfg.remote_storage_enable:
                if cfg.remote_log_delete_on_disable and (cache.readable() or any(True for _ in cache.unfinished())):
                    await self._delete_all(part)
                continue
            await self._clean_unfinished(part)
            if not cfg.remote_log_copy_disable:
                await self._copy(part)
            await self._expire(part)
        await self._delete_deleted_topics()

    async def _delete_deleted_topics(self) -> None:
        """A deleted topic's remote segments go too (Kafka's RemoteLogManager.stopPartitions with
        deleteRemoteLog): every segment of a topic id the metadata no longer knows."""
        for topic_id, partition in self.metadata.known():
            if self.topic_exists(topic_id):
                continue
            if not self.metadata.leads(TopicIdPartition(topic_id, "", partition)):
                continue  # the leader of its metadata partition cleans up, once
            cache = self.metadata.cache(TopicIdPartition(topic_id, "", partition))
            doomed = [*cache.readable(), *cache.unfinished()]
            for md in doomed:
                await self._delete_remote(md)
            if doomed:
                log.info("deleted %d remote segments of deleted topic %s partition %d",
                         len(doomed), doomed[0].segment_id.topic_id_partition.topic, partition)
            self.metadata.forget_if_empty(topic_id, partition)

    async def _delete_remote(self, md: RemoteLogSegmentMetadata) -> None:
        now = self.now_ms()
        if md.state is not S.DELETE_SEGMENT_STARTED:
            await self.metadata.publish(RemoteLogSegmentMetadataUpdate(
                segment_id=md.segment_id, state=S.DELETE_SEGMENT_STARTED, event_timestamp_ms=now,
                broker_id=self.broker_id))
        await self.run_io(functools.partial(self.rsm.delete_log_segment_data, md))
        await self.metadata.publish(RemoteLogSegmentMetadataUpdate(
            segment_id=md.segment_id, state=S.DELETE_SEGMENT_FINISHED, event_timestamp_ms=self.now_ms(),
            broker_id=self.broker_id))
        self.segments_deleted += 1

    async def _clean_unfinished(self, part: Any) -> None:
        for md in list(self.metadata.cache(self.tip(part)).unfinished()):
            log.info("deleting unfinished remote segment %s of %s (%s)", md.segment_id.id, part.tp, md.state.name)
            await self._delete_remote(md)

    async def _wait_quota(self) -> None:
        delay = self._quota_free_at - time.monotonic()
        if delay > 0:
            if delay >= 1.0:
                log.info("copy throttled: waiting %.1fs for remote.log.manager.copy.max.bytes.per.second", delay)
            await asyncio.sleep(delay)

    def _charge_quota(self, nbytes: int) -> None:
        rate = self.copy_bytes_per_second()
        if rate <= 0 or rate >= 2**62:
            return
        self._quota_free_at = max(self._quota_free_at, time.monotonic()) + nbytes / rate

    async def _copy(self, part: Any) -> None:
        lg: Log = part.log
        tip = self.tip(part)
        highest = self.highest_in_remote(part)
        lso = lg.last_stable_offset(part.high_watermark)  # an open transaction's segments wait (KIP-405)
        epoch = part.leader_epoch
        for view in segments_to_copy(_views(lg), highest_copied_offset=highest, last_stable_offset=lso):
            if view.base_offset < lg.log_start_offset:
                continue  # below the log start offset (DeleteRecords): never tiered
            await self._wait_quota()
            if part.log is not lg or not part.is_leader:
                return  # moved or lost leadership while waiting
            segment_id = RemoteLogSegmentId.generate(tip)
            epochs = [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.epoch_entries()
                      if e.start_offset <= view.last_offset]
            seg_epochs: dict[int, int] = {}  # epoch -> its first offset inside the segment
            for e, o in epochs:
                if o <= view.base_offset:
                    seg_epochs = {e: view.base_offset}
                else:
                    seg_epochs[e] = o
            md = RemoteLogSegmentMetadata(
                segment_id=segment_id, start_offset=view.base_offset, end_offset=view.last_offset,
                max_timestamp_ms=view.largest_timestamp_ms, broker_id=self.broker_id,
                event_timestamp_ms=self.now_ms(), segment_size_in_bytes=view.size_in_bytes,
                segment_leader_epochs=seg_epochs)
            await self.metadata.publish(md)
            next_offset = view.last_offset + 1
            stage: Path | None = None
            try:
                stage, data = await self.run_io(
                    functools.partial(_stage_segment, lg.dir, view.base_offset, next_offset, segment_id.id, epochs))
                await self.run_io(functools.partial(self.rsm.copy_log_segment_data, md, data))
            except Exception:
                log.exception("copying segment %d of %s to remote storage failed; retried next pass",
                              view.base_offset, part.tp)
                with contextlib.suppress(Exception):
                    await self._delete_remote(md)
                return
            finally:
                if stage is not None:
                    shutil.rmtree(stage, ignore_errors=True)
            self.crash_point("tiered-copy-before-finished")
            if not part.is_leader or part.leader_epoch != epoch:
                # Leadership moved while the data was copied: the new leader copies from what
                # the metadata says, so this copy must never become visible (no duplicate).
                log.info("leadership of %s moved during the copy of segment %d: abandoning it", part.tp, view.base_offset)
                with contextlib.suppress(Exception):
                    await self._delete_remote(md)
                return
            await self.metadata.publish(RemoteLogSegmentMetadataUpdate(
                segment_id=segment_id, state=S.COPY_SEGMENT_FINISHED, event_timestamp_ms=self.now_ms(),
                broker_id=self.broker_id))
            self._charge_quota(view.size_in_bytes)
            self.bytes_copied += view.size_in_bytes
            self.segments_copied += 1
            lg.highest_offset_in_remote = self.highest_in_remote(part)
            log.info("copied segment [%d, %d] of %s to remote storage (%d bytes, id %s)", view.base_offset,
                     view.last_offset, part.tp, view.size_in_bytes, segment_id.id)

    async def _expire(self, part: Any) -> None:
        lg: Log = part.log
        cache = self.metadata.cache(self.tip(part))
        lineage = [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.epoch_entries()]
        for md in unreferenced_segments(cache.readable(), lineage):
            log.info("deleting remote segment [%d, %d] of %s: its leader epochs %s precede the leader's lineage",
                     md.start_offset, md.end_offset, part.tp, sorted(md.segment_leader_epochs))
            await self._delete_remote(md)
        remote = self._on_lineage(part, check_end=True)
        if not remote:
            return
        highest = max(m.end_offset for m in remote)
        local_only = sum(v.size_in_bytes for v in _views(lg) if v.base_offset > highest)
        exp = remote_segments_to_delete(remote, config=_topic_config(lg), log_start_offset=lg.log_start_offset,
                                        local_only_bytes=local_only, now_ms=self.now_ms())
        for md in exp.delete:
            new_start = min(md.end_offset + 1, part.high_watermark)
            # the log start offset moves first: no reader is sent to a segment being deleted
            if part.log is lg and new_start > lg.log_start_offset:
                await self._move_log_start(lg, new_start, "remote segment past total retention")
            log.info("deleting remote segment [%d, %d] of %s past total retention", md.start_offset, md.end_offset, part.tp)
            await self._delete_remote(md)

    async def _delete_all(self, part: Any) -> None:
        lg: Log = part.log
        cache = self.metadata.cache(self.tip(part))
        target = min(lg.local_log_start_offset, part.high_watermark)
        if target > lg.log_start_offset:
            await self._move_log_start(lg, target, "remote.log.delete.on.disable")
        for md in [*cache.readable(), *cache.unfinished()]:
            await self._delete_remote(md)
        lg.highest_offset_in_remote = -1
        log.info("deleted the remote data of %s (remote.log.delete.on.disable)", part.tp)

    # ------------------------------------------------------------------ follower fetch

    async def build_remote_log_aux_state(self, part: Any, *, leader_local_log_start_offset: int,
                                         leader_log_start_offset: int) -> int:
        """KIP-405 follower fetch (tiered.follower): start ``part``'s local log where the leader's
        local log starts, with the epochs and producer state of the remote segment before it.
        Returns the offset the follower fetches from next."""
        from kavka.tiered.follower import build_remote_log_aux_state

        self.metadata.poll()
        await self.metadata.poll_remote([self.tip(part)])
        chasing = self._rebuilt_at.get(part.tp) == (part.leader_epoch, part.log_end_offset)
        next_offset = await build_remote_log_aux_state(
            part, cache=self.metadata.cache(self.tip(part)), rsm=self.rsm, run_io=self.run_io,
            leader_local_log_start_offset=leader_local_log_start_offset,
            leader_log_start_offset=leader_log_start_offset, now_ms=self.now_ms(), chasing=chasing)
        self._rebuilt_at[part.tp] = (part.leader_epoch, next_offset)
        return next_offset

    # ------------------------------------------------------------------ reads

    def segment_for(self, part: Any, offset: int) -> RemoteLogSegmentMetadata | None:
        """The remote segment on this replica's lineage holding ``offset`` (or the first after it:
        a gap left by compaction); None past the highest one."""
        segments, starts = self._on_lineage_by_start(part)
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and segments[i].end_offset >= offset:
            return segments[i]
        # Segments of two leaders may overlap: one that starts earlier can still hold it.
        for m in reversed(segments[:max(i, 0)]):
            if m.end_offset >= offset:
                return m
        return segments[i + 1] if i + 1 < len(segments) else None

    def fetch_throttle_ms(self) -> int:
        """> 0 while the bytes read from remote storage are over
        `remote.log.manager.fetch.max.bytes.per.second`: no new remote read starts (kavka.quota)."""
        return self.fetch_rate.throttle_ms(self.fetch_bytes_per_second())

    async def read(self, reqs: list[RemoteFetch]) -> list[bytes | BaseException]:
        results = await self.reader.read_many(reqs)
        self.fetch_rate.record(sum(len(r) for r in results if not isinstance(r, BaseException)))
        return results

    async def aborted_transactions(
        self, part: Any, md: RemoteLogSegmentMetadata, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Kafka's RemoteLogManager.collectAbortedTransactions for a read_committed fetch served
        from ``md``: the ``.txnindex`` of ``md`` and of the remote segments after it on this
        replica's lineage (fetched in the reader's pool, kept in its index cache), then, unless
        that search was complete, the local segments' (on the event loop)."""
        segments = [m for m in self._on_lineage_by_start(part)[0] if m.start_offset >= md.start_offset]
        if md not in segments:
            segments.insert(0, md)
        found, complete = await self.reader.aborted_transactions_async(segments, fetch_offset, upper_bound_offset)
        if not complete:
            for segment in part.log.segments:
                result = segment.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
                found += result.aborted
                if result.complete:
                    break
        return list(dict.fromkeys(found))

    async def record_for_timestamp(self, part: Any, timestamp: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record in remote storage at or above the
        log start offset with a timestamp >= ``timestamp`` (ListOffsets), or None."""
        start = part.log.log_start_offset
        for md in self._on_lineage(part, check_end=False):
            if md.end_offset < start or md.max_timestamp_ms < timestamp:
                continue
            found = await self.reader.record_for_timestamp_async(md, timestamp, start)
            if found is not None:
                return found
        return None


def _unlink(paths: list[Path]) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def rsm_settings(unknown: Mapping[str, str]) -> dict[str, str]:
    from kavka.tiered.backends import rsm_configs

    return rsm_configs(unknown)
