"""Transactions across crashes, with real broker processes:

- a broker killed (kill -9) with an open transaction and an aborted one restarts with the same
  last stable offset and aborted-transaction index (read_committed sees the same records), and
  its reloaded coordinator lets the producer commit the open transaction;
- the transaction coordinator killed in the middle of a commit (its PrepareCommit is in
  `__transaction_state`, no marker written yet: kavka.faults' crash point
  "txn-before-commit-markers") on a 3-broker cluster: the coordinator that takes over completes
  the commit, and every record is visible to read_committed exactly once.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from kavka.coordinator.records import partition_for
from kavka.faults import CRASH_POINT_ENV, ENABLE_KEY
from tests.broker_harness import Cluster
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_read_to_end, unique

pytestmark = pytest.mark.timeout(240)


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                     "linger.ms": 5, **CK_COMMON})


def _end(bootstrap: str, topic: str, parts: tuple[int, ...], isolation: IsolationLevel) -> dict[int, int]:
    admin = ck_admin(bootstrap)  # kept alive until the answers are in
    futs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in parts},
                              isolation_level=isolation, request_timeout=20)
    return {tp.partition: f.result(20).offset for tp, f in futs.items()}


def _committed(bootstrap: str, topic: str, parts: tuple[int, ...]) -> list[bytes]:
    return sorted(r.value for r in ck_read_to_end(bootstrap, topic, parts, conf={"isolation.level": "read_committed"}))


def test_broker_killed_with_open_transaction_recovers_lso_and_aborted_index(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    b = broker_factory(overrides={"auto.create.topics.enable": "false"}).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name)
    p = _producer(b.bootstrap, unique("rec"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"c0", partition=0)
    p.commit_transaction(30)  # c0 @0, marker @1
    p.begin_transaction()
    p.produce(topic_name, value=b"a0", partition=0)
    p.flush(30)
    p.abort_transaction(30)  # a0 @2, marker @3
    p.begin_transaction()
    p.produce(topic_name, value=b"open", partition=0)
    assert p.flush(30) == 0  # open @4: the LSO stays at 4
    before = (_end(b.bootstrap, topic_name, (0,), IsolationLevel.READ_COMMITTED),
              _committed(b.bootstrap, topic_name, (0,)))
    assert before == ({0: 4}, [b"c0"])

    b.kill()
    b.start()  # recovery: producer state from the snapshot / log, the .txnindex, the coordinator's log
    assert _end(b.bootstrap, topic_name, (0,), IsolationLevel.READ_COMMITTED) == {0: 4}
    assert _committed(b.bootstrap, topic_name, (0,)) == [b"c0"]  # a0 still hidden: the aborted index survived

    p.commit_transaction(60)  # the reloaded coordinator knows the open transaction
    deadline = time.monotonic() + 20
    while _end(b.bootstrap, topic_name, (0,), IsolationLevel.READ_COMMITTED) != {0: 6}:
        assert time.monotonic() < deadline, "the commit marker was never written"
        time.sleep(0.1)
    assert _committed(b.bootstrap, topic_name, (0,)) == [b"c0", b"open"]


def test_coordinator_killed_mid_commit_completes_it_exactly_once(tmp_path) -> None:  # noqa: ANN001
    cluster = Cluster(tmp_path / "c", 3, overrides={
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
    }, node_overrides={1: {ENABLE_KEY: "true"}})
    # Node 1 kills itself as a commit's markers are about to be written.
    for n in cluster.nodes.values():
        if not n._formatted:
            n.format(cluster.cluster_id)
    for i, n in cluster.nodes.items():
        n.start(wait=False, env={CRASH_POINT_ENV: "txn-before-commit-markers"} if i == 1 else None)
    for n in cluster.nodes.values():
        n.wait_ready(60)
    try:
        admin = ck_admin(cluster.bootstrap)
        warm = _producer(cluster.bootstrap, unique("warm"))
        warm.init_transactions(60)  # creates __transaction_state
        del warm
        deadline = time.monotonic() + 30
        while True:
            md = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
            leaders = {p.id: p.leader for p in md.partitions.values()}
            if len(leaders) == 3 and all(v >= 0 for v in leaders.values()):
                break
            assert time.monotonic() < deadline, leaders
            time.sleep(0.2)
        on_node1 = [p for p, leader in leaders.items() if leader == 1]
        assert on_node1, f"node 1 leads no __transaction_state partition: {leaders}"
        txn_id = next(t for t in (f"mid-commit-{i}" for i in range(10_000)) if partition_for(t, 3) in on_node1)

        topic = unique("mid")
        ck_create_topic(admin, topic, partitions=3, replication_factor=3)
        p = _producer(cluster.bootstrap, txn_id)
        p.init_transactions(60)
        p.begin_transaction()
        for q in range(3):
            p.produce(topic, value=b"v%d" % q, partition=q)
        p.commit_transaction(90)  # node 1 dies after PrepareCommit; the client retries on the new coordinator
        cluster.nodes[1].proc.wait(30)  # it did die at the crash point
        assert any("crash point txn-before-commit-markers reached" in line for line in cluster.nodes[1].output)

        survivors = ",".join(cluster.nodes[i].bootstrap for i in (2, 3))
        deadline = time.monotonic() + 60
        while _committed(survivors, topic, (0, 1, 2)) != [b"v0", b"v1", b"v2"]:
            assert time.monotonic() < deadline, _committed(survivors, topic, (0, 1, 2))
            time.sleep(0.2)
        assert _end(survivors, topic, (0, 1, 2), IsolationLevel.READ_COMMITTED) == \
            _end(survivors, topic, (0, 1, 2), IsolationLevel.READ_UNCOMMITTED)  # no transaction left open

        # The producer goes on with the new coordinator; node 1 comes back without the crash point.
        cluster.nodes[1].start(timeout=60)
        p.begin_transaction()
        p.produce(topic, value=b"after", partition=0)
        p.commit_transaction(60)
        got = _committed(cluster.bootstrap, topic, (0, 1, 2))
        assert got == [b"after", b"v0", b"v1", b"v2"], got
    finally:
        cluster.stop()
