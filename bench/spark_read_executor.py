"""Benchmark: one source executor's read path, without Spark, serial fetch vs prefetch.

Starts a local kavka broker, fills one partition with --records records of
--value-bytes bytes (bench/spark_read.py's confluent producer), then,
interleaved for --runs rounds after a warm-up of each, times
`Fetcher.read_range_with(..., decode_arrow)` (what a Spark read task runs)

- serial: the next Fetch is sent after the previous response is decoded;
- prefetch: the next Fetch is in flight while the previous one is decoded
  (not used by `kavka.spark.source.read_range`: see docs/benchmarks.md).

Prints medians in rows/s and the ratio; --fetch-bytes sets
max.partition.fetch.bytes (smaller fetches, more round trips to overlap).

    .venv/bin/python bench/spark_read_executor.py --records 200000 --value-bytes 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--fetch-bytes", type=int, default=1024 * 1024,
                    help="max.partition.fetch.bytes (Spark's kafka source default: 1 MiB)")
    args = ap.parse_args(argv)

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "src"))
    sys.path.insert(0, str(root))

    from bench.spark_read import produce
    from kavka.client.admin import AdminClient, NewTopic
    from kavka.client.fetcher import Fetcher
    from kavka.local_cluster import LocalCluster
    from kavka.spark.arrow_decode import decode_arrow
    from kavka.spark.source import _arrow_schema

    broker = LocalCluster(Path(tempfile.mkdtemp(prefix="kavka-bench-")), 1)
    bootstrap = broker.start()
    schema = _arrow_schema(False)
    n = args.records
    try:
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic("r", 1, 1)])
        produce(bootstrap, "r", n, args.value_bytes)

        def decode(buf: bytes, start: int, stop: int):  # noqa: ANN202
            return decode_arrow(buf, start, stop, "r", 0, schema)

        def read(fetcher: Fetcher, prefetch: bool) -> float:
            t = time.perf_counter()
            rows = sum(b.num_rows for b in fetcher.read_range_with("r", 0, 0, n, decode, prefetch=prefetch))
            if rows != n:
                raise RuntimeError(f"read {rows} rows, expected {n}")
            return time.perf_counter() - t

        runs: dict[str, list[float]] = {"serial": [], "prefetch": []}
        with Fetcher(bootstrap, max_partition_fetch_bytes=args.fetch_bytes) as f:
            read(f, False), read(f, True)  # warm-ups
            for _ in range(args.runs):
                runs["serial"].append(read(f, False))
                runs["prefetch"].append(read(f, True))
    finally:
        broker.stop()
    rates = {k: n / statistics.median(v) for k, v in runs.items()}
    print(f"{n} records of {args.value_bytes} B, one partition, fetches of {args.fetch_bytes} B, "
          f"medians of {args.runs}:")
    print(f"  serial fetch:   {rates['serial']:>10,.0f} rows/s")
    print(f"  prefetch:       {rates['prefetch']:>10,.0f} rows/s  "
          f"({rates['prefetch'] / rates['serial']:.2f}x)")
    return {"runs_s": runs, "rows_s": rates}


if __name__ == "__main__":
    main()
