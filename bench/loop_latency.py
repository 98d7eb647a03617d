"""Produce latency on one partition while another is cleaned and a 1 GiB replica move runs (issue 10 item 4).

``python -m bench.loop_latency [--src DIR] [--move-mib N] [--compact-mib N] [--seconds S]``
starts one kavka broker with two log dirs (from ``--src``, a ``src/`` tree such as
``git archive <commit> src`` of main, to measure "before"; this checkout by default),
fills a compacted topic (keyed overwrites, ``min.compaction.lag.ms`` held high so
nothing is cleaned yet) and a topic to move, then at t=0 lowers the lag (so the cleaner
starts) and asks for the move to the other log dir (AlterReplicaLogDirs, unthrottled),
while a probe producer sends one record at a time (acks=1, linger.ms=0) to a third
topic and records each round trip. It prints p50/p99/max over the window, the same
figures with no background work first (the baseline), and when the clean and the move
finished (from the broker's log). Not a test: figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.servers import free_port, wait_port
from kavka.client.admin import AdminClient, NewTopic

MIB = 1 << 20


def start_broker(src: Path | None, work: Path) -> tuple[subprocess.Popen[bytes], int, list[Path]]:
    port = free_port()
    dirs = [work / "d0", work / "d1"]
    props = {
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": ",".join(str(d) for d in dirs),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "log.cleaner.backoff.ms": "200",
        "log.segment.bytes": str(64 * MIB),
    }
    cfg = work / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    kavka = [sys.executable, "-m", "kavka"]
    subprocess.run([*kavka, "storage", "format", "--config", str(cfg)], check=True, capture_output=True, timeout=60, env=env)
    log = open(work / "broker.log", "wb")  # noqa: SIM115 -- owned by the process
    proc = subprocess.Popen([*kavka, "server", "start", "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT, env=env)
    wait_port(port, proc)
    return proc, port, dirs


def fill(bootstrap: str, topic: str, mib: int, *, keys: int | None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 512 * 1024,
                  "queue.buffering.max.kbytes": 262144, "compression.type": "none"})
    value = b"x" * 1000
    n = mib * MIB // 1024
    for i in range(n):
        key = f"k{i % keys}".encode() if keys else None
        while True:
            try:
                p.produce(topic, key=key, value=value)
                break
            except BufferError:
                p.poll(0.05)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(300) == 0


def probe(bootstrap: str, topic: str, seconds: float) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    done: list[float] = []
    lat: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        p.produce(topic, value=b"probe", on_delivery=lambda err, msg: done.append(time.perf_counter()))
        while not done:
            p.poll(0.0005)
        lat.append(done.pop() - t0)
    p.flush(10)
    return lat


def summary(lat: list[float]) -> str:
    s = sorted(lat)
    if not s:
        return "no samples"

    def q(f: float) -> float:
        return s[min(int(f * len(s)), len(s) - 1)] * 1000

    slow = sum(1 for x in s if x > 0.1)
    return (
        f"n={len(s)} p50={q(0.5):.2f} ms p99={q(0.99):.2f} ms p99.9={q(0.999):.2f} ms max={s[-1] * 1000:.1f} ms"
        f" >100ms={slow} (load {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, default=None, help="a kavka src/ tree to run (default: this checkout)")
    ap.add_argument("--move-mib", type=int, default=1024)
    ap.add_argument("--compact-mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kavka-looplat-"))
    proc, port, dirs = start_broker(args.src, work)
    bootstrap = f"127.0.0.1:{port}"
    try:
        with AdminClient(bootstrap, timeout_s=30) as a:
            a.create_topics([NewTopic("probe", 1, 1), NewTopic("moved", 1, 1),
                             NewTopic("compacted", 1, 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": str(16 * MIB),
                                                          "min.compaction.lag.ms": str(10**12)})])
        time.sleep(1)
        t = time.monotonic()
        fill(bootstrap, "moved", args.move_mib, keys=None)
        fill(bootstrap, "compacted", args.compact_mib, keys=10_000)
        print(f"filled {args.move_mib} MiB + {args.compact_mib} MiB in {time.monotonic() - t:.1f} s", flush=True)
        time.sleep(2)
        base = probe(bootstrap, "probe", min(args.seconds, 10))
        print("baseline (no background work):", summary(base), flush=True)
        log_path = work / "broker.log"
        mark = log_path.stat().st_size
        with AdminClient(bootstrap, timeout_s=30) as a:
            src_dir = next(d.path for d in a.describe_log_dirs([1], ["moved"])[1] if d.replicas)
            dest = str(dirs[1] if src_dir == str(dirs[0]) else dirs[0])
            t0 = time.monotonic()
            a.incremental_alter_configs("topic", "compacted", {"min.compaction.lag.ms": "0"})
            a.alter_replica_log_dirs({(1, "moved", 0): dest})
        lat = probe(bootstrap, "probe", args.seconds)
        print(f"during clean of {args.compact_mib} MiB + move of {args.move_mib} MiB:", summary(lat), flush=True)
        text = log_path.read_bytes()[mark:].decode(errors="replace")
        for needle in ("cleaned compacted-0", "moved moved-0"):
            lines = [x for x in text.splitlines() if needle in x]
            print(f"  {needle!r}: {'done' if lines else 'NOT done within the window'}"
                  + (f" -- {lines[0][-160:]}" if lines else ""), flush=True)
        print(f"  window started {time.monotonic() - t0:.1f} s ago")
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
