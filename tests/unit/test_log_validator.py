"""LogValidator: every well-formed batch passes and gets its maxTimestamp from its records; any
corruption of the records is either still a decodable batch or a RecordValidationError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.protocol.records import CorruptRecordError, build_batch, compute_crc, decode_batch
from kavka.storage.log_validator import (
    InvalidTimestampError,
    RecordValidationError,
    ValidationConfig,
    validate_records,
)

NOW = 1_700_000_000_000

records = st.lists(
    st.tuples(
        st.integers(NOW - 10_000, NOW + 10_000),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from([0, 1, 2, 3, 4]))
def test_well_formed_batches_pass_with_max_timestamp_from_records(recs, codec):
    batch = bytearray(build_batch(recs, compression=codec))
    struct.pack_into(">q", batch, 35, -1)  # a client that sends no maxTimestamp
    out = validate_records(batch, ValidationConfig(timestamp_after_max_ms=60_000), now_ms=NOW)
    header, decoded = decode_batch(out)
    assert header.max_timestamp == max(r[0] for r in recs)
    assert compute_crc(out, 0, len(out)) == header.crc
    assert [(r.key, r.value) for r in decoded] == [(r[1], r[2]) for r in recs]


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_corrupted_records_are_refused_or_still_decode(recs, data):
    batch = bytearray(build_batch(recs))
    pos = data.draw(st.integers(61, len(batch) - 1))
    batch[pos] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    try:
        validate_records(
            batch,
            ValidationConfig(timestamp_before_max_ms=2**62, timestamp_after_max_ms=2**62),
            now_ms=NOW,
        )
    except RecordValidationError:
        return
    # Accepted: then the reader must decode exactly the stated number of records.
    try:
        header, decoded = decode_batch(batch)
    except CorruptRecordError:
        pytest.fail("the validator accepted a batch the reader cannot decode")
    assert len(decoded) == header.records_count


def test_long_header_keys_and_values_are_accepted():
    """Multi-byte varints in headers (keys or values of 64 bytes and more) were misread and refused."""
    recs = [(NOW, b"k", b"v", [("h" * 100, b"x" * 200), ("t", b"y" * 64)]), (NOW, None, b"w", [("k" * 64, None)])]
    batch = bytearray(build_batch(recs))
    validate_records(batch, ValidationConfig(), now_ms=NOW)
    _, decoded = decode_batch(batch)
    assert len(decoded) == 2


def test_keyless_record_refused_only_when_compacted():
    batch = bytearray(build_batch([(NOW, None, b"v")]))
    validate_records(bytearray(batch), ValidationConfig(), now_ms=NOW)
    with pytest.raises(RecordValidationError, match="without key"):
        validate_records(batch, ValidationConfig(compacted=True), now_ms=NOW)


def test_timestamp_window():
    cfg = ValidationConfig(timestamp_before_max_ms=1000, timestamp_after_max_ms=1000)
    validate_records(bytearray(build_batch([(NOW - 999, b"k", b"v")])), cfg, now_ms=NOW)
    with pytest.raises(InvalidTimestampError) as e:
        validate_records(bytearray(build_batch([(NOW - 1001, b"k", b"v")])), cfg, now_ms=NOW)
    assert e.value.record_errors[0][0] == 0
    with pytest.raises(InvalidTimestampError):
        validate_records(bytearray(build_batch([(NOW + 1001, b"k", b"v")])), cfg, now_ms=NOW)


def test_recompression_keeps_producer_fields_and_records():
    src = build_batch(
        [(NOW, b"k", b"v" * 50)] * 3,
        compression=1,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
    )
    out = validate_records(bytearray(src), ValidationConfig(target_codec=4), now_ms=NOW)
    header, decoded = decode_batch(out)
    assert header.compression == 4
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert [r.value for r in decoded] == [b"v" * 50] * 3
