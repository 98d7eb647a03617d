"""Benchmark: end-to-end latency of a Spark streaming read of kavka (produce time to row in the sink).

Starts a local kavka broker (or uses --bootstrap), produces --rate records/s
with a confluent-kafka Producer (linger.ms=0; each record's CreateTime is its
produce time) for --seconds, while a Structured Streaming query
(`readStream.format("kavka")`, trigger every --trigger-ms) hands each
micro-batch to `foreachBatch`, which stamps the arrival time of its rows on
the driver. Latency = arrival time - record timestamp; prints p50/p99/max
for the records produced after the first --warmup-seconds (the query's start-up: its first
micro-batches with rows start the Python workers and take seconds), and for all records. The
phases of the micro-batches (StreamingQueryProgress.durationMs) and each micro-batch's median
latency, in order, show where the time goes.

With --jvm a second query, `readStream.format("kafka")` (Spark's own JVM connector, from
.cache/java: scripts/java-deps.sh), reads the same topic at the same time into its own
`foreachBatch`, so both connectors' latencies come from one run under the same load; its figures
are under "jvm".

    .venv/bin/python bench/spark_stream_latency.py --rate 1000 --seconds 30
    .venv/bin/python bench/spark_stream_latency.py --rate 1000 --seconds 30 --jvm
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from rich.console import Console


def produce_at_rate(bootstrap: str, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    sent = 0
    t0 = time.monotonic()
    while not stop.is_set() and time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        while sent < due:
            p.produce(topic, value=b"x" * 100, key=b"k%d" % sent)
            sent += 1
        p.poll(0)
        time.sleep(0.001)
    p.flush(30)
    return sent


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--rate", type=int, default=1000, help="records per second")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup-seconds", type=float, default=5)
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--jvm", action="store_true",
                    help="also run Spark's JVM connector (format kafka) on the same topic at once")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    console = Console()
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "src"))
    sys.path.insert(0, str(root))
    from kavka.client.admin import AdminClient, NewTopic
    from kavka.local_cluster import LocalCluster
    from kavka.spark.session import local_session

    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = LocalCluster(Path(tempfile.mkdtemp(prefix="kavka-bench-")), 1)  # one combined node
        bootstrap = broker.start()
    spark = None
    formats = ["kavka", "kafka"] if args.jvm else ["kavka"]
    queries: dict[str, object] = {}
    # per format: each micro-batch's latencies (ms), and its records' timestamps (ms) in that order
    latencies: dict[str, list[np.ndarray]] = {f: [] for f in formats}
    produced: dict[str, list[np.ndarray]] = {f: [] for f in formats}
    try:
        topic = f"bench-latency-{time.strftime('%H%M%S')}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 4, 1)])
        conf = {}
        if args.jvm:
            from tests.java_deps import spark_kafka_jars

            conf["spark.jars"] = ",".join(str(j) for j in spark_kafka_jars())
        spark = local_session("kavka-latency", cores=args.cores, shuffle_partitions=4, **conf)

        def sink_for(fmt: str):  # noqa: ANN202
            def sink(df, _batch_id) -> None:  # noqa: ANN001
                ts = [r[0] for r in df.selectExpr("unix_micros(timestamp)").collect()]
                now_us = time.time() * 1e6
                if ts:
                    stamps = np.asarray(ts, dtype=np.float64)
                    latencies[fmt].append((now_us - stamps) / 1000)
                    produced[fmt].append(stamps / 1000)
            return sink

        for fmt in formats:
            queries[fmt] = (
                spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "latest").load()
                .writeStream.foreachBatch(sink_for(fmt))
                .option("checkpointLocation", tempfile.mkdtemp(prefix=f"kavka-latency-{fmt}-ckpt-"))
                .trigger(processingTime=f"{args.trigger_ms} milliseconds").start()
            )
        deadline = time.monotonic() + 120
        # the first (empty) batch of each query ran
        while not all(q.lastProgress for q in queries.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        stop = threading.Event()
        t_start = time.time() * 1000
        sent = produce_at_rate(bootstrap, topic, args.rate, args.seconds, stop)
        deadline = time.monotonic() + 60
        while (any(sum(len(x) for x in latencies[f]) < sent for f in formats)
               and time.monotonic() < deadline):
            time.sleep(0.2)
    finally:
        progress = {f: [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in q.recentProgress]
                    for f, q in queries.items()}
        for q in queries.values():
            q.stop()
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
    figures = latency_figures(args, sent, t_start, latencies["kavka"], produced["kavka"], progress["kavka"])
    if args.jvm:
        figures["jvm"] = latency_figures(args, sent, t_start, latencies["kafka"], produced["kafka"],
                                         progress["kafka"])
    console.print(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


def latency_figures(args: argparse.Namespace, sent: int, t_start: float, latencies: list[np.ndarray],
                    produced: list[np.ndarray], progress: list[dict]) -> dict:
    """p50/p99/max of one query's latencies, and where its micro-batches' time went."""
    all_ms = np.concatenate(latencies) if latencies else np.zeros(0)
    # Drop the first seconds: records whose arrival minus latency is before start + warm-up.
    received = int(len(all_ms))
    stamps_ms = np.concatenate(produced) if produced else np.zeros(0)
    steady = all_ms[stamps_ms >= t_start + args.warmup_seconds * 1000] if received else all_ms
    figures = {
        "rate": args.rate, "seconds": args.seconds, "trigger_ms": args.trigger_ms,
        "sent": sent, "received": received,
        "p50_ms": float(np.percentile(steady, 50)) if len(steady) else None,
        "p99_ms": float(np.percentile(steady, 99)) if len(steady) else None,
        "max_ms": float(steady.max()) if len(steady) else None,
        "all_p50_ms": float(np.percentile(all_ms, 50)) if received else None,
        "all_p99_ms": float(np.percentile(all_ms, 99)) if received else None,
        "started_ms": t_start,
    }
    # Where a micro-batch's time goes (StreamingQueryProgress.durationMs, ms): the p50 and max
    # of each phase over the batches that read rows, and the rows per batch.
    batches = [p for p in progress if p.get("numInputRows")]
    phases: dict[str, dict[str, float]] = {}
    for key in sorted({k for p in batches for k in p.get("durationMs", {})}):
        vals = np.asarray([p["durationMs"].get(key, 0) for p in batches], dtype=np.float64)
        phases[key] = {"p50": float(np.percentile(vals, 50)), "max": float(vals.max())}
    figures["micro_batches"] = len(batches)
    figures["rows_per_batch_p50"] = float(np.percentile([p["numInputRows"] for p in batches], 50)) if batches else None
    figures["duration_ms"] = phases
    # Latency over the run: the p50 of each micro-batch's rows, in order (a rising series means
    # the query falls behind the rate; spikes, single slow batches).
    figures["batch_p50_ms"] = [round(float(np.percentile(x, 50))) for x in latencies if len(x)]
    return figures


if __name__ == "__main__":
    main()
