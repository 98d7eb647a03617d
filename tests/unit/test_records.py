"""Record batch v2: header parsing, validation, offset assignment, build/decode."""

from __future__ import annotations

import struct

import pytest

from kavka.protocol import compression
from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordTooLargeError,
    UnsupportedMagicError,
    assign_offsets,
    batch_crc_ok,
    build_batch,
    check_batch_sizes,
    decode_batch,
    iter_batches,
    iter_records,
    parse_header,
    valid_prefix_length,
    validate_batches,
)

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


def _records(n: int) -> list[tuple]:
    return [
        (1000 + i, f"k{i}".encode(), f"value-{i}".encode() * (i % 5), [("h", b"v"), ("n", None)])
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_build_decode_round_trip(codec: int) -> None:
    recs = _records(20) + [(1, None, None), (5000, b"", b"")]
    batch = build_batch(recs, base_offset=100, compression=codec)
    header, decoded = decode_batch(batch)
    assert header.base_offset == 100
    assert header.records_count == len(recs)
    assert header.last_offset == 100 + len(recs) - 1
    assert header.compression == codec
    assert header.size_in_bytes == len(batch)
    assert header.base_timestamp == 1000
    assert decoded[-2].timestamp == 1
    assert header.max_timestamp == 5000
    assert batch_crc_ok(batch, 0, header)
    assert [r.offset for r in decoded] == list(range(100, 100 + len(recs)))
    assert decoded[3] == Record(
        offset=103,
        timestamp=1003,
        key=b"k3",
        value=b"value-3" * 3,
        headers=(("h", b"v"), ("n", None)),
    )
    assert decoded[-2].key is None and decoded[-2].value is None
    assert decoded[-1].key == b"" and decoded[-1].value == b""
    assert decoded[-1].timestamp == 5000


def test_known_bytes_match_kafka_layout() -> None:
    batch = build_batch([(10, b"k", b"v", ())], producer_id=7, producer_epoch=1, base_sequence=3)
    base_offset, length, ple, magic, crc, attrs, lod = struct.unpack_from(">qiibIhi", batch)
    assert (base_offset, length, ple, magic, attrs, lod) == (0, len(batch) - 12, -1, 2, 0, 0)
    pid, pepoch, seq, count = struct.unpack_from(">qhii", batch, 43)
    assert (pid, pepoch, seq, count) == (7, 1, 3, 1)
    # record: len=8: attrs 0, tsDelta 0, offDelta 0, keyLen 1 'k', valLen 1 'v', 0 headers
    assert batch[BATCH_HEADER_SIZE:] == bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes(
        [0]
    )


def test_records_with_gaps_and_flags() -> None:
    recs = [
        Record(offset=10, timestamp=1, key=b"a", value=b"1"),
        Record(offset=14, timestamp=2, key=b"b", value=None),
    ]
    batch = build_batch(
        recs,
        base_offset=10,
        is_transactional=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    header, decoded = decode_batch(batch)
    assert header.is_transactional and not header.is_control
    assert header.last_offset_delta == 4 and header.records_count == 2
    assert [r.offset for r in decoded] == [10, 14]
    with pytest.raises(ValueError):
        build_batch([Record(offset=3, timestamp=0, key=None, value=None)], base_offset=5)
    with pytest.raises(ValueError):
        build_batch([])


def test_iter_batches_and_torn_tail() -> None:
    b1 = build_batch(_records(3), base_offset=0)
    b2 = build_batch(_records(2), base_offset=3, compression=compression.GZIP)
    buf = b1 + b2
    assert [(p, h.base_offset) for p, h in iter_batches(buf)] == [(0, 0), (len(b1), 3)]
    for cut in (1, 10, 20, BATCH_HEADER_SIZE, len(b2) - 1):
        torn = buf[: len(buf) - len(b2) + cut]
        assert [h.base_offset for _, h in iter_batches(torn)] == [0]
        assert valid_prefix_length(torn) == len(b1)
    assert valid_prefix_length(buf) == len(buf)
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2, 3, 4]


def test_crc_catches_every_single_byte_flip() -> None:
    batch = build_batch(_records(4), base_offset=0, compression=compression.LZ4)
    for i in range(21, len(batch)):  # CRC covers attributes..end
        bad = bytearray(batch)
        bad[i] ^= 0x01
        assert valid_prefix_length(bad) == 0, i
        with pytest.raises(CorruptRecordError):
            validate_batches(bad, max_message_bytes=1 << 20)


def test_validate_batches_ok_and_errors() -> None:
    good = build_batch(_records(5))
    headers = validate_batches(good + build_batch(_records(2)), max_message_bytes=1 << 20)
    assert [h.records_count for h in headers] == [5, 2]
    with pytest.raises(RecordTooLargeError):
        validate_batches(good, max_message_bytes=len(good) - 1)
    with pytest.raises(RecordTooLargeError):
        check_batch_sizes(headers, max_message_bytes=10)
    with pytest.raises(CorruptRecordError, match="incomplete"):
        validate_batches(good[:-1], max_message_bytes=1 << 20)
    with pytest.raises(CorruptRecordError, match="incomplete batch header"):
        validate_batches(good + good[:30], max_message_bytes=1 << 20)
    with pytest.raises(InvalidRecordError):
        validate_batches(b"", max_message_bytes=1 << 20)
    control = build_batch(
        [(0, b"\x00\x00\x00\x00", b"")], is_control=True, producer_id=1, base_sequence=0
    )
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(control, max_message_bytes=1 << 20)
    assert validate_batches(control, max_message_bytes=1 << 20, allow_control=True)
    txn_no_pid = build_batch(_records(1), is_transactional=True)
    with pytest.raises(InvalidRecordError, match="producerId"):
        validate_batches(txn_no_pid, max_message_bytes=1 << 20)
    pid_no_seq = build_batch(_records(1), producer_id=5)
    with pytest.raises(InvalidRecordError, match="baseSequence"):
        validate_batches(pid_no_seq, max_message_bytes=1 << 20)


def _with_crc(buf: bytearray) -> bytes:
    import crc32c

    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_validate_rejects_inconsistent_offsets() -> None:
    bad = bytearray(build_batch(_records(3)))
    struct.pack_into(">i", bad, 23, 5)  # lastOffsetDelta 5 for 3 records
    with pytest.raises(InvalidRecordError, match="offset range"):
        validate_batches(_with_crc(bad), max_message_bytes=1 << 20)
    bad = bytearray(build_batch(_records(3)))
    struct.pack_into(">i", bad, 57, 0)
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batches(_with_crc(bad), max_message_bytes=1 << 20)
    bad = bytearray(build_batch(_records(3)))
    struct.pack_into(">h", bad, 21, 6)  # codec 6
    with pytest.raises(CorruptRecordError, match="codec"):
        validate_batches(_with_crc(bad), max_message_bytes=1 << 20)


def test_old_magic_is_unsupported() -> None:
    bad = bytearray(build_batch(_records(1)))
    bad[16] = 1
    with pytest.raises(UnsupportedMagicError) as err:
        validate_batches(bad, max_message_bytes=1 << 20)
    assert err.value.magic == 1
    with pytest.raises(UnsupportedMagicError):
        parse_header(bad)
    assert valid_prefix_length(bad) == 0


def test_batch_length_too_small_is_corrupt() -> None:
    bad = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(CorruptRecordError, match="batchLength"):
        parse_header(bad)


@pytest.mark.parametrize("codec", CODECS)
def test_assign_offsets_keeps_crc_valid(codec: int) -> None:
    buf = bytearray(
        build_batch(_records(3), compression=codec) + build_batch(_records(4), compression=codec)
    )
    nxt = assign_offsets(buf, base_offset=1000, partition_leader_epoch=7, log_append_time_ms=None)
    assert nxt == 1007
    headers = validate_batches(buf, max_message_bytes=1 << 20)
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(1000, 7), (1003, 7)]
    assert [r.offset for r in iter_records(buf)] == list(range(1000, 1007))
    assert [r.timestamp for r in iter_records(buf)] == [1000, 1001, 1002, 1000, 1001, 1002, 1003]


def test_assign_offsets_log_append_time_recomputes_crc() -> None:
    buf = bytearray(build_batch(_records(3), compression=compression.ZSTD))
    assign_offsets(buf, base_offset=5, partition_leader_epoch=0, log_append_time_ms=99_999)
    (header,) = validate_batches(buf, max_message_bytes=1 << 20)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.max_timestamp == 99_999
    assert header.base_timestamp == 1000  # Kafka leaves baseTimestamp alone
    assert {r.timestamp for r in iter_records(buf)} == {99_999}


def test_decode_corrupt_records_raise() -> None:
    batch = bytearray(build_batch(_records(3)))
    struct.pack_into(">i", batch, 57, 10)  # more records than present
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(batch))
    comp = bytearray(build_batch(_records(3), compression=compression.GZIP))
    comp[-6] ^= 0xFF  # inside the gzip CRC-32 trailer
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(comp))
