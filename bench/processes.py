"""`python -m bench.processes` (also `python -m bench --processes N`): produce throughput of one
broker process against N on the same host, started as an operator starts them (`kavka server
start --processes K` from one config), each driven to saturation by the same load clients.

kavka is one event loop per process: a host's cores are used by running several brokers. Each run
starts a fresh group of K processes (process 0 the controller), creates a topic of
`--partitions-per-process` x K partitions (replication factor 1, so every process leads its share
and no replication traffic is measured), and starts `--clients` load-client processes (each a
confluent-kafka producer, acks=1, linger.ms=5, `--record-size` B values, round robin over every
partition). After `--warmup` s the window of `--seconds` s is measured: records acknowledged in it
(each client counts its delivery reports by their time), the CPU the broker processes and the
clients spent in it (from /proc), and the load average. Runs alternate 1, N, 1, N... and the
median per K is reported, with scaling = throughput(N) / throughput(1) and the broker CPU per MB,
which says whether a process does the same work per byte when it has company. Figures go to
docs/benchmarks.md between PROCESSES:BEGIN/END (with --docs).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.broker_harness import free_port_block  # noqa: E402

from bench.servers import cpu_seconds  # noqa: E402
from bench.workloads import ratio  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- PROCESSES:BEGIN -->", "<!-- PROCESSES:END -->"
KAVKA = [sys.executable, "-m", "kavka"]


class Group:
    """`kavka server start --processes K` on fresh ports and a fresh data dir."""

    def __init__(self, processes: int, work: Path) -> None:
        self.base = free_port_block((*range(processes), 100))
        self.processes = processes
        config = work / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.base},CONTROLLER://127.0.0.1:{self.base + 100}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"1@127.0.0.1:{self.base + 100}",
            "log.dirs": str(work / "data"),
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
        }.items()))
        subprocess.run([*KAVKA, "storage", "format", "--config", str(config), "--processes", str(processes)],
                       check=True, capture_output=True, timeout=120)
        self.log = open(work / "group.log", "w")  # noqa: SIM115 -- closed in stop()
        self.proc = subprocess.Popen([*KAVKA, "server", "start", "--config", str(config), "--processes", str(processes),
                                      "--host-id", "bench"], stdout=self.log, stderr=subprocess.PIPE, text=True)
        self.pids: list[int] = []
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.write(line)
                m = re.match(r"node \d+ ready \(pid (\d+)", line)
                if m:
                    self.pids.append(int(m[1]))
                    if len(self.pids) == processes:
                        ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(120) or len(self.pids) != processes:
            self.stop()
            raise RuntimeError(f"the group of {processes} did not start; see {work / 'group.log'}")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base + i}" for i in range(self.processes))

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def create_topic(bootstrap: str, partitions: int, processes: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"scale-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            leaders = {p.leader for p in t.partitions.values()}
            if len(leaders) != processes:
                raise RuntimeError(f"the partitions lead on {sorted(leaders)}, not on all {processes} processes")
            return topic
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def client(bootstrap: str, topic: str, partitions: int, record_size: int, start: float, end: float,
           out: mp.Queue) -> None:  # type: ignore[type-arg]
    """One load-client process: produce until `end` (time.time()), count acknowledgements in [start, end)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "log_level": 3})
    value = os.urandom(record_size)
    counted = failed = 0

    def on_delivery(err, _msg) -> None:  # noqa: ANN001
        nonlocal counted, failed
        if err is not None:
            failed += 1
        elif start <= time.time() < end:
            counted += 1

    p.list_topics(topic, timeout=10)
    i = os.getpid()
    while time.time() < end:
        for _ in range(1000):
            try:
                p.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(60)
    out.put({"records": counted, "failed": failed})


def run(processes: int, clients: int, p: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="kavka-bench-procs-") as d:
        group = Group(processes, Path(d))
        try:
            partitions = p["partitions_per_process"] * processes
            topic = create_topic(group.bootstrap, partitions, processes)
            start = time.time() + p["warmup"]
            end = start + p["seconds"]
            out: mp.Queue = mp.Queue()  # type: ignore[type-arg]
            ctx_procs = [mp.Process(target=client, args=(group.bootstrap, topic, partitions, p["record_size"], start, end, out))
                         for _ in range(clients)]
            for c in ctx_procs:
                c.start()
            time.sleep(max(0.0, start - time.time()))
            b0, c0, load0 = group.cpu(), sum(cpu_seconds(c.pid) for c in ctx_procs), os.getloadavg()[0]  # type: ignore[arg-type]
            time.sleep(max(0.0, end - time.time()))
            b1, c1, load1 = group.cpu(), sum(cpu_seconds(c.pid) for c in ctx_procs), os.getloadavg()[0]  # type: ignore[arg-type]
            results = [out.get(timeout=120) for _ in ctx_procs]
            for c in ctx_procs:
                c.join(30)
        finally:
            group.stop()
    if any(r["failed"] for r in results) or not any(r["records"] for r in results):
        raise RuntimeError(f"failed deliveries, or none in the window: {results}")
    records = sum(r["records"] for r in results)
    mb = records * p["record_size"] / 1e6
    return {
        "processes": processes, "clients": clients,
        "records_per_s": records / p["seconds"], "mb_per_s": mb / p["seconds"],
        "broker_cores": (b1 - b0) / p["seconds"], "client_cores": (c1 - c0) / p["seconds"],
        "broker_cpu_ms_per_mb": (b1 - b0) * 1000 / mb,
        "load_avg_1m": (load0 + load1) / 2,
    }


def markdown(result: dict) -> str:
    med, n = result["median"], result["n"]
    rows = [
        f"Run {result['started']}, {result['runs']} alternating runs per process count, medians; {result['cores']} cores; "
        f"{result['clients']} load-client processes (confluent-kafka {result['client']}), {result['plan']['record_size']} B "
        f"records, acks=1, {result['plan']['partitions_per_process']} partitions per process, "
        f"{result['plan']['seconds']:.0f} s windows; 1-minute load average during the windows "
        f"{min(r['load_avg_1m'] for rs in result['raw'].values() for r in rs):.1f}-"
        f"{max(r['load_avg_1m'] for rs in result['raw'].values() for r in rs):.1f}.",
        "",
        "| broker processes | records/s | MB/s | broker cores busy | client cores busy | broker CPU ms per MB | MB/s per broker core |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k in ("1", str(n)):
        m = med[k]
        per_core = f"{1000 / m['broker_cpu_ms_per_mb']:.0f}" if m["broker_cpu_ms_per_mb"] else "n/a"
        rows.append(f"| {k} | {m['records_per_s']:,.0f} | {m['mb_per_s']:.1f} | {m['broker_cores']:.2f} | "
                    f"{m['client_cores']:.2f} | {m['broker_cpu_ms_per_mb']:.2f} | {per_core} |")
    scaling = med[str(n)]["mb_per_s"] / med["1"]["mb_per_s"]
    per_byte = ratio(med["1"]["broker_cpu_ms_per_mb"], med[str(n)]["broker_cpu_ms_per_mb"])
    rows += ["", f"Scaling {n} processes / 1: throughput x{scaling:.2f} ({scaling / n:.2f} N); "
                 f"work per byte (broker CPU per MB, 1 / {n}): {per_byte}."]
    return "\n".join(rows)


def write_doc(result: dict) -> None:
    text = DOC.read_text()
    if BEGIN not in text:
        raise SystemExit(f"{DOC} has no {BEGIN} marker")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n" + markdown(result) + "\n" + END + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.processes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", "-n", type=int, default=os.cpu_count() or 2, help="N (default: the cores)")
    ap.add_argument("--clients", type=int, default=None, help="load-client processes (default 2 N)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions-per-process", type=int, default=4)
    ap.add_argument("--smoke", action="store_true", help="one short run each: checks the harness, figures mean nothing")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "processes.json")
    args = ap.parse_args(argv)
    n = args.processes
    clients = args.clients or 2 * n
    p = {"seconds": 2.0 if args.smoke else args.seconds, "warmup": 2.0 if args.smoke else args.warmup,
         "record_size": args.record_size, "partitions_per_process": args.partitions_per_process}
    runs = 1 if args.smoke else args.runs
    import confluent_kafka

    result: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs, "n": n, "clients": clients,
                    "cores": os.cpu_count(), "plan": p, "raw": {"1": [], str(n): []},
                    "client": f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"}
    for i in range(runs):
        for k in ((1, n) if i % 2 == 0 else (n, 1)):
            r = run(k, clients, p)
            print(f"run {i + 1}/{runs}: {k} process(es): {r['mb_per_s']:.1f} MB/s, broker {r['broker_cores']:.2f} cores, "
                  f"clients {r['client_cores']:.2f} cores, load {r['load_avg_1m']:.1f}", file=sys.stderr, flush=True)
            result["raw"][str(k)].append(r)
    result["median"] = {k: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for k, rs in result["raw"].items()}
    args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    if args.docs and not args.smoke:
        write_doc(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
