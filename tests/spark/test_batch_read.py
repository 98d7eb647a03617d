"""Batch reads of format kavka against a real kavka broker, one option at a time, record by record."""

from __future__ import annotations

import json

import pytest

from tests.spark.util import create_topic, expected_recs, produce_per_partition, rows_to_recs

PARTITIONS = 3
PER_PARTITION = 40


@pytest.fixture(scope="module")
def loaded(broker):
    """A 3-partition topic with 40 known records per partition, and a second topic."""
    topic = "sparkread-a"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    samples = produce_per_partition(broker.bootstrap, topic, PARTITIONS, PER_PARTITION)
    other = "sparkread-b"
    create_topic(broker.bootstrap, other, 1)
    other_samples = produce_per_partition(broker.bootstrap, other, 1, 5)
    create_topic(broker.bootstrap, "unrelated-c", 1)
    produce_per_partition(broker.bootstrap, "unrelated-c", 1, 3)
    return broker.bootstrap, topic, samples, other, other_samples


def _read(spark, bootstrap, **options):
    r = spark.read.format("kavka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_subscribe_returns_every_record_with_headers(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]
    rows = df.collect()
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    assert rows_to_recs(rows) == expected_recs(samples)


def test_without_include_headers_the_schema_is_sparks(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    df = _read(spark, bootstrap, subscribe=topic)
    assert [f"{f.name}:{f.dataType.simpleString()}" for f in df.schema.fields] == [
        "key:binary", "value:binary", "topic:string", "partition:int", "offset:bigint",
        "timestamp:timestamp", "timestampType:int",
    ]
    got = rows_to_recs(df.collect(), headers=False)
    want = [r.__class__(r.partition, r.offset, r.key, r.value, (), r.timestamp) for r in expected_recs(samples)]
    assert got == want


def test_subscribe_pattern_reads_matching_topics_only(spark, loaded):
    bootstrap, topic, samples, other, other_samples = loaded
    rows = _read(spark, bootstrap, subscribePattern="sparkread-.*").select("topic", "partition", "offset").collect()
    got = sorted((r["topic"], r["partition"], r["offset"]) for r in rows)
    want = sorted(
        [(topic, p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
        + [(other, 0, o) for o in range(len(other_samples[0]))]
    )
    assert got == want


def test_subscribe_list_of_topics(spark, loaded):
    bootstrap, topic, _, other, _ = loaded
    rows = _read(spark, bootstrap, subscribe=f"{topic}, {other}").groupBy("topic").count().collect()
    assert {r["topic"]: r["count"] for r in rows} == {topic: PARTITIONS * PER_PARTITION, other: 5}


def test_assign_reads_only_the_assigned_partitions(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    rows = _read(spark, bootstrap, assign=json.dumps({topic: [0, 2]}), includeHeaders="true").collect()
    assert rows_to_recs(rows) == expected_recs({p: samples[p] for p in (0, 2)})


def test_starting_and_ending_offsets_json(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    starting = {topic: {"0": 5, "1": -2, "2": 10}}
    ending = {topic: {"0": 20, "1": -1, "2": 11}}
    rows = _read(
        spark, bootstrap, subscribe=topic, includeHeaders="true",
        startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending),
    ).collect()
    assert rows_to_recs(rows) == expected_recs(samples, {0: (5, 20), 1: (0, PER_PARTITION), 2: (10, 11)})


def test_starting_timestamp_applies_to_every_partition(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    ts = samples[0][12].timestamp - 5  # between records 11 and 12 (17 ms apart)
    rows = _read(spark, bootstrap, subscribe=topic, includeHeaders="true", startingTimestamp=str(ts)).collect()
    assert rows_to_recs(rows) == expected_recs(samples, {p: (12, PER_PARTITION) for p in range(PARTITIONS)})


def test_offsets_by_timestamp_start_and_end(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    ts = lambda p, i: samples[p][i].timestamp  # noqa: E731
    starting = {topic: {"0": ts(0, 3), "1": ts(1, 30), "2": ts(2, 0)}}
    ending = {topic: {"0": ts(0, 9), "1": ts(1, 31), "2": ts(2, 39) + 1000}}  # past the end: latest
    rows = _read(
        spark, bootstrap, subscribe=topic, includeHeaders="true",
        startingOffsetsByTimestamp=json.dumps(starting), endingOffsetsByTimestamp=json.dumps(ending),
    ).collect()
    assert rows_to_recs(rows) == expected_recs(samples, {0: (3, 9), 1: (30, 31), 2: (0, PER_PARTITION)})


def test_min_partitions_splits_ranges_without_losing_records(spark, loaded):
    bootstrap, topic, samples, _, _ = loaded
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true", minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    assert rows_to_recs(df.collect()) == expected_recs(samples)


def test_log_append_time_and_compressed_batches(spark, broker, topic_name):
    from tests.integration.helpers import ck_producer, sample_records

    create_topic(broker.bootstrap, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    producer = ck_producer(broker.bootstrap, {"compression.type": "zstd", "linger.ms": 50})
    samples = sample_records(30, base_ts=1_000_000)
    for s in samples:
        producer.produce(topic_name, key=s.key, value=s.value, headers=list(s.headers) or None, partition=0)
    assert producer.flush(30) == 0
    rows = _read(spark, broker.bootstrap, subscribe=topic_name, includeHeaders="true").collect()
    recs = rows_to_recs(rows)
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [
        (i, s.key, s.value, s.headers) for i, s in enumerate(samples)
    ]
    assert {r["timestampType"] for r in rows} == {1}  # LogAppendTime
    assert all(r.timestamp > 1_000_000_000_000 for r in recs)  # the broker's clock, not the client's


def test_empty_range_reads_nothing(spark, loaded):
    bootstrap, topic, _, _, _ = loaded
    ends = json.dumps({topic: {str(p): PER_PARTITION for p in range(PARTITIONS)}})
    df = _read(spark, bootstrap, subscribe=topic, startingOffsets=ends, endingOffsets=ends)
    assert df.count() == 0
