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

import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from kavka.client.admin import AdminClient
from tests.broker_harness import KAVKA, Cluster
from tests.integration.helpers import ck_admin, ck_consumer, ck_read_to_end, unique
from tests.wait import wait_until

BROKER_RATES = ("follower.replication.throttled.rate", "leader.replication.throttled.rate")
TOPIC_LISTS = ("follower.replication.throttled.replicas", "leader.replication.throttled.replicas")
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    # Throttle test: small fetches and short quota windows, so the rate bites within seconds.
    "replica.fetch.max.bytes": "65536",
    "replication.quota.window.num": "2",
    "replication.quota.window.size.seconds": "1",
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


def _kavka(c: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="400")
    res = subprocess.run([*KAVKA, *args, "--bootstrap-server", c.bootstrap], capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert res.returncode == 0, f"kavka {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
    return res


def _other_dir(c: Cluster, node: int, topic: str, partition: int) -> str:
    """The log dir of `node` that does not hold the partition now (data1 if it holds none)."""
    n = c.nodes[node]
    have = [d for d in n.log_dirs if (d / f"{topic}-{partition}").is_dir()]
    return str(next(d for d in reversed(n.log_dirs) if d not in have))


class _Load:
    """An idempotent acks=all producer and an assign()ed consumer, each in a thread."""

    def __init__(self, c: Cluster, topic: str, partitions: int) -> None:
        self.c, self.topic, self.partitions = c, topic, partitions
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.consumed: list[tuple[int, int, bytes]] = []
        self.errors: list[Any] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]

    def __enter__(self) -> _Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.c.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})

        def done(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                self.errors.append(err)
            else:
                self.acked[msg.value()] = (msg.partition(), msg.offset())

        i = 0
        while not self.stop.is_set():
            p.produce(self.topic, f"r{i:07d}".encode(), partition=i % self.partitions, on_delivery=done)
            i += 1
            p.poll(0.002)
        if p.flush(60) != 0:
            self.errors.append("flush left records undelivered")

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING
        from confluent_kafka import TopicPartition as CkTp

        c = ck_consumer(self.c.bootstrap, {"enable.partition.eof": False})
        c.assign([CkTp(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        while not self.stop.is_set():
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                self.consumed.append((m.partition(), m.offset(), m.value()))
        c.close()


def test_every_partition_moves_to_other_brokers_and_dirs_under_load(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("load")
    before = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    target = {0: [3, 2], 1: [1, 3], 2: [2, 1]}  # each loses a broker (0 and 2 lose their leader) and gains one
    _create(cluster, topic, before)
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": reps, "log_dirs": [_other_dir(cluster, b, topic, p) for b in reps]}
        for p, reps in target.items()
    ]}
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan))
    with _Load(cluster, topic, 3) as load:
        wait_until(lambda: len(load.acked) >= 300, timeout=30, message="the producer running")
        out = _kavka(cluster, "reassign-partitions", "--reassignment-json-file", str(f), "--execute", "--timeout", "30000")
        assert "Current partition replica assignment" in out.stdout
        assert f"Successfully started partition reassignments for {topic}-0,{topic}-1,{topic}-2" in out.stdout
        assert out.stdout.count("Successfully started moving log directory to") == 6
        rollback = json.loads(out.stdout.split("\n\n")[1])
        assert {p["partition"]: p["replicas"] for p in rollback["partitions"]} == before

        def verified() -> Any:
            doc = json.loads(_kavka(cluster, "reassign-partitions", "--reassignment-json-file", str(f), "--verify", "--json").stdout)
            return doc if doc["complete"] else None

        doc = wait_until(verified, timeout=60, interval=0.5, message="--verify reports completion")
        assert [p["status"] for p in doc["partitions"]] == ["completed"] * 3
        assert [r["status"] for r in doc["replicas"]] == ["completed"] * 6
        n = len(load.acked)
        wait_until(lambda: len(load.acked) >= n + 300, timeout=30, message="the producer going on after the move")
    assert load.errors == []
    # No record lost or duplicated, and each at the offset the producer was told.
    final = {p: reps for p, (reps, _, _) in _assignment(cluster, topic).items()}
    assert final == target
    for p, reps in target.items():
        dirs = _local_dirs(cluster, topic, p)
        assert sorted(dirs) == sorted(reps), (p, dirs)
        for b in reps:
            assert dirs[b] == [plan["partitions"][p]["log_dirs"][reps.index(b)]]
    got = {m.value: (m.partition, m.offset) for m in ck_read_to_end(cluster.bootstrap, topic, partitions=[0, 1, 2])}
    assert got == load.acked
    seen = [v for _, _, v in load.consumed]
    assert len(seen) == len(set(seen))  # the live consumer saw nothing twice
    assert {v: (p, o) for p, o, v in load.consumed}.items() <= load.acked.items()


def test_a_cancelled_reassignment_leaves_the_original_replicas(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("cancel")
    _create(cluster, topic, {0: [1, 2]})
    acked = _produce(cluster, topic, 200)
    # Broker 3 is down, so the reassignment cannot finish: it stays half done.
    assert cluster.nodes[3].stop() == 0
    try:
        admin = KafkaAdminClient(bootstrap_servers=",".join(cluster.nodes[i].bootstrap for i in (1, 2)))
        try:
            tp = TopicPartition(topic, 0)
            assert admin.alter_partition_reassignments({tp: [3, 2]}) == {tp: None}
            ongoing = admin.list_partition_reassignments([tp])
            assert ongoing[tp] == {"replicas": [3, 2, 1], "adding_replicas": [3], "removing_replicas": [1]}
        finally:
            admin.close()
        f = tmp_path / "plan.json"
        f.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2]}]}))
        c1 = Cluster.__new__(Cluster)  # the CLI talks to the live nodes only
        c1.brokers = {i: cluster.nodes[i] for i in (1, 2)}
        res = _kavka(c1, "reassign-partitions", "--reassignment-json-file", str(f), "--verify")
        assert f"Reassignment of partition {topic}-0 is still in progress." in res.stdout
        res = _kavka(c1, "reassign-partitions", "--reassignment-json-file", str(f), "--cancel")
        assert f"Successfully cancelled partition reassignment for: {topic}-0" in res.stdout
        res = _kavka(c1, "reassign-partitions", "--reassignment-json-file", str(f), "--cancel")
        assert "None of the specified partition reassignments are active." in res.stdout
        with AdminClient(c1.bootstrap) as a:
            assert a.list_partition_reassignments() == {}
            [d] = a.describe_topics([topic])
            [p] = d.partitions
            # Kafka's PartitionReassignmentRevert keeps the order of replicas = target + removing,
            # without the adding ones: the same brokers, 2 before 1.
            assert (list(p.replicas), sorted(p.isr)) == ([2, 1], [1, 2])
        got = {(m.partition, m.offset): m.value for m in ck_read_to_end(c1.bootstrap, topic)}
        assert got == acked
    finally:
        cluster.nodes[3].start()
    with AdminClient(cluster.bootstrap) as a:
        wait_until(lambda: len(a.describe_cluster().brokers) == 3, timeout=30, message="broker 3 back")
    assert 3 not in _local_dirs(cluster, topic, 0)  # it never got a copy, and holds none now


def test_a_throttled_move_keeps_to_the_rate_and_verify_removes_the_throttles(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("throttle")
    _create(cluster, topic, {0: [1]})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "compression.type": "none", "linger.ms": 20})
    payload = os.urandom(1000)
    for i in range(1500):
        p.produce(topic, payload + i.to_bytes(4, "big"), partition=0)
        p.poll(0)
    assert p.flush(30) == 0
    size = sum(f.stat().st_size for d in cluster.nodes[1].log_dirs for f in (d / f"{topic}-0").glob("*.log"))
    assert size > 1_400_000
    rate = 300_000
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]}))
    started = time.monotonic()
    out = _kavka(cluster, "reassign-partitions", "--reassignment-json-file", str(f), "--execute", "--throttle", str(rate))
    assert f"The inter-broker throttle limit was set to {rate} B/s" in out.stdout
    with AdminClient(cluster.bootstrap) as a:
        for b in (1, 2):
            got = {e.name: e.value for e in a.describe_configs("broker", str(b), keys=list(BROKER_RATES))}
            assert got == dict.fromkeys(BROKER_RATES, str(rate))
        got = {e.name: e.value for e in a.describe_configs("topic", topic, keys=list(TOPIC_LISTS))}
        assert got == {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}

    def verified() -> Any:
        doc = json.loads(_kavka(cluster, "reassign-partitions", "--reassignment-json-file", str(f), "--verify", "--json").stdout)
        return doc if doc["complete"] else None

    doc = wait_until(verified, timeout=60, interval=0.2, message="the throttled move to finish")
    elapsed = time.monotonic() - started
    assert doc["throttle_removed"]
    # A lower bound the rate implies: everything but the quota's one-window burst and one fetch's
    # worth (replica.fetch.max.bytes) had to wait for the rate.
    assert elapsed >= (size - rate * 1 - 65536) / rate, (size, elapsed)
    with AdminClient(cluster.bootstrap) as a:
        for b in (1, 2, 3):
            assert a.describe_configs("broker", str(b), keys=list(BROKER_RATES))[0].source != "DYNAMIC_BROKER_CONFIG"
            assert all(e.value == str(2**63 - 1) for e in a.describe_configs("broker", str(b), keys=list(BROKER_RATES)))
        assert all(e.value == "" for e in a.describe_configs("topic", topic, keys=list(TOPIC_LISTS)))
    assert _assignment(cluster, topic)[0][0] == [2]
    assert len(ck_read_to_end(cluster.bootstrap, topic)) == 1500


def test_adding_two_brokers_and_rebalancing_ends_balanced(tmp_path: Path) -> None:
    """Five nodes whose topics live on brokers 1-3 only (4 and 5 just joined): `kavka cluster
    rebalance --add-brokers 4,5 --execute` moves the fewest replicas, and once the moves finish every
    broker's replica and preferred-leader counts are within one of the mean, with every record kept."""
    c = Cluster(tmp_path, 5, overrides=OVERRIDES).start()
    try:
        with AdminClient(c.bootstrap) as a:
            wait_until(lambda: len(a.describe_cluster().brokers) == 5, timeout=30, message="five brokers")
        old = [[1, 2], [2, 3], [3, 1]]
        topics = {unique("grow"): {p: old[p % 3] for p in range(6)}, unique("grow"): {p: old[(p + 1) % 3] for p in range(4)}}
        acked = {}
        for t, assignment in topics.items():
            _create(c, t, assignment)
            acked[t] = _produce(c, t, 200, partitions=len(assignment))
        out = _kavka(c, "cluster", "rebalance", "--add-brokers", "4,5", "--execute", "--json")
        plan = json.loads(out.stdout)
        summary = plan["kavka_plan"]
        assert summary["executed"] and summary["brokers"] == [1, 2, 3, 4, 5]
        assert summary["replicas"] == 20 and summary["moved_replicas"] == 8  # 20 / 5 = 4 each on the new ones
        assert summary["full_replacement_moved_replicas"] >= summary["moved_replicas"]
        with AdminClient(c.bootstrap) as a:
            wait_until(lambda: a.list_partition_reassignments() == {}, timeout=60, message="the moves to finish")
            described = a.describe_topics(list(topics))
        replicas, leaders = Counter(), Counter()
        for d in described:
            for p in d.partitions:
                replicas.update(p.replicas)
                leaders[p.replicas[0]] += 1
        assert sorted(replicas) == [1, 2, 3, 4, 5]
        assert max(replicas.values()) - min(replicas.values()) <= 1, replicas
        assert max(leaders.values()) - min(leaders.values()) <= 1, leaders
        for t, assignment in topics.items():
            assert _consumed(c, t, len(assignment)) == acked[t]
    finally:
        c.stop()
