"""Segment roll and retention on a live broker: old segments go, the log start offset advances."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.wait import wait_until


def _earliest(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset


def test_retention_bytes_deletes_old_segments_and_consumers_reset(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cfg = {"segment.bytes": "4096", "retention.bytes": "8192", "segment.ms": "3600000"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=cfg)])[topic_name].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    errors: list = []
    for i in range(200):
        p.produce(topic_name, value=b"%04d" % i + b"x" * 200, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(15) == 0
    assert errors == [None] * 200
    part_dir = broker.log_dirs[0] / f"{topic_name}-0"
    assert len(list(part_dir.glob("*.log"))) > 3  # rolled by size
    # The broker checks retention every 500 ms in tests (log.retention.check.interval.ms), and a
    # pass may have run mid-produce: wait until Kafka's rule deletes nothing more (the oldest
    # segment no longer fits in the excess over retention.bytes), so the log start is final.
    def settled() -> bool:
        try:
            sizes = [f.stat().st_size for f in sorted(part_dir.glob("*.log"))]
        except FileNotFoundError:  # a segment renamed for deletion while listed
            return False
        return len(sizes) == 1 or sum(sizes) - sizes[0] < 8192

    wait_until(settled, timeout=20, message="retention to bring the log within retention.bytes")
    start = wait_until(lambda: _earliest(admin, topic_name) or None, timeout=20, message="log start offset to advance")
    assert 0 < start < 200
    # a consumer asking for offset 0 is reset to the new log start (auto.offset.reset=earliest)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic_name, 0, 0)])
    first = None
    for _ in range(40):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            first = m
            break
    c.close()
    assert first is not None and first.offset() == start
    assert first.value().startswith(b"%04d" % start)


def test_batch_larger_than_segment_bytes_is_refused(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "2048"})])[topic_name].result(15)
    # One record of 3,000 bytes is one batch over segment.bytes whatever the client's timing (40
    # records of 100 B were sometimes split into smaller requests on a loaded machine).
    p = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    errors: list = []
    p.produce(topic_name, value=b"z" * 3000, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(15) == 0
    assert errors and all(e is not None and e.code() == KafkaError.RECORD_LIST_TOO_LARGE for e in errors)


def test_retention_ms_via_alter_config(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "2048"})])[topic_name].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    errors: list = []
    for i in range(60):
        # timestamps from 1970: they expire as soon as retention.ms is lowered
        p.produce(topic_name, value=b"y" * 100, timestamp=1_000_000 + i, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(15) == 0
    assert errors == [None] * 60
    assert _earliest(admin, topic_name) == 0
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    start = wait_until(lambda: _earliest(admin, topic_name) or None, timeout=20, message="time-based retention")
    # every segment expired: the log is rolled and restarts at the log end
    assert start == 60
