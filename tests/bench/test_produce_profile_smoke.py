"""`python -m bench.produce_profile` stays runnable, and reads py-spy's output right.

The smoke run checks only that a round runs on a real broker and prints its figures (speed is
never asserted); the profile summary is checked on a collapsed-stack file written here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench.produce_profile import summarize

ROOT = Path(__file__).resolve().parents[2]


def test_summary_counts_own_and_total_samples_per_function(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "run (asyncio/runners.py:86);_dispatch (kavka/broker/server.py:360);"
        "_scan_records (kavka/storage/log_validator.py:130) 30\n"
        "run (asyncio/runners.py:86);_dispatch (kavka/broker/server.py:360) 10\n"
        "run (asyncio/runners.py:86);rec (kavka/x.py:1);rec (kavka/x.py:1) 5\n"  # recursion counts once
        "_worker (/usr/lib/python3.11/concurrent/futures/thread.py:69) 5\n"
    )
    samples, own, total = summarize(raw)
    assert samples == 50
    assert own["kavka/storage/log_validator.py:_scan_records"] == 30
    assert own["kavka/broker/server.py:_dispatch"] == 10 and total["kavka/broker/server.py:_dispatch"] == 40
    assert total["runners.py:run"] == 45 and own["runners.py:run"] == 0
    assert own["kavka/x.py:rec"] == 5 and total["kavka/x.py:rec"] == 5
    assert own["thread.py:_worker"] == 5


@pytest.mark.parametrize(("clients", "acks"), [(1, "1"), (2, "all")])
def test_a_round_runs_on_a_real_broker_and_prints_cpu_per_mb(clients: int, acks: str) -> None:
    """From this process, or from two load-client processes (`--clients`) with acks=all."""
    res = subprocess.run([sys.executable, "-m", "bench.produce_profile", "--records", "2000", "--rounds", "1",
                          "--clients", str(clients), "--acks", acks],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"(acks={acks}, " in res.stdout and f"from {clients} client(s)" in res.stdout, res.stdout
    # One tree: its ratios to itself are 1.00 (n/a when a tiny round cost under one clock tick).
    row = next(line for line in res.stdout.splitlines() if line.startswith(str(ROOT / "src")[-50:]))
    cpu_1k, cpu_100, *ratios = row.split()[-4:]
    assert float(cpu_1k) >= 0 and float(cpu_100) >= 0, row
    assert all(r in ("1.00", "n/a") for r in ratios), row
    assert re.search(r"each round\s+\d+\s+\d+", res.stdout), res.stdout


def test_record_scan_bench_runs_and_compares_two_trees() -> None:
    """`python -m bench.record_scan SRC SRC` loads the validator from each tree and prints each
    case's ns a record for both, with the ratio (this tree against itself)."""
    src = str(ROOT / "src")
    res = subprocess.run([sys.executable, "-m", "bench.record_scan", src, src, "--number", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line for line in res.stdout.splitlines() if "ratio to the first" in line]
    assert len(rows) == 7, res.stdout
    assert all(float(line.split()[-1]) > 0 for line in rows), res.stdout
