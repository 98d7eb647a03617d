"""LocalCluster: N kavka nodes as local processes, for `kavka cluster up` and `kavka demo`.

Writes one `server.properties` per node under `<data_dir>/node<i>/` (combined
broker,controller nodes, every node a voter of the metadata quorum, a client
listener and a CONTROLLER listener on loopback; or, with `controllers=k`,
nodes 1..k controller-only voters and k+1..k+n broker-only observers), formats every node with one
cluster id (kept in `<data_dir>/cluster.id`, so starting again brings back the
same cluster), starts each as `kavka server start`, copies its output to
`<data_dir>/node<i>/server.log`, and waits until every node printed
KAVKA_READY. `stop()` sends SIGTERM to every node at once -- each does its
controlled shutdown while the quorum is still there -- then waits for each.

Ports: node i listens on `base_port + i - 1` and its controller on
`base_port + 100 + i - 1`; with `base_port=None` free ports are picked.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path


class LocalClusterError(RuntimeError):
    pass


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalCluster:
    def __init__(
        self,
        data_dir: Path,
        nodes: int,
        *,
        base_port: int | None = None,
        controllers: int | None = None,
        racks: list[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        on_event: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.separate = controllers is not None
        self.n = nodes + (controllers or 0)
        voters = list(range(1, (controllers or nodes) + 1))
        brokers = list(range((controllers or 0) + 1, self.n + 1))
        if base_port is None:
            ports = _free_ports(len(voters) + len(brokers))
            self.client_ports = {b: ports[k] for k, b in enumerate(brokers)}
            self.controller_ports = {v: ports[len(brokers) + k] for k, v in enumerate(voters)}
        else:
            self.client_ports = {b: base_port + k for k, b in enumerate(brokers)}
            self.controller_ports = {v: base_port + 100 + k for k, v in enumerate(voters)}
        self.racks = racks or []
        self.overrides = dict(overrides or {})
        self.on_event = on_event
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.logs: dict[int, list[str]] = {}
        self._ready: dict[int, threading.Event] = {}
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[i]}" for i in sorted(self.client_ports))

    def node_props(self, i: int) -> dict[str, str]:
        voters = ",".join(f"{j}@127.0.0.1:{self.controller_ports[j]}" for j in sorted(self.controller_ports))
        listeners = []
        if i in self.client_ports:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.client_ports[i]}")
        if i in self.controller_ports:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_ports[i]}")
        roles = "broker,controller" if not self.separate else ("controller" if i in self.controller_ports else "broker")
        props = {
            "node.id": str(i),
            "process.roles": roles,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "log.dirs": str(self.data_dir / f"node{i}" / "data"),
        }
        if self.racks and i in self.client_ports:
            props["broker.rack"] = self.racks[(i - 1) % len(self.racks)]
        props.update(self.overrides)
        return props

    def start(self, timeout_s: float = 120.0) -> str:
        """Format (first time), start every node, wait until all are ready; the bootstrap servers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        id_file = self.data_dir / "cluster.id"
        if not id_file.exists():
            id_file.write_text(base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode() + "\n")
        self.cluster_id = id_file.read_text().strip()
        kavka = [sys.executable, "-m", "kavka"]
        for i in range(1, self.n + 1):
            node_dir = self.data_dir / f"node{i}"
            node_dir.mkdir(exist_ok=True)
            config = node_dir / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in self.node_props(i).items()))
            if not (node_dir / "data" / "meta.properties").exists():
                res = subprocess.run(
                    [*kavka, "storage", "format", "--config", str(config), "--cluster-id", self.cluster_id],
                    capture_output=True, text=True, timeout=60,
                )
                if res.returncode != 0:
                    raise LocalClusterError(f"formatting node {i} failed: {res.stdout}{res.stderr}")
            proc = subprocess.Popen(
                [*kavka, "server", "start", "--config", str(config)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
                start_new_session=True,  # Ctrl-C goes to the caller, which stops the nodes in order
            )
            self.procs[i], self._ready[i], self.logs[i] = proc, threading.Event(), []
            threading.Thread(target=self._pump, args=(i, proc), daemon=True).start()
        deadline = time.monotonic() + timeout_s
        for i in self.procs:
            while not self._ready[i].wait(0.2):
                if time.monotonic() > deadline:
                    raise LocalClusterError(f"node {i} did not start in {timeout_s:.0f}s:\n{self.tail(i)}")
            if not any(line.startswith("KAVKA_READY") for line in self.logs[i]):
                raise LocalClusterError(f"node {i} exited with {self.procs[i].wait(10)}:\n{self.tail(i)}")
            where = self.client_ports.get(i) or self.controller_ports[i]
            role = "" if not self.separate else (" (controller)" if i in self.controller_ports else " (broker)")
            self.on_event(f"node {i}{role} ready on 127.0.0.1:{where}")
        return self.bootstrap

    def _pump(self, i: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.data_dir / f"node{i}" / "server.log", "a") as log_file:
            for line in proc.stdout:
                log_file.write(line)
                log_file.flush()
                self.logs[i].append(line)
                del self.logs[i][:-50]
                if line.startswith("KAVKA_READY"):
                    self._ready[i].set()
        self._ready[i].set()

    def tail(self, i: int, lines: int = 20) -> str:
        return "".join(self.logs.get(i, [])[-lines:])

    def dead(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is not None]

    def stop(self, timeout_s: float = 60.0) -> dict[int, int]:
        """SIGTERM every live node at once, then wait for each; their exit codes."""
        live = [i for i, p in self.procs.items() if p.poll() is None]
        for i in live:
            self.on_event(f"stopping node {i} ...")
            self.procs[i].send_signal(signal.SIGTERM)
        for i in live:
            try:
                self.procs[i].wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.procs[i].kill()
                self.procs[i].wait(10)
        return {i: p.returncode for i, p in self.procs.items()}
