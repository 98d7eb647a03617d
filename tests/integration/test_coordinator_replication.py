"""The group coordinator over a replicated `__consumer_offsets` (issue 12 item 7), on real processes.

One controller-only voter and three brokers; `__consumer_offsets` has one partition with three
replicas, so its leader is every group's coordinator. Two of Kafka's rules:

- A JoinGroup/SyncGroup answer that depends on a group record waits until the record is on every
  in-sync replica (the coordinator appends with acks=all): with both followers frozen (SIGSTOP) the
  answer arrives only after the leader has dropped them from the ISR, never while they are still
  counted in it.
- When the coordinator stops leading the partition (controlled shutdown moves leadership first),
  a JoinGroup parked in a rebalance is answered NOT_COORDINATOR (Kafka's onResignation), so the
  client looks up the new coordinator instead of waiting out its rebalance timeout.
"""

from __future__ import annotations

import datetime
import os
import signal
import threading
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import make, nested
from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin
from tests.raw_client import raw_call
from tests.wait import wait_until

OFFSETS = "__consumer_offsets"
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    c = Cluster(tmp_path, 4, overrides=OVERRIDES, controllers=1).start()
    try:
        yield c
    finally:
        for n in c.nodes.values():
            if n.alive():
                os.kill(n.proc.pid, signal.SIGCONT)
        c.stop()


def _join(node, group: str, member_id: str = "", rebalance_s: int = 30):  # noqa: ANN001, ANN202
    """JoinGroup v5 (with KIP-394's member-id round trip); the response."""
    req_cls = api.request_schema(11, 5)
    proto_cls = nested(req_cls, "JoinGroupRequestProtocol")
    while True:
        req = make(
            req_cls,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=rebalance_s),
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(make(proto_cls, name="range", metadata=b""),),
        )
        resp = raw_call(node, 11, 5, req)
        if resp.error_code != ErrorCode.member_id_required:
            return resp
        member_id = resp.member_id


def _sync(node, group: str, generation: int, member_id: str):  # noqa: ANN001, ANN202
    sync_cls = api.request_schema(14, 5)
    assignment_cls = nested(sync_cls, "SyncGroupRequestAssignment")
    req = make(
        sync_cls,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(make(assignment_cls, member_id=member_id, assignment=b""),),
    )
    return raw_call(node, 14, 5, req)


def _offsets_partition(c: Cluster, via=None):  # noqa: ANN001, ANN202
    """`__consumer_offsets`-0 as `via` (default: the first live broker) shows it in Metadata."""
    live = via or next(n for n in c.brokers.values() if n.alive())
    return ck_admin(live.bootstrap).list_topics(topic=OFFSETS, timeout=10).topics[OFFSETS].partitions[0]


def _coordinator(c: Cluster) -> int:
    """Create `__consumer_offsets` (a first join does) and wait for its leader and full ISR."""
    any_broker = next(iter(c.brokers.values()))
    _join(any_broker, "warm-up")  # NOT_COORDINATOR unless it leads: it still creates the topic

    seen: list[object] = []

    def ready() -> bool:
        try:
            p = _offsets_partition(c)
        except KeyError:
            return False
        seen[:] = [(p.leader, p.replicas, p.isrs)]
        return p.leader >= 0 and len(p.isrs) == 3

    try:
        wait_until(ready, timeout=30, message="__consumer_offsets led with its full ISR")
    except AssertionError:
        print(f"__consumer_offsets-0 (leader, replicas, isr): {seen}")
        for i, n in c.nodes.items():
            print(f"---- node {i}\n" + "".join(n.output[-40:]))
        raise
    return _offsets_partition(c).leader


def test_group_answers_wait_for_the_records_to_reach_every_in_sync_replica(cluster: Cluster) -> None:
    leader = _coordinator(cluster)
    coordinator = cluster.nodes[leader]
    followers = [i for i in cluster.brokers if i != leader]
    for i in followers:
        os.kill(cluster.nodes[i].proc.pid, signal.SIGSTOP)

    join = _join(coordinator, "frozen-followers")
    assert join.error_code == ErrorCode.none, join
    sync = _sync(coordinator, "frozen-followers", join.generation_id, join.member_id)
    # The group record was written when the generation completed; the answers came only once it
    # was committed, which with both followers frozen means the ISR had shrunk to the leader.
    isr = set(_offsets_partition(cluster, via=coordinator).isrs)
    assert sync.error_code == ErrorCode.none, sync
    assert isr == {leader}, f"answered while frozen followers {followers} were in the ISR {isr}"

    for i in followers:
        os.kill(cluster.nodes[i].proc.pid, signal.SIGCONT)
    wait_until(lambda: len(_offsets_partition(cluster).isrs) == 3, timeout=60,
               message="the thawed followers to catch up and rejoin the ISR")


def test_a_parked_join_is_answered_not_coordinator_when_the_coordinator_resigns(cluster: Cluster) -> None:
    leader = _coordinator(cluster)
    coordinator = cluster.nodes[leader]
    first = _join(coordinator, "moving")
    assert first.error_code == ErrorCode.none, first
    assert _sync(coordinator, "moving", first.generation_id, first.member_id).error_code == ErrorCode.none

    # A second member joins: the rebalance waits (up to 60 s) for the first member to rejoin,
    # which it never does; the second member's JoinGroup is parked meanwhile.
    answer: list = []
    t = threading.Thread(target=lambda: answer.append(_join(coordinator, "moving", rebalance_s=60)), daemon=True)
    t.start()

    def rebalancing() -> bool:
        req = make(api.request_schema(15, 5), groups=("moving",), include_authorized_operations=False)
        return raw_call(coordinator, 15, 5, req).groups[0].group_state == "PreparingRebalance"

    wait_until(rebalancing, timeout=20, message="the second join to park the group in a rebalance")
    assert not answer, answer

    coordinator.proc.send_signal(signal.SIGTERM)  # controlled shutdown: leadership moves first
    t.join(20)
    assert answer, "the parked JoinGroup was not answered"
    assert answer[0].error_code == ErrorCode.not_coordinator, answer[0]
    assert coordinator.stop() == 0
    wait_until(lambda: _offsets_partition(cluster).leader not in (-1, leader), timeout=30,
               message="a new coordinator")
