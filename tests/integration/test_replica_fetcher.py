"""The replica fetcher on real processes: a partition that joins a fetcher whose fetch is parked.

A follower's fetch waits at the leader up to `replica.fetch.wait.max.ms` while the leader's
partitions are idle. A partition added to that fetcher meanwhile (a new topic, a leader change, a
replica rebuilt from tiered storage) must not wait for the parked fetch to come back: the fetcher
supersedes it and sends a fetch that asks for the new partition at once (replication.fetcher,
`ReplicaFetcher._supersede`). The wait is set to 30 s here and the deadline is 10 s, so a fetcher
that waited for its parked fetch fails, however loaded the machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, unique
from tests.wait import wait_until

WAIT_MAX_MS = 30_000
DEADLINE_S = 10.0


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    c = Cluster(tmp_path, 2, overrides={
        "replica.fetch.wait.max.ms": str(WAIT_MAX_MS),
        "replica.socket.timeout.ms": str(WAIT_MAX_MS),
        "replica.lag.time.max.ms": str(2 * WAIT_MAX_MS),  # the follower stays in the ISR throughout
        "num.replica.fetchers": "1",
    }).start()
    yield c
    c.stop()


def _create_on(c: Cluster, topic: str, replicas: list[int]) -> None:
    admin = ck_admin(c.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas])])[topic].result(20)

    def led() -> bool:
        p = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions.get(0)
        return p is not None and p.leader == replicas[0] and sorted(p.isrs) == sorted(replicas)

    wait_until(led, timeout=20, message=f"{topic} led by broker {replicas[0]} with a full ISR")


def _produce_all(c: Cluster, topic: str, value: bytes, within_s: float) -> float:
    """One acks=all record (answered only once the follower has fetched it); seconds taken."""
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0,
                  "request.timeout.ms": 2 * WAIT_MAX_MS, "message.timeout.ms": 3 * WAIT_MAX_MS})
    p.list_topics(topic, timeout=10)
    t0 = time.monotonic()
    p.produce(topic, value, partition=0, on_delivery=lambda e, _m: errors.append(e))
    left = p.flush(within_s)
    took = time.monotonic() - t0
    assert left == 0, f"acks=all to {topic} not acknowledged within {within_s} s: the follower did not fetch it"
    assert errors == [None]
    return took


def test_a_partition_added_to_a_fetcher_with_a_parked_fetch_replicates_at_once(cluster: Cluster) -> None:
    idle, joined = unique("idle"), unique("joined")
    _create_on(cluster, idle, [1, 2])
    # Broker 2's fetcher for leader 1 fetched this record, and its next fetch now waits at the
    # leader for up to 30 s: nothing more is written to `idle`.
    _produce_all(cluster, idle, b"park", within_s=DEADLINE_S)
    _create_on(cluster, joined, [1, 2])  # broker 2 adds it to that same fetcher
    took = _produce_all(cluster, joined, b"at once", within_s=DEADLINE_S)
    assert took < DEADLINE_S
