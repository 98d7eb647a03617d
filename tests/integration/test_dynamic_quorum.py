"""KIP-853 on real processes: dynamic controller quorums.

A node formatted with `kavka storage format --standalone` runs its quorum with kraft.version 1:
its first leader writes the bootstrap voter set (this node and its metadata dir's directory id)
into the metadata log, and the node serves metadata (topic creation, a restart) as a static one
does. AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter are answered with Kafka's error codes.
Nodes formatted to join (`--no-initial-controllers`) reach the quorum through
controller.quorum.bootstrap.servers, are added and removed as voters under topic creation, a
voter whose disk was wiped is replaced, voters killed and restarted keep the quorum serving
and changing, and a voter restarted on another port updates its listed endpoints by itself. Without controller.quorum.bootstrap.servers such a node refuses to start.
"""

from __future__ import annotations

import datetime
import shutil
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_raft_voter.v0 import request as arv
from kio.schema.add_raft_voter.v1 import request as arv1
from kio.schema.api_versions.v4 import request as av
from kio.schema.describe_quorum.v2 import request as dq
from kio.schema.remove_raft_voter.v0 import request as rrv
from kio.schema.update_raft_voter.v0 import request as urv

from kavka.common import ErrorCode
from kavka.protocol.messages import uuid_from_str, uuid_to_str
from kavka.raft.file_log import FileReplicatedLog
from kavka.raft.voters import VoterEndpoint, VoterNode, VoterSet, voters_in
from kavka.storage.meta_properties import read_meta_properties
from tests.broker_harness import BrokerProcess, free_port
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, ck_read_to_end
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
    # ApiVersions (what kafka-features describe shows): kraft.version supported 0-1, finalized 1.
    with RawClient(b.port) as c:
        versions = c.call(18, 4, av.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert {f.name: (f.min_version, f.max_version) for f in versions.supported_features}["kraft.version"] == (0, 1)
    assert {f.name: f.max_version_level for f in versions.finalized_features}["kraft.version"] == 1
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


def test_a_dynamic_quorum_without_bootstrap_servers_is_refused_at_startup(broker_factory) -> None:  # noqa: ANN001
    # (--no-initial-controllers takes the same path: no voter set of this node alone.)
    for args in (["--initial-controllers", "1@127.0.0.1:1:AAAAAAAAAAAAAAAAAAAAAQ,2@127.0.0.1:2:AAAAAAAAAAAAAAAAAAAAAg"],):
        b = broker_factory()
        b.format_args = args
        b.start(wait=False)
        assert b.proc is not None and b.proc.wait(30) != 0
        out = b.log_text()
        assert "set controller.quorum.bootstrap.servers to reach its controllers" in out, out


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


# ---- a dynamic quorum of three real processes ----------------------------------------------------


class _Quorum:
    """Three combined nodes reaching the quorum through node 1's controller listener
    (controller.quorum.bootstrap.servers): node 1 formatted --standalone, 2 and 3 to join."""

    def __init__(self, root: Path) -> None:
        self.ctl = {i: free_port() for i in (1, 2, 3)}
        self.cluster_id = uuid_to_str(uuid.uuid4())
        self.nodes: dict[int, BrokerProcess] = {}
        for i in (1, 2, 3):
            port = free_port()
            self.nodes[i] = BrokerProcess(root / f"n{i}", node_id=i, port=port, overrides={
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.ctl[i]}",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.ctl[1]}",
                "offsets.topic.num.partitions": "1",
            })
            self.nodes[i].format_args = ["--standalone"] if i == 1 else ["--no-initial-controllers"]

    def directory(self, i: int) -> uuid.UUID:
        return uuid_from_str(read_meta_properties(self.nodes[i].log_dirs[0]).directory_id)

    def describe(self, via: int) -> tuple[int, list[tuple[int, uuid.UUID | None]], list[int]]:
        with RawClient(self.nodes[via].port) as c:
            q = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
        p = q.topics[0].partitions[0]
        assert p.error_code is ErrorCode.none, p
        voters = sorted((v.replica_id, v.replica_directory_id) for v in p.current_voters)
        return p.leader_id, voters, sorted(o.replica_id for o in p.observers)

    def add(self, i: int, directory: uuid.UUID, *, ack_when_committed: bool = True) -> None:
        """AddRaftVoter v1 through node 1, until the joiner has caught up as an observer; with
        `ack_when_committed` false it is answered once the change is in the leader's log."""
        req = arv1.AddRaftVoterRequest(
            cluster_id=self.cluster_id, timeout=datetime.timedelta(seconds=5), voter_id=i, voter_directory_id=directory,
            listeners=(arv1.Listener(name="CONTROLLER", host="127.0.0.1", port=self.ctl[i]),),
            ack_when_committed=ack_when_committed,
        )

        def added() -> bool:
            with RawClient(self.nodes[1].port) as c:
                error = c.call(80, 1, req).error_code
            assert error in (ErrorCode.none, ErrorCode.request_timed_out), error  # not caught up yet
            return error is ErrorCode.none

        wait_until(added, timeout=30, message=f"AddRaftVoter {i}")

    def grow_to_three(self) -> None:
        """Format and start all three nodes; add 2 and 3 as voters."""
        for n in self.nodes.values():
            n.format(self.cluster_id)
        for i in (1, 2, 3):
            self.nodes[i].start()
        for i in (2, 3):
            self.add(i, self.directory(i))

    def remove(self, i: int, directory: uuid.UUID, via: int = 1) -> None:
        assert _remove(self.nodes[via].port, self.cluster_id, i, directory) is ErrorCode.none


def test_grow_a_quorum_from_one_to_three_and_shrink_it_back_under_topic_creation(tmp_path: Path) -> None:
    q = _Quorum(tmp_path)
    try:
        for n in q.nodes.values():
            n.format(q.cluster_id)
        q.nodes[1].start()
        q.nodes[2].start()
        q.nodes[3].start()
        admin = AdminClient({"bootstrap.servers": q.nodes[1].bootstrap})
        assert q.describe(1) == (1, [(1, q.directory(1))], [2, 3])  # 2 and 3 observe
        created = 0
        for i in (2, 3):
            q.add(i, q.directory(i), ack_when_committed=i == 2)  # node 3: answered once appended
            created += 1
            _create(admin, f"grow-{created}")
        assert q.describe(3) == (1, [(i, q.directory(i)) for i in (1, 2, 3)], [])
        _create(admin, "grow-3")
        # Shrink back: remove 3, then the leader itself; node 2 is then the only voter and leads.
        q.remove(3, q.directory(3))
        _create(admin, "shrink-1")
        q.remove(1, q.directory(1))
        wait_until(lambda: q.describe(2)[:2] == (2, [(2, q.directory(2))]), timeout=30, message="node 2 leads alone")
        admin2 = AdminClient({"bootstrap.servers": q.nodes[2].bootstrap})
        _create(admin2, "shrink-2")
        assert {"grow-1", "grow-2", "grow-3", "shrink-1", "shrink-2"} <= _listed(admin2)
        # The old voters cannot elect a leader any more: with 2 gone, 1 and 3 (the old set's majority)
        # stay leaderless.
        q.nodes[2].kill()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for i in (1, 3):
                try:
                    leader = q.describe(i)[0]
                except (AssertionError, OSError, TimeoutError):
                    continue
                assert leader == 2, f"node {i} reports leader {leader} with the only voter down"
            time.sleep(0.2)
    finally:
        for n in q.nodes.values():
            n.kill()


def test_replace_a_voter_whose_metadata_dir_was_wiped(tmp_path: Path) -> None:
    q = _Quorum(tmp_path)
    try:
        q.grow_to_three()
        old = q.directory(3)
        admin = AdminClient({"bootstrap.servers": q.nodes[1].bootstrap})
        _create(admin, "before-wipe")
        # Node 3's disk is lost: wiped and formatted to join, it comes back with a new directory id
        # and is an observer, not the voter (3, old directory id).
        q.nodes[3].kill()
        shutil.rmtree(q.nodes[3].log_dirs[0])
        q.nodes[3].format(q.cluster_id)
        new = q.directory(3)
        assert new != old
        q.nodes[3].start()
        assert (3, old) in q.describe(1)[1]  # its fetches do not count for that voter (unit-tested)
        # Replace: remove the old directory id, add the new one; metadata keeps committing.
        q.remove(3, old)
        _create(admin, "during-replace")
        q.add(3, new)
        assert q.describe(1)[1] == [(1, q.directory(1)), (2, q.directory(2)), (3, new)]
        _create(admin, "after-replace")
        assert {"before-wipe", "during-replace", "after-replace"} <= _listed(admin)
    finally:
        for n in q.nodes.values():
            n.kill()



def _leader(q: _Quorum, alive: list[int]) -> int | None:
    """The leader as the live nodes' DescribeQuorum answers name it (None while none is known)."""
    for i in alive:
        try:
            leader = q.describe(i)[0]
        except (AssertionError, OSError, TimeoutError):
            continue
        if leader in alive:
            return leader
    return None


def _all_voters_follow(q: _Quorum, voters: list[tuple[int, uuid.UUID]]) -> bool:
    """The leader's DescribeQuorum lists `voters`, each fetching up to the high watermark."""
    leader = _leader(q, [i for i, _ in voters])
    if leader is None:
        return False
    with RawClient(q.nodes[leader].port) as c:
        resp = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
    p = resp.topics[0].partitions[0]
    return (
        p.error_code is ErrorCode.none
        and sorted((v.replica_id, v.replica_directory_id) for v in p.current_voters) == voters
        and all(v.log_end_offset >= p.high_watermark > 0 for v in p.current_voters)
    )


def _remove_until_done(q: _Quorum, leader: int, i: int) -> None:
    """RemoveRaftVoter through the leader, while it answers REQUEST_TIMED_OUT (a change in flight)."""
    deadline = time.monotonic() + 20
    while (error := _remove(q.nodes[leader].port, q.cluster_id, i, q.directory(i))) is ErrorCode.request_timed_out:
        assert time.monotonic() < deadline, f"RemoveRaftVoter {i} kept timing out"
        time.sleep(0.2)
    assert error is ErrorCode.none, error


def test_voters_killed_and_restarted_keep_the_quorum_changing_and_serving(tmp_path: Path) -> None:
    """kill -9 and restart the leader and a follower of a grown three-voter quorum, in turns: after
    each, every voter follows the leader again and a topic is created; then voter changes commit,
    and the sole voter left, killed and restarted, serves CreateTopics. (The leader that made a
    voter change took the controller's wall clock as its own: no deadline of it fired again, so it
    resigned at once and later stayed Unattached, and the next change never committed.)"""
    q = _Quorum(tmp_path)
    try:
        q.grow_to_three()
        voters = [(i, q.directory(i)) for i in (1, 2, 3)]
        for round_ in range(4):
            wait_until(lambda: _all_voters_follow(q, voters), timeout=20, message=f"round {round_}: voters follow")
            leader = _leader(q, [1, 2, 3])
            assert leader is not None
            victim = leader if round_ % 2 == 0 else next(i for i in (1, 2, 3) if i != leader)
            q.nodes[victim].kill()
            q.nodes[victim].start()
            _create(AdminClient({"bootstrap.servers": q.nodes[victim].bootstrap}), f"restart-{round_}")
        wait_until(lambda: _all_voters_follow(q, voters), timeout=20, message="voters follow after the restarts")
        # Voter changes still commit: remove a follower, add it back, then shrink to the leader alone.
        leader = _leader(q, [1, 2, 3])
        assert leader is not None
        followers = [i for i in (1, 2, 3) if i != leader]
        _remove_until_done(q, leader, followers[0])
        q.add(followers[0], q.directory(followers[0]))
        wait_until(lambda: _all_voters_follow(q, voters), timeout=20, message="voters follow after a re-add")
        leader = _leader(q, [1, 2, 3])
        assert leader is not None
        for i in (i for i in (1, 2, 3) if i != leader):
            _remove_until_done(q, leader, i)
        sole = [(leader, q.directory(leader))]
        wait_until(lambda: _all_voters_follow(q, sole), timeout=20, message="the sole voter leads")
        q.nodes[leader].kill()
        q.nodes[leader].start()
        admin = AdminClient({"bootstrap.servers": q.nodes[leader].bootstrap})
        _create(admin, "after-sole-restart")
        assert {f"restart-{r}" for r in range(4)} | {"after-sole-restart"} <= _listed(admin)
    finally:
        for n in q.nodes.values():
            n.kill()


def _listed_endpoints(q: _Quorum, via: int) -> dict[int, list[tuple[str, str, int]]]:
    """DescribeQuorum v2's Nodes: each voter's endpoints as the voter set lists them."""
    with RawClient(q.nodes[via].port) as c:
        resp = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
    return {int(n.node_id): [(x.name, x.host, int(x.port)) for x in n.listeners] for n in resp.nodes}


def test_a_voter_restarted_on_another_port_updates_its_endpoints_by_itself(tmp_path: Path) -> None:
    """KIP-853's UpdateRaftVoter, sent by the voter itself (as Kafka's KafkaRaftClient does every
    three fetch timeouts while its listed endpoints differ from its own): node 3 restarts with its
    controller listener on a new port, and the voter set -- what other nodes reach it by -- follows
    without an operator. Then the address listed is the one that works: with node 3 and one other
    voter left, a leader is elected and metadata commits, which takes the other voter reaching node 3
    (its Vote to node 3, or its Fetch from node 3 as the leader)."""
    q = _Quorum(tmp_path)
    try:
        q.grow_to_three()
        old = q.ctl[3]
        assert _listed_endpoints(q, 1)[3] == [("CONTROLLER", "127.0.0.1", old)]
        q.nodes[3].kill()
        new = q.ctl[3] = free_port()
        q.nodes[3].config_file.write_text(
            q.nodes[3].config_file.read_text().replace(f"CONTROLLER://127.0.0.1:{old}", f"CONTROLLER://127.0.0.1:{new}")
        )
        q.nodes[3].start()
        # Within a few update periods (3 x controller.quorum.fetch.timeout.ms, 6 s) on every node.
        for via in (1, 2, 3):
            wait_until(lambda via=via: _listed_endpoints(q, via).get(3) == [("CONTROLLER", "127.0.0.1", new)],
                       timeout=40, message=f"node {via} lists node 3 at its new port")
        voters = [(i, q.directory(i)) for i in (1, 2, 3)]
        wait_until(lambda: _all_voters_follow(q, voters), timeout=20, message="voters follow")
        # The new address is the one that works: with node 3 and one other voter left, the quorum
        # elects a leader and commits metadata, which needs each to reach the other.
        leader = _leader(q, [1, 2, 3])
        assert leader is not None
        victim = 1 if leader == 3 else leader
        q.nodes[victim].kill()
        alive = [i for i in (1, 2, 3) if i != victim]
        wait_until(lambda: _leader(q, alive) is not None, timeout=30, message="a leader among the two left")
        _create(AdminClient({"bootstrap.servers": q.nodes[alive[0]].bootstrap}), "after-port-change")
    finally:
        for n in q.nodes.values():
            n.kill()


# ---- broker-only nodes of a dynamic quorum -------------------------------------------------------


def test_broker_only_nodes_follow_a_dynamic_quorum_through_voter_changes(tmp_path: Path) -> None:
    """process.roles=broker nodes with controller.quorum.bootstrap.servers (no voters) find the
    leader of a dynamic quorum of controller-only nodes, register, serve clients and stay
    observers; when the leader removes itself and its process (the brokers' only bootstrap server)
    is gone, they follow the new leader, and a broker restarted then finds it from the voter set in
    its own metadata log. (Such a broker used to count itself a voter beside the bootstrap server
    and never became ready.)"""
    ctl = {1: free_port(), 2: free_port()}
    cluster_id = uuid_to_str(uuid.uuid4())
    nodes: dict[int, BrokerProcess] = {}
    common = {
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{ctl[1]}",
        "offsets.topic.num.partitions": "1",
    }
    for i in (1, 2):
        nodes[i] = BrokerProcess(tmp_path / f"c{i}", node_id=i, port=ctl[i], overrides={
            **common, "process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{ctl[i]}"})
        nodes[i].format_args = ["--standalone"] if i == 1 else ["--no-initial-controllers"]
    for i in (3, 4):
        port = free_port()
        nodes[i] = BrokerProcess(tmp_path / f"b{i}", node_id=i, port=port, overrides={
            **common, "process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{port}"})

    def describe() -> tuple[int, list[int], list[int]]:
        with RawClient(nodes[3].port) as c:
            q = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
        p = q.topics[0].partitions[0]
        assert p.error_code is ErrorCode.none, p
        return p.leader_id, sorted(v.replica_id for v in p.current_voters), sorted(o.replica_id for o in p.observers)

    try:
        for n in nodes.values():
            n.format(cluster_id)
            n.start(wait=False)
        for n in nodes.values():
            n.wait_ready(60)
        bootstrap = f"{nodes[3].bootstrap},{nodes[4].bootstrap}"
        admin = ck_admin(bootstrap)
        assert sorted(admin.list_topics(timeout=10).brokers) == [3, 4]  # controllers never register as brokers
        wait_until(lambda: describe() == (1, [1], [2, 3, 4]), timeout=20, message="brokers and node 2 observe")
        ck_create_topic(admin, "bo-a", 2, replication_factor=2)
        producer = ck_producer(bootstrap, {"acks": "all"})
        for i in range(20):
            producer.produce("bo-a", value=b"a%d" % i, partition=i % 2)
        assert producer.flush(30) == 0

        # Controller 2 joins, the leader removes itself: 2 leads alone, and node 1 goes away.
        directory2 = uuid_from_str(read_meta_properties(nodes[2].log_dirs[0]).directory_id)
        req = arv1.AddRaftVoterRequest(
            cluster_id=cluster_id, timeout=datetime.timedelta(seconds=5), voter_id=2, voter_directory_id=directory2,
            listeners=(arv1.Listener(name="CONTROLLER", host="127.0.0.1", port=ctl[2]),), ack_when_committed=True,
        )

        def added() -> bool:
            with RawClient(nodes[3].port) as c:
                error = c.call(80, 1, req).error_code
            assert error in (ErrorCode.none, ErrorCode.request_timed_out), error
            return error is ErrorCode.none

        wait_until(added, timeout=30, message="AddRaftVoter 2 through a broker")
        directory1 = uuid_from_str(read_meta_properties(nodes[1].log_dirs[0]).directory_id)
        assert _remove(nodes[3].port, cluster_id, 1, directory1) is ErrorCode.none
        wait_until(lambda: describe()[:2] == (2, [2]), timeout=30, message="controller 2 leads alone")
        nodes[1].kill()
        ck_create_topic(admin, "bo-b", 2, replication_factor=2)
        assert len(ck_read_to_end(bootstrap, "bo-a", [0, 1])) == 20

        # A broker restarted now finds the leader through the voter set in its own log: its only
        # bootstrap server is dead.
        nodes[4].kill()
        nodes[4].start(timeout=60)
        wait_until(lambda: 4 in describe()[2], timeout=20, message="restarted broker 4 observes again")
        ck_create_topic(ck_admin(nodes[4].bootstrap), "bo-c", 2, replication_factor=2)
        md = ck_admin(nodes[4].bootstrap).list_topics(timeout=10)
        assert {"bo-a", "bo-b", "bo-c"} <= set(md.topics) and sorted(md.brokers) == [3, 4]
        assert describe()[:2] == (2, [2])
    finally:
        for n in nodes.values():
            n.kill()


# ---- a static quorum upgraded to a dynamic one (Kafka 4.1's kraft.version upgrade) ----------------


def test_kafka_features_upgrades_a_static_quorum_to_a_dynamic_one(tmp_path: Path) -> None:
    """Kafka's own kafka-features upgrades kraft.version of a static three-voter quorum
    (controller.quorum.voters) to 1: the voters, with their metadata dirs' directory ids and
    controller endpoints, are in the metadata log from then on, voter changes work, and a downgrade
    is refused with Kafka's words."""
    from tests.broker_harness import Cluster
    from tests.java_deps import run_kafka_tool

    tool = "org.apache.kafka.tools.FeatureCommand"
    cluster = Cluster(tmp_path, 3).start()
    try:
        props = {i: read_meta_properties(n.log_dirs[0]) for i, n in cluster.nodes.items()}
        cid = props[1].cluster_id

        def finalized(i: int) -> int:
            with RawClient(cluster.nodes[i].port) as c:
                versions = c.call(18, 4, av.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            return {f.name: f.max_version_level for f in versions.finalized_features}.get("kraft.version", 0)

        assert [finalized(i) for i in (1, 2, 3)] == [0, 0, 0]
        assert _remove(cluster.nodes[1].port, cid, 3, uuid_from_str(props[3].directory_id)) is ErrorCode.unsupported_version
        # Through node 2, whichever node is the active controller.
        up = run_kafka_tool(tool, "--bootstrap-server", cluster.nodes[2].bootstrap, "upgrade", "--feature", "kraft.version=1")
        assert up.returncode == 0 and "kraft.version was upgraded to 1." in up.stdout, up.stdout + up.stderr
        wait_until(lambda: [finalized(i) for i in (1, 2, 3)] == [1, 1, 1], timeout=20, message="kraft.version 1 everywhere")
        with RawClient(cluster.nodes[1].port) as c:
            quorum = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
        voters = sorted((v.replica_id, v.replica_directory_id) for v in quorum.topics[0].partitions[0].current_voters)
        assert voters == [(i, uuid_from_str(props[i].directory_id)) for i in (1, 2, 3)]
        assert sorted((n.node_id, n.listeners[0].port) for n in quorum.nodes) == sorted(cluster.controller_ports.items())
        down = run_kafka_tool(tool, "--bootstrap-server", cluster.nodes[1].bootstrap, "downgrade", "--feature", "kraft.version=0")
        assert down.returncode != 0 and "because the new version is a downgrade" in down.stdout + down.stderr, down
        # The voter set lives in the log: a voter (not the leader) is removed, and metadata commits on.
        leader = quorum.topics[0].partitions[0].leader_id
        gone = next(i for i in (1, 2, 3) if i != leader)
        assert _remove(cluster.nodes[leader].port, cid, gone, uuid_from_str(props[gone].directory_id)) is ErrorCode.none
        stay = next(i for i in (1, 2, 3) if i != gone)
        _create(AdminClient({"bootstrap.servers": cluster.nodes[stay].bootstrap}), "after-upgrade")
        with RawClient(cluster.nodes[stay].port) as c:
            quorum = c.call(55, 2, topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),))
        assert sorted(v.replica_id for v in quorum.topics[0].partitions[0].current_voters) == sorted({1, 2, 3} - {gone})
    finally:
        for n in cluster.nodes.values():
            n.kill()
