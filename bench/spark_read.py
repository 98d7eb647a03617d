"""Benchmark: Spark batch read and write of a kavka topic vs a plain confluent-kafka client, and
kavka's pure-Python connector (format "kavka") vs Spark's own JVM connector (format "kafka").

Starts a local kavka broker (or uses --bootstrap), fills a topic with
--records records of --value-bytes bytes, then in the same run measures

- read: `spark.read.format("kavka") ... .count()` (local[--cores], after a
  warm-up that starts the Python workers) next to a confluent-kafka Consumer
  that assign()s every partition and consumes to the end and next to
  `spark.read.format("kafka") ... .count()`, interleaved for --runs rounds;
  medians count;
- write: `df.write.format("kavka")` of the same number of cached rows
  (12-byte keys, --value-bytes values) next to the confluent-kafka Producer
  (linger 20 ms, acks=all) writing as many records and next to
  `df.write.format("kafka")`, interleaved for --runs rounds after a warm-up of
  each; medians count;
- stream: `spark.readStream.format("kavka")` and `.format("kafka")` of the
  whole topic (startingOffsets earliest, maxOffsetsPerTrigger = records /
  --stream-batches, a trigger of availableNow) into the `noop` sink, each with
  a new checkpoint, from start() to the query's end, interleaved for --runs
  rounds; medians count.

Spark's JVM connector is spark-sql-kafka-0-10 from .cache/java (fetched by
scripts/java-deps.sh; tests/java_deps.py), on the session's spark.jars; with
--no-jvm those rows are left out. Every measurement also takes the CPU
seconds of this process and all its descendants (the Spark JVM, its Python
workers and the local broker), so a loaded machine's figures can be read by
cost as well as by time.

Prints rows/s, MB/s (key + value bytes) and CPU seconds, the Spark / confluent
ratio and the kavka / JVM-connector ratio (the JVM connector's time over
format "kavka"'s: above 1, kavka's is faster); --json writes the figures to a
file. Not part of the test suite (a tiny smoke run is:
tests/spark/test_bench_smoke.py).

    .venv/bin/python bench/spark_read.py --records 200000 --value-bytes 100
    .venv/bin/python bench/spark_read.py --records 200000 --value-bytes 1024 --cores 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table


def produce(bootstrap: str, topic: str, records: int, value_bytes: int) -> float:
    from confluent_kafka import Producer

    value = os.urandom(value_bytes)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "acks": "all", "queue.buffering.max.messages": 1_000_000})
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, key=b"key-%08d" % i)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not delivered")
    return time.perf_counter() - t


def confluent_read(bootstrap: str, topic: str, partitions: int, records: int) -> tuple[float, int]:
    from confluent_kafka import Consumer, TopicPartition

    # fetch.queue.backoff.ms: librdkafka's default (1 s) left this consumer idle for a second once
    # its queue filled (28 Nov: 2.2 s for 200,000 records with 0.5 s of CPU); bench.workloads.consume
    # explains it and sets the same.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 50 * 1024 * 1024, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = size = 0
    eof: set[int] = set()
    t = time.perf_counter()
    deadline = time.monotonic() + 600
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error():
                eof.add(m.partition())
                continue
            seen += 1
            size += len(m.value()) + len(m.key() or b"")
    elapsed = time.perf_counter() - t
    c.close()
    if seen != records:
        raise RuntimeError(f"confluent-kafka read {seen} of {records} records")
    return elapsed, size


def cpu_now() -> float:
    """CPU seconds so far of this process and of every process below it (the Spark JVM, its
    Python workers, a local broker), reaped children included, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    own: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        own[pid] = sum(int(x) for x in fields[11:15]) / ticks  # utime stime cutime cstime
    me = os.getpid()

    def below_me(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == me:
                return True
        return False

    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + sum(
        c for pid, c in own.items() if pid != me and below_me(pid)
    )


def timed(fn: Callable[[], float | None]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of fn(); fn may return its own wall time."""
    cpu0 = cpu_now()
    t = time.perf_counter()
    own = fn()
    wall = own if own is not None else time.perf_counter() - t
    return wall, cpu_now() - cpu0


def spark_read(spark, bootstrap: str, topic: str, records: int, fmt: str = "kavka") -> float:  # noqa: ANN001
    df = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option(
        "subscribe", topic
    ).load()
    t = time.perf_counter()
    n = df.count()
    elapsed = time.perf_counter() - t
    if n != records:
        raise RuntimeError(f"Spark read ({fmt}) {n} of {records} records")
    return elapsed


def spark_stream(spark, bootstrap: str, topic: str, records: int, per_trigger: int,  # noqa: ANN001
                 fmt: str = "kavka") -> float:
    """The whole topic through a streaming query (availableNow, micro-batches of `per_trigger`
    offsets) into the noop sink, with a new checkpoint; start() to the query's end."""
    checkpoint = tempfile.mkdtemp(prefix=f"kavka-bench-{fmt}-ckpt-")
    t = time.perf_counter()
    q = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", str(per_trigger)).load()
         .writeStream.format("noop").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    if not q.awaitTermination(600):
        q.stop()
        raise RuntimeError(f"the {fmt} stream did not finish in 600 s")
    elapsed = time.perf_counter() - t
    if q.exception() is not None:
        raise RuntimeError(f"the {fmt} stream failed: {q.exception()}")
    n = sum(p["numInputRows"] for p in q.recentProgress)
    if n != records:
        raise RuntimeError(f"Spark stream ({fmt}) read {n} of {records} records")
    return elapsed


def write_frame(spark, records: int, value_bytes: int):  # noqa: ANN001, ANN201
    """A cached DataFrame of `records` rows (key-%08d, value_bytes bytes) to write."""
    from pyspark.sql import functions as F

    df = spark.range(records).select(
        F.format_string("key-%08d", "id").alias("key"),
        F.expr(f"unhex(repeat('ab', {value_bytes}))").alias("value"),
    )
    df.cache().count()  # generate rows before timing
    return df


def spark_write(df, bootstrap: str, topic: str, fmt: str = "kavka") -> float:  # noqa: ANN001
    t = time.perf_counter()
    (df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    return time.perf_counter() - t


def _median(runs: list[float]) -> float | None:
    return statistics.median(runs) if runs else None


def main(argv: list[str] | None = None, *, spark=None) -> dict:  # noqa: ANN001
    """Run the benchmark; with `spark`, use that session (and leave it running; with the JVM
    connector it must have been started with its jars)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="use this cluster instead of starting a local kavka broker")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3,
                    help="interleaved rounds (confluent, format kavka, format kafka); medians count")
    ap.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    ap.add_argument("--no-write", action="store_true", help="skip the write benchmark")
    ap.add_argument("--no-read", action="store_true", help="skip the read rounds (write only)")
    ap.add_argument("--no-stream", action="store_true", help="skip the streaming rounds")
    ap.add_argument("--no-jvm", action="store_true",
                    help="leave Spark's JVM connector (format kafka) out")
    ap.add_argument("--stream-batches", type=int, default=10,
                    help="micro-batches of a streaming round (maxOffsetsPerTrigger = records / this)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    console = Console()

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "src"))
    sys.path.insert(0, str(root))
    from kavka.client.admin import AdminClient, NewTopic
    from kavka.local_cluster import LocalCluster
    from kavka.spark.session import local_session

    jvm = not args.no_jvm
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = LocalCluster(Path(tempfile.mkdtemp(prefix="kavka-bench-")), 1)  # one combined node
        bootstrap = broker.start()
    own_spark = spark is None
    # Wall and CPU seconds of each round, by path: confluent, kavka and jvm x read, write, stream.
    runs: dict[str, list[float]] = {f"{who}_{what}_{m}": [] for who in ("confluent", "kavka", "jvm")
                                    for what in ("read", "write", "stream") for m in ("s", "cpu_s")}

    def record(key: str, measured: tuple[float, float]) -> None:
        runs[f"{key}_s"].append(measured[0])
        runs[f"{key}_cpu_s"].append(measured[1])

    try:
        run = time.strftime("%H%M%S")
        topic, out_topic = f"bench-read-{run}", f"bench-write-{run}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(topic, args.partitions, 1), NewTopic(out_topic, args.partitions, 1)])
        with console.status(f"producing {args.records} records of {args.value_bytes} B"):
            produce(bootstrap, topic, args.records, args.value_bytes)
        with console.status("starting Spark"):
            if own_spark:
                conf = {}
                if jvm:
                    from tests.java_deps import spark_kafka_jars

                    conf["spark.jars"] = ",".join(str(j) for j in spark_kafka_jars())
                spark = local_session("kavka-bench", cores=args.cores,
                                      shuffle_partitions=args.partitions, **conf)
            spark_read(spark, bootstrap, topic, args.records)  # warm-up: Python workers, JIT
            if jvm:
                spark_read(spark, bootstrap, topic, args.records, "kafka")
        size = args.records * (12 + args.value_bytes)  # key-%08d keys
        for i in range(0 if args.no_read else args.runs):  # interleaved: all see the same load
            with console.status(f"read round {i + 1}/{args.runs}"):
                record("confluent_read", timed(
                    lambda: confluent_read(bootstrap, topic, args.partitions, args.records)[0]))
                record("kavka_read", timed(lambda: spark_read(spark, bootstrap, topic, args.records)))
                if jvm:
                    record("jvm_read", timed(lambda: spark_read(spark, bootstrap, topic, args.records, "kafka")))
        if not args.no_stream:
            per_trigger = math.ceil(args.records / args.stream_batches)
            for i in range(args.runs):
                with console.status(f"stream round {i + 1}/{args.runs}"):
                    record("kavka_stream", timed(
                        lambda: spark_stream(spark, bootstrap, topic, args.records, per_trigger)))
                    if jvm:
                        record("jvm_stream", timed(
                            lambda: spark_stream(spark, bootstrap, topic, args.records, per_trigger, "kafka")))
        if not args.no_write:
            ck_topic, jvm_topic = f"bench-ckwrite-{run}", f"bench-jvmwrite-{run}"
            with AdminClient(bootstrap) as admin:
                admin.create_topics([NewTopic(ck_topic, args.partitions, 1), NewTopic(jvm_topic, args.partitions, 1)])
            with console.status("Spark write: warm-up"):
                df = write_frame(spark, args.records, args.value_bytes)
                # one task per core, so every Python worker has loaded the writer
                spark_write(df.limit(2000).repartition(args.cores), bootstrap, out_topic)
                if jvm:
                    spark_write(df.limit(2000).repartition(args.cores), bootstrap, jvm_topic, "kafka")
                produce(bootstrap, ck_topic, 1000, args.value_bytes)
            for i in range(args.runs):  # interleaved, as the reads
                with console.status(f"write round {i + 1}/{args.runs}"):
                    record("confluent_write", timed(
                        lambda: produce(bootstrap, ck_topic, args.records, args.value_bytes)))
                    record("kavka_write", timed(lambda: spark_write(df, bootstrap, out_topic)))
                    if jvm:
                        record("jvm_write", timed(lambda: spark_write(df, bootstrap, jvm_topic, "kafka")))
            df.unpersist()
    finally:
        if own_spark and spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()

    mb = size / 1e6
    med = {k: _median(v) for k, v in runs.items()}

    def rows_s(key: str) -> float | None:
        return args.records / med[f"{key}_s"] if med[f"{key}_s"] else None

    def ratio(slow: str, fast: str) -> float | None:
        a, b = med[f"{slow}_s"], med[f"{fast}_s"]
        return a / b if a and b else None

    ck_s = med["confluent_read_s"]
    spark_s = med["kavka_read_s"]
    figures = {
        "records": args.records,
        "cores": args.cores,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        # the keys the earlier figures used (format kavka against confluent-kafka)
        "confluent_read_runs_s": runs["confluent_read_s"],
        "spark_read_runs_s": runs["kavka_read_s"],
        "confluent_read_rows_s": rows_s("confluent_read"),
        "confluent_read_mb_s": mb / ck_s if ck_s else None,
        "spark_read_rows_s": rows_s("kavka_read"),
        "spark_read_mb_s": mb / spark_s if spark_s else None,
        "read_ratio": ratio("confluent_read", "kavka_read"),
        "confluent_write_runs_s": runs["confluent_write_s"],
        "spark_write_runs_s": runs["kavka_write_s"],
        "confluent_write_rows_s": rows_s("confluent_write"),
        "spark_write_rows_s": rows_s("kavka_write"),
        "write_ratio": ratio("confluent_write", "kavka_write"),
        # Spark's JVM connector (format kafka) beside format kavka: above 1, kavka's is faster
        "jvm_read_rows_s": rows_s("jvm_read"),
        "jvm_write_rows_s": rows_s("jvm_write"),
        "kavka_stream_rows_s": rows_s("kavka_stream"),
        "jvm_stream_rows_s": rows_s("jvm_stream"),
        "kavka_vs_jvm_read": ratio("jvm_read", "kavka_read"),
        "kavka_vs_jvm_write": ratio("jvm_write", "kavka_write"),
        "kavka_vs_jvm_stream": ratio("jvm_stream", "kavka_stream"),
        "runs": runs,
        "medians": med,
    }
    table = Table(title=f"{args.records} records of {args.value_bytes} B, {args.partitions} partitions")
    for col in ("path", "rows/s", "MB/s", "CPU s", "Spark / confluent", "kavka / JVM"):
        table.add_column(col, justify="right" if col != "path" else "left")

    def row(label: str, key: str, vs_confluent: str | None = None, vs_jvm: str | None = None) -> None:
        if not med[f"{key}_s"]:
            return
        a = ratio(vs_confluent, key) if vs_confluent else None
        b = ratio(vs_jvm, key) if vs_jvm else None
        table.add_row(label, f"{rows_s(key):,.0f}", f"{mb / med[f'{key}_s']:,.1f}",
                      f"{med[f'{key}_cpu_s']:,.1f}", "" if a is None else f"{a:.2f}",
                      "" if b is None else f"{b:.2f}")

    row("read: confluent-kafka Consumer", "confluent_read")
    row("read: Spark format kavka, count()", "kavka_read", "confluent_read", "jvm_read")
    row("read: Spark format kafka (JVM), count()", "jvm_read", "confluent_read")
    # `mb` counts the read topic's key + value bytes: the written rows have the same sizes.
    row("write: confluent-kafka Producer", "confluent_write")
    row("write: Spark format kavka", "kavka_write", "confluent_write", "jvm_write")
    row("write: Spark format kafka (JVM)", "jvm_write", "confluent_write")
    row("stream: format kavka, availableNow -> noop", "kavka_stream", None, "jvm_stream")
    row("stream: format kafka (JVM), availableNow -> noop", "jvm_stream")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    target = 0.8 if args.value_bytes < 1024 else 1.0
    if figures["read_ratio"] is not None and figures["read_ratio"] < target:
        console.print(f"[red]below the target: the Spark read should reach {target}x the plain "
                      "consumer's rate[/red]")
    if figures["write_ratio"] is not None and figures["write_ratio"] < 0.6:
        console.print("[red]below the target: the Spark write should reach 0.6x the plain "
                      "producer's rate[/red]")
    return figures


if __name__ == "__main__":
    main()
