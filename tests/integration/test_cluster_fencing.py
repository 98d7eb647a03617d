"""Broker sessions in a real 3-node cluster: heartbeats, fencing, unfencing, controlled shutdown.

A broker killed -9 is fenced by the active controller as soon as its heartbeat connection has
been closed for a second (the kernel closes a dead process's sockets); a broker that is frozen
(SIGSTOP: its connection stays open, its heartbeats stop) is fenced when
broker.session.timeout.ms runs out, and unfenced again when it thaws. A fenced broker leaves Metadata, the partitions it alone held go offline
(leader -1, LEADER_NOT_AVAILABLE) and come back, led by it again, when it restarts. A broker
stopped gracefully does Kafka's controlled shutdown: the controller moves its leaderships and
fences it before it exits, so clients never see a dead broker in Metadata.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from kavka.client.admin import AdminClient
from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, unique
from tests.wait import wait_until

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

    # kavka's own admin client, bootstrapped with the victim first, connected to it before the kill.
    kadmin = AdminClient(",".join(n.bootstrap for i, n in sorted(cluster.nodes.items(), key=lambda x: x[0] != victim_id)))
    assert [d.name for d in kadmin.describe_topics([topic])] == [topic]

    cluster.nodes[victim_id].kill()

    def fenced() -> bool:
        md, parts = _metadata(survivor.bootstrap, topic)
        return victim_id not in md.brokers and all(parts[p].leader == -1 for p in victims_parts)

    wait_until(fenced, timeout=SESSION_MS / 1000 + 2, message="the dead broker fenced and gone from Metadata")
    _, parts = _metadata(survivor.bootstrap, topic)
    for p in victims_parts:
        assert parts[p].error is not None and parts[p].error.name() == "LEADER_NOT_AVAILABLE"
    # Every other node agrees, and DescribeCluster v2 (KIP-1073) still lists it, marked fenced.
    for i, node in cluster.nodes.items():
        if i != victim_id:
            wait_until(lambda n=node: victim_id not in _metadata(n.bootstrap, topic)[0].brokers, timeout=5)
    assert _describe_cluster(survivor.bootstrap) == {1: False, 2: False, 3: False} | {victim_id: True}
    assert any(f"fenced broker {victim_id}: its heartbeat connection closed" in line for line in survivor.output)
    # Its bootstrap connection died with the victim: the next call goes to a live bootstrap server.
    try:
        assert len(kadmin.describe_topics([topic])[0].partitions) == 6
    finally:
        kadmin.close()

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


def test_a_frozen_broker_is_fenced_when_its_session_expires_and_unfenced_when_it_thaws(cluster: Cluster) -> None:
    topic = unique("frozen")
    ck_create_topic(ck_admin(cluster.bootstrap), topic, 6)
    leader = _quorum_leader(cluster.bootstrap)
    victim_id = next(i for i in sorted(cluster.nodes, reverse=True) if i != leader)
    survivor = cluster.nodes[leader]
    victim = cluster.nodes[victim_id]
    victim.proc.send_signal(signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        wait_until(lambda: victim_id not in _metadata(survivor.bootstrap, topic)[0].brokers,
                   timeout=SESSION_MS / 1000 + 5, message="the frozen broker fenced")
        elapsed = time.monotonic() - frozen
        # Its connection stayed open: only the session ran out (its last heartbeat came up to
        # one interval, 0.5 s, before the freeze).
        assert elapsed >= (SESSION_MS - 500) / 1000 - 0.2, f"fenced {elapsed:.1f}s after the freeze: before its session expired"
        assert any(f"fenced broker {victim_id}: no heartbeat" in line for line in survivor.output)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: _describe_cluster(survivor.bootstrap)[victim_id] is False, timeout=15,
               message="the thawed broker to ask for and get unfencing")
    assert victim.alive()


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
