"""KIP-858 in the controller's pure core: each replica's directory, offline dirs from heartbeats,
AssignReplicasToDirs, and snapshots keeping them.

The rules follow Kafka's ReplicationControlManager (handleDirectoriesOffline,
handleAssignReplicasToDirs), ClusterControlManager.defaultDir and common/DirectoryId.java.
"""

import asyncio

from kio.schema.errors import ErrorCode

from kavka.common import BrokerControlState, DirectoryId
from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from kavka.testing import MemoryLog
from tests.unit.controller_fixtures import apply as _apply
from tests.unit.controller_fixtures import logic as _logic
from tests.unit.test_raft_snapshot import _controller, _run_with

D = {1: ("d1a", "d1b"), 2: ("d2a", "d2b"), 3: ("d3a", "d3b")}


def _cluster(log_dirs=D):
    recs = [
        mr.RegisterBrokerRecord(b, f"inc{b}", (("PLAINTEXT", "h", 9000 + b),), log_dirs=ds, fenced=False)
        for b, ds in log_dirs.items()
    ]
    return _apply(MetadataImage(), recs)


def _with_topic(logic, image, name, assignments):
    recs, res = logic.replication.create_topics(image, [NewTopic(name, assignments=assignments)], validate_only=False)
    assert res[0].result.ok, res[0].result
    return _apply(image, recs)


def _part(image, topic, partition):
    return image.topics_by_name[topic].partitions[partition]


def _assign(logic, image, broker, items, epoch=None):
    tid = {t.name: t.topic_id for t in image.topics_by_name.values()}
    items = [(d, tid.get(t, t), p) for d, t, p in items]
    epoch = image.brokers[broker].epoch if epoch is None else epoch
    recs, error, results = logic.replication.assign_replicas_to_dirs(image, broker_id=broker, broker_epoch=epoch, assignments=items)
    return _apply(image, recs), error, [r[3] for r in results], recs


def test_reserved_ids_are_kafkas_uuids():
    from kavka.protocol.messages import uuid_from_str

    assert uuid_from_str(DirectoryId.UNASSIGNED).int == 0
    assert uuid_from_str(DirectoryId.LOST).int == 1
    assert uuid_from_str(DirectoryId.MIGRATING).int == 2


def test_new_partitions_record_the_default_directory_of_each_replica():
    logic = _logic()
    image = _cluster({1: ("only1",), 2: ("d2a", "d2b"), 3: ()})
    image = _with_topic(logic, image, "t", {0: [1, 2, 3]})
    # One dir: that dir. Several: UNASSIGNED until the broker says. None registered: MIGRATING.
    assert _part(image, "t", 0).directories == ("only1", DirectoryId.UNASSIGNED, DirectoryId.MIGRATING)


def test_assign_replicas_to_dirs_records_where_the_broker_put_each_replica():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2, 3], 1: [2, 3, 1]})
    image, error, codes, recs = _assign(logic, image, 2, [("d2b", "t", 0), ("d2a", "t", 1)])
    assert error == ErrorCode.none and codes == [ErrorCode.none, ErrorCode.none]
    assert _part(image, "t", 0).directories == (DirectoryId.UNASSIGNED, "d2b", DirectoryId.UNASSIGNED)
    assert _part(image, "t", 1).directories == ("d2a", DirectoryId.UNASSIGNED, DirectoryId.UNASSIGNED)
    # The same report again (a retry) changes nothing; a move is a change of that entry only.
    _, _, _, recs = _assign(logic, image, 2, [("d2b", "t", 0)])
    assert recs == []
    image, _, _, recs = _assign(logic, image, 2, [("d2a", "t", 0)])
    assert len(recs) == 1 and _part(image, "t", 0).directories == (DirectoryId.UNASSIGNED, "d2a", DirectoryId.UNASSIGNED)
    assert _part(image, "t", 0).leader == 1 and _part(image, "t", 0).isr == (1, 2, 3)


def test_assign_replicas_to_dirs_errors_follow_kafka():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2]})
    _, error, _, recs = _assign(logic, image, 2, [("d2a", "t", 0)], epoch=image.brokers[2].epoch + 5)
    assert error == ErrorCode.stale_broker_epoch and recs == []
    _, error, codes, recs = _assign(logic, image, 3, [("d3a", "t", 0), ("d3a", "nope", 0), ("d3a", "t", 9)])
    assert error == ErrorCode.none and recs == []
    assert codes == [ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_id, ErrorCode.unknown_topic_or_partition]
    recs, error, _ = logic.replication.assign_replicas_to_dirs(image, broker_id=9, broker_epoch=0, assignments=[])
    assert error == ErrorCode.broker_id_not_registered


def test_a_dir_reported_offline_moves_leadership_and_shrinks_isrs_of_its_replicas_only():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 1, 3]})
    image, *_ = _assign(logic, image, 1, [("d1a", "t", 0), ("d1a", "t", 2), ("d1b", "t", 1)])
    recs = logic.replication.directories_offline(image, 1, ["d1a"])
    assert isinstance(recs[0], mr.BrokerRegistrationChangeRecord) and recs[0].log_dirs == ("d1b",)
    after = _apply(image, recs)
    # t-0 was led by 1 from d1a: the next live ISR member leads, 1 leaves the ISR, epochs bump.
    p0 = _part(after, "t", 0)
    assert (p0.leader, p0.isr) == (2, (2, 3))
    assert p0.leader_epoch == _part(image, "t", 0).leader_epoch + 1
    # t-2 had 1 as a follower in d1a: it leaves the ISR only.
    assert (_part(after, "t", 2).leader, _part(after, "t", 2).isr) == (2, (2, 3))
    # t-1 lives in the healthy d1b: broker 1 still leads it, and the broker stays unfenced.
    assert _part(after, "t", 1) == _part(image, "t", 1)
    assert not after.brokers[1].fenced and after.brokers[1].log_dirs == ("d1b",)
    # Heartbeats keep reporting the dir until a restart: nothing more happens.
    assert logic.replication.directories_offline(after, 1, ["d1a"]) == []
    # Unknown dirs in the report are ignored too.
    assert logic.replication.directories_offline(after, 1, ["zzz"]) == []


def test_offline_dir_keeps_the_last_isr_member_and_goes_leaderless_as_fencing_does():
    logic = _logic(**{"eligible.leader.replicas.enable": "false"})
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2]})
    image = _apply(image, [mr.PartitionChangeRecord(image.topics_by_name["t"].topic_id, 0, isr=(1,))])
    image, *_ = _assign(logic, image, 1, [("d1b", "t", 0)])
    after = _apply(image, logic.replication.directories_offline(image, 1, ["d1b"]))
    assert (_part(after, "t", 0).leader, _part(after, "t", 0).isr) == (-1, (1,))
    # Its broker being unfenced again does not elect the replica while its dir is offline.
    fenced = _apply(after, logic.cluster.broker_state_records(after, 1, BrokerControlState.FENCED))
    back = _apply(fenced, logic.cluster.broker_state_records(fenced, 1, BrokerControlState.UNFENCED))
    assert _part(back, "t", 0).leader == -1


def test_unclean_election_on_an_offline_dir_when_enabled():
    logic = _logic(**{"unclean.leader.election.enable": "true"})
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2]})
    image = _apply(image, [mr.PartitionChangeRecord(image.topics_by_name["t"].topic_id, 0, isr=(1,))])
    image, *_ = _assign(logic, image, 1, [("d1a", "t", 0)])
    after = _apply(image, logic.replication.directories_offline(image, 1, ["d1a"]))
    assert (_part(after, "t", 0).leader, _part(after, "t", 0).isr) == (2, (2,))


def test_an_assignment_to_a_dir_not_online_takes_the_replica_offline():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2, 3]})
    image, _, codes, _ = _assign(logic, image, 1, [("gone", "t", 0)])
    assert codes == [ErrorCode.none]
    p = _part(image, "t", 0)
    assert p.directories[0] == "gone" and p.leader == 2 and 1 not in p.isr


def test_snapshots_keep_directories_and_online_dirs():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2, 3]})
    image, *_ = _assign(logic, image, 2, [("d2b", "t", 0)])
    image = _apply(image, logic.replication.directories_offline(image, 3, ["d3a"]))
    encoded = [mr.encode(r) for r in image_records(image)]
    replayed = _apply(MetadataImage(), [mr.decode(k, v) for k, v in encoded])
    assert _part(replayed, "t", 0).directories == _part(image, "t", 0).directories
    assert replayed.brokers[3].log_dirs == ("d3b",)
    assert replayed.brokers[1].log_dirs == D[1]


def test_heartbeat_with_offline_dirs_commits_the_changes_and_keeps_the_broker_unfenced():
    async def run():
        raft, qc = _controller(MemoryLog())
        await _run_with(raft, qc, lambda: _scenario(qc))

    async def _scenario(qc):
        epochs = {}
        for b in (1, 2, 3):
            epochs[b] = await qc.register_broker(
                broker_id=b, incarnation_id=f"inc{b}", endpoints=[("PLAINTEXT", "h", 9000 + b)], rack=None, log_dirs=D[b]
            )
            r = await qc.broker_heartbeat(broker_id=b, broker_epoch=epochs[b], metadata_offset=10**9)
            assert not r.is_fenced
        created = await qc.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})])
        assert created[0].result.ok
        tid = qc.image.topics_by_name["t"].topic_id
        error, results = await qc.assign_replicas_to_dirs(1, epochs[1], [("d1b", tid, 0)])
        assert error == ErrorCode.none and results[0][3] == ErrorCode.none
        r = await qc.broker_heartbeat(
            broker_id=1, broker_epoch=epochs[1], metadata_offset=10**9, offline_log_dirs=["d1b"]
        )
        assert r.error == ErrorCode.none and not r.is_fenced and not r.should_shut_down
        p = qc.image.topics_by_name["t"].partitions[0]
        assert p.leader == 2 and p.isr == (2, 3) and p.directories[0] == "d1b"
        assert qc.image.brokers[1].log_dirs == ("d1a",) and not qc.image.brokers[1].fenced

    asyncio.run(run())


def test_a_new_replica_set_without_directories_keeps_the_dirs_of_kept_replicas():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2]})
    image, *_ = _assign(logic, image, 1, [("d1b", "t", 0)])
    image, *_ = _assign(logic, image, 2, [("d2a", "t", 0)])
    tid = image.topics_by_name["t"].topic_id
    image = _apply(image, [mr.PartitionChangeRecord(tid, 0, replicas=(2, 3, 1))])
    assert _part(image, "t", 0).directories == ("d2a", DirectoryId.UNASSIGNED, "d1b")
