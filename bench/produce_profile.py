"""`python -m bench.produce_profile [SRC ...]`: the broker's CPU per MB produced, and where it goes.

The produce path's own figure on a shared machine: throughput moves with the other processes on
the cores, the broker's CPU seconds per MB much less. One broker, confluent-kafka producing
`--records` records of 1 KiB and of 100 B to one partition, acks=1 (or `--acks all`), linger.ms=5 (bench.workloads),
on a fresh broker per round; the broker's utime + stime from /proc before and after each workload
gives CPU ms per MB. One in-process client is the limit at 100 B (it takes a core for about
1M records/s); `--clients N` produces from N processes instead, so the broker is. With several SRC trees (each a checkout's `src` directory, put first on the
broker's PYTHONPATH) the rounds interleave (A B, B A, ...) so drift in the machine's load falls
on every tree, and the medians print side by side with each tree's ratio to the first.

`--profile` adds one more round per tree with py-spy (`pip install py-spy`) recording the broker
through each workload (`--rate` Hz, samples aggregated by function), and prints the functions
holding the largest shares of the samples, by their own time (self) and with what they call
(total). Profiled rounds are not in the CPU figures: sampling stops the process to read it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench import workloads
from bench.servers import Broker, start_kavka

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1024, 100)


def _produce(broker: Broker, size: int, records: int, clients: int = 1, acks: str = "1") -> float:
    """One workload; the broker's CPU ms per MB it cost. With several `clients`, each is a process
    of its own producing its share of `records` to the topic, and the broker's CPU is counted from
    when all of them are connected to when the last has its acknowledgements."""
    if clients == 1:
        r = workloads.produce(broker, record_size=size, count=records, acks=acks, partitions=1)
        return r["broker_cpu"] * r["seconds"] * 1000 / (records * size / 1e6)
    topic = workloads.create_topic(broker, 1)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(clients + 1)
    each = records // clients
    procs = [ctx.Process(target=_client, args=(broker.bootstrap, broker.extra, topic, size, each, ready, acks))
             for _ in range(clients)]
    for proc in procs:
        proc.start()
    try:
        ready.wait(120)
        cpu0 = broker.cpu()
        for proc in procs:
            proc.join(300)
        cpu = broker.cpu() - cpu0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    if any(proc.exitcode != 0 for proc in procs):
        raise RuntimeError(f"load clients exited with {[proc.exitcode for proc in procs]}")
    return cpu * 1000 / (clients * each * size / 1e6)


def _client(bootstrap: str, extra: dict[str, str], topic: str, size: int, count: int, ready: Any, acks: str) -> None:
    """One load-client process (`_produce`): connect, wait for the others, produce, flush; exits
    non-zero if a record was not acknowledged."""
    p = Producer(workloads.producer_config(bootstrap, extra, acks))
    p.list_topics(topic, timeout=10)
    failed = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed
        failed += err is not None

    value = os.urandom(size)
    ready.wait(120)
    for _ in range(count):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
    if p.flush(120) or failed:
        sys.exit(1)


def one_round(src: Path, records: int, profile_to: Path | None = None, rate: int = 200,
              clients: int = 1, acks: str = "1") -> dict[int, float]:
    """{record size: broker CPU ms per MB} on a fresh broker from `src`, after a warm-up of 2,000
    records of each size (the first requests import and build what the broker uses lazily); with
    `profile_to`, py-spy records each workload to `profile_to`/<size>.txt (collapsed stacks)."""
    os.environ["PYTHONPATH"] = str(src)
    broker = start_kavka()
    out: dict[int, float] = {}
    try:
        for size in SIZES:
            workloads.produce(broker, record_size=size, count=2_000, acks=acks, partitions=1)
        for size in SIZES:
            spy = None
            if profile_to is not None:
                spy = subprocess.Popen(
                    [_py_spy(), "record", "--pid", str(broker.proc.pid), "--rate", str(rate), "--function",
                     "--format", "raw", "--output", str(profile_to / f"{size}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                )
            try:
                out[size] = _produce(broker, size, records, clients, acks)
            finally:
                if spy is not None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
                    _, err = spy.communicate(timeout=60)
                    if spy.returncode not in (0, -signal.SIGINT) and not (profile_to / f"{size}.txt").exists():
                        raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-500:]}")
        return out
    finally:
        broker.stop()


def _py_spy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if found is None:
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    return found


def _short(frame: str) -> str:
    """'f (/x/src/kavka/storage/log_validator.py:80)' -> 'kavka/storage/log_validator.py:f'; outside
    kavka, the file's name alone ('thread.py:_worker')."""
    name, _, where = frame.rpartition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    if path.startswith("kavka/"):  # py-spy shortens paths under sys.path entries (PYTHONPATH=<tree>)
        return f"{path}:{name}"
    if "/src/kavka/" in path:
        return f"kavka/{path.split('/src/kavka/', 1)[1]}:{name}"
    return f"{path.rsplit('/', 1)[-1]}:{name}"


def summarize(collapsed: Path) -> tuple[int, Counter[str], Counter[str]]:
    """(samples, self samples per function, total samples per function) of a py-spy raw file."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        count = int(n)
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for f in set(frames):
            total[f] += count
    return samples, own, total


def print_profile(title: str, collapsed: Path, top: int) -> None:
    samples, own, total = summarize(collapsed)
    print(f"\n{title}: {samples} samples (busy threads only)")
    print(f"  {'self %':>7} {'total %':>8}  function")
    for fn, n in own.most_common(top):
        print(f"  {100 * n / samples:7.1f} {100 * total[fn] / samples:8.1f}  {fn}")
    print("  ... the largest totals of kavka's functions below its entry points:")
    kavka = [(fn, n) for fn, n in total.most_common()
             if fn.startswith("kavka/") and not fn.startswith(("kavka/cli/", "kavka/__main__", "kavka/broker/main.py"))]
    for fn, n in kavka[:top]:
        print(f"  {100 * own[fn] / samples:7.1f} {100 * n / samples:8.1f}  {fn}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.produce_profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, nargs="*", help="src/ directories to compare (default: this checkout's)")
    ap.add_argument("--records", type=int, default=200_000, help="records per workload (default 200,000)")
    ap.add_argument("--rounds", type=int, default=3, help="unprofiled rounds per tree (default 3)")
    ap.add_argument("--profile", action="store_true", help="one more round per tree under py-spy")
    ap.add_argument("--profile-records", type=int, default=1_000_000,
                    help="records per workload of the profiled round (default 1,000,000: enough samples)")
    ap.add_argument("--acks", choices=["1", "all"], default="1", help="the producer's acks (default 1)")
    ap.add_argument("--clients", type=int, default=1,
                    help="load-client processes sharing the records (default 1: this process)")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second (default 200)")
    ap.add_argument("--top", type=int, default=20, help="functions listed per profile (default 20)")
    a = ap.parse_args()
    trees = [p.resolve() for p in a.src] or [ROOT / "src"]
    runs: dict[Path, list[dict[int, float]]] = {t: [] for t in trees}
    for i in range(a.rounds):
        for t in trees if i % 2 == 0 else trees[::-1]:
            print(f"round {i + 1}/{a.rounds}: {t}", file=sys.stderr, flush=True)
            runs[t].append(one_round(t, a.records, clients=a.clients, acks=a.acks))
    first = trees[0]
    print(f"broker CPU ms per MB produced (acks={a.acks}, linger.ms=5, {a.records:,} records from {a.clients} client(s), "
          f"medians of {a.rounds}):")
    print(f"{'tree':50} " + " ".join(f"{f'{s} B':>9}" for s in SIZES) + "  " + " ".join(f"{f'{s} B ratio':>11}" for s in SIZES))
    med = {t: {s: statistics.median(r[s] for r in runs[t]) for s in SIZES} for t in trees if runs[t]}
    for t, m in med.items():
        ratios = " ".join(f"{workloads.ratio(m[s], med[first][s]):>11}" for s in SIZES)
        print(f"{str(t)[-50:]:50} " + " ".join(f"{m[s]:9.1f}" for s in SIZES) + "  " + ratios)
        print(f"{'  each round':50} " + "  ".join("/".join(f"{r[s]:.0f}" for r in runs[t]) for s in SIZES))
    if a.profile:
        for t in trees:
            with tempfile.TemporaryDirectory() as d:
                print(f"profiled round: {t}", file=sys.stderr, flush=True)
                cpu = one_round(t, a.profile_records, Path(d), a.rate, a.clients, a.acks)
                for s in SIZES:
                    print_profile(f"{t}, {s} B records (this round, under py-spy: {cpu[s]:.1f} CPU ms/MB)", Path(d) / f"{s}.txt", a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
