"""The Spark source and sink against a replicated cluster while a leader is killed -9 (issue 12).

One controller-only voter and three brokers; topics with three replicas and
min.insync.replicas=2. Two streaming queries run side by side, 50 records a partition per
micro-batch: `src` -> Parquet (the source) and `src` -> `dst` through format kavka (source and
sink, the sink's idempotent producer with acks=all). Mid-stream the broker leading `src`-0 is
killed -9; both queries carry on against the new leaders. At the end the Parquet output holds
every record of `src` exactly once at its offset, and `dst` holds every value of `src` exactly
once (its batches retried to the new leader are deduplicated by producer id and sequence).
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from confluent_kafka.admin import NewTopic

from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, ck_producer, ck_read_to_end
from tests.wait import wait_until

PARTITIONS = 2
PER_PARTITION = 600


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path / "cluster", 4, controllers=1, overrides={
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "5000",
    }).start()
    try:
        yield c
    finally:
        c.stop()


def _create(c: Cluster, *names: str) -> None:
    admin = ck_admin(c.bootstrap)
    futs = admin.create_topics([NewTopic(n, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for n in names])
    for f in futs.values():
        f.result(20)

    def ready() -> bool:
        md = admin.list_topics(timeout=10)
        return all(n in md.topics and len(md.topics[n].partitions) == PARTITIONS
                   and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.topics[n].partitions.values())
                   for n in names)

    wait_until(ready, timeout=30, message="topics led with full ISRs")


def _parquet(spark, path):  # noqa: ANN001, ANN202
    if not (path / "_spark_metadata").exists():
        return []
    return sorted((r[0], r[1], bytes(r[2])) for r in spark.read.parquet(str(path)).select("partition", "offset", "value").collect())


def test_streaming_source_and_sink_survive_a_leader_kill_exactly_once(spark, cluster: Cluster, tmp_path) -> None:  # noqa: ANN001
    src, dst = f"src-{uuid.uuid4().hex[:8]}", f"dst-{uuid.uuid4().hex[:8]}"
    _create(cluster, src, dst)
    values = {p: [f"{p}-{i}".encode() for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
    producer = ck_producer(cluster.bootstrap, {"acks": "all", "enable.idempotence": True})
    for p, vs in values.items():
        for v in vs:
            producer.produce(src, v, partition=p)
    assert producer.flush(60) == 0
    want = sorted((p, i, v) for p, vs in values.items() for i, v in enumerate(vs))

    def reader():  # noqa: ANN202
        return (spark.readStream.format("kavka").option("kafka.bootstrap.servers", cluster.bootstrap)
                .option("subscribe", src).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(50 * PARTITIONS)).load())

    to_parquet = (reader().select("partition", "offset", "value").writeStream.format("parquet")
                  .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "cp-parquet"))
                  .trigger(processingTime="300 milliseconds").start())
    to_topic = (reader().selectExpr("value").writeStream.format("kavka")
                .option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", dst)
                .option("checkpointLocation", str(tmp_path / "cp-topic"))
                .trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: len(_parquet(spark, tmp_path / "out")) >= 200, timeout=120,
                   message="the first micro-batches in Parquet")
        leader = ck_admin(cluster.bootstrap).list_topics(topic=src, timeout=10).topics[src].partitions[0].leader
        done_before = len(_parquet(spark, tmp_path / "out"))
        assert done_before < len(want), "the query finished before the kill: the test proved nothing"
        cluster.nodes[leader].kill()

        wait_until(lambda: len(_parquet(spark, tmp_path / "out")) >= len(want), timeout=180,
                   message="every record in Parquet after the leader's kill")
        assert to_parquet.exception() is None and to_topic.exception() is None

        def sunk() -> int:
            return sum(int(p["numInputRows"]) for p in to_topic.recentProgress)

        wait_until(lambda: to_topic.exception() is not None or sunk() >= len(want), timeout=180,
                   message="the kavka sink to have written every record")
        assert to_topic.exception() is None, to_topic.exception()
    finally:
        to_parquet.stop()
        to_topic.stop()
    assert _parquet(spark, tmp_path / "out") == want  # exactly once, at its offset
    survivor = next(n for n in cluster.brokers.values() if n.alive())
    got = ck_read_to_end(survivor.bootstrap, dst, partitions=list(range(PARTITIONS)))
    counts = Counter(r.value for r in got)
    assert sorted(counts.elements()) == sorted(v for vs in values.values() for v in vs)
    assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
