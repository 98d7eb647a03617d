"""The vectorised Arrow decoder (`kavka.spark.arrow_decode`) against the per-record reference.

Randomised fetch responses (hypothesis): keys and values null or not, headers,
every codec, CreateTime and LogAppendTime, control batches (transaction
markers), compacted offset gaps, ranges that start and end inside batches.
Both decoders must give the same rows and the same next fetch position; a
record whose lengths run past it must raise CorruptRecordError from both.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kavka.protocol.records import CorruptRecordError, Record, build_batch  # noqa: E402
from kavka.spark.arrow_decode import _reference, decode_arrow  # noqa: E402
from kavka.spark.source import _arrow_schema  # noqa: E402

SCHEMAS = {h: _arrow_schema(h) for h in (False, True)}

payload = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))


@st.composite
def fetch_response(draw: st.DrawFn) -> tuple[bytes, int]:
    """Whole batches back to back, offsets increasing with random gaps."""
    out = bytearray()
    offset = draw(st.integers(0, 1000))
    with_headers = draw(st.booleans())
    for _ in range(draw(st.integers(1, 5))):
        base = offset
        n = draw(st.integers(1, 30))
        records = []
        ts = draw(st.integers(0, 2**41))
        for _i in range(n):
            offset += draw(st.sampled_from([1, 1, 1, 2, 7, 300]))  # compacted gaps
            hdrs = tuple(draw(st.lists(header, max_size=3))) if with_headers else ()
            records.append(
                Record(offset - 1, ts + draw(st.integers(-5, 10**6)), draw(payload), draw(payload), hdrs)
            )
        out += build_batch(
            records,
            base_offset=base,
            compression=draw(st.sampled_from([0, 1, 2, 3, 4])),
            timestamp_type=draw(st.sampled_from([0, 1])),
            is_transactional=draw(st.booleans()),
            is_control=draw(st.booleans()) and n == 1,  # a marker: one control record
        )
    return bytes(out), offset


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetch_response(), st.integers(0, 1500), st.integers(1, 2000), st.booleans())
def test_same_rows_and_position_as_reference(
    resp: tuple[bytes, int], start: int, length: int, headers: bool
) -> None:
    buf, _last = resp
    end = start + length
    schema = SCHEMAS[headers]
    got, got_next = decode_arrow(buf, start, end, "t\u00e9", 3, schema)
    want, want_next = _reference(buf, start, end, "t\u00e9", 3, schema, headers)
    assert got_next == want_next
    if want is None:
        assert got is None
        return
    assert got is not None
    got.validate(full=True)
    assert got.schema == want.schema
    assert got.to_pydict() == want.to_pydict()


@pytest.mark.parametrize("damage", ["length", "key_length", "value_length"])
def test_damaged_records_raise(damage: str) -> None:
    buf = bytearray(build_batch([(1000, b"key", b"value"), (1001, b"k2", b"v2")]))
    # Record 0 starts right after the 61-byte header: length, attributes,
    # timestamp delta, offset delta, key length, key, value length, ...
    at = {"length": 61, "key_length": 65, "value_length": 69}[damage]
    buf[at] = 0x7E  # zigzag 63: runs past the record (and the batch)
    for fn in (
        lambda: decode_arrow(bytes(buf), 0, 10, "t", 0, SCHEMAS[False]),
        lambda: _reference(bytes(buf), 0, 10, "t", 0, SCHEMAS[False], False),
    ):
        with pytest.raises(CorruptRecordError):
            fn()


def test_big_varints_and_null_columns() -> None:
    value = b"v" * 20000  # three-byte lengths
    recs = [Record(i, 2**40 + i * 10**9, None if i % 2 else b"k", value if i % 3 else None)
            for i in range(50)]
    buf = build_batch(recs, base_offset=0)
    got, nxt = decode_arrow(buf, 5, 45, "t", 0, SCHEMAS[False])
    want, want_nxt = _reference(buf, 5, 45, "t", 0, SCHEMAS[False], False)
    assert nxt == want_nxt == 45
    assert got.num_rows == 40
    assert got.to_pydict() == want.to_pydict()
