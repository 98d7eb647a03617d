"""The authorization benchmark stays runnable: `python -m bench.authorization --smoke` against real
kavka processes (one without an authorizer, one with `authorizer.class.name=kavka` and a few hundred
ACLs; marked slow: it takes 15-30 s). Only the shape and sanity of the figures are checked; speed
is never asserted in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.authorization import acl_set, bench_acls

from kavka.authorizer import Authorizer
from kavka.common import AclOperation, ResourceType

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two brokers, three modes, two rounds: 15-30 s on the shared 2-core machine
def test_authorization_smoke_measures_every_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "bench.authorization", "--smoke", "--json", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["acls"] == 200
    for mode in ("off", "acls", "super"):
        assert len(result["runs"][mode]) == 2  # alternating rounds
        for w in ("produce", "consume"):
            m = result["median"][mode][w]
            # CPU is read in clock ticks: a smoke run's broker may use less than one.
            assert m["mb_per_s"] > 0 and m["broker_cpu_ms_per_mb"] >= 0, (mode, w, m)
        assert result["median"][mode]["requests"]["broker_cpu_us_per_request"] >= 0, mode
    assert all(ns > 0 for ns in result["authorize_ns"].values()) and len(result["authorize_ns"]) == 4
    assert "| produce 1024 B | mb_per_s |" in res.stdout and "ACLs / off" in res.stdout


def test_the_acl_set_is_distinct_and_allows_bench_only_through_its_prefixed_acls() -> None:
    acls = acl_set(10_000)
    assert len(set(acls)) == len(acls) == 10_000
    with_bench = Authorizer(acls)
    without = Authorizer([a for a in acls if a not in bench_acls()])
    topic = "bench-0a1b2c3d"
    for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE, AclOperation.DESCRIBE):
        assert with_bench.authorize("User:bench", "127.0.0.1", op, ResourceType.TOPIC, topic)
        assert not without.authorize("User:bench", "127.0.0.1", op, ResourceType.TOPIC, topic)
    assert with_bench.authorize("User:bench", "127.0.0.1", AclOperation.READ, ResourceType.GROUP, "bench")
    assert not with_bench.authorize("User:bench", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "team1.x")
    # The DENYs on bench's prefix name other principals: they cover the topic, they apply to them.
    assert not with_bench.authorize("User:intruder-0", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, topic)
