"""JBOD in a cluster (KIP-858) with real broker processes and real clients.

- Kafka's tests/kafkatest/tests/core/log_dir_failure_test.py, ported: 3 brokers with two log dirs
  each (and the metadata log on a third, so a data dir failing does not halt the broker), a topic
  with RF=3 and min.insync.replicas=2, an idempotent acks=all producer throughout. The partition
  leader's dir fails (the test-only fault injection: every I/O under it raises EIO): its heartbeat
  reports the dir, the controller moves the leadership within 10 s, the producer carries on, and the
  broker keeps serving its other dir. Repaired and restarted, its replica rebuilds from the leader
  and rejoins the ISR. Then a follower's dir fails: it leaves the ISR, the leader stays. Every
  acknowledged record is read back exactly once.
- A move between two dirs of one broker ends with the controller's partition record naming the new
  dir (AssignReplicasToDirs), and a broker restarted with a dir missing registers without it: its
  replica there stays offline, out of the ISR, until the dir returns.

The controller's records are read from a node's metadata log files (`__cluster_metadata-0`),
replayed into a MetadataImage the way the controller builds its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from kavka.client.admin import AdminClient
from kavka.controller import directories as dirs
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.protocol.records import iter_records
from kavka.storage.meta_properties import read_meta_properties
from tests.broker_harness import KAVKA, Cluster
from tests.integration.helpers import ck_admin, ck_producer, ck_read_to_end, unique
from tests.wait import wait_until

STORAGE_ERROR = 56


class JbodCluster:
    """A 3-node cluster whose nodes have data dirs d0, d1 and the metadata log in meta."""

    def __init__(self, root: Path) -> None:
        self.root = root
        node_overrides = {
            i: {
                "log.dirs": f"{root / f'node{i}' / 'd0'},{root / f'node{i}' / 'd1'}",
                "metadata.log.dir": str(root / f"node{i}" / "meta"),
            }
            for i in (1, 2, 3)
        }
        self.c = Cluster(
            root,
            3,
            overrides={
                "kavka.test.fault.injection.enable": "true",
                "broker.heartbeat.interval.ms": "500",
                "broker.session.timeout.ms": "4000",
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
            },
            node_overrides=node_overrides,
        )
        self.control = {i: root / f"failing-dirs-{i}" for i in (1, 2, 3)}
        for f in self.control.values():
            f.write_text("")

    def data_dirs(self, i: int) -> list[Path]:
        return [self.root / f"node{i}" / "d0", self.root / f"node{i}" / "d1"]

    def dir_id(self, path: Path | str) -> str:
        meta = read_meta_properties(Path(path))
        assert meta.directory_id
        return meta.directory_id

    def start_node(self, i: int, *, wait: bool = True) -> None:
        n = self.c.nodes[i]
        if not n._formatted:
            n.format(self.c.cluster_id)
        n.start(env={"KAVKA_FAULT_INJECTION_FILE": str(self.control[i])}, wait=wait, timeout=90)

    def start(self) -> JbodCluster:
        for i in self.c.nodes:
            self.start_node(i, wait=False)
        for n in self.c.nodes.values():
            n.wait_ready(90)
        return self

    @property
    def bootstrap(self) -> str:
        return self.c.bootstrap

    def image(self, via: int | None = None) -> MetadataImage:
        """The metadata as a node's log has it (records past the commit point included: callers wait
        on conditions, so a record not committed yet only delays them)."""
        via = via or next(i for i, n in self.c.nodes.items() if n.alive())
        seg_dir = self.root / f"node{via}" / "meta" / "__cluster_metadata-0"
        delta = MetadataDelta(MetadataImage())
        for seg in sorted(seg_dir.glob("*.log")):
            for rec in iter_records(seg.read_bytes()):
                try:
                    record = mr.decode(rec.key, rec.value)
                except (mr.MetadataRecordError, ValueError, TypeError):
                    continue  # raft control records (leader change, snapshot markers)
                # The record's own offset: a broker's epoch is the offset of its registration, and
                # a change record for another epoch is ignored (counting only the decoded records
                # drifted by one after each raft leader change).
                delta.replay(record, rec.offset)
        return delta.apply()

    def partition(self, topic: str, p: int = 0):  # noqa: ANN201
        return self.image().topics_by_name[topic].partitions[p]

    def where(self, broker: int, topic: str, p: int = 0) -> str:
        """The log dir holding the broker's replica, from its DescribeLogDirs."""
        with AdminClient(self.c.nodes[broker].bootstrap) as a:
            for d in a.describe_log_dirs([broker], [topic])[broker]:
                if any(r.partition == p and not r.is_future for r in d.replicas):
                    return d.path
        raise AssertionError(f"broker {broker} has no replica of {topic}-{p}")

    def stop(self) -> None:
        try:
            self.c.stop()
        except Exception:
            for i, n in self.c.nodes.items():
                print(f"---- node {i}\n" + "".join(n.output[-80:]))
            raise


def _client_leader_isr(bootstrap: str, topic: str) -> tuple[int, tuple[int, ...]]:
    md = ck_admin(bootstrap).list_topics(topic=topic, timeout=10)
    p = md.topics[topic].partitions[0]
    return p.leader, tuple(sorted(p.isrs))


def _create(bootstrap: str, topic: str, replicas: list[list[int]]) -> None:
    admin = ck_admin(bootstrap)
    futs = admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas, config={"min.insync.replicas": "2"})])
    futs[topic].result(timeout=30)


def _directories_assigned(jc: JbodCluster, topic: str, p: int = 0) -> bool:
    reg = jc.partition(topic, p)
    return all(
        directory == jc.dir_id(jc.where(b, topic, p)) for b, directory in zip(reg.replicas, reg.directories, strict=True)
    )


class Producer:
    """An idempotent acks=all producer sending numbered values to partition 0 until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = ck_producer(
            bootstrap,
            {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 120000},
        )
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:  # noqa: ANN001
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(msg.value())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.p.produce(self.topic, value=f"v-{self.sent}".encode(), partition=0, on_delivery=self._on_delivery)
            self.sent += 1
            self.p.poll(0.005)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def wait_more(self, n: int, timeout: float = 60) -> None:
        target = len(self.acked) + n
        wait_until(lambda: len(self.acked) >= target, timeout, message=f"{n} more acknowledged records")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.p.flush(120) == 0


@pytest.fixture
def jbod_cluster(tmp_path: Path):
    jc = JbodCluster(tmp_path).start()
    yield jc
    jc.stop()


def test_log_dir_failure_moves_leadership_and_loses_nothing(jbod_cluster: JbodCluster) -> None:
    jc = jbod_cluster
    topic, healthy_topic = unique("ldf"), unique("healthy")
    _create(jc.bootstrap, topic, [[1, 2, 3]])
    wait_until(lambda: _client_leader_isr(jc.bootstrap, topic) == (1, (1, 2, 3)), 30, message="t-0 led by 1")
    # AssignReplicasToDirs: the controller learns where each broker put its replica.
    wait_until(lambda: _directories_assigned(jc, topic), 30, message="the directories in the partition record")
    producer = Producer(jc.bootstrap, topic).start()
    try:
        producer.wait_more(200)

        # The leader's dir fails.
        leader = 1
        failed = Path(jc.where(leader, topic))
        other = next(d for d in jc.data_dirs(leader) if d != failed)
        # A partition led by the same broker in its other dir, to show that dir keeps serving.
        _create(jc.bootstrap, healthy_topic, [[leader, 2, 3]])
        wait_until(lambda: _directories_assigned(jc, healthy_topic), 30, message="healthy topic assigned")
        if Path(jc.where(leader, healthy_topic)) != other:
            with AdminClient(jc.c.nodes[leader].bootstrap) as a:
                assert a.alter_replica_log_dirs({(leader, healthy_topic, 0): str(other)}) == {(leader, healthy_topic, 0): 0}
            wait_until(lambda: Path(jc.where(leader, healthy_topic)) == other, 30, message="healthy topic moved")

        failed_at = time.monotonic()
        jc.control[leader].write_text(f"{failed}\n")
        new_leader = wait_until(
            lambda: (lambda li: li[0] if li[0] not in (leader, -1) else None)(_client_leader_isr(jc.bootstrap, topic)),
            30,
            interval=0.02,
            message="a new leader",
        )
        elapsed = time.monotonic() - failed_at
        print(f"disk failure to new leader: {elapsed:.2f}s")
        assert elapsed < 10, f"leadership moved only after {elapsed:.1f}s"
        assert new_leader in (2, 3)
        wait_until(lambda: _client_leader_isr(jc.bootstrap, topic)[1] == (2, 3), 10, message="1 out of the ISR")
        producer.wait_more(200)  # the producer carries on
        # The broker stays up and keeps leading the partition in its healthy dir.
        assert jc.c.nodes[leader].alive()
        assert _client_leader_isr(jc.bootstrap, healthy_topic)[0] == leader
        p2 = ck_producer(jc.c.nodes[leader].bootstrap, {"acks": "all"})
        p2.produce(healthy_topic, value=b"still-serving", partition=0)
        assert p2.flush(20) == 0
        with AdminClient(jc.c.nodes[leader].bootstrap) as a:
            by_path = {d.path: d.error_code for d in a.describe_log_dirs([leader])[leader]}
        assert by_path == {str(failed): STORAGE_ERROR, str(other): 0}
        assert jc.image().brokers[leader].log_dirs == (jc.dir_id(other),)
        # kafka-log-dirs.sh across the cluster: every broker answers, the failed dir with its error.
        out = subprocess.run(
            [*KAVKA, "log-dirs", "describe", "--bootstrap-server", jc.bootstrap, "--broker-list", "1,2,3",
             "--topic-list", topic, "--json"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        doc = json.loads(out[out.index("{"):])
        assert [b["broker"] for b in doc["brokers"]] == [1, 2, 3]
        errors = {(b["broker"], d["logDir"]): d["error"] for b in doc["brokers"] for d in b["logDirs"]}
        assert errors[(leader, str(failed))] == "org.apache.kafka.common.errors.KafkaStorageException"
        assert sum(e is None for e in errors.values()) == 5
        hosting = {
            b["broker"] for b in doc["brokers"] for d in b["logDirs"] for r in d["partitions"] if r["partition"] == f"{topic}-0"
        }
        assert hosting == {2, 3}  # the failed dir lists no replicas

        # Repair and restart: the replica rebuilds from the leader and rejoins the ISR.
        jc.control[leader].write_text("")
        assert jc.c.nodes[leader].stop() == 0
        jc.start_node(leader)
        wait_until(lambda: _client_leader_isr(jc.bootstrap, topic)[1] == (1, 2, 3), 60, message="1 back in the ISR")
        producer.wait_more(200)

        # A follower's dir fails: it leaves the ISR, and nothing else changes.
        lead_now, _ = _client_leader_isr(jc.bootstrap, topic)
        follower = next(b for b in (1, 2, 3) if b != lead_now)
        epoch_before = jc.partition(topic).leader_epoch
        jc.control[follower].write_text(f"{jc.where(follower, topic)}\n")
        wait_until(
            lambda: follower not in _client_leader_isr(jc.bootstrap, topic)[1], 30, message="the follower out of the ISR"
        )
        leader_after, isr_after = _client_leader_isr(jc.bootstrap, topic)
        assert leader_after == lead_now and len(isr_after) == 2
        assert jc.partition(topic).leader_epoch == epoch_before
        assert jc.c.nodes[follower].alive()
        producer.wait_more(200)
    finally:
        producer.stop()

    # Every acknowledged record, exactly once (and nothing the producer did not send).
    assert not producer.errors, producer.errors[:3]
    got = [r.value for r in ck_read_to_end(jc.bootstrap, topic, [0], timeout=60)]
    assert len(got) == len(set(got)), "a record was written twice"
    assert set(producer.acked) <= set(got)
    assert len(got) == len(producer.acked)


def test_moves_update_the_record_and_a_missing_dir_keeps_its_replica_offline(jbod_cluster: JbodCluster) -> None:
    jc = jbod_cluster
    topic = unique("mv")
    _create(jc.bootstrap, topic, [[1, 2, 3]])
    wait_until(lambda: _directories_assigned(jc, topic), 30, message="the directories in the partition record")

    # AlterReplicaLogDirs on broker 2: once the future copy caught up and was swapped in, the
    # controller's record names the new dir.
    src = Path(jc.where(2, topic))
    dst = next(d for d in jc.data_dirs(2) if d != src)
    with AdminClient(jc.c.nodes[2].bootstrap) as a:
        assert a.alter_replica_log_dirs({(2, topic, 0): str(dst)}) == {(2, topic, 0): 0}
    wait_until(lambda: Path(jc.where(2, topic)) == dst, 30, message="the move")
    wait_until(lambda: jc.partition(topic).directories[1] == jc.dir_id(dst), 30, message="the record names the new dir")

    # Broker 3 restarted with the dir of its replica unreadable: registered without it, the
    # replica stays offline and out of the ISR; the partition keeps its leader and takes writes.
    gone = Path(jc.where(3, topic))
    gone_id = jc.dir_id(gone)
    assert jc.c.nodes[3].stop() == 0
    saved = gone.with_name(gone.name + ".saved")
    shutil.move(gone, saved)
    gone.write_text("not a directory any more")
    jc.start_node(3)
    wait_until(lambda: 3 in jc.image().brokers and gone_id not in jc.image().brokers[3].log_dirs
               and not jc.image().brokers[3].fenced, 30, message="3 registered without the dir")
    p = ck_producer(jc.bootstrap, {"acks": "all", "enable.idempotence": True})
    for i in range(20):
        p.produce(topic, value=f"w-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    reg = jc.partition(topic)
    assert 3 not in reg.isr and reg.leader in (1, 2) and reg.directories[2] == gone_id
    assert not dirs.replica_online(reg, jc.image().brokers[3])
    assert "is assigned to log dir" in jc.c.nodes[3].log_text()

    # The dir returns: the replica catches up and rejoins the ISR.
    assert jc.c.nodes[3].stop() == 0
    gone.unlink()
    shutil.move(saved, gone)
    jc.start_node(3)
    wait_until(lambda: _client_leader_isr(jc.bootstrap, topic)[1] == (1, 2, 3), 60, message="3 back in the ISR")
    got = [r.value for r in ck_read_to_end(jc.bootstrap, topic, [0], timeout=60)]
    assert got == [f"w-{i}".encode() for i in range(20)]
