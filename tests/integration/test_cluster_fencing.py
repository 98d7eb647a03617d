"""Broker sessions in a real 3-node cluster: heartbeats, fencing, unfencing, controlled shutdown.

A broker whose heartbeats stop (kill -9) is fenced by the active controller within
broker.session.timeout.ms (+2 s): it leaves Metadata, the partitions it alone held go offline
(leader -1, LEADER_NOT_AVAILABLE) and come back, led by it again, when it restarts. A broker
stopped gracefully does Kafka's controlled shutdown: the controller moves its leaderships and
fences it before it exits, so clients never see a dead broker in Metadata.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from kavka.client.admin import AdminClient
from tests.broker_harness import Cluster, wait_until
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, unique

SESSION_MS = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(
        tmp_path_factory.mktemp("fencing"),
        3,
        overrides={"broker.session.timeout.ms": str(SESSION_MS), "broker.heartbeat.interval.ms": "500"},
    ).start()
    yield c
    try:
        c.stop()
    except Exception:
        for i, n in c.nodes.items():
            print(f"---- node {i}\n" + "".join(n.output[-60:]))
        raise


def _metadata(bootstrap: str, topic: str):  # noqa: ANN202
    md = ck_admin(bootstrap).list_topics(topic=topic, timeout=10)
    return md, md.topics[topic].partitions


def _quorum_leader(bootstrap: str) -> int:
    admin = AdminClient(bootstrap)
    try:
        return admin.describe_quorum().leader_id
    finally:
        admin.close()


def _describe_cluster(bootstrap: str) -> dict[int, bool]:
    admin = AdminClient(bootstrap)
    try:
        return {b.node_id: b.fenced for b in admin.describe_cluster().brokers}
    finally:
        admin.close()


def test_a_broker_whose_heartbeats_stop_is_fenced_and_unfenced_after_restart(cluster: Cluster) -> None:
    topic = unique("fence")
    ck_create_topic(ck_admin(cluster.bootstrap), topic, 6)
    leader = _quorum_leader(cluster.bootstrap)
    victim_id = next(i for i in sorted(cluster.nodes) if i != leader)  # not the active controller
    survivor = cluster.nodes[leader]
    _, parts = _metadata(survivor.bootstrap, topic)
    victims_parts = sorted(p for p, pm in parts.items() if pm.leader == victim_id)
    assert victims_parts, "placement put no partition on the victim"

    cluster.nodes[victim_id].kill()
    killed = time.monotonic()

    def fenced() -> bool:
        md, parts = _metadata(survivor.bootstrap, topic)
        return victim_id not in md.brokers and all(parts[p].leader == -1 for p in victims_parts)

    wait_until(fenced, timeout=SESSION_MS / 1000 + 2, message="the dead broker fenced and gone from Metadata")
    elapsed = time.monotonic() - killed
    # Its last heartbeat came up to one interval (0.5 s) before the kill.
    assert elapsed >= (SESSION_MS - 500) / 1000 - 0.2, f"fenced {elapsed:.1f}s after the kill: before its session expired"
    _, parts = _metadata(survivor.bootstrap, topic)
    for p in victims_parts:
        assert parts[p].error is not None and parts[p].error.name() == "LEADER_NOT_AVAILABLE"
    # Every other node agrees, and DescribeCluster v2 (KIP-1073) still lists it, marked fenced.
    for i, node in cluster.nodes.items():
        if i != victim_id:
            wait_until(lambda n=node: victim_id not in _metadata(n.bootstrap, topic)[0].brokers, timeout=5)
    assert _describe_cluster(survivor.bootstrap) == {1: False, 2: False, 3: False} | {victim_id: True}
    assert any(f"fenced broker {victim_id}: no heartbeat" in line for line in survivor.output)

    cluster.nodes[victim_id].start()  # waits until it is unfenced (KAVKA_READY)

    def back() -> bool:
        md, parts = _metadata(survivor.bootstrap, topic)
        return victim_id in md.brokers and all(parts[p].leader == victim_id for p in victims_parts)

    wait_until(back, timeout=10, message="the restarted broker unfenced and leading its partitions")
    assert _describe_cluster(survivor.bootstrap)[victim_id] is False
    p = ck_producer(cluster.bootstrap)
    delivered: list[object] = []
    for part in victims_parts:
        p.produce(topic, b"after-restart", partition=part, on_delivery=lambda err, msg: delivered.append(err))
    p.flush(20)
    assert delivered == [None] * len(victims_parts)


def test_a_graceful_stop_is_a_controlled_shutdown(cluster: Cluster) -> None:
    topic = unique("ctlshut")
    ck_create_topic(ck_admin(cluster.bootstrap), topic, 6)
    leader = _quorum_leader(cluster.bootstrap)
    victim_id = next(i for i in sorted(cluster.nodes, reverse=True) if i != leader)
    survivor = cluster.nodes[leader]
    victim = cluster.nodes[victim_id]
    _, parts = _metadata(survivor.bootstrap, topic)
    victims_parts = sorted(p for p, pm in parts.items() if pm.leader == victim_id)
    assert victims_parts

    seen = len(survivor.output)
    assert victim.stop() == 0
    assert any("controlled shutdown completed" in line for line in victim.output), victim.log_text()
    # The controller fenced it before it exited, on its request (not by a session timeout).
    new = survivor.output[seen:]
    assert any(f"broker {victim_id} (epoch" in line and "shutdown now" in line for line in new), new
    assert not any(f"fenced broker {victim_id}: no heartbeat" in line for line in new)
    md, parts = _metadata(survivor.bootstrap, topic)
    assert victim_id not in md.brokers
    assert all(parts[p].leader == -1 for p in victims_parts)

    # `kavka cluster status` shows it fenced.
    out = subprocess.run(
        [sys.executable, "-m", "kavka", "cluster", "status", "--bootstrap-server", survivor.bootstrap, "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    states = {b["id"]: b["fenced"] for b in json.loads(out)["brokers"]}
    assert states[victim_id] is True and [s for i, s in states.items() if i != victim_id] == [False, False]

    victim.start()
    wait_until(lambda: victim_id in _metadata(survivor.bootstrap, topic)[0].brokers, timeout=10)
