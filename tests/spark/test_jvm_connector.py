"""Spark's own JVM Kafka connector, format "kafka" (spark-sql-kafka-0-10_2.13, the jars of
tests/java/spark-kafka, version in tests/java/versions.env), on a real kavka broker: the
connector users' existing Spark jobs run, unmodified, with Apache Kafka's Java client
(kafka-clients 3.9.2) underneath.

Records are produced and read back with confluent-kafka, a client independent of the
connector, and compared record by record: keys, values, headers, timestamps, partitions and
offsets, each record exactly once. The session is the Spark tests' shared one (tests/spark/
conftest.py puts the connector's jars on its `spark.jars`).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.integration.helpers import CODEC_IDS, Rec, batch_codecs, ck_admin, ck_read_to_end
from tests.spark.test_read_committed import _write_transactions
from tests.spark.util import create_topic, expected_recs, produce_per_partition
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3
PER_PARTITION = 40
# Spark's source schema with includeHeaders, the same as format "kavka"'s.
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def _read(spark, bootstrap, **options):  # noqa: ANN001, ANN202
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _bytes(v) -> bytes | None:  # noqa: ANN001
    return None if v is None else bytes(v)


def _recs(rows) -> list[Rec]:  # noqa: ANN001
    """Rows of the connector as Recs. Spark's connector gives a record without headers a null
    `headers` (format "kavka" gives an empty array): both are read as no headers here, and
    test_batch_read_every_record_once checks which records had null."""
    out = [
        Rec(r["partition"], r["offset"], _bytes(r["key"]), _bytes(r["value"]),
            tuple((h["key"], _bytes(h["value"])) for h in r["headers"] or ()),
            round(r["timestamp"].timestamp() * 1000))
        for r in rows
    ]
    return sorted(out, key=lambda x: (x.partition, x.offset))


@pytest.fixture(scope="module")
def loaded(broker):  # noqa: ANN001, ANN201
    """A 3-partition topic with 40 known records per partition (timestamps base + 17 * offset)."""
    topic = "jvmconn-read"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    samples = produce_per_partition(broker.bootstrap, topic, PARTITIONS, PER_PARTITION)
    return broker.bootstrap, topic, samples


def test_batch_read_every_record_once(spark, loaded):
    bootstrap, topic, samples = loaded
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == COLUMNS
    rows = df.collect()
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    assert _recs(rows) == expected_recs(samples)
    by_offset = {(r["partition"], r["offset"]): r["headers"] for r in rows}
    assert [p_o for p_o, h in sorted(by_offset.items()) if h is None] == [
        (p, o) for p in range(PARTITIONS) for o, s in enumerate(samples[p]) if not s.headers
    ]
    # The ranges split over more tasks than partitions (each task fetches from its own offset).
    split = _read(spark, bootstrap, subscribe=topic, includeHeaders="true", minPartitions="7")
    assert split.rdd.getNumPartitions() > PARTITIONS  # Spark rounds the split: 6 here
    assert _recs(split.collect()) == expected_recs(samples)


def test_batch_read_starting_and_ending_offsets(spark, loaded):
    bootstrap, topic, samples = loaded
    # Per partition: a given offset, earliest (-2) or latest (-1), as Spark's JSON says.
    df = _read(spark, bootstrap, assign=json.dumps({topic: [0, 1, 2]}), includeHeaders="true",
               startingOffsets=json.dumps({topic: {"0": 5, "1": -2, "2": 30}}),
               endingOffsets=json.dumps({topic: {"0": 20, "1": 10, "2": -1}}))
    assert _recs(df.collect()) == expected_recs(samples, {0: (5, 20), 1: (0, 10), 2: (30, 40)})
    # By timestamp (ListOffsets with a timestamp): the first offset at or after it, the end
    # exclusive. Record i of each partition was stamped base + 17 * i.
    ts = {p: [s.timestamp for s in samples[p]] for p in range(PARTITIONS)}
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true",
               startingOffsetsByTimestamp=json.dumps({topic: {"0": ts[0][11] - 5, "1": ts[1][0],
                                                              "2": ts[2][33]}}),
               endingOffsetsByTimestamp=json.dumps({topic: {"0": ts[0][25], "1": ts[1][3] + 1,
                                                            "2": ts[2][39] + 1000}}))
    assert _recs(df.collect()) == expected_recs(samples, {0: (11, 25), 1: (0, 4), 2: (33, 40)})
    df = _read(spark, bootstrap, subscribe=topic, startingTimestamp=str(ts[0][30]))
    assert sorted((r["partition"], r["offset"]) for r in df.collect()) == [
        (p, o) for p in range(PARTITIONS) for o in range(30, PER_PARTITION)
    ]


def test_batch_write_read_back_with_confluent(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    n = 90
    rows = []
    for i in range(n):
        key = None if i % 7 == 3 else f"k-{i}".encode()
        value = None if i % 11 == 5 else (f"v-{i}-" * (1 + i % 5)).encode()
        headers = ([("h", str(i).encode()), ("dup", b"a"), ("dup", None)] if i % 3 == 0
                   else None if i % 3 == 1 else [])
        rows.append((key, value, i % PARTITIONS, headers))
    df = spark.createDataFrame(
        rows, "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>"
    ).repartition(3)  # three writer tasks, each writing to every partition
    before = int(time.time() * 1000)
    df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic_name).save()
    after = int(time.time() * 1000)
    got = ck_read_to_end(broker.bootstrap, topic_name, range(PARTITIONS))
    # Three tasks write each partition concurrently: the order within a partition is theirs, so
    # compare the records as a multiset and the offsets as 0..n-1 per partition.
    want = sorted(((p, k, v, tuple(h or ())) for k, v, p, h in rows), key=repr)
    assert sorted(((r.partition, r.key, r.value, r.headers) for r in got), key=repr) == want
    offsets = defaultdict(list)
    for r in got:
        offsets[r.partition].append(r.offset)
        assert before <= r.timestamp <= after  # the producer's CreateTime
    assert {p: sorted(o) for p, o in offsets.items()} == {p: list(range(n // PARTITIONS)) for p in range(PARTITIONS)}


def test_batch_write_topic_column_and_string_keys(spark, broker, topic_name):
    # No topic option: each row's `topic` column names its topic; string keys and values; the
    # partition is the Java client's (murmur2 of the key), so one key lands in one partition.
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(broker.bootstrap, a, PARTITIONS)
    create_topic(broker.bootstrap, b, 1)
    rows = [(a if i % 4 else b, f"key-{i % 6}", f"value-{i}") for i in range(40)]
    spark.createDataFrame(rows, "topic string, key string, value string").write.format("kafka").option(
        "kafka.bootstrap.servers", broker.bootstrap).save()
    got_a = ck_read_to_end(broker.bootstrap, a, range(PARTITIONS))
    got_b = ck_read_to_end(broker.bootstrap, b)
    assert sorted((r.key.decode(), r.value.decode()) for r in got_a) == sorted(
        (k, v) for t, k, v in rows if t == a)
    assert sorted((r.key.decode(), r.value.decode()) for r in got_b) == sorted(
        (k, v) for t, k, v in rows if t == b)
    partitions_of_key = defaultdict(set)
    for r in got_a:
        partitions_of_key[r.key].add(r.partition)
    assert all(len(ps) == 1 for ps in partitions_of_key.values())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_write_and_read_every_codec(spark, broker, topic_name, codec):
    # The Java client compresses with the codec libraries pyspark ships (snappy, lz4, zstd: the
    # connector's own copies are left out of tests/java/spark-kafka/pom.xml).
    create_topic(broker.bootstrap, topic_name, 1)
    rows = [(f"k{i}".encode(), (f"value {i} " * 20).encode()) for i in range(200)]
    spark.createDataFrame(rows, "key binary, value binary").coalesce(1).write.format("kafka").option(
        "kafka.bootstrap.servers", broker.bootstrap).option("topic", topic_name).option(
        "kafka.compression.type", codec).save()
    got = ck_read_to_end(broker.bootstrap, topic_name)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, k, v) for i, (k, v) in enumerate(rows)]
    df = _read(spark, broker.bootstrap, subscribe=topic_name)
    assert sorted((r["offset"], bytes(r["key"]), bytes(r["value"])) for r in df.collect()) == [
        (i, k, v) for i, (k, v) in enumerate(rows)
    ]
    # Stored as the Java client compressed them.
    codecs = {c for d in broker.log_dirs for f in sorted((d / f"{topic_name}-0").glob("*.log"))
              for c in batch_codecs(f)}
    assert codecs == {CODEC_IDS[codec]}


def _high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = ck_admin(bootstrap)  # held until the futures are done: they die with their client
    tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    res = admin.list_offsets(tps, request_timeout=15)
    return {tp.partition: f.result(timeout=20).offset for tp, f in res.items()}


def test_stream_topic_to_topic_with_checkpoint(spark, broker, topic_name, tmp_path):
    """readStream.format("kafka") -> writeStream.format("kafka") with a checkpoint: records
    produced while the query runs arrive once each, in their partition's order; startingOffsets
    applies to the first run only, and a restart resumes from the checkpoint."""
    bootstrap = broker.bootstrap
    src, out = f"{topic_name}-src", f"{topic_name}-out"
    create_topic(bootstrap, src, PARTITIONS)
    create_topic(bootstrap, out, PARTITIONS)
    before = produce_per_partition(bootstrap, src, PARTITIONS, 10)

    def start():  # noqa: ANN202
        return (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", src).option("includeHeaders", "true")
            # partition 0 from offset 4, partition 1 from the beginning, partition 2 from its end
            .option("startingOffsets", json.dumps({src: {"0": 4, "1": -2, "2": -1}}))
            .option("maxOffsetsPerTrigger", "25")  # several micro-batches
            .load()
            .selectExpr("key", "value", "headers", "partition")
            .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out).option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    def arrived(want: int) -> bool:
        return sum(_high_watermarks(bootstrap, out, PARTITIONS).values()) >= want

    q = start()
    try:
        # The first micro-batch fixes the starting offsets ("latest" of partition 2).
        wait_until(lambda: q.recentProgress, timeout=120, message="the query's first micro-batch")
        assert q.exception() is None, q.exception()
        during = produce_per_partition(bootstrap, src, PARTITIONS, 15)
        wait_until(lambda: arrived(6 + 10 + 3 * 15), timeout=120, message="the stream's output")
        # Spark's Kafka sink is at-least-once: a batch written but not yet in the checkpoint's
        # commit log when the query stops runs again on restart (CI saw its 2 records twice).
        # Stop only once everything is processed and committed.
        q.processAllAvailable()
    finally:
        q.stop()
    after = produce_per_partition(bootstrap, src, PARTITIONS, 5)  # while the query is stopped
    q = start()
    try:
        wait_until(lambda: arrived(6 + 10 + 3 * 15 + 3 * 5), timeout=120, message="the restarted stream")
        assert q.exception() is None, q.exception()
        q.processAllAvailable()
    finally:
        q.stop()
    got = ck_read_to_end(bootstrap, out, range(PARTITIONS))
    want = {
        0: before[0][4:] + during[0] + after[0],
        1: before[1] + during[1] + after[1],
        2: during[2] + after[2],
    }
    for p in range(PARTITIONS):
        assert [(r.key, r.value, r.headers) for r in got if r.partition == p] == [
            (s.key, s.value, s.headers) for s in want[p]
        ], f"partition {p}"


def test_read_committed_batch_and_stream(spark, broker, topic_name, tmp_path):
    """kafka.isolation.level=read_committed: only committed and plain records, below the last
    stable offset; read_uncommitted every data record; no transaction marker is a row."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    p, visible, aborted, open_values = _write_transactions(bootstrap, topic_name)

    def batch(isolation: str) -> list[bytes]:
        df = _read(spark, bootstrap, subscribe=topic_name, startingOffsets="earliest",
                   minPartitions="5", **{"kafka.isolation.level": isolation})
        return sorted(bytes(r.value) for r in df.select("value").collect())

    def stream() -> list[bytes]:
        q = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic_name).option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "7")
            .load().writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True).start()
        )
        assert q.awaitTermination(180), "availableNow query did not finish in time"
        assert q.exception() is None, q.exception()
        return sorted(bytes(r.value) for r in spark.read.parquet(str(tmp_path / "out")).collect())

    try:
        assert batch("read_committed") == sorted(visible)
        assert batch("read_uncommitted") == sorted(visible | aborted | open_values)
        assert stream() == sorted(visible)  # stops at the open transaction, does not wait on it
        p.commit_transaction(30)
        assert batch("read_committed") == sorted(visible | open_values)
        assert stream() == sorted(visible | open_values)  # resumed from its checkpoint
    finally:
        p.flush(10)
