"""`python -m bench.replication`: what replication costs and how long a leader's death stops writes.

One controller-only voter and three brokers (real `kavka server start` processes, the shipped
defaults unless said), confluent-kafka as the client:

- throughput: `--mb` MiB of 1 KiB records into a one-partition topic, RF=3 acks=all against RF=1
  acks=1 on the same cluster; MB/s from the first produce to the last delivery report, and the
  CPU seconds each broker process spent per MB written (from /proc), by role: the leader, and the
  mean of the two followers (a follower appends batches as sent, no re-encoding, so its cost per
  MB should be at most half the leader's);
- latency: 1,000 records/s for `--seconds` seconds, RF=3 acks=all, linger.ms=0; p50/p99/max of
  produce() to the acknowledgement (librdkafka's per-message latency), the client sleeping
  between sends;
- unavailability: an idempotent acks=all producer writes to one partition every 5 ms; the
  partition's leader is killed -9; the figure is the time from the kill to the next record
  acknowledged on that partition. The killed broker is restarted and the ISR complete again before
  the next run; median and max over `--kills` kills. The controller's log is scanned afterwards
  for fences of brokers that were not killed (false fencing): the count is reported.

`--smoke` shrinks everything so the harness is exercised in seconds. `--throughput-only --rounds N`
measures only the throughput pair, N times on the same cluster (RF=3 and RF=1 alternating first,
so drift in the machine's load falls on both), and prints each round and the medians.
`--profile DIR` adds one RF=3 acks=all round with py-spy recording the leader and one follower
(collapsed stacks in DIR, the largest functions printed as bench.produce_profile prints them);
sampling stops the process to read it, so that round's figures are not in the others.
A table prints (JSON with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402
from tests.wait import wait_until  # noqa: E402

from bench import produce_profile  # noqa: E402
from bench.servers import cpu_seconds  # noqa: E402

RECORD = 1024


def _topic(c: Cluster, name: str, rf: int) -> dict[str, int | list[int]]:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, 1, rf)])[name].result(30)

    def ready() -> bool:
        p = admin.list_topics(topic=name, timeout=10).topics[name].partitions.get(0)
        return p is not None and p.leader >= 0 and len(p.isrs) == rf

    wait_until(ready, timeout=30, message=f"{name} led with a full ISR")
    p = admin.list_topics(topic=name, timeout=10).topics[name].partitions[0]
    return {"leader": p.leader, "replicas": list(p.replicas)}


def throughput(c: Cluster, mb: int, rf: int, acks: str, profile_to: Path | None = None) -> dict[str, float]:
    name = f"tput-rf{rf}-{int(time.time() * 1000)}"
    where = _topic(c, name, rf)
    spies = []
    if profile_to is not None:
        leader = int(where["leader"])  # type: ignore[arg-type]
        follower = next(i for i in where["replicas"] if i != leader)  # type: ignore[union-attr]
        for role, node in (("leader", leader), ("follower", follower)):
            spies.append(subprocess.Popen(
                [produce_profile._py_spy(), "record", "--pid", str(c.brokers[node].proc.pid), "--rate", "200",
                 "--function", "--format", "raw", "--output", str(profile_to / f"{role}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)  # py-spy attached before the first record
    n = mb * 1024 * 1024 // RECORD
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 262144,
                  "compression.type": "none", "queue.buffering.max.messages": 200000})
    value = b"x" * RECORD
    errors: list[object] = []
    cpu0 = {i: cpu_seconds(b.proc.pid) for i, b in c.brokers.items()}
    t0 = time.monotonic()
    for _ in range(n):
        while True:
            try:
                p.produce(name, value, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    elapsed = time.monotonic() - t0
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        spy.communicate(timeout=60)
    if errors:
        raise RuntimeError(f"{len(errors)} records failed: {errors[:3]}")
    cpu = {i: cpu_seconds(b.proc.pid) - cpu0[i] for i, b in c.brokers.items()}
    leader = int(where["leader"])  # type: ignore[arg-type]
    followers = [i for i in where["replicas"] if i != leader]  # type: ignore[union-attr]
    out = {"mb_per_s": mb / elapsed, "leader_cpu_s_per_mb": cpu[leader] / mb}
    if followers:
        out["follower_cpu_s_per_mb"] = statistics.mean(cpu[f] for f in followers) / mb
    return out


def latency(c: Cluster, seconds: float, rate: int = 1000) -> dict[str, float]:
    """acks=all produce latency at `rate` records/s, as Kafka's ProducerPerformance measures it:
    from send to the acknowledgement in the client's I/O thread (librdkafka's per-message
    latency), so a delivery report that waits for the application's next poll does not count.
    Between sends the client sleeps: a poll with under 1 ms left is a non-blocking spin in
    confluent-kafka (its timeout is whole milliseconds), and that spin took one of the machine's
    two cores from the brokers (13.7 s of CPU in a 15 s run)."""
    name = f"lat-{int(time.time() * 1000)}"
    _topic(c, name, 3)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
    lat: list[float] = []
    p.produce(name, b"warm-up", partition=0)
    p.flush(30)

    def acked(err: Any, m: Any) -> None:
        if err is None and (t := m.latency()) is not None:
            lat.append(t)

    start = time.monotonic()
    n = int(seconds * rate)
    for k in range(n):
        due = start + k / rate
        while (left := due - time.monotonic()) > 0:
            if left >= 0.001:
                p.poll(left)  # serves delivery reports while it waits
            else:
                time.sleep(left)
        p.produce(name, b"y" * 100, partition=0, on_delivery=acked)
        p.poll(0)
    p.flush(30)
    lat.sort()
    return {"records": len(lat), "p50_ms": 1000 * lat[len(lat) // 2], "p99_ms": 1000 * lat[int(len(lat) * 0.99)],
            "max_ms": 1000 * lat[-1]}


class _Writer:
    """acks=all, idempotent, one record per 5 ms to partition 0; remembers each acknowledgement's time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 0, "message.timeout.ms": 60000})
        self.topic = topic
        self.acked: list[float] = []
        self.errors: list[object] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _on(self, err, _msg) -> None:  # noqa: ANN001
        if err is None:
            self.acked.append(time.monotonic())
        else:
            self.errors.append(err)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.p.produce(self.topic, b"z" * 100, partition=0, on_delivery=self._on)
            self.p.poll(0.005)
        self.p.flush(60)

    def start(self) -> _Writer:
        self._t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._t.join(90)


def unavailability(c: Cluster, kills: int) -> dict[str, float]:
    name = f"unavail-{int(time.time() * 1000)}"
    _topic(c, name, 3)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    w = _Writer(c.bootstrap, name).start()
    gaps: list[float] = []
    killed: list[int] = []
    try:
        for _ in range(kills):
            wait_until(lambda: len(w.acked) > 50, timeout=30, message="the writer to run")
            live = next(b for b in c.brokers.values() if b.alive())
            leader = AdminClient({"bootstrap.servers": live.bootstrap}).list_topics(
                topic=name, timeout=10).topics[name].partitions[0].leader
            c.nodes[leader].kill()
            killed.append(leader)
            t0 = time.monotonic()
            wait_until(lambda t0=t0: w.acked and w.acked[-1] > t0, timeout=60, message="an acknowledgement after the kill")
            gaps.append(next(t for t in w.acked if t > t0) - t0)
            c.nodes[leader].start(timeout=60)

            def full() -> bool:
                p = admin.list_topics(topic=name, timeout=10).topics[name].partitions[0]
                return len(p.isrs) == 3

            wait_until(full, timeout=60, message="the restarted broker back in the ISR")
            w.acked.clear()
    finally:
        w.stop()
    if w.errors:
        raise RuntimeError(f"{len(w.errors)} records failed: {w.errors[:3]}")
    fences = sum(1 for n in c.nodes.values() for line in n.output if "fenced broker" in line)
    return {"median_s": statistics.median(gaps), "max_s": max(gaps), "kills": len(gaps),
            "fences": fences, "false_fences": max(0, fences - len(killed))}


def throughput_rounds(mb: int, rounds: int, profile_to: Path | None) -> None:
    """RF=3 acks=all and RF=1 acks=1, `rounds` pairs on one cluster, which goes first alternating."""
    runs: dict[str, list[dict[str, float]]] = {"rf3": [], "rf1": []}
    with tempfile.TemporaryDirectory(prefix="kavka-bench-replication-") as d:
        c = Cluster(Path(d), 4, controllers=1).start(timeout=120)
        try:
            throughput(c, max(8, mb // 8), 3, "all")  # warm-up: lazy imports, the first segments
            for i in range(rounds):
                for rf in ((3, 1) if i % 2 == 0 else (1, 3)):
                    r = throughput(c, mb, rf, "all" if rf == 3 else "1")
                    runs[f"rf{rf}"].append(r)
                    print(f"round {i + 1} RF={rf}: {r} load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            if profile_to is not None:
                profile_to.mkdir(parents=True, exist_ok=True)
                r = throughput(c, mb, 3, "all", profile_to)
                for role in ("leader", "follower"):
                    produce_profile.print_profile(f"RF=3 acks=all, {role} (under py-spy: {r})", profile_to / f"{role}.txt", 25)
        finally:
            c.stop()
            for n in c.nodes.values():
                n.kill()
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items() if v}
    if med:
        r3, r1 = med["rf3"], med["rf1"]
        ratios = [a["mb_per_s"] / b["mb_per_s"] for a, b in zip(runs["rf3"], runs["rf1"], strict=True)]
        print(f"medians of {rounds}: RF=3 acks=all {r3['mb_per_s']:.1f} MB/s, RF=1 acks=1 {r1['mb_per_s']:.1f} MB/s, "
              f"ratio {r3['mb_per_s'] / r1['mb_per_s']:.2f} (per round {', '.join(f'{x:.2f}' for x in ratios)}); "
              f"CPU ms/MB leader {1000 * r3['leader_cpu_s_per_mb']:.1f}, follower {1000 * r3['follower_cpu_s_per_mb']:.1f} "
              f"(follower/leader {r3['follower_cpu_s_per_mb'] / r3['leader_cpu_s_per_mb']:.2f}), "
              f"RF=1 leader {1000 * r1['leader_cpu_s_per_mb']:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--throughput-only", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="throughput pairs with --throughput-only")
    ap.add_argument("--profile", type=Path, help="directory for py-spy's stacks of the leader and a follower")
    args = ap.parse_args()
    mb, seconds, kills = (8, 3.0, 2) if args.smoke else (args.mb, args.seconds, args.kills)
    if args.throughput_only:
        return throughput_rounds(mb, args.rounds, args.profile)
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="kavka-bench-replication-") as d:
        c = Cluster(Path(d), 4, controllers=1).start(timeout=120)
        try:
            results["rf3_acks_all"] = throughput(c, mb, 3, "all")
            results["rf1_acks_1"] = throughput(c, mb, 1, "1")
            print(f"throughput: {results}", file=sys.stderr, flush=True)
            results["latency_1k_per_s"] = latency(c, seconds)
            print(f"latency: {results['latency_1k_per_s']}", file=sys.stderr, flush=True)
            results["unavailability"] = unavailability(c, kills)
        finally:
            c.stop()
            for n in c.nodes.values():
                n.kill()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    r3, r1 = results["rf3_acks_all"], results["rf1_acks_1"]
    lat, un = results["latency_1k_per_s"], results["unavailability"]
    print("| figure | value |")
    print("|---|---|")
    print(f"| RF=3 acks=all throughput | {r3['mb_per_s']:.1f} MB/s ({r3['mb_per_s'] / r1['mb_per_s']:.2f}x RF=1 acks=1: {r1['mb_per_s']:.1f} MB/s) |")  # type: ignore[index]
    print(f"| CPU per MB, leader / follower | {1000 * r3['leader_cpu_s_per_mb']:.1f} / {1000 * r3['follower_cpu_s_per_mb']:.1f} ms "  # type: ignore[index]
          f"(follower/leader {r3['follower_cpu_s_per_mb'] / r3['leader_cpu_s_per_mb']:.2f}); RF=1 leader {1000 * r1['leader_cpu_s_per_mb']:.1f} ms |")  # type: ignore[index]
    print(f"| produce latency at 1k rec/s, RF=3 acks=all | p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.1f} ms |")  # type: ignore[index]
    print(f"| unavailability after kill -9 of the leader | median {un['median_s']:.2f} s, max {un['max_s']:.2f} s over {un['kills']} kills; "  # type: ignore[index]
          f"false fences: {un['false_fences']} |")  # type: ignore[index]


if __name__ == "__main__":
    main()
