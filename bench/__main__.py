"""`python -m bench`: kavka next to Apache Kafka, the Tansu peer and the machine's limits, in one run.

Runs every workload against every server of --servers (default kavka, kafka, tansu),
interleaved (the order reverses every round: kavka, kafka, tansu, then tansu, kafka, kavka...;
each run starts fresh broker processes), takes the median of the runs per figure, and writes:
- the raw and median figures as JSON (--out, default bench/results.json),
- a Markdown table of kavka/Kafka and kavka/Tansu ratios into docs/benchmarks.md (between the
  BENCH:BEGIN/END markers, so the prose around it stays),
- a PNG chart (docs/benchmarks.png) when matplotlib is installed.

`--processes N` measures instead one broker process against N on this host (`bench.processes`,
`kavka server start --processes`); its other options are `python -m bench.processes`'s.

Every server (and cluster) first takes an unmeasured warm-up of 50,000 1 KiB records, so the JVM's
JIT compiler has run before Kafka is measured (kavka and Tansu get the same); a single server also
reads them back, so its group coordinator's topic exists before the measured consume.

Two load clients (--clients): confluent-kafka from this process (bench/workloads.py), and Kafka's
own kafka-producer-perf-test and kafka-consumer-perf-test (bench/java_perf.py, "java-perf"),
each run against kavka and Kafka (not Tansu: see bench/java_perf.py). When kavka and kafka are both among the servers, every round
also starts a 3-node cluster of each (combined KRaft nodes) and measures RF=3 acks=all produce
throughput and latency on it (--no-cluster skips it).

`--smoke` shrinks every count so the whole run takes seconds (CI keeps the
harness working with it); its figures mean nothing and are not written to
docs/ unless --docs is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench import java_perf, machine, workloads
from bench.servers import STARTERS, start_cluster

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- BENCH:BEGIN -->", "<!-- BENCH:END -->"


def plan(smoke: bool) -> dict:
    if smoke:
        return {"counts": {1024: 2_000, 100: 5_000}, "latency_s": 0.5, "rates": (1_000, 10_000), "machine_scale": 0.02,
                "warmup": 500}
    return {"counts": {1024: 200_000, 100: 1_000_000}, "latency_s": 10.0, "rates": (1_000, 10_000), "machine_scale": 1.0,
            "warmup": 50_000}


def run_broker(name: str, p: dict, clients: list[str], log) -> dict[str, dict]:  # noqa: ANN001
    broker = STARTERS[name]()
    out: dict[str, dict] = {}
    try:
        log(f"  {name}: warm-up ({p['warmup']:,} records, not measured)")
        w = workloads.produce(broker, record_size=1024, count=p["warmup"], acks="1", partitions=1)
        # Read back too: the consumer's group lookup creates __consumer_offsets on kavka and Kafka
        # (50 partitions), a once-per-cluster cost that is not consume throughput.
        workloads.consume(broker, topic=w["topic"], partitions=1, count=p["warmup"], record_size=1024)
        if "confluent" in clients:
            for size, count in p["counts"].items():
                for acks in ("1", "all"):
                    for parts in (1, 8):
                        key = f"produce {size} B acks={acks} p={parts}"
                        log(f"  {name}: {key} ({count:,} records)")
                        r = workloads.produce(broker, record_size=size, count=count, acks=acks, partitions=parts)
                        out[key] = r
                        if size == 1024 and acks == "1" and parts == 1:
                            log(f"  {name}: consume {size} B p=1")
                            out[f"consume {size} B p=1"] = workloads.consume(
                                broker, topic=r["topic"], partitions=1, count=count, record_size=size
                            )
            for rate in p["rates"]:
                log(f"  {name}: latency at {rate:,} records/s")
                out[f"latency {rate}/s"] = workloads.latency(broker, rate=rate, seconds=p["latency_s"])
        if "java-perf" in clients and name in java_perf.SERVERS:
            count = p["counts"][1024]
            log(f"  {name}: perf produce 1024 B acks=1 ({count:,} records, kafka-producer-perf-test)")
            r = java_perf.produce(broker, record_size=1024, count=count, acks="1")
            out["perf produce 1024 B acks=1"] = r
            log(f"  {name}: perf consume 1024 B (kafka-consumer-perf-test)")
            out["perf consume 1024 B"] = java_perf.consume(broker, topic=r["topic"], count=count, record_size=1024)
            for rate in p["rates"]:
                log(f"  {name}: perf latency at {rate:,} records/s")
                out[f"perf latency {rate}/s"] = java_perf.produce(
                    broker, record_size=100, count=int(rate * p["latency_s"]), acks="1", throughput=rate, linger_ms=0)
        out["rss"] = {"rss_mb": broker.rss() / 1e6}
    finally:
        broker.stop()
    return out


def run_cluster(name: str, p: dict, log) -> dict[str, dict]:  # noqa: ANN001
    """RF=3 acks=all on 3 nodes: 1 KiB produce throughput (one partition, confluent-kafka),
    latency at 1k records/s, CPU per MB summed over the three nodes, their summed RSS."""
    log(f"  {name}: 3-node cluster")
    c = start_cluster(name, 3)
    out: dict[str, dict] = {}
    try:
        log(f"  {name} x3: warm-up ({p['warmup']:,} records, not measured)")
        workloads.produce(c, record_size=1024, count=p["warmup"], acks="all", partitions=1, replication_factor=3)
        count = p["counts"][1024]
        log(f"  {name} x3: RF=3 produce 1024 B acks=all ({count:,} records)")
        out["RF=3 produce 1024 B acks=all p=1"] = workloads.produce(
            c, record_size=1024, count=count, acks="all", partitions=1, replication_factor=3)
        log(f"  {name} x3: RF=3 latency at 1,000 records/s")
        out["RF=3 latency 1000/s acks=all"] = workloads.latency(
            c, rate=1000, seconds=p["latency_s"], acks="all", replication_factor=3)
        out["RF=3 rss"] = {"rss_mb": c.rss() / 1e6}
    finally:
        c.stop()
    return out


def median_of(runs: list[dict[str, dict]]) -> dict[str, dict[str, float]]:
    med: dict[str, dict[str, float]] = {}
    for key in runs[0]:
        med[key] = {}
        for field, v in runs[0][key].items():
            if isinstance(v, (int, float)):
                med[key][field] = statistics.median(r[key][field] for r in runs)
    return med


LOWER, HIGHER = "lower", "higher"


def metrics(key: str) -> list[tuple[str, str, str]]:
    """(field, label, which way is better) of the figures a workload's ratio table shows."""
    if key.startswith(("produce", "consume", "RF=3 produce")):
        return [("mb_per_s", "MB/s", HIGHER), ("broker_cpu_s_per_mb", "broker CPU s/MB", LOWER)]
    if key.startswith("perf produce"):
        return [("mb_per_s", "MiB/s", HIGHER), ("broker_cpu_s_per_mb", "broker CPU s/MB", LOWER)]
    if key.startswith("perf consume"):
        return [("mb_per_s", "MiB/s", HIGHER), ("fetch_mb_per_s", "MiB/s after the group join", HIGHER),
                ("rebalance_ms", "group join ms", LOWER), ("broker_cpu_s_per_mb", "broker CPU s/MB", LOWER)]
    if key.startswith("perf latency"):
        return [("avg_ms", "avg ms", LOWER), ("p50_ms", "p50 ms", LOWER), ("p99_ms", "p99 ms", LOWER)]
    if key.startswith(("latency", "RF=3 latency")):
        return [("p50_ms", "p50 ms", LOWER), ("p99_ms", "p99 ms", LOWER), ("p999_ms", "p99.9 ms", LOWER)]
    if key.endswith("rss"):
        return [("rss_mb", "RSS MB", LOWER)]
    return []


def ratio_rows(med: dict[str, dict[str, dict[str, float]]], peer: str) -> list[tuple[str, str, float, float, float | None, str]]:
    """(workload, metric, kavka, peer, kavka/peer or None when the peer's figure is 0, which way is better)."""
    rows = []
    k, t = med["kavka"], med[peer]
    for key in k:
        if key not in t:
            continue
        for field, label, better in metrics(key):
            kv, tv = k[key][field], t[key][field]
            rows.append((key, label, kv, tv, kv / tv if tv else None, better))
    return rows


NAMES = {"kavka": "kavka", "kafka": "Kafka", "tansu": "Tansu"}


def markdown(result: dict) -> str:
    med = result["median"]
    servers = list(med)
    peers = [s for s in servers if s != "kavka"] if "kavka" in servers else []
    first = next(iter(med.values()))
    lines = [
        f"Run {result['started']}, {result['runs']} interleaved runs per server, medians; "
        f"load clients {', '.join(result['clients'])} (confluent-kafka {result['client']}"
        + (f"; Kafka's perf tools {result['kafka_version']}" if "java-perf" in result["clients"] else "") + "). "
        f"Load average before / after: {result['load_before']} / {result.get('load_after', '?')}.",
        "",
        "| workload | metric | " + " | ".join(NAMES[s] for s in servers) + " | "
        + " | ".join(f"kavka / {NAMES[p]}" for p in peers) + " | better |",
        "|---|---|" + "---:|" * (len(servers) + len(peers)) + "---|",
    ]

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:,.2f}" if v >= 0.1 or v == 0 else f"{v:.3f}"

    for key in first:
        for field, label, better in metrics(key):
            vals = [med[s][key][field] if key in med[s] else None for s in servers]
            ratios = [(med["kavka"][key][field] / med[p][key][field]) if key in med["kavka"] and key in med[p]
                      and med[p][key][field] else None for p in peers]
            lines.append(f"| {key} | {label} | " + " | ".join(fmt(v) for v in vals) + " | "
                         + " | ".join(fmt(r) for r in ratios) + f" | {better} |")
    keys = [k for k in first if k.startswith(("produce", "consume", "RF=3 produce"))]
    if keys:
        lines += ["", "CPU (cores busy during the confluent-kafka workloads, median; RF=3: the 3 nodes summed):", "",
                  "| workload | " + " | ".join(f"{NAMES[s]} broker | {NAMES[s]} client" for s in servers) + " |",
                  "|---|" + "---:|---:|" * len(servers)]
        for key in keys:
            cells = [f"{med[s][key]['broker_cpu']:.2f} | {med[s][key]['client_cpu']:.2f}" if key in med[s] else "- | -"
                     for s in servers]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
    m = result["machine"]
    lines += ["", "Machine limits, same run: "
              f"sendfile file -> loopback {m['sendfile_gbps']:.2f} GB/s; blocking TCP {m['tcp_gbps']:.2f} GB/s; "
              f"write + fsync every MiB {m['fsync_1mib_gbps']:.2f} GB/s; CRC-32C over 1 MiB {m['crc32c_gbps']:.1f} GB/s."]
    return "\n".join(lines)


def write_doc(result: dict) -> None:
    DOC.parent.mkdir(exist_ok=True)
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN not in text:
        text += "\n## Broker: kavka vs Tansu\n\n" + BEGIN + "\n" + END + "\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n" + markdown(result) + "\n" + END + tail)


def chart(result: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    med = result["median"]
    rows = [(f"{r[0]} {r[1]} / {NAMES[peer]}", r[4], r[5]) for peer in med if peer != "kavka" and "kavka" in med
            for r in ratio_rows(med, peer) if r[4] is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1))
    ax.barh([r[0] for r in rows], [r[1] for r in rows],
            color=["tab:green" if (r[1] >= 1) == (r[2] == HIGHER) else "tab:red" for r in rows])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("kavka / peer (green: kavka better or equal)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--processes" or a.startswith("--processes=") for a in argv):
        from bench import processes

        return processes.main(argv)
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--runs", type=int, default=None, help="runs per server (default 5, smoke 1)")
    ap.add_argument("--servers", default="kavka,kafka,tansu", help="comma-separated, of: " + ", ".join(STARTERS))
    ap.add_argument("--clients", default="confluent,java-perf", help="comma-separated, of: confluent, java-perf")
    ap.add_argument("--records", type=int, default=None,
                    help="records per throughput workload, 1 KiB and 100 B alike (default 200,000 and 1,000,000)")
    ap.add_argument("--latency-seconds", type=float, default=None, help="seconds per fixed-rate latency run (default 10)")
    ap.add_argument("--no-cluster", action="store_true", help="skip the 3-node RF=3 kavka / Kafka comparison")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    ap.add_argument("--docs", action="store_true", help="write docs/benchmarks.md and the chart (default unless --smoke)")
    args = ap.parse_args(argv)
    servers = args.servers.split(",")
    clients = args.clients.split(",")
    if unknown := [s for s in servers if s not in STARTERS] + [c for c in clients if c not in ("confluent", "java-perf")]:
        ap.error(f"unknown server or client: {', '.join(unknown)}")
    runs = args.runs or (1 if args.smoke else 5)
    p = plan(args.smoke)
    if args.records:
        p["counts"] = {size: args.records for size in p["counts"]}
    if args.latency_seconds:
        p["latency_s"] = args.latency_seconds
    clusters = [] if args.no_cluster or not {"kavka", "kafka"} <= set(servers) else ["kavka", "kafka"]

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    import confluent_kafka
    from tests.java_deps import KAFKA_VERSION

    result: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs, "clients": clients,
                    "client": f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})",
                    "kafka_version": KAFKA_VERSION, "smoke": args.smoke, "load_before": load_average(),
                    "raw": {name: [] for name in servers}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    log("machine limits")
    result["machine"] = machine.measure(p["machine_scale"])
    for i in range(runs):
        for name in servers if i % 2 == 0 else servers[::-1]:
            log(f"run {i + 1}/{runs}: {name} (load average {load_average()})")
            result["raw"][name].append(run_broker(name, p, clients, log))
            args.out.write_text(json.dumps(result, indent=2, default=str))  # so far, should a later run fail
        for name in clusters if i % 2 == 0 else clusters[::-1]:
            log(f"run {i + 1}/{runs}: {name} x3 (load average {load_average()})")
            result["raw"][name][-1].update(run_cluster(name, p, log))
            args.out.write_text(json.dumps(result, indent=2, default=str))
    result["load_after"] = load_average()
    result["median"] = {name: median_of(rs) for name, rs in result["raw"].items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(markdown(result))
    if args.docs or not args.smoke:
        write_doc(result)
        chart(result, DOC.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
