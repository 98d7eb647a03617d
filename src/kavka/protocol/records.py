"""Record batch v2 (magic 2): parse, validate, rewrite and build, sans-I/O.

Owns Kafka's on-wire and on-disk record format (``DefaultRecordBatch`` /
``DefaultRecord`` in Kafka's clients, KIP-98). Produce bodies, fetch responses
and ``.log`` segment files are all a plain concatenation of batches. Pure
functions over bytes; any task or thread may call them.

Batch header, 61 bytes, big-endian::

    offset  size  field
    0       8     baseOffset             int64
    8       4     batchLength            int32  bytes after this field
    12      4     partitionLeaderEpoch   int32  not covered by the CRC
    16      1     magic                  int8   always 2 here
    17      4     crc                    uint32 CRC-32C of bytes 21..end
    21      2     attributes             int16  bits 0-2 compression (0 none,
                                                1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                                bit 3 timestampType (1 =
                                                LogAppendTime), bit 4
                                                isTransactional, bit 5
                                                isControl, bit 6
                                                hasDeleteHorizonMs (KIP-534)
    23      4     lastOffsetDelta        int32
    27      8     baseTimestamp          int64
    35      8     maxTimestamp           int64
    43      8     producerId             int64
    51      2     producerEpoch          int16
    53      4     baseSequence           int32
    57      4     recordsCount           int32
    61      ...   records (compressed as a whole when the codec is not none)

Record (signed varints are zigzag, as protobuf's ``sint``)::

    length varint, attributes int8 (unused), timestampDelta varlong,
    offsetDelta varint, keyLength varint, key, valueLength varint, value,
    headersCount varint, then per header: keyLength varint, key (UTF-8),
    valueLength varint, value.   A length of -1 means null.

Invariants kept here: a batch is ``batchLength + 12`` bytes; baseOffset and
partitionLeaderEpoch may be rewritten without touching the CRC (that is how
the broker assigns offsets without recompressing); anything covered by the CRC
(timestamp type, maxTimestamp) needs the CRC recomputed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kavka.protocol import compression as _compression

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "BatchHeader",
    "CorruptRecordError",
    "CREATE_TIME",
    "InvalidRecordError",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "Record",
    "RecordTooLargeError",
    "UnsupportedMagicError",
    "assign_offsets",
    "batch_crc_ok",
    "build_batch",
    "read_varint",
    "rebuild_batch",
    "check_batch_sizes",
    "compute_crc",
    "decode_batch",
    "iter_batches",
    "iter_records",
    "parse_header",
    "valid_prefix_length",
    "validate_batches",
]

BATCH_HEADER_SIZE = 61
# baseOffset + batchLength: the part of a batch not counted in batchLength.
LOG_OVERHEAD = 12
# Bytes before the magic byte are laid out identically in magic 0, 1 and 2,
# which is how Kafka (and we) find the magic before knowing the format.
HEADER_SIZE_UP_TO_MAGIC = 17
MAGIC = 2
NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_CRC_START = 21  # attributes onwards
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
_PARTITION_LEADER_EPOCH_OFFSET = 12
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

_Bytes = bytes | bytearray | memoryview


class CorruptRecordError(ValueError):
    """Bytes that are not a well-formed record batch.

    Kafka's ``CorruptRecordException``: the broker answers CORRUPT_MESSAGE (2).
    """


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch whose contents break a produce rule.

    Kafka's ``InvalidRecordException`` (offset range, count, producer fields,
    control batches from clients): the broker answers INVALID_RECORD (87).
    Subclasses CorruptRecordError so callers that only care "reject it" can
    catch one type.
    """


class UnsupportedMagicError(ValueError):
    """A batch whose magic is not 2 (message format v0/v1).

    Kafka 4 no longer accepts v0/v1 (KIP-724): ``ProduceRequest`` v3+ answers
    INVALID_RECORD for such batches (``ProduceRequest.validateRecords``), and
    older request versions that could carry them get
    UNSUPPORTED_FOR_MESSAGE_FORMAT (43). The broker picks by request version.
    """

    def __init__(self, magic: int, position: int = 0) -> None:
        super().__init__(f"unsupported record batch magic {magic} at position {position}")
        self.magic = magic
        self.position = position


class RecordTooLargeError(ValueError):
    """One batch is larger than max.message.bytes: MESSAGE_TOO_LARGE (10)."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# --------------------------------------------------------------------------- headers


def parse_header(buf: _Bytes, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; checks only magic and length."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        if len(buf) - pos >= HEADER_SIZE_UP_TO_MAGIC and buf[pos + 16] != MAGIC:
            raise UnsupportedMagicError(buf[pos + 16], pos)
        raise CorruptRecordError(
            f"need {BATCH_HEADER_SIZE} bytes for a batch header at position {pos}, "
            f"have {max(len(buf) - pos, 0)}"
        )
    magic = buf[pos + 16]
    if magic != MAGIC:
        raise UnsupportedMagicError(magic, pos)
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has batchLength {header.batch_length}, "
            f"less than the minimum {_MIN_BATCH_LENGTH}"
        )
    return header


def iter_batches(buf: _Bytes) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch.

    Stops silently at an incomplete final batch (a torn tail, or a fetch
    response cut at max_bytes), like Kafka's ``ByteBufferLogInputStream``;
    use :func:`valid_prefix_length` to learn how much was whole. A structurally
    impossible header (bad magic, batchLength too small) still raises.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
    end = len(view)
    pos = 0
    while end - pos >= HEADER_SIZE_UP_TO_MAGIC:
        if end - pos < BATCH_HEADER_SIZE:
            if view[pos + 16] != MAGIC:
                raise UnsupportedMagicError(view[pos + 16], pos)
            return
        header = parse_header(view, pos)
        size = header.size_in_bytes
        if pos + size > end:
            return
        yield pos, header
        pos += size


def _crc32c(data: _Bytes, value: int = 0) -> int:
    """crc32c.crc32c, imported at the first CRC and bound in its place.

    The crc32c package's ``__init__`` looks its own version up in the installed
    distributions' metadata (importlib.metadata: 30-110 ms), and processes that
    speak the protocol without checking a batch -- a Spark streaming query's source
    runner, a new process for every query, above all -- need not pay it.
    """
    global _crc32c
    from crc32c import crc32c as _crc32c

    return _crc32c(data, value)


def compute_crc(buf: _Bytes, pos: int, size: int) -> int:
    view = memoryview(buf).cast("B")
    return _crc32c(view[pos + _CRC_START : pos + size])


def batch_crc_ok(buf: _Bytes, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size_in_bytes) == header.crc


def _check_structure(header: BatchHeader, pos: int) -> None:
    """Header-only consistency checks that hold for every stored batch."""
    if header.records_count < 0:
        raise CorruptRecordError(
            f"batch at position {pos} has negative recordsCount {header.records_count}"
        )
    if header.last_offset_delta < 0 or header.last_offset_delta < header.records_count - 1:
        # Compaction may leave gaps (delta > count - 1) but never fewer
        # offsets than records.
        raise CorruptRecordError(
            f"batch at position {pos} has lastOffsetDelta {header.last_offset_delta} "
            f"for {header.records_count} records"
        )
    if header.compression not in _compression.CODEC_NAMES:
        raise CorruptRecordError(
            f"batch at position {pos} has unknown compression codec {header.compression}"
        )
    if header.compression == _compression.NONE and header.records_count > 0:
        # Every uncompressed record takes at least 7 bytes.
        if header.batch_length - _MIN_BATCH_LENGTH < 7 * header.records_count:
            raise CorruptRecordError(
                f"batch at position {pos} claims {header.records_count} records in "
                f"{header.batch_length - _MIN_BATCH_LENGTH} bytes"
            )


def valid_prefix_length(buf: _Bytes, *, verify_crc: bool = True) -> int:
    """Length of the longest prefix of ``buf`` made of whole, valid batches.

    Used for recovery: everything after the returned length is a torn or
    corrupt tail. Never raises for bad data.
    """
    valid = 0
    try:
        for pos, header in iter_batches(buf):
            _check_structure(header, pos)
            if verify_crc and not batch_crc_ok(buf, pos, header):
                break
            valid = pos + header.size_in_bytes
    except (CorruptRecordError, UnsupportedMagicError):
        pass
    return valid


def check_batch_sizes(headers: Iterable[BatchHeader], *, max_message_bytes: int) -> None:
    """Raise RecordTooLargeError if a batch exceeds max.message.bytes.

    Kafka compares the whole batch size (``batch.sizeInBytes()``) in
    ``UnifiedLog.analyzeAndValidateRecords``.
    """
    for header in headers:
        if header.size_in_bytes > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {header.size_in_bytes} bytes exceeds "
                f"max.message.bytes {max_message_bytes}"
            )


def validate_batches(
    buf: _Bytes,
    *,
    max_message_bytes: int,
    allow_control: bool = False,
) -> list[BatchHeader]:
    """Validate produce input without decompressing; return the headers.

    The checks are those of Kafka's ``UnifiedLog.analyzeAndValidateRecords``
    and ``LogValidator.validateBatch`` that need no decompression. Kafka's
    produce path also requires a single batch per partition for magic 2
    (``getFirstBatchAndMaybeValidateNoMoreBatches``); we accept several so
    the same check serves internal writers.
    """
    view = memoryview(buf).cast("B")
    end = len(view)
    if end == 0:
        raise InvalidRecordError("record set has no batches at all")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            if end - pos >= HEADER_SIZE_UP_TO_MAGIC and view[pos + 16] != MAGIC:
                raise UnsupportedMagicError(view[pos + 16], pos)
            raise CorruptRecordError(
                f"incomplete batch header at position {pos}: {end - pos} of "
                f"{BATCH_HEADER_SIZE} bytes"
            )
        header = parse_header(view, pos)
        size = header.size_in_bytes
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch at position {pos} is {size} bytes, more than "
                f"max.message.bytes {max_message_bytes}"
            )
        if pos + size > end:
            raise CorruptRecordError(
                f"incomplete batch at position {pos}: batchLength {header.batch_length} "
                f"but only {end - pos - LOG_OVERHEAD} bytes follow"
            )
        if compute_crc(view, pos, size) != header.crc:
            raise CorruptRecordError(
                f"record batch at position {pos} fails its CRC-32C check "
                f"(stored {header.crc:#010x})"
            )
        _check_structure(header, pos)
        if header.records_count <= 0:
            raise InvalidRecordError(
                f"invalid reported count {header.records_count} for record batch at {pos}"
            )
        if header.last_offset_delta + 1 != header.records_count:
            raise InvalidRecordError(
                f"inconsistent batch offset range at position {pos}: lastOffsetDelta "
                f"{header.last_offset_delta} for {header.records_count} records"
            )
        if header.has_producer_id and header.base_sequence < 0 and not allow_control:
            # Only a client's batches (Kafka's AppendOrigin.CLIENT) need a sequence: markers have -1.
            raise InvalidRecordError(
                f"batch at position {pos} has producerId {header.producer_id} "
                f"but invalid baseSequence {header.base_sequence}"
            )
        if header.is_transactional and not header.has_producer_id:
            raise InvalidRecordError(f"transactional batch at position {pos} has no producerId")
        if header.is_control and not allow_control:
            raise InvalidRecordError("clients are not allowed to write control records")
        headers.append(header)
        pos += size
    return headers


# --------------------------------------------------------------------------- rewrite


def assign_offsets(
    buf: bytearray,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int | None,
) -> int:
    """Rewrite baseOffset and partitionLeaderEpoch of every batch in place.

    Returns the next offset after the last batch. Neither field is covered by
    the CRC, so batches stay valid without recompression (Kafka's
    ``LogValidator.assignOffsetsNonCompressed`` / in-place path). With
    ``log_append_time_ms`` (topic message.timestamp.type=LogAppendTime) the
    timestamp-type bit and maxTimestamp are set and the CRC recomputed, as
    ``DefaultRecordBatch.setMaxTimestamp`` does; record timestamps then read
    as maxTimestamp.
    """
    next_offset = base_offset
    for pos, header in iter_batches(buf):
        _INT64.pack_into(buf, pos, next_offset)
        _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        if log_append_time_ms is not None and (
            header.timestamp_type != LOG_APPEND_TIME or header.max_timestamp != log_append_time_ms
        ):
            _INT16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, header.attributes | ATTR_TIMESTAMP_TYPE)
            _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, log_append_time_ms)
            _UINT32.pack_into(buf, pos + 17, compute_crc(buf, pos, header.size_in_bytes))
        next_offset += header.last_offset_delta + 1
    return next_offset


# --------------------------------------------------------------------------- varints


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: _Bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it); CorruptRecordError past 10 bytes."""
    shift = 0
    result = 0
    while True:
        if shift > 63:
            raise CorruptRecordError(f"varint too long at position {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def _write_nullable(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_nullable(buf: _Bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptRecordError(f"field of {length} bytes runs past the batch at {pos}")
    return bytes(buf[pos:end]), end


# --------------------------------------------------------------------------- build / decode

RecordLike = (
    Record
    | tuple[int, bytes | None, bytes | None]
    | tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


def _encode_record(
    out: bytearray,
    *,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray(b"\x00")  # attributes: unused, always 0
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_nullable(body, key)
    _write_nullable(body, value)
    _write_varint(body, len(headers))
    for hkey, hvalue in headers:
        _write_nullable(body, hkey.encode("utf-8"))
        _write_nullable(body, hvalue)
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one batch.

    ``delete_horizon_ms`` (KIP-534, set by the log cleaner) sets the delete
    horizon attribute bit and becomes the base timestamp; record timestamps
    stay what they were (their deltas are taken from it).

    ``records`` items are :class:`Record` (its ``offset`` must be >=
    ``base_offset`` and increasing, which allows compaction-style gaps) or
    tuples ``(timestamp, key, value[, headers])`` -- a Record without its
    offset -- placed at consecutive offsets from ``base_offset``.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    items: list[
        tuple[int, int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
    ] = []
    for i, rec in enumerate(records):
        if isinstance(rec, Record):
            delta = rec.offset - base_offset
            items.append((delta, rec.timestamp, rec.key, rec.value, rec.headers))
        else:
            hdrs = rec[3] if len(rec) > 3 else ()
            items.append((i, rec[0], rec[1], rec[2], hdrs))
    prev = -1
    for delta, *_ in items:
        if delta <= prev:
            raise ValueError("record offsets must be increasing and >= base_offset")
        prev = delta
    base_timestamp = items[0][1] if delete_horizon_ms is None else delete_horizon_ms
    max_timestamp = max(item[1] for item in items)
    body = bytearray()
    for delta, ts, key, value, hdrs in items:
        _encode_record(
            body,
            offset_delta=delta,
            timestamp_delta=ts - base_timestamp,
            key=key,
            value=value,
            headers=hdrs,
        )
    payload = _compression.compress(compression, body) if compression else bytes(body)
    attributes = compression & ATTR_COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
    size = BATCH_HEADER_SIZE + len(payload)
    out = bytearray(size)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        items[-1][0],
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    out[BATCH_HEADER_SIZE:] = payload
    _UINT32.pack_into(out, 17, compute_crc(out, 0, size))
    return bytes(out)



def rebuild_batch(header: BatchHeader, records: Sequence[RecordLike], **changes: Any) -> bytes:
    """`records` re-encoded as one batch that keeps `header`'s offset, codec, producer id, epoch and
    sequence, timestamp type, leader epoch and flags; keyword `changes` override any of them (the
    log cleaner and the produce validator's recompression rebuild batches this way)."""
    args: dict[str, Any] = {
        "base_offset": header.base_offset,
        "compression": header.compression,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "timestamp_type": header.timestamp_type,
        "partition_leader_epoch": header.partition_leader_epoch,
        "is_transactional": header.is_transactional,
        "is_control": header.is_control,
    }
    args.update(changes)
    return build_batch(records, **args)

def decode_batch(buf: _Bytes, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its records (decompressing as needed).

    Does not verify the CRC (use :func:`batch_crc_ok`); malformed content
    raises CorruptRecordError.
    """
    header = parse_header(buf, pos)
    size = header.size_in_bytes
    if pos + size > len(buf):
        raise CorruptRecordError(f"incomplete batch at position {pos}")
    view = memoryview(buf).cast("B")
    payload = view[pos + BATCH_HEADER_SIZE : pos + size]
    if header.compression != _compression.NONE:
        try:
            payload = memoryview(_compression.decompress(header.compression, payload))
        except ValueError as exc:
            raise CorruptRecordError(f"batch at position {pos}: {exc}") from exc
    data = bytes(payload)
    log_append = header.timestamp_type == LOG_APPEND_TIME
    records: list[Record] = []
    p = 0
    try:
        for _ in range(header.records_count):
            length, p = read_varint(data, p)
            end = p + length
            if length < 0 or end > len(data):
                raise CorruptRecordError(f"record of length {length} overruns batch at {pos}")
            p += 1  # attributes
            ts_delta, p = read_varint(data, p)
            off_delta, p = read_varint(data, p)
            key, p = _read_nullable(data, p)
            value, p = _read_nullable(data, p)
            nheaders, p = read_varint(data, p)
            if nheaders < 0:
                raise CorruptRecordError(f"negative header count in batch at {pos}")
            hdrs = []
            for _ in range(nheaders):
                hkey, p = _read_nullable(data, p)
                if hkey is None:
                    raise CorruptRecordError(f"null header key in batch at {pos}")
                hvalue, p = _read_nullable(data, p)
                hdrs.append((hkey.decode("utf-8", errors="replace"), hvalue))
            if p != end:
                raise CorruptRecordError(f"record length mismatch in batch at {pos}")
            records.append(
                Record(
                    offset=header.base_offset + off_delta,
                    timestamp=header.max_timestamp
                    if log_append
                    else header.base_timestamp + ts_delta,
                    key=key,
                    value=value,
                    headers=tuple(hdrs),
                )
            )
    except IndexError as exc:
        raise CorruptRecordError(f"records of batch at position {pos} are truncated") from exc
    return header, records


def iter_records(buf: _Bytes) -> Iterator[Record]:
    """Every record of every complete batch in ``buf`` (control batches too)."""
    for pos, _header in iter_batches(buf):
        yield from decode_batch(buf, pos)[1]
