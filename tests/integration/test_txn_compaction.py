"""Compaction of a transactional topic in a running broker, written by an unmodified
confluent-kafka transactional producer: aborted records go, markers go once their transaction's
data is gone and delete.retention.ms has passed, and a read_committed consumer sees exactly the
committed records, compacted, at every step (Kafka's LogCleaner with CleanedTransactionMetadata)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kavka.protocol.records import iter_batches
from tests.broker_harness import BrokerProcess
from tests.integration.helpers import (
    CK_COMMON,
    ck_admin,
    ck_create_topic,
    ck_read_to_end,
    partition_dir,
    unique,
)
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(180)
KEYS = [b"k0", b"k1", b"k2", b"k3"]
PAD = 400


def _value(tag: str) -> bytes:
    return tag.encode().ljust(PAD, b".")


def _closed_markers(b: BrokerProcess, topic: str) -> list[int]:
    """Base offsets of the control batches in the topic's closed segments, from the files."""
    logs = sorted(partition_dir(b.log_dirs[0], topic).glob("*.log"))
    out = []
    for path in logs[:-1]:
        out += [h.base_offset for _, h in iter_batches(path.read_bytes()) if h.is_control]
    return out


def test_transactional_compacted_topic_drops_aborted_data_then_markers(broker_factory) -> None:  # noqa: ANN001
    b: BrokerProcess = broker_factory(overrides={"log.cleaner.backoff.ms": "200"}).start()
    topic = unique("txc")
    ck_create_topic(
        ck_admin(b.bootstrap),
        topic,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "1000",
        },
    )
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("txid"), "linger.ms": 5, **CK_COMMON})
    p.init_transactions(30)
    for r in range(6):  # rounds 1, 3, 5 abort; round 4 is the last committed value of k1..k3
        p.begin_transaction()
        for k in KEYS:
            p.produce(topic, key=k, value=_value(f"r{r}-{k.decode()}"))
        p.flush(30)
        if r % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, key=b"k0", value=_value("final-k0"))
    p.commit_transaction(30)
    aborted = {_value(f"r{r}-{k.decode()}") for r in (1, 3, 5) for k in KEYS}
    filler = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, **CK_COMMON})
    n = 0

    def settled() -> bool:
        nonlocal n
        committed = ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_committed"})
        values = [r.value for r in committed]
        assert not aborted & set(values), "read_committed saw an aborted record"
        latest = {r.key: r.value for r in committed if r.key in KEYS and r.value is not None}
        assert latest == {b"k0": _value("final-k0"), **{k: _value(f"r4-{k.decode()}") for k in KEYS[1:]}}
        compacted = sorted(r.value for r in committed if r.key in KEYS) == sorted(latest.values())
        uncommitted = {r.value for r in ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_uncommitted"})}
        # Only the markers of round 4 (k1..k3 still there) and of the final transaction remain.
        if compacted and not aborted & uncommitted and len(_closed_markers(b, topic)) == 2:
            return True
        # More dirty data for the next passes (a marker goes only on a pass after its horizon).
        for _ in range(3):
            filler.produce(topic, key=b"f%d" % (n % 5), value=_value(f"filler-{n}"))
            n += 1
        assert filler.flush(10) == 0
        return False

    wait_until(settled, 90, interval=0.5, message="aborted data and the spent markers gone")
    assert b.stop() == 0
    b.start()
    committed = ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_committed"})
    assert not aborted & {r.value for r in committed}
    assert {r.value for r in committed if r.key == b"k1"} == {_value("r4-k1")}
