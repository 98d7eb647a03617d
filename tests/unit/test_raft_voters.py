"""KIP-853 in the raft core, one step at a time: the voter set in the log, AddRaftVoter and
RemoveRaftVoter's checks and error codes, a removed leader resigning, a wiped voter coming
back as an observer, and the VotersRecord format (raft/voters.py)."""

from __future__ import annotations

import random
import uuid

from kavka.common import ErrorCode
from kavka.protocol.messages import uuid_to_str
from kavka.raft import messages as m
from kavka.raft import snapshot as snapshots
from kavka.raft.api import SnapshotId
from kavka.raft.client import RaftClient, RaftConfig
from kavka.raft.state import EpochState, MemoryQuorumStateStore
from kavka.raft.voters import (
    VOTERS,
    VoterEndpoint,
    VoterNode,
    VoterSet,
    control_type,
    decode_voters,
    encode_voters,
    voters_in,
)
from kavka.testing import MemoryLog

CID = "test-cluster"
S = EpochState


def dir_id(n: int) -> str:
    return uuid_to_str(uuid.UUID(int=1000 + n))


def vs(*ids: int) -> VoterSet:
    return VoterSet.of([VoterNode(i, dir_id(i)) for i in ids])


def make(
    node_id: int,
    *,
    bootstrap: VoterSet | None,
    log: MemoryLog | None = None,
    directory: str | None = None,
) -> RaftClient:
    config = RaftConfig(
        node_id=node_id,
        voters=(1,),
        cluster_id=CID,
        directory_id=directory or dir_id(node_id),
        bootstrap_voters=bootstrap,
        dynamic=True,
    )
    return RaftClient(
        config, log or MemoryLog(), MemoryQuorumStateStore(), random.Random(node_id), now_ms=0
    )


def drive(
    nodes: dict[int, RaftClient], until_ms: int, *, start_ms: int = 0, step_ms: int = 5
) -> int:
    """Deliver every message at once and flush every log, in steps of `step_ms`."""
    now, pending = start_ms, []
    while now <= until_ms:
        inbox: dict[int, list[m.Envelope]] = {i: [] for i in nodes}
        for e in pending:
            if e.dst in inbox:
                inbox[e.dst].append(e)
        pending = []
        for i, c in nodes.items():
            r = c.poll(now, inbox[i])
            pending += r.outbound
            if r.flush_needed:
                c.log.flush()
        now += step_ms
    return now


def leader_of(nodes: dict[int, RaftClient]) -> RaftClient:
    leaders = [c for c in nodes.values() if c.state is S.LEADER]
    assert len(leaders) == 1, {i: c.state for i, c in nodes.items()}
    return leaders[0]


def test_voters_record_round_trips_in_kafkas_format() -> None:
    voters = VoterSet.of(
        [VoterNode(2, dir_id(2), (VoterEndpoint("CONTROLLER", "h2", 9093),)), VoterNode(1, None)]
    )
    key, value = encode_voters(voters)
    assert (
        key == b"\x00\x00\x00\x06" and control_type(key) == VOTERS
    )  # ControlRecordType KRAFT_VOTERS
    assert decode_voters(value) == voters and voters_in(key, value) == voters
    assert voters_in(None, None) is None  # kavka's keyless LeaderChange record


def test_first_leader_writes_the_bootstrap_set_and_a_joining_node_learns_it() -> None:
    nodes = {1: make(1, bootstrap=vs(1)), 2: make(2, bootstrap=None)}
    assert nodes[1].is_voter and nodes[1].kraft_version == 1
    assert not nodes[2].is_voter and nodes[2].voter_set() == VoterSet(())  # knows no voter yet
    drive(nodes, 3000)
    leader = leader_of(nodes)
    assert leader.node_id == 1
    sets = [voters_in(e.key, e.value) for e in leader.log.read(0, 10) if e.control]
    assert vs(1) in sets
    assert nodes[2].voter_set() == vs(1) and nodes[2].state is S.FOLLOWER


def test_add_voter_checks_in_kafkas_order_then_the_new_voter_counts() -> None:
    nodes = {1: make(1, bootstrap=vs(1)), 2: make(2, bootstrap=None), 3: make(3, bootstrap=None)}
    # Not the leader: NOT_LEADER_OR_FOLLOWER.
    assert (
        nodes[2].add_voter(VoterNode(2, dir_id(2)))[0] is ErrorCode.not_leader_or_follower
    )
    now = drive(nodes, 3000)
    leader = nodes[1]
    assert leader.add_voter(VoterNode(1, dir_id(1)))[0] is ErrorCode.duplicate_voter
    # A node that never fetched has not caught up.
    assert leader.add_voter(VoterNode(9, dir_id(9)))[0] is ErrorCode.request_timed_out
    error, offset = leader.add_voter(VoterNode(2, dir_id(2)))
    assert error is ErrorCode.none and offset >= leader.high_watermark
    assert leader.voter_set() == vs(1, 2)  # in force at once, before it commits
    # At most one change in flight.
    assert leader.add_voter(VoterNode(3, dir_id(3)))[0] is ErrorCode.request_timed_out
    now = drive(nodes, now + 2000, start_ms=now)
    assert leader.high_watermark > offset and nodes[2].is_voter
    error, offset = leader.add_voter(VoterNode(3, dir_id(3)))
    assert error is ErrorCode.none
    now = drive(nodes, now + 2000, start_ms=now)
    assert all(c.voter_set() == vs(1, 2, 3) for c in nodes.values())
    # The high watermark now needs two of three: with 2 and 3 cut off, nothing commits.
    end = leader.append([(b"k", b"v")], now_ms=now)
    for t in range(now, now + 400, 5):
        leader.poll(t)
        leader.log.flush()
    assert leader.high_watermark <= end


def test_remove_voter_checks_and_the_removed_leader_resigns_after_the_commit() -> None:
    nodes = {i: make(i, bootstrap=vs(1, 2, 3)) for i in (1, 2, 3)}
    now = drive(nodes, 5000)
    leader = leader_of(nodes)
    others = [i for i in nodes if i != leader.node_id]
    assert leader.remove_voter(7, dir_id(7))[0] is ErrorCode.voter_not_found
    # The right id with another directory id is not that voter either.
    assert leader.remove_voter(others[0], dir_id(50))[0] is ErrorCode.voter_not_found
    error, offset = leader.remove_voter(leader.node_id, dir_id(leader.node_id))
    assert error is ErrorCode.none and not leader.is_voter and leader.state is S.LEADER
    now = drive(nodes, now + 3000, start_ms=now)
    assert leader.state is not S.LEADER and not leader.is_voter
    new = leader_of(nodes)
    assert new.node_id in others and new.voter_set() == vs(*others)
    # The removed node follows as an observer, and the last voter cannot be removed.
    error, _ = new.remove_voter(
        others[0] if others[0] != new.node_id else others[1], None
    )
    assert error is ErrorCode.voter_not_found  # the directory id must match
    rest = [i for i in others if i != new.node_id][0]
    assert new.remove_voter(rest, dir_id(rest))[0] is ErrorCode.none
    now = drive(nodes, now + 2000, start_ms=now)
    assert (
        new.remove_voter(new.node_id, dir_id(new.node_id))[0]
        is ErrorCode.invalid_request
    )


def test_a_static_quorum_refuses_voter_changes() -> None:
    c = RaftClient(
        RaftConfig(node_id=1, voters=(1,), cluster_id=CID),
        MemoryLog(),
        MemoryQuorumStateStore(),
        random.Random(0),
        now_ms=0,
    )
    drive({1: c}, 3000)
    assert c.state is S.LEADER and c.kraft_version == 0
    assert c.add_voter(VoterNode(2, dir_id(2)))[0] is ErrorCode.unsupported_version
    assert c.remove_voter(1, None)[0] is ErrorCode.unsupported_version


def test_a_voter_whose_disk_was_wiped_comes_back_as_an_observer() -> None:
    nodes = {i: make(i, bootstrap=vs(1, 2, 3)) for i in (1, 2, 3)}
    now = drive(nodes, 5000)
    leader = leader_of(nodes)
    victim = next(i for i in nodes if i != leader.node_id)
    # Same node id, new directory id, formatted to join (no bootstrap checkpoint).
    nodes[victim] = make(victim, bootstrap=None, directory=dir_id(100 + victim))
    now = drive(nodes, now + 3000, start_ms=now)
    assert nodes[victim].voter_set() == vs(1, 2, 3) and not nodes[victim].is_voter
    assert nodes[victim].state is S.FOLLOWER  # it fetches, it never stands
    # Its fetches do not count for the voter it was: with the third node cut off, a new record
    # does not commit on the leader and the wiped replica alone.
    third = next(i for i in nodes if i not in (leader.node_id, victim))
    alive = {i: c for i, c in nodes.items() if i != third}
    end = leader.append([(b"k", b"v")], now_ms=now)
    now = drive(alive, now + 1500, start_ms=now)
    assert nodes[victim].log.end_offset > end and leader.high_watermark <= end
    # Nor does it vote as that voter: a vote request naming the old directory id is refused.
    ask = m.VoteRequest(CID, nodes[victim].epoch + 1, third, 2**20, 2**30, pre_vote=False, voter_directory_id=dir_id(victim))
    out = nodes[victim].poll(now, [m.Envelope(third, victim, 5, ask)]).outbound
    assert [e.message.vote_granted for e in out if isinstance(e.message, m.VoteResponse)] == [False]
    now = drive(nodes, now + 4000, start_ms=now)
    leader = leader_of(nodes)  # the cut-off leader may have resigned meanwhile
    assert leader.node_id != victim
    # Replace it: remove the old directory id, add the new one.
    assert leader.remove_voter(victim, dir_id(victim))[0] is ErrorCode.none
    now = drive(nodes, now + 2000, start_ms=now)
    error, _ = leader.add_voter(VoterNode(victim, dir_id(100 + victim)))
    assert error is ErrorCode.none
    drive(nodes, now + 2000, start_ms=now)
    assert nodes[victim].is_voter and nodes[victim].voter_set().get(victim) == VoterNode(
        victim, dir_id(100 + victim)
    )


def test_snapshots_carry_the_voter_set_and_a_restart_reads_it_back() -> None:
    log = MemoryLog()
    nodes = {1: make(1, bootstrap=vs(1), log=log), 2: make(2, bootstrap=None)}
    now = drive(nodes, 3000)
    assert nodes[1].add_voter(VoterNode(2, dir_id(2)))[0] is ErrorCode.none
    now = drive(nodes, now + 2000, start_ms=now)
    leader = leader_of(nodes)
    hw = leader.high_watermark
    sid = leader.create_snapshot(hw, [(b"k", b"v")])
    assert sid == SnapshotId(hw, leader.epoch)
    assert snapshots.decode_voters(leader.log.read_snapshot(sid)) == vs(1, 2)
    assert snapshots.decode(leader.log.read_snapshot(sid)) == [(b"k", b"v")]
    # Restarted without its bootstrap checkpoint, node 1 reads the set from the log and snapshot.
    restarted = make(leader.node_id, bootstrap=None, log=leader.log)
    assert restarted.voter_set() == vs(1, 2) and restarted.is_voter


def test_a_snapshot_of_a_static_quorum_has_no_voter_set() -> None:
    data = snapshots.encode(SnapshotId(3, 1), [(b"a", b"b")])
    assert snapshots.decode_voters(data) is None and snapshots.decode(data) == [(b"a", b"b")]


def test_update_voter_changes_endpoints_of_the_same_replica_only() -> None:
    nodes = {1: make(1, bootstrap=vs(1))}
    now = drive(nodes, 3000)
    c = nodes[1]
    moved = VoterNode(1, dir_id(1), (VoterEndpoint("CONTROLLER", "h", 19093),))
    assert c.update_voter(VoterNode(1, dir_id(9)))[0] is ErrorCode.voter_not_found
    error, offset = c.update_voter(moved)
    assert error is ErrorCode.none and offset >= 0 and c.voter_set().get(1) == moved
    assert c.update_voter(moved)[0] is ErrorCode.request_timed_out  # one change in flight
    now = drive({1: c}, now + 500, start_ms=now)
    assert c.update_voter(moved) == (ErrorCode.none, -1)  # nothing to change


def _static(node_id: int, log: MemoryLog | None = None) -> RaftClient:
    """A voter of the static quorum 1, 2, 3 whose metadata log dir has directory id dir_id(node_id)."""
    return RaftClient(
        RaftConfig(node_id=node_id, voters=(1, 2, 3), cluster_id=CID, directory_id=dir_id(node_id)),
        log or MemoryLog(),
        MemoryQuorumStateStore(),
        random.Random(node_id),
        now_ms=0,
    )


def _endpoints(*ids: int) -> dict[int, tuple[VoterEndpoint, ...]]:
    return {i: (VoterEndpoint("CONTROLLER", f"h{i}", 9000 + i),) for i in ids}


def test_upgrading_kraft_version_makes_a_static_quorum_dynamic() -> None:
    # Kafka 4.1's UpdateFeatures kraft.version=1: one control batch, KRaftVersionRecord 1 and the
    # static voters with the directory ids their fetches named; voter changes work afterwards.
    nodes = {i: _static(i) for i in (1, 2, 3)}
    now = drive(nodes, 5000)
    leader = leader_of(nodes)
    follower = next(c for c in nodes.values() if c is not leader)
    assert leader.kraft_version == 0
    assert follower.upgrade_kraft_version(1, _endpoints(1, 2, 3))[0] is ErrorCode.not_leader_or_follower
    error, message, _ = leader.upgrade_kraft_version(1, _endpoints(1, 2))  # no endpoint known for 3
    assert error is ErrorCode.invalid_update_version and "not all of the voters support it" in (message or "")
    assert leader.upgrade_kraft_version(1, _endpoints(1, 2, 3), validate_only=True)[0] is ErrorCode.none
    assert leader.kraft_version == 0  # validated only
    error, _, offset = leader.upgrade_kraft_version(1, _endpoints(1, 2, 3))
    assert error is ErrorCode.none and offset > 0
    now = drive(nodes, now + 2000, start_ms=now)
    assert leader.high_watermark > offset
    expected = VoterSet.of([VoterNode(i, dir_id(i), _endpoints(i)[i]) for i in (1, 2, 3)])
    for c in nodes.values():
        assert c.kraft_version == 1 and c.voter_set() == expected and c.is_voter
    batch = [e for e in leader.log.read(offset - 1, 2) if e.control]
    assert [control_type(e.key) for e in batch] == [5, VOTERS] and batch[0].batch_base == batch[1].batch_base
    assert leader.upgrade_kraft_version(1, _endpoints(1, 2, 3))[0] is ErrorCode.none  # already there: a no-op
    error, message, _ = leader.upgrade_kraft_version(0, {})
    assert error is ErrorCode.invalid_update_version and "downgrade" in (message or "")
    # The voter set lives in the log now: a voter can be removed, and a restarted node (its config
    # still the static one) keeps the dynamic quorum.
    gone = follower.node_id
    assert leader.remove_voter(gone, dir_id(gone))[0] is ErrorCode.none
    now = drive(nodes, now + 2000, start_ms=now)
    restarted = _static(gone, log=nodes[gone].log)
    assert restarted.kraft_version == 1 and not restarted.is_voter
    assert sorted(leader.voter_set().ids) == sorted(i for i in (1, 2, 3) if i != gone)


def test_a_new_voter_must_have_caught_up_on_the_disk_it_is_added_with() -> None:
    # Node 2 caught up as an observer; its disk is then lost and it comes back with another
    # directory id: it is not added with the new one on the old disk's fetches (Kafka's ReplicaKey).
    nodes = {1: make(1, bootstrap=vs(1)), 2: make(2, bootstrap=None)}
    now = drive(nodes, 3000)
    leader = nodes[1]
    nodes[2] = make(2, bootstrap=None, directory=dir_id(200))  # wiped: an empty log, a new directory id
    assert leader.add_voter(VoterNode(2, dir_id(200)))[0] is ErrorCode.request_timed_out
    now = drive(nodes, now + 1000, start_ms=now)  # the new disk fetches and catches up
    assert leader.add_voter(VoterNode(2, dir_id(200)))[0] is ErrorCode.none
