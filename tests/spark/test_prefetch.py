"""Fetch pipelining on the executor read path (`Fetcher.read_range_with(prefetch=True)`).

The offset of the next Fetch is taken from the batch headers before the
response is decoded (`next_position`); hypothesis checks it against both
decoders on randomised responses (every codec, control batches, compacted
gaps, ranges inside batches, a truncated last batch). Against a real broker,
with one batch per Fetch so that every response is read while the next
request is in flight, prefetching returns exactly the serial read's rows for
ranges that start and end inside batches; a read closed early leaves the
connection usable; records deleted under the read raise OffsetOutOfRangeError
as the serial read does.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kavka.client.admin import AdminClient  # noqa: E402
from kavka.client.fetcher import (  # noqa: E402
    Fetcher,
    OffsetOutOfRangeError,
    RecordColumns,
    _decode_into,
    next_position,
)
from kavka.spark.arrow_decode import decode_arrow  # noqa: E402
from kavka.spark.source import _arrow_schema  # noqa: E402
from tests.spark.test_arrow_decode import fetch_response  # noqa: E402
from tests.spark.util import create_topic  # noqa: E402

SCHEMA = _arrow_schema(False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetch_response(), st.integers(0, 1500), st.integers(1, 2000), st.data())
def test_next_position_from_headers_is_the_decoders(resp: tuple[bytes, int], start: int, length: int,
                                                    data: st.DataObject) -> None:
    buf, _ = resp
    buf = buf[: data.draw(st.integers(len(buf) // 2, len(buf)))]  # a fetch may end mid-batch
    end = start + length
    _, arrow_next = decode_arrow(buf, start, end, "t", 0, SCHEMA)
    assert next_position(buf, start, end) == arrow_next
    assert _decode_into(RecordColumns(), buf, start, end) == arrow_next


def _fill(bootstrap: str, topic: str, n: int) -> None:
    from tests.integration.helpers import ck_producer

    create_topic(bootstrap, topic, 1)
    p = ck_producer(bootstrap, {"linger.ms": 5, "batch.size": 2000})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v" * (i % 50), partition=0)
        if i % 100 == 0:
            p.flush(30)
    assert p.flush(30) == 0


def _rows(f: Fetcher, topic: str, start: int, end: int, *, prefetch: bool) -> list[tuple]:
    def decode(buf: bytes, a: int, b: int):  # noqa: ANN202
        return decode_arrow(buf, a, b, topic, 0, SCHEMA)

    out: list[tuple] = []
    for batch in f.read_range_with(topic, 0, start, end, decode, prefetch=prefetch):
        d = batch.to_pydict()
        out += list(zip(d["offset"], d["key"], d["value"], strict=True))
    return out


def test_prefetch_reads_the_serial_reads_rows(broker, topic_name):  # noqa: ANN001
    _fill(broker.bootstrap, topic_name, 1000)
    # One batch per Fetch: many round trips, each response read while the next is in flight.
    with Fetcher(broker.bootstrap, max_partition_fetch_bytes=1, timeout_s=5) as f:
        for start, end in [(0, 1000), (3, 997), (450, 451), (999, 1000)]:
            serial = _rows(f, topic_name, start, end, prefetch=False)
            assert [r[0] for r in serial] == list(range(start, end))
            assert _rows(f, topic_name, start, end, prefetch=True) == serial


def test_prefetch_closed_early_leaves_the_connection_usable(broker, topic_name):  # noqa: ANN001
    _fill(broker.bootstrap, topic_name, 600)

    def decode(buf: bytes, a: int, b: int):  # noqa: ANN202
        return decode_arrow(buf, a, b, topic_name, 0, SCHEMA)

    with Fetcher(broker.bootstrap, max_partition_fetch_bytes=1, timeout_s=5) as f:
        it = f.read_range_with(topic_name, 0, 0, 600, decode, prefetch=True)
        first = next(it)  # the next Fetch is now in flight
        it.close()
        assert first.column(4)[0].as_py() == 0  # offset
        assert [r[0] for r in _rows(f, topic_name, 0, 600, prefetch=False)] == list(range(600))


def test_prefetch_raises_offset_out_of_range_like_the_serial_read(broker, topic_name):  # noqa: ANN001
    _fill(broker.bootstrap, topic_name, 300)
    with AdminClient(broker.bootstrap) as admin:
        admin.delete_records({(topic_name, 0): 200})
    with Fetcher(broker.bootstrap, max_partition_fetch_bytes=1, timeout_s=5) as f:
        for prefetch in (False, True):
            with pytest.raises(OffsetOutOfRangeError) as e:
                _rows(f, topic_name, 0, 300, prefetch=prefetch)
            assert (e.value.offset, e.value.log_start_offset) == (0, 200)
        assert [r[0] for r in _rows(f, topic_name, 200, 300, prefetch=True)] == list(range(200, 300))
