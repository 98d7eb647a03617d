"""LocalCluster: N kavka nodes as local processes, for `kavka cluster up` and `kavka demo`.

Writes one `server.properties` per node under `<data_dir>/node<i>/` (combined
broker,controller nodes, every node a voter of the metadata quorum, a client
listener and a CONTROLLER listener on loopback; or, with `controllers=k`,
nodes 1..k controller-only voters and k+1..k+n broker-only observers), formats every node with one
cluster id (kept in `<data_dir>/cluster.id`, so starting again brings back the
same cluster), starts each as `kavka server start`, copies its output to
`<data_dir>/node<i>/server.log`, and waits until every node printed
KAVKA_READY. `stop()` sends SIGTERM to every node at once (brokers before controller-only nodes) -- each does its
controlled shutdown while the quorum is still there -- then waits for each.

Ports: node i listens on `base_port + i - 1` and its controller on
`base_port + 100 + i - 1`; with `base_port=None` free ports are picked.

With `secure=True` (`kavka cluster up --secure`) every listener is secured. `<data_dir>/secure/`
gets a CA and one PEM keystore per node (kavka.certs; each certificate is a server and a client
certificate), a generated `admin` user and a generated `broker` user whose passwords are kept in
`secure/admin.password` and `secure/broker.password` (0600; starting again reuses them), and the
clients' configs `client.properties` (Java/Kafka tools, the kavka CLI's `--command-config`) and
`librdkafka.properties` (confluent-kafka, kcat), 0600 as they hold the password. The listeners:

    CLIENT      SASL_SSL, PLAIN, the one user `admin` (port base_port + i - 1)
    INTERNAL    SASL_SSL, SCRAM-SHA-512: the brokers' replication (base_port + 200 + i - 1); each
                broker logs in as `broker`, whose credential every voter is formatted with
                (`kavka storage format --add-scram`), so it is in the metadata log before the first
                fetch; no password of it sits in any listener's user list
    CONTROLLER  SSL with ssl.client.auth=required (mutual TLS): the quorum and the brokers'
                controller RPCs (base_port + 100 + i - 1); SCRAM cannot serve here (its
                credentials live in the metadata log this listener carries, Kafka's KRaft rule)

Every `server.properties` of a secure cluster holds a password and is written 0600.
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kavka import certs

# The listeners of a secure local cluster (see the module docstring).
CLIENT_LISTENER, INTER_BROKER_LISTENER, CONTROLLER_LISTENER = "CLIENT", "INTERNAL", "CONTROLLER"
CLIENT_PROTOCOL, INTER_BROKER_PROTOCOL, CONTROLLER_PROTOCOL = "SASL_SSL", "SASL_SSL", "SSL"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER, BROKER_USER = "admin", "broker"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


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


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a client of a secure local cluster needs: the CA, the admin user and the config files."""

    ca: Path
    username: str
    password: str = field(repr=False)
    client_properties: Path
    librdkafka_properties: Path
    broker_password: str = field(repr=False, default="")

    def librdkafka_config(self, bootstrap: str) -> dict[str, str]:
        """confluent-kafka's / librdkafka's keys (kcat takes them as `-X key=value` or `-F file`)."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": self.username,
            "sasl.password": self.password,
            "ssl.ca.location": str(self.ca),
        }

    def java_config(self) -> dict[str, str]:
        """The Java client's keys (kafka-*.sh and kavka --command-config): the CA as a PEM truststore
        (KIP-651). No bootstrap.servers: the tools take --bootstrap-server, and kavka's CLI refuses
        keys it would not use."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required username="{self.username}" password="{self.password}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }


def _properties(values: Mapping[str, str]) -> bytes:
    return "".join(f"{k}={v}\n" for k, v in values.items()).encode()


class NodeProcesses:
    """kavka processes started by this one: each one's output copied line by line to a log file or
    to `on_line`, the last lines kept, ready once it printed KAVKA_READY; stopped with SIGTERM, group
    by group. Shared by LocalCluster (`kavka cluster up`) and `kavka server start --processes`."""

    def __init__(self, on_line: Callable[[int, str], None] | None = None) -> None:
        self.on_line = on_line
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.logs: dict[int, list[str]] = {}
        self._ready: dict[int, threading.Event] = {}
        self._ready_lines: dict[int, str] = {}  # kept apart: `logs` keeps only the last lines

    def spawn(self, i: int, cmd: list[str], log_path: Path | None = None, *, die_with_parent: bool = False) -> None:
        """Start node i's command in a session of its own (a Ctrl-C goes to this process, which stops
        the nodes in order). With `die_with_parent` the node gets SIGTERM if this process dies, even
        by SIGKILL (Linux), so a killed supervisor leaves no broker behind."""
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True,
            preexec_fn=_sigterm_on_parent_death if die_with_parent else None,
        )
        self.procs[i], self._ready[i], self.logs[i] = proc, threading.Event(), []
        threading.Thread(target=self._pump, args=(i, proc, log_path), daemon=True).start()

    def _pump(self, i: int, proc: subprocess.Popen[str], log_path: Path | None) -> None:
        assert proc.stdout is not None
        log_file = open(log_path, "a") if log_path is not None else None  # noqa: SIM115 -- closed below
        try:
            for line in proc.stdout:
                if log_file is not None:
                    log_file.write(line)
                    log_file.flush()
                if self.on_line is not None:
                    self.on_line(i, line)
                self.logs[i].append(line)
                del self.logs[i][:-50]
                if line.startswith("KAVKA_READY"):
                    self._ready_lines[i] = line.strip()
                    self._ready[i].set()
        finally:
            if log_file is not None:
                log_file.close()
            self._ready[i].set()

    def wait_ready(self, i: int, deadline: float) -> None:
        """Until node i printed KAVKA_READY (by `deadline`, time.monotonic()); LocalClusterError if
        it exited first or did not make it."""
        while not self._ready[i].wait(0.2):
            if time.monotonic() > deadline:
                raise LocalClusterError(f"node {i} did not start in time:\n{self.tail(i)}")
        if self.ready_line(i) is None:
            raise LocalClusterError(f"node {i} exited with {self.procs[i].wait(10)}:\n{self.tail(i)}")

    def ready_line(self, i: int) -> str | None:
        """Node i's KAVKA_READY line (its bound ports), once printed."""
        return self._ready_lines.get(i)

    def tail(self, i: int, lines: int = 20) -> str:
        return "".join(self.logs.get(i, [])[-lines:])

    def dead(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is not None]

    def stop(self, groups: list[list[int]], timeout_s: float = 60.0,
             on_event: Callable[[str], None] = lambda message: None) -> dict[int, int]:
        """SIGTERM every live node of a group at once, wait for each, then the next group; the exit codes."""
        for group in groups:
            live = [i for i in group if self.procs[i].poll() is None]
            for i in live:
                on_event(f"stopping node {i} ...")
                self.procs[i].send_signal(signal.SIGTERM)
            for i in live:
                try:
                    self.procs[i].wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self.procs[i].kill()
                    self.procs[i].wait(10)
        return {i: p.returncode for i, p in self.procs.items()}


def _sigterm_on_parent_death() -> None:
    """Runs in the child before exec: prctl(PR_SET_PDEATHSIG, SIGTERM); a no-op where there is no prctl."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


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
        secure: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.separate = controllers is not None
        self.n = nodes + (controllers or 0)
        voters = list(range(1, (controllers or nodes) + 1))
        brokers = list(range((controllers or 0) + 1, self.n + 1))
        self.secure = secure
        internal = brokers if secure else []
        if base_port is None:
            ports = _free_ports(len(voters) + 2 * len(brokers) + len(internal))
            self.client_ports = {b: ports[k] for k, b in enumerate(brokers)}
            self.controller_ports = {v: ports[len(brokers) + k] for k, v in enumerate(voters)}
            self.internal_ports = {b: ports[len(brokers) + len(voters) + k] for k, b in enumerate(internal)}
            self.metrics_ports = {b: ports[len(brokers) + len(voters) + len(internal) + k] for k, b in enumerate(brokers)}
        else:
            self.client_ports = {b: base_port + k for k, b in enumerate(brokers)}
            self.controller_ports = {v: base_port + 100 + k for k, v in enumerate(voters)}
            self.internal_ports = {b: base_port + 200 + k for k, b in enumerate(internal)}
            self.metrics_ports = {b: base_port + 300 + k for k, b in enumerate(brokers)}
        self.security: ClientSecurity | None = None
        self._new_passwords: list[str] = []
        self.racks = racks or []
        self.overrides = dict(overrides or {})
        self.on_event = on_event
        self.nodes = NodeProcesses()
        self.procs = self.nodes.procs
        self.logs = self.nodes.logs
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[i]}" for i in sorted(self.client_ports))

    def node_props(self, i: int) -> dict[str, str]:
        voters = ",".join(f"{j}@127.0.0.1:{self.controller_ports[j]}" for j in sorted(self.controller_ports))
        listeners = []
        if i in self.client_ports and self.secure:
            listeners.append(f"{CLIENT_LISTENER}://127.0.0.1:{self.client_ports[i]}")
            listeners.append(f"{INTER_BROKER_LISTENER}://127.0.0.1:{self.internal_ports[i]}")
        elif i in self.client_ports:
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
        if i in self.metrics_ports:
            # Each broker's Prometheus endpoint (loopback): the console reads its byte counters.
            props["metrics.prometheus.port"] = str(self.metrics_ports[i])
        if self.secure:
            props.update(self._secure_props(i))
        props.update(self.overrides)
        return props

    @property
    def secure_dir(self) -> Path:
        return self.data_dir / "secure"

    def cli_command(self) -> str:
        """A kavka command that reaches the secure cluster (its CLIENT listeners, as `admin`)."""
        assert self.security is not None, "prepare_security() first"
        return f"kavka topics list --bootstrap-server {self.bootstrap} --command-config {self.security.client_properties}"

    def _secure_props(self, i: int) -> dict[str, str]:
        assert self.security is not None, "prepare_security() first"
        tls = {  # every listener's TLS, and the client side of the node's own connections
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.secure_dir / f"node{i}.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.security.ca),
            f"listener.name.{CONTROLLER_LISTENER.lower()}.ssl.client.auth": "required",
        }
        if i not in self.client_ports:  # a controller-only node: only the controller listener
            return {"listener.security.protocol.map": f"{CONTROLLER_LISTENER}:{CONTROLLER_PROTOCOL}", **tls}
        c, ib = CLIENT_LISTENER.lower(), INTER_BROKER_LISTENER.lower()
        return {
            "listener.security.protocol.map": f"{CLIENT_LISTENER}:{CLIENT_PROTOCOL},{INTER_BROKER_LISTENER}:{INTER_BROKER_PROTOCOL},"
                                              f"{CONTROLLER_LISTENER}:{CONTROLLER_PROTOCOL}",
            "inter.broker.listener.name": INTER_BROKER_LISTENER,
            f"listener.name.{c}.sasl.enabled.mechanisms": "PLAIN",
            f"listener.name.{c}.plain.sasl.jaas.config":
                f'{PLAIN_LOGIN_MODULE} required user_{self.security.username}="{self.security.password}";',
            f"listener.name.{ib}.sasl.enabled.mechanisms": INTER_BROKER_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
            f"listener.name.{ib}.{INTER_BROKER_MECHANISM.lower()}.sasl.jaas.config":
                f'{SCRAM_LOGIN_MODULE} required username="{BROKER_USER}" password="{self.security.broker_password}";',
            **tls,
        }

    def _format_args(self, i: int) -> list[str]:
        """The broker user's SCRAM credential, written by every voter's format into the first batch
        of the metadata log (any voter may be the first leader)."""
        if not self.secure or i not in self.controller_ports:
            return []
        assert self.security is not None
        return ["--add-scram", f"{INTER_BROKER_MECHANISM}=[name={BROKER_USER},password={self.security.broker_password}]"]

    def _password(self, path: Path) -> str:
        if not path.exists():
            self._new_passwords.append(path.name)  # token_urlsafe: no comma or quote, so it fits --add-scram and JAAS as is
            certs.write_private(path, (secrets.token_urlsafe(24) + "\n").encode())
        return path.read_text().strip()

    def prepare_security(self) -> ClientSecurity:
        """The CA, each broker's keystore, the admin password and the client config files (made once,
        reused when the cluster starts again)."""
        d = self.secure_dir
        ca = certs.ensure_ca(d)
        for i in range(1, self.n + 1):
            certs.ensure_server_keystore(ca, d / f"node{i}.pem", cn=f"kavka node {i}")
        self.security = ClientSecurity(
            ca=ca.cert_path, username=ADMIN_USER, password=self._password(d / "admin.password"),
            client_properties=d / "client.properties", librdkafka_properties=d / "librdkafka.properties",
            broker_password=self._password(d / "broker.password"),
        )
        certs.write_private(self.security.client_properties, _properties(self.security.java_config()))
        certs.write_private(self.security.librdkafka_properties,
                            _properties(self.security.librdkafka_config(self.bootstrap)))
        return self.security

    def start(self, timeout_s: float = 120.0) -> str:
        """Format (first time), start every node, wait until all are ready; the bootstrap servers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        id_file = self.data_dir / "cluster.id"
        if not id_file.exists():
            id_file.write_text(base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode() + "\n")
        self.cluster_id = id_file.read_text().strip()
        if self.secure:
            self.prepare_security()
        kavka = [sys.executable, "-m", "kavka"]
        for i in range(1, self.n + 1):
            node_dir = self.data_dir / f"node{i}"
            node_dir.mkdir(exist_ok=True)
            config = node_dir / "server.properties"
            if self.secure:  # it holds the admin password
                certs.write_private(config, _properties(self.node_props(i)))
            else:
                config.write_text("".join(f"{k}={v}\n" for k, v in self.node_props(i).items()))
            formatted = (node_dir / "data" / "meta.properties").exists()
            if formatted and self.secure and "broker.password" in self._new_passwords:
                raise LocalClusterError(f"{node_dir} holds a cluster made before `--secure` created the brokers' user (its "
                                        "credential is written when the nodes are formatted); use a new --data-dir")
            if not formatted:
                res = subprocess.run(
                    [*kavka, "storage", "format", "--config", str(config), "--cluster-id", self.cluster_id,
                     *self._format_args(i)],
                    capture_output=True, text=True, timeout=60,
                )
                if res.returncode != 0:
                    raise LocalClusterError(f"formatting node {i} failed: {res.stdout}{res.stderr}")
            self.nodes.spawn(i, [*kavka, "server", "start", "--config", str(config)], node_dir / "server.log")
        deadline = time.monotonic() + timeout_s
        for i in self.procs:
            self.nodes.wait_ready(i, deadline)
            where = self.client_ports.get(i) or self.controller_ports[i]
            role = "" if not self.separate else (" (controller)" if i in self.controller_ports else " (broker)")
            self.on_event(f"node {i}{role} ready on 127.0.0.1:{where}")
        return self.bootstrap

    def tail(self, i: int, lines: int = 20) -> str:
        return self.nodes.tail(i, lines)

    def dead(self) -> list[int]:
        return self.nodes.dead()

    def stop(self, timeout_s: float = 60.0) -> dict[int, int]:
        """SIGTERM every live node at once, then wait for each; their exit codes. With separate
        controllers the brokers go first: their controlled shutdown needs a controller to grant it."""
        brokers = [i for i in self.procs if i in self.client_ports]
        return self.nodes.stop([brokers, [i for i in self.procs if i not in self.client_ports]], timeout_s, self.on_event)


# ---------------------------------------------------------------------- the web console next to a local cluster


def start_console(bootstrap: str, port: int, *, command_config: Path | None = None) -> subprocess.Popen[str]:
    """`kavka console` for a local cluster (`kavka cluster up --console-port`, `kavka demo
    --console-port`), as its own process on 127.0.0.1:`port`; it prints its URL on stdout."""
    cmd = [sys.executable, "-m", "kavka", "console", "--bootstrap-server", bootstrap, "--port", str(port)]
    if command_config is not None:
        cmd += ["--command-config", str(command_config)]
    return subprocess.Popen(cmd, text=True)


def stop_console(proc: subprocess.Popen[str], timeout_s: float = 15.0) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode
