"""`python -m bench.consume`: the 1 KiB consume workload of `python -m bench` alone, interleaved.

One broker of each server (--servers, default kavka,tansu), each warmed up as `python -m bench`
warms it (50,000 records produced and read back), then 200,000 x 1 KiB records produced once and
read from offset 0 by a new confluent-kafka consumer per round (`workloads.consume`), the servers'
order reversed every round. Prints each round (MB/s, broker CPU ms per MB, the client's and the
broker's cores, the load average) and the medians with their ratios to the first server (`--json`:
the rounds and medians as JSON on stdout instead).

`--trace` also turns on librdkafka's fetch debug log for each round and reports what the broker
answered to the same consumer: Fetch responses per run, their median size, the median time from
request to response, and the time the client left between a response and its next request --
how the consume gap of issue 32 was found (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import sys
import time

from bench import workloads
from bench.servers import STARTERS

_RECV = re.compile(r"Received FetchResponse \(v\d+, (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms")


class _FetchTrace(logging.Handler):
    """Collects librdkafka's Fetch send / receive lines (debug=fetch,protocol)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.rtts: list[float] = []
        self.gaps: list[float] = []
        self._received: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        now = time.perf_counter()
        if (m := _RECV.search(msg)) is not None:
            self.sizes.append(int(m.group(1)))
            self.rtts.append(float(m.group(2)))
            self._received = now
        elif "Sent FetchRequest" in msg and self._received is not None:
            self.gaps.append((now - self._received) * 1000)
            self._received = None

    def summary(self) -> dict:
        return {
            "fetches": len(self.sizes),
            "response_bytes": statistics.median(self.sizes) if self.sizes else 0,
            "rtt_ms": statistics.median(self.rtts) if self.rtts else 0.0,
            "client_gap_ms": statistics.median(self.gaps) if self.gaps else 0.0,
        }


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.consume", description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="kavka,tansu", help="comma-separated, of: " + ", ".join(STARTERS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=50_000, help="records produced and read back before measuring")
    ap.add_argument("--json", action="store_true", help="the rounds and medians as JSON")
    ap.add_argument("--trace", action="store_true", help="librdkafka's fetch log: response sizes and times")
    args = ap.parse_args()
    names = args.servers.split(",")
    brokers = {}
    runs: dict[str, list[dict]] = {n: [] for n in names}
    try:
        topics = {}
        for n in names:
            b = brokers[n] = STARTERS[n]()
            w = workloads.produce(b, record_size=1024, count=args.warmup, acks="1", partitions=1)
            workloads.consume(b, topic=w["topic"], partitions=1, count=args.warmup, record_size=1024)
            topics[n] = workloads.produce(b, record_size=1024, count=args.records, acks="1", partitions=1)["topic"]
        for i in range(args.rounds):
            for n in names if i % 2 == 0 else names[::-1]:
                config, trace = None, None
                if args.trace:
                    trace = _FetchTrace()
                    logger = logging.getLogger(f"bench.consume.{n}.{i}")
                    logger.propagate = False
                    logger.addHandler(trace)
                    logger.setLevel(logging.DEBUG)
                    config = {"debug": "fetch,protocol", "log_level": 7, "logger": logger}
                r = workloads.consume(brokers[n], topic=topics[n], partitions=1, count=args.records, record_size=1024,
                                      config=config)
                r["broker_cpu_ms_per_mb"] = r["broker_cpu_s_per_mb"] * 1000
                r["load"] = os.getloadavg()[0]
                if trace is not None:
                    r.update(trace.summary())
                runs[n].append(r)
                extra = (f"; {r['fetches']} fetches of {r['response_bytes'] / 1e6:.1f} MB, rtt {r['rtt_ms']:.1f} ms, "
                         f"client gap {r['client_gap_ms']:.1f} ms") if trace is not None else ""
                print(f"round {i + 1} {n}: {r['mb_per_s']:.1f} MB/s, broker {r['broker_cpu_ms_per_mb']:.2f} ms/MB, "
                      f"cores broker {r['broker_cpu']:.2f} client {r['client_cpu']:.2f}, load {r['load']:.1f}{extra}",
                      file=sys.stderr if args.json else sys.stdout, flush=True)
    finally:
        for b in brokers.values():
            b.stop()
    base = names[0]
    med = {n: {f: statistics.median(r[f] for r in runs[n]) for f in ("mb_per_s", "broker_cpu_ms_per_mb")} for n in names}
    if args.json:
        print(json.dumps({"runs": runs, "median": med}, indent=1))
        return 0
    for field in ("mb_per_s", "broker_cpu_ms_per_mb"):
        print(field + ": " + ", ".join(
            f"{n} {med[n][field]:.2f}" + (f" ({base}/{n} {med[base][field] / med[n][field]:.2f})" if n != base and med[n][field] else "")
            for n in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
