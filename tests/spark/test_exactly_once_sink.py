"""`kavka.sink.semantics=exactly_once`: one transaction per task with a progress record.

The crash window of a streaming query -- a micro-batch whose tasks committed
their transactions but whose commit Spark never recorded in the checkpoint --
is made by deleting the last file of the checkpoint's ``commits/`` directory
before a restart: Spark then runs that batch again with the same offsets.
The exactly-once sink writes every row once (a read_committed confluent-kafka
consumer counts them); the default at-least-once sink, in the same scenario,
writes the replayed batch twice (which shows the test can fail).

`write_batches` is also called directly, as an executor calls it, for a task
re-run after its commit and for a zombie attempt fenced by a newer one.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from kavka.client.producer import ProducerFencedError
from kavka.spark.options import parse_sink_options
from kavka.spark.sink import TaskIdentity, ensure_progress_topic, write_batches
from tests.integration.helpers import ck_read_to_end
from tests.spark.util import create_topic, produce_per_partition

pytestmark = pytest.mark.timeout(400)


def _committed_values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    recs = ck_read_to_end(bootstrap, topic, list(range(partitions)), conf={"isolation.level": "read_committed"})
    return [r.value for r in recs]


def _run(spark, bootstrap, src, out, checkpoint, semantics):
    q = (
        spark.readStream.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30")
        .load()
        .selectExpr("CAST(concat(CAST(partition AS STRING), ':', CAST(offset AS STRING)) AS BINARY) AS value")
        .writeStream.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("kavka.sink.semantics", semantics)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "availableNow query did not finish in time"
    assert q.exception() is None, q.exception()
    return sum(p["numInputRows"] for p in q.recentProgress)


@pytest.mark.parametrize("semantics", ["exactly_once", "at_least_once"])
def test_replayed_micro_batch(spark, broker, topic_name, tmp_path, semantics):
    src, out = topic_name, topic_name + "-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, out, 2)
    produce_per_partition(broker.bootstrap, src, 2, 40)
    want = sorted(b"%d:%d" % (p, o) for p in range(2) for o in range(40))
    checkpoint = tmp_path / "checkpoint"

    assert _run(spark, broker.bootstrap, src, out, checkpoint, semantics) == 80
    assert sorted(_committed_values(broker.bootstrap, out, 2)) == want

    # The crash window: the last batch's tasks committed, its commit record is lost.
    commits = sorted((f for f in (checkpoint / "commits").iterdir() if f.name.isdigit()), key=lambda f: int(f.name))
    assert len(commits) >= 3, [f.name for f in commits]
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()

    replayed = _run(spark, broker.bootstrap, src, out, checkpoint, semantics)
    assert replayed > 0  # Spark did run the batch again
    got = sorted(_committed_values(broker.bootstrap, out, 2))
    if semantics == "exactly_once":
        assert got == want
    else:
        assert len(got) == len(want) + replayed and sorted(set(got)) == want


def _opts(bootstrap: str, topic: str):
    return parse_sink_options({
        "kafka.bootstrap.servers": bootstrap, "topic": topic, "kavka.sink.semantics": "exactly_once",
        "kafka.request.timeout.ms": "20000",
    })


def _batch(values: list[bytes]):
    return pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["value"])


def test_task_rerun_after_commit_writes_nothing(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    opts = _opts(broker.bootstrap, topic_name)
    ensure_progress_topic(opts)
    rows = [b"r%d" % i for i in range(25)]
    who = TaskIdentity(f"w-{topic_name}", 3, 0)
    first = write_batches(opts, iter([_batch(rows)]), who)
    assert (first.records, first.skipped) == (25, False)
    again = write_batches(opts, iter([_batch(rows)]), who)  # Spark re-runs the committed task
    assert (again.records, again.skipped) == (0, True)
    # The next epoch of the same task is written; another partition of the write too.
    nxt = write_batches(opts, iter([_batch([b"n0"])]), TaskIdentity(who.write_id, 3, 1))
    other = write_batches(opts, iter([_batch([b"o0"])]), TaskIdentity(who.write_id, 4, 0))
    assert (nxt.records, other.records) == (1, 1)
    assert sorted(_committed_values(broker.bootstrap, topic_name, 2)) == sorted(rows + [b"n0", b"o0"])


def test_a_zombie_attempt_is_fenced_and_its_rows_aborted(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    opts = _opts(broker.bootstrap, topic_name)
    ensure_progress_topic(opts)
    who = TaskIdentity(f"z-{topic_name}", 0, 5)

    def zombie_rows():
        yield _batch([b"zombie-%d" % i for i in range(5)])
        # While the first attempt is still writing, a second attempt of the task starts
        # and commits: its InitProducerId aborts this transaction and fences this producer.
        second = write_batches(opts, iter([_batch([b"second"])]), who)
        assert second.records == 1
        yield _batch([b"zombie-late"])

    with pytest.raises(ProducerFencedError):
        write_batches(opts, zombie_rows(), who)
    assert _committed_values(broker.bootstrap, topic_name, 1) == [b"second"]


def test_batch_write_exactly_once(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    rows = [(b"b%d" % i,) for i in range(50)]
    (
        spark.createDataFrame(rows, "value binary").repartition(3)
        .write.format("kavka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .option("kavka.sink.semantics", "exactly_once")
        .mode("append").save()
    )
    assert sorted(_committed_values(broker.bootstrap, topic_name, 2)) == sorted(r[0] for r in rows)


def test_exactly_once_option_checks():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
    assert parse_sink_options(base).exactly_once is False
    assert parse_sink_options({**base, "kavka.sink.semantics": "exactly_once"}).exactly_once is True
    with pytest.raises(ValueError, match=r"^kavka.sink.semantics"):
        parse_sink_options({**base, "kavka.sink.semantics": "maybe"})
    with pytest.raises(ValueError, match=r"^kavka.sink.semantics"):
        parse_sink_options({**base, "kavka.sink.semantics": "exactly_once", "kafka.acks": "1"})
