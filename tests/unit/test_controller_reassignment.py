"""Cross-broker reassignment in the controller's pure core (KIP-455).

Semantics and messages follow Kafka's ReplicationControlManager.alterPartitionReassignments /
listPartitionReassignments, PartitionReassignmentReplicas, PartitionReassignmentRevert and the
reassignment steps of PartitionChangeBuilder: replicas = target + removing while adding replicas
catch up; the AlterPartition that puts every target replica in the ISR completes it; a null target
cancels it.
"""


from kio.schema.errors import ErrorCode

from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.metadata import snapshot
from kavka.metadata.image import MetadataImage
from tests.unit.controller_fixtures import apply as _apply
from tests.unit.controller_fixtures import cluster as _cluster
from tests.unit.controller_fixtures import logic as _logic


def _setup(n=6, assignments=None):
    logic, image = _logic(), _cluster(n)
    recs, res = logic.replication.create_topics(image, [NewTopic("t", assignments=assignments or {0: [1, 2, 3]})], validate_only=False)
    assert res[0].result.ok
    return logic, _apply(image, recs)


def _part(image, p=0):
    return image.topics_by_name["t"].partitions[p]


def _reassign(logic, image, target, p=0, topic="t"):
    recs, out = logic.replication.alter_partition_reassignments(image, [(topic, [(p, target)])])
    [(name, [res])] = out
    assert name == topic
    return _apply(image, recs), res, recs


def _leader_alter_isr(logic, image, new_isr, p=0):
    reg = _part(image, p)
    t = image.topics_by_name["t"]
    recs, error, after = logic.replication.alter_partition(
        image,
        broker_id=reg.leader,
        broker_epoch=-1,
        topic_id=t.topic_id,
        partition=p,
        leader_epoch=reg.leader_epoch,
        partition_epoch=reg.partition_epoch,
        new_isr=[(b, -1) for b in new_isr],
    )
    assert error == ErrorCode.none, error
    image = _apply(image, recs)
    return image, after


def test_start_adds_target_replicas_and_records_adding_and_removing():
    logic, image = _setup()
    image, res, recs = _reassign(logic, image, [4, 5, 6])
    assert res.error == ErrorCode.none and res.message is None
    p = _part(image)
    assert p.replicas == (4, 5, 6, 1, 2, 3)
    assert p.adding_replicas == (4, 5, 6) and p.removing_replicas == (1, 2, 3)
    assert p.isr == (1, 2, 3) and p.leader == 1  # the old replicas keep serving meanwhile
    assert p.reassigning
    listed = logic.replication.list_partition_reassignments(image, None)
    assert [(n, [(o.partition, o.replicas, o.adding_replicas, o.removing_replicas) for o in ps]) for n, ps in listed] == [
        ("t", [(0, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))])
    ]


def test_completes_when_every_target_replica_is_in_the_isr_and_moves_a_removed_leader():
    logic, image = _setup()
    image, _, _ = _reassign(logic, image, [4, 5, 6])
    epoch = _part(image).leader_epoch
    image, _ = _leader_alter_isr(logic, image, [1, 2, 3, 4, 5])  # 6 not yet caught up
    assert _part(image).reassigning and _part(image).isr == (1, 2, 3, 4, 5)
    image, after = _leader_alter_isr(logic, image, [1, 2, 3, 4, 5, 6])
    p = _part(image)
    assert p.replicas == (4, 5, 6) and p.isr == (4, 5, 6)
    assert p.adding_replicas == () and p.removing_replicas == ()
    assert p.leader == 4 and p.leader_epoch == epoch + 1
    assert after.leader == 4 and after.replicas == (4, 5, 6) and after.partition_epoch == p.partition_epoch
    assert logic.replication.list_partition_reassignments(image, None) == []


def test_a_leader_that_stays_keeps_leading_with_a_new_epoch():
    logic, image = _setup()
    image, _, _ = _reassign(logic, image, [1, 4, 5])
    epoch = _part(image).leader_epoch
    image, _ = _leader_alter_isr(logic, image, [1, 2, 3, 4, 5])
    p = _part(image)
    assert (p.replicas, p.isr, p.leader) == ((1, 4, 5), (1, 4, 5), 1)
    assert p.leader_epoch == epoch + 1  # replicas 2 and 3 left: they are fenced by the new epoch


def test_a_target_already_in_sync_completes_at_once():
    logic, image = _setup()
    image, res, recs = _reassign(logic, image, [3, 2])  # shrink: nothing to catch up
    assert res.error == ErrorCode.none and len(recs) == 1
    p = _part(image)
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ((3, 2), (2, 3), 3, False)  # the preferred one


def test_the_same_replicas_write_nothing():
    logic, image = _setup()
    _, res, recs = _reassign(logic, image, [1, 2, 3])
    assert res.error == ErrorCode.none and recs == []


def test_cancel_reverts_to_the_original_replicas_and_drops_the_adding_ones():
    logic, image = _setup()
    image, _, _ = _reassign(logic, image, [4, 5, 6])
    image, _ = _leader_alter_isr(logic, image, [1, 2, 3, 4])
    image, res, _ = _reassign(logic, image, None)
    assert res.error == ErrorCode.none
    p = _part(image)
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ((1, 2, 3), (1, 2, 3), 1, False)
    # and nothing left to cancel
    _, res, recs = _reassign(logic, image, None)
    assert (res.error, res.message, recs) == (
        ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.", []
    )


def test_cancel_that_needs_an_unclean_election_is_refused_unless_enabled():
    logic, image = _setup()
    image, _, _ = _reassign(logic, image, [4, 5, 6])
    t = image.topics_by_name["t"]
    # Only the adding replicas are in the ISR (the old ones fell out).
    image = _apply(image, [mr.PartitionChangeRecord(t.topic_id, 0, leader=4, isr=(4,))])
    _, res, recs = _reassign(logic, image, None)
    assert res.error == ErrorCode.invalid_replica_assignment and recs == []
    assert res.message == "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    unclean = _logic(**{"unclean.leader.election.enable": "true"})
    image2, res, _ = _reassign(unclean, image, None)
    p = _part(image2)
    assert res.error == ErrorCode.none
    assert (p.replicas, p.isr, p.leader) == ((1, 2, 3), (1,), 1)


def test_errors_are_kafkas():
    logic, image = _setup()
    cases = {
        ("nope", 0, (1,)): (ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."),
        ("t", 7, (1,)): (ErrorCode.unknown_topic_or_partition, "Unable to find partition t:7."),
        ("t", 0, ()): (ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."),
        ("t", 0, (1, 9)): (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        ("t", 0, (2, 1, 2)): (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes the broker 2 more than once.",
        ),
    }
    for (topic, p, target), want in cases.items():
        recs, out = logic.replication.alter_partition_reassignments(image, [(topic, [(p, target)])])
        [(_, [res])] = out
        assert (res.error, res.message) == want
        assert recs == []


def test_partitions_of_one_request_are_decided_one_by_one():
    logic, image = _setup(assignments={0: [1, 2, 3], 1: [2, 3, 4]})
    recs, out = logic.replication.alter_partition_reassignments(image, [("t", [(0, [4, 5, 6]), (1, [9]), (2, [1])])])
    assert [(r.partition, r.error) for _, rs in out for r in rs] == [
        (0, ErrorCode.none), (1, ErrorCode.invalid_replica_assignment), (2, ErrorCode.unknown_topic_or_partition)
    ]
    assert len(recs) == 1
    image = _apply(image, recs)
    assert [(n, [o.partition for o in ps]) for n, ps in logic.replication.list_partition_reassignments(image, [("t", [0, 1]), ("x", [0])])] == [
        ("t", [0])
    ]


def test_a_reassignment_survives_a_snapshot_and_old_records_decode():
    logic, image = _setup()
    image, _, _ = _reassign(logic, image, [4, 5, 6])
    reloaded = _apply(MetadataImage(), snapshot.image_records(image))
    assert _part(reloaded) == _part(image)
    for r in snapshot.image_records(image):
        assert mr.decode(*mr.encode(r)) == r
    # a record written before these fields existed still decodes
    old = b'{"topic_id":"x","partition_id":0,"replicas":[1],"isr":[1],"leader":1,"v":0}'
    assert mr.decode(b"Partition", old).adding_replicas == ()
