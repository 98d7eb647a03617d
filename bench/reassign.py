"""`python -m bench.reassign`: how fast a partition moves to another broker, with and without a throttle.

Three combined kavka nodes (real `kavka server start` processes, shipped defaults). One RF=1
partition of `--mb` MB of 1 KiB incompressible records is written on broker 1, then moved to broker
2 with AlterPartitionReassignments (kavka's AdminClient, so no CLI start-up is timed); the figure
is the time from the request to ListPartitionReassignments showing it no longer moving (polled
every 20 ms) -- the new replica caught up, the leadership moved, the old replica removed. Then the
same partition moves back under a throttle (`--throttle` B/s set as `reassign-partitions --throttle`
sets it: both broker rates and both topic replica lists). With the default quota windows (11 x 1 s)
the first 10 s worth of the rate passes unthrottled, as in Kafka, so the throttled move takes at
least (size - 10 x rate) / rate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402
from tests.wait import wait_until  # noqa: E402

from kavka.client.admin import AdminClient, NewTopic  # noqa: E402

RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def _fill(bootstrap: str, topic: str, mb: int) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "none", "linger.ms": 20})
    payload = os.urandom(1024)
    n = mb * 1024
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload[:-4] + i.to_bytes(4, "big"), partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    return n * 1024


def _move(a: AdminClient, topic: str, target: list[int]) -> float:
    started = time.monotonic()
    res = a.alter_partition_reassignments({(topic, 0): target})
    assert res[(topic, 0)][0] == 0, res
    wait_until(lambda: (topic, 0) not in a.list_partition_reassignments([(topic, 0)]), timeout=600, interval=0.02,
               message="the move to finish")
    return time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--throttle", type=int, default=2_000_000, help="B/s for the throttled move")
    ap.add_argument("--smoke", action="store_true", help="4 MB, 2 MB/s: a seconds-long check")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.mb, args.throttle = 4, 2_000_000
    with tempfile.TemporaryDirectory() as root:
        c = Cluster(Path(root), 3).start()
        try:
            with AdminClient(c.bootstrap) as a:
                wait_until(lambda: len(a.describe_cluster().brokers) == 3, timeout=60, message="three brokers")
                topic = "bench-move"
                a.create_topics([NewTopic(topic, assignments={0: [1]})])
                wait_until(lambda: a.describe_topics([topic])[0].partitions[0].leader == 1, timeout=30, message="topic")
                size = _fill(c.bootstrap, topic, args.mb)
                free = _move(a, topic, [2])
                for b in (1, 2):
                    a.incremental_alter_configs("broker", str(b), set=dict.fromkeys(RATES, str(args.throttle)))
                a.incremental_alter_configs("topic", topic, set={
                    "leader.replication.throttled.replicas": "0:2", "follower.replication.throttled.replicas": "0:1"})
                throttled = _move(a, topic, [1])
        finally:
            c.stop()
    out = {
        "bytes": size,
        "unthrottled_s": round(free, 2),
        "unthrottled_mb_per_s": round(size / free / 1e6, 1),
        "throttle_b_per_s": args.throttle,
        "throttled_s": round(throttled, 2),
        "throttled_mb_per_s": round(size / throttled / 1e6, 2),
        # Kafka's windowed rate lets (replication.quota.window.num - 1) windows' worth through first.
        "implied_s": round(max(0, size - 10 * args.throttle) / args.throttle, 2),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    main()
