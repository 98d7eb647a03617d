"""Idempotent producers across connections cut after the append, before the answer.

The broker is started with KAVKA_FAULT_CUT_PRODUCE_EVERY=N (and the test-only
kavka.test.fault.injection.enable): every Nth Produce
is written to the log and then its connection is closed unanswered. An
idempotent producer (confluent-kafka, enable.idempotence=true) retries those
batches with the same sequence numbers; the broker must answer the retries
with the original offsets, so the partition ends with every record exactly
once, in order. The broker restarts midway, so the dedup state must also
come back from disk (producer-state snapshots).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.broker_harness import BrokerProcess
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_read_to_end

RECORDS = 600


def _produce(b: BrokerProcess, topic: str, values: range) -> list[str]:
    errors: list[str] = []
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 25,
            "message.timeout.ms": 60000,
            **CK_COMMON,
        }
    )

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(str(err))

    for i in values:
        p.produce(topic, value=str(i).encode(), partition=0, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(90) == 0
    return errors


def test_cut_connections_leave_every_record_exactly_once_in_order(
    broker_factory, topic_name: str, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    monkeypatch.setenv("KAVKA_FAULT_CUT_PRODUCE_EVERY", "4")
    b: BrokerProcess = broker_factory(
        overrides={"log.segment.bytes": "4096", "kavka.test.fault.injection.enable": "true"}
    ).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name)
    assert _produce(b, topic_name, range(RECORDS // 2)) == []
    assert b.stop() == 0
    b.start()
    assert _produce(b, topic_name, range(RECORDS // 2, RECORDS)) == []
    cuts = b.log_text().count("fault injection")
    got = ck_read_to_end(b.bootstrap, topic_name)
    values = [int(r.value) for r in got]  # type: ignore[arg-type]
    assert values == list(range(RECORDS)), f"duplicates or gaps: {len(values)} records"
    assert [r.offset for r in got] == list(range(RECORDS))
    assert cuts >= 3, "the fault was not injected"


def test_bad_sequences_and_epochs_get_kafkas_errors_and_lose_nothing(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    from datetime import timedelta

    from kio.schema.errors import ErrorCode

    from kavka.client.connection import BlockingConnection
    from kavka.protocol.api import ApiKey
    from kavka.protocol.messages import make, nested
    from kavka.protocol.records import build_batch

    b: BrokerProcess = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name)
    with BlockingConnection("127.0.0.1", b.port) as conn:
        iv = conn.pick_version(ApiKey.INIT_PRODUCER_ID)
        init = conn.send(make(conn.request_class(ApiKey.INIT_PRODUCER_ID, iv), transactional_id=None,
                              transaction_timeout=timedelta(seconds=60), producer_id=-1, producer_epoch=-1))
        assert init.error_code == ErrorCode.none
        pid = init.producer_id
        pv = conn.pick_version(ApiKey.PRODUCE)
        cls = conn.request_class(ApiKey.PRODUCE, pv)

        def produce(epoch: int, seq: int, tag: str) -> tuple[ErrorCode, int]:
            now = int(time.time() * 1000)  # a recent timestamp: 0 would fall to retention at once
            batch = build_batch([(now, None, f"{tag}{i}".encode()) for i in range(2)],
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            req = make(cls, transactional_id=None, acks=-1, timeout=timedelta(seconds=10),
                       topic_data=(make(nested(cls, "TopicProduceData"), name=topic_name,
                                        partition_data=(make(nested(cls, "PartitionProduceData"), index=0, records=batch),)),))
            part = conn.send(req).responses[0].partition_responses[0]
            return part.error_code, part.base_offset

        assert produce(0, 0, "a") == (ErrorCode.none, 0)
        assert produce(0, 2, "b") == (ErrorCode.none, 2)
        assert produce(0, 2, "b") == (ErrorCode.none, 2)  # a retry: answered with its first offset
        assert produce(0, 7, "x")[0] == ErrorCode.out_of_order_sequence_number
        assert produce(1, 3, "x")[0] == ErrorCode.out_of_order_sequence_number  # a new epoch starts at 0
        assert produce(1, 0, "c") == (ErrorCode.none, 4)
        assert produce(0, 4, "x")[0] == ErrorCode.invalid_producer_epoch  # fenced
    values = [r.value for r in ck_read_to_end(b.bootstrap, topic_name)]
    assert values == [b"a0", b"a1", b"b0", b"b1", b"c0", b"c1"]
