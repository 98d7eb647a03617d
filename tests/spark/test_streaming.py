"""Structured Streaming from format kavka into Parquet with a checkpoint: exactly once across restarts.

Every test compares the Parquet output (what the file sink committed) with
the records produced, as (topic, partition, offset, value) -- duplicates and
gaps both fail.
"""

from __future__ import annotations

import json

import pytest
from pyspark.errors import StreamingQueryException

from kavka.client.admin import AdminClient
from tests.spark.util import create_topic, produce_per_partition
from tests.wait import wait_until


def _start(spark, bootstrap, base, *, trigger, **options):
    r = spark.readStream.format("kavka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    w = (
        r.load()
        .writeStream.format("parquet")
        .option("path", str(base / "out"))
        .option("checkpointLocation", str(base / "checkpoint"))
    )
    w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)
    return w.start()


def _output(spark, base) -> list[tuple[str, int, int, bytes | None]]:
    if not (base / "out" / "_spark_metadata").exists():
        return []
    rows = spark.read.parquet(str(base / "out")).select("topic", "partition", "offset", "value").collect()
    return sorted((r[0], r[1], r[2], None if r[3] is None else bytes(r[3])) for r in rows)


def _expected(topic, samples_by_partition, start=None):
    out = []
    for p, samples in samples_by_partition.items():
        first = (start or {}).get(p, 0)
        out += [(topic, p, first + i, s.value) for i, s in enumerate(samples)]
    return sorted(out)


def _run_available_now(query, timeout=120):
    assert query.awaitTermination(timeout), "availableNow query did not finish in time"
    assert query.exception() is None, query.exception()


def test_available_now_with_admission_control_resumes_exactly_once(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 2)
    first = produce_per_partition(broker.bootstrap, topic_name, 2, 30)
    q = _start(spark, broker.bootstrap, tmp_path, trigger="availableNow",
               subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="16")
    _run_available_now(q)
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 4 and all(p["numInputRows"] <= 16 + 2 for p in batches), [
        p["numInputRows"] for p in batches
    ]
    assert _output(spark, tmp_path) == _expected(topic_name, first)

    second = produce_per_partition(broker.bootstrap, topic_name, 2, 20)
    q = _start(spark, broker.bootstrap, tmp_path, trigger="availableNow",
               subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="16")
    _run_available_now(q)
    want = sorted(_expected(topic_name, first) + _expected(topic_name, second, {0: 30, 1: 30}))
    assert _output(spark, tmp_path) == want


def test_processing_time_stopped_mid_stream_and_restarted(spark, broker, tmp_path):
    import uuid

    prefix = f"pt-{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap, a, 1)
    a0 = produce_per_partition(broker.bootstrap, a, 1, 100)
    options = dict(subscribePattern=f"{prefix}-.*", startingOffsets="earliest", maxOffsetsPerTrigger="10")
    q = _start(spark, broker.bootstrap, tmp_path, trigger="500 milliseconds", **options)
    try:
        wait_until(lambda: len(_output(spark, tmp_path)) >= 10, timeout=90, message="first micro-batches")
    finally:
        q.stop()
    assert q.exception() is None
    partial = _output(spark, tmp_path)
    # At 10 records per 500 ms trigger, 100 records take 10 micro-batches: stopped mid-stream.
    assert 10 <= len(partial) < 100, len(partial)
    assert partial == _expected(a, a0)[: len(partial)]  # a prefix of a-0, no duplicates

    # While stopped: a new partition of a, more records in a-0.
    with AdminClient(broker.bootstrap) as admin:
        admin.create_partitions({a: 2})
    wait_until(lambda: _partitions(broker.bootstrap, a) == 2, timeout=20, message="a has 2 partitions")
    a0_more = produce_per_partition(broker.bootstrap, a, 1, 10)
    a1 = produce_per_partition(broker.bootstrap, a, [1], 15)

    q = _start(spark, broker.bootstrap, tmp_path, trigger="500 milliseconds", **options)
    try:
        # While running: a new topic matching the pattern.
        create_topic(broker.bootstrap, b, 1)
        b0 = produce_per_partition(broker.bootstrap, b, 1, 12)
        want = sorted(
            _expected(a, a0) + _expected(a, a0_more, {0: 100})
            + _expected(a, a1)
            + _expected(b, b0)
        )
        want_count = len(want)
        wait_until(lambda: len(_output(spark, tmp_path)) >= want_count, timeout=120,
                   message=f"{want_count} records in the output")
    finally:
        q.stop()
    assert q.exception() is None
    assert _output(spark, tmp_path) == want


def _partitions(bootstrap, topic):
    with AdminClient(bootstrap) as admin:
        return len(admin.describe_topics([topic])[0].partitions)


def _delete_before(bootstrap, topic, partition, offset):
    with AdminClient(bootstrap) as admin:
        low = admin.delete_records({(topic, partition): offset})
    assert low[(topic, partition)] == offset


def test_batch_read_of_deleted_records_fails_or_skips(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    samples = produce_per_partition(broker.bootstrap, topic_name, 1, 100)
    _delete_before(broker.bootstrap, topic_name, 0, 50)
    starting = json.dumps({topic_name: {"0": 0}})

    def read(**extra):
        r = (spark.read.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic_name).option("startingOffsets", starting))
        for k, v in extra.items():
            r = r.option(k, v)
        return r.load()

    with pytest.raises(Exception) as err:
        read().collect()
    msg = str(err.value)
    assert f"offsets 0 to 49 of {topic_name}-0 were deleted" in msg, msg
    assert "failOnDataLoss" in msg
    rows = read(failOnDataLoss="false").select("offset", "value").collect()
    assert sorted((r[0], bytes(r[1]) if r[1] is not None else None) for r in rows) == [
        (o, samples[0][o].value) for o in range(50, 100)
    ]


def test_stream_restart_after_delete_records_removed_its_next_records(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 1)
    first = produce_per_partition(broker.bootstrap, topic_name, 1, 40)
    opts = dict(subscribe=topic_name, startingOffsets="earliest")
    _run_available_now(_start(spark, broker.bootstrap, tmp_path, trigger="availableNow", **opts))
    assert _output(spark, tmp_path) == _expected(topic_name, first)

    second = produce_per_partition(broker.bootstrap, topic_name, 1, 40)
    _delete_before(broker.bootstrap, topic_name, 0, 60)  # offsets 40..59 were never read
    q = _start(spark, broker.bootstrap, tmp_path, trigger="availableNow", **opts)
    with pytest.raises(StreamingQueryException) as err:
        q.awaitTermination(120)
    msg = str(err.value)
    assert f"offsets 40 to 59 of {topic_name}-0 were deleted" in msg, msg

    q = _start(spark, broker.bootstrap, tmp_path, trigger="availableNow", failOnDataLoss="false", **opts)
    _run_available_now(q)
    want = sorted(_expected(topic_name, first) + [(topic_name, 0, 40 + i, s.value) for i, s in enumerate(second[0]) if 40 + i >= 60])
    assert _output(spark, tmp_path) == want


def test_records_removed_by_time_retention_fail_a_batch_read(spark, broker, topic_name):
    """Retention (not DeleteRecords): old records go, and a read that wanted them says so."""
    from tests.integration.helpers import ck_producer
    from tests.spark.util import create_topic as create

    create(broker.bootstrap, topic_name, 1, {"retention.ms": "60000", "segment.bytes": "1024"})
    producer = ck_producer(broker.bootstrap)
    old = int(__import__("time").time() * 1000) - 3_600_000  # an hour old: past retention.ms
    for i in range(20):
        producer.produce(topic_name, value=b"old-%d" % i, timestamp=old + i, partition=0)
    assert producer.flush(30) == 0

    def log_start() -> int:
        with AdminClient(broker.bootstrap) as admin:
            return admin.list_offsets({(topic_name, 0): "earliest"})[(topic_name, 0)].offset

    start = wait_until(lambda: log_start() >= 20 and log_start(), timeout=30, message="retention to run")
    now = int(__import__("time").time() * 1000)
    new = produce_per_partition(broker.bootstrap, topic_name, 1, 5, base_ts=now)
    with pytest.raises(Exception) as err:
        (spark.read.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic_name).option("startingOffsets", json.dumps({topic_name: {"0": 0}}))
         .load().collect())
    assert f"offsets 0 to {start - 1} of {topic_name}-0 were deleted" in str(err.value)
    rows = (spark.read.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name).load().select("offset", "value").collect())
    assert sorted((r[0], None if r[1] is None else bytes(r[1])) for r in rows) == [
        (20 + i, s.value) for i, s in enumerate(new[0])
    ]
