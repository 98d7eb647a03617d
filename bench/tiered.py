"""Tiered storage (issue 15), the seed's test cases 1 and 2 scaled to this machine.

``python -m bench.tiered [--seconds S] [--rate MIBS] [--old-mib N] [--rounds R]`` starts one kavka
broker with tiering on (the ``local`` plugin, a directory on the same disk; task interval 500 ms,
1 MiB segments) and measures, with a closed-loop probe producer (confluent-kafka, linger.ms=0, one
1 KiB record at a time, each round trip timed):

1. **Produce latency, tiering on vs off** (acks=1 and acks=all): while a load producer writes
   ``--rate`` MiB/s of 1 KiB records to the same topic, the probe sends to it for ``--seconds``;
   "on" is a topic with remote.storage.enable=true and local.retention.bytes=2 MiB (every segment
   copied and deleted locally as it closes), "off" a plain topic. Rounds alternate off/on.
2. **Producers while consumers read old data, remote vs local**: two topics hold ``--old-mib`` MiB
   each, one tiered (all but the last 2 MiB only in remote storage), one plain; a confluent-kafka
   consumer reads one of them from offset 0 to the end, again and again, while the probe produces
   to a third topic. Rounds alternate local/remote; the consumer's MiB/s is printed too.

3. **Rebuild a wiped replica, tiered vs not** (``--case 3 [--rebuild-mib 8,16,32] [--local-mib 1]``):
   a cluster of three broker+controller nodes (tests/broker_harness.Cluster; one shared remote
   directory), and per data size two RF=3 topics filled with the same ``N`` MiB of 1 KiB records:
   one tiered with ``local.retention.bytes`` = ``--local-mib``, one plain. For each, a follower is
   stopped, its partition directory deleted and the broker started again; the time from its
   process start, and from its ready line, until the ISR lists it again, and the bytes it then holds.
   The tiered replica fetches only the leader's local tail (KIP-405 follower fetch); the plain one
   fetches the whole log. On a loaded machine tiering the data can take longer than the 600 s the
   run waits for it: ``BENCH_TIER_WAIT`` (seconds) sets that wait. ``BENCH_VERBOSE=1`` prints what
   the rebuilt replica logged about the topic.

Prints p50/p95/p99/max per window and the load average. Not a test: figures go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench.servers import Broker, start_kavka
from kavka.client.admin import AdminClient, NewTopic

MIB = 1 << 20
VALUE = b"v" * 1024


def start_broker(work: Path) -> Broker:
    """A single broker with tiering on (the `local` plugin under `work`/remote)."""
    return start_kavka(
        {
            "log.retention.check.interval.ms": "500",
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "local",
            "rsm.config.dir": str(work / "remote"),
            "remote.log.manager.task.interval.ms": "500",
            "remote.log.metadata.topic.num.partitions": "3",
        },
        work=work,
    )


TIERED = {"remote.storage.enable": "true", "segment.bytes": str(MIB), "local.retention.bytes": str(2 * MIB), "retention.ms": "-1"}
PLAIN = {"segment.bytes": str(MIB), "retention.ms": "-1"}


def fill(bootstrap: str, topic: str, mib: int) -> None:
    """`mib` MiB of 1 KiB records into `topic`; raises if any failed (a run once went on with 1.7 of
    128 MiB written and waited for tiering that could never come)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 256 * 1024})
    errors: list[object] = []
    for i in range(mib * 1024):
        while True:
            try:
                p.produce(topic, value=VALUE, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
        if i % 2000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    if errors:
        raise RuntimeError(f"{len(errors)} of {mib * 1024} records to {topic} failed: {errors[:3]}")


def load(bootstrap: str, topic: str, mib_per_s: float, stop: threading.Event, acks: str) -> None:
    """Paced background writes: 1 KiB records at ``mib_per_s``."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    per_tick = max(1, int(mib_per_s * 1024 / 100))  # 10 ms ticks
    nxt = time.monotonic()
    while not stop.is_set():
        for _ in range(per_tick):
            try:
                p.produce(topic, value=VALUE)
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        nxt += 0.01
        time.sleep(max(0.0, nxt - time.monotonic()))
    p.flush(30)


def probe(bootstrap: str, topic: str, seconds: float, acks: str) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    done: list[float] = []
    lat: list[float] = []
    p.produce(topic, value=VALUE, on_delivery=lambda e, m: done.append(0.0))
    p.flush(10)
    done.clear()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        p.produce(topic, value=VALUE, on_delivery=lambda err, msg: done.append(time.perf_counter()))
        while not done:
            p.poll(0.0005)
        lat.append(done.pop() - t0)
    p.flush(10)
    return lat


def read_loop(bootstrap: str, topic: str, stop: threading.Event, out: list[int]) -> None:
    """Read ``topic`` from offset 0 to the end, again and again; bytes read go to ``out``."""
    while not stop.is_set():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                      "enable.partition.eof": True, "fetch.max.bytes": 8 * MIB})
        c.assign([TopicPartition(topic, 0, 0)])
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise RuntimeError(m.error())
                out[0] += len(m.value() or b"")
        finally:
            c.close()


def summary(lat: list[float]) -> str:
    s = sorted(lat)
    if not s:
        return "no samples"

    def q(f: float) -> float:
        return s[min(int(f * len(s)), len(s) - 1)] * 1000

    return (f"n={len(s)} p50={q(0.5):.2f} p95={q(0.95):.2f} p99={q(0.99):.2f} max={s[-1] * 1000:.1f} ms"
            f" (load {os.getloadavg()[0]:.1f})")


def copies(work: Path) -> int:
    return (work / "broker.log").read_text(errors="replace").count("copied segment")


def rebuild(sizes_mib: list[int], local_mib: int, rounds: int) -> None:
    """Case 3: the time a wiped follower takes to rejoin the ISR, tiered vs plain."""
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from confluent_kafka.admin import AdminClient as CkAdmin
    from confluent_kafka.admin import NewTopic as CkNewTopic
    from tests.broker_harness import Cluster

    seg = max(MIB // 4, local_mib * MIB // 4)
    with tempfile.TemporaryDirectory(prefix="kavka-rebuild-bench-") as d:
        root = Path(d)
        c = Cluster(root, 3, overrides={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "local",
            "rsm.config.dir": str(root / "remote"),
            "remote.log.manager.task.interval.ms": "500",
            "log.retention.check.interval.ms": "500",
            "remote.log.metadata.topic.num.partitions": "3",
            "replica.lag.time.max.ms": "10000",
        }).start(timeout=120)
        admin = CkAdmin({"bootstrap.servers": c.bootstrap})

        def part(topic: str):  # noqa: ANN202
            return admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]

        def wait(pred, timeout: float, what: str, every: float = 0.02) -> None:  # noqa: ANN001
            end = time.monotonic() + timeout
            while not pred():
                if time.monotonic() > end:
                    raise TimeoutError(what)
                time.sleep(every)

        try:
            print(f"case 3: a wiped follower rejoins the ISR; local retention {local_mib} MiB, segments {seg // 1024} KiB", flush=True)
            for r in range(rounds):
                for mib in sizes_mib:
                    for variant in ("plain", "tiered"):
                        topic = f"rebuild-{variant}-{mib}-{r}"
                        cfg = {"segment.bytes": str(seg), "retention.ms": "-1"}
                        if variant == "tiered":
                            cfg |= {"remote.storage.enable": "true", "local.retention.bytes": str(local_mib * MIB)}
                        admin.create_topics([CkNewTopic(topic, 1, 3, config=cfg)])[topic].result(30)
                        wait(lambda t=topic: len(part(t).isrs) == 3, 60, "ISR")
                        fill(c.bootstrap, topic, mib)
                        leader = part(topic).leader
                        victim = next(b for b in c.brokers if b != leader)
                        pdir = c.nodes[victim].log_dirs[0] / f"{topic}-0"

                        def local_bytes(p: Path = pdir) -> int:
                            total = 0
                            for f in p.glob("*.log") if p.exists() else ():
                                try:
                                    total += f.stat().st_size
                                except FileNotFoundError:  # deleted by local retention meanwhile
                                    pass
                            return total

                        if variant == "tiered":  # copies and local retention done on the leader and here first
                            def leader_tail_only(t: str = topic, n: int = mib) -> bool:
                                with AdminClient(c.bootstrap, timeout_s=30) as a:
                                    start = a.list_offsets({(t, 0): "earliest-local"})[(t, 0)].offset
                                return start * 1024 >= (n - local_mib) * MIB - 2 * seg

                            wait(leader_tail_only, float(os.environ.get("BENCH_TIER_WAIT", "600")), "the leader's local retention")
                            wait(lambda: local_bytes() <= local_mib * MIB + 2 * seg, 300, "local retention")
                        wait(lambda t=topic: len(part(t).isrs) == 3, 60, "ISR")
                        assert c.nodes[victim].stop() == 0
                        shutil.rmtree(pdir)
                        t0 = time.monotonic()
                        c.nodes[victim].start(timeout=120, wait=False)
                        c.nodes[victim].wait_ready(120)
                        t_ready = time.monotonic()
                        try:
                            wait(lambda t=topic: len(part(t).isrs) == 3, float(os.environ.get("BENCH_ISR_WAIT", "600")),
                                 "the wiped replica back in the ISR", every=0.002)  # the timing: polled finely
                        except TimeoutError:
                            print("".join(ln for ln in c.nodes[victim].output if topic in ln and "rolled" not in ln)[-5000:])
                            raise
                        t_isr = time.monotonic()
                        if os.environ.get("BENCH_VERBOSE"):  # what the rebuilt replica logged about the topic
                            print("".join(ln for ln in c.nodes[victim].output if topic in ln and "rolled" not in ln)[-3000:])
                        print(f"  round {r} {mib:4d} MiB ({mib // local_mib}x local retention) {variant:6s}: "
                              f"in the ISR {t_isr - t0:6.2f} s after its start, {t_isr - t_ready:6.2f} s after ready; "
                              f"holds {local_bytes() / MIB:6.1f} MiB (load {os.getloadavg()[0]:.1f})", flush=True)
                        admin.delete_topics([topic])[topic].result(30)
        finally:
            c.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=4.0, help="MiB/s of background writes in case 1")
    ap.add_argument("--old-mib", type=int, default=64, help="MiB of old data per topic in case 2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--case", choices=["1", "2", "both", "3"], default="both")
    ap.add_argument("--rebuild-mib", default="8,16,32", help="case 3: MiB of data per topic, comma-separated")
    ap.add_argument("--local-mib", type=int, default=1, help="case 3: local.retention.bytes in MiB")
    args = ap.parse_args()
    if args.case == "3":
        rebuild([int(x) for x in args.rebuild_mib.split(",")], args.local_mib, args.rounds)
        return
    work = Path(tempfile.mkdtemp(prefix="kavka-tiered-bench-"))
    broker = start_broker(work)
    bootstrap = broker.bootstrap
    try:
        if args.case in ("1", "both"):
            print(f"case 1: probe produce latency with {args.rate} MiB/s of background writes to the same topic", flush=True)
            for r in range(args.rounds):
                for acks in ("1", "all"):
                    for variant in ("off", "on"):
                        topic = f"c1-{variant}-{acks}-{r}"
                        with AdminClient(bootstrap, timeout_s=30) as a:
                            a.create_topics([NewTopic(topic, 1, 1, TIERED if variant == "on" else PLAIN)])
                        time.sleep(1)
                        stop = threading.Event()
                        t = threading.Thread(target=load, args=(bootstrap, topic, args.rate, stop, acks), daemon=True)
                        before = copies(work)
                        t.start()
                        time.sleep(2)  # segments roll and (on) copies begin before the window
                        lat = probe(bootstrap, topic, args.seconds, acks)
                        stop.set()
                        t.join(60)
                        print(f"  round {r} acks={acks} tiering {variant}: {summary(lat)}; segments copied {copies(work) - before}", flush=True)
        if args.case in ("2", "both"):
            with AdminClient(bootstrap, timeout_s=30) as a:
                a.create_topics([NewTopic("old-remote", 1, 1, TIERED), NewTopic("old-local", 1, 1, PLAIN), NewTopic("probe", 1, 1)])
            time.sleep(1)
            t0 = time.monotonic()
            fill(bootstrap, "old-remote", args.old_mib)
            fill(bootstrap, "old-local", args.old_mib)
            with AdminClient(bootstrap, timeout_s=30) as a:
                while True:
                    res = a.list_offsets({("old-remote", 0): "earliest-local"})
                    local_start = res[("old-remote", 0)].offset
                    if local_start >= (args.old_mib - 3) * 1024 or time.monotonic() - t0 > 600:
                        break
                    time.sleep(1)
            print(f"case 2: {args.old_mib} MiB per topic filled and tiered in {time.monotonic() - t0:.0f} s; "
                  f"old-remote's local log starts at offset {local_start} of {args.old_mib * 1024}", flush=True)
            base = probe(bootstrap, "probe", min(args.seconds, 10), "1")
            print(f"  baseline, no reader: {summary(base)}", flush=True)
            for r in range(args.rounds):
                for source in ("old-local", "old-remote"):
                    stop = threading.Event()
                    got = [0]
                    t = threading.Thread(target=read_loop, args=(bootstrap, source, stop, got), daemon=True)
                    t.start()
                    time.sleep(1)
                    start_bytes, t1 = got[0], time.monotonic()
                    lat = probe(bootstrap, "probe", args.seconds, "1")
                    rate = (got[0] - start_bytes) / MIB / (time.monotonic() - t1)
                    stop.set()
                    t.join(60)
                    print(f"  round {r} reader on {source}: {summary(lat)}; reader {rate:.1f} MiB/s", flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
