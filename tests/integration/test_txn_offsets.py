"""Offsets in transactions (KIP-98 AddOffsetsToTxn + TxnOffsetCommit, KIP-447) end to end: an
unmodified confluent-kafka consume-transform-produce loop against kavka broker processes. The
group's offsets sent with send_offsets_to_transaction become its committed offsets when the
transaction commits, never when it aborts; while it is open an OffsetFetch asking for stable
offsets answers UNSTABLE_OFFSET_COMMIT and a plain one the old offset; a new group coordinator
(after the old one is killed) keeps the pending offsets and commits them on the marker."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_producer, unique
from tests.raw_client import RawClient
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(180)


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "transaction.timeout.ms": 60000, "linger.ms": 5, **CK_COMMON})


def _consumer(bootstrap: str, group: str, isolation: str = "read_committed") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, **CK_COMMON})


def _fill(bootstrap: str, topic: str, n: int) -> None:
    p = ck_producer(bootstrap)
    for i in range(n):
        p.produce(topic, value=b"in%d" % i, partition=0)
    assert p.flush(30) == 0


def _consume(c: Consumer, n: int) -> list[Any]:
    got: list[Any] = []

    def more() -> bool:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
        return len(got) >= n

    wait_until(more, timeout=60, interval=0, message=f"{n} input records")
    return got


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of `topic`-0 as a fresh consumer reads it (plain OffsetFetch)."""
    c = _consumer(bootstrap, group, "read_uncommitted")
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        c.close()


def _offset_fetch(port: int, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """(error code, committed offset) of `topic`-0 from OffsetFetch v8, from the group's coordinator."""
    cls = api.request_schema(ApiKey.OFFSET_FETCH, 8)
    req = make(cls, require_stable=require_stable, groups=(make(
        nested(cls, "OffsetFetchRequestGroup"), group_id=group,
        topics=(make(nested(cls, "OffsetFetchRequestTopics"), name=topic, partition_indexes=(0,)),)),))
    with RawClient(port) as rc:
        resp = rc.call(ApiKey.OFFSET_FETCH, 8, req)
    g = resp.groups[0]
    if g.error_code != ErrorCode.none:
        return int(g.error_code), -1
    part = g.topics[0].partitions[0]
    return int(part.error_code), int(part.committed_offset)


def _find_coordinator(port: int, group: str) -> int:
    """The group coordinator's node id as broker `port` answers FindCoordinator (-1 while none)."""
    with RawClient(port) as rc:
        resp = rc.call(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
    return int(resp.node_id) if resp.error_code == ErrorCode.none else -1


def _send_offsets(p: Producer, c: Consumer, topic: str, offset: int) -> None:
    p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], c.consumer_group_metadata(), 30)


@pytest.fixture
def topics(broker) -> tuple[str, str]:  # noqa: ANN001
    src, dst = unique("in"), unique("out")
    admin = ck_admin(broker.bootstrap)
    ck_create_topic(admin, src, partitions=1)
    ck_create_topic(admin, dst, partitions=1)
    return src, dst


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker, topics):  # noqa: ANN001
    src, dst = topics
    group = unique("ctp")
    _fill(broker.bootstrap, src, 10)
    c = _consumer(broker.bootstrap, group)
    c.subscribe([src])
    p = _txn_producer(broker.bootstrap, unique("txid"))
    p.init_transactions(30)
    try:
        msgs = _consume(c, 10)
        p.begin_transaction()
        for m in msgs[:6]:
            p.produce(dst, value=m.value().replace(b"in", b"out"), partition=0)
        _send_offsets(p, c, src, msgs[5].offset() + 1)
        p.commit_transaction(30)
        assert _committed(broker.bootstrap, group, src) == 6

        p.begin_transaction()
        for m in msgs[6:]:
            p.produce(dst, value=m.value().replace(b"in", b"out"), partition=0)
        _send_offsets(p, c, src, 10)
        p.abort_transaction(30)
        assert _committed(broker.bootstrap, group, src) == 6  # the aborted offsets never show

        p.begin_transaction()
        _send_offsets(p, c, src, 10)
        p.commit_transaction(30)
        assert _committed(broker.bootstrap, group, src) == 10
    finally:
        c.close()


def test_open_transaction_offsets_are_unstable(broker, topics):  # noqa: ANN001
    src, _dst = topics
    group = unique("ctp")
    _fill(broker.bootstrap, src, 4)
    c = _consumer(broker.bootstrap, group)
    c.subscribe([src])
    p = _txn_producer(broker.bootstrap, unique("txid"))
    p.init_transactions(30)
    try:
        _consume(c, 4)
        p.begin_transaction()
        _send_offsets(p, c, src, 2)
        p.commit_transaction(30)

        p.begin_transaction()
        _send_offsets(p, c, src, 4)
        assert _offset_fetch(broker.port, group, src, require_stable=True) == (ErrorCode.unstable_offset_commit, -1)
        assert _offset_fetch(broker.port, group, src, require_stable=False) == (ErrorCode.none, 2)
        # confluent-kafka's read_committed consumer asks for stable offsets: it waits, then times out.
        with pytest.raises(KafkaException):
            c.committed([TopicPartition(src, 0)], timeout=2)
        p.commit_transaction(30)
        assert _offset_fetch(broker.port, group, src, require_stable=True) == (ErrorCode.none, 4)
        assert c.committed([TopicPartition(src, 0)], timeout=20)[0].offset == 4
    finally:
        c.close()


def test_pending_offsets_survive_a_group_coordinator_failover(tmp_path):  # noqa: ANN001
    """Kill the leader of the group's __consumer_offsets partition mid-transaction: the new
    leader replays the transactional offsets as pending and commits them on the marker."""
    from tests.broker_harness import Cluster

    cluster = Cluster(tmp_path, 3, overrides={"offsets.topic.replication.factor": "3",
                                              "offsets.topic.num.partitions": "3",
                                              "transaction.state.log.replication.factor": "3",
                                              "transaction.state.log.num.partitions": "3"}).start()
    try:
        admin = ck_admin(cluster.bootstrap)
        src = unique("in")
        admin.create_topics([NewTopic(src, num_partitions=1, replication_factor=3)],
                            request_timeout=15)[src].result(timeout=20)
        group = unique("ctp")
        _fill(cluster.bootstrap, src, 4)
        c = _consumer(cluster.bootstrap, group)
        c.subscribe([src])
        p = _txn_producer(cluster.bootstrap, unique("txid"))
        p.init_transactions(30)
        _consume(c, 4)
        p.begin_transaction()
        _send_offsets(p, c, src, 3)

        coordinator = _find_coordinator(next(iter(cluster.brokers.values())).port, group)
        cluster.brokers[coordinator].kill()
        survivor = next(b for i, b in cluster.brokers.items() if i != coordinator)
        wait_until(lambda: _find_coordinator(survivor.port, group) not in (coordinator, -1), timeout=60,
                   message="a new group coordinator")
        new = cluster.brokers[_find_coordinator(survivor.port, group)]
        # The new coordinator replayed the transactional offset as pending: unstable, not visible.
        wait_until(lambda: _offset_fetch(new.port, group, src, require_stable=True)[0] == ErrorCode.unstable_offset_commit,
                   timeout=30, message="the pending offset on the new coordinator")
        assert _offset_fetch(new.port, group, src, require_stable=False) == (ErrorCode.none, -1)
        p.commit_transaction(60)
        wait_until(lambda: _committed(cluster.bootstrap, group, src) == 3, timeout=60,
                   message="the pending offset committed by the new coordinator")
        c.close()
    finally:
        cluster.stop()


def _txn_offset_commit(port: int, group: str, topic: str, generation: int, member: str) -> int:
    cls = api.request_schema(ApiKey.TXN_OFFSET_COMMIT, 3)
    part = make(nested(cls, "TxnOffsetCommitRequestPartition"), partition_index=0, committed_offset=1,
                committed_leader_epoch=-1, committed_metadata="")
    req = make(cls, transactional_id=unique("txid"), group_id=group, producer_id=987654321, producer_epoch=0,
               generation_id=generation, member_id=member, group_instance_id=None,
               topics=(make(nested(cls, "TxnOffsetCommitRequestTopic"), name=topic, partitions=(part,)),))
    with RawClient(port) as rc:
        resp = rc.call(ApiKey.TXN_OFFSET_COMMIT, 3, req)
    return int(resp.topics[0].partitions[0].error_code)


def test_txn_offset_commit_v3_checks_the_consumers_generation(broker, topics):  # noqa: ANN001
    """KIP-447: a TxnOffsetCommit naming a member the group does not have, or another generation
    than the group's, is refused; nothing becomes visible."""
    src, _dst = topics
    group = unique("ctp")
    _fill(broker.bootstrap, src, 1)
    c = _consumer(broker.bootstrap, group)
    c.subscribe([src])
    try:
        _consume(c, 1)  # joined: the group has a member and a generation
        assert _txn_offset_commit(broker.port, group, src, 1, "nobody") == ErrorCode.unknown_member_id
        assert _txn_offset_commit(broker.port, group, src, 12345, "") == ErrorCode.unknown_member_id
        assert _txn_offset_commit(broker.port, group, src, 12345, c.memberid()) == ErrorCode.illegal_generation
        assert _offset_fetch(broker.port, group, src, require_stable=True) == (ErrorCode.none, -1)
    finally:
        c.close()
