"""The README's security chapter, run as written: its shell and Python blocks (marked
`<!-- readme-test: security-... -->`) make a CA and certificates with openssl, format and start a
3-node cluster secured on every listener with Kafka's StandardAuthorizer, create topics and two
users through kavka's CLI over SASL_SSL/SCRAM, give the two teams PREFIXED ACLs and bob a
consumer_byte_rate quota (`kavka acls`, `kavka configs`), drive kcat, confluent-kafka, kafka-python
and aiokafka as alice, and show bob reading what his ACLs allow and refused
TOPIC_AUTHORIZATION_FAILED where he has none. Only the directory (/tmp/kavka-secure) is moved into
the test's own, and the README's ports (9<node>9<2|3|4>) to a free block: the suite runs on two
xdist workers, and two suites may share a machine."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_harness import free_port_block
from tests.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
README_DIR = "/tmp/kavka-secure"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("kcat") is None,
                                reason="the chapter needs openssl and kcat")


def blocks() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    found = dict(re.findall(r"<!-- readme-test: (security-[a-z]+)[^>]*-->\n```[a-z]+\n(.*?)```", text, re.S))
    assert set(found) == {"security-cluster", "security-admin", "security-tenants", "security-kcat", "security-python",
                          "security-bob"}, sorted(found)
    return found


# The README's ports: 9<n>92 (CLIENT), 9<n>93 (CONTROLLER), 9<n>94 (INTERNAL) of node n, written
# literally or, in the nodes' properties heredoc, as 9${n}9<k>.
README_PORT = re.compile(r"\b9(\$\{n\}|[123])9([234])\b")
PORT_OFFSETS = tuple(10 * n + k for n in (1, 2, 3) for k in (2, 3, 4))


def move_ports(script: str, base: int) -> str:
    """The README's port of node n, listener k, becomes base + 10n + k (the heredoc's 9${n}9k an
    arithmetic expansion of the same)."""
    def port(m: re.Match[str]) -> str:
        n, k = m.group(1), int(m.group(2))
        return f"$(({base}+10*n+{k}))" if n == "${n}" else str(base + 10 * int(n) + k)
    moved = README_PORT.sub(port, script)
    assert not README_PORT.search(moved)
    return moved


def processes_in(directory: Path) -> list[int]:
    """The pids whose working directory is `directory` (the nodes the chapter started there)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == directory:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def run(script: str, d: Path, *, python: bool = False) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [sys.executable, "-c", script] if python else ["bash", "-euc", script]
    res = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_the_readme_security_chapter_runs_as_written(tmp_path):
    d = tmp_path / "kavka-secure"
    base = free_port_block(PORT_OFFSETS)
    code = {k: move_ports(v.replace(README_DIR, str(d)), base) for k, v in blocks().items()}
    assert all(README_PORT.search(v) for v in blocks().values() if "localhost:" in v or "127.0.0.1:" in v)
    try:
        run(code["security-cluster"], tmp_path)
        for n in (1, 2, 3):
            log = d / f"node{n}.log"
            try:
                wait_until(lambda log=log: "KAVKA_READY" in log.read_text(), timeout=60, message=f"node {n} ready")
            except AssertionError:
                raise AssertionError(f"node {n} did not start:\n{log.read_text()[-3000:]}") from None
        admin = run(code["security-admin"], d)
        assert "Created topic payments.orders." in admin and "Created topic analytics.daily." in admin, admin
        assert all(f"Completed updating config for user {u}." in admin for u in ("alice", "bob")), admin
        # Every partition replicated to all three over the secured INTERNAL listener.
        isrs = re.findall(r"^\d+\s+│ \d\s+│ ([\d,]+)\s+│ ([\d,]+)", admin, re.M)
        assert len(isrs) == 3 and all(sorted(r.split(",")) == ["1", "2", "3"] == sorted(i.split(",")) for r, i in isrs), admin
        tenants = run(code["security-tenants"], d)
        # The ACLs as added: alice's on the payments. prefix, bob's Read on the one topic.
        assert re.search(r"User:alice.*Write.*ALLOW", tenants) and "PREFIXED" in tenants and "payments." in tenants, tenants
        assert re.search(r"User:bob.*Read.*ALLOW", tenants), tenants
        # bob's quota, read back through DescribeClientQuotas by `kavka configs --describe`.
        assert re.search(r"bob\s.*consumer_byte_rate\s.*1048576", tenants), tenants
        assert sorted(run(code["security-kcat"], d).splitlines()) == ["o1 placed", "o2 paid"]  # two partitions: any order
        out = run(code["security-python"], d, python=True)
        assert "confluent-kafka: [b'paid', b'placed', b'shipped']" in out, out
        assert "kafka-python: [b'paid', b'placed', b'refunded', b'shipped']" in out, out
        assert "aiokafka: [b'archived', b'paid', b'placed', b'refunded', b'shipped']" in out, out
        bob = run(code["security-bob"], d, python=True)
        assert "bob read payments.orders: 5 orders" in bob, bob
        assert "bob writes analytics.daily: ok" in bob, bob
        assert "bob writes payments.orders: TOPIC_AUTHORIZATION_FAILED" in bob, bob
        logs = "".join((d / f"node{n}.log").read_text() for n in (1, 2, 3))
        for password in ("broker-secret", "admin-secret", "alice-secret", "bob-secret"):
            assert password not in logs  # no password reaches a log
    finally:
        pids = processes_in(d)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists() or
                       Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", timeout=10)
