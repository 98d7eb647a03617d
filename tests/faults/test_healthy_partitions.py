"""A partition with no replica on a faulted node keeps serving; what holds it up is a shared request.

Issue 29 asked why, in a five-node run across network namespaces, partitions with no replica on
the isolated node got no acknowledgement for 5-8 s from an idempotent confluent-kafka producer
writing to every partition: the broker (a leader waiting on something cluster-wide) or the client
(an idempotent producer draining every partition for an epoch bump)?

Neither, as this test shows. Node 5 is cut from the other nodes (the clients still reach every
node). Partition 0 has a follower on node 5: its leader, node 1, cannot count an acks=all write
until node 5 leaves the ISR (fenced after `broker.session.timeout.ms`, or out of sync after
`replica.lag.time.max.ms`, here both 6 s). Partition 1 has all its replicas healthy and the same
leader, node 1. A producer of its own for each partition sees partition 1 (and 2, led elsewhere)
keep its acknowledgements coming throughout, while partition 0 stalls. One producer for all the
partitions stalls partition 1 as long as partition 0: librdkafka puts every partition a broker
leads into one ProduceRequest, and a Produce response answers the whole request, so the healthy
partition's records wait for the stalled partition's in the same request (Kafka's broker does the
same: its DelayedProduce completes when every partition of the request is done). docs/cluster.md
("Which partitions a fault stalls") has the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kavka.testing.netns import netns_unavailable_reason
from tests.faults.netns_run import AckGapsRun

_REASON = netns_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces here: {_REASON}")

# Partition 0: a follower on node 5 (the one cut off), led by node 1. Partition 1: healthy, led by
# node 1 too. Partition 2: healthy, led by node 2. Partition 3: led by node 5.
ASSIGNMENT = "1:5:2,1:2:3,2:3:4,5:3:4"
# One producer per partition, then one for every partition (group 4).
GROUPS = "0;1;2;3;0,1,2,3"
FAULT_S = 8.0
HEALTHY_GAP_S = 2.0  # a healthy partition's longest wait for an ack; the faulted one waits ~6 s


def _longest_gap(times: list[float], start: float, end: float) -> float:
    inside = sorted(t for t in times if start <= t <= end)
    edges = [start, *inside, end]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def test_partitions_without_a_faulted_replica_keep_serving(tmp_path: Path) -> None:
    with AckGapsRun(tmp_path, 5, voters=3, overrides={
            "broker.session.timeout.ms": "6000", "replica.lag.time.max.ms": "6000"}) as run:
        run.tool("create", "t", ASSIGNMENT)
        run.produce("t", GROUPS, FAULT_S + 12, started_bytes=20_000)  # every producer acknowledging
        cut, healed = run.cut([5], [1, 2, 3, 4], FAULT_S)
        times: dict[tuple[int, int], list[float]] = {}
        for e in run.acknowledged(timeout=90):
            times.setdefault((e["group"], e["p"]), []).append(e["t"])
        gap = {k: _longest_gap(v, cut, healed + 2) for k, v in times.items()}
        print({f"group {g} p{p}": round(s, 2) for (g, p), s in sorted(gap.items())})
        # Its own producer: the partition with a follower on the cut node stalls (the fault bites) ...
        assert gap[(0, 0)] >= 3.0, gap
        # ... and the partitions with every replica healthy keep serving, led by the same node or not.
        assert gap[(1, 1)] < HEALTHY_GAP_S, gap
        assert gap[(2, 2)] < HEALTHY_GAP_S, gap
        # One producer for every partition: partition 1 shares node 1's requests with partition 0.
        assert gap[(4, 1)] >= 3.0, gap
        assert gap[(4, 2)] < HEALTHY_GAP_S, gap
