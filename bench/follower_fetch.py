"""`python -m bench.follower_fetch`: what reading from a follower (KIP-392) costs a consumer in latency.

Three kavka brokers in racks a, b and c with Kafka's RackAwareReplicaSelector, one RF=3 partition.
An acks=all confluent-kafka producer sends `--rate` records/s for `--seconds`; two consumers read
them at the same time, one without `client.rack` (served by the leader) and one with the rack of a
follower (served by that follower). End-to-end latency is the consumer's receive time minus the
record's create timestamp (same machine, same clock). A follower makes records visible when it
learns the leader's high watermark, on its next fetch from the leader, so it should trail the leader
by about one replica fetch round.

Then `--kills` times: kill -9 of the follower the rack consumer reads from, while the producer keeps
going; the figure is the time from the kill to that consumer's first record produced after the kill
(it must go back to the leader), with the dead broker restarted between runs.

Which broker served the bytes is checked from each broker's BytesOutPerSec counter, so a run where
the rack consumer was not served by its follower is reported as such instead of being counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402
from tests.integration.test_follower_fetching import RACKS, _bytes_out, _cluster  # noqa: E402
from tests.wait import wait_until  # noqa: E402


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


class _Reader(threading.Thread):
    """A consumer of partition 0 from its end, recording (receive time, create timestamp ms, value)."""

    def __init__(self, bootstrap: str, topic: str, rack: str | None) -> None:
        super().__init__(daemon=True)
        conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{rack}", "enable.auto.commit": False,
                "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000}
        if rack:
            conf["client.rack"] = rack
        self.c = Consumer(conf)
        self.c.assign([TopicPartition(topic, 0, OFFSET_END)])
        self.got: list[tuple[float, int, bytes]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            m = self.c.poll(0.05)
            if m is not None and m.error() is None:
                self.got.append((time.time(), m.timestamp()[1], m.value()))
        self.c.close()


def _produce(bootstrap: str, topic: str, rate: int, stop: threading.Event, sent: list[tuple[float, bytes]],
             acked: list[tuple[float, int]] | None = None) -> None:
    """Send `rate` records/s until `stop`; `acked` gets (ack time, create timestamp ms) per acknowledged record."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 60000,
                  "topic.metadata.refresh.interval.ms": 1000})

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is None and acked is not None:
            acked.append((time.time(), msg.timestamp()[1]))

    i = 0
    t0 = time.monotonic()
    while not stop.is_set():
        value = b"r%08d" % i
        p.produce(topic, value, partition=0, on_delivery=on_delivery)
        sent.append((time.time(), value))
        i += 1
        p.poll(0)
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
    p.flush(60)


def _create(c: Cluster, topic: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)

    def ready():  # noqa: ANN202
        p = admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0]
        return p if p.leader >= 0 and len(p.isrs) == 3 else None

    p = wait_until(ready, 30, message="leader and full ISR")
    return p.leader, [r for r in p.replicas if r != p.leader]


def latency(c: Cluster, rate: int, seconds: float) -> dict[str, object]:
    topic = f"lat-{int(time.time())}"
    leader, followers = _create(c, topic)
    near = followers[0]
    readers = {"leader": _Reader(c.bootstrap, topic, None), "follower": _Reader(c.bootstrap, topic, RACKS[near])}
    for r in readers.values():
        r.start()
    time.sleep(2)  # both consumers assigned and redirected before the first record
    stop, sent = threading.Event(), []
    prod = threading.Thread(target=_produce, args=(c.bootstrap, topic, rate, stop, sent), daemon=True)
    prod.start()
    time.sleep(seconds)
    stop.set()
    prod.join(90)
    time.sleep(2)
    for r in readers.values():
        r.stop.set()
        r.join(10)
    served = _bytes_out(c, topic)
    out: dict[str, object] = {"records": len(sent), "bytes_out": {str(k): v for k, v in served.items()},
                              "leader": leader, "follower": near}
    for name, r in readers.items():
        lat = [(t - ts / 1000) * 1000 for t, ts, _ in r.got]
        out[name] = {"received": len(r.got), "p50_ms": round(_pct(lat, 0.5), 1), "p99_ms": round(_pct(lat, 0.99), 1),
                     "max_ms": round(max(lat, default=float("nan")), 1)}
    return out


def kill_gap(c: Cluster, rate: int, runs: int) -> tuple[list[float], list[float]]:
    """Per run: (kill -> the rack consumer's first record created after it, kill -> the producer's
    first acknowledgement of such a record)."""
    gaps, acks = [], []
    for run in range(runs):
        topic = f"kill-{run}-{int(time.time())}"
        leader, followers = _create(c, topic)
        near = followers[0]
        reader = _Reader(c.bootstrap, topic, RACKS[near])
        reader.start()
        time.sleep(2)
        stop, sent, acked = threading.Event(), [], []
        prod = threading.Thread(target=_produce, args=(c.bootstrap, topic, rate, stop, sent, acked), daemon=True)
        prod.start()
        time.sleep(3)
        before = _bytes_out(c, topic)
        if before.get(leader, 0) > 0 or before.get(near, 0) == 0:
            print(f"run {run}: the rack consumer was not served by its follower: {before}", file=sys.stderr)
        t_kill = time.time()
        c.nodes[near].kill()
        got = reader.got
        wait_until(lambda got=got, t_kill=t_kill: any(ts / 1000 > t_kill for _, ts, _ in got[-50:]), 120,
                   message="a record after the kill")
        gaps.append(min(t for t, ts, _ in got if ts / 1000 > t_kill) - t_kill)
        acks.append(min(t for t, ts in acked if ts / 1000 > t_kill) - t_kill)
        stop.set()
        prod.join(90)
        reader.stop.set()
        reader.join(10)
        c.nodes[near].start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        wait_until(lambda admin=admin, topic=topic: len(admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0].isrs) == 3,
                   60, message="the ISR whole again")
    return gaps, acks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        c = _cluster(Path(d)).start()
        try:
            res: dict[str, object] = {"latency": latency(c, args.rate, args.seconds)}
            gaps, acks = kill_gap(c, args.rate, args.kills)
            for key, xs in (("kill_to_consumer_s", gaps), ("kill_to_producer_ack_s", acks)):
                res[key] = {"median": round(statistics.median(xs), 2), "max": round(max(xs), 2),
                            "runs": [round(g, 2) for g in xs]} if xs else {}
        finally:
            c.stop()
    print(json.dumps(res, indent=2) if args.json else json.dumps(res))


if __name__ == "__main__":
    main()
