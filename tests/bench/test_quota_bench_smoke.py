"""`python -m bench.quota_accuracy` stays runnable against a real kavka process. Only the shape and
sanity of the figures are checked; speed and accuracy are never asserted in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quota_accuracy_smoke() -> None:
    res = subprocess.run([sys.executable, "-m", "bench.quota_accuracy", "--seconds", "2", "--quotas", "5", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert set(out) == {"baseline", "request_percentage=5", "controller_mutation_rate"}
    for run in ("baseline", "request_percentage=5"):
        assert out[run]["requests_per_s"] > 0 and out[run]["broker_cpu_percent"] > 0, out[run]
    assert out["baseline"]["throttled_share"] == 0
    # The burst of 2 windows x 5/s is always taken.
    assert out["controller_mutation_rate"]["partitions"] >= 10, out
