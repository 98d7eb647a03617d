"""`minPartitions` splits a hot partition so that several executors share it.

Planning (`kavka.spark.offsets.plan_ranges`) gives each topic-partition a
share of `minPartitions` by its size, so one partition holding nearly every
record is cut into contiguous ranges that cover it exactly; against a real
broker the batch reader's tasks read the hot partition in several pieces and
the union of their rows is the partition, once each. As in Spark's Kafka
source (KafkaOffsetRangeCalculator), ranges are split only when there are
fewer of them than `minPartitions`.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kavka.spark.offsets import plan_ranges


def _covers(ranges, start, end) -> None:  # noqa: ANN001
    for tp in end:
        if end[tp] <= start[tp]:
            assert not [r for r in ranges if (r.topic, r.partition) == tp]
            continue
        parts = sorted((r.start, r.end) for r in ranges if (r.topic, r.partition) == tp)
        assert parts[0][0] == start[tp] and parts[-1][1] == end[tp]
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(parts, parts[1:], strict=False))


def test_hot_partition_is_shared_by_two_tasks():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    end = {("t", 0): 100_000, ("t", 1): 3, ("t", 2): 0}
    ranges = plan_ranges(start, end, min_partitions=3)
    hot = sorted((r.start, r.end) for r in ranges if r.partition == 0)
    assert len(hot) >= 2
    assert max(b - a for a, b in hot) <= 50_000  # halves, not one task with almost everything
    _covers(ranges, start, end)


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6), st.integers(1, 40))
def test_min_partitions_covers_every_offset_once(sizes: list[int], wanted: int) -> None:
    start = {("t", p): 7 * p for p in range(len(sizes))}
    end = {("t", p): 7 * p + s for p, s in enumerate(sizes)}
    ranges = plan_ranges(start, end, min_partitions=wanted)
    _covers(ranges, start, end)
    records = sum(sizes)
    assert len(ranges) >= min(wanted, records)


def test_spark_tasks_share_the_hot_partition(spark, broker, topic_name):  # noqa: ANN001
    pytest.importorskip("pyspark")
    from kavka.spark.options import parse_source_options
    from kavka.spark.source import KavkaBatchReader
    from tests.integration.helpers import ck_producer
    from tests.spark.util import create_topic

    create_topic(broker.bootstrap, topic_name, 2)
    p = ck_producer(broker.bootstrap, {"linger.ms": 5})
    for i in range(2000):
        p.produce(topic_name, value=b"%d" % i, partition=0)
    p.produce(topic_name, value=b"cold", partition=1)
    assert p.flush(30) == 0

    opts = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name, "minPartitions": "3"}
    plan = KavkaBatchReader(parse_source_options(opts, streaming=False)).partitions()
    hot = sorted((t.start, t.end) for t in plan if t.partition == 0)
    assert len(hot) >= 2 and hot[0][0] == 0 and hot[-1][1] == 2000

    r = spark.read.format("kavka")
    for k, v in opts.items():
        r = r.option(k, v)
    df = r.load()
    assert df.rdd.getNumPartitions() == len(plan)
    rows = df.where("partition = 0").select("offset").collect()
    assert sorted(row.offset for row in rows) == list(range(2000))
