"""Admin APIs through confluent-kafka's AdminClient (librdkafka), and
DescribeConfigs through kafka-python, against a real kavka broker.

Checks what Kafka would answer: CreateTopics (configs, validate_only, errors),
DescribeConfigs (every topic config with value, source, default flag and
synonyms), IncrementalAlterConfigs / AlterConfigs, CreatePartitions,
DeleteRecords + ListOffsets, DeleteTopics.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.integration.helpers import (
    ck_admin,
    ck_create_topic,
    ck_list_offset,
    ck_produce_samples,
    ck_producer,
    ck_read_to_end,
    ck_wait_topic,
    kafka_error_code,
    recent_base_ts,
    sample_records,
)
from tests.wait import wait_until

LONG_MAX = str(2**63 - 1)
# Apache Kafka 4.x topic-config defaults (LogConfig / ServerLogConfigs).
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "index.interval.bytes": "4096",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": LONG_MAX,
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def describe_topic_configs(admin, topic: str) -> dict[str, ConfigEntry]:  # noqa: ANN001
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res], request_timeout=15)[res].result(timeout=20)


def describe_broker_configs(admin, node_id: str = "1") -> dict[str, ConfigEntry]:  # noqa: ANN001
    res = ConfigResource(ResourceType.BROKER, node_id)
    return admin.describe_configs([res], request_timeout=15)[res].result(timeout=20)


def test_describe_configs_every_topic_config_value_source_default(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(
        admin,
        topic_name,
        partitions=2,
        config={"retention.ms": "3600000", "cleanup.policy": "compact"},
    )
    entries = describe_topic_configs(admin, topic_name)

    missing = sorted(set(KAFKA_TOPIC_DEFAULTS) - set(entries))
    assert not missing, f"DescribeConfigs lacks topic configs: {missing}"

    r = entries["retention.ms"]
    assert (r.value, r.source, r.is_default) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        False,
    )
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    wrong = {}
    for name, want in KAFKA_TOPIC_DEFAULTS.items():
        if name in ("retention.ms", "cleanup.policy"):
            continue
        e = entries[name]
        if (e.value, e.source, e.is_default) != (want, ConfigSource.DEFAULT_CONFIG.value, True):
            wrong[name] = (e.value, ConfigSource(e.source).name, e.is_default)
    assert not wrong, f"configs that differ from Kafka's (value, source, is_default): {wrong}"

    # Synonyms (DescribeConfigs v1+): the override first, then the broker default it hides.
    syn = entries["cleanup.policy"].synonyms
    sources = [ConfigSource(s.source) for s in syn.values()]
    assert sources == [ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG], syn
    assert syn["log.cleanup.policy"].value == "delete"
    # log.retention.ms has no default of its own (log.retention.hours gives it), so, as in Kafka,
    # retention.ms lists only its override (tests/oracle: describe_configs_topic_overrides).
    syn = entries["retention.ms"].synonyms
    assert [(s.name, s.value, ConfigSource(s.source)) for s in syn.values()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG)], syn
    seg_syn = entries["segment.bytes"].synonyms
    assert (
        seg_syn.get("log.segment.bytes") is not None
        and seg_syn["log.segment.bytes"].value == "1073741824"
    ), seg_syn


def test_describe_configs_static_broker_config_is_inherited(broker_factory, topic_name):
    b = broker_factory(
        overrides={"message.max.bytes": "50000", "log.segment.bytes": "2097152"}
    ).start()
    admin = ck_admin(b.bootstrap)
    ck_create_topic(admin, topic_name)
    topic = describe_topic_configs(admin, topic_name)
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].source) == (
        "50000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == (
        "2097152",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    assert topic["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    brk = describe_broker_configs(admin, "1")
    assert (brk["message.max.bytes"].value, brk["message.max.bytes"].source) == (
        "50000",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )
    assert brk["node.id"].value == "1"
    assert brk["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert (brk["auto.create.topics.enable"].value, brk["auto.create.topics.enable"].source) == (
        "true",
        ConfigSource.DEFAULT_CONFIG.value,
    )


def test_dynamic_broker_config_persists_across_restart(broker_factory, topic_name):
    b = broker_factory().start()
    admin = ck_admin(b.bootstrap)
    res = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("message.max.bytes", "70000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=20)
    e = describe_broker_configs(admin)["message.max.bytes"]
    assert (e.value, e.source) == ("70000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    assert b.stop() == 0
    b.start()
    admin = ck_admin(b.bootstrap)
    e = describe_broker_configs(admin)["message.max.bytes"]
    assert (e.value, e.source) == ("70000", ConfigSource.DYNAMIC_BROKER_CONFIG.value), (
        "dynamic broker config lost on restart"
    )
    ck_create_topic(admin, topic_name)
    t = describe_topic_configs(admin, topic_name)["max.message.bytes"]
    assert (t.value, t.source) == ("70000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_topic_lifecycle_create_describe_alter_delete(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=3, config={"segment.bytes": "1048576"})
    md = admin.list_topics(topic=topic_name, timeout=10).topics[topic_name]
    assert sorted(md.partitions) == [0, 1, 2]
    assert all(
        p.leader == 1 and list(p.replicas) == [1] and list(p.isrs) == [1]
        for p in md.partitions.values()
    )

    # Creating it again is TOPIC_ALREADY_EXISTS.
    fut = admin.create_topics([NewTopic(topic_name, 3, 1)], request_timeout=15)[topic_name]
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.TOPIC_ALREADY_EXISTS

    # IncrementalAlterConfigs: SET one, DELETE another (back to its default).
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=20)
    entries = describe_topic_configs(admin, topic_name)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "120000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "1073741824",
        ConfigSource.DEFAULT_CONFIG.value,
    )

    # Legacy AlterConfigs replaces the whole set of overrides.
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"max.message.bytes": "30000"})
    admin.alter_configs([res], request_timeout=15)[res].result(timeout=20)
    entries = describe_topic_configs(admin, topic_name)
    assert entries["max.message.bytes"].value == "30000"
    assert entries["retention.ms"].value == "604800000", (
        "AlterConfigs must drop overrides it does not name"
    )

    # An invalid value is refused and changes nothing.
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as ei:
        admin.incremental_alter_configs([res], request_timeout=15)[res].result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.INVALID_CONFIG
    assert describe_topic_configs(admin, topic_name)["cleanup.policy"].value == "delete"

    admin.delete_topics([topic_name], operation_timeout=10, request_timeout=15)[topic_name].result(
        timeout=20
    )
    wait_until(
        lambda: topic_name not in admin.list_topics(timeout=10).topics,
        timeout=15,
        message=f"{topic_name} to leave the metadata",
    )
    fut = admin.delete_topics([topic_name], request_timeout=15)[topic_name]
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_validate_only_creates_nothing(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    fut = admin.create_topics(
        [NewTopic(topic_name, 4, 1, config={"retention.ms": "1000"})],
        validate_only=True,
        request_timeout=15,
    )[topic_name]
    assert fut.result(timeout=20) is None
    bad = admin.create_topics(
        [NewTopic(topic_name, 4, 1, config={"retention.ms": "not-a-number"})],
        validate_only=True,
        request_timeout=15,
    )[topic_name]
    with pytest.raises(KafkaException) as ei:
        bad.result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.INVALID_CONFIG
    # Still nothing, even after the metadata has had time to change.
    md = admin.list_topics(timeout=10)
    assert topic_name not in md.topics
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    with pytest.raises(KafkaException) as ei:
        admin.describe_configs([res], request_timeout=15)[res].result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # And the real create afterwards gets the 4 partitions it asks for.
    ck_create_topic(admin, topic_name, partitions=4)


def test_create_topic_errors(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    futs = admin.create_topics(
        [
            NewTopic(topic_name + "-a", 0, 1),
            NewTopic(topic_name + "-b", 1, 3),
            NewTopic("bad/name", 1, 1),
        ],
        request_timeout=15,
    )
    codes = {}
    for name, fut in futs.items():
        with pytest.raises(KafkaException) as ei:
            fut.result(timeout=20)
        codes[name] = kafka_error_code(ei.value)
    assert codes == {
        topic_name + "-a": KafkaError.INVALID_PARTITIONS,
        topic_name + "-b": KafkaError.INVALID_REPLICATION_FACTOR,
        "bad/name": KafkaError.TOPIC_EXCEPTION,  # INVALID_TOPIC_EXCEPTION (17)
    }


def test_create_partitions(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=2)
    admin.create_partitions([NewPartitions(topic_name, 5)], request_timeout=15)[topic_name].result(
        timeout=20
    )
    ck_wait_topic(admin, topic_name, 5)

    # The new partitions take writes and serve them back.
    producer = ck_producer(broker.bootstrap)
    sent = sample_records(6, base_ts=recent_base_ts())
    assert ck_produce_samples(producer, topic_name, sent[:3], partition=4) == [
        (4, 0),
        (4, 1),
        (4, 2),
    ]
    assert ck_produce_samples(producer, topic_name, sent[3:], partition=1) == [
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    got = ck_read_to_end(broker.bootstrap, topic_name, range(5))
    assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
        [(4, i, sent[i].value) for i in range(3)] + [(1, i, sent[3 + i].value) for i in range(3)]
    )

    # Shrinking is INVALID_PARTITIONS; validate_only changes nothing.
    with pytest.raises(KafkaException) as ei:
        admin.create_partitions([NewPartitions(topic_name, 3)], request_timeout=15)[
            topic_name
        ].result(timeout=20)
    assert kafka_error_code(ei.value) == KafkaError.INVALID_PARTITIONS
    admin.create_partitions([NewPartitions(topic_name, 8)], validate_only=True, request_timeout=15)[
        topic_name
    ].result(timeout=20)
    assert len(admin.list_topics(topic=topic_name, timeout=10).topics[topic_name].partitions) == 5


def test_delete_records_moves_log_start_offset(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    sent = sample_records(40, base_ts=recent_base_ts())
    ck_produce_samples(
        ck_producer(broker.bootstrap, {"batch.num.messages": 8, "linger.ms": 0}), topic_name, sent
    )
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.earliest()) == 0

    def delete_before(offset: int) -> int:
        fut = admin.delete_records([TopicPartition(topic_name, 0, offset)], request_timeout=15)
        return next(iter(fut.values())).result(timeout=20).low_watermark

    # An offset in the middle of a batch: the log start moves exactly there.
    assert delete_before(13) == 13
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.earliest()) == 13
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.latest()) == 40
    got = ck_read_to_end(broker.bootstrap, topic_name)
    assert [r.offset for r in got] == list(range(13, 40))
    assert [r.value for r in got] == [s.value for s in sent[13:]]

    # Never backwards; beyond the high watermark is OFFSET_OUT_OF_RANGE.
    assert delete_before(5) == 13
    with pytest.raises(KafkaException) as ei:
        delete_before(41)
    assert kafka_error_code(ei.value) == KafkaError.OFFSET_OUT_OF_RANGE
    # -1 means "up to the high watermark".
    assert delete_before(-1) == 40
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.earliest()) == 40
    assert ck_read_to_end(broker.bootstrap, topic_name) == []


def test_kafka_python_describe_configs_all(broker, topic_name):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType

    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, config={"retention.ms": "3600000"})
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        out = kp.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all"
        )
    finally:
        kp.close()
    flat = repr(out)
    assert "3600000" in flat and "1073741824" in flat, flat[:2000]
    missing = [name for name in KAFKA_TOPIC_DEFAULTS if name not in flat]
    assert not missing, f"kafka-python DescribeConfigs lacks {missing}"


def test_a_bootstrap_broker_that_dies_after_connecting_hands_over_to_the_next(broker_factory):
    """kavka's own clients (AdminClient.send_any: Metadata, DescribeCluster, the producer's
    InitProducerId): the first bootstrap broker answers, then dies (kill -9) with the connection
    still cached; the next request fails on it and goes to the next bootstrap server."""
    from kavka.client.admin import AdminClient as KavkaAdmin
    from kavka.client.producer import Producer as KavkaProducer

    b1, b2 = broker_factory(), broker_factory()
    b1.start()
    b2.start()
    ids = {}
    for b in (b1, b2):
        with KavkaAdmin(b.bootstrap) as one:
            ids[b.port] = one.describe_cluster().cluster_id
    assert ids[b1.port] != ids[b2.port]  # two single-node clusters: the answer says who answered

    a = KavkaAdmin(f"{b1.bootstrap},{b2.bootstrap}")
    try:
        assert a.describe_cluster().cluster_id == ids[b1.port]
        b1.kill()
        assert a.describe_cluster().cluster_id == ids[b2.port]
        assert [t.name for t in a.list_topics()] == []  # Metadata through the same hand-over
    finally:
        a.close()

    p = KavkaProducer(f"{b1.bootstrap},{b2.bootstrap}")  # idempotent: InitProducerId from b2
    try:
        assert p.producer_id >= 0
    finally:
        p.close()
