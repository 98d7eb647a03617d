"""Log compaction (Kafka's LogCleaner, Cleaner and LogCleanerManager) for cleanup.policy=compact logs.

Theory of operation. A log is split at two offsets:

    log start ... first_dirty_offset ... first_uncleanable_offset ... log end
    |-- clean (compacted before) --|-- dirty --|-- uncleanable --|

`first_dirty_offset` is where the previous pass stopped (the per-log-dir
``cleaner-offset-checkpoint``, Kafka's file). `first_uncleanable_offset` is
the lowest of: the active segment's base offset (the active segment is never
touched), the high watermark, and the base of the first segment holding a
record younger than min.compaction.lag.ms. A log is due when its dirty share
of the cleanable bytes is above min.cleanable.dirty.ratio, or when a dirty
closed segment's first batch is older than max.compaction.lag.ms (Kafka's
``needCompactionNow``: cleaned whatever the ratio).

A pass (Kafka's ``Cleaner.doClean``):

1. Offset map. `SkimpyOffsetMap` is Kafka's: a fixed table of 24-byte slots
   (16-byte MD5 of the key + 8-byte offset) in one bytearray of at most
   ``log.cleaner.dedupe.buffer.size`` bytes, filled to
   ``log.cleaner.io.buffer.load.factor`` of its slots. It is built from the
   dirty section only -- from the index position of the first dirty offset
   on, never from segments cleaned before -- and stops when full. The pass then
   cleans up to ``map.latest_offset + 1`` and checkpoints that offset, so a
   dirty section larger than the map is cleaned in several passes.
2. Grouping (``groupSegmentsBySize``): the segments below that offset, from the
   log start, are grouped so that each group's log bytes fit segment.bytes and
   its index bytes fit segment.index.bytes; each group becomes ONE segment,
   so small segments left by earlier passes are merged.
3. Cleaning a group: every segment is read in chunks of
   ``log.cleaner.io.buffer.size / 2`` (a batch larger than that is read whole,
   as Kafka grows its buffer), never whole. A record is kept if it is past
   the map (offset > map.latest_offset), or it has a key and is the latest
   for it, and -- for a tombstone (null value) -- its batch has no delete
   horizon yet or the horizon is still ahead. Offsets never change: a batch
   keeps its base offset, survivors keep theirs (gaps are fine); a batch left
   with no records disappears; compressed batches are rebuilt with the same
   codec and keep producer id/epoch, base sequence, leader epoch, timestamp
   type.
4. Delete horizon (KIP-534): the first pass that keeps a tombstone rebuilds
   its batch with the delete-horizon attribute bit (0x40) set and
   ``baseTimestamp = now + delete.retention.ms`` (record timestamps are deltas
   from it, so they are unchanged). The horizon is on disk in the batch, so a
   restart keeps it; a tombstone goes in the first pass after its horizon,
   however old its CreateTime.

Memory: the map (<= dedupe.buffer.size), one read chunk, one write buffer
(each io.buffer.size / 2), plus the largest batch being decoded.

Threads. `clean_log_steps` is a generator: the parts that only read segment
files and write the new one (building the map, writing a group into
``<partition dir>/cleaner-tmp/``) are yielded as callables to run on a worker
thread; the planning (sizes, index lookups) and the swap of each group into
the Log (`Log.replace_segments`) run where the generator is driven -- the
event loop. Workers open their own file descriptors, touch no LogSegment
state, and the swap refuses if a segment changed meanwhile (retention,
truncation, deletion), so the pass is just abandoned and done again.
`drive_inline` runs the steps on the calling thread (tests, tools).

Known simplification: Kafka keeps the last batch of every idempotent producer
(emptied if need be) so producer state survives compaction; kavka does not yet.
Transactions (docs/transactions.md): nothing at or past the last stable offset is cleaned; the
records of aborted transactions (found through the .txnindex) are kept out of the offset map and
dropped from the cleaned segments, as Kafka's cleaner does, so an aborted value never shadows an
older committed one. Markers (Kafka's CleanedTransactionMetadata, `_TxnTracker`): walking the pass
in offset order, a marker is kept while a data batch of its transaction was read since the
transaction began; once none was (the aborted data went in an earlier pass, or the committed
records were all compacted away) the first pass to see it stamps its delete horizon (bit 0x40,
``baseTimestamp = now + delete.retention.ms``, as for a tombstone) and a pass after the horizon
removes it. Data always goes at least one pass before its marker, so a read_committed reader never
sees aborted data come back. A cleaned segment's .txnindex holds only the aborted transactions
whose data was still read in the pass (LocalLog.replace_segments).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kavka.protocol.control_records import ControlRecordType, control_record_type
from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Record,
    decode_batch,
    parse_header,
    rebuild_batch,
)
from kavka.storage.checkpoints import fsync_dir
from kavka.storage.faults import FAULTS
from kavka.storage.segment import LogSegment
from kavka.storage.txn_index import AbortedTxn
from kavka.storage.unified_log import Log

log = logging.getLogger("kavka.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEANER_TMP_DIR = "cleaner-tmp"
_SLOT = 24  # 16-byte MD5 + 8-byte offset, as SkimpyOffsetMap
_HASH = 16

T = TypeVar("T")
Steps = Generator[Callable[[], Any], Any, T]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (Kafka's CleanerConfig)."""

    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size (read + write buffers)
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor

    @property
    def max_map_slots(self) -> int:
        return max(self.dedupe_buffer_size // _SLOT, 1)


@dataclass(frozen=True, slots=True)
class CleanResult:
    first_dirty_offset: int
    end_offset: int  # the next pass starts here (the checkpoint)
    first_uncleanable_offset: int
    segments_cleaned: int  # old segments replaced
    segments_after: int  # the segments that replaced them
    records_removed: int
    bytes_before: int
    bytes_after: int
    map_full: bool  # the dirty section did not fit the map: another pass follows


class CleanAbortedError(Exception):
    """The log changed under the pass (retention, truncation, deletion); it is done again later."""


# --------------------------------------------------------------------------- the offset map


class SkimpyOffsetMap:
    """key -> last offset, in a fixed bytearray of 24-byte slots (Kafka's SkimpyOffsetMap).

    Keys are MD5-hashed; two keys with the same hash count as one (Kafka
    accepts the same 2^-128 risk). Linear probing; an all-zero slot is empty.
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(slots, 1)
        self._bytes = bytearray(self.slots * _SLOT)
        self.size = 0
        self.latest_offset = -1

    @property
    def memory(self) -> int:
        return len(self._bytes)

    def _find(self, digest: bytes) -> int:
        """Byte position of the slot holding ``digest``, or of the empty slot where it goes."""
        b = self._bytes
        i = int.from_bytes(digest[:8], "big") % self.slots
        for _ in range(self.slots):
            pos = i * _SLOT
            h = b[pos : pos + _HASH]
            if h == digest or not any(h):
                return pos
            i = i + 1 if i + 1 < self.slots else 0
        raise OverflowError("the offset map is full")

    def put(self, key: bytes, offset: int) -> None:
        digest = hashlib.md5(key).digest()
        pos = self._find(digest)
        b = self._bytes
        if not any(b[pos : pos + _HASH]):
            b[pos : pos + _HASH] = digest
            self.size += 1
        b[pos + _HASH : pos + _SLOT] = offset.to_bytes(8, "big", signed=True)
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset of ``key``, -1 if not in the map."""
        digest = hashlib.md5(key).digest()
        pos = self._find(digest)
        b = self._bytes
        if b[pos : pos + _HASH] != digest:
            return -1
        return int.from_bytes(b[pos + _HASH : pos + _SLOT], "big", signed=True)


# --------------------------------------------------------------------------- which logs, which offsets


def first_uncleanable_offset(lg: Log, *, high_watermark: int, now_ms: int) -> int:
    segments = lg.segments
    # Kafka's cleanableOffsets: nothing at or past the last stable offset (an open transaction's
    # records may still be aborted) is cleaned.
    limit = min(segments[-1].base_offset, lg.last_stable_offset(high_watermark))
    lag = lg.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segments[:-1]:
            if seg.largest_timestamp > now_ms - lag:
                limit = min(limit, seg.base_offset)
                break
    return limit


def _dirty_and_clean_bytes(lg: Log, first_dirty: int, first_uncleanable: int) -> tuple[int, int]:
    clean = dirty = 0
    segments = lg.segments
    for i, seg in enumerate(segments[:-1]):
        end = segments[i + 1].base_offset
        if end > first_uncleanable:
            break
        if end <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size  # a segment straddling the dirty point counts as dirty
    return dirty, clean


def dirty_ratio(lg: Log, first_dirty: int, first_uncleanable: int) -> float:
    dirty, clean = _dirty_and_clean_bytes(lg, first_dirty, first_uncleanable)
    total = clean + dirty
    return dirty / total if total else 0.0


def max_compaction_delay(lg: Log, first_dirty: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty closed segment is (0: not overdue).

    Kafka's ``LogCleanerManager.maxCompactionDelay``: the first batch timestamp
    of each dirty non-active segment, ignoring those <= 0.
    """
    lag = max(lg.config.max_compaction_lag_ms, 0)
    clean_until = now_ms - lag
    segments = lg.segments
    earliest = None
    for i, seg in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= first_dirty:
            continue
        ts = seg.first_batch_timestamp()
        if ts is not None and ts > 0 and (earliest is None or ts < earliest):
            earliest = ts
    if earliest is not None and earliest < clean_until:
        return clean_until - earliest
    return 0


# --------------------------------------------------------------------------- a pass


@dataclass(frozen=True, slots=True)
class _SegmentRef:
    segment: LogSegment  # identity only: a worker never calls it
    base_offset: int
    path: Path
    size: int
    max_index_bytes: int  # upper bound of its .index/.timeindex bytes


@dataclass(frozen=True, slots=True)
class _Plan:
    dir: Path
    name: str
    first_dirty: int
    first_uncleanable: int
    start_position: int  # of the batch holding first_dirty, in the segment holding it
    segments: tuple[_SegmentRef, ...]  # every closed segment below first_uncleanable
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    delete_retention_ms: int
    cleaner: CleanerConfig
    # producer id -> (first offset, marker offset) of each of its aborted transactions below
    # first_uncleanable, from the .txnindex files: their records are neither mapped nor kept.
    aborted: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    aborted_txns: tuple[AbortedTxn, ...] = ()

    def is_aborted(self, header: BatchHeader) -> bool:
        """A data batch of an aborted transaction (Kafka's cleaner discards them)."""
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last for first, last in self.aborted.get(header.producer_id, ()))


def _plan(lg: Log, *, first_dirty_offset: int, high_watermark: int, now_ms: int, force: bool, cleaner: CleanerConfig) -> _Plan | None:
    if not lg.config.compact_enabled:
        return None
    first_dirty = first_dirty_offset
    if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
        first_dirty = lg.log_start_offset  # Kafka's cleanableOffsets: reset an invalid checkpoint
    first_uncleanable = first_uncleanable_offset(lg, high_watermark=high_watermark, now_ms=now_ms)
    if first_dirty >= first_uncleanable:
        return None
    dirty, clean = _dirty_and_clean_bytes(lg, first_dirty, first_uncleanable)
    if dirty == 0:
        return None
    ratio = dirty / (dirty + clean)
    overdue = max_compaction_delay(lg, first_dirty, now_ms) > 0
    if not force and not overdue and not ratio > lg.config.min_cleanable_dirty_ratio:
        return None
    segments = lg.segments
    refs = []
    start_position = 0
    interval = max(lg.config.index_interval_bytes, 1)
    for i, seg in enumerate(segments[:-1]):
        if seg.base_offset >= first_uncleanable:
            break
        nxt = segments[i + 1].base_offset
        if seg.base_offset <= first_dirty < nxt:
            found = seg.translate_offset(first_dirty)
            start_position = found.position if found is not None else seg.size
        refs.append(_SegmentRef(seg, seg.base_offset, seg.log_path, seg.size, (seg.size // interval + 1) * 12))
    aborted: dict[int, list[tuple[int, int]]] = {}
    aborted_txns = lg.collect_aborted_transactions(lg.log_start_offset, first_uncleanable)
    for txn in aborted_txns:
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return _Plan(
        dir=lg.dir,
        name=lg.dir.name,
        first_dirty=first_dirty,
        first_uncleanable=first_uncleanable,
        start_position=start_position,
        segments=tuple(refs),
        segment_bytes=lg.config.segment_bytes,
        segment_index_bytes=lg.config.segment_index_bytes,
        index_interval_bytes=lg.config.index_interval_bytes,
        delete_retention_ms=lg.config.delete_retention_ms,
        cleaner=cleaner,
        aborted={pid: tuple(ranges) for pid, ranges in aborted.items()},
        aborted_txns=tuple(aborted_txns),
    )


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: the transactions the pass is inside of, walking the
    cleaned groups in offset order (one tracker for the whole pass, so a transaction may span
    groups). It says which data batches are aborted (dropped) and which markers no longer cover
    any data (removable once their delete horizon has passed), and collects the aborted
    transactions the cleaned group's ``.txnindex`` keeps: those whose data was still there."""

    def __init__(self, aborted: tuple[AbortedTxn, ...]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._committed: set[int] = set()  # producer ids with a data batch read since their last marker
        # producer id -> (its aborted transaction, whether a data batch of it was read)
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self.kept: list[AbortedTxn] = []  # .txnindex entries of the group being cleaned

    def _reach(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch; True if it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            self._aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, records: list[Record]) -> bool:
        """A control batch; True if it no longer covers data of its transaction (Kafka then
        stamps a delete horizon on it and removes it once that has passed)."""
        self._reach(header.last_offset)
        if not records:
            return True  # an emptied control batch
        try:
            kind = control_record_type(records[0].key)
        except ValueError:
            return False
        if kind == ControlRecordType.ABORT:
            ongoing = self._aborted.pop(header.producer_id, None)
            if ongoing is not None and ongoing[1]:
                self.kept.append(ongoing[0])  # its data was there: keep the marker and the entry
                return False
            return True
        if kind == ControlRecordType.COMMIT:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return False


def _iter_file_batches(path: Path, start: int, end: int, chunk: int) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(buffer, position in it, header) of each whole batch in [start, end), read ``chunk`` bytes at a time."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = start
        while end - pos >= BATCH_HEADER_SIZE:
            FAULTS.check(path)
            buf = os.pread(fd, min(max(chunk, BATCH_HEADER_SIZE), end - pos), pos)
            rel = 0
            while len(buf) - rel >= BATCH_HEADER_SIZE:
                header = parse_header(buf, rel)
                if rel + header.size_in_bytes > len(buf):
                    break
                yield buf, rel, header
                rel += header.size_in_bytes
            if rel == 0:
                # One batch larger than the buffer: read it whole (Kafka grows its read buffer).
                header = parse_header(buf, 0)
                if pos + header.size_in_bytes > end:
                    return  # a torn tail; recovery deals with it
                buf = os.pread(fd, header.size_in_bytes, pos)
                yield buf, 0, header
                rel = header.size_in_bytes
            pos += rel
    finally:
        os.close(fd)


def _build_offset_map(plan: _Plan) -> SkimpyOffsetMap:
    """Worker: the map over the dirty section, stopping when it is full (Kafka's buildOffsetMap)."""
    c = plan.cleaner
    # Never more slots than offsets in the dirty section: a small log does not pay for 128 MiB.
    wanted = int((plan.first_uncleanable - plan.first_dirty) / c.io_buffer_load_factor) + 1
    offset_map = SkimpyOffsetMap(min(c.max_map_slots, wanted))
    max_entries = max(int(offset_map.slots * c.io_buffer_load_factor), 1)
    refs = plan.segments
    for i, ref in enumerate(refs):
        nxt = refs[i + 1].base_offset if i + 1 < len(refs) else plan.first_uncleanable
        if nxt <= plan.first_dirty:
            continue
        start = plan.start_position if ref.base_offset <= plan.first_dirty else 0
        for buf, rel, header in _iter_file_batches(ref.path, start, ref.size, c.io_buffer_size // 2):
            if header.base_offset >= plan.first_uncleanable:
                break
            if header.last_offset < plan.first_dirty:
                continue
            if not header.is_control and not plan.is_aborted(header):
                for r in decode_batch(buf, rel)[1]:
                    if r.key is not None and plan.first_dirty <= r.offset < plan.first_uncleanable:
                        if offset_map.size >= max_entries and offset_map.get(r.key) < 0:
                            return offset_map  # full: this pass ends before r
                        offset_map.put(r.key, r.offset)
            offset_map.latest_offset = max(offset_map.latest_offset, min(header.last_offset, plan.first_uncleanable - 1))
        # Offsets past the last batch of a segment (gaps) are covered too.
        offset_map.latest_offset = max(offset_map.latest_offset, nxt - 1)
    return offset_map


def group_segments_by_size(
    sizes: list[tuple[int, int, int]], *, max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[int]]:
    """Kafka's ``groupSegmentsBySize`` over (base offset, log bytes, index bytes); returns index groups.

    A group's log bytes stay within segment.bytes and its index bytes within
    segment.index.bytes, and its offsets fit an int32 relative to its base.
    """
    groups: list[list[int]] = []
    i = 0
    while i < len(sizes):
        group = [i]
        log_size, index_size = sizes[i][1], sizes[i][2]
        i += 1
        while i < len(sizes):
            base, size, idx = sizes[i]
            last_offset = sizes[i + 1][0] - 1 if i + 1 < len(sizes) else first_uncleanable - 1
            if (
                log_size + size > max_size
                or index_size + idx > max_index_size
                or (size != 0 and last_offset - sizes[group[-1]][0] > 2**31 - 1)
            ):
                break
            group.append(i)
            log_size += size
            index_size += idx
            i += 1
        groups.append(group)
    return groups


@dataclass(frozen=True, slots=True)
class _CleanedGroup:
    refs: tuple[_SegmentRef, ...]
    tmp_dir: Path | None  # None: nothing changed, the segment stays as it is
    records_removed: int
    bytes_before: int
    bytes_after: int
    # The cleaned segment's .txnindex: the group's aborted transactions whose data it still holds.
    aborted_txns: tuple[AbortedTxn, ...] = ()


def _clean_group(
    plan: _Plan, refs: tuple[_SegmentRef, ...], offset_map: SkimpyOffsetMap, now_ms: int, txns: _TxnTracker | None = None
) -> _CleanedGroup:
    """Worker: write the group's survivors as one segment in ``cleaner-tmp/`` (Kafka's cleanSegments)."""
    c = plan.cleaner
    if txns is None:
        txns = _TxnTracker(plan.aborted_txns)
    txns.kept = []
    tmp_dir = plan.dir / CLEANER_TMP_DIR
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir()
    out = LogSegment(
        tmp_dir,
        refs[0].base_offset,
        index_interval_bytes=plan.index_interval_bytes,
        max_index_size=plan.segment_index_bytes,
        now_ms=now_ms,
    )
    pending = bytearray()
    headers: list[BatchHeader] = []
    write_limit = max(c.io_buffer_size // 2, 1)
    removed = before = 0
    changed = len(refs) > 1
    horizon = now_ms + plan.delete_retention_ms

    def write_out() -> None:
        if not headers:
            return
        max_ts, offset_of_max = -1, headers[0].last_offset
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        out.append(
            largest_offset=headers[-1].last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            records=pending,
            headers=list(headers),
        )
        pending.clear()
        headers.clear()

    try:
        for ref in refs:
            before += ref.size
            for buf, rel, header in _iter_file_batches(ref.path, 0, ref.size, c.io_buffer_size // 2):
                size = header.size_in_bytes
                if header.is_control:
                    _, markers = decode_batch(buf, rel)
                    if not txns.on_marker(header, markers):
                        kept_bytes: bytes | memoryview = memoryview(buf)[rel : rel + size]
                    elif not header.has_delete_horizon:
                        # Its transaction's data is gone: stamp the horizon (KIP-534), as for a tombstone.
                        changed = True
                        kept_bytes = rebuild_batch(header, markers, delete_horizon_ms=horizon)
                    elif now_ms < header.base_timestamp:
                        kept_bytes = memoryview(buf)[rel : rel + size]
                    else:
                        removed += header.records_count
                        changed = True
                        continue
                elif txns.on_batch(header):
                    removed += header.records_count
                    changed = True
                    continue
                else:
                    _, records = decode_batch(buf, rel)
                    keep: list[Record] = []
                    has_tombstone = False
                    for r in records:
                        if _retain(r, header, offset_map, now_ms):
                            keep.append(r)
                            has_tombstone = has_tombstone or r.value is None
                    removed += len(records) - len(keep)
                    needs_horizon = has_tombstone and not header.has_delete_horizon
                    if not keep:
                        changed = True
                        continue
                    if len(keep) == len(records) and not needs_horizon:
                        kept_bytes = memoryview(buf)[rel : rel + size]  # untouched: the exact bytes
                    else:
                        changed = True
                        kept_bytes = rebuild_batch(
                            header,
                            keep,
                            delete_horizon_ms=horizon if needs_horizon else (header.base_timestamp if header.has_delete_horizon else None),
                        )
                pending += kept_bytes
                headers.append(parse_header(kept_bytes))
                if len(pending) >= write_limit:
                    write_out()
        write_out()
        if not changed:
            out.close()
            shutil.rmtree(tmp_dir, ignore_errors=True)
            return _CleanedGroup(refs, None, 0, before, before, ())
        out.on_become_inactive()
        out.flush()
        after = out.size
        out.close()
        # Keep the last segment's mtime, as Kafka does (retention.ms falls back on it).
        st = os.stat(refs[-1].path)
        os.utime(out.log_path, ns=(st.st_atime_ns, st.st_mtime_ns))
        fsync_dir(tmp_dir)
        return _CleanedGroup(refs, tmp_dir, removed, before, after, tuple(txns.kept))
    except BaseException:
        with contextlib.suppress(OSError):
            out.close_handles()
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def _retain(r: Record, header: BatchHeader, offset_map: SkimpyOffsetMap, now_ms: int) -> bool:
    """Kafka's ``shouldRetainRecord`` for batches v2."""
    if r.offset > offset_map.latest_offset:
        return True  # past what this pass mapped
    if r.key is None:
        return False  # a compacted topic's record without a key: Kafka drops it too
    if r.offset < offset_map.get(r.key):
        return False
    if r.value is not None:
        return True
    return not header.has_delete_horizon or now_ms < header.base_timestamp


def _finish_swap(dir: Path, leftovers: list[Path]) -> None:
    """Worker: make the renames durable, then remove the old files."""
    fsync_dir(dir)
    for p in leftovers:
        p.unlink(missing_ok=True)
    shutil.rmtree(dir / CLEANER_TMP_DIR, ignore_errors=True)


def clean_log_steps(
    lg: Log,
    *,
    first_dirty_offset: int,
    high_watermark: int,
    now_ms: int,
    cleaner: CleanerConfig | None = None,
    force: bool = False,
) -> Steps[CleanResult | None]:
    """One pass over ``lg`` if it is due; yields the worker's parts (see the module doc)."""
    plan = _plan(
        lg,
        first_dirty_offset=first_dirty_offset,
        high_watermark=high_watermark,
        now_ms=now_ms,
        force=force,
        cleaner=cleaner or CleanerConfig(),
    )
    if plan is None:
        return None
    offset_map: SkimpyOffsetMap = yield lambda: _build_offset_map(plan)
    end_offset = offset_map.latest_offset + 1
    map_full = end_offset < plan.first_uncleanable
    refs = [r for r in plan.segments if r.base_offset < end_offset]
    groups = group_segments_by_size(
        [(r.base_offset, r.size, r.max_index_bytes) for r in refs],
        max_size=plan.segment_bytes,
        max_index_size=plan.segment_index_bytes,
        first_uncleanable=plan.first_uncleanable,
    )
    cleaned = after_count = removed = before = after = 0
    txns = _TxnTracker(plan.aborted_txns)
    for idx in groups:
        group = tuple(refs[i] for i in idx)
        result: _CleanedGroup = yield lambda group=group: _clean_group(plan, group, offset_map, now_ms, txns)
        before += result.bytes_before
        after += result.bytes_after
        if result.tmp_dir is None:
            continue
        leftovers = lg.replace_segments(
            [r.segment for r in group], [r.size for r in group], result.tmp_dir, now_ms=now_ms,
            aborted_txns=list(result.aborted_txns),
        )
        if leftovers is None:
            yield lambda d=result.tmp_dir: shutil.rmtree(d, ignore_errors=True)
            raise CleanAbortedError(f"{plan.name} changed while it was being cleaned")
        yield lambda leftovers=leftovers: _finish_swap(plan.dir, leftovers)
        cleaned += len(group)
        after_count += 1
        removed += result.records_removed
    log.info(
        "cleaned %s: offsets [%d, %d) of [%d, %d), %d segments -> %d, %d records removed, %d -> %d bytes, map %d/%d slots%s",
        plan.name, plan.first_dirty, end_offset, plan.first_dirty, plan.first_uncleanable, cleaned, after_count,
        removed, before, after, offset_map.size, offset_map.slots, " (full: more passes follow)" if map_full else "",
    )
    return CleanResult(
        plan.first_dirty, end_offset, plan.first_uncleanable, cleaned, after_count, removed, before, after, map_full
    )


def drive_inline(steps: Steps[T]) -> T:
    """Run a steps generator on this thread: each yielded callable is called and its
    result (or exception) sent back."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            job = steps.throw(error) if error is not None else steps.send(send)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            send = job()
        except Exception as e:
            send, error = None, e


def maybe_clean(
    lg: Log,
    *,
    first_dirty_offset: int,
    high_watermark: int,
    now_ms: int,
    force: bool = False,
    cleaner: CleanerConfig | None = None,
) -> CleanResult | None:
    """One cleaning pass on this thread if the log is due; None if not."""
    return drive_inline(
        clean_log_steps(
            lg,
            first_dirty_offset=first_dirty_offset,
            high_watermark=high_watermark,
            now_ms=now_ms,
            cleaner=cleaner,
            force=force,
        )
    )
