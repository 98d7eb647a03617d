"""`python -m bench.scale`: how kavka scales with partitions and connections.

Measures, on one broker with data on disk:
- the time to create N partitions (20 topics a CreateTopics), to the last log the broker created
  (DescribeLogDirs), and each CreateTopics' own time;
- the broker's CPU seconds for the creation and for each start (less at the mercy of other work
  on a shared machine than the elapsed times);
- startup time with N partitions (process start to the first answer to ApiVersions and to a
  Metadata listing the broker and a controller), after a clean stop (SIGTERM: the recovery scan is
  skipped) and after an unclean one (kill -9: every segment after the recovery point is scanned);
- the Metadata response time for all topics with N partitions (decoded, and to its last byte);
- broker RSS at idle with N partitions and with C idle client connections.
Targets from issue 6: 10,000 partitions start in under 10 s after a clean stop,
and RSS stays under 1 GiB; from issue 32: 10,000 partitions created in under 10 s, and 100,000 on
a 3-node cluster without a timeout (`--nodes 3`: the creation only, printed as JSON). Every broker
started is stopped on every path (an error, Ctrl-C). Results go to JSON and to docs/benchmarks.md
(between the SCALE:BEGIN/END markers).

This VM's filesystem makes creating a file cost ~0.8 ms of kernel CPU, so the creation's figure
depends on the machine more than on the broker: `--servers kavka,kafka` measures Apache Kafka
(one combined KRaft node, as `python -m bench` runs it) the same way in the same run, `--rounds N`
alternating the order (kavka, Kafka, then Kafka, kavka...), each run a fresh process in a fresh
temp dir; the table (one row per server per round, then kavka / Kafka of the medians of the
creation's time and CPU) goes to stdout and --out only. Every measurement is taken the same way on
both: kavka's AdminClient speaks the Kafka protocol, and /proc gives the JVM's CPU (all its
threads) and RSS as it gives kavka's. Kafka after kill -9 is measured as an operator would see it:
its controller, restarted with it, keeps the killed broker's registration alive for
broker.session.timeout.ms (9 s) and refuses the new one until then (ClusterControlManager's
DuplicateBrokerRegistrationException): with few partitions that is most of the start; with
10,000 it overlaps the recovery of every log (Kafka's "Loaded 10000 logs in ~25 s (unclean log
dirs)" at INFO).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import _kafka_node, free_port, rss_bytes
from kavka.client import negotiation
from kavka.client import requests as kreq
from kavka.client.admin import AdminClient, NewTopic
from kavka.client.connection import BlockingConnection
from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError
from kavka.protocol.api import ApiKey
from kavka.protocol.framing import encode_request

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- SCALE:BEGIN -->", "<!-- SCALE:END -->"
KAVKA = [sys.executable, "-m", "kavka"]


def answers(port: int, node_id: int = 1) -> bool:
    """Whether the broker on `port` answers ApiVersions and a Metadata that lists it (`node_id`)
    and a controller: the readiness both servers' start times count to (tests/kafka_reference.py
    waits for the same on Kafka, which opens its client listener only once the broker is
    unfenced, its logs loaded)."""
    with BlockingConnection("127.0.0.1", port, client_id="scale-ready", timeout_s=5) as conn:  # ApiVersions
        md = conn.send(kreq.metadata(conn.pick_version(ApiKey.METADATA, 12), []))
        return any(b.node_id == node_id for b in md.brokers) and md.controller_id >= 0


class Server:
    """One broker process (node 1, broker and controller) with its data under a work dir: `start`
    times process start to `answers`, polled every 50 ms for either server, so kavka's start and
    Kafka's count to the same condition."""

    name = ""
    port: int
    log: Path  # the process's output
    proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        raise NotImplementedError

    def output(self) -> str:
        """The end of the process's output, for an error."""
        try:
            return "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-20:])
        except OSError:
            return ""

    def start(self, timeout: float = 600) -> float:
        t0 = time.perf_counter()
        self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before it was ready:\n{self.output()}")
            try:
                if answers(self.port):
                    return time.perf_counter() - t0
            except (OSError, KafkaConnectionError, KafkaProtocolError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s:\n{self.output()}")
            time.sleep(0.05)

    def stop(self, *, clean: bool) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM if clean else signal.SIGKILL)
        self.proc.wait(300)

    def kill(self) -> None:
        """Whatever happened, no broker outlives the bench (a failed run left one running)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(60)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """CPU seconds (user + system, every thread: Kafka's JVM is one process) the broker
        process has used so far: unlike the elapsed times, they do not grow with the other work on
        a shared machine (much)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Node(Server):
    """kavka, `kavka server start`, its output to broker.log."""

    name = "kavka"

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.cfg = work / "server.properties"
        self.log = work / "broker.log"
        self.cfg.write_text(
            f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\nlog.dirs={work / 'data'}\n"
            "auto.create.topics.enable=false\n"
        )
        subprocess.run([*KAVKA, "storage", "format", "--config", str(self.cfg)], check=True, capture_output=True)

    def launch(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*KAVKA, "server", "start", "--config", str(self.cfg)],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


class KafkaNode(Server):
    """Apache Kafka as `python -m bench` runs it (bench/servers.py: Kafka's default JVM options,
    KAFKA_PROPS), formatted here so that no start includes the format."""

    name = "kafka"

    def __init__(self, work: Path) -> None:
        self.ref = _kafka_node(work)
        self.ref.format()
        self.port = self.ref.port
        self.log = self.ref.output_file

    def launch(self) -> None:
        self.ref.launch()
        self.proc = self.ref.proc


SERVERS: dict[str, type[Server]] = {"kavka": Node, "kafka": KafkaNode}


def create_partitions(
    bootstrap: str, total: int, per_topic: int, replication_factor: int = 1, already: list[int] | None = None
) -> list[float]:
    """Create `total` partitions, 20 topics per CreateTopics; the seconds each request took.

    A CreateTopics that a controller leader change interrupted is retried by the broker that
    forwarded it (to the new controller), and the retry answers TOPIC_ALREADY_EXISTS if the
    records had committed (as in Kafka). That request counts as done once every topic of it is
    listed; its index goes to `already`."""
    times = []
    with AdminClient(bootstrap, timeout_s=600) as admin:
        batch = [
            NewTopic(name, num_partitions=parts, replication_factor=replication_factor)
            for name, parts in topic_plan(total, per_topic).items()
        ]
        for i in range(0, len(batch), 20):
            t0 = time.perf_counter()
            try:
                admin.create_topics(batch[i : i + 20], timeout_ms=600_000)
            except KafkaError as e:
                listed = {t.name for t in admin.list_topics()}
                if e.name != "TOPIC_ALREADY_EXISTS" or any(t.name not in listed for t in batch[i : i + 20]):
                    raise
                print(f"  CreateTopics {i // 20 + 1}: {e}; all its topics exist", file=sys.stderr, flush=True)
                if already is not None:
                    already.append(i // 20)
            times.append(time.perf_counter() - t0)
            print(f"  CreateTopics {i // 20 + 1}: {times[-1]:.1f}s", file=sys.stderr, flush=True)
    return times


def topic_plan(total: int, per_topic: int) -> dict[str, int]:
    """The topics `create_partitions` creates for `total` partitions: name -> partition count."""
    plan: dict[str, int] = {}
    n = 0
    while n < total:
        parts = min(per_topic, total - n)
        plan[f"scale-{len(plan):05d}-{n}"] = parts
        n += parts
    return plan


def wait_for_logs(bootstrap: str, expected: dict[str, int], replication_factor: int = 1, timeout_s: float = 1800) -> None:
    """Until the brokers host every log of the topics in `expected` (name -> logs, replicas
    counted), asked with DescribeLogDirs for the topics not yet complete only.

    A CreateTopics is answered once the controller committed it; the brokers create the logs as
    they apply the committed records, which may end later: the creation time counts to here.
    The bench once asked for every log each second: with 10,000 logs each answer cost the broker
    the listing of them all, work the measurement added to what it measured. Now it names the
    partitions it still waits for (no Metadata request to learn them), and the broker looks
    those up."""
    deadline = time.monotonic() + timeout_s
    remaining = dict(expected)
    partition_count = {t: n // replication_factor for t, n in expected.items()}
    with AdminClient(bootstrap, timeout_s=60) as admin:
        while True:
            asked = sorted(remaining)[:200]
            dirs = admin.describe_log_dirs(partitions={t: range(partition_count[t]) for t in asked})
            hosted: dict[str, int] = {}
            for infos in dirs.values():
                for d in infos:
                    for r in d.replicas:
                        if not r.is_future:
                            hosted[r.topic] = hosted.get(r.topic, 0) + 1
            for topic, n in hosted.items():
                if topic in remaining and n >= remaining[topic]:
                    del remaining[topic]
            if not remaining:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(remaining)} of {len(expected)} topics lack logs after {timeout_s:.0f}s")
            time.sleep(0.5)


def metadata_ms(node: Server, repeats: int = 5) -> float:
    return metadata_times(node, repeats)[0]


def metadata_times(node: Server, repeats: int = 5) -> tuple[float, float]:
    """A Metadata request for every topic, medians in ms: to the decoded answer, and to its last
    byte -- the broker's part, without this client's own (kio) decoding, which for 10,000
    partitions is some 25-30 ms of the first figure whichever server answers."""
    with BlockingConnection("127.0.0.1", node.port) as conn:
        version = conn.pick_version(3)
        times, frame_times = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            frame, correlation_id = conn.exchange(kreq.metadata(version, None))
            t1 = time.perf_counter()
            resp = negotiation.decode(frame, ApiKey.METADATA, version, correlation_id=correlation_id)
            times.append((time.perf_counter() - t0) * 1000)
            frame_times.append((t1 - t0) * 1000)
        assert resp.topics
    return statistics.median(times), statistics.median(frame_times)


def idle_connections(node: Server, count: int) -> float:
    """RSS (MB) with `count` idle connections open, each past its ApiVersions exchange.

    Each connection is answered once before the RSS is read, so the broker has
    accepted and set up every one of them (no waiting and hoping)."""
    api_versions = encode_request(api_key=18, api_version=0, correlation_id=1, client_id="idle", body=b"", flexible=False)
    socks = []
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=10)
            socks.append(s)
            s.sendall(api_versions)
        for s in socks:
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            _recv_exact(s, size)
        assert node.proc is not None and node.proc.poll() is None
        rss = rss_bytes(node.proc.pid) / 1e6
        # Still serving: a real request on a fresh connection works with all of them open.
        metadata_ms(node, repeats=1)
        return rss
    finally:
        for s in socks:
            s.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed an idle connection")
        buf += chunk
    return buf


def run(
    partitions: int, per_topic: int, connections: int, py_spy: Path | None = None, server: str = "kavka", keep_log: Path | None = None
) -> dict:
    """Every measurement on a fresh `server` (SERVERS) in a fresh temp dir; `py_spy`: kavka's only;
    `keep_log`: a file to copy the server's whole output to (whatever happened)."""
    with tempfile.TemporaryDirectory(prefix=f"{server}-scale-") as d:
        load = os.getloadavg()[0]
        node = SERVERS[server](Path(d))
        spy: subprocess.Popen[bytes] | None = None
        try:
            node.start()
            assert node.proc is not None
            if py_spy is not None and server == "kavka":  # the creation only: collapsed stacks, every thread, idle ones too
                spy = subprocess.Popen(
                    [str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(node.proc.pid), "-r", "100", "--idle", "--threads",
                     "-f", "raw", "-o", str(py_spy)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
                time.sleep(1)  # attached
            t0, cpu0 = time.perf_counter(), node.cpu_s()
            per_request = create_partitions(node.bootstrap, partitions, per_topic)
            acked_s = time.perf_counter() - t0
            wait_for_logs(node.bootstrap, topic_plan(partitions, per_topic))
            created_s = time.perf_counter() - t0
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
                spy = None
            assert node.proc is not None
            out = {
                "server": server,
                "load_1m": load,  # at the start of the run
                "partitions": partitions,
                "create_s": created_s,  # to the last log created
                "create_cpu_s": node.cpu_s() - cpu0,  # the broker's
                "create_acked_s": acked_s,  # to the last CreateTopics answered
                "create_per_request_s": per_request,
                "rss_idle_mb": rss_bytes(node.proc.pid) / 1e6,
            }
            out["metadata_ms"], out["metadata_frame_ms"] = metadata_times(node)
            out[f"rss_{connections}_connections_mb"] = idle_connections(node, connections)
            node.stop(clean=True)
            out["start_after_clean_s"] = node.start()
            out["start_after_clean_cpu_s"] = node.cpu_s()
            node.stop(clean=False)
            out["start_after_unclean_s"] = node.start()
            out["start_after_unclean_cpu_s"] = node.cpu_s()
            out["rss_after_restart_mb"] = rss_bytes(node.proc.pid) / 1e6
            node.stop(clean=True)
        finally:
            if spy is not None:
                spy.kill()
            node.kill()  # also on an exception or Ctrl-C
            if keep_log is not None and node.log.exists():
                keep_log.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(node.log, keep_log)
    return out


def run_cluster(
    nodes: int,
    partitions: int,
    per_topic: int,
    replication_factor: int,
    keep_logs: Path | None = None,
    broker_config: dict[str, str] | None = None,
) -> dict:
    """Create `partitions` on a cluster of `nodes` combined broker-controllers (tests' harness);
    `keep_logs`: a dir to write each node's whole output to (whatever happened)."""
    from tests.broker_harness import Cluster

    with tempfile.TemporaryDirectory(prefix="kavka-scale-") as d:
        # The tests' harness checks retention every 500 ms (its tests want it soon); the bench runs
        # the broker's default, Kafka's five minutes: a pass walks every log.
        overrides = {"auto.create.topics.enable": "false", "log.retention.check.interval.ms": "300000", **(broker_config or {})}
        c = Cluster(Path(d), nodes, overrides=overrides)
        try:
            c.start(timeout=120)
            t0 = time.perf_counter()
            already: list[int] = []
            per_request = create_partitions(c.bootstrap, partitions, per_topic, replication_factor, already)
            acked_s = time.perf_counter() - t0
            wait_for_logs(c.bootstrap, {t: n * replication_factor for t, n in topic_plan(partitions, per_topic).items()}, replication_factor)
            out = {
                "nodes": nodes,
                "broker_config": broker_config or {},
                "partitions": partitions,
                "replication_factor": replication_factor,
                "create_s": time.perf_counter() - t0,
                "create_acked_s": acked_s,
                "create_per_request_s": per_request,
                "requests_answered_already_exists": already,
                "fds_at_end": {i: _fds(n) for i, n in c.nodes.items()},
            }
            try:
                c.stop()
            except TimeoutError as e:  # the figures stand; the node is killed below
                out["stop_error"] = str(e).splitlines()[0]
        except BaseException:
            for i, n in c.nodes.items():
                if not n.alive():
                    print(f"node {i} exited {n.proc.poll()}:\n{''.join(n.output[-20:])}", file=sys.stderr)
            raise
        finally:
            for i, n in c.nodes.items():  # also on an exception or Ctrl-C
                if n.alive():
                    n.kill()
                if keep_logs is not None:
                    keep_logs.mkdir(parents=True, exist_ok=True)
                    (keep_logs / f"node{i}.log").write_text("".join(n.output))
    return out


def _fds(node) -> int | None:  # noqa: ANN001 -- tests.broker_harness.BrokerProcess
    """Descriptors the node's process holds now (Linux), None if it cannot be told."""
    try:
        return len(os.listdir(f"/proc/{node.proc.pid}/fd"))
    except (OSError, AttributeError):
        return None


def markdown(rows: list[dict], connections: int) -> str:
    lines = [
        "| partitions | created, all logs (s) | broker CPU creating (s) | start after clean stop (s) | its CPU (s) "
        "| start after kill -9 (s) | its CPU (s) | Metadata, all topics (ms) "
        f"| RSS idle (MB) | RSS with {connections} idle connections (MB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['partitions']:,} | {r['create_s']:.1f} | {r['create_cpu_s']:.1f} | {r['start_after_clean_s']:.2f} "
            f"| {r['start_after_clean_cpu_s']:.2f} | {r['start_after_unclean_s']:.2f} | {r['start_after_unclean_cpu_s']:.2f} "
            f"| {r['metadata_ms']:.1f} | {r['rss_idle_mb']:.0f} | {r[f'rss_{connections}_connections_mb']:.0f} |"
        )
    return "\n".join(lines)


def _cell(r: dict, key: str, fmt: str) -> str:
    return "-" if r.get(key) is None else format(r[key], fmt)


def comparison(rows: list[dict], connections: int) -> str:
    """One row per server per round, then for each partition count the ratio kavka / Kafka of the
    medians of the creation's time and CPU."""
    cols = [
        ("round", "d"), ("load_1m", ".1f"), ("partitions", ",d"), ("create_s", ".1f"), ("create_cpu_s", ".1f"),
        ("create_acked_s", ".1f"), ("start_after_clean_s", ".2f"), ("start_after_clean_cpu_s", ".2f"),
        ("start_after_unclean_s", ".2f"), ("start_after_unclean_cpu_s", ".2f"), ("metadata_ms", ".1f"),
        ("metadata_frame_ms", ".1f"), ("rss_idle_mb", ".0f"), (f"rss_{connections}_connections_mb", ".0f"),
    ]
    lines = [
        "| server | round | load | partitions | created, all logs (s) | broker CPU creating (s) | CreateTopics all answered (s) "
        "| start after clean stop (s) | its CPU (s) | start after kill -9 (s) | its CPU (s) | Metadata, all topics (ms) "
        f"| its last byte (ms) | RSS idle (MB) | RSS with {connections} idle connections (MB) |",
        "|---|" + "---:|" * len(cols),
    ]
    for r in rows:
        lines.append(f"| {r['server']} | " + " | ".join(_cell(r, k, f) for k, f in cols) + " |")
    for ratio in ratios(rows):
        lines.append(
            f"| kavka / Kafka (medians) | | | {ratio['partitions']:,} | {ratio['create_s']:.2f} | {ratio['create_cpu_s']:.2f} |"
            + " |" * (len(cols) - 5)
        )
    return "\n".join(lines)


def ratios(rows: list[dict]) -> list[dict]:
    """kavka / Kafka of the medians of the creation's time and CPU, per partition count that both ran."""
    out = []
    for n in dict.fromkeys(r["partitions"] for r in rows):
        med = {
            (s, k): statistics.median(r[k] for r in rows if r["server"] == s and r["partitions"] == n)
            for s in ("kavka", "kafka") for k in ("create_s", "create_cpu_s")
            if any(r["server"] == s and r["partitions"] == n for r in rows)
        }
        if ("kavka", "create_s") in med and ("kafka", "create_s") in med:
            out.append({"server": "kavka/kafka", "of": "medians", "partitions": n,
                        **{k: med["kavka", k] / med["kafka", k] for k in ("create_s", "create_cpu_s")}})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale")
    ap.add_argument("--partitions", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--connections", type=int, default=1_000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "scale.json")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--nodes", type=int, default=1, help="above 1: only creation, on a cluster (no docs table)")
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--keep-logs", type=Path, help="write each broker's output to this dir")
    ap.add_argument("--broker-config", nargs="*", default=[], metavar="KEY=VALUE", help="with --nodes: set on every node")
    ap.add_argument("--py-spy", type=Path, metavar="FILE",
                    help="one node: py-spy (beside the venv's python) records kavka's creation into FILE (collapsed stacks, every thread)")
    ap.add_argument("--servers", default="kavka", help="comma-separated, of: " + ", ".join(SERVERS)
                    + " (with kafka: the table goes to stdout and --out only, with kavka / Kafka ratios)")
    ap.add_argument("--rounds", type=int, default=1, help="each runs every server, in alternating order")
    args = ap.parse_args(argv)
    servers = args.servers.split(",")
    if unknown := [s for s in servers if s not in SERVERS]:
        ap.error(f"unknown server(s) {unknown}, not in {list(SERVERS)}")
    if args.nodes > 1 and servers != ["kavka"]:
        ap.error("--nodes above 1 runs kavka only")
    if args.nodes > 1:
        for n in args.partitions:
            print(f"{n:,} partitions on {args.nodes} nodes ...", file=sys.stderr, flush=True)
            print(json.dumps(run_cluster(
                args.nodes, n, args.per_topic, args.replication_factor, args.keep_logs,
                dict(kv.split("=", 1) for kv in args.broker_config),
            )), flush=True)
        return 0
    rows = []
    turn = 0
    for n in args.partitions:
        for i in range(args.rounds):
            for server in servers if turn % 2 == 0 else servers[::-1]:  # kavka, Kafka, then Kafka, kavka...
                print(f"{server}, {n:,} partitions, round {i + 1} ...", file=sys.stderr, flush=True)
                log = None if args.keep_logs is None else args.keep_logs / f"{server}-{n}-round{i + 1}.log"
                rows.append({**run(n, args.per_topic, args.connections, args.py_spy, server, log), "round": i + 1})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            turn += 1
    if servers != ["kavka"]:
        args.out.write_text(json.dumps([*rows, *ratios(rows)], indent=2))
        print(comparison(rows, args.connections))
        return 0
    args.out.write_text(json.dumps(rows, indent=2))
    table = markdown(rows, args.connections)
    print(table)
    if not args.no_docs:
        DOC.parent.mkdir(exist_ok=True)
        text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
        if BEGIN not in text:
            text += "\n## Scale\n\n" + BEGIN + "\n" + END + "\n"
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        DOC.write_text(head + BEGIN + "\n" + table + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
