"""`python -m bench`: kavka next to the Tansu peer and the machine's limits, in one run.

Runs every workload against both brokers, interleaved (kavka, tansu, tansu,
kavka, ...: each run starts fresh broker processes), takes the median of the
runs per figure, and writes:
- the raw and median figures as JSON (--out, default bench/results.json),
- a Markdown table of kavka/Tansu ratios into docs/benchmarks.md (between the
  BENCH:BEGIN/END markers, so the prose around it stays),
- a PNG chart (docs/benchmarks.png) when matplotlib is installed.

`--processes N` measures instead one broker process against N on this host (`bench.processes`,
`kavka server start --processes`); its other options are `python -m bench.processes`'s.

`--smoke` shrinks every count so the whole run takes seconds (CI keeps the
harness working with it); its figures mean nothing and are not written to
docs/ unless --docs is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench import machine, workloads
from bench.servers import STARTERS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- BENCH:BEGIN -->", "<!-- BENCH:END -->"


def plan(smoke: bool) -> dict:
    if smoke:
        return {"counts": {1024: 2_000, 100: 5_000}, "latency_s": 0.5, "rates": (1_000, 10_000), "machine_scale": 0.02}
    return {"counts": {1024: 200_000, 100: 1_000_000}, "latency_s": 10.0, "rates": (1_000, 10_000), "machine_scale": 1.0}


def run_broker(name: str, p: dict, log) -> dict[str, dict]:  # noqa: ANN001
    broker = STARTERS[name]()
    out: dict[str, dict] = {}
    try:
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
        out["rss"] = {"rss_mb": broker.rss() / 1e6}
    finally:
        broker.stop()
    return out


def median_of(runs: list[dict[str, dict]]) -> dict[str, dict[str, float]]:
    med: dict[str, dict[str, float]] = {}
    for key in runs[0]:
        med[key] = {}
        for field, v in runs[0][key].items():
            if isinstance(v, (int, float)):
                med[key][field] = statistics.median(r[key][field] for r in runs)
    return med


def ratio_rows(med: dict[str, dict[str, dict[str, float]]]) -> list[tuple[str, str, float, float, float, str]]:
    """(workload, metric, kavka, tansu, kavka/tansu, which way is better)."""
    rows = []
    k, t = med["kavka"], med["tansu"]
    for key in k:
        if key.startswith(("produce", "consume")):
            rows.append((key, "MB/s", k[key]["mb_per_s"], t[key]["mb_per_s"], k[key]["mb_per_s"] / t[key]["mb_per_s"], "higher"))
        elif key.startswith("latency"):
            for q in ("p50_ms", "p99_ms", "p999_ms"):
                rows.append((key, q, k[key][q], t[key][q], k[key][q] / t[key][q], "lower"))
        elif key == "rss":
            rows.append(("broker RSS after the run", "MB", k[key]["rss_mb"], t[key]["rss_mb"], k[key]["rss_mb"] / t[key]["rss_mb"], "lower"))
    return rows


def markdown(result: dict) -> str:
    med = result["median"]
    lines = [
        f"Run {result['started']}, {result['runs']} interleaved runs per broker, medians; "
        f"load client confluent-kafka {result['client']}.",
        "",
        "| workload | metric | kavka | Tansu | kavka / Tansu | better |",
        "|---|---|---:|---:|---:|---|",
    ]
    for key, metric, kv, tv, ratio, better in ratio_rows(med):
        lines.append(f"| {key} | {metric} | {kv:,.2f} | {tv:,.2f} | {ratio:.2f} | {better} |")
    lines += ["", "CPU (cores busy during the workload, median):", "",
              "| workload | kavka broker | kavka client | Tansu broker | Tansu client |", "|---|---:|---:|---:|---:|"]
    for key in med["kavka"]:
        if key.startswith(("produce", "consume")):
            k, t = med["kavka"][key], med["tansu"][key]
            lines.append(f"| {key} | {k['broker_cpu']:.2f} | {k['client_cpu']:.2f} | {t['broker_cpu']:.2f} | {t['client_cpu']:.2f} |")
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
    rows = [r for r in ratio_rows(result["median"])]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1))
    labels = [f"{r[0]} {r[1]}" for r in rows]
    values = [r[4] for r in rows]
    colors = ["tab:green" if (r[4] >= 1) == (r[5] == "higher") else "tab:red" for r in rows]
    ax.barh(labels, values, color=colors)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("kavka / Tansu (green: kavka better or equal)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--processes" or a.startswith("--processes=") for a in argv):
        from bench import processes

        return processes.main(argv)
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--runs", type=int, default=None, help="runs per broker (default 5, smoke 1)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    ap.add_argument("--docs", action="store_true", help="write docs/benchmarks.md and the chart (default unless --smoke)")
    args = ap.parse_args(argv)
    runs = args.runs or (1 if args.smoke else 5)
    p = plan(args.smoke)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    import confluent_kafka

    result: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs,
                    "client": f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})", "smoke": args.smoke, "raw": {"kavka": [], "tansu": []}}
    log("machine limits")
    result["machine"] = machine.measure(p["machine_scale"])
    for i in range(runs):
        order = ("kavka", "tansu") if i % 2 == 0 else ("tansu", "kavka")
        for name in order:
            log(f"run {i + 1}/{runs}: {name}")
            result["raw"][name].append(run_broker(name, p, log))
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
