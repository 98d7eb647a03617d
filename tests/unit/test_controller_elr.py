"""Eligible leader replicas (KIP-966) in the controller: the ELR follows ISR shrinks below min ISR,
an ELR member is elected when the ISR is empty, a new incarnation (unclean shutdown) leaves the
ELR, the last leader leads again when nothing else is eligible, min.insync.replicas changes clear
the ELR, and the fields survive records, replay and snapshots."""

from __future__ import annotations

from kavka.common import BrokerControlState, ConfigResourceType
from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from tests.unit.controller_fixtures import apply as _apply
from tests.unit.controller_fixtures import cluster as _cluster
from tests.unit.controller_fixtures import logic as _logic


def _topic(logic, image, configs=None):
    recs, res = logic.replication.create_topics(
        image, [NewTopic("t", assignments={0: [1, 2, 3]}, configs=configs or {"min.insync.replicas": "2"})],
        validate_only=False)
    assert res[0].result.ok, res[0].result
    return _apply(image, recs)


def _part(image):
    return image.topics_by_name["t"].partitions[0]


def _alter(logic, image, isr):
    p = _part(image)
    recs, err, _ = logic.replication.alter_partition(
        image, broker_id=p.leader, broker_epoch=-1, topic_id=image.topics_by_name["t"].topic_id, partition=0,
        leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch, new_isr=[(b, -1) for b in isr])
    assert err.name == "none", err
    return _apply(image, recs)


def _state(logic, image, broker, state):
    return _apply(image, logic.cluster.broker_state_records(image, broker, state))


def _register_again(logic, image, broker, previous_broker_epoch=-1):
    return _apply(image, logic.cluster.register_broker(
        image, broker_id=broker, incarnation_id=f"again{broker}", endpoints=(("PLAINTEXT", "h", 1),), rack=None,
        log_dirs=(), previous_broker_epoch=previous_broker_epoch))


def test_isr_below_min_isr_puts_the_removed_members_in_the_elr_and_back_at_min_isr_clears_it():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, image, (1, 2))
    assert (_part(image).isr, _part(image).elr) == ((1, 2), ())  # at min ISR: no ELR
    image = _alter(logic, image, (1,))
    assert (_part(image).isr, _part(image).elr, _part(image).last_known_elr) == ((1,), (2,), ())
    image = _alter(logic, image, (1, 3))
    assert (_part(image).isr, _part(image).elr) == ((1, 3), ())


def test_the_last_isr_member_fenced_an_elr_member_leads_as_the_isr_alone():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    before = _part(image)
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr) == (2, (2,), (1,))
    assert p.leader_epoch == before.leader_epoch + 1 and p.last_known_elr == ()


def test_elr_members_all_fenced_the_partition_waits_and_the_first_to_return_leads():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    image = _state(logic, image, 2, BrokerControlState.FENCED)  # an ELR member, not in the ISR: no change
    assert (_part(image).isr, _part(image).elr) == ((1,), (2,))
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (1, 2), (1,))
    # Broker 3, out of ISR and ELR, never leads; broker 2 (ELR) does once it is unfenced.
    assert _part(_state(logic, image, 3, BrokerControlState.UNFENCED)).leader == -1
    image = _state(logic, image, 2, BrokerControlState.UNFENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (2, (2,), (1,), ())


def test_a_new_incarnation_leaves_the_elr_and_the_last_leader_recovers_when_nothing_else_is_eligible():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    image = _state(logic, image, 2, BrokerControlState.FENCED)
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    image = _register_again(logic, image, 2)  # unclean shutdown: 2 may have lost records
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (1,), (1,))
    # Unfenced, 2 is not eligible: it left the ELR.
    image = _state(logic, image, 2, BrokerControlState.UNFENCED)
    assert _part(image).leader == -1
    image = _register_again(logic, image, 1)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (), (1,))
    # Nothing else eligible: the last leader leads again once back (Kafka's balanced recovery).
    image = _state(logic, image, 1, BrokerControlState.UNFENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (), ())


def test_a_clean_shutdown_keeps_the_replica_in_the_elr():
    """The registration names the epoch of the one it replaces (PreviousBrokerEpoch): a clean
    shutdown, so the replica keeps every record and stays eligible; a stale epoch is unclean."""
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    image = _state(logic, image, 2, BrokerControlState.FENCED)
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    assert _part(image).elr == (1, 2)
    stale = _register_again(logic, image, 2, previous_broker_epoch=image.brokers[2].epoch - 1)
    assert _part(stale).elr == (1,)
    image = _register_again(logic, image, 2, previous_broker_epoch=image.brokers[2].epoch)
    assert (_part(image).leader, _part(image).elr) == (-1, (1, 2))
    image = _state(logic, image, 2, BrokerControlState.UNFENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr) == (2, (2,), (1,))


def test_without_elr_the_isr_keeps_its_last_member_and_no_elr_is_written():
    logic = _logic(**{"eligible.leader.replicas.enable": "false"})
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (1,), (), ())


def test_min_isr_is_capped_by_the_replication_factor():
    logic = _logic()
    image = _topic(logic, _cluster(3), configs={"min.insync.replicas": "5"})
    image = _alter(logic, image, (1, 2))  # below the capped min ISR 3: 3 is eligible
    assert _part(image).elr == (3,)


def test_changing_min_insync_replicas_clears_the_elr():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, image, (1,))
    assert _part(image).elr == (2, 3)
    recs, res = logic.configuration.alter_configs(
        image, ConfigResourceType.TOPIC, "t", [("min.insync.replicas", 0, "1")], incremental=True)
    assert res.ok
    extra = logic.replication.clear_elr_on_min_isr_change(image, recs)
    assert extra == [mr.PartitionChangeRecord(image.topics_by_name["t"].topic_id, 0, eligible_leader_replicas=())]
    assert _part(_apply(image, [*recs, *extra])).elr == ()
    # The cluster-wide default concerns every topic; another topic's override none.
    default = [mr.ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", "3")]
    assert len(logic.replication.clear_elr_on_min_isr_change(image, default)) == 1
    other = [mr.ConfigRecord(ConfigResourceType.TOPIC, "other", "min.insync.replicas", "3")]
    assert logic.replication.clear_elr_on_min_isr_change(image, other) == []


def test_elr_fields_survive_encoding_replay_and_snapshots():
    logic = _logic()
    image = _topic(logic, _cluster(3))
    image = _alter(logic, _alter(logic, image, (1, 2)), (1,))
    image = _state(logic, image, 1, BrokerControlState.FENCED)
    image = _state(logic, image, 2, BrokerControlState.FENCED)
    p = _part(image)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (-1, (), (1, 2), (2,))
    rebuilt = _apply(MetadataImage(), [mr.decode(*mr.encode(r)) for r in image_records(image)])
    assert _part(rebuilt) == p
    change = mr.PartitionChangeRecord("x", 0, eligible_leader_replicas=(2,), last_known_elr=())
    assert mr.decode(*mr.encode(change)) == change
