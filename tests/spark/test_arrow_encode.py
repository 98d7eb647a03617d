"""The bulk Arrow encoder (`kavka.spark.arrow_encode`) and the producer's pipelined sender.

Randomised rows (hypothesis): keys and values null, empty or not, binary or
string columns, values long enough for 3-byte length varints, headers (null
values, empty keys, lists null or empty), explicit timestamps (earlier than
the first record too) and every codec. The sealed batch must be
byte-for-byte what the per-record reference `build_batch` writes when
uncompressed, and decode -- with `kavka.protocol.records.decode_batch` and
with the Spark read path's `arrow_decode` -- to exactly the rows given.
Then a real broker process accepts such batches for every codec through the
producer's sender thread, and a batch it refuses fails `flush()` with
Kafka's error.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kavka.client.errors import KafkaError  # noqa: E402
from kavka.client.producer import Producer, ProducerConfig, seal_batch  # noqa: E402
from kavka.protocol.records import build_batch, decode_batch  # noqa: E402
from kavka.spark.arrow_decode import decode_arrow  # noqa: E402
from kavka.spark.arrow_encode import (  # noqa: E402
    chunk_bounds,
    encode_chunks,
    encode_records,
    record_sizes,
)
from kavka.spark.source import _arrow_schema  # noqa: E402
from tests.integration.helpers import ck_read_to_end  # noqa: E402
from tests.spark.util import create_topic  # noqa: E402

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
payload = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.integers(16_384, 40_000).map(lambda n: bytes([n % 251]) * n),  # 3-byte length varints
)
header = st.tuples(
    st.text(max_size=70),  # 64+ byte keys need 2-byte length varints
    st.one_of(st.none(), st.binary(max_size=140)),
)


@st.composite
def rows(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 40))
    keys = draw(st.lists(payload, min_size=n, max_size=n))
    values = draw(st.lists(payload, min_size=n, max_size=n))
    with_headers = draw(st.booleans())
    headers = [
        draw(st.one_of(st.none(), st.lists(header, max_size=3))) for _ in range(n)
    ] if with_headers else None
    ts0 = draw(st.integers(0, 2**41))
    per_row = draw(st.booleans())
    timestamps = (
        [ts0 + draw(st.integers(-(10**6), 10**9)) for _ in range(n)] if per_row else ts0
    )
    return {
        "keys": keys,
        "values": values,
        "headers": headers,
        "timestamps": timestamps,
        "no_key_column": draw(st.booleans()) and all(k is None for k in keys),
        "strings": draw(st.booleans()),
    }


def _arrays(r: dict) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
    values = pa.array(r["values"], pa.binary())
    keys = None if r["no_key_column"] else pa.array(r["keys"], pa.binary())
    if r["strings"]:
        # a string column carries UTF-8: turn the drawn bytes into text that encodes to them
        values = pa.array([None if v is None else v.decode("latin-1") for v in r["values"]])
        r["values"] = [None if v is None else v.decode("latin-1").encode() for v in r["values"]]
    headers = None
    if r["headers"] is not None:
        headers = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in r["headers"]],
            pa.list_(HEADER),
        )
    return values, keys, headers


def _expected(r: dict) -> list[tuple]:
    n = len(r["values"])
    ts = r["timestamps"] if isinstance(r["timestamps"], list) else [r["timestamps"]] * n
    return [
        (ts[i], r["keys"][i], r["values"][i],
         tuple(r["headers"][i] or ()) if r["headers"] is not None else ())
        for i in range(n)
    ]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(), st.sampled_from([0, 1, 2, 3, 4]))
def test_encoded_batch_is_the_reference_batch_and_decodes_to_the_rows(r: dict, codec: int) -> None:
    values, keys, headers = _arrays(r)
    ts = r["timestamps"]
    region = encode_records(
        values, keys=keys, headers=headers,
        timestamps=np.array(ts, dtype=np.int64) if isinstance(ts, list) else ts,
    )
    want = _expected(r)
    sealed = seal_batch(region, compression=codec, producer_id=42, producer_epoch=3, base_sequence=17)
    if codec == 0:
        assert sealed == build_batch(want, producer_id=42, producer_epoch=3, base_sequence=17)
    header_, records = decode_batch(sealed)
    assert (header_.producer_id, header_.producer_epoch, header_.base_sequence) == (42, 3, 17)
    assert header_.compression == codec
    assert header_.max_timestamp == max(t for t, *_ in want)
    assert [(rec.offset, rec.timestamp, rec.key, rec.value, tuple(rec.headers)) for rec in records] == [
        (i, *w) for i, w in enumerate(want)
    ]
    # The Spark read path sees the same rows.
    with_headers = r["headers"] is not None
    got, _next = decode_arrow(sealed, 0, len(want), "t", 0, _arrow_schema(with_headers))
    assert got.column("key").to_pylist() == [w[1] for w in want]
    assert got.column("value").to_pylist() == [w[2] for w in want]
    if with_headers:
        assert [[(h["key"], h["value"]) for h in hs] for hs in got.column("headers").to_pylist()] == [
            list(w[3]) for w in want
        ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(), st.data())
def test_chunks_encoded_in_one_pass_equal_each_chunk_encoded_alone(r: dict, data: st.DataObject) -> None:
    values, keys, headers = _arrays(r)
    n = len(values)
    cuts = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=5)) if n > 1 else set())
    edges = [0, *cuts, n]
    bounds = list(zip(edges, edges[1:], strict=False))
    ts = np.array(r["timestamps"], dtype=np.int64) if isinstance(r["timestamps"], list) else r["timestamps"]
    regions = encode_chunks(values, keys=keys, headers=headers, timestamps=ts, bounds=bounds)
    assert len(regions) == len(bounds)
    for (s, e), region in zip(bounds, regions, strict=True):
        alone = encode_records(
            values.slice(s, e - s),
            keys=None if keys is None else keys.slice(s, e - s),
            headers=None if headers is None else headers.slice(s, e - s),
            timestamps=ts[s:e] if isinstance(ts, np.ndarray) else ts,
        )
        assert (bytes(region.data), region.count, region.base_timestamp, region.max_timestamp) == (
            bytes(alone.data), alone.count, alone.base_timestamp, alone.max_timestamp
        )


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=200), st.integers(1, 8000))
def test_chunk_bounds_cover_every_row_within_the_limit(sizes: list[int], limit: int) -> None:
    bounds = chunk_bounds(np.array(sizes, dtype=np.int64), limit)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(sizes)
    for (_s, e), (s2, _) in zip(bounds, bounds[1:], strict=False):
        assert e == s2
    for s, e in bounds:
        assert e > s
        assert e - s == 1 or sum(sizes[s:e]) <= limit


def test_record_sizes_count_keys_values_and_headers() -> None:
    headers = pa.array([[{"key": "ab", "value": b"xyz"}], None], pa.list_(HEADER))
    sizes = record_sizes(pa.array([b"v" * 10, None]), pa.array([b"k", None]), headers)
    assert sizes.tolist() == [10 + 1 + 16 + (2 + 3 + 4), 16]


def test_encoder_refuses_a_header_without_a_key() -> None:
    headers = pa.array([[{"key": None, "value": b"x"}]], pa.list_(HEADER))
    with pytest.raises(ValueError, match="headers: a header has a null key"):
        encode_records(pa.array([b"v"]), headers=headers, timestamps=0)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_broker_accepts_pipelined_encoded_batches(broker, topic_name, codec) -> None:
    """Several rounds per partition through the sender thread; read back with librdkafka."""
    create_topic(broker.bootstrap, topic_name, 2)
    want: dict[int, list[tuple]] = {0: [], 1: []}
    now = int(time.time() * 1000)  # recent: older records would fall to retention.ms at once
    with Producer(broker.bootstrap, ProducerConfig(compression=codec)) as p:
        assert p.idempotent
        for round_ in range(4):
            items = []
            for part in (0, 1):
                n = 50 + round_
                keys = [None if i % 9 == 0 else b"k%d-%d" % (part, i) for i in range(n)]
                vals = [b"" if i % 7 == 0 else b"v%d" % i * (i % 5 + 1) for i in range(n)]
                hdrs = [[{"key": "i", "value": b"%d" % i}] if i % 3 == 0 else [] for i in range(n)]
                region = encode_records(
                    pa.array(vals), keys=pa.array(keys, pa.binary()),
                    headers=pa.array(hdrs, pa.list_(HEADER)), timestamps=now + round_,
                )
                items.append((topic_name, part, region))
                want[part] += [
                    (k, v, (("i", b"%d" % i),) if i % 3 == 0 else (), now + round_)
                    for i, (k, v) in enumerate(zip(keys, vals, strict=True))
                ]
            p.send_regions(items)
        p.flush()
        assert p.records_sent == sum(len(w) for w in want.values())
    got = ck_read_to_end(broker.bootstrap, topic_name, partitions=[0, 1])
    for part in (0, 1):
        mine = sorted((r for r in got if r.partition == part), key=lambda r: r.offset)
        assert [r.offset for r in mine] == list(range(len(want[part])))
        assert [(r.key, r.value, r.headers, r.timestamp) for r in mine] == want[part]


def test_a_refused_batch_fails_flush_with_kafkas_error(broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    with Producer(broker.bootstrap) as p:
        big = encode_records(pa.array([b"x" * (2 * 1024 * 1024)]), timestamps=0)  # > max.message.bytes
        with pytest.raises(KafkaError, match="partition 5 does not exist"):
            p.send_regions([(topic_name, 5, big)])
        p.send_regions([(topic_name, 0, big)])
        with pytest.raises(KafkaError) as err:
            p.flush()
        assert err.value.code == 10  # MESSAGE_TOO_LARGE
        with pytest.raises(KafkaError):  # the producer stays failed: nothing more is sent
            p.send_regions([(topic_name, 0, encode_records(pa.array([b"v"]), timestamps=0))])
