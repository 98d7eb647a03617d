"""`AckGapsRun`: a `NetnsCluster` written to by tests/faults/ack_gaps.py, for the tests that time
acknowledgements across one network fault (test_healthy_partitions.py, test_isolated_leader.py).

Every ack_gaps.py command runs in the cluster's client namespace, which reaches every node
whatever the fault. A run creates the topic, starts the producers and waits until they are
acknowledging, cuts nodes off for the fault's length, heals, and hands back the acknowledged
records; `read` reads the topic back. Leaving the `with` block kills a producer still running and
closes the cluster (its processes and namespaces), whatever state the test ended in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from kavka.testing.netns import NetnsCluster
from tests.wait import wait_until

TOOL = [sys.executable, str(Path(__file__).with_name("ack_gaps.py"))]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class AckGapsRun:
    """One NetnsCluster (started on entering the `with` block) and its ack_gaps.py producers."""

    def __init__(self, root: Path, nodes: int, *, voters: int, overrides: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.cluster = NetnsCluster(root, nodes, voters=voters, overrides=overrides)
        self.acks = root / "acks.jsonl"
        self.producer: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> AckGapsRun:
        try:
            self.cluster.start()
        except BaseException:
            self.cluster.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.producer is not None and self.producer.poll() is None:
            self.producer.kill()
            self.producer.wait(10)
        self.cluster.close()

    def client(self, argv: list[str], timeout: float = 120) -> str:
        """`argv` run in the client namespace; it must succeed. Its standard output."""
        res = subprocess.run(self.cluster.client_argv(argv), capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    def tool(self, command: str, *args: str) -> None:
        """An ack_gaps.py command (`create`, `read`) against the cluster."""
        self.client([*TOOL, command, self.cluster.bootstrap, *args])

    def produce(self, topic: str, groups: str, seconds: float, *, started_bytes: int) -> None:
        """Start ack_gaps.py's producers (`groups` as it takes them) for `seconds`, and return once
        their acknowledgements fill `started_bytes` of the acks file: every producer is going."""
        self.producer = producer = subprocess.Popen(self.cluster.client_argv(
            [*TOOL, "produce", self.cluster.bootstrap, topic, str(self.acks), groups, str(seconds)]))
        wait_until(lambda: producer.poll() is not None
                   or (self.acks.exists() and self.acks.stat().st_size > started_bytes),
                   timeout=60, interval=0.1, message="the producers to get going")
        assert producer.poll() is None, "the producers never got going"

    def cut(self, nodes: Collection[int], others: Collection[int], fault_s: float) -> tuple[float, float]:
        """Cut `nodes` off from `others` for `fault_s`, then heal: the wall-clock times of the cut
        and the heal, as the acks file has them."""
        cut = time.time()
        self.cluster.switch.partition(nodes, others)
        time.sleep(fault_s)  # the fault's length, not a wait for an outcome
        self.cluster.switch.heal()
        return cut, time.time()

    def acknowledged(self, timeout: float) -> list[dict[str, Any]]:
        """Once the producers have finished (within `timeout`) with nothing left undelivered, every
        record they had acknowledged: `{"group", "p", "t", "v"}`."""
        assert self.producer is not None
        assert self.producer.wait(timeout=timeout) == 0
        lines = read_jsonl(self.acks)
        assert lines[-1].get("done") and lines[-1]["undelivered"] == 0, lines[-1]
        return [e for e in lines if "p" in e and "err" not in e]

    def read(self, topic: str) -> list[dict[str, Any]]:
        """Every record of `topic` read back after the run: `{"p", "v"}`."""
        out = self.root / "read.jsonl"
        self.tool("read", topic, str(out))
        return [e for e in read_jsonl(out) if "v" in e]
