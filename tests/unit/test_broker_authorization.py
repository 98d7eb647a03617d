"""broker.authorization and the Fetch handler's split: the client host from a peer address, and
which partitions a fetch may not read (a follower needs ClusterAction on the cluster; a consumer
Read on each topic; an unknown topic id is left to UNKNOWN_TOPIC_ID)."""

from __future__ import annotations

from kavka.broker.authorization import client_host
from kavka.broker.handlers.fetch import _denied
from kavka.common import AclOperation, ResourceType, TopicPartition
from kavka.replication.replica_manager import FetchParams


def test_client_host() -> None:
    assert client_host("10.0.0.1:51234") == "10.0.0.1"
    assert client_host("[::1]:9092") == "::1"
    assert client_host("::1:9092") == "::1"
    assert client_host("?") == "?"


def params(replica_id: int) -> FetchParams:
    return FetchParams(replica_id=replica_id)


def test_denied_partitions() -> None:
    infos = [(TopicPartition("a", 0), None), (TopicPartition("b", 0), None), (None, None), (TopicPartition("a", 1), None)]
    asked: list[tuple[AclOperation, ResourceType, str]] = []

    def read_a_only(op: AclOperation, rt: ResourceType, name: str) -> bool:
        asked.append((op, rt, name))
        return (op, rt, name) == (AclOperation.READ, ResourceType.TOPIC, "a")

    assert _denied(params(-1), infos, read_a_only) == {1}
    assert asked == [(AclOperation.READ, ResourceType.TOPIC, "a"), (AclOperation.READ, ResourceType.TOPIC, "b")]
    assert _denied(params(2), infos, read_a_only) == {0, 1, 2, 3}  # a follower without ClusterAction
    assert _denied(params(2), infos, lambda op, rt, name: op == AclOperation.CLUSTER_ACTION and name == "kafka-cluster") == set()
