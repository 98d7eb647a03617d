"""Batch and streaming writes of format kavka, read back with confluent-kafka record by record."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from kavka.client.admin import AdminClient
from kavka.client.producer import default_partition
from tests.integration.helpers import ck_read_to_end
from tests.spark.util import create_topic, produce_per_partition

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(HEADER)),
    ]
)


def _read_back(bootstrap, topic, partitions):
    recs = ck_read_to_end(bootstrap, topic, partitions=list(range(partitions)))
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def test_batch_write_columns_topic_key_value_partition_headers(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    rows = [
        Row(
            topic=topic_name,
            key=None if i % 5 == 0 else f"k{i}".encode(),
            value=None if i % 7 == 0 and i % 5 else f"v{i}".encode() * (i % 4 + 1),
            partition=i % 3 if i % 2 else None,
            headers=[Row(key="n", value=str(i).encode()), Row(key="nul", value=None)] if i % 3 == 0 else [],
        )
        for i in range(120)
    ]
    df = spark.createDataFrame(rows, SCHEMA).repartition(2)
    df.write.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    got = _read_back(broker.bootstrap, topic_name, 3)
    assert len(got) == 120
    by_value = {}
    for r in got:
        by_value.setdefault((r.key, r.value), []).append(r)
    for row in rows:
        (rec,) = by_value.pop((row.key, row.value))  # exactly once
        assert rec.headers == tuple((h.key, h.value) for h in row.headers)
        if row.partition is not None:
            assert rec.partition == row.partition
        elif row.key is not None:
            assert rec.partition == default_partition(row.key, 3)  # Kafka's murmur2 partitioner
    assert not by_value


def test_topic_option_wins_over_column_and_strings_are_utf8(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    df = spark.createDataFrame(
        [("elsewhere", f"ключ-{i}", f"значение-{i}") for i in range(30)], "topic string, key string, value string"
    )
    (df.write.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic_name).option("kafka.compression.type", "lz4").mode("append").save())
    got = _read_back(broker.bootstrap, topic_name, 1)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (f"ключ-{i}".encode(), f"значение-{i}".encode()) for i in range(30)
    )


def test_streaming_write_topic_to_topic_with_checkpoint(spark, broker, tmp_path):
    import uuid

    src, dst = f"src-{uuid.uuid4().hex[:8]}", f"dst-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    samples = produce_per_partition(broker.bootstrap, src, 2, 25)

    def run():
        q = (
            spark.readStream.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", src).option("startingOffsets", "earliest").option("includeHeaders", "true")
            .load()
            .selectExpr("key", "value", "headers", "partition")
            .writeStream.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", dst).option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True).start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None

    run()
    more = produce_per_partition(broker.bootstrap, src, 2, 5)
    run()  # resumes from the checkpoint: only the new records are written
    got = _read_back(broker.bootstrap, dst, 2)
    want = sorted(
        ((p, s.key, s.value, s.headers) for p in (0, 1) for s in samples[p] + more[p]), key=repr
    )
    assert sorted(((r.partition, r.key, r.value, r.headers) for r in got), key=repr) == want


def test_idempotent_producer_retry_is_not_duplicated(broker, topic_name):
    """A Produce retried with the same producer id and sequence (what a task does after a
    lost response) is appended once."""
    from kavka.client.producer import Producer
    from kavka.protocol.records import build_batch

    create_topic(broker.bootstrap, topic_name, 1)
    with Producer(broker.bootstrap) as p:
        assert p.idempotent
        batch = build_batch(
            [(int(time.time() * 1000), b"k", b"v%d" % i, ()) for i in range(10)],
            producer_id=p.producer_id, producer_epoch=p.producer_epoch, base_sequence=0,
        )
        p.partitions_for(topic_name)
        conn = p.admin.node_connection(p._leaders[(topic_name, 0)])
        assert p._produce(conn, {(topic_name, 0): batch}) == set()
        assert p._produce(conn, {(topic_name, 0): batch}) == set()  # the retry
    with AdminClient(broker.bootstrap) as admin:
        assert admin.list_offsets({(topic_name, 0): "latest"})[(topic_name, 0)].offset == 10
    assert [r.value for r in _read_back(broker.bootstrap, topic_name, 1)] == [b"v%d" % i for i in range(10)]


@pytest.mark.parametrize(
    ("ddl", "options", "needle"),
    [
        ("key string", {"topic": "x"}, "value: the DataFrame needs a value column"),
        ("value int", {"topic": "x"}, "value: the value column must be binary or string"),
        ("value string", {}, "topic: set the topic option or give the DataFrame a topic column"),
        ("value string, partition string", {"topic": "x"}, "partition: the partition column must be an int"),
        ("value string", {"topic": "x", "kafka.acks": "0"}, "kafka.acks"),
        ("value string", {"topic": "x", "kafka.compression.type": "brotli"}, "kafka.compression.type"),
    ],
)
def test_sink_refuses_bad_input_naming_the_column_or_option(spark, broker, ddl, options, needle):
    df = spark.createDataFrame([], ddl)
    w = df.write.format("kavka").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=needle):
        w.save()
