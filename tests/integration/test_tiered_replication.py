"""Tiered storage (KIP-405) with replication, on real broker processes driven by confluent-kafka.

Three brokers share one remote store (the ``local`` backend on a shared directory) and tier an
RF=3 topic with small segments and a small local retention:

* the leader is killed -9 while an acks=all producer runs: the new leader goes on copying from the
  highest offset the metadata says was copied -- the finished remote segments, replayed from
  ``__remote_log_metadata`` as any broker sees them, cover offset 0 up without a gap and no copy
  repeats a range already covered -- and followers keep only a local tail whose every deleted
  offset is in remote storage; every acknowledged record is read back from offset 0;
* a follower whose partition directory is wiped rejoins the ISR holding only the local tail
  (with ``__remote_log_metadata`` at one replica, so the remote state it needs is read from, and
  written to, other brokers)
  (KIP-405 follower fetch: OFFSET_MOVED_TO_TIERED_STORAGE, then its epochs and producer state from
  remote storage), and once it is the only broker left it leads and serves every record from
  offset 0, and the idempotent producer goes on from where it was.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from kavka.tiered.api import RemoteLogSegmentMetadata
from kavka.tiered.metadata import REMOTE_LOG_METADATA_TOPIC, RemoteLogMetadataCache, decode_event
from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, ck_read_to_end, partition_dir, unique
from tests.integration.test_tiered import EARLIEST_LOCAL, LATEST_TIERED, list_offset
from tests.wait import wait_until

SESSION_MS = 3000
METADATA_PARTITIONS = 3


def tiered_overrides(remote: Path) -> dict[str, str]:
    return {
        "broker.session.timeout.ms": str(SESSION_MS),
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "5000",
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "local",
        "rsm.config.dir": str(remote),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
    }


SEGMENT = 8192
# eight segments: a replica rebuilt from remote storage starts at the leader's local log start,
# and must fetch it before the leader's local retention deletes it under a producer at full speed
# (with two segments, a restarted replica chased the leader's local log start for a minute here)
LOCAL_RETENTION = 65536
TIERED = {
    "remote.storage.enable": "true",
    "segment.bytes": str(SEGMENT),
    "local.retention.bytes": str(LOCAL_RETENTION),
    "retention.ms": "-1",
    "min.insync.replicas": "2",
}


def _running(c: Cluster) -> Iterator[Cluster]:
    c.start()
    yield c
    try:
        c.stop()
    except Exception:
        for i, n in c.nodes.items():
            print(f"---- node {i}\n" + "".join(n.output[-80:]))
        raise


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from _running(Cluster(tmp_path, 3, overrides=tiered_overrides(tmp_path / "remote")))


@pytest.fixture
def split_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """One controller-only voter and three brokers: two brokers can stop and the quorum stays.
    ``__remote_log_metadata`` has one replica per partition here, so each broker reads most of
    the remote metadata from other brokers and writes its events to them over the network."""
    overrides = {**tiered_overrides(tmp_path / "remote"), "remote.log.metadata.topic.replication.factor": "1",
                 "remote.log.metadata.topic.num.partitions": "1"}
    yield from _running(Cluster(tmp_path, 4, overrides=overrides, controllers=1))


def _live(c: Cluster) -> list[int]:
    return [i for i, n in c.brokers.items() if n.alive()]


def _part(c: Cluster, topic: str):  # noqa: ANN202
    node = c.nodes[_live(c)[0]]
    admin = ck_admin(node.bootstrap)
    return admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]


def _leader(c: Cluster, topic: str) -> int:
    return wait_until(lambda: (lambda p: p.leader if p.leader in _live(c) else None)(_part(c, topic)), timeout=20,
                      message=f"{topic}-0 led by a live broker")


def _isr(c: Cluster, topic: str, members: int, timeout: float = 60) -> None:
    try:
        wait_until(lambda: len(_part(c, topic).isrs) == members, timeout=timeout, message=f"the ISR of {topic}-0 at {members}")
    except AssertionError:
        for i, n in c.nodes.items():
            lines = [ln for ln in n.output if f"{topic}-0" in ln and "rolled" not in ln and "copied segment" not in ln]
            print(f"---- node {i}\n" + "".join(lines[-40:]))
        raise


def remote_segments(c: Cluster, topic: str) -> list[RemoteLogSegmentMetadata]:
    """The finished remote segments of ``topic``-0, replayed from __remote_log_metadata as read by
    a client (what any broker's cache holds once it applied the committed events)."""
    n = len(ck_admin(c.bootstrap).list_topics(topic=REMOTE_LOG_METADATA_TOPIC, timeout=10).topics[REMOTE_LOG_METADATA_TOPIC].partitions)
    records = ck_read_to_end(c.bootstrap, REMOTE_LOG_METADATA_TOPIC, list(range(n)))
    names: dict = {}
    caches: dict = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        event = decode_event(bytes(r.value), names)
        tp = event.segment_id.topic_id_partition
        if isinstance(event, RemoteLogSegmentMetadata):
            names[tp.topic_id] = tp.topic
        cache = caches.setdefault((tp.topic_id, tp.partition), RemoteLogMetadataCache())
        try:
            cache.apply(event)
        except ValueError:
            pass  # a transition the log refuses is skipped by every broker too
    out = [m for cache in caches.values() for m in cache.readable() if m.segment_id.topic_id_partition.topic == topic]
    return sorted(out, key=lambda m: (m.start_offset, m.end_offset))


def assert_contiguous(segs: list[RemoteLogSegmentMetadata]) -> None:
    """From offset 0 up, every offset in a finished segment; no copy of a range already covered."""
    assert segs and segs[0].start_offset == 0, [(m.start_offset, m.end_offset) for m in segs]
    covered = segs[0].end_offset
    for m in segs[1:]:
        assert m.start_offset <= covered + 1, f"gap before {m.start_offset}: covered up to {covered}"
        assert m.end_offset > covered, f"segment [{m.start_offset}, {m.end_offset}] copied again (covered to {covered})"
        covered = m.end_offset


def local_log_files(c: Cluster, node: int, topic: str) -> list[Path]:
    return sorted(partition_dir(c.nodes[node].log_dirs[0], topic).glob("*.log"))


def local_tail(c: Cluster, node: int, topic: str) -> tuple[int, int]:
    """(base offset of the first local segment, bytes in local segments) of `node`'s replica. The
    broker deletes segments while this looks (renamed to .deleted, then removed): a segment gone
    between the listing and its stat is simply not counted."""
    sizes: dict[Path, int] = {}
    for f in local_log_files(c, node, topic):
        try:
            sizes[f] = f.stat().st_size
        except FileNotFoundError:
            continue
    return (int(min(sizes).stem) if sizes else -1), sum(sizes.values())


class _Producer:
    """An idempotent acks=all producer in a thread, remembering what was acknowledged where."""

    def __init__(self, bootstrap: str, topic: str, pad: int = 100, pause: float = 0.01) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                           "batch.size": 4096,
                           "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000})
        self.topic, self.pad = topic, b"x" * pad
        # between records (read each time: a test may slow the producer down). At full speed the
        # test's tiny local retention lasts less than one replica fetch round trip, and a replica
        # restarted from remote storage chases the leader's local log start (as in Kafka).
        self.pause = pause
        self.acked: dict[bytes, int] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg) -> None:  # noqa: ANN001
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.value()] = msg.offset()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.p.produce(self.topic, b"seq-%08d-" % self.sent + self.pad, partition=0, on_delivery=self._on_delivery)
            self.sent += 1
            self.p.poll(self.pause)
        self.p.flush(150)

    def start(self) -> _Producer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)


def _assert_every_ack_readable(c: Cluster, topic: str, prod: _Producer) -> None:
    assert prod.failed == [], prod.failed[:5]
    assert len(prod.acked) == prod.sent
    got = ck_read_to_end(c.bootstrap, topic, timeout=90)
    assert [m.offset for m in got] == list(range(len(got))), "offsets from 0 without a hole"
    at = {m.offset: m.value for m in got}
    for value, offset in prod.acked.items():
        assert at.get(offset) == value, f"{value[:13]!r} acknowledged at {offset}, found {at.get(offset, b'')[:13]!r}"
    assert len(got) == len(prod.acked), "a record that was never acknowledged, or one twice"


@pytest.fixture
def s3_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The same three brokers on the ``s3`` backend against moto's S3 server on loopback."""
    boto3 = pytest.importorskip("boto3")
    from tests.s3_server import MotoServer, aws_test_env

    with aws_test_env():  # the brokers inherit these fake credentials
        server = MotoServer()
        server.start()
        try:
            boto3.client("s3", region_name="us-east-1", endpoint_url=server.url).create_bucket(Bucket="tiered")
            overrides = {k: v for k, v in tiered_overrides(tmp_path / "unused").items() if k != "rsm.config.dir"}
            overrides.update({
                "remote.log.storage.manager.class.name": "s3",
                "rsm.config.s3.bucket": "tiered",
                "rsm.config.s3.prefix": "kavka/",
                "rsm.config.s3.region": "us-east-1",
                "rsm.config.s3.endpoint.url": server.url,
            })
            yield from _running(Cluster(tmp_path, 3, overrides=overrides))
        finally:
            server.stop()


def test_new_leader_continues_copying_after_kill_9(cluster: Cluster) -> None:
    _new_leader_continues_copying(cluster)


def test_new_leader_continues_copying_after_kill_9_on_s3(s3_cluster: Cluster) -> None:
    _new_leader_continues_copying(s3_cluster)


def _new_leader_continues_copying(cluster: Cluster) -> None:
    topic = unique("tier-failover")
    admin = ck_admin(cluster.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3, config=TIERED)])[topic].result(20)
    _isr(cluster, topic, 3)
    prod = _Producer(cluster.bootstrap, topic).start()
    try:
        old = _leader(cluster, topic)
        wait_until(lambda: list_offset(cluster.nodes[old], topic, LATEST_TIERED)[1] > 300, timeout=60,
                   message="the first leader copying segments")
        cluster.nodes[old].kill()
        new = wait_until(lambda: (lambda p: p.leader if p.leader not in (old, -1) else None)(_part(cluster, topic)),
                         timeout=SESSION_MS / 1000 + 15, message="a new leader")
        copied_before = list_offset(cluster.nodes[new], topic, LATEST_TIERED)[1]
        wait_until(lambda: list_offset(cluster.nodes[new], topic, LATEST_TIERED)[1] > copied_before + 300, timeout=60,
                   message="the new leader copying on")
        cluster.nodes[old].start()
        _isr(cluster, topic, 3)
    finally:
        prod.stop()
    _assert_every_ack_readable(cluster, topic, prod)

    # the closed segments all copied: every finished segment, from both leaders, contiguous
    leader = _leader(cluster, topic)
    end = list_offset(cluster.nodes[leader], topic, -1)[1]
    wait_until(lambda: list_offset(cluster.nodes[leader], topic, LATEST_TIERED)[1] >= end - 200, timeout=60,
               message="the closed segments copied")
    segs = wait_until(lambda: remote_segments(cluster, topic), timeout=20, message="the remote metadata read")
    assert_contiguous(segs)
    copiers = {m.broker_id for m in segs}
    assert {old, new} <= copiers, f"segments copied by {copiers}, the leaders were {old} then {new}"

    # every replica keeps only a local tail, and deleted nothing the leader had not copied
    tiered = list_offset(cluster.nodes[leader], topic, LATEST_TIERED)[1]
    for n in cluster.brokers:
        def tail_only(n: int = n) -> bool:
            first, size = local_tail(cluster, n, topic)
            return first > 0 and size <= LOCAL_RETENTION + 3 * SEGMENT
        wait_until(tail_only, timeout=30, message=f"broker {n} down to its local tail")
        assert int(local_log_files(cluster, n, topic)[0].stem) <= tiered + 1, f"broker {n} deleted an uncopied segment"


def test_wiped_follower_rebuilds_only_the_local_tail(split_cluster: Cluster) -> None:
    c = split_cluster
    topic = unique("tier-rebuild")
    admin = ck_admin(c.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3, config=TIERED)])[topic].result(20)
    _isr(c, topic, 3)
    prod = _Producer(c.bootstrap, topic, pad=300, pause=0.001).start()
    try:
        leader = _leader(c, topic)
        wait_until(lambda: list_offset(c.nodes[leader], topic, EARLIEST_LOCAL)[1] > 3000, timeout=120,
                   message="several times the local retention produced and tiered")
        prod.pause = 0.02  # the local retention now spans seconds of producing
        # a follower that hosts no replica of __remote_log_metadata: it reads the remote state over the network
        md_host = admin.list_topics(topic=REMOTE_LOG_METADATA_TOPIC, timeout=10).topics[REMOTE_LOG_METADATA_TOPIC].partitions[0].replicas
        victim = next(b for b in c.brokers if b != leader and b not in md_host)
        assert c.nodes[victim].stop() == 0
        shutil.rmtree(partition_dir(c.nodes[victim].log_dirs[0], topic))
        c.nodes[victim].start()
        _isr(c, topic, 3)
    finally:
        prod.stop()
    text = "".join(c.nodes[victim].output)  # all of it: log_text() keeps the last 200 lines, and a
    # loaded machine logs more than that in segment deletions after the rebuild
    assert "rebuilt from remote storage" in text, text[-3000:]

    # it started from the leader's local tail, never from offset 0 ...
    m = re.search(r"rebuilt from remote storage: local log starts at (\d+) .* log start offset (\d+), (\d+) leader "
                  r"epochs, producer snapshot of (\d+) bytes", text)
    assert m is not None and int(m.group(1)) > 3000, m
    # the log start offset stays the remote one; epochs and the idempotent producer's state came along
    assert int(m.group(2)) == 0 and int(m.group(3)) >= 1 and int(m.group(4)) > 0, m.group(0)
    assert f"{topic}-0 restarts at" not in text
    # ... and, once its local retention caught up with what it fetched meanwhile, holds about the
    # local retention, not the log
    def tail_only() -> bool:
        first, size = local_tail(c, victim, topic)
        return first > 0 and size <= LOCAL_RETENTION + 3 * SEGMENT
    wait_until(tail_only, timeout=30, message="the rebuilt replica down to its local tail")
    on_disk = local_tail(c, victim, topic)[1]
    whole = on_disk + sum(m.segment_size_in_bytes for m in remote_segments(c, topic))
    assert whole > 5 * on_disk, (whole, on_disk)
    _assert_every_ack_readable(c, topic, prod)

    # the rebuilt replica alone: it leads, serves offset 0 from remote storage, takes idempotent produce
    for b in c.brokers:
        if b != victim:
            assert c.nodes[b].stop() == 0
    wait_until(lambda: _part(c, topic).leader == victim, timeout=30, message="the rebuilt replica leading")
    assert list_offset(c.nodes[victim], topic, -2) == (0, 0)  # its log start offset is the remote one
    # min.insync.replicas=2 holds back acks=all with one replica: acks=1 shows it takes appends
    p = Producer({"bootstrap.servers": c.nodes[victim].bootstrap, "acks": "1", "enable.idempotence": False})
    errors: list = []
    for i in range(20):
        p.produce(topic, b"after-%02d" % i, partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors == [None] * 20
    # Below min.insync.replicas the high watermark waits (Kafka's isUnderMinIsr, KIP-966): the
    # appends become readable once the others are back in the ISR.
    for b in c.brokers:
        if b != victim:
            c.nodes[b].start()
    _isr(c, topic, 3)
    got = ck_read_to_end(c.nodes[victim].bootstrap, topic, timeout=90)
    assert [m.offset for m in got] == list(range(len(got)))
    assert [m.value for m in got[-20:]] == [b"after-%02d" % i for i in range(20)]
    at = {m.offset: m.value for m in got}
    assert all(at.get(o) == v for v, o in prod.acked.items())


@pytest.fixture
def unclean_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """One controller-only voter and three brokers; __remote_log_metadata on all three."""
    yield from _running(Cluster(tmp_path, 4, overrides=tiered_overrides(tmp_path / "remote"), controllers=1))


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 4096,
                  "message.timeout.ms": 60000})
    offsets: list[int] = []
    errors: list[str] = []
    for v in values:
        p.produce(topic, v, partition=0,
                  on_delivery=lambda err, msg: errors.append(str(err)) if err else offsets.append(msg.offset()))
        p.poll(0)
    p.flush(60)
    assert errors == [] and len(offsets) == len(values), errors[:3]
    return offsets


def test_unclean_election_reads_and_copies_only_the_new_leaders_lineage(unclean_cluster: Cluster) -> None:
    """KIP-405 after an unclean election (Kafka's isRemoteSegmentWithinLeaderEpochs): the old
    leader copied records the new leader never had; the new leader neither serves those remote
    segments nor counts them as copied -- it copies its own records for that range, so a reader
    from offset 0 gets exactly the new leader's history."""
    c = unclean_cluster
    topic = unique("tiered-unclean")
    admin = ck_admin(c.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 2, config={
        **TIERED, "min.insync.replicas": "1", "unclean.leader.election.enable": "true"})])[topic].result(30)
    wait_until(lambda: _part(c, topic).leader >= 0 and len(_part(c, topic).isrs) == 2, timeout=30,
               message="led, with both replicas in the ISR")
    a = _part(c, topic).leader
    b = next(r for r in _part(c, topic).replicas if r != a)
    pad = b"p" * 100
    both = [b"both-%04d-" % i + pad for i in range(300)]
    _produce(c.nodes[a].bootstrap, topic, both)
    wait_until(lambda: list_offset(c.nodes[a], topic, LATEST_TIERED)[1] >= 100, timeout=60,
               message="the first leader to copy")
    c.nodes[b].kill()
    _isr(c, topic, 1)
    _produce(c.nodes[a].bootstrap, topic, [b"a-only-%04d-" % i + pad for i in range(400)])
    wait_until(lambda: list_offset(c.nodes[a], topic, LATEST_TIERED)[1] >= len(both) + 200, timeout=60,
               message="the first leader to copy records only it has")
    c.nodes[a].kill()
    c.nodes[b].start()
    wait_until(lambda: _part(c, topic).leader == b, timeout=SESSION_MS / 1000 + 30,
               message="the out-of-sync replica elected uncleanly")
    diverged = [m for m in remote_segments(c, topic) if m.broker_id == a and m.end_offset >= len(both) + 100]
    assert diverged, "the scenario needs remote segments only the old leader's history has"

    mine = [b"b-%04d-" % i + pad for i in range(900)]  # past the local retention: its start passes ~400
    offsets = _produce(c.nodes[b].bootstrap, topic, mine)
    start = offsets[0]
    assert start <= len(both)  # the new leader's history: it had at most what was acknowledged to both
    # its own records reach remote storage and leave its local disk (so they are read back from there)
    wait_until(lambda: list_offset(c.nodes[b], topic, EARLIEST_LOCAL)[1] > start + 100, timeout=90,
               message="the new leader to copy its own records and delete them locally")
    got = ck_read_to_end(c.nodes[b].bootstrap, topic, [0], timeout=60)
    assert [m.offset for m in got] == list(range(len(got)))
    values = [m.value for m in got]
    assert values[:start] == both[:start]
    assert values[start:] == mine, "a record of the old leader's diverged history was served"
    segs = remote_segments(c, topic)
    assert any(m.broker_id == b and m.start_offset <= start <= m.end_offset for m in segs), \
        "the new leader copied the range the old leader's diverged segments cover"
    # ... and only that: what the old leader copied of the shared history was not copied again
    # (the restarted broker waited to catch up on __remote_log_metadata before copying)
    shared_end = max(m.end_offset for m in segs if m.broker_id == a and m.end_offset < start)
    assert all(m.end_offset > shared_end for m in segs if m.broker_id == b), \
        [(m.broker_id, m.start_offset, m.end_offset) for m in segs]
