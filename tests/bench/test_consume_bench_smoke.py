"""`python -m bench.consume` stays runnable against a real kavka process, and its `--trace` still reads
librdkafka's fetch log (the Fetch responses it counts are the ones that carried the records). Only
the shape and sanity of the figures are checked; speed is never asserted in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_consume_bench_smoke_counts_the_fetches_that_carried_the_records() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "bench.consume", "--servers", "kavka", "--rounds", "1", "--records", "3000",
         "--warmup", "500", "--trace", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    (run,) = out["runs"]["kavka"]
    assert run["mb_per_s"] > 0 and out["median"]["kavka"]["mb_per_s"] == run["mb_per_s"], out
    # 3,000 x 1 KiB came in at least one response, none larger than the consumer's 10 MiB partition limit.
    assert run["fetches"] >= 1 and 1024 <= run["response_bytes"] <= 10 * 1024 * 1024 + 1024, run
    assert run["rtt_ms"] >= 0 and run["client_gap_ms"] >= 0, run
