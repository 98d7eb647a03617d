"""Benchmark: Spark batch read and write of a kavka topic vs a plain confluent-kafka client.

Starts a local kavka broker (or uses --bootstrap), fills a topic with
--records records of --value-bytes bytes, then in the same run measures

- read: `spark.read.format("kavka") ... .count()` (local[--cores], after a
  warm-up that starts the Python workers) next to a confluent-kafka Consumer
  that assign()s every partition and consumes to the end, interleaved for
  --runs rounds; medians count;
- write: `df.write.format("kavka")` of the same number of cached rows
  (12-byte keys, --value-bytes values) next to the confluent-kafka Producer
  (linger 20 ms, acks=all) writing as many records, interleaved for --runs
  rounds after a warm-up of each; medians count.

Prints rows/s and MB/s (key + value bytes) and the Spark / confluent ratio;
--json writes the figures to a file. Not part of the test suite (a tiny
smoke run is: tests/spark/test_bench_smoke.py).

    .venv/bin/python bench/spark_read.py --records 200000 --value-bytes 100
    .venv/bin/python bench/spark_read.py --records 200000 --value-bytes 1024 --cores 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
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

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 50 * 1024 * 1024})
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


def spark_read(spark, bootstrap: str, topic: str, records: int) -> float:  # noqa: ANN001
    df = spark.read.format("kavka").option("kafka.bootstrap.servers", bootstrap).option(
        "subscribe", topic
    ).load()
    t = time.perf_counter()
    n = df.count()
    elapsed = time.perf_counter() - t
    if n != records:
        raise RuntimeError(f"Spark read {n} of {records} records")
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


def spark_write(df, bootstrap: str, topic: str) -> float:  # noqa: ANN001
    t = time.perf_counter()
    (df.write.format("kavka").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    return time.perf_counter() - t


def main(argv: list[str] | None = None, *, spark=None) -> dict:  # noqa: ANN001
    """Run the benchmark; with `spark`, use that session (and leave it running)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="use this cluster instead of starting a local kavka broker")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3,
                    help="interleaved rounds (confluent read, Spark read); medians count")
    ap.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    ap.add_argument("--no-write", action="store_true", help="skip the write benchmark")
    ap.add_argument("--no-read", action="store_true", help="skip the read rounds (write only)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    console = Console()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from kavka.client.admin import AdminClient, NewTopic
    from kavka.local_cluster import LocalCluster
    from kavka.spark.session import local_session

    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = LocalCluster(Path(tempfile.mkdtemp(prefix="kavka-bench-")), 1)  # one combined node
        bootstrap = broker.start()
    own_spark = spark is None
    try:
        run = time.strftime("%H%M%S")
        topic, out_topic = f"bench-read-{run}", f"bench-write-{run}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(topic, args.partitions, 1), NewTopic(out_topic, args.partitions, 1)])
        with console.status(f"producing {args.records} records of {args.value_bytes} B"):
            produce_s = produce(bootstrap, topic, args.records, args.value_bytes)
        with console.status("starting Spark"):
            if own_spark:
                spark = local_session("kavka-bench", cores=args.cores,
                                      shuffle_partitions=args.partitions)
            spark_read(spark, bootstrap, topic, args.records)  # warm-up: Python workers, JIT
        ck_runs: list[float] = []
        spark_runs: list[float] = []
        size = args.records * (12 + args.value_bytes)  # key-%08d keys
        for i in range(0 if args.no_read else args.runs):  # interleaved: both see the same load
            with console.status(f"round {i + 1}/{args.runs}"):
                ck_s, size = confluent_read(bootstrap, topic, args.partitions, args.records)
                ck_runs.append(ck_s)
                spark_runs.append(spark_read(spark, bootstrap, topic, args.records))
        ck_s = statistics.median(ck_runs) if ck_runs else None
        spark_s = statistics.median(spark_runs) if spark_runs else None
        write_s = None
        ck_write_runs: list[float] = []
        spark_write_runs: list[float] = []
        if not args.no_write:
            ck_topic = f"bench-ckwrite-{run}"
            with AdminClient(bootstrap) as admin:
                admin.create_topics([NewTopic(ck_topic, args.partitions, 1)])
            with console.status("Spark write: warm-up"):
                df = write_frame(spark, args.records, args.value_bytes)
                # one task per core, so every Python worker has loaded the writer
                spark_write(df.limit(2000).repartition(args.cores), bootstrap, out_topic)
                produce(bootstrap, ck_topic, 1000, args.value_bytes)
            for i in range(args.runs):  # interleaved, as the reads
                with console.status(f"write round {i + 1}/{args.runs}"):
                    ck_write_runs.append(produce(bootstrap, ck_topic, args.records, args.value_bytes))
                    spark_write_runs.append(spark_write(df, bootstrap, out_topic))
            produce_s = statistics.median(ck_write_runs)
            write_s = statistics.median(spark_write_runs)
            df.unpersist()
    finally:
        if own_spark and spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()

    mb = size / 1e6
    figures = {
        "records": args.records,
        "cores": args.cores,
        "confluent_read_runs_s": ck_runs,
        "spark_read_runs_s": spark_runs,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "confluent_read_rows_s": args.records / ck_s if ck_s else None,
        "confluent_read_mb_s": mb / ck_s if ck_s else None,
        "spark_read_rows_s": args.records / spark_s if spark_s else None,
        "spark_read_mb_s": mb / spark_s if spark_s else None,
        "read_ratio": ck_s / spark_s if ck_s and spark_s else None,
        "confluent_write_runs_s": ck_write_runs,
        "spark_write_runs_s": spark_write_runs,
        "confluent_write_rows_s": args.records / produce_s,
        "spark_write_rows_s": args.records / write_s if write_s else None,
        "write_ratio": produce_s / write_s if write_s else None,
    }
    table = Table(title=f"{args.records} records of {args.value_bytes} B, {args.partitions} partitions")
    for col in ("path", "rows/s", "MB/s", "Spark / confluent"):
        table.add_column(col, justify="right" if col != "path" else "left")
    if figures["read_ratio"] is not None:
        table.add_row("read: confluent-kafka Consumer", f"{figures['confluent_read_rows_s']:,.0f}",
                      f"{figures['confluent_read_mb_s']:,.1f}", "")
        table.add_row("read: Spark format kavka, count()", f"{figures['spark_read_rows_s']:,.0f}",
                      f"{figures['spark_read_mb_s']:,.1f}", f"{figures['read_ratio']:.2f}")
    table.add_row("write: confluent-kafka Producer", f"{figures['confluent_write_rows_s']:,.0f}",
                  f"{mb / produce_s:,.1f}", "")
    if write_s:
        # `mb` counts the read topic's key + value bytes: the written rows have the same sizes.
        table.add_row("write: Spark format kavka", f"{figures['spark_write_rows_s']:,.0f}",
                      f"{mb / write_s:,.1f}", f"{figures['write_ratio']:.2f}")
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
