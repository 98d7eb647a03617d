"""`python -m bench.failover --smoke` stays runnable: one kill of the active controller on real processes, every
acknowledged record read back, figures tabulated. Speed is never asserted (tests/integration/
test_failover.py holds the generous bounds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_failover_bench_smoke() -> None:
    res = subprocess.run([sys.executable, "-m", "bench.failover", "--smoke", "--cases", "controller",
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(res.stdout)
    assert set(rows) == {"controller"}
    for case, row in rows.items():
        assert row["produce_s"]["runs"] == 1 and row["produce_s"]["median"] > 0, (case, row)
        assert row["producer_errors"] == 0, (case, row)
    assert rows["controller"]["metadata_s"]["median"] > 0
