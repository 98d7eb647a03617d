"""Benchmark: one sink executor's write path, without Spark, vs librdkafka fed from the same Arrow rows.

Starts a local kavka broker, builds --records rows (12-byte keys, --value-bytes
values) as Arrow record batches of 10,000 rows (Spark's
`spark.sql.execution.arrow.maxRecordsPerBatch`), then, interleaved for --runs
rounds after a warm-up of each, times

- kavka: `kavka.spark.sink.write_batches` (bulk Arrow encoder + pipelined
  producer, what a Spark write task runs);
- librdkafka from Arrow: the other route -- confluent-kafka's Producer
  (idempotent, acks=all, linger 20 ms) given each row of the same batches
  (`to_pylist`, the partition from the same murmur2 column);
- confluent alone: bench/spark_read.py's producer loop (no Arrow), the
  reference of bench/spark_read.py's write ratio.

Prints medians in rows/s; --profile also prints where kavka's write spends its
time (cProfile; the sender thread's work is run inline for the profile).

    .venv/bin/python bench/spark_write_executor.py --records 200000 --value-bytes 100
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path


def rdkafka_from_arrow(bootstrap: str, topic: str, batches: list, partitions: int) -> float:  # noqa: ANN001
    from confluent_kafka import Producer

    from kavka.spark.partitioner import key_partitions

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "acks": "all", "enable.idempotence": True,
                  "queue.buffering.max.messages": 1_000_000})
    t = time.perf_counter()
    for b in batches:
        parts = key_partitions(b.column(0), partitions).tolist()
        for k, v, part in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), parts, strict=True):
            while True:
                try:
                    p.produce(topic, v, k, part)
                    break
                except BufferError:
                    p.poll(0.05)
        p.poll(0)
    if p.flush(120):
        raise RuntimeError("librdkafka did not deliver every record")
    return time.perf_counter() - t


def profile_kavka(opts, batches: list) -> str:  # noqa: ANN001
    """cProfile of write_batches with each round sent inline (one thread, so cProfile sees it)."""
    from kavka.client import producer as producer_mod
    from kavka.spark.sink import write_batches

    def inline(self, items):  # noqa: ANN001, ANN202
        by_tp: dict = {}
        for topic, partition, region in items:
            by_tp.setdefault((topic, partition), []).append(region)
        for k in range(max(len(v) for v in by_tp.values())):
            self._send_round([(tp, rs[k]) for tp, rs in by_tp.items() if k < len(rs)])

    original = producer_mod.Producer.send_regions
    producer_mod.Producer.send_regions = inline
    try:
        prof = cProfile.Profile()
        prof.enable()
        write_batches(opts, iter(batches))
        prof.disable()
    finally:
        producer_mod.Producer.send_regions = original
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
    return out.getvalue()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "src"))
    sys.path.insert(0, str(root))
    import pyarrow as pa

    from bench.spark_read import produce
    from kavka.client.admin import AdminClient, NewTopic
    from kavka.local_cluster import LocalCluster
    from kavka.spark.options import parse_sink_options
    from kavka.spark.sink import write_batches

    broker = LocalCluster(Path(tempfile.mkdtemp(prefix="kavka-bench-")), 1)
    bootstrap = broker.start()
    try:
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(t, args.partitions, 1) for t in ("kavka", "rdk", "ck")])
        n = args.records
        keys = pa.array([b"key-%08d" % i for i in range(n)], pa.binary())
        values = pa.array([b"\xab" * args.value_bytes] * n, pa.binary())
        rows = pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])
        batches = [rows.slice(i, 10_000) for i in range(0, n, 10_000)]
        opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": "kavka"})
        write_batches(opts, iter(batches[:1]))  # warm-ups
        rdkafka_from_arrow(bootstrap, "rdk", batches[:1], args.partitions)
        produce(bootstrap, "ck", 1000, args.value_bytes)
        runs: dict[str, list[float]] = {"kavka": [], "rdk": [], "ck": []}
        for _ in range(args.runs):
            t = time.perf_counter()
            write_batches(opts, iter(batches))
            runs["kavka"].append(time.perf_counter() - t)
            runs["rdk"].append(rdkafka_from_arrow(bootstrap, "rdk", batches, args.partitions))
            runs["ck"].append(produce(bootstrap, "ck", n, args.value_bytes))
        profile = profile_kavka(opts, batches) if args.profile else None
    finally:
        broker.stop()
    rates = {k: n / statistics.median(v) for k, v in runs.items()}
    print(f"{n} records of {args.value_bytes} B, {args.partitions} partitions, medians of {args.runs}:")
    print(f"  kavka sink write_batches (bulk encoder): {rates['kavka']:>10,.0f} rows/s")
    print(f"  librdkafka fed from Arrow rows:          {rates['rdk']:>10,.0f} rows/s")
    print(f"  confluent producer loop (no Arrow):      {rates['ck']:>10,.0f} rows/s")
    if profile:
        print(profile)
    return {"runs_s": runs, "rows_s": rates}


if __name__ == "__main__":
    main()
