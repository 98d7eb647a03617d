"""Sparse offset and time indexes of a segment (Kafka's OffsetIndex/TimeIndex).

``<base>.index`` holds 8-byte entries: relative offset int32 + file position
int32 (big-endian), mapping an offset to the byte position of the batch that
contains it. ``<base>.timeindex`` holds 12-byte entries: timestamp int64 +
relative offset int32, meaning "all batches before this offset have
timestamps <= this timestamp". Entries are strictly increasing; relative
offsets are ``offset - base_offset``. Both are sparse: the segment adds an
entry every index.interval.bytes of log. Neither is checksummed: after an
unclean shutdown they are rebuilt from the log (``LogSegment.recover``).

Unlike Kafka we do not preallocate and mmap: entries live in memory (``array``
for bisect) and are appended to the file on ``flush()``/``close()``, so the
file on disk is always exactly ``entries * entry_size`` bytes -- what Kafka
leaves after trimming on close. At most ``segment.index.bytes // entry_size``
entries fit (``is_full`` makes the log roll).

Owned by one LogSegment; called from the broker's event-loop thread.
"""

from __future__ import annotations

import bisect
import os
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from kavka.storage.errors import CorruptIndexError, InvalidOffsetError

NO_TIMESTAMP = -1
_LITTLE = sys.byteorder == "little"


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


def _from_be(typecode: str, data: bytes) -> array:
    arr = array(typecode)
    arr.frombytes(data)
    if _LITTLE:
        arr.byteswap()
    return arr


def _to_be(arr: array) -> bytes:
    if not _LITTLE:
        return arr.tobytes()
    copy = array(arr.typecode, arr)
    copy.byteswap()
    return copy.tobytes()


class _IndexFile:
    """Shared file handling: load, append-on-flush, truncate, rename, delete."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, *, max_index_size: int, create: bool = True) -> None:
        """A missing file is an empty index, created now if `create`, else by `create_file` or the
        first `flush` with entries: a segment that was never written needs no index files (Kafka's
        LazyIndex creates them on first use), which halves the files a new partition costs."""
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.entry_size, 1)
        self._flushed = 0  # entries known to be in the file
        self._dirty = False
        try:
            raw = self.path.read_bytes()
            self.on_disk = True
        except FileNotFoundError:
            raw = b""
            self.on_disk = False
            if create:
                self.create_file()
        if len(raw) % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {len(raw)}, not a multiple of "
                f"entry size {self.entry_size}"
            )
        self._load(raw)
        self._flushed = self.entries

    # subclasses
    def _load(self, raw: bytes) -> None:
        raise NotImplementedError

    def _encode(self, start: int) -> bytes:
        raise NotImplementedError

    def _truncate_entries(self, n: int) -> None:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def create_file(self) -> None:
        """Create the (empty) file if it is not there; entries so far are written by `flush`."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))
        self.on_disk = True

    def flush(self, *, fsync: bool = True) -> None:
        if not self._dirty and self._flushed == self.entries:
            return  # also an index without a file and without entries: nothing to write
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        self.on_disk = True
        try:
            os.ftruncate(fd, self._flushed * self.entry_size)
            if self._flushed < self.entries:
                os.pwrite(fd, self._encode(self._flushed), self._flushed * self.entry_size)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._flushed = self.entries
        self._dirty = False

    def close(self) -> None:
        self.flush()

    def _set_entries(self, n: int) -> None:
        if n < self.entries:
            self._truncate_entries(n)
            if n < self._flushed:
                self._flushed = n
                self._dirty = True
                # Keep the file a valid prefix right away so a crash cannot
                # leave entries for truncated data.
                self.flush(fsync=False)

    def reset(self) -> None:
        self._set_entries(0)

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_IndexFile):
    entry_size = 8

    def _load(self, raw: bytes) -> None:
        both = _from_be("i", raw)
        self._rel_offsets = array("i", both[0::2])
        self._positions = array("i", both[1::2])

    def _encode(self, start: int) -> bytes:
        both = array("i", [0]) * (2 * (self.entries - start))
        both[0::2] = self._rel_offsets[start:]
        both[1::2] = self._positions[start:]
        return _to_be(both)

    def _truncate_entries(self, n: int) -> None:
        del self._rel_offsets[n:]
        del self._positions[n:]

    @property
    def entries(self) -> int:
        return len(self._rel_offsets)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._rel_offsets[-1] if self._rel_offsets else self.base_offset

    def entry(self, n: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self._rel_offsets[n], self._positions[n])

    def sanity_check(self) -> None:
        """Kafka's ``OffsetIndex.sanityCheck`` plus monotonicity of the tail."""
        n = self.entries
        if n and self._rel_offsets[0] < 0:
            raise CorruptIndexError(f"corrupt index {self.path}: negative first relative offset")
        for i in range(max(n - 64, 1), n):
            if (
                self._rel_offsets[i] <= self._rel_offsets[i - 1]
                or self._positions[i] < self._positions[i - 1]
            ):
                raise CorruptIndexError(f"corrupt index {self.path}: entry {i} is out of order")

    def append(self, offset: int, position: int) -> None:
        if self.is_full:
            raise InvalidOffsetError(f"index {self.path} is full ({self.max_entries} entries)")
        if self._rel_offsets and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to index {self.path} "
                f"whose last offset is {self.last_offset}"
            )
        self._rel_offsets.append(offset - self.base_offset)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, else (base_offset, 0)."""
        i = bisect.bisect_right(self._rel_offsets, target_offset - self.base_offset) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel_offsets[i], self._positions[i])

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        self._set_entries(bisect.bisect_left(self._rel_offsets, offset - self.base_offset))


class TimeIndex(_IndexFile):
    entry_size = 12

    def _load(self, raw: bytes) -> None:
        n = len(raw) // 12
        self._timestamps = _from_be("q", b"".join(raw[i * 12 : i * 12 + 8] for i in range(n)))
        self._rel_offsets = _from_be("i", b"".join(raw[i * 12 + 8 : i * 12 + 12] for i in range(n)))

    def _encode(self, start: int) -> bytes:
        ts = _to_be(self._timestamps[start:])
        offs = _to_be(self._rel_offsets[start:])
        return b"".join(
            ts[i * 8 : i * 8 + 8] + offs[i * 4 : i * 4 + 4] for i in range(self.entries - start)
        )

    def _truncate_entries(self, n: int) -> None:
        del self._timestamps[n:]
        del self._rel_offsets[n:]

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry added when the segment becomes
        # inactive (Kafka's TimeIndex.isFull: entries >= maxEntries - 1).
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._rel_offsets[-1])

    def entry(self, n: int) -> TimestampOffset:
        return TimestampOffset(self._timestamps[n], self.base_offset + self._rel_offsets[n])

    def sanity_check(self) -> None:
        n = self.entries
        if n and self._timestamps[-1] < self._timestamps[0]:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: last timestamp {self._timestamps[-1]} is "
                f"less than the first {self._timestamps[0]}"
            )
        if n and self._rel_offsets[-1] < 0:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: last offset is below the base offset"
            )
        for i in range(max(n - 64, 1), n):
            if (
                self._timestamps[i] < self._timestamps[i - 1]
                or self._rel_offsets[i] < self._rel_offsets[i - 1]
            ):
                raise CorruptIndexError(f"corrupt time index {self.path}: entry {i} out of order")

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append if ``timestamp`` is larger than the last entry's."""
        if not skip_full_check and self.is_full:
            raise InvalidOffsetError(f"time index {self.path} is full")
        if self.entries >= self.max_entries:
            return
        last = self.last_entry
        if self._timestamps and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to time index {self.path} "
                f"whose last offset is {last.offset}"
            )
        if self._timestamps and timestamp < last.timestamp:
            raise InvalidOffsetError(
                f"attempt to append timestamp {timestamp} to time index {self.path} "
                f"whose last timestamp is {last.timestamp}"
            )
        if timestamp > last.timestamp or not self._timestamps and timestamp >= 0:
            self._timestamps.append(timestamp)
            self._rel_offsets.append(offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, else (-1, base_offset)."""
        i = bisect.bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[i], self.base_offset + self._rel_offsets[i])

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        self._set_entries(bisect.bisect_left(self._rel_offsets, offset - self.base_offset))
