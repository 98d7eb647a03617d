"""Losing the controller quorum stops no writes (broker.session_watch, ReplicaManager.set_leadership_lapsed).

Three dedicated controllers and three brokers; a topic of one partition, RF=3,
min.insync.replicas=2. An idempotent acks=all producer (confluent-kafka) writes a record every
20 ms. Two of the three controllers are frozen (SIGSTOP): the one left has no majority, so no
heartbeat is answered any more and every broker's controller session lapses 3 s later
(broker.session.timeout.ms). Before the per-partition rule every lapsed broker stopped acting as
a leader, so the producer met NOT_LEADER_OR_FOLLOWER and leader -1 everywhere and nothing was
acknowledged until the controllers came back: a whole-cluster outage caused by the controllers
alone. Now the leader keeps serving: both followers still fetch from it at its leader epoch, so
neither can have been elected elsewhere. The producer keeps being acknowledged for well over a
session after the leader logged its lapse; then the controllers are thawed and every
acknowledged record is read back exactly once.

(Combined broker,controller nodes cannot lose their quorum without losing as many brokers: with
three, the one left alone cannot meet min.insync.replicas=2 for acks=all anyway. Its own
controller answers its heartbeats only while it still counts the quorum's contact, so it lapses
all the same, and its RF=1 partitions and those whose ISR still fetches keep serving.)
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, ck_read_to_end, unique
from tests.integration.test_replication import _running
from tests.wait import wait_until

SESSION_S = 3.0
OVERRIDES = {
    "broker.session.timeout.ms": str(int(SESSION_S * 1000)),
    "broker.heartbeat.interval.ms": "500",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    # Generous: the followers keep fetching on two loaded cores, and must not look silent.
    "replica.lag.time.max.ms": "10000",
}
LAPSED = "stops acting as a leader"


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    yield from _running(Cluster(tmp_path, 6, controllers=3, overrides=OVERRIDES))


def _output(cluster: Cluster, node: int) -> str:
    return "".join(cluster.nodes[node].output)


def test_writes_go_on_while_the_controller_quorum_is_lost(cluster: Cluster) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = unique("noquorum")
    admin = ck_admin(cluster.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(20)

    def partition() -> object:
        return admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0]

    wait_until(lambda: len(partition().isrs) == 3, timeout=30, message="ISR complete")
    leader = partition().leader

    acked: list[tuple[float, bytes]] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is None:
            acked.append((time.monotonic(), msg.value()))
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 120000})
    sent = 0

    def send_for(seconds: float) -> None:
        nonlocal sent
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            producer.produce(topic, b"v-%06d" % sent, partition=0, on_delivery=on_delivery)
            sent += 1
            producer.poll(0.02)

    send_for(1.0)
    assert producer.flush(30) == 0 and acked and not errors  # the producer id is allocated by now

    frozen = [n for n in cluster.nodes if n not in cluster.brokers][:2]
    for n in frozen:
        os.kill(cluster.nodes[n].proc.pid, signal.SIGSTOP)
    try:
        cut = time.monotonic()
        deadline = cut + 60
        while LAPSED not in _output(cluster, leader):
            assert time.monotonic() < deadline, f"broker {leader} never lapsed:\n{_output(cluster, leader)[-3000:]}"
            send_for(0.2)
        lapsed_at = time.monotonic()
        # Well over a session past the lapse: a leader that stepped down would answer
        # NOT_LEADER_OR_FOLLOWER all along and nothing sent now would be acknowledged.
        send_for(2 * SESSION_S)
        check_from = lapsed_at + SESSION_S
        end = time.monotonic() + 10
        while not any(t > check_from for t, _ in acked) and time.monotonic() < end:
            producer.poll(0.05)
        after = [t for t, _ in acked if t > lapsed_at]
        assert any(t > check_from for t in after), (
            f"{len(after)} records acknowledged after broker {leader} lapsed, none {SESSION_S} s after it")
        gaps = [b - a for (a, _), (b, _) in zip(acked, acked[1:], strict=False) if b > lapsed_at]
        print(f"broker {leader} lapsed {lapsed_at - cut:.2f} s after the freeze; {len(after)} records acknowledged "
              f"in the {acked[-1][0] - lapsed_at:.2f} s after it, the longest gap {max(gaps, default=-1):.2f} s")
        assert gaps and max(gaps) < SESSION_S, f"acknowledgements stalled for {max(gaps, default=-1):.1f} s"
        assert all(LAPSED in _output(cluster, b) for b in cluster.brokers), "every broker lapsed"
        # Lapsed, the leader still answers Metadata as the leader, and lists itself.
        md = ck_admin(cluster.nodes[leader].bootstrap).list_topics(topic=topic, timeout=10)
        assert md.topics[topic].partitions[0].leader == leader and leader in md.brokers
        assert not errors
    finally:
        for n in frozen:
            os.kill(cluster.nodes[n].proc.pid, signal.SIGCONT)

    send_for(1.0)
    assert producer.flush(60) == 0, "records left unacknowledged after the controllers came back"
    assert not errors, errors[:5]
    values = [v for _, v in acked]
    assert len(values) == sent
    got = Counter(r.value for r in ck_read_to_end(cluster.bootstrap, topic, timeout=60))
    assert all(got[v] == 1 for v in values), (
        f"{sum(got[v] == 0 for v in values)} acknowledged records lost, "
        f"{sum(got[v] > 1 for v in values)} duplicated")
