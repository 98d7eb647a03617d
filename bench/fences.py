"""`python -m bench.fences`: false fences under load (issue 29: "zero false fences in a loaded
10-minute run").

kavka fences faster than Kafka's defaults would (a new active controller fences a node that is
silent 1 s after its activation, or that refused its connection; a broker whose heartbeat
connection closed is fenced once its listener refuses too; a broker whose heartbeats go unanswered
for a session stops leading where a follower stopped fetching). None of that may fence a broker
that is only busy. This run loads three combined nodes (kavka's shipped defaults: session 9 s,
heartbeat 2 s, quorum fetch timeout 2 s) far beyond the machine's cores for `--minutes` and
kills nothing:

- `--producers` processes, each an idempotent acks=all confluent-kafka producer writing 1 KiB
  records to an RF=3, min.insync.replicas=2 topic of 6 partitions as fast as it can (librdkafka's
  queue full is its only brake), and `--consumers` processes reading the topic from the start
  over and over;
- with `--pause-s S`, every `--pause-every T` seconds one broker that is neither the active
  controller nor (if it can be avoided) a partition leader is stopped with SIGSTOP for S seconds,
  below the 9 s session: paused, not dead.

Counted afterwards from every node's log: brokers fenced (``fenced broker N``), brokers that
stopped acting as leaders for a lapsed session; and from the metadata: partition leader changes
of the topic (leaders and leader epochs before and after). Every one must be 0 for the run to
pass (exit status 1 otherwise). Also reported: metadata quorum elections after the start (each
a new active controller, whose activation check is the rule most likely to fence a busy node:
informational, as an event loop stalled beyond `controller.quorum.fetch.timeout.ms` calls one
in Kafka too), records acknowledged per second, producer errors, the load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402

from bench.failover import quorum_leader  # noqa: E402

PARTITIONS = 6
_FENCED = re.compile(r"fenced broker (\d+)")
_LAPSED = re.compile(r"broker (\d+) stops acting as a leader")
_ELECTED = re.compile(r"metadata quorum leader: node (\d+) in epoch (\d+)")


def _produce(bootstrap: str, topic: str, until: float, out: mp.Queue) -> None:
    acked = errors = 0
    first_error = ""

    def done(err: KafkaError | None, _msg: object) -> None:
        nonlocal acked, errors, first_error
        if err is None:
            acked += 1
        else:
            errors += 1
            first_error = first_error or str(err)

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 120000})
    value = os.urandom(1024)
    while time.time() < until:
        try:
            p.produce(topic, value, on_delivery=done)
        except BufferError:
            p.poll(0.05)
            continue
        p.poll(0)
    p.flush(120)
    out.put(("producer", acked, errors, first_error))


def _consume(bootstrap: str, topic: str, until: float, out: mp.Queue) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fences-{os.getpid()}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": True})
    c.subscribe([topic])
    read = 0
    while time.time() < until:
        msgs = c.consume(1000, 0.5)
        read += sum(1 for m in msgs if m.error() is None)
    c.close()
    out.put(("consumer", read, 0, ""))


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic=topic, timeout=20)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def _leader_epochs(c: Cluster, topic: str) -> dict[int, int]:
    """partition -> leader epoch (a leader that moved away and came back shows only here)."""
    from kavka.client.admin import AdminClient as KAdmin

    k = KAdmin(",".join(n.bootstrap for n in c.brokers.values()))
    try:
        return {p.partition: p.leader_epoch for p in k.describe_topics([topic])[0].partitions}
    finally:
        k.close()


def _pause_one(c: Cluster, admin: AdminClient, topic: str, seconds: float, rng: random.Random) -> tuple[int, str]:
    """SIGSTOP, for `seconds`, a broker that is not the active controller, preferring one that
    leads no partition of `topic`; returns it and when the pause began (UTC, as the logs say)."""
    ctl = quorum_leader(c)
    leaders = set(_leaders(admin, topic).values())
    others = [i for i in sorted(c.brokers) if i != ctl]
    victim = rng.choice([i for i in others if i not in leaders] or others)
    pid = c.nodes[victim].proc.pid
    began = time.strftime("%H:%M:%S", time.gmtime())
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return victim, began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=1)
    ap.add_argument("--pause-s", type=float, default=0.0, help="SIGSTOP a broker this long (below the session)")
    ap.add_argument("--pause-every", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="kavka-bench-fences-") as d:
        c = Cluster(Path(d), 3, overrides={"log.retention.check.interval.ms": "5000"}).start(timeout=120)
        try:
            bootstrap = ",".join(n.bootstrap for n in c.brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topic = f"fences-{int(time.time())}"
            # Bounded on disk (the load writes tens of GB in 10 minutes): retention is not under test.
            config = {"min.insync.replicas": "2", "retention.bytes": str(256 << 20), "segment.bytes": str(64 << 20)}
            admin.create_topics([NewTopic(topic, PARTITIONS, 3, config=config)])[topic].result(30)
            deadline = time.time() + 30
            while any(lead < 0 for lead in _leaders(admin, topic).values()):
                if time.time() > deadline:
                    raise TimeoutError(f"{topic}: not every partition led within 30 s")
                time.sleep(0.2)
            before = _leaders(admin, topic)
            epochs_before = _leader_epochs(c, topic)
            marks = {i: len(n.output) for i, n in c.nodes.items()}
            start = time.time()
            until = start + args.minutes * 60
            out: mp.Queue = mp.Queue()
            procs = [mp.Process(target=_produce, args=(bootstrap, topic, until, out)) for _ in range(args.producers)]
            procs += [mp.Process(target=_consume, args=(bootstrap, topic, until, out)) for _ in range(args.consumers)]
            for p in procs:
                p.start()
            pauses: list[tuple[int, str]] = []
            loads: list[float] = []
            next_pause = start + args.pause_every
            while time.time() < until:
                load = os.getloadavg()[0]
                loads.append(load)
                print(f"{time.time() - start:6.0f} s: load {load:.1f}", file=sys.stderr, flush=True)
                if args.pause_s > 0 and time.time() >= next_pause and time.time() + args.pause_s < until:
                    pauses.append(_pause_one(c, admin, topic, args.pause_s, rng))
                    next_pause = time.time() + args.pause_every
                time.sleep(min(30.0, max(until - time.time(), 0)))
            results = [out.get(timeout=300) for _ in procs]
            for p in procs:
                p.join(60)
            elapsed = time.time() - start
            after = _leaders(admin, topic)
            lines = [line for i, n in c.nodes.items() for line in n.output[marks[i]:]]
            logs = {i: n.output[marks[i]:] for i, n in c.nodes.items()}
            fenced = [line.strip() for line in lines if _FENCED.search(line)]
            lapsed = [line.strip() for line in lines if _LAPSED.search(line)]
            elections = sorted({m.groups() for line in lines if (m := _ELECTED.search(line))})
            changes = {p: (before[p], after[p]) for p in before if before[p] != after[p]}
            epochs = {p: (epochs_before[p], e) for p, e in _leader_epochs(c, topic).items() if e != epochs_before[p]}
        finally:
            c.stop()
            for n in c.nodes.values():
                n.kill()
    acked = sum(r[1] for r in results if r[0] == "producer")
    errors = [r for r in results if r[0] == "producer" and r[2]]
    report = {
        "minutes": round(elapsed / 60, 2), "producers": args.producers, "consumers": args.consumers,
        "pauses": {"seconds": args.pause_s, "brokers": pauses},
        "load_average": {"min": min(loads), "max": max(loads)},
        "acked_per_s": round(acked / elapsed), "producer_errors": sum(r[2] for r in errors),
        "first_producer_error": errors[0][3] if errors else "",
        "read": sum(r[1] for r in results if r[0] == "consumer"),
        "fenced": fenced, "lapsed": lapsed, "quorum_elections": [list(e) for e in elections],
        "leader_changes": changes, "leader_epoch_changes": epochs,
    }
    ok = not fenced and not lapsed and not changes and not epochs
    if not ok:  # the nodes' logs of the run, to find out why
        keep = Path(tempfile.mkdtemp(prefix="kavka-bench-fences-logs-"))
        for i, out in logs.items():
            (keep / f"node{i}.log").write_text("".join(out))
        report["logs"] = str(keep)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['minutes']} min, {args.producers} producers + {args.consumers} consumers, "
              f"pauses of {args.pause_s} s: {pauses}, load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"acknowledged {report['acked_per_s']} records/s (1 KiB), producer errors {report['producer_errors']}")
        print(f"fenced: {len(fenced)}, lapsed leaders: {len(lapsed)}, partition leader changes: {len(changes)}, "
              f"leader epoch changes: {len(epochs)}; quorum elections (informational): {len(elections)}")
        for line in fenced + lapsed:
            print("  " + line)
        if not ok:
            print(f"the nodes' logs: {report['logs']}")
        print("PASS: no false fence" if ok else "FAIL: see above")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
