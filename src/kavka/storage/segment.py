"""One log segment: a ``.log`` file of record batches plus its indexes.

Files in the partition dir, named by the segment's base offset (20 digits,
zero padded): ``00000000000000001234.log``, ``.index``, ``.timeindex``, and
``.txnindex`` once a transaction aborted in the segment (storage.txn_index;
written by the unified log, truncated, flushed and deleted with the segment).
The ``.log`` file is a plain concatenation of record batches v2 exactly as
they go on the wire (Kafka's ``FileRecords``). Invariants:

* every batch in the file has ``base_offset <= offsets < next segment's base``
  and offsets increase through the file;
* relative offsets (``offset - base_offset``) fit an int32;
* the indexes are sparse: an offset-index entry (batch last offset ->
  position of that batch) and a time-index entry at most every
  index.interval.bytes of log (Kafka's ``LogSegment.append``, per batch).

Appends are one ``os.write`` each (the file is opened ``O_APPEND``); reads are
``os.pread``. Handles are lazy, as Kafka's LazyIndex: an existing segment is
opened by a ``stat`` only; its ``.log`` descriptor is opened on the first
read/write/fsync and its indexes are loaded (and sanity-checked, and rebuilt
from the log if damaged) on first lookup. A new segment creates its ``.log``
and closes it again, and creates its index files only with its first append
(just before the data is written, so a non-empty ``.log`` always has them; an
empty one may have none). So an idle partition costs no descriptor -- a
broker of 30,000 idle partitions stays below a 20,000 open-file limit --
and a new one two files fewer, and a partition of thousands of closed
segments no index memory until read. Deletion renames every file to ``*.deleted`` first and unlinks
after, as Kafka does, so a crash mid-delete leaves files that the next start
removes. Owned by one LocalLog; called from the broker's event-loop thread (a worker
only ever gets what `prepare_flush` hands out: a duplicated descriptor and paths).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagicError,
    compute_crc,
    decode_batch,
    parse_header,
)
from kavka.storage.errors import CorruptIndexError
from kavka.storage.faults import FAULTS
from kavka.storage.index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from kavka.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

if TYPE_CHECKING:
    from kavka.storage.leader_epoch import LeaderEpochFileCache

log = logging.getLogger("kavka.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 1 << 20
_RECENT_APPENDS = 16


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where the batch holding an offset starts (Kafka's ``LogOffsetPosition``)."""

    offset: int  # last offset of that batch
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """Bytes of whole batches read from one segment."""

    start_position: int
    records: bytes
    first_entry_incomplete: bool = False


class LogSegment:
    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        rebuild_indexes_if_damaged: bool = True,
        create: bool = True,
    ) -> None:
        """``create=False``: a missing ``.log`` is not created here but with the segment's first
        write (or read, flush...), as its index files are (a log's first, empty segment: this
        VM's file system spends ~0.8 ms of CPU creating a file, a third of what creating a
        partition costs; a broker creating 10,000 partitions creates 10,000 fewer files). Flushing
        or closing a segment whose file was never created does nothing."""
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        prefix = filename_prefix(base_offset)
        self.log_path = self.dir / (prefix + LOG_SUFFIX)
        # Lazy file handles (Kafka's LazyIndex): an existing segment opens its
        # .log on first read/write and loads its indexes on first lookup, so a
        # log of many closed segments opens without touching them.
        self._fd_raw: int | None = None  # None: not opened yet; -1: closed
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._rebuild_indexes_if_damaged = rebuild_indexes_if_damaged
        self._no_file = False  # the .log does not exist yet (create=False)
        try:
            self.size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            if create:
                os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644))  # opened again on first use
            else:
                self._no_file = True
            self.size = 0
        self.created_ms = now_ms
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts: TimestampOffset | None = None  # loaded lazily
        # (base offset, position) of the last appends, newest last: a read near the log end (a
        # follower's or a tailing consumer's fetch) starts its scan there, not at the index entry
        # up to index.interval.bytes back (one pread and parse per batch in between).
        self._recent: deque[tuple[int, int]] = deque(maxlen=_RECENT_APPENDS)
        self.indexes_rebuilt = False
        self._index_path = self.dir / (prefix + INDEX_SUFFIX)
        self._time_index_path = self.dir / (prefix + TIME_INDEX_SUFFIX)
        # Aborted transactions (KIP-98); loaded on first use, no file until the first entry.
        self.txn_index = TransactionIndex(self.dir / (prefix + TXN_INDEX_SUFFIX))
        if not rebuild_indexes_if_damaged or (
            self.size > 0 and (not self._index_path.exists() or not self._time_index_path.exists())
        ):
            self._load_indexes()  # strict, or to rebuild now: checked at once

    @property
    def _fd(self) -> int:
        fd = self._fd_raw
        if fd is None:
            fd = self._fd_raw = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._no_file = False
        return fd

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
            assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
            assert self._time_index is not None
        return self._time_index

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    def _load_indexes(self) -> None:
        """Open both indexes, sanity-check them, rebuild them from the log if damaged."""
        index_path, time_index_path = self._index_path, self._time_index_path
        base_offset, max_index_size = self.base_offset, self.max_index_size
        create = self.size > 0  # an empty segment gets its files with its first append
        missing = create and (not index_path.exists() or not time_index_path.exists())
        try:
            self._offset_index = OffsetIndex(index_path, base_offset, max_index_size=max_index_size, create=create)
            self._time_index = TimeIndex(time_index_path, base_offset, max_index_size=max_index_size, create=create)
            self._offset_index.sanity_check()
            self._time_index.sanity_check()
            damaged = missing
            if not damaged and self._offset_index.entries:
                last = self._offset_index.entry(self._offset_index.entries - 1)
                damaged = last.position >= self.size
        except CorruptIndexError as exc:
            if not self._rebuild_indexes_if_damaged:
                raise
            log.warning("%s; rebuilding the indexes of %s", exc, self.log_path)
            for p in (index_path, time_index_path):
                p.unlink(missing_ok=True)
            self._offset_index = OffsetIndex(index_path, base_offset, max_index_size=max_index_size, create=create)
            self._time_index = TimeIndex(time_index_path, base_offset, max_index_size=max_index_size, create=create)
            damaged = self.size > 0
        if damaged:
            if not self._rebuild_indexes_if_damaged:
                raise CorruptIndexError(f"indexes of {self.log_path} are missing or damaged")
            log.warning("indexes of %s are missing or damaged; rebuilding", self.log_path)
            self.recover()
            self.indexes_rebuilt = True

    # ------------------------------------------------------------------ facts

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().offset

    def _max_timestamp_and_offset(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self._read_largest_timestamp()
        return self._max_ts

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, else the file's mtime (Kafka's
        ``LogSegment.largestTimestamp``), used by retention.ms."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        fd = self._fd_raw
        if self._no_file:
            return self.created_ms  # no file yet: no mtime
        st = os.fstat(fd) if fd is not None and fd >= 0 else os.stat(self.log_path)
        return int(st.st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # ------------------------------------------------------------------ scanning

    def _pread(self, size: int, position: int) -> bytes:
        FAULTS.check(self.log_path)
        return os.pread(self._fd, size, position)

    def iter_batches_from(
        self, position: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of complete batches from ``position`` (torn tail ends it)."""
        end = self.size if end is None else end
        pos = position
        while end - pos >= BATCH_HEADER_SIZE:
            raw = self._pread(BATCH_HEADER_SIZE, pos)
            if len(raw) < BATCH_HEADER_SIZE:
                return
            header = parse_header(raw)
            if pos + header.size_in_bytes > end:
                return
            yield pos, header
            pos += header.size_in_bytes

    def _scan_validated(self) -> Iterator[tuple[int, BatchHeader]]:
        """Batches with structure and CRC checked; raises CorruptRecordError
        (with the position) at the first bad one. Reads in 1 MiB chunks."""
        buf = b""
        buf_start = 0
        pos = 0
        end = self.size
        expected_min_offset = self.base_offset
        while pos < end:
            rel = pos - buf_start
            if len(buf) - rel < BATCH_HEADER_SIZE:
                buf = self._pread(max(_SCAN_CHUNK, BATCH_HEADER_SIZE), pos)
                buf_start, rel = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    raise CorruptRecordError(f"torn batch header at position {pos}")
            header = parse_header(buf, rel)
            size = header.size_in_bytes
            if pos + size > end:
                raise CorruptRecordError(f"torn batch at position {pos}")
            if len(buf) - rel < size:
                buf = self._pread(max(_SCAN_CHUNK, size), pos)
                buf_start, rel = pos, 0
            if compute_crc(buf, rel, size) != header.crc:
                raise CorruptRecordError(f"CRC-32C mismatch in batch at position {pos}")
            if header.records_count < 0 or header.last_offset_delta < header.records_count - 1:
                raise CorruptRecordError(f"inconsistent record count in batch at position {pos}")
            # baseOffset is not covered by the CRC: insist on increasing offsets.
            if header.base_offset < expected_min_offset:
                raise CorruptRecordError(
                    f"batch at position {pos} has base offset {header.base_offset}, "
                    f"below {expected_min_offset}"
                )
            if not self.can_convert_to_relative_offset(header.last_offset):
                raise CorruptRecordError(
                    f"batch at position {pos} has last offset {header.last_offset} "
                    f"out of range for base offset {self.base_offset}"
                )
            expected_min_offset = header.next_offset
            yield pos, header
            pos += size

    # ------------------------------------------------------------------ append

    def append(
        self,
        *,
        largest_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
        headers: list[BatchHeader] | None = None,
    ) -> None:
        """Append whole batches with one write and index them per batch.

        ``headers`` are the already-parsed headers of ``records`` (the Log
        has them from validation); parsed here if not given.
        """
        if not records:
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise ValueError(
                f"offset {largest_offset} cannot be stored in segment {self.base_offset}"
            )
        if headers is None:
            headers = []
            view = memoryview(records).cast("B")
            p = 0
            while p < len(view):
                h = parse_header(view, p)
                headers.append(h)
                p += h.size_in_bytes
        physical_position = self.size
        if physical_position == 0:
            self._rolling_based_timestamp = max_timestamp
            for index in (self.offset_index, self.time_index):
                if not index.on_disk:
                    index.create_file()
        view = memoryview(records)
        written = 0
        FAULTS.check(self.log_path)
        while written < len(view):  # os.write may be partial only on odd filesystems
            written += os.write(self._fd, view[written:])
        self.size += written
        max_ts = self._max_timestamp_and_offset()
        for header in headers:
            if header.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, physical_position)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                self._bytes_since_last_index_entry = 0
            physical_position += header.size_in_bytes
            self._bytes_since_last_index_entry += header.size_in_bytes
        self._max_ts = max_ts
        self._recent.append((headers[0].base_offset, self.size - written))

    # ------------------------------------------------------------------ lookup and read

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch whose last offset is >= ``offset``, searching from the
        index floor (Kafka's ``FileRecords.searchForOffsetWithSize``)."""
        floor = self.offset_index.lookup(offset)
        start = max(floor.position, starting_position)
        for base, position in reversed(self._recent):
            if base <= offset:  # a batch boundary at or before the batch holding `offset`
                start = max(start, position)
                break
        for pos, header in self.iter_batches_from(start):
            if header.last_offset >= offset:
                return LogOffsetPosition(header.last_offset, pos, header.size_in_bytes)
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        *,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> SegmentRead | None:
        """Whole batches from the one holding ``start_offset``; None if the
        offset is beyond this segment. At most ``max_size`` bytes, or the
        first batch whole when ``min_one_message`` (KIP-74)."""
        max_position = self.size if max_position is None else min(max_position, self.size)
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start = found.position
        adjusted = max(max_size, found.size) if min_one_message else max_size
        if adjusted <= 0 or start >= max_position:
            return SegmentRead(start, b"", first_entry_incomplete=adjusted < found.size)
        fetch_size = min(max_position - start, adjusted)
        data = self._pread(fetch_size, start)
        # Trim to whole batches so consumers never see a torn batch.
        pos = 0
        while len(data) - pos >= BATCH_HEADER_SIZE:
            size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12
            if pos + size > len(data):
                break
            pos += size
        if pos < len(data):
            data = data[:pos]
        return SegmentRead(start, data, first_entry_incomplete=adjusted < found.size)

    def read_next_offset(self) -> int:
        """Offset after the last batch (Kafka's ``readNextOffset``)."""
        if self.size == 0:
            return self.base_offset  # without loading the indexes (an idle partition's start)
        floor = self.offset_index.lookup(2**63 - 1)
        nxt = self.base_offset
        for _pos, header in self.iter_batches_from(floor.position):
            nxt = header.next_offset
        return nxt

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >=
        ``starting_offset`` (Kafka's ``LogSegment.findOffsetByTimestamp``)."""
        ts_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_offset.offset, starting_offset)).position
        for pos, header in self.iter_batches_from(position):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                _h, records = decode_batch(self._pread(header.size_in_bytes, pos))
                for rec in records:
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        epoch = header.partition_leader_epoch
                        return TimestampAndOffset(
                            rec.timestamp, rec.offset, epoch if epoch >= 0 else None
                        )
        return None

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        best = TimestampOffset(last.timestamp, last.offset)
        position = self.offset_index.lookup(last.offset).position if last.timestamp >= 0 else 0
        for _pos, header in self.iter_batches_from(position):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    def first_batch_timestamp(self) -> int | None:
        for _pos, header in self.iter_batches_from(0):
            return header.max_timestamp
        return None

    # ------------------------------------------------------------------ roll

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        roll_jitter_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's ``LogSegment.shouldRoll``."""
        reached_roll_ms = (
            self._time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - roll_jitter_ms
        )
        return (
            self.size > max_segment_bytes - messages_size
            or (self.size > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def _time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        # By record timestamps when they exist, so that re-replicated or
        # restored data rolls the same way (Kafka's rollingBasedTimestamp).
        if self._rolling_based_timestamp is None and self.size > 0:
            self._rolling_based_timestamp = self.first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """Record the final max timestamp so retention survives a restart."""
        mt = self._max_timestamp_and_offset()
        if mt.timestamp >= 0:
            self.time_index.maybe_append(mt.timestamp, mt.offset, skip_full_check=True)
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)

    # ------------------------------------------------------------------ recovery and truncation

    def recover(self, leader_epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Rebuild the indexes from the log, validating every batch; truncate
        the file at the first invalid byte. Returns the bytes truncated.

        ``leader_epoch_cache`` (a LeaderEpochFileCache) gets the epochs seen,
        as Kafka's ``LogSegment.recover`` does.
        """
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        reason = ""
        try:
            for pos, header in self._scan_validated():
                if header.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
                if pos - last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(header.last_offset, pos)
                    self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                    last_index_entry = pos
                valid_bytes = pos + header.size_in_bytes
                if leader_epoch_cache is not None and header.partition_leader_epoch >= 0:
                    latest = leader_epoch_cache.latest_epoch
                    if latest is None or header.partition_leader_epoch > latest:
                        leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        except (CorruptRecordError, UnsupportedMagicError) as exc:
            reason = str(exc)
        truncated = self.size - valid_bytes
        if truncated > 0:
            log.warning(
                "recovery of %s: dropping %d bytes from position %d to %d (%s)",
                self.log_path,
                truncated,
                valid_bytes,
                self.size,
                reason or "invalid data",
            )
            os.ftruncate(self._fd, valid_bytes)
            self.size = valid_bytes
            self._recent.clear()
        self._max_ts = max_ts
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        return truncated

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> int:
        """Drop every batch from the one holding ``offset``; returns bytes
        removed (Kafka's ``LogSegment.truncateTo``)."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        truncated = 0
        if mapping is not None:
            truncated = self.size - mapping.position
            os.ftruncate(self._fd, mapping.position)
            self.size = mapping.position
            self._recent.clear()
        if self.size == 0:
            if now_ms is not None:
                self.created_ms = now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts = None
        return truncated

    # ------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        if self._no_file:
            return  # nothing written, nothing to make durable
        FAULTS.check(self.log_path)
        FAULTS.before_fsync(self.log_path)
        os.fsync(self._fd)
        if self._offset_index is not None and self._time_index is not None:  # unloaded: nothing to write
            self._offset_index.flush()
            self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._fd_raw == -1:
            return
        if self._offset_index is not None and self._time_index is not None:
            mt = self._max_ts
            if mt is not None and mt.timestamp >= 0:
                self._time_index.maybe_append(mt.timestamp, mt.offset, skip_full_check=True)
            self._offset_index.close()
            self._time_index.close()
        self.txn_index.close()
        if self._fd_raw is not None:
            os.close(self._fd_raw)
        self._fd_raw = -1

    @property
    def closed(self) -> bool:
        return self._fd_raw == -1

    def prepare_flush(self) -> tuple[int, list[Path]]:
        """For a flush on a worker thread: write pending index entries to the page cache (here,
        on the owner's thread) and return a duplicate of the ``.log`` descriptor plus the index
        paths, which the worker fsyncs (and closes) without touching this object."""
        if self._offset_index is not None and self._time_index is not None:
            self._offset_index.flush(fsync=False)
            self._time_index.flush(fsync=False)
        paths = [self._index_path, self._time_index_path]
        if self.txn_index.path.exists():
            paths.append(self.txn_index.path)
        return os.dup(self._fd), paths

    def delete(self, *, unlink: bool = True) -> list[Path]:
        """Close, rename every file to ``*.deleted``, then unlink them (or, with
        ``unlink=False``, return the renamed paths for the caller to unlink off the loop)."""
        self.close_handles()
        self.txn_index.close()
        paths = [self.log_path, self._index_path, self._time_index_path, self.txn_index.path]
        renamed = []
        for p in paths:
            target = p.with_name(p.name + DELETED_SUFFIX)
            try:
                os.replace(p, target)
                renamed.append(target)
            except FileNotFoundError:
                pass
        if not unlink:
            return renamed
        for p in renamed:
            p.unlink(missing_ok=True)
        return []

    def close_handles(self) -> None:
        """Close without writing index entries (for a segment being deleted)."""
        if self._fd_raw is not None and self._fd_raw >= 0:
            os.close(self._fd_raw)
        self._fd_raw = -1
