"""`kavka demo`: a local kavka cluster, a synthetic event stream, and a Spark streaming job.

Starts a local cluster of real `kavka server start` processes (3 combined
broker,controller nodes by default, `--nodes N`; kavka.local_cluster) with
their data under `./var/demo` (or --data-dir) on free loopback ports and
creates the topics, whose partitions spread over the nodes.
Then a Spark Structured Streaming job (local, format ``kavka`` from
`kavka.spark`) starts reading the event topic while a synthetic stream of
shop events is produced with a progress bar. The job aggregates events per
event-time window (the record timestamp) and event type, and each micro-batch
writes the windows it updated to Parquet (under the data dir) and to an output
topic. When the job has read every produced record the query stops and a
summary table -- computed from the Parquet output, the latest version of each
window -- is printed. Ctrl-C at any point stops the query, Spark and the
cluster, in that order.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

EVENT_TYPES = ("view", "cart", "purchase", "refund")
WINDOW_MS = 10_000


class Interrupted(Exception):
    """Ctrl-C seen while Spark ran; raised where the demo can stop things in order."""


def run_demo(
    *,
    data_dir: Path,
    events: int,
    nodes: int = 3,
    seed: int = 42,
    window_seconds: int = 10,
    trigger_seconds: float = 2.0,
    console: Console | None = None,
    console_port: int | None = None,
) -> dict[tuple[int, str], tuple[int, float]]:
    from kavka.local_cluster import LocalCluster, LocalClusterError, start_console, stop_console

    console = console or Console()
    cluster = LocalCluster(data_dir, nodes, overrides={"num.partitions": "3", "offsets.topic.num.partitions": "6"})
    what = "broker" if nodes == 1 else f"{nodes}-node cluster"
    web = None
    try:
        with console.status(f"starting a local kavka {what}"):
            try:
                bootstrap = cluster.start()
            except LocalClusterError as e:
                raise RuntimeError(f"the local kavka {what} did not start: {e}") from None
        console.print(f"[green]kavka {what} up[/green] at {bootstrap}, data in {data_dir}")
        if console_port is not None:
            web = start_console(bootstrap, console_port)
            console.print(f"web console: http://127.0.0.1:{console_port}/ (while the demo runs)")
        return _pipeline(
            bootstrap,
            data_dir=data_dir,
            events=events,
            seed=seed,
            window_ms=window_seconds * 1000,
            trigger_seconds=trigger_seconds,
            console=console,
        )
    except (KeyboardInterrupt, Interrupted):
        console.print(f"[yellow]interrupted: stopping the {what}[/yellow]")
        return {}
    finally:
        if web is not None:
            stop_console(web)
        codes = cluster.stop()
        bad = {i: c for i, c in codes.items() if c != 0}
        console.print(f"{what} stopped cleanly" if not bad else f"{what}: nodes exited with {bad}")


def _pipeline(
    bootstrap: str,
    *,
    data_dir: Path,
    events: int,
    seed: int,
    window_ms: int,
    trigger_seconds: float,
    console: Console,
) -> dict[tuple[int, str], tuple[int, float]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    run_id = time.strftime("%Y%m%d-%H%M%S")
    source, sink = f"demo-events-{run_id}", f"demo-windows-{run_id}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(source, 3, 1), NewTopic(sink, 1, 1)]).values():
        f.result(15)
    console.print(f"created topics [bold]{source}[/bold] (3 partitions) and [bold]{sink}[/bold]")

    work = data_dir / "spark" / run_id
    return _spark_part(
        bootstrap, source, sink, work, events=events, seed=seed, window_ms=window_ms,
        trigger_seconds=trigger_seconds, console=console,
    )


def _spark_part(
    bootstrap: str,
    source: str,
    sink: str,
    work: Path,
    *,
    events: int,
    seed: int,
    window_ms: int,
    trigger_seconds: float,
    console: Console,
) -> dict[tuple[int, str], tuple[int, float]]:
    with console.status("starting Spark (local[2])"):
        from kavka.spark.session import local_session

        spark = local_session("kavka-demo", shuffle_partitions=2)
        spark.conf.set("kavka.demo.bootstrap", bootstrap)
    # While Spark runs, Ctrl-C only sets a flag (replacing the handler SparkContext
    # installed): a KeyboardInterrupt inside a py4j call would break the gateway
    # before the query could be stopped in order.
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    query = None
    try:
        query = _start_job(
            spark, bootstrap, source, sink, work, window_ms=window_ms, trigger_seconds=trigger_seconds
        )
        console.print(
            f"[green]Spark Structured Streaming job started[/green]: {source} -> "
            f"{window_ms // 1000}s windows -> Parquet ({work / 'windows'}) and {sink}"
        )
        acked = _produce(
            bootstrap, source, events=events, seed=seed, console=console, interrupted=interrupted
        )
        _wait_for_job(query, source, acked, console, interrupted)
        query.stop()
        query = None
        return _summary(spark, work, acked, sink, window_ms, console)
    finally:
        if query is not None:
            console.print("stopping the Spark job")
            query.stop()
        spark.stop()
        signal.signal(signal.SIGINT, previous)
        console.print("Spark stopped")


def _produce(
    bootstrap: str,
    topic: str,
    *,
    events: int,
    seed: int,
    console: Console,
    interrupted: threading.Event,
) -> int:
    from confluent_kafka import Producer

    rng = random.Random(seed)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "lz4"}
    )
    acked = 0
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:  # noqa: ANN001
        nonlocal acked
        if err is not None:
            failures.append(str(err))
        else:
            acked += 1

    start_ms = int(time.time() * 1000)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        task = progress.add_task("producing events", total=events)
        for i in range(events):
            kind = rng.choices(EVENT_TYPES, weights=(60, 25, 12, 3))[0]
            event = {
                "user": f"user-{rng.randrange(500)}",
                "type": kind,
                "amount": round(rng.uniform(1, 200), 2),
            }
            ts = start_ms + i * 7  # a synthetic clock: 7 ms between events
            producer.produce(
                topic,
                key=event["user"].encode(),
                value=json.dumps(event).encode(),
                timestamp=ts,
                on_delivery=on_delivery,
            )
            if i % 1000 == 0:
                producer.poll(0)
                if interrupted.is_set():
                    producer.flush(10)
                    raise Interrupted
            progress.advance(task)
        producer.flush(30)
    if failures:
        raise RuntimeError(f"{len(failures)} events were not acknowledged: {failures[:3]}")
    return acked


def _start_job(
    spark: Any, bootstrap: str, source: str, sink: str, work: Path, *, window_ms: int,
    trigger_seconds: float,
) -> Any:
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            F.col("timestamp"),
            F.from_json(
                F.col("value").cast("string"), "user string, type string, amount double"
            ).alias("e"),
        )
    )
    windows = events.groupBy(
        F.window("timestamp", f"{window_ms // 1000} seconds"), F.col("e.type").alias("type")
    ).agg(F.count("*").alias("events"), F.round(F.sum("e.amount"), 2).alias("amount"))

    def write_batch(df: Any, batch_id: int) -> None:
        # The windows this micro-batch updated: appended to Parquet (with the batch
        # id, so the latest version of a window can be picked) and to the output topic.
        out = df.select(
            (F.unix_millis(F.col("window.start"))).alias("window_start_ms"),
            "type",
            "events",
            "amount",
            F.lit(batch_id).alias("batch_id"),
        ).cache()
        out.write.mode("append").parquet(str(work / "windows"))
        (
            out.select(
                F.concat_ws(":", "window_start_ms", "type").alias("key"),
                F.to_json(F.struct("window_start_ms", "type", "events", "amount")).alias("value"),
            )
            .write.format("kavka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .save()
        )
        out.unpersist()

    return (
        windows.writeStream.outputMode("update")
        .foreachBatch(write_batch)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )


def _wait_for_job(
    query: Any,
    topic: str,
    total: int,
    console: Console,
    interrupted: threading.Event,
    timeout: float = 600,
) -> None:
    """Until the query's committed source offsets cover `total` records."""
    deadline = time.monotonic() + timeout
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
    ) as prog:
        task = prog.add_task("Spark job reading and aggregating", total=total)
        while time.monotonic() < deadline:
            if interrupted.is_set():
                raise Interrupted
            if query.exception() is not None:
                raise RuntimeError(f"the Spark job failed: {query.exception()}")
            done = _rows_read(query, topic)
            prog.update(task, completed=done)
            if done >= total:
                return
            query.awaitTermination(0.5)
    raise RuntimeError(f"the Spark job did not read {total} events in {timeout:.0f}s")


def _rows_read(query: Any, topic: str) -> int:
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return 0
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    return sum(int(o) for o in (end or {}).get(topic, {}).values())


def _bootstrap_of(spark: Any) -> str:
    return spark.conf.get("kavka.demo.bootstrap")


def _summary(
    spark: Any, work: Path, acked: int, sink: str, window_ms: int, console: Console
) -> dict[tuple[int, str], tuple[int, float]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    versions = spark.read.parquet(str(work / "windows"))
    latest = (
        versions.withColumn(
            "rank", F.row_number().over(
                Window.partitionBy("window_start_ms", "type").orderBy(F.desc("batch_id"))
            )
        )
        .where("rank = 1")
        .collect()
    )
    agg = {(r["window_start_ms"], r["type"]): (int(r["events"]), float(r["amount"])) for r in latest}
    total = sum(c for c, _ in agg.values())
    table = Table(title=f"{total} events in {len({w for w, _ in agg})} windows of {window_ms // 1000}s")
    table.add_column("event type")
    table.add_column("events", justify="right")
    table.add_column("amount", justify="right")
    for kind in EVENT_TYPES:
        rows = [v for (w, k), v in agg.items() if k == kind]
        table.add_row(kind, str(sum(r[0] for r in rows)), f"{sum(r[1] for r in rows):,.2f}")
    console.print(table)
    bootstrap = _bootstrap_of(spark)
    updates = (
        spark.read.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", sink)
        .load()
        .count()
    )
    console.print(
        f"{versions.count()} window updates in Parquet at {work / 'windows'}; "
        f"{updates} records in topic {sink}",
        soft_wrap=True,
    )
    if total != acked:
        raise RuntimeError(f"the windows hold {total} events, {acked} were produced")
    return agg
