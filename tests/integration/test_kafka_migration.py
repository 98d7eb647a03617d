"""A log directory written by a real Apache Kafka 4.4.0 broker, adopted by kavka (issue 30 item 3,
Kafka -> kavka), the way docs/storage.md's migration steps say.

Kafka (tests/kafka_reference.py) is written to by confluent-kafka: idempotent producers with
every codec, keys, null values, headers and timestamps, over small segments (rolled by a full
offset index: Kafka 4 allows no segment.bytes below 1 MiB), a committed and an aborted
transaction, a consumer group's commit; then stopped cleanly. A kavka broker is formatted, the
topic created with the same name and partition count, and the broker stopped; each partition
directory's files are replaced by Kafka's (kavka's partition.metadata kept: the topic id is
kavka's), and so are the __consumer_offsets partitions; the clean-shutdown marker is removed so
kavka recovers (checks every batch, rebuilds the indexes) what it did not write. Restarted, kavka
must serve every record at its offset with its timestamp, key, value and headers, hide the aborted
transaction from read_committed, find offsets by time, give the group its committed offsets, and,
once Kafka's producer state has expired (the documented step: a new cluster hands out producer
ids Kafka's producers used), take new idempotent writes after Kafka's last offset. And back: a new
Kafka broker adopts kavka's directories the same way and serves exactly what kavka served."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kavka.client.admin import AdminClient as KavkaAdmin
from tests.broker_harness import BrokerProcess
from tests.java_deps import run_kafka_tool
from tests.kafka_reference import KafkaReference
from tests.wait import wait_until

TOPIC, GROUP, PARTITIONS = "migrated", "migrated-group", 2
OFFSETS_PARTITIONS = 3  # offsets.topic.num.partitions, the same on both sides
ADOPTED = [f"{TOPIC}-{p}" for p in range(PARTITIONS)] + [f"__consumer_offsets-{p}" for p in range(OFFSETS_PARTITIONS)]
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 40
# (partition, offset, timestamp, key, value, headers)
Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def produce_to_kafka(bootstrap: str) -> tuple[list[Row], list[Row]]:
    """Every record acknowledged (the aborted one included), and the aborted one alone."""
    now = int(time.time() * 1000)
    rows: list[Row] = []

    def sent(headers: tuple) -> Any:  # a delivery report carries no headers: the ones sent
        def on_delivery(err: Any, msg: Any) -> None:
            assert err is None, err
            rows.append((msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), headers))
        return on_delivery

    for c, codec in enumerate(CODECS):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                      "linger.ms": 5})
        for i in range(PER_CODEC):
            headers = (("h", b"1"), ("h", None))[: i % 3]
            p.produce(TOPIC, partition=i % PARTITIONS, key=f"k{i}".encode(),
                      value=None if i == 7 else f"{codec}-{i}".encode(), headers=list(headers),
                      timestamp=now - 600_000 + c * 60_000 + i * 700, on_delivery=sent(headers))
            if i % 8 == 0:
                p.flush()
        assert p.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "migrated-txn"})
    txn.init_transactions(60)
    aborted: list[Row] = []
    for commit in (True, False):
        before = len(rows)
        txn.begin_transaction()
        txn.produce(TOPIC, partition=0, key=b"tk", value=b"commit" if commit else b"abort", on_delivery=sent(()))
        txn.flush(30)
        (txn.commit_transaction if commit else txn.abort_transaction)(60)
        if not commit:
            aborted = rows[before:]
    return rows, aborted


def consume(bootstrap: str, ends: dict[int, int], isolation: str) -> list[Row]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: list[Row] = []
    positions: dict[int, int] = {}

    def done() -> bool:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                        tuple(m.headers() or ())))
        positions.update({tp.partition: tp.offset for tp in c.position(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])})
        return all(positions.get(p, -1) >= end for p, end in ends.items())

    wait_until(done, timeout=30, interval=0, message=f"{isolation} read to the log ends {ends}")
    c.close()
    return got


def create_like_kafka(bootstrap: str, log_dir: Path, who: str) -> None:
    """The migration's step 2 on the target cluster: the topic, same name and partition count, and
    __consumer_offsets (which a group lookup, FindCoordinator, creates), until their dirs exist."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    looker = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    # NOT_COORDINATOR while the coordinator loads its new partitions
    wait_until(lambda: looker.committed([TopicPartition(TOPIC, 0)], timeout=10), timeout=60,
               message=f"{who}'s group coordinator")
    looker.close()
    wait_until(lambda: all((log_dir / name).is_dir() for name in ADOPTED), message=f"{who}'s partition dirs")


def adopt(source: Path, target: Path) -> None:
    """The migration's step 3: `target` gets `source`'s files, but keeps its partition.metadata."""
    topic_id = (target / "partition.metadata").read_bytes()
    shutil.rmtree(target)
    shutil.copytree(source, target)
    (target / "partition.metadata").write_bytes(topic_id)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("migration")
    kafka = KafkaReference(root / "kafka", {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={
            "segment.index.bytes": "64", "index.interval.bytes": "512"})])[TOPIC].result(60)
        rows, aborted = produce_to_kafka(kafka.bootstrap)
        group = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        committed = [TopicPartition(TOPIC, 0, 11), TopicPartition(TOPIC, 1, 17)]
        group.commit(offsets=committed, asynchronous=False)
        group.close()
    finally:
        kafka.stop()
    kafka_dir = kafka.log_dirs[0]

    # The migration's producer-state step (docs/storage.md): Kafka's producer ids expire at the
    # first check after the start (producer.id.expiration.ms is dynamic: set it back afterwards).
    broker = BrokerProcess(root / "kavka", overrides={
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "producer.id.expiration.ms": "1",
        "producer.id.expiration.check.interval.ms": "200"}).start()
    create_like_kafka(broker.bootstrap, broker.log_dirs[0], "kavka")
    assert broker.stop() == 0
    data = broker.log_dirs[0]
    for name in ADOPTED:
        adopt(kafka_dir / name, data / name)
    (data / ".kafka_cleanshutdown").unlink()
    broker.start()
    yield broker, rows, aborted, committed
    broker.stop()


def test_kavka_serves_every_record_kafka_wrote(migrated: Any) -> None:
    broker, rows, aborted, _ = migrated
    ends = {p: max(r[1] for r in rows if r[0] == p) + 1 for p in range(PARTITIONS)}
    ends[0] += 1  # the abort marker
    assert sorted(consume(broker.bootstrap, ends, "read_uncommitted")) == sorted(rows)
    assert sorted(consume(broker.bootstrap, ends, "read_committed")) == sorted(set(rows) - set(aborted))
    assert "truncat" not in broker.log_text().lower(), broker.log_text()


def test_kavka_finds_kafkas_offsets_by_time_and_its_log_ends(migrated: Any) -> None:
    broker, rows, _, _ = migrated
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    for p in range(PARTITIONS):
        mine = sorted((r for r in rows if r[0] == p), key=lambda r: r[1])
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
        assert low == 0 and high == mine[-1][1] + 1 + (p == 0)
        for r in mine[::9]:  # the first record whose timestamp is at or after r's
            want = min((x for x in mine if x[2] >= r[2]), key=lambda x: x[1])[1]
            found = c.offsets_for_times([TopicPartition(TOPIC, p, r[2])], timeout=30)[0]
            assert found.offset == want, (p, r, found)
    c.close()


def test_the_groups_kafka_committed_offsets_carry_over(migrated: Any) -> None:
    broker, _, _, committed = migrated
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    got = wait_until(lambda: c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10),
                     timeout=30, message="the group's offsets from kavka's coordinator")
    assert [(tp.partition, tp.offset) for tp in got] == [(tp.partition, tp.offset) for tp in committed]
    c.close()


def test_kavka_appends_after_kafkas_last_offset(migrated: Any) -> None:
    broker, rows, _, _ = migrated
    end0 = max(r[1] for r in rows if r[0] == 0) + 2
    with KavkaAdmin(broker.bootstrap) as admin:
        wait_until(lambda: admin.describe_producers([(TOPIC, 0)])[(TOPIC, 0)] == [], timeout=30,
                   message="Kafka's producer state expired")
        # and the expiry set back, with the command docs/storage.md gives
        res = run_kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                             "--entity-type", "brokers", "--entity-default", "--alter",
                             "--add-config", "producer.id.expiration.ms=86400000")
        assert res.returncode == 0, res.stdout + res.stderr
        wait_until(lambda: next(e.value for e in admin.describe_configs("broker", str(broker.node_id))
                                if e.name == "producer.id.expiration.ms") == "86400000",
                   message="producer.id.expiration.ms set back")
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    acked: list[Any] = []
    for i in range(5):
        p.produce(TOPIC, partition=0, value=f"after-{i}".encode(),
                  on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert p.flush(30) == 0
    assert acked == [(None, end0 + i) for i in range(5)]


def test_kafka_takes_the_partitions_back(migrated: Any, tmp_path: Path) -> None:
    """And back (last in the file: it stops the kavka broker): a new Kafka cluster adopts kavka's
    directories of the topic and of __consumer_offsets the same way, recovers them, serves exactly
    what kavka served, Kafka's first records and kavka's appends alike, and gives the group the
    offsets it last committed on kavka (records kavka wrote, loaded by Kafka's coordinator)."""
    broker, rows, _, _ = migrated
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
            for c in [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})] for p in range(PARTITIONS)}
    served = consume(broker.bootstrap, ends, "read_uncommitted")
    assert set(rows) <= set(served)
    on_kavka = [TopicPartition(TOPIC, 0, 23), TopicPartition(TOPIC, 1, 29)]
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    group.commit(offsets=on_kavka, asynchronous=False)
    group.close()
    assert broker.stop() == 0
    kafka = KafkaReference(tmp_path / "kafka-again", {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)})
    try:
        kafka.start()
        create_like_kafka(kafka.bootstrap, kafka.log_dirs[0], "Kafka")
        kafka.stop()  # the JVM exits 143 after its clean shutdown; the marker below proves it clean
        for name in ADOPTED:
            adopt(broker.log_dirs[0] / name, kafka.log_dirs[0] / name)
        (kafka.log_dirs[0] / ".kafka_cleanshutdown").unlink()
        kafka.start()
        assert sorted(consume(kafka.bootstrap, ends, "read_uncommitted")) == sorted(served)
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": GROUP})
        got = wait_until(lambda: c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10),
                         timeout=60, message="the group's offsets from Kafka's coordinator")
        c.close()
        assert [(tp.partition, tp.offset) for tp in got] == [(tp.partition, tp.offset) for tp in on_kavka]
    finally:
        kafka.stop()
