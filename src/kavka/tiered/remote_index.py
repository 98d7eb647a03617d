"""The seed's remote index (KIP-405 as first proposed): ``.remoteLogIndex`` plus the
``.remoteOffsetIndex`` and ``.remoteTimeIndex`` files that point into it.

Written by the remote log manager for each segment it copies, from the segment's batch headers,
shipped to remote storage with the segment (IndexType.REMOTE_*), and recreated from remote storage
by a broker that did not write them. All three are named by the segment's base offset (20 digits,
zero padded), as local segment files are: ``00000000000000001234.remoteLogIndex``.

``.remoteLogIndex`` -- a concatenation of entries, one per run of whole batches (a run closes
when it reaches ``interval_bytes``), big-endian, the seed's RemoteLogIndexEntry:

====================  ======  =============================================================
field                 type    meaning
====================  ======  =============================================================
magic                 int16   entry format version, 0
length                int16   bytes that follow this field (crc .. rdi)
crc                   int32   CRC-32 (zlib) of the bytes from firstOffset to the end of rdi
firstOffset           int64   offset of the first record in the run
lastOffset            int64   offset of the last record in the run
firstTimestamp        int64   base timestamp of the run's first batch
lastTimestamp         int64   largest max timestamp of the run's batches
dataLength            int32   bytes of the run in the remote segment
rdiLength             int16   length of rdi
rdi                   bytes   remote data identifier: segment uuid (16) + byte position (int64)
====================  ======  =============================================================

An entry whose crc does not match, or whose magic is not 0, raises CorruptRemoteIndexError: the
index is refetched or rebuilt, never trusted.

``.remoteOffsetIndex`` -- 8-byte entries, one per remoteLogIndex entry: the entry's firstOffset
relative to the segment base offset (int32) and the entry's byte position in .remoteLogIndex
(int32). Sorted by offset, so a binary search finds the entry holding any offset.

``.remoteTimeIndex`` -- 12-byte entries: a timestamp (int64) and the relative offset (int32) of the
first remoteLogIndex entry whose lastTimestamp reaches it; written only when the segment's running
max timestamp grows, so timestamps increase through the file (as Kafka's TimeIndex).

Pure functions over bytes and files; safe from any thread.
"""

from __future__ import annotations

import bisect
import os
import struct
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kavka.protocol.records import iter_batches

REMOTE_LOG_INDEX_SUFFIX = ".remoteLogIndex"
REMOTE_OFFSET_INDEX_SUFFIX = ".remoteOffsetIndex"
REMOTE_TIME_INDEX_SUFFIX = ".remoteTimeIndex"
MAGIC = 0
_PREFIX = struct.Struct(">hh")  # magic, length
_BODY = struct.Struct(">iqqqqih")  # crc, first/last offset, first/last timestamp, dataLength, rdiLength
_RDI = struct.Struct(">16sq")  # segment uuid, byte position
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
DEFAULT_INTERVAL_BYTES = 4096
_SCAN_CHUNK = 8 << 20


class CorruptRemoteIndexError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class RemoteLogIndexEntry:
    first_offset: int
    last_offset: int
    first_timestamp: int
    last_timestamp: int
    data_length: int
    rdi: bytes

    def encode(self) -> bytes:
        tail = struct.pack(">qqqqih", self.first_offset, self.last_offset, self.first_timestamp,
                           self.last_timestamp, self.data_length, len(self.rdi)) + self.rdi
        crc = zlib.crc32(tail)
        crc_signed = crc - (1 << 32) if crc >= 1 << 31 else crc
        body = struct.pack(">i", crc_signed) + tail
        return _PREFIX.pack(MAGIC, len(body)) + body

    @property
    def segment_id(self) -> uuid.UUID:
        return uuid.UUID(bytes=_RDI.unpack(self.rdi)[0])

    @property
    def position(self) -> int:
        """Byte position of the run in the remote segment."""
        return _RDI.unpack(self.rdi)[1]


def make_rdi(segment_id: uuid.UUID, position: int) -> bytes:
    return _RDI.pack(segment_id.bytes, position)


def decode_entry(buf: bytes, pos: int) -> tuple[RemoteLogIndexEntry, int]:
    """The entry at ``pos`` and the position after it."""
    if len(buf) - pos < _PREFIX.size:
        raise CorruptRemoteIndexError(f"truncated entry header at {pos}")
    magic, length = _PREFIX.unpack_from(buf, pos)
    if magic != MAGIC:
        raise CorruptRemoteIndexError(f"unsupported remote index magic {magic} at {pos}")
    start = pos + _PREFIX.size
    end = start + length
    if length < _BODY.size or end > len(buf):
        raise CorruptRemoteIndexError(f"bad entry length {length} at {pos}")
    crc, first, last, first_ts, last_ts, data_length, rdi_length = _BODY.unpack_from(buf, start)
    if _BODY.size + rdi_length != length:
        raise CorruptRemoteIndexError(f"rdi length {rdi_length} does not fit entry at {pos}")
    if zlib.crc32(buf[start + 4:end]) != crc & 0xFFFFFFFF:
        raise CorruptRemoteIndexError(f"crc mismatch in remote index entry at {pos}")
    rdi = bytes(buf[start + _BODY.size:end])
    return RemoteLogIndexEntry(first, last, first_ts, last_ts, data_length, rdi), end


def decode_entries(buf: bytes) -> Iterator[tuple[int, RemoteLogIndexEntry]]:
    pos = 0
    while pos < len(buf):
        entry, nxt = decode_entry(buf, pos)
        yield pos, entry
        pos = nxt


def _iter_segment_batches(path: Path) -> Iterator[tuple[int, int, int, int, int, int]]:
    """(position, size, first offset, last offset, base timestamp, max timestamp) per batch."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        pos = 0
        while pos < size:
            chunk = os.pread(fd, _SCAN_CHUNK, pos)
            consumed = 0
            for rel, h in iter_batches(chunk):
                yield (pos + rel, h.size_in_bytes, h.base_offset,
                       h.base_offset + h.last_offset_delta, h.base_timestamp, h.max_timestamp)
                consumed = rel + h.size_in_bytes
            if consumed == 0:
                # one batch bigger than the chunk: read it whole
                head = os.pread(fd, 12, pos)
                if len(head) < 12:
                    return
                batch_size = 12 + struct.unpack_from(">i", head, 8)[0]
                chunk = os.pread(fd, batch_size, pos)
                got = list(iter_batches(chunk))
                if not got:
                    return
                _, h = got[0]
                yield (pos, h.size_in_bytes, h.base_offset,
                       h.base_offset + h.last_offset_delta, h.base_timestamp, h.max_timestamp)
                consumed = h.size_in_bytes
            pos += consumed


@dataclass(frozen=True, slots=True)
class RemoteIndexFiles:
    remote_log_index: Path
    remote_offset_index: Path
    remote_time_index: Path


def index_paths(directory: Path, base_offset: int) -> RemoteIndexFiles:
    stem = f"{base_offset:020d}"
    return RemoteIndexFiles(directory / (stem + REMOTE_LOG_INDEX_SUFFIX),
                            directory / (stem + REMOTE_OFFSET_INDEX_SUFFIX),
                            directory / (stem + REMOTE_TIME_INDEX_SUFFIX))


def build_remote_indexes(segment_log: Path, *, base_offset: int, segment_id: uuid.UUID,
                         out_dir: Path, interval_bytes: int = DEFAULT_INTERVAL_BYTES
                         ) -> RemoteIndexFiles:
    """Write the three files for one closed segment into ``out_dir`` (tmp + rename each)."""
    log_index = bytearray()
    offset_index = bytearray()
    time_index = bytearray()
    max_ts = -1
    run: list[tuple[int, int, int, int, int, int]] = []

    def close_run() -> None:
        nonlocal max_ts
        if not run:
            return
        entry = RemoteLogIndexEntry(
            first_offset=run[0][2], last_offset=run[-1][3], first_timestamp=run[0][4],
            last_timestamp=max(r[5] for r in run), data_length=sum(r[1] for r in run),
            rdi=make_rdi(segment_id, run[0][0]))
        offset_index.extend(_OFFSET_ENTRY.pack(entry.first_offset - base_offset, len(log_index)))
        if entry.last_timestamp > max_ts:
            max_ts = entry.last_timestamp
            time_index.extend(_TIME_ENTRY.pack(max_ts, entry.first_offset - base_offset))
        log_index.extend(entry.encode())
        run.clear()

    run_bytes = 0
    for batch in _iter_segment_batches(segment_log):
        run.append(batch)
        run_bytes += batch[1]
        if run_bytes >= interval_bytes:
            close_run()
            run_bytes = 0
    close_run()
    paths = index_paths(out_dir, base_offset)
    for path, data in ((paths.remote_log_index, log_index),
                       (paths.remote_offset_index, offset_index),
                       (paths.remote_time_index, time_index)):
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return paths


def lookup_offset(remote_offset_index: bytes, remote_log_index: bytes, *, base_offset: int,
                  target_offset: int) -> RemoteLogIndexEntry | None:
    """The first entry holding ``target_offset`` or a later offset; None past the segment."""
    if len(remote_offset_index) % _OFFSET_ENTRY.size:
        raise CorruptRemoteIndexError("remote offset index size is not a multiple of 8")
    rel = [r for r, _ in _OFFSET_ENTRY.iter_unpack(remote_offset_index)]
    positions = [p for _, p in _OFFSET_ENTRY.iter_unpack(remote_offset_index)]
    i = max(0, bisect.bisect_right(rel, target_offset - base_offset) - 1)
    while i < len(positions):
        entry, _ = decode_entry(remote_log_index, positions[i])
        if entry.last_offset >= target_offset:
            return entry
        i += 1
    return None


def lookup_timestamp(remote_time_index: bytes, *, base_offset: int,
                     target_timestamp: int) -> int | None:
    """The offset of the first entry whose timestamps reach ``target_timestamp`` (a run start,
    so the caller scans batches from there); None if no record in the segment is that late."""
    if len(remote_time_index) % _TIME_ENTRY.size:
        raise CorruptRemoteIndexError("remote time index size is not a multiple of 12")
    for ts, rel in _TIME_ENTRY.iter_unpack(remote_time_index):
        if ts >= target_timestamp:
            return base_offset + rel
    return None
