"""Apache Kafka as the oracle (issue 30 item 4): every scenario sends the same requests to kavka
and to a real Apache Kafka 4.4.0 (tests/kafka_reference.py, one KRaft node) and requires the same
answer, after tests/oracle/oracle.py's normalisation (throttle times, cluster ids, hosts, ports,
UUIDs; member ids and times of now inside the scenarios). Raw requests are built from kio's
schemas at pinned versions both brokers serve; the client-level scenarios drive confluent-kafka
and kafka-python. A deliberate difference is registered as a `Divergence` holding both exact
answers and the reason (README.md, "Differences from Apache Kafka").

Both brokers are single combined nodes with the same settings (`COMMON`): one partition per
topic, topics created by Metadata (Kafka's default), no initial rebalance delay, retention
checked every 500 ms.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, OffsetSpec

from kavka.protocol.api import ApiKey
from kavka.protocol.records import build_batch
from tests.broker_harness import BrokerProcess
from tests.java_deps import KAFKA_VERSION
from tests.oracle.oracle import SCENARIOS, Divergence, Side, differences, now_ms, scenario
from tests.raw_client import RawClient, request_frame
from tests.wait import wait_until

# What kavka's broker adds to tests/broker_harness.py's settings so that both brokers' files set
# the same keys: tests/kafka_reference.py's Kafka has these (and both have num.partitions=1 and
# log.retention.check.interval.ms=500); the rest are both brokers' defaults.
COMMON = {"group.initial.rebalance.delay.ms": "0"}

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
CONFIG_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                  4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


@pytest.fixture(scope="module")
def kavka(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("oracle-kavka"), overrides=COMMON)
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def sides(kavka: BrokerProcess, kafka_reference: Any) -> tuple[Side, Side]:
    kafka_props = dict(line.split("=", 1) for line in kafka_reference.config_file.read_text().splitlines())
    assert all(kafka_props.get(k) == v for k, v in COMMON.items()), kafka_props
    return Side("kafka", kafka_reference.port), Side("kavka", kavka.port)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scenario_name" in metafunc.fixturenames:  # every scenario of this module, its own test id
        metafunc.parametrize("scenario_name", list(SCENARIOS))


def test_same_answer_as_kafka(scenario_name: str, sides: tuple[Side, Side]) -> None:
    s = SCENARIOS[scenario_name]
    topic = f"o-{scenario_name}-{uuid.uuid4().hex[:6]}"
    kafka, kavka = (s.run(side, topic) for side in sides)
    if s.divergence is None:
        assert kavka == kafka, "kavka's answer differs from Apache Kafka's:\n" + "\n".join(differences(kavka, kafka))
    else:
        assert kafka == s.divergence.kafka, f"Apache Kafka's answer changed: {kafka!r}"
        assert kavka == s.divergence.kavka, f"kavka's answer changed: {kavka!r}"


def test_reference_is_apache_kafka(kafka_reference: Any, sides: tuple[Side, Side]) -> None:
    """The oracle is the Kafka it says it is: its banner names the version, and it keeps records."""
    assert f"Kafka version: {KAFKA_VERSION}" in kafka_reference.output_file.read_text()
    kafka = sides[0]
    topic = f"o-ref-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic)
    assert kafka.produce(topic, build_batch([(now_ms(), b"k", b"v", [("h", b"1")])]))["error_code"] == "none"
    resp = kafka.call(ApiKey.FETCH, 12, max_wait=0, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
                      replica_id=-1, topics=[{"topic": topic, "partitions": [
                          {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}])
    assert resp["responses"][0]["partitions"][0]["high_watermark"] == 1


# -- helpers --------------------------------------------------------------------------------------

def create(side: Side, topics: list[dict[str, Any]], validate_only: bool = False, version: int = 7,
           keys: tuple[str, ...] = ("name", "error_code", "error_message", "num_partitions",
                                    "replication_factor")) -> list[dict[str, Any]]:
    for t in topics:
        t.setdefault("num_partitions", 1)
        t.setdefault("replication_factor", 1)
    resp = side.call(ApiKey.CREATE_TOPICS, version, timeout=30000, validate_only=validate_only, topics=topics)
    return [{k: t[k] for k in keys if k in t} for t in resp["topics"]]


def topic_exists(side: Side, topic: str) -> str:
    md = side.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    return md["topics"][0]["error_code"]


def records(base_ts: int, n: int, first: int = 0) -> bytes:
    return build_batch([(base_ts + 1000 * i, f"k{i}".encode(), f"v{i}".encode()) for i in range(first, first + n)])


def produced(side: Side, topic: str, n: int = 10, *, batches: int = 2, partitions: int = 1,
             configs: dict[str, str] | None = None) -> int:
    """A topic with n records in `batches` batches on partition 0, timestamps base + 1 s * i
    from base = now - 100 s; returns base."""
    side.create_topic(topic, partitions, configs)
    base = now_ms() - 100_000
    per = n // batches
    for b in range(batches):
        r = side.produce(topic, records(base, per, b * per))
        assert r["error_code"] == "none", r
    return base


def list_offsets(side: Side, topic: str, timestamps: list[int], base: int = 0, partition: int = 0,
                 isolation_level: int = 0) -> list[tuple[str, int, int, int]]:
    """One ListOffsets per timestamp (a partition may appear once in a request); each answer as
    (error, offset, timestamp - base for a record's timestamp, leader epoch)."""
    out = []
    for ts in timestamps:
        resp = side.call(ApiKey.LIST_OFFSETS, 9, replica_id=-1, isolation_level=isolation_level, topics=[{
            "name": topic, "partitions": [{"partition_index": partition, "timestamp": ts, "current_leader_epoch": -1}]}])
        for t in resp["topics"]:
            for p in t["partitions"]:
                got = p["timestamp"] - base if p["timestamp"] >= 0 and base else p["timestamp"]
                out.append((p["error_code"], p["offset"], got, p["leader_epoch"]))
    return out


def delete_records(side: Side, topic: str, offset: int, partition: int = 0) -> tuple[str, int]:
    resp = side.call(ApiKey.DELETE_RECORDS, 2, timeout=30000, topics=[{
        "name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}])
    p = resp["topics"][0]["partitions"][0]
    return p["error_code"], p["low_watermark"]


def describe_configs(side: Side, rtype: int, name: str, keys: list[str] | None,
                     synonyms: bool = True) -> Any:
    resp = side.call(ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=synonyms, include_documentation=False,
                     resources=[{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}])
    r = resp["results"][0]
    entries = {c["name"]: {
        "value": c["value"], "source": CONFIG_SOURCES.get(c["config_source"], c["config_source"]),
        "read_only": c["read_only"], "sensitive": c["is_sensitive"], "type": c["config_type"],
        "documentation": c["documentation"],
        "synonyms": [(s["name"], s["value"], CONFIG_SOURCES.get(s["source"], s["source"])) for s in c["synonyms"]],
    } for c in r["configs"]}
    return {"error_code": r["error_code"], "error_message": r["error_message"], "configs": entries}


def alter_configs(side: Side, topic: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False,
                  rtype: int = TOPIC_RESOURCE) -> list[tuple[str, str | None]]:
    resp = side.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only, resources=[{
        "resource_type": rtype, "resource_name": topic,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}])
    return [(r["error_code"], r["error_message"]) for r in resp["responses"]]


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# -- CreateTopics -------------------------------------------------------------------------------

@scenario()
def s_create_topics_illegal_characters(side: Side, topic: str) -> Any:
    return create(side, [{"name": "bad name!"}])


@scenario()
def s_create_topics_name_too_long(side: Side, topic: str) -> Any:
    return create(side, [{"name": "x" * 250}])


@scenario()
def s_create_topics_name_dot_dot(side: Side, topic: str) -> Any:
    return create(side, [{"name": ".."}, {"name": "."}])


@scenario()
def s_create_topics_empty_name(side: Side, topic: str) -> Any:
    return create(side, [{"name": ""}])


@scenario()
def s_create_topics_zero_partitions(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "num_partitions": 0}])


@scenario()
def s_create_topics_negative_replication_factor(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "replication_factor": -2}])


@scenario()
def s_create_topics_replication_factor_above_brokers(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "replication_factor": 3}])


@scenario()
def s_create_topics_broker_defaults(side: Side, topic: str) -> Any:
    out = create(side, [{"name": topic, "num_partitions": -1, "replication_factor": -1}])
    return out, topic_exists(side, topic) if wait_until(lambda: topic_exists(side, topic) == "none") else None


@scenario()
def s_create_topics_validate_only(side: Side, topic: str) -> Any:
    out = create(side, [{"name": topic, "num_partitions": 3, "configs": [{"name": "retention.ms", "value": "1000"}]}],
                 validate_only=True)
    return out, topic_exists(side, topic)


@scenario()
def s_create_topics_validate_only_existing(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return create(side, [{"name": topic}], validate_only=True)


@scenario()
def s_create_topics_duplicate_in_one_request(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic}, {"name": topic}]), topic_exists(side, topic)


@scenario()
def s_create_topics_already_exists(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return create(side, [{"name": topic}])


@scenario()
def s_create_topics_colliding_name(side: Side, topic: str) -> Any:
    side.create_topic(topic + ".a")
    return create(side, [{"name": topic + "_a"}])


@scenario()
def s_create_topics_unknown_config(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "configs": [{"name": "no.such.config", "value": "1"}]}])


@scenario()
def s_create_topics_bad_config_value(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "configs": [{"name": "retention.ms", "value": "soon"}]}])


@scenario()
def s_create_topics_config_out_of_range(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "configs": [{"name": "min.insync.replicas", "value": "0"}]}])


@scenario()
def s_create_topics_zero_replication_factor(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "replication_factor": 0}])


@scenario()
def s_create_topics_bad_cleanup_policy(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "configs": [{"name": "cleanup.policy", "value": "bogus"}]}])


@scenario()
def s_create_topics_assignment_and_count(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "num_partitions": 2,
                          "assignments": [{"partition_index": 0, "broker_ids": [1]}]}])


@scenario()
def s_create_topics_assignment_unknown_broker(side: Side, topic: str) -> Any:
    return create(side, [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                          "assignments": [{"partition_index": 0, "broker_ids": [7]}]}])


@scenario()
def s_create_topics_returned_configs(side: Side, topic: str) -> Any:
    """CreateTopics v5+ answers with the topic's configs: the ones both brokers know, with
    their sources."""
    keys = SHARED_TOPIC_KEYS
    out = side.call(ApiKey.CREATE_TOPICS, 7, timeout=30000, topics=[{
        "name": topic, "num_partitions": 2, "replication_factor": 1,
        "configs": [{"name": "retention.ms", "value": "3600000"}]}])["topics"][0]
    return (out["error_code"], out["topic_config_error_code"], out["num_partitions"], out["replication_factor"],
            {c["name"]: (c["value"], c["read_only"], CONFIG_SOURCES.get(c["config_source"]), c["is_sensitive"])
             for c in out["configs"] if c["name"] in keys})


# -- DeleteTopics, CreatePartitions --------------------------------------------------------------

@scenario()
def s_delete_topics_unknown_name(side: Side, topic: str) -> Any:
    r = side.call(ApiKey.DELETE_TOPICS, 6, timeout=30000, topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}])
    return r["responses"]


@scenario()
def s_delete_topics_unknown_id(side: Side, topic: str) -> Any:
    r = side.call(ApiKey.DELETE_TOPICS, 6, timeout=30000, topics=[{"name": None, "topic_id": uuid.uuid4()}])
    return r["responses"]


def create_partitions(side: Side, topic: str, count: int, validate_only: bool = False,
                      assignments: list[list[int]] | None = None) -> Any:
    r = side.call(ApiKey.CREATE_PARTITIONS, 3, timeout=30000, validate_only=validate_only, topics=[{
        "name": topic, "count": count,
        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}])
    return r["results"]


@scenario()
def s_create_partitions_decrease(side: Side, topic: str) -> Any:
    side.create_topic(topic, 3)
    return create_partitions(side, topic, 2)


@scenario()
def s_create_partitions_same_count(side: Side, topic: str) -> Any:
    side.create_topic(topic, 2)
    return create_partitions(side, topic, 2)


@scenario()
def s_create_partitions_unknown_topic(side: Side, topic: str) -> Any:
    return create_partitions(side, topic, 2)


@scenario()
def s_create_partitions_validate_only(side: Side, topic: str) -> Any:
    side.create_topic(topic, 1)
    out = create_partitions(side, topic, 4, validate_only=True)
    md = side.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
    return out, len(md["topics"][0]["partitions"])


@scenario()
def s_create_partitions_assignment_count_mismatch(side: Side, topic: str) -> Any:
    side.create_topic(topic, 1)
    return create_partitions(side, topic, 3, assignments=[[1]])


# -- Metadata -------------------------------------------------------------------------------------

@scenario()
def s_metadata_unknown_topic_without_auto_create(side: Side, topic: str) -> Any:
    return side.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)["topics"]


@scenario()
def s_metadata_invalid_topic_name(side: Side, topic: str) -> Any:
    return side.call(ApiKey.METADATA, 12, topics=[{"name": "bad name!"}], allow_auto_topic_creation=True)["topics"]


@scenario()
def s_metadata_topic_partitions(side: Side, topic: str) -> Any:
    side.create_topic(topic, 3)
    md = side.call(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    return md["topics"], md["brokers"], md["controller_id"]


# -- Produce --------------------------------------------------------------------------------------

@scenario()
def s_produce_invalid_acks(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return side.produce(topic, records(now_ms(), 1), acks=2)


@scenario()
def s_produce_unknown_topic(side: Side, topic: str) -> Any:
    return side.produce(topic, records(now_ms(), 1)), topic_exists(side, topic)


@scenario()
def s_produce_unknown_partition(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return side.produce(topic, records(now_ms(), 1), partition=5)


@scenario()
def s_produce_record_too_large(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"max.message.bytes": "1000"})
    big = build_batch([(now_ms(), b"k", b"x" * 2000)])
    return side.produce(topic, big), list_offsets(side, topic, [LATEST])


@scenario()
def s_produce_corrupt_crc(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    batch = bytearray(records(now_ms(), 2))
    batch[-3] ^= 0xFF  # a byte of the last record's value; the CRC no longer matches
    return side.produce(topic, bytes(batch)), list_offsets(side, topic, [LATEST])


@scenario()
def s_produce_appends_at_log_end(side: Side, topic: str) -> Any:
    base = produced(side, topic, 4)
    return side.produce(topic, records(base, 3, 4))


# -- ListOffsets ----------------------------------------------------------------------------------

@scenario()
def s_list_offsets_empty_partition(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return list_offsets(side, topic, [EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, now_ms()])


@scenario()
def s_list_offsets_specs(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    return list_offsets(side, topic, [EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED], base)


@scenario()
def s_list_offsets_by_timestamp(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    return list_offsets(side, topic, [base - 50_000, base, base + 4500, base + 5000, base + 9000], base)


@scenario()
def s_list_offsets_timestamp_beyond_end(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    return list_offsets(side, topic, [base + 9001, now_ms() + 3_600_000], base)


@scenario()
def s_list_offsets_after_delete_records(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    assert delete_records(side, topic, 5) == ("none", 5)
    return list_offsets(side, topic, [EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, base + 2000, base + 7000], base)


@scenario()
def s_list_offsets_unknown_partition(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return list_offsets(side, topic, [LATEST], partition=3)


@scenario()
def s_list_offsets_unknown_topic(side: Side, topic: str) -> Any:
    return list_offsets(side, topic, [EARLIEST])


@scenario()
def s_list_offsets_read_committed(side: Side, topic: str) -> Any:
    base = produced(side, topic, 6)
    return list_offsets(side, topic, [EARLIEST, LATEST, MAX_TIMESTAMP], base, isolation_level=1)


# -- Fetch ----------------------------------------------------------------------------------------

def fetch(side: Side, topic: str, offset: int, partition: int = 0) -> Any:
    resp = side.call(ApiKey.FETCH, 12, max_wait=0, min_bytes=1, max_bytes=1 << 20, session_epoch=-1, replica_id=-1,
                     topics=[{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                              "partition_max_bytes": 1 << 20, "log_start_offset": -1,
                                                              "current_leader_epoch": -1, "last_fetched_epoch": -1}]}])
    p = resp["responses"][0]["partitions"][0]
    p["records"] = None if p["records"] is None else len(p["records"]) > 0
    return resp["error_code"], p


FETCH_ERROR = {"partition_index": 0, "error_code": "offset_out_of_range", "diverging_epoch": {"epoch": -1, "end_offset": -1},
               "current_leader": {"leader_id": -1, "leader_epoch": -1}, "snapshot_id": {"end_offset": -1, "epoch": -1},
               "aborted_transactions": None, "preferred_read_replica": -1, "records": False}
FETCH_REASON = ("kavka answers a consumer Fetch that fails (OFFSET_OUT_OF_RANGE) with the partition's real high "
           "watermark, last stable offset and log start offset where Kafka sends -1: kavka's own "
           "remote-log-metadata consumer and client skip to the log start offset from it; clients "
           "ignore these fields on an error")


@scenario(divergence=Divergence(
    kafka=("none", {**FETCH_ERROR, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1}),
    kavka=("none", {**FETCH_ERROR, "high_watermark": 10, "last_stable_offset": 10, "log_start_offset": 0}),
    reason=FETCH_REASON))
def s_fetch_offset_out_of_range(side: Side, topic: str) -> Any:
    produced(side, topic, 10)
    return fetch(side, topic, 100)


@scenario(divergence=Divergence(
    kafka=("none", {**FETCH_ERROR, "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1}),
    kavka=("none", {**FETCH_ERROR, "high_watermark": 10, "last_stable_offset": 10, "log_start_offset": 4}),
    reason=FETCH_REASON))
def s_fetch_below_log_start(side: Side, topic: str) -> Any:
    produced(side, topic, 10)
    assert delete_records(side, topic, 4) == ("none", 4)
    return fetch(side, topic, 2)


@scenario()
def s_fetch_at_high_watermark(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    return fetch(side, topic, 4)


@scenario()
def s_fetch_unknown_topic(side: Side, topic: str) -> Any:
    return fetch(side, topic, 0)


# -- DeleteRecords --------------------------------------------------------------------------------

@scenario()
def s_delete_records_beyond_high_watermark(side: Side, topic: str) -> Any:
    produced(side, topic, 10)
    return delete_records(side, topic, 11), list_offsets(side, topic, [EARLIEST])


@scenario()
def s_delete_records_negative_offset(side: Side, topic: str) -> Any:
    produced(side, topic, 10)
    return delete_records(side, topic, -5), list_offsets(side, topic, [EARLIEST])


@scenario()
def s_delete_records_to_high_watermark(side: Side, topic: str) -> Any:
    produced(side, topic, 10)
    return delete_records(side, topic, -1), delete_records(side, topic, 3), list_offsets(side, topic, [EARLIEST])


@scenario()
def s_delete_records_unknown_partition(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return delete_records(side, topic, 0, partition=2), delete_records(side, topic + "-none", 0)


# -- DescribeConfigs, IncrementalAlterConfigs ------------------------------------------------------

# Topic configs both brokers know (kavka serves Kafka's topic configs; these are the ones asked).
# min.insync.replicas has its own scenario: Kafka 4's format adds a cluster-wide dynamic default.
SHARED_TOPIC_KEYS = ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
                     "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
                     "max.message.bytes", "message.timestamp.type", "min.cleanable.dirty.ratio",
                     "min.compaction.lag.ms", "preallocate", "retention.bytes",
                     "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
                     "unclean.leader.election.enable", "message.timestamp.before.max.ms",
                     "message.timestamp.after.max.ms")


@scenario()
def s_describe_configs_topic_defaults(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return describe_configs(side, TOPIC_RESOURCE, topic, list(SHARED_TOPIC_KEYS))


@scenario()
def s_describe_configs_topic_overrides(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"retention.ms": "3600000", "cleanup.policy": "compact",
                                      "max.message.bytes": "20000", "segment.ms": "600000"})
    return describe_configs(side, TOPIC_RESOURCE, topic, ["retention.ms", "cleanup.policy", "max.message.bytes",
                                                          "segment.ms"])


@scenario()
def s_describe_configs_without_synonyms(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"retention.ms": "3600000"})
    return describe_configs(side, TOPIC_RESOURCE, topic, ["retention.ms", "segment.bytes"], synonyms=False)


@scenario()
def s_describe_configs_unknown_topic(side: Side, topic: str) -> Any:
    return describe_configs(side, TOPIC_RESOURCE, topic, None)


@scenario()
def s_describe_configs_unknown_key(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return describe_configs(side, TOPIC_RESOURCE, topic, ["no.such.config"])


@scenario()
def s_describe_configs_broker(side: Side, topic: str) -> Any:
    return describe_configs(side, BROKER_RESOURCE, "1", ["num.partitions", "log.retention.check.interval.ms",
                                                         "auto.create.topics.enable", "log.retention.hours",
                                                         "message.max.bytes", "default.replication.factor",
                                                         "group.initial.rebalance.delay.ms", "log.segment.bytes"])


MIN_ISR_KAFKA = [("min.insync.replicas", "1", "DYNAMIC_DEFAULT_BROKER_CONFIG"), ("min.insync.replicas", "1", "DEFAULT_CONFIG")]


@scenario(divergence=Divergence(
    kafka=(("DYNAMIC_DEFAULT_BROKER_CONFIG", MIN_ISR_KAFKA), ("DYNAMIC_DEFAULT_BROKER_CONFIG", MIN_ISR_KAFKA),
           [("min.insync.replicas", "1", "DYNAMIC_DEFAULT_BROKER_CONFIG")]),
    kavka=(("DEFAULT_CONFIG", MIN_ISR_KAFKA[1:]), ("DEFAULT_CONFIG", MIN_ISR_KAFKA[1:]), []),
    reason="Kafka 4's kafka-storage format writes a cluster-wide dynamic min.insync.replicas (for "
           "KIP-966's eligible leader replicas, which kavka has not); kavka's format writes none"))
def s_describe_configs_min_insync_replicas(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    on_topic = describe_configs(side, TOPIC_RESOURCE, topic, ["min.insync.replicas"])["configs"]["min.insync.replicas"]
    on_broker = describe_configs(side, BROKER_RESOURCE, "1", ["min.insync.replicas"])["configs"]["min.insync.replicas"]
    cluster = describe_configs(side, BROKER_RESOURCE, "", ["min.insync.replicas"])["configs"]
    return ((on_topic["source"], on_topic["synonyms"]), (on_broker["source"], on_broker["synonyms"]),
            [(k, c["value"], c["source"]) for k, c in cluster.items()])


@scenario()
def s_describe_configs_other_broker_id(side: Side, topic: str) -> Any:
    return describe_configs(side, BROKER_RESOURCE, "2", ["num.partitions"])


@scenario()
def s_describe_configs_invalid_broker_name(side: Side, topic: str) -> Any:
    return describe_configs(side, BROKER_RESOURCE, "one", ["num.partitions"])


@scenario()
def s_alter_configs_set_delete_and_describe(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    out = alter_configs(side, topic, [("retention.ms", SET, "7200000"), ("segment.ms", SET, "600000")])
    out += alter_configs(side, topic, [("segment.ms", DELETE, None)])
    return out, describe_configs(side, TOPIC_RESOURCE, topic, ["retention.ms", "segment.ms"])


@scenario()
def s_alter_configs_unknown_key(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return alter_configs(side, topic, [("no.such.config", SET, "1")])


@scenario()
def s_alter_configs_bad_value(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return alter_configs(side, topic, [("retention.ms", SET, "soon")])


@scenario()
def s_alter_configs_append_to_scalar(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return alter_configs(side, topic, [("retention.ms", APPEND, "1")])


@scenario()
def s_alter_configs_append_to_list(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    out = alter_configs(side, topic, [("cleanup.policy", APPEND, "compact")])
    return out, describe_configs(side, TOPIC_RESOURCE, topic, ["cleanup.policy"])["configs"]


@scenario()
def s_alter_configs_validate_only(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    out = alter_configs(side, topic, [("retention.ms", SET, "7200000")], validate_only=True)
    return out, describe_configs(side, TOPIC_RESOURCE, topic, ["retention.ms"])["configs"]["retention.ms"]["source"]


@scenario()
def s_alter_configs_unknown_topic(side: Side, topic: str) -> Any:
    return alter_configs(side, topic, [("retention.ms", SET, "7200000")])


# -- Groups ---------------------------------------------------------------------------------------

def coordinator(side: Side, group: str) -> None:
    """FindCoordinator until it names a node, as every client does before a group request (the
    first one creates __consumer_offsets); then until the group's partition is loaded."""
    def found() -> bool:
        r = side.call(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])
        return r["coordinators"][0]["error_code"] == "none"
    wait_until(found, timeout=30, message=f"{side.name}: the coordinator of {group}")

    def loaded() -> bool:
        r = side.call(ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[{"group_id": group, "topics": None}])
        return r["groups"][0]["error_code"] not in ("not_coordinator", "coordinator_load_in_progress")
    wait_until(loaded, timeout=30, message=f"{side.name}: {group}'s coordinator loaded")


def join(side: Side, group: str, member_id: str = "", *, session_ms: int = 10000, protocol_type: str = "consumer",
         protocols: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if protocols is None:
        protocols = [{"name": "range", "metadata": b"\x00\x01"}]
    coordinator(side, group)
    return side.call(ApiKey.JOIN_GROUP, 9, group_id=group, session_timeout=session_ms, rebalance_timeout=10000,
                     member_id=member_id, group_instance_id=None, protocol_type=protocol_type, protocols=protocols,
                     reason=None)


def anonymous(resp: dict[str, Any], *ids: str) -> dict[str, Any]:
    """Member ids are the broker's choice (client id + UUID): each becomes its position in `ids`."""
    names = {m: f"member-{i}" for i, m in enumerate(ids)}

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return names.get(x, x) if isinstance(x, str) else x
    return walk(resp)


def stable_member(side: Side, group: str) -> tuple[str, int]:
    first = join(side, group)
    assert first["error_code"] == "member_id_required", first
    member = first["member_id"]
    joined = join(side, group, member)
    assert joined["error_code"] == "none", joined
    sync = side.call(ApiKey.SYNC_GROUP, 5, group_id=group, generation_id=joined["generation_id"], member_id=member,
                     protocol_type="consumer", protocol_name="range",
                     assignments=[{"member_id": member, "assignment": b"\x00\x01"}])
    assert sync["error_code"] == "none", sync
    return member, joined["generation_id"]


def describe_groups(side: Side, *groups: str) -> Any:
    for g in groups:
        coordinator(side, g)
    return side.call(ApiKey.DESCRIBE_GROUPS, 5, groups=list(groups), include_authorized_operations=False)["groups"]


@scenario()
def s_join_group_member_id_required(side: Side, topic: str) -> Any:
    r = join(side, topic)
    return anonymous(r, r["member_id"])


@scenario()
def s_join_group_unknown_member(side: Side, topic: str) -> Any:
    return join(side, topic, "no-such-member")


@scenario()
def s_join_group_session_timeout_too_small(side: Side, topic: str) -> Any:
    return join(side, topic, session_ms=1000)


@scenario()
def s_join_group_empty_protocols(side: Side, topic: str) -> Any:
    return join(side, topic, protocol_type="", protocols=[])


@scenario()
def s_join_group_inconsistent_protocol_type(side: Side, topic: str) -> Any:
    member, _ = stable_member(side, topic)
    r = join(side, topic, protocol_type="connect")
    return anonymous(r, member, r["member_id"])


@scenario()
def s_group_states(side: Side, topic: str) -> Any:
    """Unknown (Dead), Stable after join and sync, Empty after the member leaves."""
    states = [describe_groups(side, topic)]
    member, generation = stable_member(side, topic)
    states.append(anonymous(describe_groups(side, topic), member))
    leave = side.call(ApiKey.LEAVE_GROUP, 5, group_id=topic,
                      members=[{"member_id": member, "group_instance_id": None, "reason": None}])
    states.append(anonymous(leave, member))
    states.append(describe_groups(side, topic))
    return generation, states


@scenario()
def s_heartbeat_unknown_group(side: Side, topic: str) -> Any:
    coordinator(side, topic)
    return side.call(ApiKey.HEARTBEAT, 4, group_id=topic, generation_id=1, member_id="m", group_instance_id=None)


@scenario()
def s_heartbeat_wrong_generation(side: Side, topic: str) -> Any:
    member, generation = stable_member(side, topic)
    return side.call(ApiKey.HEARTBEAT, 4, group_id=topic, generation_id=generation + 5, member_id=member,
                     group_instance_id=None)


@scenario()
def s_sync_group_unknown_member(side: Side, topic: str) -> Any:
    stable_member(side, topic)
    return side.call(ApiKey.SYNC_GROUP, 5, group_id=topic, generation_id=1, member_id="no-such-member",
                     protocol_type="consumer", protocol_name="range", assignments=[])


def commit(side: Side, group: str, topic: str, offset: int, generation: int = -1, member: str = "",
           partition: int = 0) -> Any:
    coordinator(side, group)
    r = side.call(ApiKey.OFFSET_COMMIT, 9, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                  group_instance_id=None, topics=[{"name": topic, "partitions": [
                      {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                       "committed_metadata": "m"}]}])
    return [(p["partition_index"], p["error_code"]) for t in r["topics"] for p in t["partitions"]]


def fetch_offsets(side: Side, group: str, topic: str, partitions: list[int] | None = None) -> Any:
    coordinator(side, group)
    r = side.call(ApiKey.OFFSET_FETCH, 8, require_stable=True, groups=[{
        "group_id": group, "topics": None if partitions is None else [{"name": topic, "partition_indexes": partitions}]}])
    return r["groups"]


@scenario()
def s_offset_commit_simple_and_fetch(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    return commit(side, topic, topic, 3), fetch_offsets(side, topic, topic, [0]), describe_groups(side, topic)


@scenario()
def s_offset_commit_unknown_member(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    return commit(side, topic, topic, 3, generation=1, member="no-such-member")


@scenario()
def s_offset_commit_unknown_member_of_stable_group(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    member, generation = stable_member(side, topic)
    return (commit(side, topic, topic, 1, generation=generation, member="no-such-member"),
            commit(side, topic, topic, 1, generation=generation + 1, member=member),
            commit(side, topic, topic, 2, generation=generation, member=member))


@scenario()
def s_offset_commit_unknown_topic(side: Side, topic: str) -> Any:
    return commit(side, topic, topic + "-none", 3)


@scenario()
def s_offset_commit_beyond_partitions(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return commit(side, topic, topic, 3, partition=4)


@scenario()
def s_offset_fetch_unknown_group(side: Side, topic: str) -> Any:
    side.create_topic(topic)
    return fetch_offsets(side, topic, topic, [0, 1]), fetch_offsets(side, topic, topic, None)


@scenario()
def s_delete_groups(side: Side, topic: str) -> Any:
    produced(side, topic, 2)
    empty, stable, unknown = topic + "-empty", topic + "-stable", topic + "-unknown"
    coordinator(side, unknown)
    assert commit(side, empty, topic, 1) == [(0, "none")]
    stable_member(side, stable)
    r = side.call(ApiKey.DELETE_GROUPS, 2, groups_names=[empty, stable, unknown])
    # Kafka answers in the order of its coordinator shards, not the request's.
    return sorted(r["results"], key=lambda g: g["group_id"]), fetch_offsets(side, empty, topic, [0])


@scenario()
def s_list_groups_states_filter(side: Side, topic: str) -> Any:
    produced(side, topic, 2)
    commit(side, topic + "-empty", topic, 1)
    stable_member(side, topic + "-stable")
    out = {}
    for states in ([], ["Stable"], ["Empty"], ["Dead"], ["stable"]):
        r = side.call(ApiKey.LIST_GROUPS, 4, states_filter=states)
        out[",".join(states)] = (r["error_code"], sorted((g["group_id"], g["protocol_type"], g["group_state"])
                                                         for g in r["groups"] if g["group_id"].startswith(topic)))
    return out


@scenario()
def s_metadata_unknown_topic_id(side: Side, topic: str) -> Any:
    md = side.call(ApiKey.METADATA, 12, topics=[{"name": None, "topic_id": uuid.uuid4()}], allow_auto_topic_creation=False)
    return md["topics"]


@scenario()
def s_produce_keyless_record_to_compacted_topic(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"cleanup.policy": "compact"})
    r = side.produce(topic, build_batch([(now_ms(), None, b"no key")]))
    r["record_errors"] = [(e["batch_index"], e["batch_index_error_message"] is not None) for e in r["record_errors"]]
    return r, list_offsets(side, topic, [LATEST])


@scenario()
def s_delete_records_compacted_topic(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"cleanup.policy": "compact"})
    assert side.produce(topic, records(now_ms(), 4))["error_code"] == "none"
    return delete_records(side, topic, 2), list_offsets(side, topic, [EARLIEST])


@scenario()
def s_list_offsets_unknown_special_timestamp(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    return list_offsets(side, topic, [-6, -7])


@scenario()
def s_alter_configs_static_broker_key(side: Side, topic: str) -> Any:
    return (alter_configs(side, "1", [("num.partitions", SET, "3")], rtype=BROKER_RESOURCE),
            alter_configs(side, "", [("num.partitions", SET, "3")], rtype=BROKER_RESOURCE))


@scenario()
def s_offset_delete(side: Side, topic: str) -> Any:
    """OffsetDelete of a partition the group's member is subscribed to, then of an Empty group's."""
    produced(side, topic, 2)
    member, generation = stable_member(side, topic)
    assert commit(side, topic, topic, 1, generation=generation, member=member) == [(0, "none")]

    def delete(group: str) -> Any:
        coordinator(side, group)
        return side.call(ApiKey.OFFSET_DELETE, 0, group_id=group, topics=[{"name": topic, "partitions": [
            {"partition_index": 0}]}])
    subscribed = delete(topic)  # the range protocol's metadata names no topics: not subscribed
    assert commit(side, topic + "-empty", topic, 1) == [(0, "none")]
    return subscribed, delete(topic + "-empty"), delete(topic + "-unknown"), fetch_offsets(side, topic + "-empty", topic, [0])


@scenario()
def s_describe_groups_completing_rebalance(side: Side, topic: str) -> Any:
    """A member that joined but has not synced: CompletingRebalance."""
    first = join(side, topic)
    joined = join(side, topic, first["member_id"])
    assert joined["error_code"] == "none", joined
    return anonymous(describe_groups(side, topic), first["member_id"])


@scenario()
def s_find_coordinator_bad_key_type(side: Side, topic: str) -> Any:
    r = side.call(ApiKey.FIND_COORDINATOR, 4, key_type=5, coordinator_keys=[topic])
    return [(c["key"], c["error_code"], c["node_id"], c["error_message"]) for c in r["coordinators"]]


@scenario()
def s_init_producer_id_timeout_too_large(side: Side, topic: str) -> Any:
    return side.call(ApiKey.INIT_PRODUCER_ID, 5, transactional_id=topic, transaction_timeout=3_600_000_000 // 1000,
                     producer_id=-1, producer_epoch=-1)


# -- Versions -------------------------------------------------------------------------------------

@scenario()
def s_api_versions_unsupported_version(side: Side, topic: str) -> Any:
    frame = request_frame(ApiKey.API_VERSIONS, 3, client_software_name="x", client_software_version="1",
                          correlation_id=3)
    frame = frame[:6] + (99).to_bytes(2, "big") + frame[8:]  # the header's api_version
    with RawClient(side.port) as c:
        c.send_bytes(frame)
        corr, resp = c.read_response(ApiKey.API_VERSIONS, 0)
    entries = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    return corr, resp.error_code.name, sorted(entries)


@scenario()
def s_unsupported_version_closes_connection(side: Side, topic: str) -> Any:
    body = request_frame(ApiKey.METADATA, 12, topics=(), allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    return side.closes(body[:6] + (99).to_bytes(2, "big") + body[8:])


@scenario(divergence=Divergence(
    kafka=True, kavka=False,
    reason="kavka serves CreateTopics v0-v1 (and the other versions Kafka 4 dropped, KIP-896) for old clients"))
def s_create_topics_v1(side: Side, topic: str) -> Any:
    return side.closes(request_frame(ApiKey.CREATE_TOPICS, 1, side.request(ApiKey.CREATE_TOPICS, 1, {
        "topics": [], "timeout": 1000, "validate_only": False})))


# -- Retention ------------------------------------------------------------------------------------

@scenario()
def s_retention_by_time(side: Side, topic: str) -> Any:
    """Records a day old under retention.ms of an hour: the log start offset moves to the log end
    (Kafka rolls the active segment when all of it is past retention)."""
    side.create_topic(topic, configs={"retention.ms": "3600000"})
    old = now_ms() - 86_400_000
    assert side.produce(topic, records(old, 5))["error_code"] == "none"
    wait_until(lambda: list_offsets(side, topic, [EARLIEST])[0][1] == 5, timeout=60,
               message=f"{side.name}: retention of {topic}")
    return list_offsets(side, topic, [EARLIEST, LATEST]), fetch(side, topic, 5)


@scenario()
def s_retention_keeps_recent_records(side: Side, topic: str) -> Any:
    side.create_topic(topic, configs={"retention.ms": "3600000", "segment.ms": "3600000"})
    assert side.produce(topic, records(now_ms() - 86_400_000, 2))["error_code"] == "none"
    assert side.produce(topic, records(now_ms(), 3, 2))["error_code"] == "none"
    # Both brokers delete the day-old segment in a retention pass (every 500 ms here), not at the
    # produce: read the offsets once the log start has left the old records, or at a deadline
    # (a broker that never deletes them answers 0 and differs).
    deadline = time.monotonic() + 15
    answer = list_offsets(side, topic, [EARLIEST, LATEST])
    while answer[0][1] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        answer = list_offsets(side, topic, [EARLIEST, LATEST])
    return answer


# -- Clients: confluent-kafka (librdkafka) ---------------------------------------------------------

def ck_admin(side: Side) -> AdminClient:
    return AdminClient({"bootstrap.servers": side.bootstrap})


def ck_error(fut: Any) -> str | None:
    try:
        fut.result(30)
    except Exception as e:  # a KafkaException carrying the broker's error
        return e.args[0].name() if e.args and hasattr(e.args[0], "name") else repr(e)
    return None


@scenario()
def s_ck_create_topics_errors(side: Side, topic: str) -> Any:
    a = ck_admin(side)
    side.create_topic(topic)
    futs = a.create_topics([NewTopic(topic, 1, 1), NewTopic("bad name!", 1, 1), NewTopic(topic + "-rf", 1, 5),
                            NewTopic(topic + "-cfg", 1, 1, config={"retention.ms": "x"})], request_timeout=30)
    return {k.replace(topic, "T"): ck_error(f) for k, f in futs.items()}


@scenario()
def s_ck_create_partitions_errors(side: Side, topic: str) -> Any:
    a = ck_admin(side)
    side.create_topic(topic, 2)
    futs = a.create_partitions([NewPartitions(topic, 1)], request_timeout=30)
    futs.update(a.create_partitions([NewPartitions(topic + "-none", 3)], request_timeout=30))
    return {k.replace(topic, "T"): ck_error(f) for k, f in futs.items()}


@scenario()
def s_ck_describe_configs_synonyms(side: Side, topic: str) -> Any:
    a = ck_admin(side)
    side.create_topic(topic, configs={"retention.ms": "3600000"})
    res = a.describe_configs([ConfigResource("topic", topic)], request_timeout=30)
    configs = next(iter(res.values())).result(30)
    return {k: (c.value, c.source, c.is_read_only, c.is_sensitive,
                [(s.name, s.value, s.source) for s in c.synonyms.values()])
            for k, c in configs.items() if k in ("retention.ms", "segment.bytes", "cleanup.policy", "max.message.bytes")}


@scenario()
def s_ck_list_offsets(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    a = ck_admin(side)
    tp = TopicPartition(topic, 0)
    out = {}
    for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max", OffsetSpec.max_timestamp()), ("t5", OffsetSpec.for_timestamp(base + 5000)),
                       ("beyond", OffsetSpec.for_timestamp(base + 60_000))):
        r = a.list_offsets({tp: spec}, request_timeout=30)[tp].result(30)
        out[name] = (r.offset, r.timestamp - base if r.timestamp > 0 else r.timestamp)
    return out


@scenario()
def s_ck_offsets_for_times_and_watermarks(side: Side, topic: str) -> Any:
    base = produced(side, topic, 10)
    assert delete_records(side, topic, 2) == ("none", 2)
    c = Consumer({"bootstrap.servers": side.bootstrap, "group.id": topic})
    try:
        got = c.offsets_for_times([TopicPartition(topic, 0, base + 3000), TopicPartition(topic, 0, base)], 30)
        at = [(tp.offset, tp.error) for tp in got]
        beyond = c.offsets_for_times([TopicPartition(topic, 0, base + 600_000)], 30)[0].offset
        return at, beyond, c.get_watermark_offsets(TopicPartition(topic, 0), 30)
    finally:
        c.close()


@scenario()
def s_ck_delete_records_beyond_end(side: Side, topic: str) -> Any:
    produced(side, topic, 4)
    a = ck_admin(side)
    tp = TopicPartition(topic, 0, 10)
    return ck_error(a.delete_records([tp], request_timeout=30)[tp])


@scenario()
def s_ck_consumer_group_lifecycle(side: Side, topic: str) -> Any:
    """A confluent-kafka consumer joins, reads and commits, then leaves: the group's state and
    committed offset through the admin client at each step."""
    produced(side, topic, 4)
    a = ck_admin(side)

    def describe() -> Any:
        d = a.describe_consumer_groups([topic], request_timeout=30)[topic].result(30)
        return str(d.state), d.partition_assignor, len(d.members), d.is_simple_consumer_group

    c = Consumer({"bootstrap.servers": side.bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    states = []
    try:
        c.subscribe([topic])
        seen = []
        wait_until(lambda: (m := c.poll(0.5)) is not None and not m.error() and seen.append(m.offset()) is None
                   and len(seen) >= 1, timeout=30, message=f"{side.name}: a first record")
        c.commit(asynchronous=False)
        states.append(describe())
    finally:
        c.close()
    states.append(describe())
    committed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(topic)],
                                              request_timeout=30)[topic].result(30)
    return states, [(tp.partition, tp.offset) for tp in committed.topic_partitions]


# -- Clients: kafka-python -------------------------------------------------------------------------

def kp_admin(side: Side) -> Any:
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=side.bootstrap, request_timeout_ms=30000)


@scenario()
def s_kp_create_topics_validate_only(side: Side, topic: str) -> Any:
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import KafkaError
    a = kp_admin(side)
    try:
        a.create_topics([KpNewTopic(topic, 2, 1, topic_configs={"retention.ms": "1000"})], validate_only=True)
        try:
            a.create_topics([KpNewTopic(topic + "!", 1, 1)])
            bad = None
        except KafkaError as e:
            bad = type(e).__name__
        return bad, topic_exists(side, topic)
    finally:
        a.close()


@scenario()
def s_kp_describe_configs(side: Side, topic: str) -> Any:
    """kafka-python's describe_configs with config_filter 'all' and 'modified', for a topic with
    overrides and for the broker."""
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType
    side.create_topic(topic, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    a = kp_admin(side)
    try:
        keys = ["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"]
        out = [a.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic, keys)], include_synonyms=True,
                                  config_filter=f) for f in ("all", "modified")]
        out.append(a.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "1", [
            "log.retention.hours", "num.partitions", "log.segment.bytes"])], config_filter="all"))
        return out
    finally:
        a.close()


@scenario()
def s_kp_delete_topics_unknown(side: Side, topic: str) -> Any:
    from kafka.errors import KafkaError
    a = kp_admin(side)
    try:
        a.delete_topics([topic])
    except KafkaError as e:
        return type(e).__name__
    finally:
        a.close()
    return None
