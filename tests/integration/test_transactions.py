"""Transactions (KIP-98) end to end: an unmodified confluent-kafka transactional producer
against one kavka broker process; read_committed and read_uncommitted consumers see what
Kafka's would (committed records, aborted ones hidden, nothing past the last stable offset),
and a second producer with the same transactional.id fences the first."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from tests.integration.helpers import (
    CK_COMMON,
    ck_admin,
    ck_create_topic,
    ck_read_to_end,
    unique,
)
from tests.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
        **CK_COMMON,
    })


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    recs = ck_read_to_end(bootstrap, topic, (0, 1), conf={"isolation.level": isolation})
    return sorted(r.value for r in recs if r.value is not None)


@pytest.fixture
def topic(broker) -> str:  # noqa: ANN001
    name = unique("tx")
    ck_create_topic(ck_admin(broker.bootstrap), name, partitions=2)
    return name


def test_commit_abort_and_read_committed(broker, topic):  # noqa: ANN001
    p = _txn_producer(broker.bootstrap, unique("txid"))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)

    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)

    committed = [b"c0", b"c1", b"c2", b"c3"]
    assert _values(broker.bootstrap, topic, "read_committed") == committed
    assert _values(broker.bootstrap, topic, "read_uncommitted") == sorted(committed + [b"a0", b"a1", b"a2", b"a3"])

    # Still usable after an abort: a third transaction commits.
    p.begin_transaction()
    p.produce(topic, value=b"z", partition=0)
    p.commit_transaction(30)
    assert _values(broker.bootstrap, topic, "read_committed") == committed + [b"z"]


def test_open_transaction_is_not_visible_to_read_committed(broker, topic):  # noqa: ANN001
    p = _txn_producer(broker.bootstrap, unique("txid"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    assert p.flush(30) == 0  # on the log, not committed: the last stable offset stays before it
    assert _values(broker.bootstrap, topic, "read_uncommitted") == [b"open"]
    assert _values(broker.bootstrap, topic, "read_committed") == []
    p.commit_transaction(30)
    assert _values(broker.bootstrap, topic, "read_committed") == [b"open"]


def test_same_transactional_id_fences_the_first_producer(broker, topic):  # noqa: ANN001
    txn_id = unique("txid")
    first = _txn_producer(broker.bootstrap, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, value=b"first", partition=0)
    assert first.flush(30) == 0

    second = _txn_producer(broker.bootstrap, txn_id)
    second.init_transactions(60)  # aborts the first's open transaction, bumps the epoch

    with pytest.raises(KafkaException) as info:
        first.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err

    second.begin_transaction()
    second.produce(topic, value=b"second", partition=1)
    second.commit_transaction(30)
    deadline = time.monotonic() + 20
    while True:  # the first's abort markers are written by the coordinator as it fences
        got = _values(broker.bootstrap, topic, "read_committed")
        if got == [b"second"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got == [b"second"]
    assert _values(broker.bootstrap, topic, "read_uncommitted") == [b"first", b"second"]


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_is_served(broker, topic, version):  # noqa: ANN001
    """WriteTxnMarkers (what a coordinator on another broker would send), v0 (not flexible) and
    v1 as Kafka 3.9: a marker for a producer with no open transaction is written (Kafka's empty
    transaction); an unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION."""
    req_cls = api.request_schema(ApiKey.WRITE_TXN_MARKERS, version)
    marker = nested(req_cls, "WritableTxnMarker")
    mtopic = nested(req_cls, "WritableTxnMarkerTopic")
    with RawClient(broker.port) as rc:
        resp = rc.call(ApiKey.WRITE_TXN_MARKERS, version, make(req_cls, markers=(
            make(marker, producer_id=123456789 + version, producer_epoch=0, transaction_result=False,
                 coordinator_epoch=0, topics=(make(mtopic, name=topic, partition_indexes=(1,)),
                                              make(mtopic, name="no-such-topic", partition_indexes=(0,)))),
        )))
    got = {(t.name, q.partition_index): q.error_code for m in resp.markers for t in m.topics for q in t.partitions}
    assert got == {(topic, 1): ErrorCode.none, ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
    assert _values(broker.bootstrap, topic, "read_uncommitted") == []  # a control batch only


def test_transaction_over_partitions_led_by_three_brokers(tmp_path):  # noqa: ANN001
    """The coordinator sends WriteTxnMarkers to the leaders of partitions led elsewhere."""
    from tests.broker_harness import Cluster

    cluster = Cluster(tmp_path, 3, overrides={"transaction.state.log.num.partitions": "3"}).start()
    try:
        admin = ck_admin(cluster.bootstrap)
        name = unique("tx3")
        ck_create_topic(admin, name, partitions=6)  # replication factor 1: leaders on every broker
        leaders = {p.leader for p in admin.list_topics(name, timeout=10).topics[name].partitions.values()}
        assert len(leaders) == 3

        p = _txn_producer(cluster.bootstrap, unique("txid"))
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce(name, value=b"c%d" % i, partition=i)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(6):
            p.produce(name, value=b"a%d" % i, partition=i)
        p.flush(30)
        p.abort_transaction(30)
        # Visible to read_committed only once the abort markers closed the aborted transaction
        # on every partition (else the last stable offset stays before it).
        p.begin_transaction()
        for i in range(6):
            p.produce(name, value=b"z%d" % i, partition=i)
        p.commit_transaction(30)

        parts = tuple(range(6))
        committed = sorted(r.value for r in ck_read_to_end(cluster.bootstrap, name, parts,
                                                         conf={"isolation.level": "read_committed"}))
        assert committed == [b"c%d" % i for i in range(6)] + [b"z%d" % i for i in range(6)]
        everything = ck_read_to_end(cluster.bootstrap, name, parts, conf={"isolation.level": "read_uncommitted"})
        assert len(everything) == 18
    finally:
        cluster.stop()
