"""The reference broker itself (tests/kafka_reference.py): a real Apache Kafka that answers, keeps
what it is sent, and is the Kafka it says it is, before any answer of kavka is compared with it."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.java_deps import KAFKA_VERSION


def test_reference_is_apache_kafka_and_round_trips_records(kafka_reference):
    admin = AdminClient({"bootstrap.servers": kafka_reference.bootstrap})
    md = admin.list_topics(timeout=10)
    assert md.cluster_id == kafka_reference.cluster_id and list(md.brokers) == [1]
    topic = f"ref-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": kafka_reference.bootstrap, "acks": "all"})
    sent = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
    for k, v in sent:
        p.produce(topic, v, k, partition=0, headers=[("h", k)])
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": kafka_reference.bootstrap, "group.id": topic,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < len(sent):
        m = c.poll(10)
        assert m is not None, f"read {len(got)} of {len(sent)}"
        assert m.error() is None, m.error()
        got.append((m.key(), m.value(), m.offset(), m.headers()))
    c.close()
    assert got == [(k, v, i, [("h", k)]) for i, (k, v) in enumerate(sent)]
    # The server's own banner names its version.
    assert f"Kafka version: {KAFKA_VERSION}" in kafka_reference.output_file.read_text()
