"""`python -m bench.transactions --smoke` stays runnable against real kavka and Tansu processes:
every producer kind and both consumers are measured on both and tabulated. Speed is never
asserted."""

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
    assert result["brokers"] == ["kavka", "tansu"]
    for broker in result["brokers"]:
        for kind in ("None", "1", "100", "10000"):
            assert len(result["runs"][broker][kind]) == 2, (broker, kind)  # alternating rounds
            m = result["median"][broker][kind]
            assert m["records_per_s"] > 0 and m["mb_per_s"] > 0, (broker, kind, m)
            if kind != "None":
                assert 0 < m["commit_ms_p50"] <= m["commit_ms_p99"], (broker, kind, m)
        reads = result["read_median"][broker]
        assert reads["read_committed"] > 0 and reads["read_uncommitted"] > 0, (broker, reads)
    assert "| transactions of 10,000 |" in res.stdout and "| read_committed |" in res.stdout
    assert "kavka / tansu" in res.stdout
