"""kafka-python 3.x against a real kavka broker process.

Topics are created with kafka-python's own KafkaAdminClient; records go out
with KafkaProducer and come back through an assign()ed KafkaConsumer (no
group, no commits), compared record by record.
"""

from __future__ import annotations

import os
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import MessageSizeTooLargeError
from kafka.partitioner.default import murmur2

from tests.integration.helpers import (
    CODEC_IDS,
    CODECS,
    Rec,
    Sample,
    assert_same_records,
    batch_codecs,
    recent_base_ts,
    sample_records,
    segment_files,
)
from tests.wait import wait_until

TIMEOUTS = {"request_timeout_ms": 15000}


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, **TIMEOUTS)


def kp_create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics(
            {
                topic: {
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs or {},
                }
            },
            timeout_ms=10000,
            wait_for_metadata=True,
        )
        described = admin.describe_topics([topic])
        assert len(described) == 1 and described[0]["error_code"] == 0, described
        assert len(described[0]["partitions"]) == partitions
    finally:
        admin.close()


def kp_producer(bootstrap: str, **conf: object) -> KafkaProducer:
    # kafka-python 3 is idempotent by default, which needs InitProducerId;
    # test_default_idempotent_producer covers that, the rest test the data path.
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        **{"linger_ms": 5, "enable_idempotence": False, **TIMEOUTS, **conf},
    )


def kp_samples(n: int) -> list[Sample]:
    return sample_records(n, base_ts=recent_base_ts(), null_header_values=False, both_null=False)


def kp_produce(
    producer: KafkaProducer, topic: str, samples: list[Sample], *, partition: int | None = 0
) -> list[tuple[int, int]]:
    futs = [
        producer.send(
            topic,
            key=s.key,
            value=s.value,
            headers=list(s.headers),
            partition=partition,
            timestamp_ms=s.timestamp,
        )
        for s in samples
    ]
    producer.flush(timeout=30)
    out = []
    for f in futs:
        md = f.get(timeout=30)
        out.append((md.partition, md.offset))
    return out


def kp_read_to_end(
    bootstrap: str,
    topic: str,
    partitions=(0,),
    *,
    start: int | None = None,
    timeout: float = 30.0,
    **conf,
) -> list[Rec]:  # noqa: ANN001, ANN003
    """Assign, seek (beginning, or `start`), poll until every partition's
    position reaches the end offset it had when reading began."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        check_crcs=True,
        fetch_max_wait_ms=100,
        **TIMEOUTS,
        **conf,
    )
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        if start is None:
            c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, start)
        end = c.end_offsets(tps)
        got: list[Rec] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read of {topic} stuck: positions {[c.position(tp) for tp in tps]}, ends {end}"
                )
            for recs in c.poll(timeout_ms=500).values():
                for r in recs:
                    got.append(
                        Rec(
                            r.partition,
                            r.offset,
                            r.key,
                            r.value,
                            tuple(r.headers or ()),
                            r.timestamp,
                        )
                    )
        return got
    finally:
        c.close()


def test_roundtrip_keys_headers_timestamps_nulls(broker, topic_name):
    kp_create_topic(broker.bootstrap, topic_name)
    sent = kp_samples(60)
    producer = kp_producer(broker.bootstrap, acks="all")
    try:
        assert kp_produce(producer, topic_name, sent) == [(0, i) for i in range(60)]
    finally:
        producer.close(timeout=5)
    assert_same_records(kp_read_to_end(broker.bootstrap, topic_name), sent)


def test_default_idempotent_producer(broker, topic_name):
    """KafkaProducer() with its defaults (idempotent since kafka-python 3):
    what a user gets without tuning anything."""
    kp_create_topic(broker.bootstrap, topic_name)
    sent = kp_samples(20)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **TIMEOUTS)
    try:
        assert kp_produce(producer, topic_name, sent) == [(0, i) for i in range(20)]
    finally:
        producer.close(timeout=5)
    assert_same_records(kp_read_to_end(broker.bootstrap, topic_name), sent)


@pytest.mark.parametrize("codec", CODECS)
def test_compression_roundtrip(broker, topic_name, codec):
    kp_create_topic(broker.bootstrap, topic_name)
    sent = kp_samples(150)
    producer = kp_producer(broker.bootstrap, acks=1, compression_type=codec, linger_ms=50)
    try:
        assert kp_produce(producer, topic_name, sent) == [(0, i) for i in range(150)]
    finally:
        producer.close(timeout=5)
    assert_same_records(kp_read_to_end(broker.bootstrap, topic_name), sent)
    codecs = [c for f in segment_files(broker.log_dirs[0], topic_name) for c in batch_codecs(f)]
    assert codecs and set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}"


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker, topic_name, acks):
    kp_create_topic(broker.bootstrap, topic_name)
    sent = kp_samples(40)
    producer = kp_producer(broker.bootstrap, acks=acks)
    try:
        reports = kp_produce(producer, topic_name, sent)
    finally:
        producer.close(timeout=5)
    if acks != 0:
        assert reports == [(0, i) for i in range(40)]
    # For acks=0 nothing confirms the write: wait for the log end first.
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, **TIMEOUTS
    )
    try:
        tp = TopicPartition(topic_name, 0)
        wait_until(lambda: c.end_offsets([tp])[tp] >= 40, timeout=15, interval=0.1,
                   message="the log end at 40 (acks=0 confirms nothing)")
        assert c.end_offsets([tp])[tp] == 40
    finally:
        c.close()
    assert_same_records(kp_read_to_end(broker.bootstrap, topic_name), sent)


def test_record_just_under_and_over_max_message_bytes(broker, topic_name):
    limit = 20_000
    kp_create_topic(broker.bootstrap, topic_name, configs={"max.message.bytes": str(limit)})
    producer = kp_producer(broker.bootstrap, acks="all", linger_ms=0, retries=0)
    small = os.urandom(limit - 200)
    try:
        md = producer.send(topic_name, key=b"small", value=small, partition=0).get(timeout=20)
        assert (md.partition, md.offset) == (0, 0)
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic_name, key=b"big", value=os.urandom(limit + 500), partition=0).get(
                timeout=20
            )
    finally:
        producer.close(timeout=5)
    got = kp_read_to_end(broker.bootstrap, topic_name)
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"small", small)]


def test_many_partitions_keyed(broker, topic_name):
    n_parts = 24
    kp_create_topic(broker.bootstrap, topic_name, partitions=n_parts)
    base = recent_base_ts()
    keys = [f"acct-{i % 90}".encode() for i in range(360)]
    producer = kp_producer(broker.bootstrap, acks=1)
    try:
        futs = [
            producer.send(topic_name, key=k, value=b"v%d" % i, timestamp_ms=base + i)
            for i, k in enumerate(keys)
        ]
        producer.flush(timeout=30)
        delivered = [(f.get(timeout=30).partition, f.get(timeout=30).offset) for f in futs]
    finally:
        producer.close(timeout=5)
    # Java's default partitioner: murmur2(key) & 0x7fffffff % partitions.
    for i, k in enumerate(keys):
        assert delivered[i][0] == (murmur2(k) & 0x7FFFFFFF) % n_parts
    got = kp_read_to_end(broker.bootstrap, topic_name, range(n_parts), timeout=45)
    assert len(got) == len(keys)
    by_pos = {(r.partition, r.offset): r for r in got}
    for i, k in enumerate(keys):
        r = by_pos[delivered[i]]
        assert (r.key, r.value, r.timestamp) == (k, b"v%d" % i, base + i)


def _produce_and_delete_first_five(bootstrap: str, topic: str) -> list[Sample]:
    kp_create_topic(bootstrap, topic)
    sent = kp_samples(10)
    producer = kp_producer(bootstrap, acks="all")
    try:
        assert kp_produce(producer, topic, sent) == [(0, i) for i in range(10)]
    finally:
        producer.close(timeout=5)
    admin = kp_admin(bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 5}, timeout_ms=10000)
    finally:
        admin.close()
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **TIMEOUTS
    )
    try:
        tp = TopicPartition(topic, 0)
        assert c.beginning_offsets([tp])[tp] == 5
        assert c.end_offsets([tp])[tp] == 10
    finally:
        c.close()
    return sent


def test_offset_out_of_range_resets_to_earliest(broker, topic_name):
    sent = _produce_and_delete_first_five(broker.bootstrap, topic_name)
    got = kp_read_to_end(broker.bootstrap, topic_name, start=2, auto_offset_reset="earliest")
    assert_same_records(got, sent[5:], first_offset=5)


def test_offset_out_of_range_resets_to_latest(broker, topic_name):
    _produce_and_delete_first_five(broker.bootstrap, topic_name)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="latest",
        fetch_max_wait_ms=100,
        **TIMEOUTS,
    )
    tp = TopicPartition(topic_name, 0)
    try:
        c.assign([tp])
        c.seek(tp, 2)
        deadline = time.monotonic() + 15
        # The reset happens on the first fetch; position() then shows it.
        while time.monotonic() < deadline:
            assert c.poll(timeout_ms=200) == {}, "records 5..9 must be skipped by a reset to latest"
            if c.position(tp) == 10:
                break
        assert c.position(tp) == 10
        producer = kp_producer(broker.bootstrap, acks="all")
        try:
            md = producer.send(topic_name, value=b"after-reset", partition=0).get(timeout=20)
        finally:
            producer.close(timeout=5)
        assert md.offset == 10
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got = [r for recs in c.poll(timeout_ms=300).values() for r in recs]
        assert [(r.offset, r.value) for r in got] == [(10, b"after-reset")]
    finally:
        c.close()


def test_offsets_for_times(broker, topic_name):
    kp_create_topic(broker.bootstrap, topic_name)
    sent = kp_samples(20)
    producer = kp_producer(broker.bootstrap, acks=1, linger_ms=0)
    try:
        kp_produce(producer, topic_name, sent)
    finally:
        producer.close(timeout=5)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, **TIMEOUTS
    )
    try:
        tp = TopicPartition(topic_name, 0)
        found = c.offsets_for_times({tp: sent[7].timestamp})[tp]
        assert (found.offset, found.timestamp) == (7, sent[7].timestamp)
        assert c.offsets_for_times({tp: sent[-1].timestamp + 1})[tp] is None
    finally:
        c.close()
