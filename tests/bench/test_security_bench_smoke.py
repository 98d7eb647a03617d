"""The security benchmarks stay runnable: `python -m bench.tls_throughput --smoke` and
`python -m bench.auth_connections --smoke --scram` against real kavka processes; the bench's SCRAM
client matches RFC 7677's worked example. Only the shape and sanity of the figures are checked;
speed is never asserted in tests."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from bench.auth_connections import scram_client_final, scram_client_first

ROOT = Path(__file__).resolve().parents[2]


def _run(module: str, *args: str, out: Path) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", module, "--smoke", "--json", str(out), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def test_tls_throughput_smoke_measures_both_listeners(tmp_path: Path) -> None:
    res = _run("bench.tls_throughput", out=tmp_path / "r.json")
    result = json.loads((tmp_path / "r.json").read_text())
    for mode in ("plaintext", "tls"):
        assert len(result["runs"][mode]) == 2  # alternating rounds
        for w in ("produce", "consume"):
            m = result["median"][mode][w]
            # CPU is read in clock ticks: a smoke run's broker may use less than one.
            assert m["mb_per_s"] > 0 and m["broker_cpu_ms_per_mb"] >= 0, (mode, w, m)
    assert "| produce 1024 B | mb_per_s |" in res.stdout and "TLS / plaintext" in res.stdout


def test_auth_connections_smoke_measures_every_mode(tmp_path: Path) -> None:
    res = _run("bench.auth_connections", "--scram", out=tmp_path / "r.json")
    result = json.loads((tmp_path / "r.json").read_text())
    for mode in ("plaintext", "tls", "sasl_plain", "sasl_ssl_plain"):
        m = result["median"][mode]
        assert m["connections"] > 0 and m["connections_per_s"] > 0 and m["broker_cpu_ms_per_connection"] > 0, (mode, m)
    # SCRAM is measured once the broker serves it; until then it is skipped with the broker's reason.
    if "scram_sha_256" in result["skipped"]:
        assert "SCRAM-SHA-256" in result["skipped"]["scram_sha_256"]
        assert "| scram_sha_256 | skipped: the broker refused SCRAM-SHA-256" in res.stdout
    else:
        assert result["median"]["scram_sha_256"]["connections"] > 0


def test_scram_client_matches_rfc_7677() -> None:
    first, bare = scram_client_first("user", "rOprNGfwEbeRWgbNEkqO")
    assert first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final, server_signature = scram_client_final(bare, server_first, "pencil")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
