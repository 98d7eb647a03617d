"""KIP-853 on real processes, as far as kavka serves it yet: a standalone dynamic quorum.

A node formatted with `kavka storage format --standalone` runs its quorum with kraft.version 1:
its first leader writes the bootstrap voter set (this node and its metadata dir's directory id)
into the metadata log, and the node serves metadata (topic creation, a restart) as a static one
does. AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter are answered with Kafka's error codes
(UpdateRaftVoter changes the voter's endpoints in the log). Quorums of several initial
controllers, or a controller formatted to join one, need controller.quorum.bootstrap.servers,
which is not served yet: such a node refuses to start and says why.
"""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_raft_voter.v0 import request as arv
from kio.schema.describe_quorum.v2 import request as dq
from kio.schema.remove_raft_voter.v0 import request as rrv
from kio.schema.update_raft_voter.v0 import request as urv

from kavka.common import ErrorCode
from kavka.protocol.messages import uuid_from_str
from kavka.raft.file_log import FileReplicatedLog
from kavka.raft.voters import VoterEndpoint, VoterNode, VoterSet, voters_in
from kavka.storage.meta_properties import read_meta_properties
from tests.raw_client import RawClient
from tests.wait import wait_until


def _create(admin: AdminClient, *names: str) -> None:
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(20)


def _listed(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def _voter_sets_in_log(metadata_dir: Path) -> list[VoterSet]:
    log = FileReplicatedLog.open(metadata_dir, now_ms=int(time.time() * 1000))
    try:
        entries = log.read(0, 10_000)
    finally:
        log.close()
    return [vs for e in entries if e.control and (vs := voters_in(e.key, e.value)) is not None]


def test_a_standalone_dynamic_quorum_serves_metadata_and_keeps_its_voter_set(broker_factory) -> None:  # noqa: ANN001
    b = broker_factory()
    b.format_args = ["--standalone"]
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    _create(admin, "dq-a", "dq-b")
    assert {"dq-a", "dq-b"} <= _listed(admin)
    assert b.stop() == 0
    meta = b.log_dirs[0]
    directory_id = read_meta_properties(meta).directory_id
    # The first leader wrote the bootstrap set into the log, so any node fetching it learns it.
    assert _voter_sets_in_log(meta) == [VoterSet.of([VoterNode(1, directory_id)])]
    b.start()
    _create(admin, "dq-c")
    wait_until(lambda: {"dq-a", "dq-b", "dq-c"} <= _listed(admin), message="all three topics listed after a restart")
    assert b.stop() == 0
    assert len(_voter_sets_in_log(meta)) == 1  # written once: later leaders find it in the log


def test_a_dynamic_quorum_of_several_controllers_is_refused_at_startup(broker_factory) -> None:  # noqa: ANN001
    for args in (["--initial-controllers", "1@127.0.0.1:1:AAAAAAAAAAAAAAAAAAAAAQ,2@127.0.0.1:2:AAAAAAAAAAAAAAAAAAAAAg"],
                 ["--no-initial-controllers"]):
        b = broker_factory()
        b.format_args = args
        b.start(wait=False)
        assert b.proc is not None and b.proc.wait(30) != 0
        out = b.log_text()
        assert "kavka runs only a standalone dynamic quorum yet" in out, out


def _add(port: int, cluster_id: str, voter: int, directory: uuid.UUID) -> ErrorCode:
    req = arv.AddRaftVoterRequest(
        cluster_id=cluster_id, timeout=datetime.timedelta(seconds=5), voter_id=voter,
        voter_directory_id=directory, listeners=(arv.Listener(name="CONTROLLER", host="127.0.0.1", port=1),),
    )
    with RawClient(port) as c:
        return c.call(80, 0, req).error_code


def _remove(port: int, cluster_id: str, voter: int, directory: uuid.UUID) -> ErrorCode:
    with RawClient(port) as c:
        return c.call(81, 0, rrv.RemoveRaftVoterRequest(
            cluster_id=cluster_id, voter_id=voter, voter_directory_id=directory)).error_code


def test_voter_change_apis_answer_with_kafkas_error_codes(broker_factory) -> None:  # noqa: ANN001
    b = broker_factory()
    b.format_args = ["--standalone"]
    b.start()
    props = read_meta_properties(b.log_dirs[0])
    cid, own = props.cluster_id, uuid_from_str(props.directory_id)
    assert _add(b.port, cid, 1, own) is ErrorCode.duplicate_voter
    # Node 2 never fetched the metadata log: it has not caught up as an observer.
    assert _add(b.port, cid, 2, uuid.uuid4()) is ErrorCode.request_timed_out
    assert _remove(b.port, cid, 1, uuid.uuid4()) is ErrorCode.voter_not_found  # the directory id must match
    assert _remove(b.port, cid, 1, own) is ErrorCode.invalid_request  # the last voter
    assert _remove(b.port, "another-cluster-id-000", 1, own) is ErrorCode.inconsistent_cluster_id
    # UpdateRaftVoter: the voter's endpoint, written into the log once committed.
    update = urv.UpdateRaftVoterRequest(
        cluster_id=cid, current_leader_epoch=-1, voter_id=1, voter_directory_id=own,
        listeners=(urv.Listener(name="CONTROLLER", host="127.0.0.1", port=19093),),
        k_raft_version_feature=urv.KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
    )
    with RawClient(b.port) as c:
        resp = c.call(82, 0, update)
    assert resp.error_code is ErrorCode.none and resp.current_leader.leader_id == 1
    # DescribeQuorum v2 (kafka-metadata-quorum describe --replication): the voter's directory id and,
    # in Nodes, its new endpoint.
    with RawClient(b.port) as c:
        quorum = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
    voter = quorum.topics[0].partitions[0].current_voters[0]
    assert (voter.replica_id, voter.replica_directory_id) == (1, own)
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in quorum.nodes] == [
        (1, [("CONTROLLER", "127.0.0.1", 19093)])
    ]
    assert b.stop() == 0
    sets = _voter_sets_in_log(b.log_dirs[0])
    assert sets[-1] == VoterSet.of([VoterNode(1, props.directory_id, (VoterEndpoint("CONTROLLER", "127.0.0.1", 19093),))])


def test_a_static_quorum_refuses_voter_changes(broker) -> None:  # noqa: ANN001
    props = read_meta_properties(broker.log_dirs[0])
    assert _add(broker.port, props.cluster_id, 2, uuid.uuid4()) is ErrorCode.unsupported_version
    assert _remove(broker.port, props.cluster_id, 1, uuid.uuid4()) is ErrorCode.unsupported_version
