"""LocalLog: the segments of one partition dir (Kafka's LocalLog).

Owns the segment files of ``<topic>-<partition>/`` (or of a ``.<hex>-future`` /
``.<hex>-delete`` dir, KIP-113) and nothing above them: the segment map (sorted by
base offset, the last one active), appends to the active segment, rolls, reads by
offset, truncation, segment deletion, flushes, and the renames of the dir itself.
Kafka's offsets it keeps:

* ``log_end_offset`` (LEO): the offset the next appended record gets;
* ``recovery_point``: every offset below it has been fsynced, so recovery after a
  crash only scans segments from there on.

Invariants: there is always at least one segment (the active one); base offsets
strictly increase; ``log_end_offset`` is at or above the active segment's base.
The log start offset, the leader epoch cache, producer state and retention are
not here: they belong to the unified log (storage.unified_log.Log), the only
caller, which decides what to append, truncate or delete; LocalLog does it.
Opening a dir is storage.log_loader's.

Also here: the names of partition dirs (``<topic>-<partition>``, and the
``-delete`` / ``-future`` / ``-stray`` suffixes), which the LogManager parses.

Threading: called from the broker's event-loop thread (the owner) through the
unified log; nothing here takes locks. A `FlushJob` (from `prepare_flush`) fsyncs
duplicated descriptors on a worker thread and never touches the LocalLog.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kavka.common import TopicPartition
from kavka.protocol.records import BatchHeader
from kavka.storage.errors import CorruptIndexError
from kavka.storage.faults import FAULTS
from kavka.storage.log_config import LogConfig
from kavka.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kavka.storage.txn_index import AbortedTxn

log = logging.getLogger("kavka.storage")

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> TopicPartition:
    """``my.topic-name-3`` -> ("my.topic-name", 3): the partition follows the
    LAST '-' (topic names may contain '.', '_' and '-')."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return TopicPartition(topic, int(partition))


def parse_special_dir_name(name: str) -> tuple[str, int, str] | None:
    """``<topic>-<partition>.<uuidhex>-(delete|future|stray)`` -> parts, else None."""
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            base, dot, unique = stem.rpartition(".")
            if not dot or not unique:
                return None
            try:
                topic, partition = parse_partition_dir_name(base)
            except ValueError:
                return None
            return topic, partition, suffix[1:]
    return None


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: bytes
    first_entry_incomplete: bool = False


@dataclass(slots=True)
class FlushJob:
    """fsyncs a worker does for `Log.prepare_flush`: it owns (and closes, once) the duplicated
    descriptors and never touches the Log, so the owner may append meanwhile."""

    dir: Path
    target: int
    files: tuple[tuple[int, Path], ...]  # (dup of the .log descriptor, its path)
    index_paths: tuple[Path, ...]
    unflushed_messages: int
    closed: bool = False

    def run(self) -> None:
        try:
            for fd, path in self.files:
                FAULTS.check(path)
                FAULTS.before_fsync(path)
                os.fsync(fd)
            for path in self.index_paths:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # deleted or not written yet: indexes are rebuilt from the log
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        finally:
            self.close()

    def close(self) -> None:
        """Close the descriptors; idempotent (a second close could hit a reused number)."""
        if self.closed:
            return
        self.closed = True
        for fd, _ in self.files:
            with contextlib.suppress(OSError):
                os.close(fd)


class LocalLog:
    """The segments of one partition dir; built by the unified log from what LogLoader loaded."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        segments: list[LogSegment],
        log_end_offset: int,
        recovery_point: int,
        now_ms: int,
    ) -> None:
        self.dir = Path(dir)
        self.config = config
        special = parse_special_dir_name(self.dir.name)
        # A -future dir holds a replica being moved here (KIP-113).
        self.topic_partition: TopicPartition = (
            TopicPartition(special[0], special[1]) if special is not None else parse_partition_dir_name(self.dir.name)
        )
        self._segments = segments
        self._base_offsets = [s.base_offset for s in segments]
        self._log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._flush_pending_below: int | None = None
        self._flush_in_flight = False  # a FlushJob is out on a worker
        # Set by the LogManager around retention: removed segments' files are only renamed
        # ``.deleted`` and listed here, for a worker to unlink.
        self.deferred_unlinks: list[Path] | None = None
        self._closed = False

    # ------------------------------------------------------------------ facts

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first_segment_base_offset(self) -> int:
        return self._base_offsets[0]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def closed(self) -> bool:
        return self._closed

    def _segment_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (floor)."""
        return max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)

    def segments_from(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (floor) and every later one."""
        return self._segments[self._segment_for(offset) :]

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            now_ms=now_ms,
        )

    # ------------------------------------------------------------------ append and roll

    def append(
        self,
        buf: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        *,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> None:
        """Write whole batches that already carry their offsets to the active segment and move
        the log end past them. The caller rolled first if needed."""
        self.active_segment.append(
            largest_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            records=buf,
            headers=headers,
        )
        self._log_end_offset = last_offset + 1

    def add_unflushed_messages(self, count: int, now_ms: int) -> None:
        """Count an append's messages; at ``flush.messages`` fsync everything now."""
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
            self._last_flush_ms = now_ms

    def roll(
        self,
        now_ms: int,
        *,
        expected_next_offset: int | None = None,
        before_new_segment: Callable[[], None] | None = None,
    ) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO).

        ``before_new_segment`` runs once the old active segment is sealed and before the new one
        is created (the unified log snapshots producer state there)."""
        new_base = max(expected_next_offset or 0, self._log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.is_empty:
                # Kafka: an empty active segment at the same offset is reused.
                return active
            raise RuntimeError(f"cannot roll {self.dir.name}: segment {new_base} already exists")
        active.on_become_inactive()
        if before_new_segment is not None:
            before_new_segment()
        segment = self._new_segment(new_base, now_ms)
        self._segments.append(segment)
        self._base_offsets.append(new_base)
        # Kafka flushes the old segments asynchronously after a roll
        # (flushUptoOffsetExclusive); maybe_flush does it off the append path.
        self._flush_pending_below = new_base
        log.debug("rolled %s to a new segment at offset %d", self.dir.name, new_base)
        return segment

    # ------------------------------------------------------------------ compaction

    def replace_segments(
        self,
        old: list[LogSegment],
        old_sizes: list[int],
        cleaned_dir: Path,
        *,
        now_ms: int,
        aborted_txns: list[AbortedTxn] | None = None,
    ) -> list[Path] | None:
        """Swap the cleaner's output for a group of closed segments (Kafka's ``replaceSegments``).

        ``cleaned_dir`` holds ONE finished, fsynced segment (``.log``, ``.index``,
        ``.timeindex``) with the base offset of ``old[0]`` and the survivors of
        all of ``old``. Returns None, changing nothing, if the group is no longer
        what the cleaner read (a segment was deleted, truncated or replaced, or the
        log closed); else the ``.deleted`` files left for the caller to unlink.
        Crash-safe order: the new ``.log`` becomes ``<base>.log.swap``; the old
        files are renamed ``.deleted``; the new indexes move in; the swap becomes
        ``<base>.log``. `LogLoader` completes a swap it finds (`complete_swaps`).
        ``aborted_txns`` is the new segment's ``.txnindex`` (the cleaner drops the entries of
        aborted transactions whose data is all gone, as Kafka's cleaned index does); None
        carries the old segments' entries over unchanged.
        Event-loop thread (it changes the segment list); renames only, no fsync.
        """
        if self._closed or len(old) != len(old_sizes) or old[-1] is self._segments[-1]:
            return None
        try:
            i = next(k for k, s in enumerate(self._segments) if s is old[0])
        except StopIteration:
            return None
        if self._segments[i : i + len(old)] != old or any(s.size != n for s, n in zip(old, old_sizes, strict=True)):
            return None
        base = old[0].base_offset
        new_log = cleaned_dir / old[0].log_path.name
        swap_path = old[0].log_path.with_name(old[0].log_path.name + SWAP_SUFFIX)
        os.replace(new_log, swap_path)
        leftovers: list[Path] = []
        carried: list[AbortedTxn] = []
        for segment in old:
            segment.close_handles()
            for index in (segment._offset_index, segment._time_index):
                if index is not None:
                    index.close()
            with contextlib.suppress(CorruptIndexError):  # the cleaner keeps transactional data and markers
                carried += segment.txn_index.entries
            segment.txn_index.close()
            for p in (segment.log_path, segment._index_path, segment._time_index_path, segment.txn_index.path):
                target = p.with_name(p.name + DELETED_SUFFIX)
                try:
                    os.replace(p, target)
                    leftovers.append(target)
                except FileNotFoundError:
                    pass
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the .txnindex is carried over below
            src = cleaned_dir / (old[0].log_path.name[: -len(LOG_SUFFIX)] + suffix)
            if src.exists():
                os.replace(src, self.dir / src.name)
        os.replace(swap_path, old[0].log_path)
        new = self._new_segment(base, now_ms)
        for txn in carried if aborted_txns is None else aborted_txns:
            new.txn_index.append(txn)
        self._segments[i : i + len(old)] = [new]
        self._base_offsets = [s.base_offset for s in self._segments]
        return leftovers

    # ------------------------------------------------------------------ read

    def read(
        self,
        fetch_offset: int,
        *,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the batch holding ``fetch_offset``; the caller checked that it is
        in [local log start, log end]. ``max_offset`` is an exclusive bound."""
        leo = self._log_end_offset
        empty = FetchDataInfo(LogOffsetMetadata(fetch_offset), b"")
        if fetch_offset == leo or (max_offset is not None and fetch_offset >= max_offset):
            return empty
        i = self._segment_for(fetch_offset)
        while i < len(self._segments):
            segment = self._segments[i]
            max_position = None
            if max_offset is not None:
                nxt = self._base_offsets[i + 1] if i + 1 < len(self._segments) else leo
                if max_offset < nxt:
                    found = segment.translate_offset(max_offset)
                    max_position = found.position if found is not None else segment.size
            result = segment.read(
                fetch_offset,
                max_bytes,
                max_position=max_position,
                min_one_message=min_one_message,
            )
            if result is not None:
                return FetchDataInfo(
                    LogOffsetMetadata(fetch_offset, segment.base_offset, result.start_position),
                    result.records,
                    result.first_entry_incomplete,
                )
            i += 1
        return empty

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, target_offset: int, *, now_ms: int | None = None) -> None:
        """Remove everything at and above ``target_offset``, which is in [first segment base,
        log end): later segments go, the one holding it is truncated."""
        doomed = [s for s in self._segments if s.base_offset > target_offset]
        self.remove_segments(doomed, reason=f"truncation to offset {target_offset}")
        self.active_segment.truncate_to(target_offset, now_ms=now_ms)
        self._log_end_offset = target_offset

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and restart with one empty segment at ``new_offset``."""
        self.remove_segments(list(self._segments), reason=f"restart at offset {new_offset}")
        segment = self._new_segment(
            new_offset, now_ms if now_ms is not None else self._last_flush_ms
        )
        self._segments = [segment]
        self._base_offsets = [new_offset]
        self._log_end_offset = new_offset

    def reset_after_truncation(self, offset: int, *, full: bool) -> None:
        """After a truncation to ``offset``: nothing at or above it is unflushed any more; after a
        full one the recovery point is ``offset`` and no post-roll flush is pending."""
        if full:
            self.recovery_point = offset
            self._unflushed_messages = 0
            self._flush_pending_below = None
        else:
            self.recovery_point = min(self.recovery_point, offset)
            self._unflushed_messages = 0

    def remove_segments(self, doomed: list[LogSegment], *, reason: str) -> None:
        """Take ``doomed`` out of the segment map and delete their files (renamed ``.deleted``
        first; with `deferred_unlinks` set, the unlinks are left to the caller's worker)."""
        if not doomed:
            return
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._base_offsets = [s.base_offset for s in self._segments]
        for segment in doomed:
            log.info(
                "deleting segment %s of %s (%d bytes): %s",
                segment.base_offset,
                self.dir.name,
                segment.size,
                reason,
            )
            if self.deferred_unlinks is not None:
                self.deferred_unlinks += segment.delete(unlink=False)
            else:
                segment.delete()

    # ------------------------------------------------------------------ flush and lifecycle

    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding offsets in [recovery_point, offset) and
        move the recovery point to ``offset`` (default: the log end)."""
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target > self.recovery_point:
            for segment in self._unflushed_segments(target):
                segment.flush()
        self.recovery_point = max(self.recovery_point, target)
        if target >= self._log_end_offset:
            self._unflushed_messages = 0
        if self._flush_pending_below is not None and self._flush_pending_below <= target:
            self._flush_pending_below = None

    def _unflushed_segments(self, target: int) -> Iterator[LogSegment]:
        """The segments holding offsets in [recovery_point, target): what a flush to `target` fsyncs."""
        for i, segment in enumerate(self._segments):
            upper = self._base_offsets[i + 1] if i + 1 < len(self._segments) else None
            if upper is not None and upper <= self.recovery_point:
                continue
            if segment.base_offset >= target:
                break
            yield segment

    def prepare_flush(self, offset: int | None = None) -> FlushJob | None:
        """`flush` split for a worker thread: here (the owner's thread) pick the segments and
        duplicate their descriptors; `FlushJob.run` fsyncs on any thread; `complete_flush`
        (owner's thread again) moves the recovery point. None if nothing needs an fsync."""
        if self._flush_in_flight or self._closed:
            return None
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target <= self.recovery_point:
            if target >= self._log_end_offset:
                self._unflushed_messages = 0
            if self._flush_pending_below is not None and self._flush_pending_below <= target:
                self._flush_pending_below = None
            return None
        files: list[tuple[int, Path]] = []
        indexes: list[Path] = []
        try:
            for segment in self._unflushed_segments(target):
                fd, index_paths = segment.prepare_flush()
                files.append((fd, segment.log_path))
                indexes += index_paths
        except BaseException:
            for fd, _ in files:
                os.close(fd)
            raise
        self._flush_in_flight = True
        return FlushJob(
            dir=self.dir,
            target=target,
            files=tuple(files),
            index_paths=tuple(indexes),
            unflushed_messages=self._unflushed_messages if target >= self._log_end_offset else 0,
        )

    def complete_flush(self, job: FlushJob, *, ok: bool) -> None:
        """After `FlushJob.run` returned (ok) or raised (not ok: nothing moves)."""
        self._flush_in_flight = False
        if not ok:
            return
        target = min(job.target, self._log_end_offset)  # a truncation meanwhile lowers it
        self.recovery_point = max(self.recovery_point, target)
        self._unflushed_messages = max(self._unflushed_messages - job.unflushed_messages, 0)
        if self._flush_pending_below is not None and self._flush_pending_below <= target:
            self._flush_pending_below = None

    def prepare_maybe_flush(self, now_ms: int) -> FlushJob | None:
        """`maybe_flush`'s policy (flush.ms, the deferred post-roll flush) as a `prepare_flush`."""
        if self._flush_in_flight or self._closed:
            return None
        if self._unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self._last_flush_ms = now_ms
            return self.prepare_flush()
        if self._flush_pending_below is not None:
            return self.prepare_flush(self._flush_pending_below)
        return None

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms policy, and the deferred post-roll flush. True if flushed."""
        if self._unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms
            return True
        if self._flush_pending_below is not None:
            self.flush(self._flush_pending_below)
            return True
        return False

    def close(self) -> None:
        """Close the segments' files; indexes are written out trimmed. No fsync."""
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Rename the dir to ``<topic>-<partition>.<uuidhex>-delete`` (Kafka's
        convention, so a crash mid-delete is finished at the next start), then
        remove it."""
        for segment in self._segments:
            segment.close_handles()
        self._closed = True
        base = partition_dir_name(*self.topic_partition)
        target = self.dir.with_name(f"{base}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(self.dir, target)
        self.dir = target
        shutil.rmtree(target, ignore_errors=True)
