"""Cost of preferred-leader elections on the controller's event loop.

``python -m bench.leader_balance [TOPICS] [PARTITIONS_PER_TOPIC] [RUNS]`` builds a MetadataImage of
TOPICS topics (default 1000) x PARTITIONS_PER_TOPIC partitions (default 10), RF=3 on 3 brokers,
preferred replicas spread round-robin, and times, RUNS times (default 5), what the active
controller does on its event loop:

- the periodic leader imbalance check on a balanced cluster (the common case: nothing to elect);
- the same check after broker 0 came back from a restart (it is the preferred replica of a third
  of the partitions and leads none): the records of the rebalance pass (capped at 1000, Kafka's
  maxElectionsPerImbalance) and their replay into the next image;
- ElectLeaders with null partitions (`kavka leader-election --all-topic-partitions`), uncapped,
  on the same imbalanced image.

Prints the median and max of each. Not a test: numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from kavka.common import ElectionType
from kavka.config import build_config
from kavka.controller.replication_control import ReplicationControlManager
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage


def _apply(image: MetadataImage, records: list[Any]) -> MetadataImage:
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(r, image.offset + 1 + i)
    return d.apply()


def build_images(topics: int, partitions: int) -> tuple[MetadataImage, MetadataImage]:
    """(balanced, broker 0's preferred partitions led by their second replica)."""
    recs: list[Any] = [mr.RegisterBrokerRecord(b, f"inc{b}", (("PLAINTEXT", "h", 9092 + b),), fenced=False) for b in range(3)]
    moved: list[Any] = []
    n = 0
    for t in range(topics):
        recs.append(mr.TopicRecord(f"topic-{t}", f"id-{t}"))
        for p in range(partitions):
            reps = tuple((n + i) % 3 for i in range(3))
            n += 1
            recs.append(mr.PartitionRecord(f"id-{t}", p, reps, reps, reps[0]))
            if reps[0] == 0:
                moved.append(mr.PartitionChangeRecord(f"id-{t}", p, leader=reps[1]))
    balanced = _apply(MetadataImage(), recs)
    return balanced, _apply(balanced, moved)


def _time(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    out, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t0)
    return out, result


def main(argv: list[str]) -> None:
    topics = int(argv[0]) if argv else 1000
    partitions = int(argv[1]) if len(argv) > 1 else 10
    runs = int(argv[2]) if len(argv) > 2 else 5
    replication = ReplicationControlManager(build_config({"node.id": "1"}), new_uuid=lambda: "x")
    balanced, imbalanced = build_images(topics, partitions)

    def check_pass() -> int:
        recs, _ = replication.balance_leaders(imbalanced, percentage=10)
        _apply(imbalanced, recs)
        return len(recs)

    def elect_all() -> int:
        recs, _ = replication.elect_leaders(imbalanced, ElectionType.PREFERRED, None)
        _apply(imbalanced, recs)
        return len(recs)

    rows = [
        ("imbalance check, balanced (nothing to elect)", *_time(lambda: replication.balance_leaders(balanced, percentage=10), runs)),
        ("imbalance check + one rebalance pass (records + replay)", *_time(check_pass, runs)),
        ("ElectLeaders, all partitions (records + replay)", *_time(elect_all, runs)),
    ]
    print(f"{topics * partitions:,} partitions on 3 brokers, {runs} runs")
    for name, times, result in rows:
        elected = result if isinstance(result, int) else len(result[0])
        print(f"{name}: median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms, {elected:,} elections")


if __name__ == "__main__":
    main(sys.argv[1:])
