"""confluent-kafka (librdkafka 2.x) against a real kavka broker process.

Every test checks the data that comes back -- offsets, keys, values, headers,
timestamps, partitions, counts -- against what was sent and what the delivery
reports said. Consumers assign() and never join a group.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

from kavka.protocol.compression import compress
from tests.integration.helpers import (
    CODEC_IDS,
    CODECS,
    assert_same_records,
    batch_codecs,
    batch_spans,
    ck_admin,
    ck_consumer,
    ck_create_topic,
    ck_list_offset,
    ck_produce_samples,
    ck_producer,
    ck_read_to_end,
    recent_base_ts,
    sample_records,
    segment_files,
)
from tests.wait import wait_until


def test_roundtrip_keys_headers_timestamps_nulls(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    sent = sample_records(60, base_ts=recent_base_ts())
    reports = ck_produce_samples(ck_producer(broker.bootstrap, {"acks": "all"}), topic_name, sent)
    assert reports == [(0, i) for i in range(60)], "offsets must be assigned 0..59 in produce order"
    got = ck_read_to_end(broker.bootstrap, topic_name)
    assert_same_records(got, sent)


@pytest.mark.parametrize("codec", CODECS)
def test_compression_roundtrip_and_stored_as_sent(broker, topic_name, codec):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    sent = sample_records(200, base_ts=recent_base_ts())
    producer = ck_producer(
        # Usually one batch (flush() sends at once); a loaded machine may still cut more.
        broker.bootstrap, {"compression.type": codec, "linger.ms": 5000, "batch.num.messages": 1000}
    )
    reports = ck_produce_samples(producer, topic_name, sent)
    assert reports == [(0, i) for i in range(200)]
    assert_same_records(ck_read_to_end(broker.bootstrap, topic_name), sent)
    # Batches are stored as the client sent them: never recompressed, never decompressed.
    # librdkafka itself sends a batch uncompressed when compressing does not shrink it (a batch of
    # one or two small records, which a loaded machine can cut): such a batch may be stored
    # uncompressed, but only if compressing it really would not have paid.
    wanted = CODEC_IDS[codec]
    codecs = []
    for f in segment_files(broker.log_dirs[0], topic_name):
        data = f.read_bytes()
        for (pos, size, _base, _last), stored in zip(batch_spans(f), batch_codecs(f), strict=True):
            codecs.append(stored)
            assert stored in (wanted, 0), f"batch at {pos} stored with codec {stored}, sent {codec}"
            if stored == 0:
                records = data[pos + 61 : pos + size]
                assert len(compress(wanted, records)) >= 0.9 * len(records), (
                    f"batch at {pos} ({len(records)} B of records) is stored uncompressed, but {codec} "
                    "would have shrunk it: the broker must have decompressed it"
                )
    assert wanted in codecs, f"stored batch codecs {codecs}, sent {codec}"


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker, topic_name, acks):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    sent = sample_records(50, base_ts=recent_base_ts())
    reports = ck_produce_samples(ck_producer(broker.bootstrap, {"acks": acks}), topic_name, sent)
    if acks == "0":
        # acks=0: no response, so librdkafka reports no offset.
        assert all(p == 0 for p, _ in reports)
        # The broker still appended them; wait until the log end shows all 50.
        wait_until(
            lambda: ck_list_offset(admin, topic_name, 0, OffsetSpec.latest()) == 50,
            timeout=15,
            message="acks=0 records to reach the log",
        )
    else:
        assert reports == [(0, i) for i in range(50)]
    assert_same_records(ck_read_to_end(broker.bootstrap, topic_name), sent)


def test_record_just_under_and_over_topic_max_message_bytes(broker, topic_name):
    limit = 20_000
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1, config={"max.message.bytes": str(limit)})
    producer = ck_producer(
        broker.bootstrap, {"acks": "all", "compression.type": "none", "linger.ms": 0}
    )
    small = os.urandom(limit - 200)  # a batch of one record: ~80 bytes of overhead
    errors: list = []
    offsets: list[int] = []

    def cb(err, msg):  # noqa: ANN001, ANN202
        errors.append(err) if err is not None else offsets.append(msg.offset())

    producer.produce(topic_name, key=b"small", value=small, partition=0, on_delivery=cb)
    assert producer.flush(20) == 0
    assert errors == [] and offsets == [0]

    producer.produce(
        topic_name, key=b"big", value=os.urandom(limit + 500), partition=0, on_delivery=cb
    )
    assert producer.flush(20) == 0
    assert len(errors) == 1, f"over-limit record was accepted at {offsets[1:]}"
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, f"got {errors[0]}"

    got = ck_read_to_end(broker.bootstrap, topic_name)
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"small", small)]


def test_record_near_broker_message_max_bytes(broker_factory, topic_name):
    limit = 50_000
    b = broker_factory(overrides={"message.max.bytes": str(limit)}).start()
    admin = ck_admin(b.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    producer = ck_producer(b.bootstrap, {"acks": "all", "compression.type": "none", "linger.ms": 0})
    near = os.urandom(limit - 150)
    results: list = []
    producer.produce(
        topic_name,
        value=near,
        partition=0,
        on_delivery=lambda e, m: results.append((e, m.offset())),
    )
    assert producer.flush(20) == 0
    producer.produce(
        topic_name,
        value=os.urandom(limit + 10),
        partition=0,
        on_delivery=lambda e, m: results.append((e, m.offset())),
    )
    assert producer.flush(20) == 0
    assert results[0] == (None, 0), f"record just under message.max.bytes: {results[0]}"
    err = results[1][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, (
        f"record over the limit: {results[1]}"
    )
    got = ck_read_to_end(b.bootstrap, topic_name)
    assert [(r.offset, r.value) for r in got] == [(0, near)]


def test_many_partitions_keyed(broker, topic_name):
    n_parts = 24
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=n_parts)
    base = recent_base_ts()
    keys = [f"user-{i % 80}".encode() for i in range(480)]
    producer = ck_producer(broker.bootstrap, {"acks": "all", "partitioner": "murmur2_random"})
    delivered: dict[int, tuple[int, int]] = {}
    errors: list = []

    def cb(i: int):  # noqa: ANN202
        return lambda err, msg: (
            errors.append(err) if err else delivered.__setitem__(i, (msg.partition(), msg.offset()))
        )

    for i, k in enumerate(keys):
        producer.produce(
            topic_name, key=k, value=f"v{i}".encode(), timestamp=base + i, on_delivery=cb(i)
        )
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:3]

    # The partitioner is a function of the key.
    by_key: dict[bytes, set[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, set()).add(delivered[i][0])
    assert all(len(ps) == 1 for ps in by_key.values())
    assert len({p for p, _ in delivered.values()}) > n_parts // 2, (
        "keys should spread over many partitions"
    )

    got = ck_read_to_end(broker.bootstrap, topic_name, range(n_parts), timeout=45)
    assert len(got) == len(keys)
    seen = {(r.partition, r.offset): r for r in got}
    for i, k in enumerate(keys):
        r = seen[delivered[i]]
        assert (r.key, r.value, r.timestamp) == (k, f"v{i}".encode(), base + i)
    for p in range(n_parts):
        offs = sorted(o for (pp, o) in seen if pp == p)
        assert offs == list(range(len(offs))), f"partition {p} offsets not contiguous: {offs[:10]}"


def _delete_records_setup(bootstrap: str, topic: str) -> None:
    admin = ck_admin(bootstrap)
    ck_create_topic(admin, topic, partitions=1)
    sent = sample_records(10, base_ts=recent_base_ts())
    assert ck_produce_samples(ck_producer(bootstrap), topic, sent) == [(0, i) for i in range(10)]
    res = admin.delete_records([TopicPartition(topic, 0, 5)], request_timeout=15)
    low = next(iter(res.values())).result(timeout=20).low_watermark
    assert low == 5
    assert ck_list_offset(admin, topic, 0, OffsetSpec.earliest()) == 5


def test_offset_out_of_range_resets_to_earliest(broker, topic_name):
    _delete_records_setup(broker.bootstrap, topic_name)
    # Offset 2 was deleted: the broker answers OFFSET_OUT_OF_RANGE and the
    # client resets to the log start offset, as auto.offset.reset asks.
    got = ck_read_to_end(
        broker.bootstrap, topic_name, start=2, conf={"auto.offset.reset": "earliest"}
    )
    assert [r.offset for r in got] == [5, 6, 7, 8, 9]
    assert [r.value for r in got] == [s.value for s in sample_records(10, base_ts=0)[5:]]


def test_offset_out_of_range_resets_to_latest(broker, topic_name):
    _delete_records_setup(broker.bootstrap, topic_name)
    c = ck_consumer(
        broker.bootstrap, {"auto.offset.reset": "latest", "enable.partition.eof": False}
    )
    producer = ck_producer(broker.bootstrap, {"linger.ms": 0})
    try:
        c.assign([TopicPartition(topic_name, 0, 2)])
        got = []
        # Keep adding markers until the reset (to the log end, 10) has
        # happened and one arrives; bounded by the attempt count.
        for attempt in range(20):
            producer.produce(topic_name, value=f"marker-{attempt}".encode(), partition=0)
            assert producer.flush(10) == 0
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is None:
                    continue
                assert msg.error() is None, f"consumer error: {msg.error()}"
                got.append((msg.offset(), msg.value()))
            if got:
                break
        assert got, "no record after the reset to latest"
        assert got[0][0] >= 10, f"reset to latest must skip 5..9, got {got}"
        assert got[0][1].startswith(b"marker-")
        assert [o for o, _ in got] == list(range(got[0][0], got[0][0] + len(got)))
    finally:
        c.close()


def test_seek_and_offsets_for_times(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=1)
    base = recent_base_ts()
    sent = sample_records(30, base_ts=base)
    ck_produce_samples(
        ck_producer(broker.bootstrap, {"linger.ms": 0, "batch.num.messages": 7}), topic_name, sent
    )
    c = ck_consumer(broker.bootstrap)
    try:
        # ListOffsets by timestamp: the first offset whose timestamp >= the asked one.
        tps = c.offsets_for_times(
            [TopicPartition(topic_name, 0, sent[11].timestamp - 1)], timeout=15
        )
        assert tps[0].offset == 11
        tps = c.offsets_for_times(
            [TopicPartition(topic_name, 0, sent[-1].timestamp + 1)], timeout=15
        )
        assert tps[0].offset in (-1, 30), "past the newest timestamp: no offset (or the log end)"
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=15)
        assert (low, high) == (0, 30)
    finally:
        c.close()
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.max_timestamp()) == 29
    got = ck_read_to_end(broker.bootstrap, topic_name, start=17)
    assert_same_records(got, sent[17:], first_offset=17)


def test_beginning_of_empty_topic_is_end(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, partitions=3)
    assert ck_read_to_end(broker.bootstrap, topic_name, range(3), start=OFFSET_BEGINNING) == []
