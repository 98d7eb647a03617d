"""LogValidator: the per-record checks and rewrites a leader applies to produced batches, as Kafka's
(storage/.../log/LogValidator.java) does for record batch v2.

`validate_batches` (protocol.records) has already checked what needs no decompression: sizes,
CRC-32C, header fields. Here every record is read -- decompressing the batch when it is
compressed -- and:

- its structure must parse exactly (length, attributes, timestamp and offset deltas, key, value,
  headers with non-null keys) and its offset delta must be its position in the batch: a batch
  that passes its CRC but does not parse is refused with INVALID_RECORD, so it can never reach
  the log where the cleaner, followers and consumers would trip on it;
- a record without a key is refused (INVALID_RECORD) when the topic is compacted: the cleaner
  could only drop it (Kafka's "Compacted topic cannot accept message without key");
- with CreateTime, a record timestamp more than `message.timestamp.before.max.ms` behind or
  `message.timestamp.after.max.ms` ahead of the broker's clock is refused (INVALID_TIMESTAMP);
- the batch's maxTimestamp is set from its records (and the CRC recomputed when that changes):
  a client that sends -1 there (older Go clients do) would otherwise leave the time index
  empty, so ListOffsets by timestamp and time-based retention could not see the data;
- when the topic's `compression.type` is a codec (not `producer`) different from the batch's,
  the batch is rebuilt with that codec, producer id, epoch, sequence and transactional flag kept.
  That costs a decompression and a compression per batch on the leader (see the README).

Errors carry Kafka's per-batch `record_errors` (Produce v8+): the index of the batch in the
request and a message. Pure functions over bytes; any thread may call them.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from kavka.protocol import compression as _compression
from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    CREATE_TIME,
    BatchHeader,
    InvalidRecordError,
    compute_crc,
    decode_batch,
    iter_batches,
    rebuild_batch,
)

_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_MAX_TIMESTAMP_OFFSET = 35
_CRC_OFFSET = 17
LONG_MAX = 2**63 - 1

CODECS = {"uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class RecordValidationError(InvalidRecordError):
    """Records refused by a produce rule; `record_errors` are (batch index, message) pairs."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(RecordValidationError):
    """A record timestamp outside the topic's allowed window: INVALID_TIMESTAMP (32)."""


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    compacted: bool = False
    log_append_time: bool = False
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = 3600000
    target_codec: int | None = None  # None: keep the producer's codec (compression.type=producer)


def validate_records(buf: bytearray, cfg: ValidationConfig, *, now_ms: int) -> bytearray:
    """Check every record of every batch in `buf`; fix maxTimestamp in place; return the buffer
    to append (a new one when batches were recompressed). Raises RecordValidationError."""
    recompress = False
    for index, (pos, header) in enumerate(iter_batches(buf)):
        if header.is_control:
            continue
        _check_batch(buf, pos, header, index, cfg, now_ms)
        if cfg.target_codec is not None and cfg.target_codec != header.compression:
            recompress = True
    if recompress:
        return _recompress(buf, cfg.target_codec or 0)
    return buf


def _payload(buf: bytearray | memoryview, pos: int, header: BatchHeader, index: int) -> bytes | memoryview:
    view = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size_in_bytes]
    if header.compression == _compression.NONE:
        return view
    try:
        return _compression.decompress(header.compression, view)
    except ValueError as exc:
        msg = f"batch {index}: cannot decompress: {exc}"
        raise RecordValidationError(msg, [(index, msg)]) from exc


def _check_batch(
    buf: bytearray | memoryview, pos: int, header: BatchHeader, index: int, cfg: ValidationConfig, now_ms: int
) -> None:
    # An uncompressed batch's records are read where they are (a memoryview slice: its end is the
    # batch's, so a record that runs past the batch raises IndexError as it would in a copy).
    data = _payload(buf, pos, header, index)
    try:
        max_ts, min_ts = _scan_records(
            data, header.records_count, header.base_timestamp, cfg.compacted
        )
    except _Malformed as exc:
        msg = f"batch {index} (base offset {header.base_offset}) has an invalid record: {exc}"
        raise RecordValidationError(msg, [(index, msg)]) from None
    except _Keyless as exc:
        msg = f"Compacted topic cannot accept message without key (batch {index}, record {exc})"
        raise RecordValidationError(msg, [(index, msg)]) from None
    if not cfg.log_append_time and header.timestamp_type == CREATE_TIME:
        lo, hi = now_ms - cfg.timestamp_before_max_ms, now_ms + cfg.timestamp_after_max_ms
        bad = min_ts if min_ts < lo else max_ts if max_ts > hi else None
        if bad is not None:
            msg = (
                f"Timestamp {bad} of a message in batch {index} is out of range. "
                f"The timestamp should be within [{lo}, {hi}]"
            )
            raise InvalidTimestampError(msg, [(index, msg)])
    if header.timestamp_type == CREATE_TIME and header.max_timestamp != max_ts:
        # LogValidator sets maxTimestamp from the records (DefaultRecordBatch.setMaxTimestamp).
        _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, max_ts)
        _UINT32.pack_into(buf, pos + _CRC_OFFSET, compute_crc(buf, pos, header.size_in_bytes))


class _Malformed(Exception):
    pass


class _Keyless(Exception):
    pass


def _scan_records(data: bytes | memoryview, count: int, base_ts: int, compacted: bool) -> tuple[int, int]:
    """Walk `count` records; return (max, min) timestamps. This runs for every produced record, so
    it is one loop with the fewest Python operations per record: varints of one and two bytes (a
    1 KiB record's length, a value over 63 bytes, offset deltas from 64 on) are decoded inline, the
    raw unsigned value is compared where its sign is known (the offset delta must be zigzag(i) =
    2i, a length must be even: zigzag-positive), and nothing is allocated per record. Longer
    varints take `_uvarint`. Any read past the end raises IndexError: malformed.

    A client's batch is mostly records of one shape (one value size, no headers, timestamps within
    63 ms of the first), so a record walked here that has the size of the one before it, when the
    next one starts with the same byte, is taken as the template of a run of records after it,
    which `_run` checks a field at a time across the whole run, each field one C-level pass over a
    strided view. A run that checks out is skipped, and the next one tried is twice as long; one
    that does not is walked, and the next attempt waits for twice as many candidates as the last,
    so a batch of many shapes loses little to attempts."""
    n = len(data)
    p = 0
    i = 0
    hi = -(2**63)
    lo = 2**63
    last = None
    zigzag = _ZIGZAG
    size = 0  # the size of the record walked last
    run = _FIRST_RUN
    wait = misses = 0  # candidate templates to pass over after `misses` failed runs in a row
    try:
        while i < count:
            for z in range(i << 1, count << 1, 2):  # z: the offset delta this record must carry, zigzagged
                q = p
                # length
                b = data[p]
                if b < 0x80:
                    u = b
                    p += 1
                else:
                    c = data[p + 1]
                    if c < 0x80:
                        u = (b & 0x7F) | (c << 7)
                        p += 2
                    else:
                        u, p = _uvarint(data, p)
                end = p + (u >> 1)
                if u & 1 or u < 12 or end > n:
                    raise _Malformed(f"record {z >> 1} has length {(u >> 1) ^ -(u & 1)}")
                # attributes (unused) at p, then the timestamp delta
                b = data[p + 1]
                if b < 0x80:
                    ts = zigzag[b]
                    p += 2
                else:
                    c = data[p + 2]
                    if c < 0x80:
                        u = (b & 0x7F) | (c << 7)
                        p += 3
                    else:
                        u, p = _uvarint(data, p + 1)
                    ts = (u >> 1) ^ -(u & 1)
                if ts != last:  # records of one batch mostly share their timestamp with the one before
                    last = ts
                    if ts > hi:
                        hi = ts
                    if ts < lo:
                        lo = ts
                # offset delta
                b = data[p]
                if b < 0x80:
                    u = b
                    p += 1
                else:
                    c = data[p + 1]
                    if c < 0x80:
                        u = (b & 0x7F) | (c << 7)
                        p += 2
                    else:
                        u, p = _uvarint(data, p)
                if u != z:
                    raise _Malformed(f"record {z >> 1} has offset delta {(u >> 1) ^ -(u & 1)}")
                # key: zigzag 1 is -1 (null); any other odd value is a negative length
                b = data[p]
                if b == 1:  # null, the usual case
                    if compacted:
                        raise _Keyless(z >> 1)
                    p += 1
                else:
                    if b < 0x80:
                        u = b
                        p += 1
                    else:
                        c = data[p + 1]
                        if c < 0x80:
                            u = (b & 0x7F) | (c << 7)
                            p += 2
                        else:
                            u, p = _uvarint(data, p)
                    if u & 1:
                        if u != 1:
                            raise _Malformed(f"record {z >> 1} has a key length of {(u >> 1) ^ -1}")
                        if compacted:
                            raise _Keyless(z >> 1)
                    else:
                        p += u >> 1
                # value
                b = data[p]
                if b < 0x80:
                    u = b
                    p += 1
                else:
                    c = data[p + 1]
                    if c < 0x80:
                        u = (b & 0x7F) | (c << 7)
                        p += 2
                    else:
                        u, p = _uvarint(data, p)
                if u & 1:
                    if u != 1:
                        raise _Malformed(f"record {z >> 1} has a value length of {(u >> 1) ^ -1}")
                else:
                    p += u >> 1
                # headers: none is one zero byte
                b = data[p]
                p += 1
                if b:
                    p = _scan_headers(data, p - 1, end, z >> 1)
                if p != end:
                    raise _Malformed(f"record {z >> 1}'s fields end {p - end:+d} bytes from its stated length")
                if p - q != size:
                    size = p - q
                elif p < n and data[p] == data[q]:  # a candidate template for the records after it
                    if wait:
                        wait -= 1
                    else:
                        i = (z >> 1) + 1
                        break
            else:
                i = count
                break
            # Runs of records shaped as the one at q, from record i at p on.
            shape = _shape(data, q)
            while True:
                r = min(run, count - i, (n - p) // size)
                got = _run(data, p, r, size, q, i, shape) if r >= _MIN_RUN and shape is not None else None
                if got is None:
                    run = _FIRST_RUN
                    misses += 1
                    wait = (1 << misses) - 1
                    break
                misses = 0
                if got[0] > hi:
                    hi = got[0]
                if got[1] < lo:
                    lo = got[1]
                i += r
                p += r * size
                run <<= 1
    except IndexError:
        raise _Malformed("the records run past the end of the batch") from None
    if p != n:
        raise _Malformed(f"{n - p} bytes follow the last of its {count} records")
    return base_ts + hi, base_ts + lo


def _run(
    data: bytes | memoryview, p: int, r: int, size: int, q: int, i: int, shape: tuple[int, int, int, list[int]]
) -> tuple[int, int] | None:
    """Whether the `r` records of `size` bytes from `p` on, records `i` to `i + r - 1`, have the
    `shape` of the record at `q` (which the walk has checked; `_shape`): (max, min) of their
    timestamp deltas if they do, None if any does not. Each field is read across all `r` records as one strided
    slice: every byte of the template's length varints (the record's, its key's, its value's, its
    header count's and its headers') must be the template's, so each record's fields parse as the
    template's do and end where its length says; each offset delta must be the canonical varint of
    2(i + j), each timestamp delta one byte; attributes, keys, values and header contents may be
    anything."""
    ts, o, width, fixed = shape
    first, lanes = _offset_delta_lanes(width)
    if i < first or i + r > first + len(lanes[0]):
        return None  # past the offset deltas of the template's width (or it has a longer varint than it needs)
    view = memoryview(data)
    stop = p + r * size
    same = _SAME
    for at in fixed:
        if view[p + at : stop : size] != same[data[q + at]] * r:
            return None
    for j, lane in enumerate(lanes):
        if view[p + o + j : stop : size] != lane[i - first : i - first + r]:
            return None
    ranks = view[p + ts : stop : size].tobytes().translate(_TS_RANK)
    top = ranks[-1]  # timestamps mostly grow along a batch: the last is its maximum, the first its minimum
    above = ranks.translate(None, _UP_TO[top])
    if above:
        top = max(above)
        if top == _NOT_ONE_BYTE:
            return None
    bottom = ranks[0]
    below = ranks.translate(None, _FROM[bottom])
    if below:
        bottom = min(below)
    return top - 64, bottom - 64


def _shape(data: bytes | memoryview, q: int) -> tuple[int, int, int, list[int]] | None:
    """The layout of the well-formed record at `q`, offsets from `q`: (its timestamp delta, its
    offset delta, the offset delta's width, every byte of its other varints: the record's length,
    its key's, value's, header count's and headers' lengths, the length's first). None when its
    timestamp delta takes more than one byte (runs read it as one)."""
    p = _uvarint(data, q)[1]
    if data[p + 1] >= 0x80:
        return None
    fixed = list(range(p - q))
    o = p + 2
    p = _uvarint(data, o)[1]
    width = p - o
    for _ in range(2):  # key, value
        u, after = _uvarint(data, p)
        fixed += range(p - q, after - q)
        p = after if u & 1 else after + (u >> 1)
    u, after = _uvarint(data, p)  # header count
    fixed += range(p - q, after - q)
    p = after
    for _ in range(u >> 1):  # (zigzag: the walk has seen it is not negative)
        for _ in range(2):  # header key, header value
            u, after = _uvarint(data, p)
            fixed += range(p - q, after - q)
            p = after if u & 1 else after + (u >> 1)
    return o - 1 - q, o - q, width, fixed


_FIRST_RUN = 16  # records in the first run checked after a template; doubled on each success
_MIN_RUN = 4  # fewer records than this are walked: a run's checks cost a few dozen Python operations
_SAME = tuple(bytes((b,)) for b in range(256))
# A one-byte timestamp delta's zigzag value plus 64 (0..127, ordered as the values are); 255 for a
# byte that starts a longer varint.
_NOT_ONE_BYTE = 255
_TS_RANK = bytes(((b >> 1) ^ -(b & 1)) + 64 if b < 0x80 else _NOT_ONE_BYTE for b in range(256))
_UP_TO = tuple(bytes(range(b + 1)) for b in range(256))
_FROM = tuple(bytes(range(b, 256)) for b in range(256))
# Offset deltas of one, two and three bytes: records 0-63, 64-8191, 8192 on (runs stop at 2**17).
_ZONES = {1: (0, 64), 2: (64, 8192), 3: (8192, 1 << 17)}


@functools.cache
def _offset_delta_lanes(width: int) -> tuple[int, tuple[bytes, ...]]:
    """The records whose canonical offset delta varint has `width` bytes: (the first one's index,
    and for each byte of the varint, that byte of each record's offset delta 2i, in order).
    Empty lanes for another width: no run is checked there. Built from repeats: byte 0 of 2i
    repeats every 64 records, byte j > 0 is one value for blocks of 2**(7j - 1) records (and each
    width's records start at a multiple of 64)."""
    first, stop = _ZONES.get(width, (0, 0))
    lanes = []
    for j in range(max(width, 1)):
        more = 0x80 if j < width - 1 else 0  # continuation bit
        if j == 0:
            lanes.append(bytes(((2 * i) & 0x7F) | more for i in range(64)) * ((stop - first) // 64))
        else:
            block = 1 << (7 * j - 1)
            lanes.append(b"".join(bytes((((i >> (7 * j - 1)) & 0x7F) | more,)) * block for i in range(first, stop, block)))
    return first, tuple(lanes)


_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))  # one-byte zigzag varints, decoded


def _scan_headers(data: bytes | memoryview, p: int, end: int, i: int) -> int:
    """Record `i`'s headers from its count at `p`; the position after them."""
    u, p = _uvarint(data, p)
    hc = (u >> 1) ^ -(u & 1)
    if hc < 0:
        raise _Malformed(f"record {i} has {hc} headers")
    if hc > (end - p) >> 1:  # each header takes two bytes at least
        raise _Malformed(f"record {i} has {hc} headers in {end - p} bytes")
    for _ in range(hc):
        u, p = _uvarint(data, p)
        if u & 1:
            raise _Malformed(f"record {i} has a null header key")
        p += u >> 1
        u, p = _uvarint(data, p)
        if u & 1:
            if u != 1:
                raise _Malformed(f"record {i} has a header value length of {(u >> 1) ^ -1}")
        else:
            p += u >> 1
    return p


def _uvarint(data: bytes | memoryview, p: int) -> tuple[int, int]:
    """An unsigned varint at `p` of up to 10 bytes (a varlong): (its raw value, the position after it)."""
    result = 0
    shift = 0
    while True:
        b = data[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7
        if shift > 63:
            raise _Malformed("a varint is longer than 10 bytes")


def _recompress(buf: bytearray, codec: int) -> bytearray:
    """Rebuild every non-control batch with `codec` (topic compression.type)."""
    out = bytearray()
    for pos, header in iter_batches(buf):
        if header.is_control or header.compression == codec:
            out += buf[pos : pos + header.size_in_bytes]
            continue
        _, records = decode_batch(buf, pos)
        out += rebuild_batch(header, records, compression=codec)
    return out
