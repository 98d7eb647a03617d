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
    CorruptRecordError,
    InvalidRecordError,
    compute_crc,
    decode_batch,
    iter_batches,
    read_varint,
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


def _payload(buf: bytearray, pos: int, header: BatchHeader, index: int) -> bytes | memoryview:
    view = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size_in_bytes]
    if header.compression == _compression.NONE:
        return view
    try:
        return _compression.decompress(header.compression, view)
    except ValueError as exc:
        msg = f"batch {index}: cannot decompress: {exc}"
        raise RecordValidationError(msg, [(index, msg)]) from exc


def _check_batch(
    buf: bytearray, pos: int, header: BatchHeader, index: int, cfg: ValidationConfig, now_ms: int
) -> None:
    data = _payload(buf, pos, header, index)
    if not isinstance(data, bytes):
        data = bytes(data)
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


def _scan_records(data: bytes, count: int, base_ts: int, compacted: bool) -> tuple[int, int]:
    """Walk `count` records; return (max, min) timestamps. One loop, varints decoded inline
    (one-byte values take the fast branch): this runs for every produced record."""
    n = len(data)
    p = 0
    max_delta = -(2**63)
    min_delta = 2**63
    try:
        for i in range(count):
            # length
            b = data[p]
            p += 1
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
            else:
                length, p = _slow_varint(data, p, b)
            end = p + length
            if length < 6 or end > n:
                raise _Malformed(f"record {i} has length {length}")
            p += 1  # attributes
            b = data[p]
            p += 1
            if b < 0x80:
                ts = (b >> 1) ^ -(b & 1)
            else:
                ts, p = _slow_varint(data, p, b)
            if ts > max_delta:
                max_delta = ts
            if ts < min_delta:
                min_delta = ts
            b = data[p]
            p += 1
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
            else:
                od, p = _slow_varint(data, p, b)
            if od != i:
                raise _Malformed(f"record {i} has offset delta {od}")
            b = data[p]
            p += 1
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
            else:
                kl, p = _slow_varint(data, p, b)
            if kl < 0:
                if kl != -1:
                    raise _Malformed(f"record {i} has a key length of {kl}")
                if compacted:
                    raise _Keyless(i)
            else:
                p += kl
            b = data[p]
            p += 1
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
            else:
                vl, p = _slow_varint(data, p, b)
            if vl > 0:
                p += vl
            elif vl < -1:
                raise _Malformed(f"record {i} has a value length of {vl}")
            b = data[p]
            p += 1
            hc = (b >> 1) ^ -(b & 1) if b < 0x80 else _slow_varint(data, p, b)[0]
            if b >= 0x80:
                p = _slow_varint(data, p, b)[1]
            if hc:
                if hc < 0:
                    raise _Malformed(f"record {i} has {hc} headers")
                for _ in range(hc):
                    hk, p = (
                        _slow_varint(data, p + 1, data[p])  # p + 1: past the first byte
                        if data[p] >= 0x80
                        else ((data[p] >> 1) ^ -(data[p] & 1), p + 1)
                    )
                    if hk < 0:
                        raise _Malformed(f"record {i} has a null header key")
                    p += hk
                    hv, p = (
                        _slow_varint(data, p + 1, data[p])
                        if data[p] >= 0x80
                        else ((data[p] >> 1) ^ -(data[p] & 1), p + 1)
                    )
                    if hv > 0:
                        p += hv
                    elif hv < -1:
                        raise _Malformed(f"record {i} has a header value length of {hv}")
            if p != end:
                raise _Malformed(
                    f"record {i} is {length} bytes but its fields take {length + p - end}"
                )
    except IndexError:
        raise _Malformed("the records run past the end of the batch") from None
    if p != n:
        raise _Malformed(f"{n - p} bytes follow the last of its {count} records")
    return base_ts + max_delta, base_ts + min_delta


def _slow_varint(data: bytes, p: int, first: int) -> tuple[int, int]:
    """A multi-byte zigzag varint whose first byte (already read) was `first`; p is past it."""
    try:
        return read_varint(data, p - 1)
    except CorruptRecordError:
        raise _Malformed("a varint is longer than 10 bytes") from None


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
