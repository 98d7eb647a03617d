"""LogValidator: every well-formed batch passes and gets its maxTimestamp from its records; any
corruption of the records is either still a decodable batch or a RecordValidationError; the
one-pass record scan answers as the first, plain walk does (the reference, kept here)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.protocol.records import (
    CorruptRecordError,
    Record,
    build_batch,
    compute_crc,
    decode_batch,
    read_varint,
)
from kavka.storage import log_validator as lv
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


# ---------------------------------------------------------------- the fast scan against the reference


def _reference_scan(data: bytes, count: int, base_ts: int, compacted: bool) -> tuple[str, int, int]:
    """The record walk as first written (one signed varint read per field, through read_varint):
    ("ok", max, min), ("malformed", 0, 0) or ("keyless", record index, 0)."""
    p, n = 0, len(data)
    tss = []
    try:
        for i in range(count):
            length, p = read_varint(data, p)
            end = p + length
            if length < 6 or end > n:
                return ("malformed", 0, 0)
            ts, p = read_varint(data, p + 1)
            tss.append(ts)
            od, p = read_varint(data, p)
            if od != i:
                return ("malformed", 0, 0)
            kl, p = read_varint(data, p)
            if kl < -1:
                return ("malformed", 0, 0)
            if kl == -1 and compacted:
                return ("keyless", i, 0)
            p += max(kl, 0)
            vl, p = read_varint(data, p)
            if vl < -1:
                return ("malformed", 0, 0)
            p += max(vl, 0)
            hc, p = read_varint(data, p)
            if hc < 0:
                return ("malformed", 0, 0)
            for _ in range(hc):
                hk, p = read_varint(data, p)
                if hk < 0:
                    return ("malformed", 0, 0)
                hv, p = read_varint(data, p + hk)
                if hv < -1:
                    return ("malformed", 0, 0)
                p += max(hv, 0)
            if p != end:
                return ("malformed", 0, 0)
    except (IndexError, CorruptRecordError):
        return ("malformed", 0, 0)
    if p != n:
        return ("malformed", 0, 0)
    return ("ok", base_ts + max(tss), base_ts + min(tss))


def _fast_scan(data: bytes, count: int, base_ts: int, compacted: bool) -> tuple[str, int, int]:
    try:
        hi, lo = lv._scan_records(memoryview(bytearray(b"xx" + data))[2:], count, base_ts, compacted)
    except lv._Malformed:
        return ("malformed", 0, 0)
    except lv._Keyless as e:
        return ("keyless", e.args[0], 0)
    return ("ok", hi, lo)


# Many records (offset deltas of two and three bytes), keys and values around the one-byte limit
# (63 bytes), timestamps anywhere (varlongs of one to ten bytes), headers.
wide_records = st.lists(
    st.tuples(
        st.integers(NOW - 2**40, NOW + 2**40) | st.integers(NOW - 5, NOW + 5),
        st.none() | st.binary(min_size=60, max_size=70) | st.binary(max_size=3),
        st.none() | st.binary(min_size=60, max_size=200) | st.binary(max_size=3),
        st.lists(st.tuples(st.text(max_size=70), st.none() | st.binary(max_size=70)), max_size=2),
    ),
    min_size=1,
    max_size=8,
).flatmap(lambda rs: st.integers(1, 300).map(lambda n: (rs * n)[:n]))  # past 64 records: two-byte offset deltas


@settings(max_examples=400, deadline=None)
@given(wide_records, st.booleans(), st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), max_size=3),
       st.integers(-3, 3), st.none() | st.integers(0, 250))
def test_the_fast_scan_gives_the_reference_scans_answer(recs, compacted, flips, count_change, gap_at):
    """Well-formed or corrupted (bytes changed, the record count off, an offset delta skipped from
    record `gap_at` on), the one-pass scan accepts exactly what the reference walk accepts, with
    the same timestamps, and refuses the rest the same way (malformed, or the same keyless record
    on a compacted topic)."""
    if gap_at is not None:
        recs = [Record(offset=i + (i >= gap_at), timestamp=r[0], key=r[1], value=r[2], headers=tuple(r[3]))
                for i, r in enumerate(recs)]
    batch = build_batch(recs)
    header, _ = decode_batch(batch)
    data = bytearray(batch[61:])
    for at, value in flips:
        data[at % len(data)] = value
    count = max(header.records_count + count_change, 0)
    data = bytes(data)
    assert _fast_scan(data, count, header.base_timestamp, compacted) == _reference_scan(
        data, count, header.base_timestamp, compacted)


# ---------------------------------------------------------------- runs of records of one shape

@st.composite
def one_shape_batches(draw):
    """Records as a client batches them: one shape (value size, key size, header layout) with
    timestamps near the first, some hundreds (offset deltas of one and two bytes) or past 8,192
    (three bytes), and a few records of another shape or with a timestamp far away, anywhere.
    Returns (records, their start positions in the batch's records)."""
    n = draw(st.integers(1, 400) | st.integers(8100, 8400))
    key = draw(st.none() | st.binary(max_size=70))
    value = draw(st.none() | st.binary(max_size=200))
    headers = tuple(draw(st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=70)), max_size=2)))
    spread = draw(st.sampled_from([0, 5, 63, 64, 200]))  # timestamps within `spread` ms of NOW
    seed = draw(st.integers(0, 2**32))
    odd = dict(draw(st.lists(st.tuples(st.integers(0, n - 1), st.tuples(
        st.integers(NOW - 2**20, NOW + 2**20),
        st.none() | st.binary(max_size=3),
        st.none() | st.binary(max_size=80),
        st.lists(st.tuples(st.text(max_size=2), st.none() | st.binary(max_size=2)), max_size=1),
    )), max_size=3)))
    rng = random.Random(seed)
    recs = [odd.get(i) or (NOW + rng.randint(-spread, spread), key, value, headers) for i in range(n)]
    recs[0] = (NOW, *recs[0][1:])
    return recs


@settings(max_examples=300, deadline=None)
@given(one_shape_batches(), st.booleans(), st.data())
def test_runs_of_one_shape_give_the_reference_scans_answer(recs, compacted, data):
    """Batches of one shape are checked a run at a time (`_run`); well-formed or with bytes
    changed where a run's checks look (a length varint, the timestamp or offset delta, the key,
    value or header count) or anywhere, the scan answers as the reference walk does."""
    batch = build_batch(recs)
    header, _ = decode_batch(batch)
    body = bytearray(batch[61:])
    starts, p = [], 0
    while p < len(body):
        starts.append(p)
        length, p = read_varint(body, p)
        p += length
    for _ in range(data.draw(st.integers(0, 3))):
        record = data.draw(st.integers(0, len(starts) - 1))
        end = starts[record + 1] if record + 1 < len(starts) else len(body)
        at = data.draw(st.sampled_from([starts[record] + d for d in range(6)] + [end - 1, end - 2])
                       | st.integers(0, len(body) - 1))
        body[min(at, len(body) - 1)] = data.draw(st.integers(0, 255))
    body = bytes(body)
    assert _fast_scan(body, header.records_count, header.base_timestamp, compacted) == _reference_scan(
        body, header.records_count, header.base_timestamp, compacted)


def test_a_run_takes_its_timestamps_and_stops_at_an_odd_record():
    """A batch of 5,000 records of one shape with one record of another in the middle and one
    whose timestamp is furthest from the others near the end: the scan checks most records in runs
    (fewer `_run` calls than records by far) and still finds both timestamp bounds; a null key
    among keyed records of a compacted topic is refused at its index."""
    recs = [(NOW + i % 7, b"k", b"v" * 100, (("h", b"x"),)) for i in range(5000)]
    recs[2500] = (NOW, b"k", b"v" * 99, ())
    recs[4900] = (NOW - 40, b"k", b"v" * 100, (("h", b"x"),))
    batch = build_batch(recs)
    header, _ = decode_batch(batch)
    body = batch[61:]
    calls = []
    real = lv._run

    def counted(*args):
        calls.append(args[2])
        return real(*args)

    try:
        lv._run = counted
        assert _fast_scan(body, 5000, header.base_timestamp, False) == ("ok", NOW + 6, NOW - 40)
    finally:
        lv._run = real
    assert len(calls) < 50 and sum(calls) > 4900
    recs[3000] = (NOW, None, b"v" * 100, (("h", b"x"),))
    batch = build_batch(recs)
    assert _fast_scan(batch[61:], 5000, NOW, True) == ("keyless", 3000, 0)
    assert _reference_scan(batch[61:], 5000, NOW, True) == ("keyless", 3000, 0)


def test_offset_delta_lanes_are_the_canonical_varints_of_2i():
    """The lanes a run's offset deltas are compared with (built from repeats) hold, for each
    width, byte j of the varint of zigzag(i) = 2i of every record i with a varint of that width."""

    def varint(u: int) -> bytes:
        out = bytearray()
        while u >= 0x80:
            out.append(u & 0x7F | 0x80)
            u >>= 7
        out.append(u)
        return bytes(out)

    for width, (first, stop) in lv._ZONES.items():
        start, lanes = lv._offset_delta_lanes(width)
        assert start == first and len(lanes) == width
        for i in (*range(first, min(first + 200, stop)), *range(max(first, stop - 200), stop)):
            encoded = varint(2 * i)
            assert len(encoded) == width
            assert bytes(lane[i - first] for lane in lanes) == encoded
        assert all(len(lane) == stop - first for lane in lanes)
    assert lv._offset_delta_lanes(4) == (0, (b"", b"", b"", b""))
