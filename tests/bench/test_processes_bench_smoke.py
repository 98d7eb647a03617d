"""The 1-against-N-processes benchmark stays runnable: `python -m bench --processes 2 --smoke` starts
`kavka server start --processes 1` and `--processes 2` groups and load clients (marked slow: about
a minute on the shared 2-core machine). Only the shape and sanity of the figures are checked; speed
is never asserted in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_processes_smoke_measures_one_and_n(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "bench", "--processes", "2", "--smoke", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["median"]) == {"1", "2"} and result["clients"] == 4
    for k, m in result["median"].items():
        assert m["processes"] == int(k) and m["mb_per_s"] > 0 and m["broker_cores"] >= 0, (k, m)
    assert "| 2 |" in res.stdout and "Scaling 2 processes / 1" in res.stdout
