"""Transaction operations (KIP-664) end to end: `kavka transactions` (list, describe,
describe-producers, find-hanging, abort) against real broker processes, with an unmodified
confluent-kafka transactional producer left in an open transaction, a hanging transaction written
with a raw Produce (a producer id the coordinator never saw, so nothing will ever end it), and
Kafka's authorization on a secured broker."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from kavka.client.admin import AdminClient
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch
from tests.broker_harness import KAVKA, BrokerProcess, free_port
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_read_to_end, unique
from tests.raw_client import RawClient
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(180)


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    # A wide terminal, so the table's column names are not wrapped.
    r = subprocess.run([*KAVKA, "transactions", *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "300"})
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def cli_json(*args: str) -> Any:
    return json.loads(cli(*args, "--json").stdout)


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                     "linger.ms": 5, **CK_COMMON})


def _open_transaction(bootstrap: str, topic: str, txn_id: str) -> Producer:
    """A producer inside a transaction with one record on partition 0, neither committed nor aborted."""
    p = _txn_producer(bootstrap, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    assert p.flush(30) == 0
    return p


def test_an_open_transaction_is_listed_described_and_its_producer_shown(broker):  # noqa: ANN001
    topic, txn_id = unique("txops"), unique("txops-id")
    ck_create_topic(ck_admin(broker.bootstrap), topic, partitions=2)
    b = ("--bootstrap-server", broker.bootstrap)
    p = _open_transaction(broker.bootstrap, topic, txn_id)

    listed = {t["transactional_id"]: t for t in cli_json("list", *b)}
    assert listed[txn_id]["state"] == "Ongoing" and listed[txn_id]["coordinator"] == broker.node_id

    d = cli_json("describe", *b, "--transactional-id", txn_id)
    assert d["state"] == "Ongoing" and d["topic_partitions"] == [f"{topic}-0"]
    assert d["transactional_id"] == txn_id and d["transaction_timeout_ms"] == 60000
    assert d["coordinator_id"] == broker.node_id and d["producer_id"] == listed[txn_id]["producer_id"]
    assert d["current_transaction_start_time_ms"] is not None and d["transaction_duration_ms"] >= 0

    producers = cli_json("describe-producers", *b, "--topic", topic, "--partition", "0")
    mine = [s for s in producers if s["producer_id"] == d["producer_id"]]
    assert len(mine) == 1 and mine[0]["current_transaction_start_offset"] == 0
    assert mine[0]["producer_epoch"] == d["producer_epoch"] and mine[0]["last_sequence"] == 0
    assert cli_json("describe-producers", *b, "--topic", topic, "--partition", "1") == []

    # The tables carry Kafka's column names.
    assert "TransactionState" in cli("list", *b).stdout
    assert "CurrentTransactionStartOffset" in cli("describe-producers", *b, "--topic", topic, "--partition", "0").stdout
    # Running for less than an hour: a one-hour duration filter leaves it out.
    assert txn_id not in {t["transactional_id"] for t in cli_json("list", *b, "--duration-filter", "3600000")}
    assert txn_id in {t["transactional_id"] for t in cli_json("list", *b, "--duration-filter", "0")}
    # Not hanging: its coordinator knows the partition is in the transaction.
    assert cli_json("find-hanging", *b, "--topic", topic, "--max-transaction-timeout", "0") == []

    p.commit_transaction(30)
    assert cli_json("describe", *b, "--transactional-id", txn_id)["state"] == "CompleteCommit"
    after = [s for s in cli_json("describe-producers", *b, "--topic", topic, "--partition", "0")
             if s["producer_id"] == d["producer_id"]]
    assert after[0]["current_transaction_start_offset"] is None and after[0]["latest_coordinator_epoch"] >= 0

    missing = cli("describe", *b, "--transactional-id", unique("nobody"), ok=False)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def _hanging_produce(port: int, topic: str, producer_id: int, txn_id: str) -> None:
    """A transactional batch from a producer id no coordinator knows (no AddPartitionsToTxn), last
    written an hour ago: the last stable offset stays before it until someone aborts it."""
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    batch = build_batch([(an_hour_ago, None, b"hanging")], producer_id=producer_id, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    cls = api.request_schema(ApiKey.PRODUCE, 9)
    req = make(cls, transactional_id=txn_id, acks=-1, timeout=timedelta(seconds=10), topic_data=(
        make(nested(cls, "TopicProduceData"), name=topic, partition_data=(
            make(nested(cls, "PartitionProduceData"), index=0, records=batch),)),))
    with RawClient(port) as c:
        part = c.call(ApiKey.PRODUCE, 9, req).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none and part.base_offset == 0


def _last_stable_offset(bootstrap: str, topic: str) -> int:
    with AdminClient(bootstrap) as admin:
        return admin.list_offsets({(topic, 0): "latest"}, isolation_level=1)[(topic, 0)].offset


@pytest.fixture(scope="module")
def unverified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that does not verify transactional produce (KIP-890 part 1 off): with it on, the
    hanging transaction these tests abort cannot be made -- its batch is refused INVALID_TXN_STATE
    (tests/integration/test_txn_verification.py)."""
    b = BrokerProcess(tmp_path_factory.mktemp("txnops-unverified"),
                      overrides={"transaction.partition.verification.enable": "false"}).start()
    yield b
    b.stop()


def test_find_hanging_and_abort(unverified):  # noqa: ANN001
    broker = unverified
    topic = unique("txhang")
    ck_create_topic(ck_admin(broker.bootstrap), topic, partitions=1)
    b = ("--bootstrap-server", broker.bootstrap)
    pid = 7_000_000_000 + int(time.time()) % 1_000_000
    _hanging_produce(broker.port, topic, pid, unique("hanging-id"))
    plain = Producer({"bootstrap.servers": broker.bootstrap, **CK_COMMON})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(30) == 0

    assert _last_stable_offset(broker.bootstrap, topic) == 0  # stuck before the hanging batch
    hanging = cli_json("find-hanging", *b, "--topic", topic)
    assert [(h["partition"], h["producer_id"], h["start_offset"]) for h in hanging] == [(0, pid, 0)]
    assert hanging[0]["coordinator_epoch"] == -1 and hanging[0]["duration_min"] >= 59
    assert [h["producer_id"] for h in cli_json("find-hanging", *b, "--broker-id", str(broker.node_id))] == [pid]
    # Younger than a two-hour maximum timeout: not (yet) a candidate.
    assert cli_json("find-hanging", *b, "--topic", topic, "--max-transaction-timeout", "120") == []
    assert "Duration(min)" in cli("find-hanging", *b, "--topic", topic).stdout

    wrong = cli("abort", *b, "--topic", topic, "--partition", "0", "--start-offset", "1", ok=False)
    assert wrong.returncode == 1 and "could not find any open transaction" in wrong.stderr
    cli("abort", *b, "--topic", topic, "--partition", "0", "--start-offset", "0")

    # The abort marker follows the record written after the hanging batch (offsets 0, 1; marker 2).
    assert wait_until(lambda: _last_stable_offset(broker.bootstrap, topic) == 3, timeout=15,
                      message="the last stable offset moves past the aborted transaction")
    committed = [r.value for r in ck_read_to_end(broker.bootstrap, topic, conf={"isolation.level": "read_committed"})]
    assert committed == [b"after"]
    assert cli_json("find-hanging", *b, "--topic", topic) == []
    states = cli_json("describe-producers", *b, "--topic", topic, "--partition", "0")
    assert [s["current_transaction_start_offset"] for s in states if s["producer_id"] == pid] == [None]


def test_abort_with_explicit_producer_id_epoch_and_coordinator_epoch(unverified):  # noqa: ANN001
    broker = unverified
    topic = unique("txhang2")
    ck_create_topic(ck_admin(broker.bootstrap), topic, partitions=1)
    b = ("--bootstrap-server", broker.bootstrap)
    pid = 8_000_000_000 + int(time.time()) % 1_000_000
    _hanging_produce(broker.port, topic, pid, unique("hanging-id"))
    assert _last_stable_offset(broker.bootstrap, topic) == 0
    missing = cli("abort", *b, "--topic", topic, "--partition", "0", "--producer-id", str(pid), ok=False)
    assert missing.returncode == 1 and "--producer-epoch" in missing.stderr
    cli("abort", *b, "--topic", topic, "--partition", "0", "--producer-id", str(pid), "--producer-epoch", "0",
        "--coordinator-epoch", "-1")
    assert wait_until(lambda: _last_stable_offset(broker.bootstrap, topic) == 2, timeout=15,
                      message="the last stable offset moves past the aborted transaction")


# ---------------------------------------------------------------------- authorization


def _password(user: str) -> str:
    return f"pw-{user}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):  # noqa: ANN001
    plain, sasl = free_port(), free_port()
    users = ("alice", "bob")
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{u}="{_password(u)}"' for u in users) + ";")
    b = BrokerProcess(tmp_path_factory.mktemp("txnops-acl"), port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS",
    })
    b.format()
    b.start()
    b.sasl_port = sasl
    yield b
    assert b.stop() == 0, b.log_text()


def _as(b: BrokerProcess, user: str, key: int, version: int, request: Any) -> Any:
    with RawClient(b.sasl_port, timeout=20) as c:
        c.sasl_plain(user, _password(user))
        return c.call(key, version, request)


def _list_as(b: BrokerProcess, user: str) -> set[str]:
    cls = api.request_schema(ApiKey.LIST_TRANSACTIONS, 1)
    resp = _as(b, user, ApiKey.LIST_TRANSACTIONS, 1, make(cls, state_filters=(), producer_id_filters=(),
                                                            duration_filter=-1))
    assert resp.error_code == ErrorCode.none
    return {t.transactional_id for t in resp.transaction_states}


def test_an_unauthorized_principal_gets_kafkas_errors(secured, tmp_path):  # noqa: ANN001
    b = secured
    topic, txn_id = unique("txacl"), unique("txacl-id")
    admin = ck_admin(b.bootstrap)
    ck_create_topic(admin, topic, partitions=1)
    p = _open_transaction(b.bootstrap, topic, txn_id)

    dp = api.request_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    dp_req = make(dp, topics=(make(nested(dp, "TopicRequest"), name=topic, partition_indexes=(0,)),))
    part = _as(b, "alice", ApiKey.DESCRIBE_PRODUCERS, 0, dp_req).topics[0].partitions[0]
    assert part.error_code == ErrorCode.topic_authorization_failed and part.active_producers == ()

    dt = api.request_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    state = _as(b, "alice", ApiKey.DESCRIBE_TRANSACTIONS, 0, make(dt, transactional_ids=(txn_id,)))
    assert state.transaction_states[0].error_code == ErrorCode.transactional_id_authorization_failed

    # ListTransactions is never refused: the ids alice may not Describe are left out.
    assert txn_id not in _list_as(b, "alice")

    wm = api.request_schema(ApiKey.WRITE_TXN_MARKERS, 1)
    marker = make(nested(wm, "WritableTxnMarker"), producer_id=1, producer_epoch=0, transaction_result=False,
                  coordinator_epoch=0, topics=(make(nested(wm, "WritableTxnMarkerTopic"), name=topic,
                                                    partition_indexes=(0,)),))
    resp = _as(b, "alice", ApiKey.WRITE_TXN_MARKERS, 1, make(wm, markers=(marker,)))
    assert resp.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed

    for rt, name, op in ((ResourceType.TOPIC, topic, AclOperation.READ),
                         (ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.DESCRIBE)):
        acl = AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
        admin.create_acls([acl], request_timeout=10)[acl].result(timeout=15)

    def granted() -> bool:
        return txn_id in _list_as(b, "alice")

    wait_until(granted, timeout=15, message="alice lists the transaction once she may Describe it")
    assert txn_id not in _list_as(b, "bob")
    state = _as(b, "alice", ApiKey.DESCRIBE_TRANSACTIONS, 0, make(dt, transactional_ids=(txn_id,)))
    assert state.transaction_states[0].error_code == ErrorCode.none
    assert state.transaction_states[0].transaction_state == "Ongoing"
    part = _as(b, "alice", ApiKey.DESCRIBE_PRODUCERS, 0, dp_req).topics[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.active_producers[0].current_txn_start_offset == 0

    # The CLI as alice (--command-config): abort needs ClusterAction on the Cluster, which she lacks.
    props = tmp_path / "alice.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                     "org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="alice" password="{_password("alice")}";\n')
    s = ("--bootstrap-server", f"127.0.0.1:{b.sasl_port}", "--command-config", str(props))
    assert cli_json("describe", *s, "--transactional-id", txn_id)["state"] == "Ongoing"
    refused = cli("abort", *s, "--topic", topic, "--partition", "0", "--start-offset", "0", ok=False)
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    p.abort_transaction(30)


def _list_raw(port: int, version: int, **filters: Any) -> Any:
    cls = api.request_schema(ApiKey.LIST_TRANSACTIONS, version)
    with RawClient(port) as c:
        return c.call(ApiKey.LIST_TRANSACTIONS, version, make(cls, **{
            "state_filters": (), "producer_id_filters": (), "duration_filter": -1, "transactional_id_pattern": None,
            **filters}))


def test_list_transactions_filters_on_the_wire(broker):  # noqa: ANN001
    """State names (an unknown one is echoed back and ignored), producer ids and v2's
    TransactionalIdPattern, as Kafka's ListTransactions; DescribeProducers' partition errors."""
    topic, txn_id = unique("txlist"), unique("txlist-id")
    ck_create_topic(ck_admin(broker.bootstrap), topic, partitions=1)
    p = _open_transaction(broker.bootstrap, topic, txn_id)
    try:
        ongoing = _list_raw(broker.port, 1, state_filters=("Ongoing", "Bogus"))
        assert ongoing.error_code == ErrorCode.none and ongoing.unknown_state_filters == ("Bogus",)
        mine = [t for t in ongoing.transaction_states if t.transactional_id == txn_id]
        assert len(mine) == 1 and mine[0].transaction_state == "Ongoing"
        assert txn_id not in {t.transactional_id for t in _list_raw(broker.port, 1, state_filters=("Empty",))
                              .transaction_states}
        by_pid = _list_raw(broker.port, 0, producer_id_filters=(mine[0].producer_id,))
        assert [t.transactional_id for t in by_pid.transaction_states] == [txn_id]
        by_pattern = _list_raw(broker.port, 2, transactional_id_pattern=txn_id[:-3] + ".*")
        assert [t.transactional_id for t in by_pattern.transaction_states] == [txn_id]
        assert _list_raw(broker.port, 2, transactional_id_pattern=txn_id[:-3]).transaction_states == ()
        assert _list_raw(broker.port, 2, transactional_id_pattern="(").error_code == ErrorCode.invalid_regular_expression
    finally:
        p.abort_transaction(30)

    dp = api.request_schema(ApiKey.DESCRIBE_PRODUCERS, 0)
    with RawClient(broker.port) as c:
        resp = c.call(ApiKey.DESCRIBE_PRODUCERS, 0, make(dp, topics=(
            make(nested(dp, "TopicRequest"), name=topic, partition_indexes=(0, 5)),
            make(nested(dp, "TopicRequest"), name=unique("no-such-topic"), partition_indexes=(0,)))))
    codes = [(t.name == topic, q.partition_index, q.error_code) for t in resp.topics for q in t.partitions]
    assert codes == [(True, 0, ErrorCode.none), (True, 5, ErrorCode.unknown_topic_or_partition),
                     (False, 0, ErrorCode.unknown_topic_or_partition)]


def test_describe_producers_on_a_follower_and_off_the_replicas(tmp_path):  # noqa: ANN001
    """`describe-producers --broker-id` asks that broker's replica: a follower answers with the
    producers of the batches it replicated (Kafka's ReplicaManager.activeProducerState serves any
    hosted replica); a broker with no replica answers NOT_LEADER_OR_FOLLOWER."""
    from confluent_kafka.admin import NewTopic

    from tests.broker_harness import Cluster

    cluster = Cluster(tmp_path, 3).start()
    try:
        topic = unique("txlead")
        ck = ck_admin(cluster.bootstrap)  # kept referenced until the future resolves
        ck.create_topics([NewTopic(topic, 1, 2)], request_timeout=15)[topic].result(timeout=20)
        with AdminClient(cluster.bootstrap) as admin:
            part = wait_until(lambda: (lambda p: p if p.leader >= 0 and len(p.isr) == 2 else None)(
                admin.describe_topics([topic])[0].partitions[0]), timeout=30, message="a leader and a full ISR")
        follower = next(n for n in part.replicas if n != part.leader)
        outsider = next(n for n in (1, 2, 3) if n not in part.replicas)
        idempotent = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, **CK_COMMON})
        idempotent.produce(topic, value=b"x", partition=0)
        assert idempotent.flush(30) == 0
        b = ("--bootstrap-server", cluster.bootstrap)

        def on(node: int) -> list[Any]:
            return cli_json("describe-producers", *b, "--topic", topic, "--partition", "0", "--broker-id", str(node))

        on_leader = on(part.leader)
        assert len(on_leader) == 1 and on_leader[0]["last_sequence"] == 0
        assert on_leader[0]["current_transaction_start_offset"] is None
        wait_until(lambda: on(follower) == on_leader, timeout=15, message="the follower has replicated the batch")
        r = cli("describe-producers", *b, "--topic", topic, "--partition", "0", "--broker-id", str(outsider), ok=False)
        assert r.returncode == 1 and "NOT_LEADER_OR_FOLLOWER" in r.stderr
    finally:
        cluster.stop()
