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
    varints take `_uvarint`. Any read past the end raises IndexError: malformed."""
    n = len(data)
    p = 0
    hi = -(2**63)
    lo = 2**63
    last = None
    zigzag = _ZIGZAG
    try:
        for z in range(0, count << 1, 2):  # z: the offset delta this record must carry, zigzagged
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
    except IndexError:
        raise _Malformed("the records run past the end of the batch") from None
    if p != n:
        raise _Malformed(f"{n - p} bytes follow the last of its {count} records")
    return base_ts + hi, base_ts + lo


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
