"""Idempotent producers across connections cut after the append, before the answer.

The broker is started with KAVKA_FAULT_CUT_PRODUCE_EVERY=N: every Nth Produce
is written to the log and then its connection is closed unanswered. An
idempotent producer (confluent-kafka, enable.idempotence=true) retries those
batches with the same sequence numbers; the broker must answer the retries
with the original offsets, so the partition ends with every record exactly
once, in order. The broker restarts midway, so the dedup state must also
come back from disk (producer-state snapshots).
"""

from __future__ import annotations

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
    b: BrokerProcess = broker_factory(overrides={"log.segment.bytes": "4096"}).start()
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
