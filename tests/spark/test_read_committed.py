"""`kafka.isolation.level` in the source: committed, aborted and open transactions.

A confluent-kafka transactional producer (a client independent of the
connector) commits some transactions and aborts others, interleaved with
plain records, and leaves one open. read_committed returns exactly the
committed and plain records below the last stable offset; read_uncommitted
returns every data record (aborted and open ones too) but never a
transaction marker as a row. Markers leave gaps in the offsets, so the
ranges Spark plans return fewer rows than their width; the streaming test
uses a small maxOffsetsPerTrigger so micro-batch boundaries fall on gaps.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from tests.integration.helpers import CK_COMMON, ck_producer
from tests.spark.util import create_topic

pytestmark = pytest.mark.timeout(300)


def _txn_producer(bootstrap: str) -> Producer:
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"txid-{uuid.uuid4().hex[:8]}",
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
        **CK_COMMON,
    })
    p.init_transactions(30)
    return p


def _write_transactions(bootstrap: str, topic: str) -> tuple[Producer, set[bytes], set[bytes], set[bytes]]:
    """Committed, aborted and plain records in 2 partitions, then one open transaction.
    Returns (producer with the open transaction, visible, aborted, open) values."""
    p = _txn_producer(bootstrap)
    plain = ck_producer(bootstrap)
    visible: set[bytes] = set()
    aborted: set[bytes] = set()
    for t in range(6):
        p.begin_transaction()
        values = [b"t%d-%d" % (t, i) for i in range(5)]
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % 2)
        p.flush(30)
        if t % 3 == 1:
            p.abort_transaction(30)
            aborted.update(values)
        else:
            p.commit_transaction(30)
            visible.update(values)
        v = b"plain-%d" % t
        plain.produce(topic, value=v, partition=t % 2)
        plain.flush(30)
        visible.add(v)
    p.begin_transaction()
    open_values = {b"open-%d" % i for i in range(4)}
    for i, v in enumerate(sorted(open_values)):
        p.produce(topic, value=v, partition=i % 2)
    p.flush(30)
    return p, visible, aborted, open_values


def _batch_values(spark, bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    df = (
        spark.read.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", isolation)
        .option("minPartitions", "5")  # ranges split across marker gaps
        .load()
    )
    return [bytes(r.value) for r in df.select("value").collect()]


def test_batch_read_committed_and_uncommitted(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    p, visible, aborted, open_values = _write_transactions(broker.bootstrap, topic_name)
    try:
        committed = _batch_values(spark, broker.bootstrap, topic_name, "read_committed")
        assert sorted(committed) == sorted(visible)
        everything = _batch_values(spark, broker.bootstrap, topic_name, "read_uncommitted")
        # Every data record once, no marker rows (a marker would be an extra row).
        assert sorted(everything) == sorted(visible | aborted | open_values)
        # The default is read_uncommitted, as with Spark's Kafka source.
        df = (
            spark.read.format("kavka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name).option("startingOffsets", "earliest").load()
        )
        assert df.count() == len(everything)

        p.commit_transaction(30)
        committed = _batch_values(spark, broker.bootstrap, topic_name, "read_committed")
        assert sorted(committed) == sorted(visible | open_values)
    finally:
        p.flush(10)


def test_streaming_read_committed(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 2)
    p, visible, _aborted, open_values = _write_transactions(broker.bootstrap, topic_name)

    def run() -> None:
        q = (
            spark.readStream.format("kavka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name)
            .option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed")
            .option("maxOffsetsPerTrigger", "7")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(180), "availableNow query did not finish in time"
        assert q.exception() is None, q.exception()

    def values() -> list[bytes]:
        return [bytes(r.value) for r in spark.read.parquet(str(tmp_path / "out")).select("value").collect()]

    try:
        run()
        # Stops at the LSO: the open transaction is neither read nor waited for.
        assert sorted(values()) == sorted(visible)
        p.commit_transaction(30)
        run()  # resumes from the checkpoint and reads the now-committed records
        assert sorted(values()) == sorted(visible | open_values)
    finally:
        p.flush(10)
