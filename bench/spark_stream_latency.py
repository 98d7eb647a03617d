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

    .venv/bin/python bench/spark_stream_latency.py --rate 1000 --seconds 30
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
    ap.add_argument("--json", type=Path)
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
    spark = query = None
    latencies: list[np.ndarray] = []
    produced: list[np.ndarray] = []  # each record's timestamp (ms), in the order of `latencies`
    try:
        topic = f"bench-latency-{time.strftime('%H%M%S')}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 4, 1)])
        spark = local_session("kavka-latency", cores=args.cores, shuffle_partitions=4)

        def sink(df, _batch_id) -> None:  # noqa: ANN001
            ts = [r[0] for r in df.selectExpr("unix_micros(timestamp)").collect()]
            now_us = time.time() * 1e6
            if ts:
                stamps = np.asarray(ts, dtype=np.float64)
                latencies.append((now_us - stamps) / 1000)
                produced.append(stamps / 1000)

        query = (
            spark.readStream.format("kavka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "latest").load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="kavka-latency-ckpt-"))
            .trigger(processingTime=f"{args.trigger_ms} milliseconds").start()
        )
        deadline = time.monotonic() + 120
        while not query.lastProgress and time.monotonic() < deadline:  # the first (empty) batch ran
            time.sleep(0.2)
        stop = threading.Event()
        t_start = time.time() * 1000
        sent = produce_at_rate(bootstrap, topic, args.rate, args.seconds, stop)
        deadline = time.monotonic() + 60
        while sum(len(x) for x in latencies) < sent and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        progress = [json.loads(p.json) if hasattr(p, "json") else dict(p)
                    for p in (query.recentProgress if query is not None else [])]
        if query is not None:
            query.stop()
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
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
    console.print(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
