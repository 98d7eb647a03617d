"""`python -m bench.failover`: unavailability after a node dies, for each case of issue 29 item 1.

Measured as a user would: an idempotent acks=all confluent-kafka producer writes a numbered
record every few milliseconds to a fresh RF=3, min.insync.replicas=2 topic whose preferred
leader is the victim; the victim is killed -9 (or, for `clean`, stopped with SIGTERM) and the
figure is the time from the kill to the first acknowledgement of a record sent after it. Every
acknowledged record is then read back, and must be there exactly once. The victim is restarted
between kills. Cases:

- `leader`: the partition leader's node, not the active controller (3 combined nodes);
- `leader+controller`: the partition leader's node when it is also the active controller;
- `controller`: the active controller alone (it leads no partition of the topic); also times
  metadata unavailability: the kill to the next successful CreateTopics through a survivor;
- `dedicated`: 3 controller-only nodes and 3 broker-only nodes, the leader's broker killed; then
  the active controller killed (metadata unavailability);
- `clean`: the leader's node stopped gracefully (controlled shutdown): a producer sees no error.

Figures are median and max over `--kills` kills per case (`--smoke`: 1). The library half
(`Run`, `kill_and_measure`) is what tests/integration/test_failover.py drives with a few kills.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402

from kavka.client.admin import AdminClient as KAdmin  # noqa: E402

_COMMON = {"socket.timeout.ms": 10000, "metadata.max.age.ms": 5000, "topic.metadata.refresh.interval.ms": 1000}
CASES = ("leader", "leader+controller", "controller", "dedicated", "clean")
K = TypeVar("K")


def quorum_leader(c: Cluster) -> int:
    last: Exception | None = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for n in c.brokers.values():
            if not n.alive():
                continue
            try:
                a = KAdmin(n.bootstrap)
                try:
                    lead = a.describe_quorum().leader_id
                finally:
                    a.close()
                if lead is not None and lead >= 0 and c.nodes[lead].alive():
                    return lead
            except Exception as e:  # noqa: BLE001 -- asked again until the quorum answers
                last = e
        time.sleep(0.05)
    raise TimeoutError(f"no quorum leader within 30s ({last!r})")


def _bootstrap(c: Cluster, exclude: int | None = None) -> str:
    return ",".join(n.bootstrap for i, n in c.brokers.items() if i != exclude and n.alive())


def create_topic(c: Cluster, name: str, replicas: list[int], timeout_s: float = 60) -> None:
    """One partition on `replicas` (the first is the preferred leader), min.insync.replicas=2; waits
    until it is led by replicas[0] with the full ISR."""
    admin = AdminClient({"bootstrap.servers": _bootstrap(c), **_COMMON})
    t = NewTopic(name, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
    admin.create_topics([t], operation_timeout=10, request_timeout=15)[name].result(timeout=30)
    deadline = time.monotonic() + timeout_s
    while True:
        md = admin.list_topics(topic=name, timeout=10)
        p = md.topics[name].partitions.get(0)
        if p is not None and p.leader == replicas[0] and sorted(p.isrs) == sorted(replicas):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: led by {None if p is None else p.leader}, ISR {None if p is None else p.isrs}")
        time.sleep(0.05)


@dataclass
class Load:
    """A producer thread: record i (value `i`) is sent at sent[i]; acked[i] is its ack time."""

    bootstrap: str
    topic: str
    period_s: float = 0.005
    sent: dict[int, float] = field(default_factory=dict)
    acked: dict[int, float] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Load:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        p = Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 60000, **_COMMON,
        })

        def done(err: object, msg: object, i: int) -> None:
            if err is None:
                self.acked[i] = time.monotonic()
                self.offsets[i] = msg.offset()  # type: ignore[attr-defined]
            else:
                self.errors.append(f"record {i}: {err}")

        i = 0
        while not self._stop.is_set():
            self.sent[i] = time.monotonic()
            p.produce(self.topic, str(i).encode(), partition=0, on_delivery=lambda e, m, i=i: done(e, m, i))
            i += 1
            p.poll(self.period_s)
        p.flush(90)

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(120)

    def first_ack_after(self, t: float) -> float | None:
        """The first ack of a record sent at or after `t`, as seconds after `t`."""
        acks = [a for i, a in list(self.acked.items()) if self.sent[i] >= t]
        return min(acks) - t if acks else None


def producer_epochs(c: Cluster, topic: str, partition: int = 0) -> dict[int, int]:
    """offset -> the producer epoch of its batch, from the live replicas' segment files."""
    from kavka.cli.dump_log import dump_log_dir

    out: dict[int, int] = {}
    for n in c.brokers.values():
        d = n.log_dirs[0] / f"{topic}-{partition}"
        if n.alive() and d.exists():
            for b in dump_log_dir(d):
                for o in range(b["baseOffset"], b["lastOffset"] + 1):
                    out.setdefault(o, b["producerEpoch"])
    return out


def resent_after_an_epoch_bump(copies: Mapping[K, list[int]], epochs: Mapping[int, int]) -> tuple[list[K], list[K]]:
    """Of the values read more than once (value -> offsets), those whose copies lie in strictly
    increasing producer epochs -- librdkafka's idempotent producer, answered
    OUT_OF_ORDER_SEQUENCE_NUMBER for a batch whose predecessor was refused, bumps its epoch and
    re-sends every unacknowledged message from sequence 0, those a leader already holds included
    (confluentinc/librdkafka#4953, against Apache Kafka too; sequences restart with the epoch, so
    no broker can tell such a copy from a new record) -- and the others, duplicated within one
    epoch: the broker's deduplication failed."""
    resent: list[K] = []
    duplicated: list[K] = []
    for v, offsets in copies.items():
        if len(offsets) < 2:
            continue
        found = [epochs.get(o) for o in offsets]
        ok = None not in found and found == sorted(set(found))  # type: ignore[type-var]
        (resent if ok else duplicated).append(v)
    return resent, duplicated


def read_back(c: Cluster, load: Load) -> int:
    """Every acked record is in the partition exactly once per producer epoch, at the offset it
    was acked with; returns how many were re-sent after an epoch bump (resent_after_an_epoch_bump)."""
    cons = Consumer({
        "bootstrap.servers": _bootstrap(c), "group.id": f"check-{load.topic}", "enable.auto.commit": False,
        "enable.partition.eof": True, **_COMMON,
    })
    copies: dict[int, list[int]] = {}
    try:
        cons.assign([TopicPartition(load.topic, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = cons.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            copies.setdefault(int(m.value()), []).append(m.offset())
    finally:
        cons.close()
    resent, dups = resent_after_an_epoch_bump(copies, producer_epochs(c, load.topic)) if any(
        len(o) > 1 for o in copies.values()) else ([], [])
    missing = sorted(set(load.acked) - set(copies))
    moved = [i for i, o in load.offsets.items() if i in copies and o not in copies[i]]
    assert not dups and not missing and not moved, (
        f"{load.topic}: {len(dups)} duplicated within a producer epoch (e.g. {dups[:5]}), {len(missing)} acked but "
        f"missing (e.g. {missing[:5]}), {len(moved)} at another offset than acked (e.g. {moved[:5]})"
    )
    if resent:
        print(f"{load.topic}: {len(resent)} records re-sent by librdkafka after an epoch bump "
              f"(e.g. {resent[:5]})", file=sys.stderr, flush=True)
    return len(resent)


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s}s")
        time.sleep(0.02)
    return time.monotonic() - t0


def metadata_unavailability(c: Cluster, victim: int, t0: float, name: str, timeout_s: float = 60) -> float:
    """Seconds from `t0` (the kill) to the first successful CreateTopics through a survivor."""
    admin = AdminClient({"bootstrap.servers": _bootstrap(c, exclude=victim), **_COMMON})
    while True:
        try:
            admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=5, request_timeout=5)[name].result(timeout=10)
            break
        except Exception as e:  # noqa: BLE001 -- retried until the new controller answers
            if "TOPIC_ALREADY_EXISTS" in str(e):
                break
            time.sleep(0.02)
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"no CreateTopics success within {timeout_s}s of the kill")
    return time.monotonic() - t0


@dataclass
class Result:
    case: str
    victim: int
    produce_s: float  # kill -> first ack of a record sent after it
    metadata_s: float | None = None  # kill -> next successful CreateTopics (controller cases)
    producer_errors: int = 0
    # Seconds after the kill, from the survivors' logs: the new quorum leader known, the new
    # active controller's sessions started, the victim fenced; and the next ack (produce_s).
    phases: dict[str, float] = field(default_factory=dict)


_PHASES = (
    ("leader", re.compile(r"metadata quorum leader: node (\d+)")),
    ("active", re.compile(r"active controller in epoch")),
    ("fenced", re.compile(r"fenced broker (\d+)")),
)


def _log_time(line: str) -> float | None:
    m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", line)
    if m is None:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def phases(c: Cluster, victim: int, marks: dict[int, int], t0_wall: float) -> dict[str, float]:
    """When, after the kill, the survivors logged each step of a failover (the earliest node)."""
    out: dict[str, float] = {}
    for i, n in c.nodes.items():
        if i == victim:
            continue
        for line in n.output[marks.get(i, 0):]:
            for name, rx in _PHASES:
                m = rx.search(line)
                if m is None or (m.groups() and int(m.group(1)) == victim and name == "leader"):
                    continue
                if name == "fenced" and int(m.group(1)) != victim:
                    continue
                t = _log_time(line)
                if t is not None and t >= t0_wall - 0.01:
                    out[name] = min(out.get(name, float("inf")), t - t0_wall)
    return out


def pick(c: Cluster, case: str) -> tuple[int, list[int]]:
    """The victim, and the replicas of the topic (preferred leader first) for one kill of `case`."""
    ctl = quorum_leader(c)
    ids = sorted(c.brokers)
    if case == "leader+controller":
        victim = ctl
        return victim, [victim, *[i for i in ids if i != victim][:2]]
    if case == "controller":
        others = [i for i in ids if i != ctl]
        return ctl, [*others[:2], ctl][:3]
    # leader / dedicated / clean: a broker that is not the active controller leads
    victim = next(i for i in ids if i != ctl)
    return victim, [victim, *[i for i in ids if i != victim][:2]]


def kill_and_measure(c: Cluster, case: str, n: int, *, settle_s: float = 0.5) -> Result:
    """One kill (SIGTERM for `clean`) of `case`'s victim under load; reads every acked record back,
    restarts the victim and waits until it is back in the topic's ISR."""
    victim, replicas = pick(c, case)
    topic = f"fo-{case.replace('+', '-')}-{n}-{int(time.time() * 1000)}"
    create_topic(c, topic, replicas)
    load = Load(_bootstrap(c), topic).start()
    try:
        wait_for(lambda: len(load.acked) >= 50, 30, "first acks")
        time.sleep(settle_s)
        node = c.nodes[victim]
        marks = {i: len(x.output) for i, x in c.nodes.items()}
        t0_wall = time.time()
        if case == "clean":
            node.proc.send_signal(signal.SIGTERM)
        else:
            node.kill()
        t0 = time.monotonic()
        meta = metadata_unavailability(c, victim, t0, f"{topic}-meta") if case == "controller" else None
        wait_for(lambda: load.first_ack_after(t0) is not None, 60, f"{case}: an ack after the kill")
        produce_s = load.first_ack_after(t0)
        assert produce_s is not None
        time.sleep(settle_s)
    finally:
        load.stop()
    if case == "clean":
        c.nodes[victim].stop()
    read_back(c, load)
    node.start(timeout=60)
    admin = AdminClient({"bootstrap.servers": _bootstrap(c), **_COMMON})

    def back() -> bool:
        p = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]
        return victim in p.isrs

    wait_for(back, 60, f"node {victim} back in the ISR of {topic}")
    return Result(case, victim, produce_s, meta, len(load.errors), phases(c, victim, marks, t0_wall))


def dedicated_controller_kill(c: Cluster, n: int) -> float:
    """Kill the active controller of a cluster with controller-only nodes; metadata unavailability."""
    ctl = quorum_leader(c)
    c.nodes[ctl].kill()
    t0 = time.monotonic()
    s = metadata_unavailability(c, ctl, t0, f"fo-dedicated-meta-{n}-{int(time.time() * 1000)}")
    c.nodes[ctl].start(timeout=60)
    return s


def cluster_for(case: str, root: Path, overrides: dict[str, str] | None = None) -> Cluster:
    if case == "dedicated":
        return Cluster(root, 6, controllers=3, overrides=overrides)
    return Cluster(root, 3, overrides=overrides)


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "max": max(xs), "runs": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    kills = 1 if args.smoke else args.kills
    rows: dict[str, dict[str, object]] = {}
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="kavka-bench-failover-") as d:
            c = cluster_for(case, Path(d)).start(timeout=120)
            try:
                results = [kill_and_measure(c, case, k) for k in range(kills)]
                for r in results:
                    steps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.phases.items(), key=lambda kv: kv[1]))
                    print(f"{case} (node {r.victim}): {steps}, ack {r.produce_s:.2f} s after the kill",
                          file=sys.stderr, flush=True)
                row: dict[str, object] = {
                    "produce_s": _stats([r.produce_s for r in results]),
                    "producer_errors": sum(r.producer_errors for r in results),
                }
                meta = [r.metadata_s for r in results if r.metadata_s is not None]
                if case == "dedicated":
                    meta = [dedicated_controller_kill(c, k) for k in range(kills)]
                if meta:
                    row["metadata_s"] = _stats(meta)
                rows[case] = row
                print(f"{case}: {row}", file=sys.stderr, flush=True)
            finally:
                c.stop()
                for n in c.nodes.values():
                    n.kill()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| case | next ack after the kill, median / max (s) | metadata (CreateTopics) median / max (s) | producer errors |")
    print("|---|---|---|---|")
    for case, row in rows.items():
        p = row["produce_s"]
        m = row.get("metadata_s")
        ms = f"{m['median']:.2f} / {m['max']:.2f}" if m else "-"  # type: ignore[index]
        print(f"| {case} | {p['median']:.2f} / {p['max']:.2f} ({p['runs']} kills) | {ms} | {row['producer_errors']} |")  # type: ignore[index]


if __name__ == "__main__":
    main()
