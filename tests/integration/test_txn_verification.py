"""KIP-890 part 1, the coordinator side: AddPartitionsToTxn v4/v5, the broker-to-broker form
(batched over transactions, each possibly `verify_only`), against real broker processes driven
by hand-built requests (tests/raw_client.py).

- verify_only answers NONE for a partition already in the producer's ongoing transaction and
  INVALID_TXN_STATE (v4) / TRANSACTION_ABORTABLE (v5) for one that is not, adding nothing;
  a stale producer epoch is PRODUCER_FENCED, an unknown transactional id
  INVALID_PRODUCER_ID_MAPPING; without verify_only the partitions are added (as v0-v3).
- v4+ needs ClusterAction on the Cluster (Kafka: only brokers send it): a client principal
  without it gets CLUSTER_AUTHORIZATION_FAILED, and passes once it is granted.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import ResourceType as CkResourceType
from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch
from tests.broker_harness import BrokerProcess, Cluster, free_port
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, unique
from tests.raw_client import RawClient
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(120)


def _init(c: RawClient, txn_id: str) -> tuple[int, int]:
    """FindCoordinator (its first lookup creates __transaction_state), then InitProducerId."""
    def once() -> Any:
        c.call(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=(txn_id,))
        r = c.call(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=txn_id, transaction_timeout=timedelta(seconds=60),
                   producer_id=-1, producer_epoch=-1)
        return r if r.error_code == ErrorCode.none else None

    r = wait_until(once, timeout=30, message="InitProducerId once the coordinator is loaded")
    return int(r.producer_id), int(r.producer_epoch)


def _add_v3(c: RawClient, txn_id: str, pid: int, epoch: int, topic: str, parts: tuple[int, ...]) -> set[int]:
    cls = api.request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, make(
        cls, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(make(nested(cls, "AddPartitionsToTxnTopic"), name=topic, partitions=parts),)))
    return {int(p.partition_error_code) for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def _batched(version: int, txns: list[tuple[str, int, int, bool, str, tuple[int, ...]]]) -> Any:
    cls = api.request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    txn_cls, topic_cls = nested(cls, "AddPartitionsToTxnTransaction"), nested(cls, "AddPartitionsToTxnTopic")
    return make(cls, transactions=tuple(
        make(txn_cls, transactional_id=t, producer_id=pid, producer_epoch=epoch, verify_only=verify,
             topics=(make(topic_cls, name=topic, partitions=parts),))
        for t, pid, epoch, verify, topic, parts in txns))


def _results(resp: Any) -> dict[tuple[str, int], ErrorCode]:
    return {(r.transactional_id, p.partition_index): ErrorCode(p.partition_error_code)
            for r in resp.results_by_transaction for t in r.topic_results for p in t.results_by_partition}


def test_verify_only_and_batched_add(broker):  # noqa: ANN001
    topic = unique("kip890")
    ck_create_topic(ck_admin(broker.bootstrap), topic, partitions=3)
    a, b, ghost = unique("txa"), unique("txb"), unique("ghost")
    with RawClient(broker.port, timeout=20) as c:
        pa, ea = _init(c, a)
        pb, eb = _init(c, b)
        assert _add_v3(c, a, pa, ea, topic, (0,)) == {ErrorCode.none}

        req = [(a, pa, ea, True, topic, (0, 1)),  # p0 is in a's transaction, p1 is not
               (b, pb, eb, True, topic, (0,)),  # b has no transaction open
               (ghost, pa, ea, True, topic, (0,)),  # never initialised
               (a, pa, ea - 1 if ea > 0 else ea + 1, True, topic, (0,))]  # another epoch
        v4 = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, _batched(4, req[:3]))
        assert v4.error_code == ErrorCode.none
        assert _results(v4) == {
            (a, 0): ErrorCode.none, (a, 1): ErrorCode.invalid_txn_state,
            (b, 0): ErrorCode.invalid_txn_state,
            (ghost, 0): ErrorCode.invalid_producer_id_mapping,
        }
        v5 = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 5, _batched(5, req[:2]))
        assert _results(v5) == {(a, 0): ErrorCode.none, (a, 1): ErrorCode.transaction_abortable,
                                (b, 0): ErrorCode.transaction_abortable}
        fenced = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, _batched(4, req[3:]))
        assert _results(fenced) == {(a, 0): ErrorCode.producer_fenced}

        # Without verify_only, v4 adds (b's transaction starts, a gains p1); verify then says NONE.
        added = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, _batched(4, [
            (a, pa, ea, False, topic, (1,)), (b, pb, eb, False, topic, (2,)), (a + "x", pa, ea, False, "nope", (0,))]))
        assert _results(added) == {(a, 1): ErrorCode.none, (b, 2): ErrorCode.none,
                                   (a + "x", 0): ErrorCode.unknown_topic_or_partition}
        again = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, _batched(4, [
            (a, pa, ea, True, topic, (0, 1)), (b, pb, eb, True, topic, (2,))]))
        assert set(_results(again).values()) == {ErrorCode.none}


def test_v4_needs_cluster_action(tmp_path):  # noqa: ANN001
    plain, sasl = free_port(), free_port()
    user, pw = "client", "client-secret"
    b = BrokerProcess(tmp_path / "secured", port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{pw}";',
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS",
    })
    b.format()
    b.start()
    try:
        topic = unique("kip890acl")
        ck_create_topic(ck_admin(b.bootstrap), topic, partitions=1)
        txn = unique("tx")
        with RawClient(b.port, timeout=20) as su:
            pid, epoch = _init(su, txn)
            assert _add_v3(su, txn, pid, epoch, topic, (0,)) == {ErrorCode.none}
        req = _batched(4, [(txn, pid, epoch, True, topic, (0,))])

        def as_client() -> Any:
            with RawClient(sasl, timeout=20) as c:
                c.sasl_plain(user, pw)
                return c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)

        refused = as_client()
        assert refused.error_code == ErrorCode.cluster_authorization_failed
        assert refused.results_by_transaction == ()

        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        acl = AclBinding(CkResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL, f"User:{user}", "*",
                         AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
        admin.create_acls([acl], request_timeout=10)[acl].result(timeout=15)
        allowed = wait_until(lambda: (lambda r: r if r.error_code == ErrorCode.none else None)(as_client()),
                             timeout=15, message="v4 accepted once ClusterAction is granted")
        # No Write on the transactional id or the topic is needed from a broker.
        assert _results(allowed) == {(txn, 0): ErrorCode.none}
    finally:
        assert b.stop() == 0, b.log_text()


# ---------------------------------------------------------------- the leader side


def _produce_txn_batch(c: RawClient, txn_id: str, topic: str, pid: int, epoch: int, partition: int = 0) -> ErrorCode:
    cls = api.request_schema(ApiKey.PRODUCE, 9)
    # A current timestamp: a batch stamped in 1970 alone in its segment is deleted by retention
    # (the harness checks every second), and the hanging transaction with it.
    batch = build_batch([(int(time.time() * 1000), None, b"stray")], producer_id=pid, producer_epoch=epoch,
                        base_sequence=0, is_transactional=True)
    r = c.call(ApiKey.PRODUCE, 9, make(cls, transactional_id=txn_id, acks=-1, timeout=timedelta(seconds=10),
                                      topic_data=(make(nested(cls, "TopicProduceData"), name=topic, partition_data=(
                                          make(nested(cls, "PartitionProduceData"), index=partition, records=batch),)),)))
    return ErrorCode(r.responses[0].partition_responses[0].error_code)


_NOT_READY = {ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available}


def _produce_when_led(c: RawClient, txn_id: str, topic: str, pid: int, epoch: int, partition: int = 0) -> ErrorCode:
    """The answer to the stray batch once the partition's leader serves it (a topic just created
    may not be led yet)."""
    answers: list[ErrorCode] = []

    def once() -> bool:
        answers.append(_produce_txn_batch(c, txn_id, topic, pid, epoch, partition))
        return answers[-1] not in _NOT_READY

    wait_until(once, timeout=20, message=f"the partition led (answers {answers[-3:]})")
    return answers[-1]


def _read_committed_end(c: RawClient, topic: str) -> int:
    """ListOffsets LATEST with isolation read_committed: the last stable offset."""
    cls = api.request_schema(ApiKey.LIST_OFFSETS, 7)
    r = c.call(ApiKey.LIST_OFFSETS, 7, make(cls, replica_id=-1, isolation_level=1, topics=(
        make(nested(cls, "ListOffsetsTopic"), name=topic, partitions=(
            make(nested(cls, "ListOffsetsPartition"), partition_index=0, timestamp=-1),)),)))
    p = r.topics[0].partitions[0]
    assert p.error_code == ErrorCode.none
    return int(p.offset)


@pytest.mark.parametrize("verification", [True, False], ids=["verification-on", "verification-off"])
def test_stray_transactional_produce_cannot_hang_the_partition(tmp_path, verification):  # noqa: ANN001
    """A transactional batch from a producer whose transaction does not include the partition
    (no AddPartitionsToTxn: a produce arriving after an abort, say) is refused INVALID_TXN_STATE
    and the last stable offset keeps moving. With the verification off the batch opens a
    transaction the coordinator never ends: read_committed is stuck before it."""
    b = BrokerProcess(tmp_path / "b", overrides={
        "transaction.partition.verification.enable": str(verification).lower()})
    b.format()
    b.start()
    try:
        topic = unique("stray")
        ck_create_topic(ck_admin(b.bootstrap), topic, partitions=1)
        txn = unique("tx")
        with RawClient(b.port, timeout=20) as c:
            pid, epoch = _init(c, txn)
            error = _produce_when_led(c, txn, topic, pid, epoch)
            plain = Producer({"bootstrap.servers": b.bootstrap, **CK_COMMON})
            plain.produce(topic, value=b"after", partition=0)
            assert plain.flush(30) == 0
            if verification:
                assert error == ErrorCode.invalid_txn_state, error
                wait_until(lambda: _read_committed_end(c, topic) == 1, timeout=15,
                           message="the last stable offset past the plain record")
                # A dynamic broker config, as in Kafka: turned off at run time, the stray batch goes in.
                admin = ck_admin(b.bootstrap)
                res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
                    "transaction.partition.verification.enable", "false", incremental_operation=AlterConfigOpType.SET)])
                for f in admin.incremental_alter_configs([res]).values():
                    f.result(timeout=15)
                wait_until(lambda: _produce_txn_batch(c, txn, topic, pid, epoch) == ErrorCode.none, timeout=15,
                           message="the stray batch accepted once the verification is off")
                plain.produce(topic, value=b"later", partition=0)
                assert plain.flush(30) == 0
                assert _read_committed_end(c, topic) == 1  # now stuck before the stray batch (offset 1)
            else:
                assert error == ErrorCode.none, error
                assert _read_committed_end(c, topic) == 0  # the hanging transaction
    finally:
        assert b.stop() == 0, b.log_text()


def test_leader_asks_the_coordinator_on_another_broker(tmp_path):  # noqa: ANN001
    """Three brokers; the leader of the partition is not the transaction coordinator, so the
    verification is an AddPartitionsToTxn v4 between brokers: refused before the partition is
    added to the transaction, accepted after."""
    cluster = Cluster(tmp_path, 3, overrides={"transaction.state.log.num.partitions": "1"}).start()
    try:
        admin = ck_admin(cluster.bootstrap)
        topic, txn = unique("stray3"), unique("tx")
        ck_create_topic(admin, topic, partitions=6)  # replication factor 1: leaders on every broker

        def coordinator() -> int | None:
            with RawClient(cluster.nodes[1].port, timeout=20) as c:
                co = c.call(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=(txn,)).coordinators[0]
                return int(co.node_id) if co.error_code == ErrorCode.none else None

        cid = wait_until(coordinator, timeout=30, message="the transaction coordinator")
        leaders = wait_until(lambda: (lambda ls: ls if all(v >= 0 for v in ls.values()) else None)(
            {i: p.leader for i, p in admin.list_topics(topic, timeout=10).topics[topic].partitions.items()}),
            timeout=30, message="every partition led")
        part, leader = next((i, lead) for i, lead in sorted(leaders.items()) if lead != cid)
        with RawClient(cluster.nodes[cid].port, timeout=20) as co, RawClient(cluster.nodes[leader].port, timeout=20) as lc:
            pid, epoch = _init(co, txn)
            assert _produce_when_led(lc, txn, topic, pid, epoch, part) == ErrorCode.invalid_txn_state
            assert _add_v3(co, txn, pid, epoch, topic, (part,)) == {ErrorCode.none}
            assert _produce_txn_batch(lc, txn, topic, pid, epoch, part) == ErrorCode.none
    finally:
        cluster.stop()
