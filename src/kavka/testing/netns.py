"""Real kavka nodes, each in its own network namespace, on a bridge the test owns: the fault harness's network.

Topology (nothing is added to the root namespace: no interface, no route, no address)::

    <prefix>sw   the "switch": a Linux bridge `br0`, one veth end per node (`n<i>`) and one for the client (`c`)
    <prefix>n<i> node i: `eth0` = 10.<a>.<b>.<i>/24, its kavka process listens there (client 9092, controller 9093)
    <prefix>c    the client: `eth0` = 10.<a>.<b>.100/24; the workload runs here (`ip netns exec`)

Faults are made inside the namespaces, with nothing but `ip` and signals (this machine's kernel
has no netfilter tables and no tc actions, so no iptables/nft/tc drop):

- a partition of node i from node j is a `blackhole` route for j's address in i's namespace:
  i's packets to j are silently dropped, established connections stall, and a new connect fails at
  once with EINVAL (a real partition would time it out: the one visible difference). Both
  directions make a symmetric partition, one direction a one-way partition. The client's address is
  never blackholed: the client sees every node, as in Jepsen.
- a pause is SIGSTOP/SIGCONT of the node's process; a crash is SIGKILL, and a restart is
  `kavka server start` again on the same data.

`ip netns exec` execs in place, so a node's Popen pid is the kavka process itself and signals
reach it directly. One `NetnsCluster` is driven from one thread (the test's); `close()` kills
every process it started and deletes every namespace it made (the veths and the bridge go with
them), whatever state the run ended in.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

KAVKA = [sys.executable, "-m", "kavka"]
CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
CLIENT_HOST = 100


class NetnsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no `ip`, no netns support): tests skip with this."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def netns_unavailable_reason() -> str | None:
    """Why this machine cannot run the harness, or None when it can (made and deleted a namespace)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on PATH"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"kvprobe{os.getpid()}"
    res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        return f"`ip netns add` failed: {res.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def netns_names() -> set[str]:
    """The network namespaces `ip netns` knows (a test checks a run left none of its own)."""
    return {line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()}


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    netns: str
    address: str
    voter: bool

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{CLIENT_PORT}"


class Switch:
    """The namespaces, the bridge and the veths; partitions as blackhole routes. Idempotent `close`."""

    def __init__(self, node_ids: Iterable[int], *, subnet: str = "10.77.0") -> None:
        self.prefix = f"kv{os.getpid() % 100000}x{int(time.monotonic() * 1000) % 10000}"
        self.subnet = subnet
        self.switch_ns = f"{self.prefix}sw"
        self.client_ns = f"{self.prefix}c"
        self.node_ns = {i: f"{self.prefix}n{i}" for i in node_ids}
        self.made: list[str] = []
        self.blocked: set[tuple[int, int]] = set()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def address(self, node_id: int) -> str:
        return f"{self.subnet}.{node_id}"

    @property
    def client_address(self) -> str:
        return f"{self.subnet}.{CLIENT_HOST}"

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        self._add_ns(self.switch_ns)
        _ip("-n", self.switch_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch_ns, "link", "set", "br0", "up")
        ends = {f"n{i}": (ns, i) for i, ns in self.node_ns.items()}
        ends["c"] = (self.client_ns, CLIENT_HOST)
        for port, (ns, host) in ends.items():
            self._add_ns(ns)
            _ip("-n", self.switch_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch_ns, "link", "set", port, "master", "br0")
            _ip("-n", self.switch_ns, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.subnet}.{host}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def block(self, src: int, dst: int) -> None:
        """Drop every packet node `src` sends to node `dst` (one direction)."""
        if (src, dst) in self.blocked or src == dst:
            return
        _ip("-n", self.node_ns[src], "route", "add", "blackhole", f"{self.address(dst)}/32")
        self.blocked.add((src, dst))

    def partition(self, side_a: Iterable[int], side_b: Iterable[int], *, one_way: bool = False) -> None:
        """Cut `side_a` from `side_b`: both ways, or only a's packets to b with `one_way`."""
        side_b = list(side_b)
        for a in side_a:
            for b in side_b:
                self.block(a, b)
                if not one_way:
                    self.block(b, a)

    def heal(self) -> None:
        for src, dst in sorted(self.blocked):
            _ip("-n", self.node_ns[src], "route", "del", "blackhole", f"{self.address(dst)}/32", check=False)
        self.blocked.clear()

    def exec_argv(self, netns: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", netns, *argv]

    def close(self) -> None:
        for name in reversed(self.made):
            _ip("netns", "del", name, check=False)
        self.made.clear()


class NodeProcess:
    """One `kavka server start` inside its namespace: output kept, ready line awaited with a deadline."""

    def __init__(self, node: Node, root: Path, props: Mapping[str, str]) -> None:
        self.node = node
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_file = root / "server.properties"
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_dir = Path(props["log.dirs"])
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.paused = False
        self.starts = 0
        self._ready = threading.Event()

    def format_argv(self, cluster_id: str) -> list[str]:
        return [*KAVKA, "storage", "format", "--config", str(self.config_file), "--cluster-id", cluster_id]

    def start(self) -> None:
        self._ready = ready = threading.Event()
        self.paused = False
        self.starts += 1
        self.output.append(f"---- start {self.starts}\n")
        self.proc = proc = subprocess.Popen(
            ["ip", "netns", "exec", self.node.netns, *KAVKA, "server", "start", "--config", str(self.config_file)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        output = self.output

        def pump() -> None:
            assert proc.stdout is not None
            with open(self.root / "server.log", "a") as log_file:
                for line in proc.stdout:
                    log_file.write(line)
                    output.append(line)
                    del output[:-300]
                    if line.startswith("KAVKA_READY"):
                        ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True, name=f"node{self.node.node_id}-output").start()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {self.node.node_id} not ready in {timeout}s:\n{self.tail()}")
        if not self.alive():
            raise RuntimeError(f"node {self.node.node_id} exited:\n{self.tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL when it has not exited by the deadline."""
        if not self.alive():
            return
        assert self.proc is not None
        self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:])


# Fast failure detection, so a fault of a few seconds is seen and healed within it.
FAST_FAILOVER = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "offsets.topic.num.partitions": "3",
    "log.retention.check.interval.ms": "60000",
}


class NetnsCluster:
    """`nodes` kavka nodes on a `Switch`: nodes 1..`voters` are broker,controller voters of the
    KRaft quorum, the rest broker-only. The properties are those of the tests' `Cluster`
    (tests/broker_harness.py) with every listener on the node's own address."""

    def __init__(self, root: Path, nodes: int = 5, *, voters: int = 3,
                 overrides: Mapping[str, str] | None = None, subnet: str = "10.77.0") -> None:
        self.root = Path(root)
        self.switch = Switch(range(1, nodes + 1), subnet=subnet)
        self.cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        self.nodes: dict[int, NodeProcess] = {}
        try:
            self._configure(nodes, voters, overrides or {})
        except BaseException:
            self.switch.close()
            raise

    def _configure(self, nodes: int, voters: int, overrides: Mapping[str, str]) -> None:
        voter_list = ",".join(f"{i}@{self.switch.address(i)}:{CONTROLLER_PORT}" for i in range(1, voters + 1))
        for i in range(1, nodes + 1):
            node = Node(i, self.switch.node_ns[i], self.switch.address(i), voter=i <= voters)
            listeners = [f"PLAINTEXT://{node.address}:{CLIENT_PORT}"]
            if node.voter:
                listeners.append(f"CONTROLLER://{node.address}:{CONTROLLER_PORT}")
            props = {
                "node.id": str(i),
                "process.roles": "broker,controller" if node.voter else "broker",
                "listeners": ",".join(listeners),
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voter_list,
                "log.dirs": str(self.root / f"node{i}" / "data"),
                "num.partitions": "1",
                **FAST_FAILOVER,
                **overrides,
            }
            self.nodes[i] = NodeProcess(node, self.root / f"node{i}", props)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.node.bootstrap for n in self.nodes.values())

    def start(self, timeout: float = 90.0) -> NetnsCluster:
        formats = {i: subprocess.Popen(n.format_argv(self.cluster_id), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True) for i, n in self.nodes.items()}
        for i, p in formats.items():
            out, _ = p.communicate(timeout=60)
            if p.returncode != 0:
                raise RuntimeError(f"kavka storage format failed for node {i}: {out}")
        for n in self.nodes.values():
            n.start()
        deadline = time.monotonic() + timeout
        for n in self.nodes.values():
            n.wait_ready(max(1.0, deadline - time.monotonic()))
        return self

    def client_argv(self, argv: list[str]) -> list[str]:
        """`argv` run inside the client namespace (where every node's address is reachable)."""
        return self.switch.exec_argv(self.switch.client_ns, argv)

    def heal_all(self) -> None:
        """Undo every fault: routes removed, paused nodes continued, dead nodes started again."""
        self.switch.heal()
        for n in self.nodes.values():
            if n.paused:
                n.resume()
            if not n.alive():
                n.start()

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.nodes[node_id].log_dir / f"{topic}-{partition}"

    def stop(self) -> None:
        """SIGTERM every live node at once (controlled shutdowns while the quorum is up), then wait."""
        live = [n for n in self.nodes.values() if n.alive()]
        for n in live:
            n.resume()
            n.signal(signal.SIGTERM)
        for n in live:
            n.stop()

    def close(self) -> None:
        """Kill whatever still runs and delete the namespaces (safe to call twice, and after a failure)."""
        for n in self.nodes.values():
            try:
                n.resume()
                n.kill()
            except Exception:  # noqa: S110 -- teardown goes on to the namespaces whatever one node did
                pass
        self.switch.close()
