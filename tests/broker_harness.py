"""Real kavka broker processes for tests: formatted, started, stopped and killed like in production.

A `BrokerProcess` writes a server.properties under its own directory, runs
`kavka storage format` and `kavka server start` as subprocesses (the same
commands a user runs), and waits -- with a deadline -- for the process to
print its KAVKA_READY line with the bound port. Nothing is mocked.
"""

from __future__ import annotations

import base64
import concurrent.futures
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

KAVKA = [sys.executable, "-m", "kavka"]

# Every broker process a test starts, with when it started: when a test fails, conftest adds
# the logs of those started during it (and any still running) to the report, so a failure in
# CI, where nothing else is kept, shows what the brokers were doing.
STARTED: list[tuple[float, BrokerProcess]] = []


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_FIRST_PORT = 10000
_next_port: list[int] = []  # the next candidate of free_port(), in this process's slice


def _port_slice() -> tuple[int, int]:
    """This process's share of the ports below the kernel's ephemeral range: one disjoint slice
    per xdist worker (PYTEST_XDIST_WORKER gwN of PYTEST_XDIST_WORKER_COUNT), the whole range alone."""
    top = _ephemeral_low() - 1
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    i = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = (top - _FIRST_PORT) // max(count, 1)
    return _FIRST_PORT + i * span, _FIRST_PORT + (i + 1) * span


def free_port() -> int:
    """A loopback port free now, for a broker or server a test starts.

    Not bind-to-0: that hands out a port of the kernel's ephemeral range, where every client
    connection's source port comes from, so a connection of the other xdist worker could take it
    before the broker binds it (CI saw a broker die with "address already in use"). Ports come
    instead from this process's slice below that range, in turn from a random start, so neither
    the other worker nor this process hands out the same one again until the slice wraps."""
    lo, hi = _port_slice()
    if not _next_port:
        _next_port.append(random.randrange(lo, hi))
    for _ in range(hi - lo):
        port = _next_port[0]
        _next_port[0] = lo + (port + 1 - lo) % (hi - lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or in TIME_WAIT): the next one
        return port
    raise RuntimeError(f"no free port in {lo}-{hi}")


def free_port_block(offsets: tuple[int, ...]) -> int:
    """A base port with `base + offset` free on loopback for every offset: for commands that take
    a base port (`kavka cluster up --base-port`) or fixed ports (the README's).

    Drawn, as free_port()'s, from this process's slice below the kernel's ephemeral range (where
    every client connection's source port comes from): nothing another test run beside this one
    takes these ports between this check and the commands' binds."""
    lo, hi = _port_slice()
    top = hi - max(offsets) - 1
    for _ in range(200):
        base = random.randrange(lo, top)
        socks = []
        try:
            for off in offsets:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + off))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no free block of ports {offsets} below {top}")


class BrokerProcess:
    def __init__(
        self,
        root: Path,
        *,
        node_id: int = 1,
        overrides: dict[str, str] | None = None,
        log_dirs: int = 1,
        port: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.port = port or free_port()
        self.log_dirs = [self.root / f"data{i}" for i in range(log_dirs)]
        props = {
            "node.id": str(node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.partitions": "1",
            "log.retention.check.interval.ms": "500",
        }
        props.update(overrides or {})
        self.config_file = self.root / "server.properties"
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self._formatted = False
        self.format_args: list[str] = []  # extra `kavka storage format` options (--add-scram ...)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def format(self, cluster_id: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [*KAVKA, "storage", "format", "--config", str(self.config_file)]
        if cluster_id:
            cmd += ["--cluster-id", cluster_id]
        cmd += self.format_args
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError(f"kavka storage format failed: {res.stdout}{res.stderr}")
        self._formatted = True
        return res

    def start(self, timeout: float = 30.0, env: dict[str, str] | None = None, *, wait: bool = True) -> BrokerProcess:
        """Start the broker; ``env`` adds variables (test hooks such as fault injection).

        With ``wait=False`` it returns at once; `wait_ready` then waits (the nodes of a
        cluster are all started before any can elect a controller and be ready).
        """
        if not self._formatted:
            self.format()
        self.output = []
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc = subprocess.Popen(
            [*KAVKA, "server", "start", "--config", str(self.config_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        ready = threading.Event()
        proc = self.proc

        # KAVKA_TEST_LOG_DIR keeps every broker's whole output in a file there (e.g. to grep a
        # suite's logs for secrets); by default it is kept in memory and shown on a failure.
        keep_dir = os.environ.get("KAVKA_TEST_LOG_DIR")
        keep = open(Path(keep_dir) / f"kavka-{os.getpid()}-{proc.pid}.log", "w") if keep_dir else None  # noqa: SIM115

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line)
                if keep is not None:
                    keep.write(line)
                    keep.flush()
                if line.startswith("KAVKA_READY"):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        self._ready = ready
        STARTED.append((time.monotonic(), self))
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> BrokerProcess:
        ready, proc = self._ready, self.proc
        assert proc is not None
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker did not start in {timeout}s:\n{self.log_text()}")
        if not any(line.startswith("KAVKA_READY") for line in self.output):
            # EOF on stdout without the ready line: the broker is exiting (it may
            # not be reaped yet, so poll() can still say None).
            proc.wait(5)
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{self.log_text()}")
        return self

    def log_text(self) -> str:
        return "".join(self.output[-200:])

    def stop(self, timeout: float = 30.0) -> int:
        """Graceful stop (SIGTERM), as an operator does; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise TimeoutError(f"broker did not stop in {timeout}s after SIGTERM:\n{self.log_text()}") from None

    def kill(self) -> None:
        """kill -9: an unclean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """N nodes with one cluster id: combined broker,controller voters by default; with
    `controllers=k`, nodes 1..k are controller-only voters and the rest broker-only observers."""

    def __init__(
        self,
        root: Path,
        nodes: int = 3,
        *,
        overrides: dict[str, str] | None = None,
        controllers: int | None = None,
        node_overrides: dict[int, dict[str, str]] | None = None,
        log_dirs: int = 1,
    ) -> None:
        """`node_overrides` adds per-node properties (e.g. `broker.rack`) on top of `overrides`;
        `log_dirs` is the number of log dirs of each node."""
        self.root = Path(root)
        voter_ids = range(1, (controllers or nodes) + 1)
        ctl_ports = {i: free_port() for i in voter_ids}
        client_ports = {i: free_port() for i in range(1, nodes + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ctl_ports.items())
        self.controller_ports = ctl_ports
        self.nodes: dict[int, BrokerProcess] = {}
        for i in range(1, nodes + 1):
            if controllers is None:
                roles = "broker,controller"
                listeners = f"PLAINTEXT://127.0.0.1:{client_ports[i]},CONTROLLER://127.0.0.1:{ctl_ports[i]}"
            elif i in ctl_ports:
                roles, listeners = "controller", f"CONTROLLER://127.0.0.1:{ctl_ports[i]}"
            else:
                roles, listeners = "broker", f"PLAINTEXT://127.0.0.1:{client_ports[i]}"
            props = {
                "process.roles": roles,
                "listeners": listeners,
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "offsets.topic.num.partitions": "6",
            }
            props.update(overrides or {})
            props.update((node_overrides or {}).get(i, {}))
            port = ctl_ports[i] if roles == "controller" else client_ports[i]
            self.nodes[i] = BrokerProcess(self.root / f"node{i}", node_id=i, overrides=props, port=port, log_dirs=log_dirs)
        self.brokers = {i: n for i, n in self.nodes.items() if controllers is None or i not in ctl_ports}
        self.cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()  # a Kafka Uuid

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers.values())

    def start(self, timeout: float = 60.0, env: Callable[[int], dict[str, str]] | None = None) -> Cluster:
        """Format and start every node; ``env(node_id)`` adds variables (test hooks) to a node's."""
        unformatted = [n for n in self.nodes.values() if not n._formatted]
        with concurrent.futures.ThreadPoolExecutor(max(1, len(unformatted))) as pool:  # each a process
            for _ in pool.map(lambda n: n.format(self.cluster_id), unformatted):
                pass
        for i, n in self.nodes.items():
            n.start(env=env(i) if env else None, wait=False)
        for n in self.nodes.values():
            n.wait_ready(timeout)
        return self

    def stop(self) -> None:
        """SIGTERM every node at once (each does its controlled shutdown while the quorum is up);
        with separate roles the brokers first, then the controllers (as Kafka's operators do: a
        broker's controlled shutdown needs a controller to grant it)."""
        controllers = [n for i, n in self.nodes.items() if i not in self.brokers]
        for group in (list(self.brokers.values()), controllers):
            alive = [n for n in group if n.alive()]
            for n in alive:
                n.proc.send_signal(signal.SIGTERM)
            for n in alive:
                n.stop()
