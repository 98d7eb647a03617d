"""The README's main job: `kavka demo` runs end to end on a fresh data dir."""

from __future__ import annotations

import re
import subprocess

from tests.broker_harness import KAVKA


def test_demo_runs_end_to_end(tmp_path):
    res = subprocess.run(
        [*KAVKA, "demo", "--data-dir", str(tmp_path / "demo"), "--events", "3000"],
        capture_output=True,
        text=True,
        timeout=180,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "3000 events in" in out
    counts = [int(n) for n in re.findall(r"│ (?:view|cart|purchase|refund)\s+│\s+(\d+) │", out)]
    assert len(counts) == 4 and sum(counts) == 3000, out
    assert "broker stopped cleanly" in out
    assert (tmp_path / "demo" / "logs" / "meta.properties").exists()
