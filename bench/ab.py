"""`python -m bench.ab OLD_SRC NEW_SRC`: kavka from two source trees side by side, interleaved.

For a change that must not cost speed (a restructure): the same single-broker workloads as
`python -m bench` (produce 1 KiB and 100 B with acks=1 and acks=all, consume 1 KiB, latency at
1,000 records/s), each run on a fresh broker started from OLD_SRC or NEW_SRC (a checkout's `src`
directory, put first on the broker's PYTHONPATH), in the order old, new, new, old, ... so drift
in the machine's load falls on both; prints the median of each figure and the new/old ratio
(above 1 is better for throughput, below 1 for latency and CPU per MB). `--json` prints the raw
runs too. `--latency-only` runs only the latency workloads, at 1,000 and 10,000 records/s: a
latency figure taken on another day is a figure of that day's machine, and this compares the
code on today's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from bench import workloads
from bench.servers import start_kavka

FIGURES = [  # (workload key, figure, better when higher)
    ("produce 1024 B acks=1", "mb_per_s", True),
    ("produce 1024 B acks=1", "broker_cpu_ms_per_mb", False),
    ("produce 1024 B acks=all", "mb_per_s", True),
    ("produce 100 B acks=1", "records_per_s", True),
    ("consume 1024 B", "mb_per_s", True),
    ("consume 1024 B", "broker_cpu_ms_per_mb", False),
    ("latency 1000/s", "p50_ms", False),
    ("latency 1000/s", "p99_ms", False),
    ("latency 1000/s", "p999_ms", False),
    ("latency 10000/s", "p50_ms", False),
    ("latency 10000/s", "p99_ms", False),
    ("latency 10000/s", "p999_ms", False),
]


def one_run(src: Path, counts: tuple[int, int], latency_s: float, *, latency_only: bool = False) -> dict[str, dict]:
    os.environ["PYTHONPATH"] = str(src)
    broker = start_kavka()
    try:
        out: dict[str, dict] = {}
        if latency_only:
            for rate in (1000, 10000):
                out[f"latency {rate}/s"] = workloads.latency(broker, rate=rate, seconds=latency_s)
            return out
        r = workloads.produce(broker, record_size=1024, count=counts[0], acks="1", partitions=1)
        out["produce 1024 B acks=1"] = r
        out["consume 1024 B"] = workloads.consume(broker, topic=r["topic"], partitions=1, count=counts[0], record_size=1024)
        out["produce 1024 B acks=all"] = workloads.produce(broker, record_size=1024, count=counts[0], acks="all", partitions=1)
        out["produce 100 B acks=1"] = workloads.produce(broker, record_size=100, count=counts[1], acks="1", partitions=1)
        out["latency 1000/s"] = workloads.latency(broker, rate=1000, seconds=latency_s)
        out["latency 10000/s"] = workloads.latency(broker, rate=10000, seconds=latency_s)
        for r in out.values():
            if r.get("mb_per_s"):
                r["broker_cpu_ms_per_mb"] = r["broker_cpu"] * 1000 / r["mb_per_s"]
        return out
    finally:
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="the src/ directory of the baseline checkout")
    ap.add_argument("new", type=Path, help="the src/ directory of the changed checkout")
    ap.add_argument("--rounds", type=int, default=3, help="runs per tree (default 3)")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--latency-only", action="store_true", help="only the latency workloads (1k and 10k records/s)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    counts, latency_s = ((2_000, 5_000), 0.5) if a.smoke else ((100_000, 300_000), 10.0)
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    order = [("old", "new"), ("new", "old")]
    for i in range(a.rounds):
        for name in order[i % 2]:
            print(f"round {i + 1}/{a.rounds}: {name}", file=sys.stderr, flush=True)
            runs[name].append(one_run(a.old if name == "old" else a.new, counts, latency_s, latency_only=a.latency_only))
    print(f"{'figure':45} {'old':>10} {'new':>10} {'new/old':>8}")
    for key, fig, _higher in FIGURES:
        if not any(key in r for r in runs["new"]):
            continue
        med = {n: statistics.median(r[key][fig] for r in runs[n] if fig in r[key]) for n in runs}
        ratio = med["new"] / med["old"] if med["old"] else float("nan")
        print(f"{key + ' ' + fig:45} {med['old']:10.2f} {med['new']:10.2f} {ratio:8.2f}")
    if a.json:
        print(json.dumps(runs, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
