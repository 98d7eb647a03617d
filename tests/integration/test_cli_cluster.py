"""`kavka cluster up` and `kavka cluster status` as a user runs them: real processes, Ctrl-C to stop."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.wait import wait_until


def _free_block() -> int:
    """A base port with base..base+2 and base+100..base+102 all free on loopback."""
    for _ in range(200):
        base = random.randrange(20000, 40000)
        socks = []
        try:
            for p in [base, base + 1, base + 2, base + 100, base + 101, base + 102]:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


def _cluster_up(tmp_path: Path, base: int, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`kavka cluster up ARGS` under tmp_path/c; returns once it printed the bootstrap servers."""
    up = subprocess.Popen(
        [sys.executable, "-m", "kavka", "cluster", "up", *args, "--data-dir", str(tmp_path / "c"), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(x) for x in up.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        wait_until(lambda: any(x.startswith("bootstrap servers:") for x in lines), timeout=90,
                   message="kavka cluster up to print the bootstrap servers")
    except AssertionError:
        up.kill()
        raise
    return up, lines


def test_cluster_up_status_and_ctrl_c(tmp_path: Path) -> None:
    base = _free_block()
    kavka = [sys.executable, "-m", "kavka"]
    up, lines = _cluster_up(tmp_path, base, "--nodes", "3", "--racks", "r1,r2")
    try:
        [line] = [x for x in lines if x.startswith("bootstrap servers:")]
        bootstrap = line.split(":", 1)[1].strip()
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))

        out = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base + 1}", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [(b["id"], b["rack"]) for b in data["brokers"]] == [(1, "r1"), (2, "r2"), (3, "r1")]
        q = data["quorum"]
        assert q["leader_id"] in (1, 2, 3) and q["leader_epoch"] >= 1
        assert sorted(v["id"] for v in q["voters"]) == [1, 2, 3]
        assert [v["status"] for v in q["voters"]].count("Leader") == 1

        table = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", bootstrap],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0, table.stderr
        assert f"LeaderId: {q['leader_id']}" in table.stdout and "LogEndOffset" in table.stdout

        made = subprocess.run([*kavka, "topics", "create", "--bootstrap-server", f"127.0.0.1:{base + 2}",
                               "--topic", "spread", "--partitions", "3"], capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stdout + made.stderr
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(90)
    text = "".join(lines)
    assert code == 0, text
    for i in (1, 2, 3):
        assert f"stopping node {i}" in text
        log = (tmp_path / "c" / f"node{i}" / "server.log").read_text()
        assert "shut down cleanly" in log, log[-2000:]
    # The same command brings the same cluster back (its id is kept).
    assert (tmp_path / "c" / "cluster.id").read_text().strip() in text


def test_cluster_up_with_separate_controllers(tmp_path: Path) -> None:
    base = _free_block()
    kavka = [sys.executable, "-m", "kavka"]
    up, lines = _cluster_up(tmp_path, base, "--nodes", "2", "--controllers", "1")
    try:
        assert any("1 controllers + 2 brokers" in x for x in lines), "".join(lines)
        assert any("node 1 (controller) ready" in x for x in lines), "".join(lines)
        out = subprocess.run([*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base}", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [b["id"] for b in data["brokers"]] == [2, 3]
        assert data["quorum"]["leader_id"] == 1 and [v["id"] for v in data["quorum"]["voters"]] == [1]
        # The broker-only nodes follow the metadata log as observers.
        wait_until(lambda: [o["id"] for o in json.loads(subprocess.run(
            [*kavka, "cluster", "status", "--bootstrap-server", f"127.0.0.1:{base}", "--json"],
            capture_output=True, text=True, timeout=60).stdout)["quorum"]["observers"]] == [2, 3], timeout=10)
        props = (tmp_path / "c" / "node1" / "server.properties").read_text()
        assert "process.roles=controller\n" in props
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(90)
    assert code == 0, "".join(lines)
