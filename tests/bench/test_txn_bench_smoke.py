"""`python -m bench.transactions --smoke` stays runnable against a real kavka process: every
producer kind and both consumers are measured and tabulated. Speed is never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_transactions_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "bench.transactions", "--smoke", "--json", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    for kind in ("None", "1", "100", "10000"):
        assert len(result["runs"][kind]) == 2, kind  # alternating rounds
        m = result["median"][kind]
        assert m["records_per_s"] > 0 and m["mb_per_s"] > 0, (kind, m)
        if kind != "None":
            assert 0 < m["commit_ms_p50"] <= m["commit_ms_p99"], (kind, m)
    assert result["read_median"]["read_committed"] > 0 and result["read_median"]["read_uncommitted"] > 0
    assert "| transactions of 10,000 |" in res.stdout and "| read_committed |" in res.stdout
