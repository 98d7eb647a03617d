"""Cross-broker reassignment (KIP-455, KIP-113's second half) against real processes.

Three combined nodes with two log dirs each. The APIs are driven with an unmodified client
(kafka-python's KafkaAdminClient.alter/list_partition_reassignments, sent to the node Metadata
names as controller, which forwards to the active controller) and with kavka's own CLI: adding
replicas catch up as followers, the reassignment completes once they are all in the ISR, the
leader moves off a removed broker, and removed brokers delete their copies; records and their
offsets are unchanged. A reassignment whose new replica cannot catch up (its broker is stopped)
stays in progress, and cancelling it leaves the original replicas intact.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from kavka.client.admin import AdminClient
from tests.broker_harness import Cluster, wait_until
from tests.integration.helpers import ck_admin, ck_read_to_end, unique

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("reassign"), 3, overrides=OVERRIDES, log_dirs=2).start()
    with AdminClient(c.bootstrap) as a:
        wait_until(lambda: len(a.describe_cluster().brokers) == 3, timeout=30, message="three brokers")
    yield c
    c.stop()


def _create(c: Cluster, topic: str, assignments: dict[int, list[int]]) -> None:
    from kavka.client.admin import NewTopic

    with AdminClient(c.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, assignments=assignments)])
    wait_until(lambda: all(len(p.isrs) == len(assignments[i]) for i, p in _parts(c, topic).items()) and len(_parts(c, topic)) == len(assignments),
               timeout=20, message="topic created, ISRs full")


def _parts(c: Cluster, topic: str) -> dict:
    md = ck_admin(c.bootstrap).list_topics(topic=topic, timeout=10)
    return md.topics[topic].partitions


def _assignment(c: Cluster, topic: str) -> dict[int, tuple[list[int], list[int], int]]:
    return {i: (list(p.replicas), sorted(p.isrs), p.leader) for i, p in _parts(c, topic).items()}


def _local_dirs(c: Cluster, topic: str, partition: int) -> dict[int, list[str]]:
    """Per node, the log dirs holding a (live, not future or deleted) copy of the partition."""
    out: dict[int, list[str]] = {}
    for i, n in c.nodes.items():
        out[i] = [str(d) for d in n.log_dirs if (d / f"{topic}-{partition}").is_dir()]
    return {i: ds for i, ds in out.items() if ds}


def _produce(c: Cluster, topic: str, n: int, partitions: int = 1) -> dict[tuple[int, int], bytes]:
    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all"})
    acked: dict[tuple[int, int], bytes] = {}

    def done(err, msg) -> None:  # noqa: ANN001
        assert err is None, err
        acked[(msg.partition(), msg.offset())] = msg.value()

    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions, on_delivery=done)
        p.poll(0)
    assert p.flush(30) == 0
    return acked


def _consumed(c: Cluster, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    out: dict[tuple[int, int], bytes] = {}
    for m in ck_read_to_end(c.bootstrap, topic, partitions=list(range(partitions))):
        out[(m.partition, m.offset)] = m.value
    return out


def test_kafka_python_moves_a_partition_to_other_brokers(cluster: Cluster) -> None:
    topic = unique("move")
    _create(cluster, topic, {0: [1, 2]})
    acked = _produce(cluster, topic, 300)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [3, 2]}) == {tp: None}
        # Done once nothing is listed; meanwhile the list shows target + removing.
        def done() -> bool:
            ongoing = admin.list_partition_reassignments()
            if tp in ongoing:
                assert ongoing[tp]["replicas"] == [3, 2, 1]
                assert (ongoing[tp]["adding_replicas"], ongoing[tp]["removing_replicas"]) == ([3], [1])
            return tp not in ongoing
        wait_until(done, timeout=30, message="reassignment complete")
        wait_until(lambda: _assignment(cluster, topic)[0][0:2] == ([3, 2], [2, 3]), timeout=20, message="metadata shows the target")
        assert _assignment(cluster, topic)[0][2] in (2, 3)  # broker 1 led, and no longer does
        wait_until(lambda: sorted(_local_dirs(cluster, topic, 0)) == [2, 3], timeout=20, message="broker 1 deleted its copy")
        assert _consumed(cluster, topic, 1) == acked

        # Kafka's errors.
        res = admin.alter_partition_reassignments({tp: None})
        assert res[tp] is NoReassignmentInProgressError
        res = admin.alter_partition_reassignments({tp: [1, 9]})
        assert res[tp] is InvalidReplicationAssignmentError
        res = admin.alter_partition_reassignments({TopicPartition(topic, 5): [1]})
        assert res[TopicPartition(topic, 5)] is UnknownTopicOrPartitionError
    finally:
        admin.close()
