"""ElectLeaders and the automatic preferred-leader rebalance in the controller's pure core.

Error codes and the shape of the answer follow Kafka's ReplicationControlManager.electLeaders /
electLeader and PartitionChangeBuilder (Election.PREFERRED / UNCLEAN); the rebalance follows the
leader imbalance ratio of Kafka's controller (auto.leader.rebalance.enable,
leader.imbalance.per.broker.percentage).
"""

import asyncio

from kio.schema.errors import ErrorCode

from kavka.common import BrokerControlState, ElectionType
from kavka.controller import partition_change as pc
from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.replication.replica_state import PartitionRegistration
from kavka.testing import MemoryLog
from tests.unit.controller_fixtures import apply as _apply
from tests.unit.controller_fixtures import cluster as _cluster
from tests.unit.controller_fixtures import logic as _logic
from tests.unit.test_raft_snapshot import _controller, _run_with

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def _with_topic(logic, image, name, assignments):
    recs, res = logic.replication.create_topics(image, [NewTopic(name, assignments=assignments)], validate_only=False)
    assert res[0].result.ok, res[0].result
    return _apply(image, recs)


def _fence(logic, image, broker):
    return _apply(image, logic.cluster.broker_state_records(image, broker, BrokerControlState.FENCED))


def _unfence(logic, image, broker):
    return _apply(image, logic.cluster.broker_state_records(image, broker, BrokerControlState.UNFENCED))


def _set_isr(image, topic, partition, isr):
    t = image.topics_by_name[topic]
    return _apply(image, [mr.PartitionChangeRecord(t.topic_id, partition, isr=tuple(isr))])


def _part(image, topic, partition):
    return image.topics_by_name[topic].partitions[partition]


def _results(out):
    return {(t.topic, p.partition): (p.error, p.message) for t in out for p in t.partitions}


def _after_broker_1_returns():
    """t-0 [1,2,3] and t-1 [2,3,1]: broker 1 was fenced, came back and rejoined t-0's ISR."""
    logic, image = _logic(), _cluster(3)
    image = _with_topic(logic, image, "t", {0: [1, 2, 3], 1: [2, 3, 1]})
    image = _unfence(logic, _fence(logic, image, 1), 1)
    assert _part(image, "t", 0).leader == 2 and 1 not in _part(image, "t", 0).isr
    image = _set_isr(image, "t", 0, (2, 3, 1))
    return logic, image


# ------------------------------------------------------------------ partition_change


def test_pure_preferred_election_rules():
    reg = PartitionRegistration(partition_id=0, replicas=(1, 2, 3), isr=(1, 2, 3), leader=2, leader_epoch=4, partition_epoch=9)
    err, new = pc.elect_preferred(reg, live={1, 2, 3})
    assert err == ErrorCode.none and (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (1, (1, 2, 3), 5, 10)
    assert pc.elect_preferred(new, live={1, 2, 3}) == (ErrorCode.election_not_needed, new)
    # Preferred not in the ISR, or not live: the current leader stays.
    for isr, live in (((2, 3), {1, 2, 3}), ((1, 2, 3), {2, 3})):
        r = PartitionRegistration(0, (1, 2, 3), isr, 2, 4, 9)
        assert pc.elect_preferred(r, live=live) == (ErrorCode.preferred_leader_not_available, r)
    # No leader and the preferred replica unavailable: the next live ISR member (Kafka's builder).
    r = PartitionRegistration(0, (1, 2, 3), (2, 3), -1, 4, 9)
    err, new = pc.elect_preferred(r, live={1, 3})
    assert err == ErrorCode.none and new.leader == 3 and new.leader_epoch == 5
    r = PartitionRegistration(0, (1, 2, 3), (2,), -1, 4, 9)
    assert pc.elect_preferred(r, live={1, 3}) == (ErrorCode.preferred_leader_not_available, r)


def test_pure_unclean_election_rules():
    led = PartitionRegistration(0, (1, 2, 3), (1,), 1, 0, 0)
    assert pc.elect_unclean(led, live={1, 2, 3}) == (ErrorCode.election_not_needed, led)
    offline = PartitionRegistration(0, (1, 2, 3), (1,), -1, 3, 7)
    err, new = pc.elect_unclean(offline, live={3})
    assert err == ErrorCode.none and (new.leader, new.isr, new.leader_epoch) == (3, (3,), 4)
    # A live ISR member wins over an out-of-sync replica (a clean election).
    err, new = pc.elect_unclean(offline, live={1, 2})
    assert (new.leader, new.isr) == (1, (1,))
    assert pc.elect_unclean(offline, live=set()) == (ErrorCode.eligible_leaders_not_available, offline)


# ------------------------------------------------------------------ ElectLeaders


def test_preferred_election_moves_leadership_back_and_bumps_the_epoch():
    logic, image = _after_broker_1_returns()
    before = _part(image, "t", 0)
    recs, out = logic.replication.elect_leaders(image, PREFERRED, [("t", [0, 1])])
    assert _results(out) == {
        ("t", 0): (ErrorCode.none, None),
        ("t", 1): (ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
    }
    after = _part(_apply(image, recs), "t", 0)
    assert after.leader == 1 and after.isr == before.isr
    assert after.leader_epoch == before.leader_epoch + 1 and after.partition_epoch == before.partition_epoch + 1


def test_preferred_replica_outside_the_isr_or_fenced_is_not_available():
    logic, image = _logic(), _cluster(3)
    image = _with_topic(logic, image, "t", {0: [1, 2, 3]})
    image = _unfence(logic, _fence(logic, image, 1), 1)  # back, but not yet in the ISR
    recs, out = logic.replication.elect_leaders(image, PREFERRED, [("t", [0])])
    assert recs == [] and _results(out)[("t", 0)] == (
        ErrorCode.preferred_leader_not_available,
        "The preferred leader was not available.",
    )
    image = _fence(logic, _set_isr(image, "t", 0, (2, 3, 1)), 1)  # in the ISR but fenced: leaves it
    assert _results(logic.replication.elect_leaders(image, PREFERRED, [("t", [0])])[1])[("t", 0)][0] == (
        ErrorCode.preferred_leader_not_available
    )


def test_unknown_topics_and_partitions():
    logic, image = _after_broker_1_returns()
    recs, out = logic.replication.elect_leaders(image, PREFERRED, [("nope", [0]), ("t", [7])])
    assert recs == []
    assert _results(out) == {
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
        ("t", 7): (ErrorCode.unknown_topic_or_partition, "No such partition as t-7"),
    }


def test_all_partitions_leaves_out_those_not_needing_an_election():
    logic, image = _after_broker_1_returns()
    image = _with_topic(logic, image, "balanced", {0: [3, 1, 2]})
    recs, out = logic.replication.elect_leaders(image, PREFERRED, None)
    # Every topic is listed (sorted); only partitions that needed an election have a result.
    assert [(t.topic, [(p.partition, p.error) for p in t.partitions]) for t in out] == [
        ("balanced", []),
        ("t", [(0, ErrorCode.none)]),
    ]
    assert len(recs) == 1
    assert logic.replication.elect_leaders(_apply(image, recs), PREFERRED, None)[0] == []


def test_unclean_election_elects_a_live_out_of_sync_replica_whatever_the_config():
    logic, image = _logic(**{"unclean.leader.election.enable": "false", "eligible.leader.replicas.enable": "false"}), _cluster(3)
    image = _with_topic(logic, image, "u", {0: [1, 2, 3], 1: [2, 3, 1]})
    image = _set_isr(image, "u", 0, (1,))
    image = _fence(logic, image, 1)
    p = _part(image, "u", 0)
    assert p.leader == -1 and p.isr == (1,)  # offline: unclean election is off in the config
    recs, out = logic.replication.elect_leaders(image, UNCLEAN, [("u", [0, 1])])
    assert _results(out) == {
        ("u", 0): (ErrorCode.none, None),
        ("u", 1): (ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
    }
    p2 = _part(_apply(image, recs), "u", 0)
    assert p2.leader == 2 and p2.isr == (2,) and p2.leader_epoch == p.leader_epoch + 1


def test_unclean_election_with_no_live_replica():
    logic, image = _logic(), _cluster(2)
    image = _with_topic(logic, image, "u", {0: [1, 2]})
    image = _fence(logic, _fence(logic, image, 2), 1)
    recs, out = logic.replication.elect_leaders(image, UNCLEAN, [("u", [0])])
    assert recs == [] and _results(out)[("u", 0)] == (
        ErrorCode.eligible_leaders_not_available,
        "Eligible topic partition leaders are not available.",
    )


# ------------------------------------------------------------------ automatic rebalance


def _imbalanced(n_partitions=10, moved=2):
    """Broker 1 is the preferred replica of `n_partitions` partitions and leads all but `moved`."""
    logic, image = _logic(), _cluster(3)
    image = _with_topic(logic, image, "b", {p: [1, 2, 3] for p in range(n_partitions)})
    t = image.topics_by_name["b"]
    image = _apply(image, [mr.PartitionChangeRecord(t.topic_id, p, leader=2) for p in range(moved)])
    return logic, image


def test_imbalance_ratio_is_per_broker_and_strictly_above_the_percentage():
    logic, image = _imbalanced(10, 1)
    assert logic.replication.imbalanced_brokers(image, 10) == {}  # 10% is not above 10%
    assert logic.replication.balance_leaders(image, percentage=10) == ([], False)
    logic, image = _imbalanced(10, 2)
    assert logic.replication.imbalanced_brokers(image, 10) == {1: 0.2}
    recs, more = logic.replication.balance_leaders(image, percentage=10)
    assert not more and len(recs) == 2
    balanced = _apply(image, recs)
    assert all(p.leader == 1 for p in balanced.topics_by_name["b"].partitions.values())
    assert logic.replication.imbalanced_brokers(balanced, 10) == {}
    assert logic.replication.balance_leaders(image, percentage=20) == ([], False)


def test_rebalance_skips_preferred_replicas_not_in_the_isr_and_caps_a_pass():
    logic, image = _imbalanced(10, 4)
    image = _set_isr(image, "b", 0, (2, 3))
    recs, _ = logic.replication.balance_leaders(image, percentage=10)
    moved = {r.partition_id for r in recs}
    assert moved == {1, 2, 3}
    recs, more = logic.replication.balance_leaders(image, percentage=10, max_elections=2)
    assert len(recs) == 2 and more


def test_controlled_shutdown_then_return_then_rebalance():
    logic, image = _logic(), _cluster(3)
    image = _with_topic(logic, image, "c", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2]})
    image = _apply(image, logic.cluster.broker_state_records(image, 1, BrokerControlState.CONTROLLED_SHUTDOWN))
    assert all(p.leader != 1 for p in image.topics_by_name["c"].partitions.values())
    image = _unfence(logic, _fence(logic, image, 1), 1)
    assert logic.replication.balance_leaders(image, percentage=10)[0] == []  # not back in any ISR yet
    for p in (0, 3):
        image = _set_isr(image, "c", p, (*_part(image, "c", p).isr, 1))
    recs, _ = logic.replication.balance_leaders(image, percentage=10)
    image = _apply(image, recs)
    assert {p: r.leader for p, r in image.topics_by_name["c"].partitions.items()} == {0: 1, 1: 2, 2: 3, 3: 1}


async def _commit(qc, records):
    await qc._run(lambda image: (records, None))


async def _imbalanced_cluster(qc, assignments, leaders):
    await _commit(qc, [mr.RegisterBrokerRecord(i, f"inc{i}", (("P", "h", i),), fenced=False) for i in (1, 2, 3)])
    recs, _ = qc.replication.create_topics(qc.image, [NewTopic("b", assignments=assignments)], validate_only=False)
    await _commit(qc, recs)
    t = qc.image.topics_by_name["b"]
    await _commit(qc, [mr.PartitionChangeRecord(t.topic_id, p, leader=b) for p, b in leaders.items()])
    return t.topic_id


def test_quorum_controller_checks_on_its_interval_only_when_active():
    """The QuorumController's schedule, driven by an injected clock, over a one-voter quorum."""
    raft, qc = _controller(
        MemoryLog(), **{"leader.imbalance.check.interval.seconds": "5", "leader.imbalance.per.broker.percentage": "10"}
    )

    async def run():
        topic_id = await _imbalanced_cluster(qc, {p: [1, 2, 3] for p in range(4)}, {0: 2})
        assert await qc.maybe_balance_leaders(now_ms=0) == 0  # the first check is one interval away
        assert await qc.maybe_balance_leaders(now_ms=4_999) == 0
        assert qc.image.topics_by_name["b"].partitions[0].leader == 2
        epoch = qc.image.topics_by_name["b"].partitions[0].leader_epoch
        assert await qc.maybe_balance_leaders(now_ms=5_000) == 1
        p0 = qc.image.topics_by_name["b"].partitions[0]
        assert p0.leader == 1 and p0.leader_epoch == epoch + 1
        await _commit(qc, [mr.PartitionChangeRecord(topic_id, 1, leader=3)])
        assert await qc.maybe_balance_leaders(now_ms=9_999) == 0
        assert await qc.maybe_balance_leaders(now_ms=10_000) == 1
        assert qc.image.topics_by_name["b"].partitions[1].leader == 1

    asyncio.run(_run_with(raft, qc, run))


def test_auto_rebalance_off():
    raft, qc = _controller(
        MemoryLog(), **{"auto.leader.rebalance.enable": "false", "leader.imbalance.check.interval.seconds": "1"}
    )

    async def run():
        await _imbalanced_cluster(qc, {0: [1, 2, 3]}, {0: 2})
        for now in (0, 1_000, 100_000):
            assert await qc.maybe_balance_leaders(now_ms=now) == 0
        assert qc.image.topics_by_name["b"].partitions[0].leader == 2

    asyncio.run(_run_with(raft, qc, run))


def test_quorum_controller_elect_leaders_commits_before_answering():
    raft, qc = _controller(MemoryLog())

    async def run():
        await _imbalanced_cluster(qc, {0: [1, 2, 3], 1: [2, 3, 1]}, {0: 2})
        out = await qc.elect_leaders(PREFERRED, [("b", [0, 1])])
        assert _results(out) == {
            ("b", 0): (ErrorCode.none, None),
            ("b", 1): (ErrorCode.election_not_needed, "Leader election not needed for topic partition."),
        }
        assert qc.image.topics_by_name["b"].partitions[0].leader == 1

    asyncio.run(_run_with(raft, qc, run))
