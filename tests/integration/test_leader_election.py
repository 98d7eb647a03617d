"""Preferred leaders on real processes: ElectLeaders, `kavka leader-election` and the automatic rebalance.

Three combined nodes, an RF=3 topic of six partitions (each broker the preferred replica of two),
an idempotent acks=all producer running throughout. A broker restarted with a controlled shutdown
loses its leaderships; they come back by `kavka leader-election --election-type preferred
--all-topic-partitions` (the real CLI, sent to a node that is not the active controller, which
forwards it), by confluent-kafka's `AdminClient.elect_leaders` and by kafka-python's
`KafkaAdminClient.elect_leaders` -- or, with a short `leader.imbalance.check.interval.seconds`, by
the controller itself. Leaders are read with confluent-kafka's metadata; afterwards every
acknowledged record is read back at its offset. An explicit UNCLEAN election elects a live
out-of-sync replica of a partition whose only ISR member is dead although
`unclean.leader.election.enable` is false, as Kafka allows, and reports the loss.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from bench.failover import producer_epochs, resent_after_an_epoch_bump

from tests.broker_harness import KAVKA, Cluster
from tests.integration.helpers import ck_read_to_end, unique
from tests.integration.test_replication import (
    OVERRIDES,
    SESSION_MS,
    _create,
    _live,
    _parts,
    _produce_acked,
    _Producer,
    _replica_batches,
    _running,
)
from tests.wait import wait_until

PARTITIONS = 6


@pytest.fixture
def manual_cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    yield from _running(Cluster(tmp_path, 3, overrides={**OVERRIDES, "auto.leader.rebalance.enable": "false",
                                                        "metrics.prometheus.port": "0"}))


@pytest.fixture
def auto_cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    yield from _running(Cluster(tmp_path, 3, overrides={**OVERRIDES, "leader.imbalance.check.interval.seconds": "2"}))


def _leaders(c: Cluster, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, preferred replica), from confluent-kafka's metadata."""
    return {p: (m.leader, m.replicas[0]) for p, m in _parts(c, topic).items()}


def _preferred_lead(c: Cluster, topic: str) -> bool:
    return all(leader == preferred for leader, preferred in _leaders(c, topic).values())


def _restart(c: Cluster, topic: str, broker: int) -> list[int]:
    """Stop `broker` cleanly (leadership moves away), start it, wait until it is back in every ISR;
    the partitions it is preferred for and no longer leads."""
    assert c.nodes[broker].stop() == 0
    wait_until(lambda: all(m.leader != broker for m in _parts(c, topic).values()), timeout=20,
               message=f"leadership moved off broker {broker}")
    c.nodes[broker].start()
    wait_until(lambda: all(len(m.isrs) == 3 for m in _parts(c, topic).values()), timeout=60,
               message=f"broker {broker} back in every ISR")
    moved = sorted(p for p, (leader, preferred) in _leaders(c, topic).items() if preferred == broker)
    assert moved and all(_leaders(c, topic)[p][0] != broker for p in moved)
    return moved


def _controller_id(c: Cluster) -> int:
    from kavka.client.admin import AdminClient

    admin = AdminClient(c.bootstrap)
    try:
        return admin.describe_quorum().leader_id
    finally:
        admin.close()


def _imbalance_gauge(c: Cluster) -> float:
    """PreferredReplicaImbalanceCount from the active controller's Prometheus endpoint."""
    from tests.integration.helpers import scrape

    m = re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", "".join(c.nodes[_controller_id(c)].output))
    assert m is not None
    return scrape(int(m.group(1)))[("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", ())]


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAVKA, "leader-election", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120)


def _check_every_ack(c: Cluster, topic: str, prod: _Producer) -> None:
    """Every acknowledged record is in the log at its offset, once per producer epoch: a second
    copy passes only in a later epoch, librdkafka's re-send after it bumped its epoch
    (bench.failover.resent_after_an_epoch_bump); within one epoch the leader must deduplicate."""
    assert prod.failed == [], prod.failed[:5]
    assert prod.acked_count() == prod.sent
    for p in range(PARTITIONS):
        recs = ck_read_to_end(c.bootstrap, topic, [p])
        at = {m.offset: m.value for m in recs}
        copies: dict[bytes, list[int]] = collections.defaultdict(list)
        for m in recs:
            copies[m.value].append(m.offset)
        if any(len(o) > 1 for o in copies.values()):
            _, dups = resent_after_an_epoch_bump(copies, producer_epochs(c, topic, p))
            assert not dups, f"{dups[:5]} duplicated on {p} within a producer epoch, at {[copies[v] for v in dups[:5]]}"
        for value, (part, offset) in prod.acked.items():
            if part == p:
                assert copies[value], f"{value!r} acknowledged on {p}, not found"
                # librdkafka acknowledges a batch implicitly, without its offset, when the broker
                # acknowledged a later sequence of the same idempotent producer (a retry across a
                # leader change): then only "exactly once" can be checked.
                if offset is not None:
                    assert at.get(offset) == value, f"{value!r} acknowledged at {p}/{offset}, found {at.get(offset)!r}"


def test_preferred_election_by_the_cli_and_by_two_admin_clients(manual_cluster: Cluster) -> None:
    c = manual_cluster
    topic = unique("pref")
    _create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    assert _preferred_lead(c, topic)
    prod = _Producer(c.bootstrap, topic, PARTITIONS).start()
    try:
        wait_until(lambda: prod.acked_count() > 100, timeout=30, message="the producer under way")
        brokers = sorted(c.brokers)

        # 1. kavka leader-election, through a node that forwards it to the active controller.
        moved = _restart(c, topic, brokers[0])
        assert _imbalance_gauge(c) >= len(moved)  # __consumer_offsets may add its own
        ctl = _controller_id(c)
        via = c.nodes[next(i for i in _live(c) if i != ctl)].bootstrap
        out = _cli(via, "--election-type", "preferred", "--all-topic-partitions", "--json")
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["election_type"] == "PREFERRED" and report["failed"] == []
        assert sorted(e["partition"] for e in report["succeeded"] if e["topic"] == topic) == moved
        assert _preferred_lead(c, topic)  # the forwarding node answered once its metadata showed it
        wait_until(lambda: _imbalance_gauge(c) == 0, timeout=10, message="PreferredReplicaImbalanceCount back to 0")
        out = _cli(via, "--election-type", "preferred", "--topic", topic, "--partition", str(moved[0]))
        assert out.returncode == 0, out.stderr
        assert f"Valid replica already elected for partitions {topic}-{moved[0]}" in out.stdout
        out = _cli(via, "--election-type", "preferred", "--topic", "no-such-topic", "--partition", "0", "--json")
        assert out.returncode == 1 and "1 replica(s) could not be elected" in out.stderr
        assert json.loads(out.stdout)["failed"][0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"

        # 2. confluent-kafka's AdminClient.elect_leaders (all partitions).
        from confluent_kafka import ElectionType
        from confluent_kafka.admin import AdminClient

        moved = _restart(c, topic, brokers[1])
        ck = AdminClient({"bootstrap.servers": c.bootstrap})  # kept referenced: the future needs its handle
        result = ck.elect_leaders(ElectionType.PREFERRED, None).result(60)
        elected = sorted(tp.partition for tp, err in result.items() if tp.topic == topic and err is None)
        assert elected == moved, result
        wait_until(lambda: _preferred_lead(c, topic), timeout=10, message="preferred leaders after confluent-kafka's election")

        # 3. kafka-python's KafkaAdminClient.elect_leaders (the named partitions).
        from kafka.admin import KafkaAdminClient

        moved = _restart(c, topic, brokers[2])
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            # kafka-python 3 names it elect_leaders; 2.x called it perform_leader_election.
            elect = getattr(admin, "elect_leaders", None) or admin.perform_leader_election
            resp = elect(0, {topic: list(range(PARTITIONS))}, timeout_ms=60000)
        finally:
            admin.close()
        codes = {p.partition_id: p.error_code for t in resp.replica_election_results for p in t.partition_result}
        assert sorted(p for p, code in codes.items() if code == 0) == moved
        assert all(code == 84 for p, code in codes.items() if p not in moved)  # ELECTION_NOT_NEEDED
        wait_until(lambda: _preferred_lead(c, topic), timeout=10, message="preferred leaders after kafka-python's election")
        before = prod.acked_count()
        wait_until(lambda: prod.acked_count() > before + 50, timeout=30, message="acks flowing after the elections")
    finally:
        prod.stop()
    _check_every_ack(c, topic, prod)


def test_the_controller_rebalances_by_itself(auto_cluster: Cluster) -> None:
    c = auto_cluster
    topic = unique("auto")
    _create(c, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    prod = _Producer(c.bootstrap, topic, PARTITIONS).start()
    try:
        wait_until(lambda: prod.acked_count() > 100, timeout=30, message="the producer under way")
        victim = sorted(c.brokers)[1]
        assert c.nodes[victim].stop() == 0
        wait_until(lambda: all(m.leader != victim for m in _parts(c, topic).values()), timeout=20,
                   message="leadership moved off the stopped broker")
        c.nodes[victim].start()
        # Back in the ISR, then within about one check interval (2 s) the controller elects it again.
        wait_until(lambda: _preferred_lead(c, topic), timeout=60, message="preferred leaders restored by the controller")
        # The controller logs once the election is committed, which can be after the brokers (and so
        # the metadata above) saw it; and its output is read by a pump thread.
        wait_until(
            lambda: any("above leader.imbalance.per.broker.percentage=10: elected the preferred leader of" in line
                        for n in c.nodes.values() for line in list(n.output)),
            timeout=15, message="the controller's rebalance logged",
        )
        before = prod.acked_count()
        wait_until(lambda: prod.acked_count() > before + 50, timeout=30, message="acks flowing after the rebalance")
    finally:
        prod.stop()
    _check_every_ack(c, topic, prod)


@pytest.fixture
def split_cluster(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    """One controller-only voter and three brokers: two brokers may die and the quorum stays."""
    yield from _running(Cluster(tmp_path, 4, overrides={**OVERRIDES, "auto.leader.rebalance.enable": "false"}, controllers=1))


def test_explicit_unclean_election_with_unclean_election_off(split_cluster: Cluster) -> None:
    c = split_cluster
    topic = unique("unclean")
    _create(c, topic, 1, 2, **{"unclean.leader.election.enable": "false"})
    reg = _parts(c, topic)[0]
    leader, follower = reg.leader, next(r for r in reg.replicas if r != reg.leader)
    _produce_acked(c.bootstrap, topic, [b"both-%d" % i for i in range(20)])
    wait_until(lambda: _replica_batches(c, topic, 0, follower) == _replica_batches(c, topic, 0, leader),
               timeout=10, message="the follower caught up")
    out = _cli(c.bootstrap, "--election-type", "unclean", "--topic", topic, "--partition", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["not_needed"] == [{"topic": topic, "partition": 0}]  # it has a leader
    c.nodes[follower].kill()
    wait_until(lambda: list(_parts(c, topic)[0].isrs) == [leader], timeout=SESSION_MS / 1000 + 10,
               message="the ISR shrunk to the leader")
    _produce_acked(c.bootstrap, topic, [b"leader-only-%d" % i for i in range(10)])
    c.nodes[leader].kill()
    c.nodes[follower].start()
    wait_until(lambda: _parts(c, topic, follower)[0].leader == -1, timeout=SESSION_MS / 1000 + 10,
               message="offline: the only ISR member is dead and unclean election is off")
    out = _cli(c.nodes[follower].bootstrap, "--election-type", "unclean", "--topic", topic, "--partition", "0")
    assert out.returncode == 0, out.stderr
    assert f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0" in out.stdout
    assert _parts(c, topic, follower)[0].leader == follower
    values = [m.value for m in ck_read_to_end(c.nodes[follower].bootstrap, topic, [0])]
    assert values == [b"both-%d" % i for i in range(20)]  # lost: exactly what the follower lacked
    logs = "".join("".join(n.output) for n in c.nodes.values() if n.alive())
    assert "unclean leader election for partition 0" in logs
    c.nodes[leader].start()
