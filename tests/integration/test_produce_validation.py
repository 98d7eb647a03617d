"""Kafka's per-record produce checks on a real broker (issue 10 item 2): error codes, timestamps,
maxTimestamp recomputed from the records, topic compression.type, zstd below Produce v7."""

from __future__ import annotations

import datetime
import struct
import time

from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch, compute_crc, decode_batch
from tests.integration.helpers import (
    batch_codecs,
    ck_admin,
    ck_create_topic,
    ck_list_offset,
    ck_producer,
    ck_read_to_end,
    segment_files,
)
from tests.raw_client import raw_call


def _produce_raw(broker, topic: str, records: bytes, *, version: int = 9):
    """One Produce request with `records` for partition 0; returns that partition's answer."""
    req_cls = api.request_schema(0, version)
    topic_cls = nested(req_cls, "TopicProduceData")
    part_cls = nested(req_cls, "PartitionProduceData")
    req = make(
        req_cls,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(make(topic_cls, name=topic, partition_data=(make(part_cls, index=0, records=records),)),),
    )
    return raw_call(broker, 0, version, req).responses[0].partition_responses[0]


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def _now() -> int:
    return int(time.time() * 1000)


def test_malformed_inner_record_is_invalid_record_and_not_appended(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name)
    good = bytearray(build_batch([(_now(), b"k", b"value")]))
    # The record's value length varint (last field before headers) claims 50 bytes: the batch
    # passes its CRC once recomputed but its record no longer parses.
    value_len_pos = good.index(b"value") - 1
    good[value_len_pos] = 100  # zigzag(50)
    part = _produce_raw(broker, topic_name, _with_crc(good))
    assert part.error_code == ErrorCode.invalid_record
    assert part.record_errors and part.record_errors[0].batch_index == 0
    assert ck_list_offset(ck_admin(broker.bootstrap), topic_name, 0, _latest()) == 0


def test_keyless_record_in_compacted_topic_is_invalid_record(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, config={"cleanup.policy": "compact"})
    part = _produce_raw(broker, topic_name, build_batch([(_now(), None, b"no key")]))
    assert part.error_code == ErrorCode.invalid_record
    assert "without key" in (part.error_message or "")
    ok = _produce_raw(broker, topic_name, build_batch([(_now(), b"k", b"keyed")]))
    assert ok.error_code == ErrorCode.none and ok.base_offset == 0


def test_timestamp_out_of_range_is_invalid_timestamp(broker, topic_name):
    ck_create_topic(
        ck_admin(broker.bootstrap),
        topic_name,
        config={
            "message.timestamp.after.max.ms": "60000",
            "message.timestamp.before.max.ms": "3600000",
        },
    )
    future = _produce_raw(broker, topic_name, build_batch([(_now() + 3_600_000, b"k", b"v")]))
    assert future.error_code == ErrorCode.invalid_timestamp
    past = _produce_raw(broker, topic_name, build_batch([(_now() - 86_400_000, b"k", b"v")]))
    assert past.error_code == ErrorCode.invalid_timestamp
    now = _produce_raw(broker, topic_name, build_batch([(_now(), b"k", b"v")]))
    assert now.error_code == ErrorCode.none
    # With librdkafka: the delivery report carries the error.
    errors = []
    p = ck_producer(broker.bootstrap, {"message.timeout.ms": 10000, "retries": 0})
    p.produce(
        topic_name,
        b"late",
        timestamp=_now() - 86_400_000,
        on_delivery=lambda e, m: errors.append(e),
    )
    p.flush(15)
    assert (
        errors and errors[0] is not None and errors[0].code() == ErrorCode.invalid_timestamp.value
    )


def _latest():
    from confluent_kafka.admin import OffsetSpec

    return OffsetSpec.latest()


def test_batch_with_max_timestamp_minus_one_is_found_by_timestamp(broker, topic_name):
    """Older Go clients send maxTimestamp -1: the broker recomputes it from the records."""
    from confluent_kafka.admin import OffsetSpec

    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name)
    t0 = _now() - 10_000
    batch = bytearray(
        build_batch([(t0, b"a", b"1"), (t0 + 5000, b"b", b"2"), (t0 + 2000, b"c", b"3")])
    )
    struct.pack_into(">q", batch, 35, -1)
    part = _produce_raw(broker, topic_name, _with_crc(batch))
    assert part.error_code == ErrorCode.none
    # The first record at or after t0+3000 is offset 1 (t0+5000); without the fix the time index
    # is empty and the answer is -1.
    assert ck_list_offset(admin, topic_name, 0, OffsetSpec.for_timestamp(t0 + 3000)) == 1
    stored = segment_files(broker.log_dirs[0], topic_name)[0].read_bytes()
    header, _ = decode_batch(stored)
    assert header.max_timestamp == t0 + 5000


def test_topic_compression_type_recompresses(broker, topic_name):
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, topic_name, config={"compression.type": "zstd"})
    p = ck_producer(broker.bootstrap, {"compression.type": "gzip", "linger.ms": 50})
    sent = [(f"k{i}".encode(), f"value {i} ".encode() * 20) for i in range(200)]
    for k, v in sent:
        p.produce(topic_name, v, key=k)
    assert p.flush(15) == 0
    log_file = segment_files(broker.log_dirs[0], topic_name)[0]
    codecs = batch_codecs(log_file)
    assert codecs and set(codecs) == {4}
    got = ck_read_to_end(broker.bootstrap, topic_name)
    assert [(r.key, r.value) for r in got] == sent
    assert [r.offset for r in got] == list(range(200))


def test_zstd_below_produce_v7_is_unsupported_compression_type(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name)
    zstd_batch = build_batch([(_now(), b"k", b"v" * 100)], compression=4)
    assert (
        _produce_raw(broker, topic_name, zstd_batch, version=6).error_code
        == ErrorCode.unsupported_compression_type
    )
    assert _produce_raw(broker, topic_name, zstd_batch, version=7).error_code == ErrorCode.none
