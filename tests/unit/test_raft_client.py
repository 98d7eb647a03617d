"""RaftClient transitions, one RPC at a time: messages in, state and messages out."""

from __future__ import annotations

import random

import pytest

from kavka.common import ErrorCode
from kavka.raft import messages as m
from kavka.raft.api import MetadataQuorum, NotLeaderError, SnapshotId
from kavka.raft.client import PollResult, RaftClient, RaftConfig
from kavka.raft.replicated_log import LogEntry
from kavka.raft.state import ElectionState, EpochState, MemoryQuorumStateStore
from kavka.testing import MemoryLog

CID = "test-cluster"
S = EpochState


def make(
    node_id: int = 1,
    voters: tuple[int, ...] = (1, 2, 3),
    *,
    log: MemoryLog | None = None,
    store: MemoryQuorumStateStore | None = None,
) -> RaftClient:
    config = RaftConfig(node_id=node_id, voters=voters, cluster_id=CID)
    return RaftClient(
        config, log or MemoryLog(), store or MemoryQuorumStateStore(), random.Random(0), now_ms=0
    )


def poll(c: RaftClient, now_ms: int, inbound: list[m.Envelope] | tuple = ()) -> PollResult:
    """poll, and if the core asks for a flush, flush at once and poll again (what a driver does)."""
    first = c.poll(now_ms, inbound)
    if not first.flush_needed:
        return first
    c.log.flush()
    second = c.poll(now_ms)
    return PollResult(first.outbound + second.outbound, second.next_deadline_ms)


def env(src: int, dst: int, msg: m.Message, corr: int = 99) -> m.Envelope:
    return m.Envelope(src, dst, corr, msg)


def replies(out: list[m.Envelope], kind: type) -> list:
    return [e.message for e in out if isinstance(e.message, kind)]


class Recorder:
    def __init__(self) -> None:
        self.commits: list[tuple[int, int, list]] = []
        self.leaders: list[tuple[int | None, int]] = []

    def handle_commit(self, base_offset: int, epoch: int, records: list) -> None:
        self.commits.append((base_offset, epoch, records))

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: object) -> None:
        raise AssertionError("no snapshots yet")

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leaders.append((leader_id, epoch))


def test_one_voter_elects_itself_and_commits_on_local_flush() -> None:
    c = make(1, (1,))
    rec = Recorder()
    c.register_listener(rec)
    assert isinstance(c, MetadataQuorum)
    r = c.poll(10_000)  # the election timer fires: prospective, candidate, leader at once
    assert c.state is S.LEADER and c.leader_and_epoch().epoch == 1 and c.leader_and_epoch().leader_id == 1
    # The core never fsyncs: it asks, and nothing commits until the flush is done.
    assert r.flush_needed and c.high_watermark == 0 and c.log.flushed_end_offset == 0
    c.log.flush()
    assert not c.poll(10_001).flush_needed and c.high_watermark == 1  # the LeaderChange record
    last = c.append([(b"a", b"1"), (None, b"2")], now_ms=10_001)
    assert last == 2 and c.poll(10_002).flush_needed and c.high_watermark == 1
    ticket = c.log.begin_flush()
    assert ticket is not None
    ticket.run()
    c.log.end_flush(ticket, ok=True)
    c.poll(10_003)
    assert c.log.flushed_end_offset == 3 and c.high_watermark == 3
    assert rec.commits == [(1, 1, [(1, b"a", b"1"), (2, None, b"2")])]
    assert rec.leaders == [(None, 1), (1, 1)]  # the candidate's epoch, then its win


def test_append_on_a_non_leader_raises() -> None:
    with pytest.raises(NotLeaderError):
        make().append([(b"k", b"v")], now_ms=0)


def test_config_refuses_repeated_or_no_voters_and_a_node_outside_them_is_an_observer() -> None:
    with pytest.raises(ValueError, match="controller.quorum.voters"):
        RaftConfig(node_id=1, voters=(1, 1, 2), cluster_id=CID)
    with pytest.raises(ValueError, match="controller.quorum.voters"):
        RaftConfig(node_id=1, voters=(), cluster_id=CID)
    assert RaftConfig(node_id=4, voters=(1, 2, 3), cluster_id=CID).node_id == 4


def test_wrong_cluster_id_and_non_voter_are_refused() -> None:
    c = make()
    bad = m.VoteRequest("other", 1, 2, 0, 0, pre_vote=False)
    out = poll(c, 1, [env(2, 1, bad), env(9, 1, m.VoteRequest(CID, 1, 9, 0, 0, pre_vote=False))]).outbound
    codes = [r.error_code for r in replies(out, m.VoteResponse)]
    assert codes == [ErrorCode.inconsistent_cluster_id, ErrorCode.inconsistent_voter_set]
    assert c.epoch == 0 and c.voted_id is None


def test_one_vote_per_epoch_and_it_is_durable() -> None:
    store = MemoryQuorumStateStore()
    c = make(store=store)
    out = poll(c, 1, [env(2, 1, m.VoteRequest(CID, 1, 2, 0, 0, pre_vote=False))]).outbound
    assert replies(out, m.VoteResponse)[0].vote_granted
    assert store.state == ElectionState(epoch=1, voted_id=2)
    out = poll(c, 2, [env(3, 1, m.VoteRequest(CID, 1, 3, 0, 0, pre_vote=False))]).outbound
    assert not replies(out, m.VoteResponse)[0].vote_granted
    # A restart keeps the vote: still no vote for 3 in epoch 1.
    again = make(store=store)
    out = poll(again, 3, [env(3, 1, m.VoteRequest(CID, 1, 3, 0, 0, pre_vote=False))]).outbound
    assert not replies(out, m.VoteResponse)[0].vote_granted and again.epoch == 1


def test_vote_refused_to_a_shorter_log() -> None:
    log = MemoryLog()
    log.append([LogEntry(0, 1, 0, None, None, control=True), LogEntry(1, 1, 1, b"k", b"v")])
    c = make(log=log, store=MemoryQuorumStateStore())
    out = poll(c, 1, [env(2, 1, m.VoteRequest(CID, 2, 2, 1, 1, pre_vote=False))]).outbound
    assert not replies(out, m.VoteResponse)[0].vote_granted
    assert c.epoch == 2  # the epoch is still learned


def test_pre_vote_never_changes_state() -> None:
    c = make()
    out = poll(c, 1, [env(2, 1, m.VoteRequest(CID, 1, 2, 0, 0, pre_vote=True))]).outbound
    resp = replies(out, m.VoteResponse)[0]
    assert resp.vote_granted and resp.pre_vote
    assert c.epoch == 0 and c.voted_id is None and c.state is S.UNATTACHED


def _elect(c: RaftClient, now: int = 5000) -> list[m.Envelope]:
    """Drive node c to leader of epoch 1 with grants from node 2."""
    out = poll(c, now).outbound
    assert c.state is S.PROSPECTIVE and replies(out, m.VoteRequest)[0].pre_vote
    poll(c, now + 1, [env(2, 1, m.VoteResponse(ErrorCode.none, None, 0, True, True), 0)])
    assert c.state is S.CANDIDATE and c.epoch == 1 and c.voted_id == 1
    out = poll(c, now + 2, [env(2, 1, m.VoteResponse(ErrorCode.none, None, 1, True, False), 0)]).outbound
    assert c.state is S.LEADER
    return out


def test_leader_high_watermark_needs_a_majority_and_its_own_epoch() -> None:
    c = make()
    out = _elect(c)
    assert {e.dst for e in out if isinstance(e.message, m.BeginQuorumEpochRequest)} == {2, 3}
    c.append([(b"a", b"1")], now_ms=5003)
    poll(c, 5004)
    assert c.high_watermark == 0  # only the leader has the records
    fetch = m.FetchRequest(CID, 2, 1, 1, 1, 0, 0)
    out = poll(c, 5005, [env(2, 1, fetch, 7)]).outbound
    resp = replies(out, m.FetchResponse)[0]
    assert [e.offset for e in resp.records] == [1] and resp.diverging_epoch is None
    assert c.high_watermark == 1  # node 2 has acknowledged the LeaderChange record at 0
    poll(c, 5006, [env(2, 1, m.FetchRequest(CID, 2, 1, 2, 1, 0, 0), 8)])
    assert c.high_watermark == 2


def test_a_new_leaders_first_record_is_kafkas_leader_change_and_records_carry_append_time() -> None:
    c = make()
    _elect(c, now=5000)
    first = c.log.read(0, 1)[0]
    # Kafka's readers (KafkaRaftClient, kafka-dump-log.sh) parse this record: the ControlRecordType
    # key (version 0, LEADER_CHANGE = 2) and LeaderChangeMessage v0, a flexible message: int16
    # Version, int32 LeaderId, compact arrays (length + 1) of {int32 VoterId, tags}, tags.
    assert first.control and first.key == bytes.fromhex("0000" "0002")
    assert first.value == bytes.fromhex(
        "0000" "00000001" "04" "0000000100" "0000000200" "0000000300" "03" "0000000100" "0000000200" "00"
    )
    assert first.timestamp == 5002  # the poll that made it leader
    c.append([(b"a", b"1")], now_ms=5003)
    assert c.log.read(1, 1)[0].timestamp == 5003
    # A node's core polls on a monotonic clock: its LeaderChange carries the wall clock (the
    # offset given); the controller appends with its wall clock, kept as it is.
    wall = RaftClient(RaftConfig(node_id=1, voters=(1,), cluster_id=CID), MemoryLog(), MemoryQuorumStateStore(),
                      random.Random(0), now_ms=0, wall_clock_offset_ms=1_795_000_000_000)
    wall.poll(10_000)
    wall.append([(b"a", b"1")], now_ms=1_795_000_010_001)
    assert [e.timestamp for e in wall.log.read(0, 2)] == [1_795_000_010_000, 1_795_000_010_001]


def test_records_of_older_epochs_commit_only_with_the_new_epochs_first_record() -> None:
    log = MemoryLog()
    log.append([LogEntry(i, 0, 0, b"old", b"old") for i in range(3)])
    c = make(log=log)
    _elect(c)  # LeaderChange at offset 3, epoch 1
    poll(c, 5003, [env(2, 1, m.FetchRequest(CID, 2, 1, 3, 0, 0, 0), 5)])
    assert c.high_watermark == 0  # a majority has 0..2, but none of epoch 1 yet
    poll(c, 5004, [env(2, 1, m.FetchRequest(CID, 2, 1, 4, 1, 0, 0), 6)])
    assert c.high_watermark == 4


def test_leader_answers_a_diverging_fetch_with_its_epoch_end() -> None:
    log = MemoryLog()
    log.append([LogEntry(0, 0, 0, b"x", b"x")])
    c = make(log=log)
    _elect(c)
    # The follower's last fetched epoch 0 ends at offset 1 here, but it asks from offset 4.
    out = poll(c, 6000, [env(2, 1, m.FetchRequest(CID, 2, 1, 4, 0, 0, 0), 5)]).outbound
    assert replies(out, m.FetchResponse)[0].diverging_epoch == (0, 1)
    out = poll(c, 6001, [env(3, 1, m.FetchRequest(CID, 3, 0, 1, 0, 0, 0), 6)]).outbound
    assert replies(out, m.FetchResponse)[0].error_code == ErrorCode.fenced_leader_epoch


def test_follower_truncates_on_diverging_epoch_and_refetches() -> None:
    log = MemoryLog()
    log.append([LogEntry(i, 1, 0, b"k", b"v") for i in range(5)])
    c = make(2, log=log)
    out = poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 2))]).outbound
    assert c.state is S.FOLLOWER and c.leader_id == 1 and c.epoch == 2
    fetch = [e for e in out if isinstance(e.message, m.FetchRequest)][0]
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (5, 1)
    diverge = m.FetchResponse(ErrorCode.none, 1, 2, 0, (), (1, 3))
    out = poll(c, 2, [env(1, 2, diverge, fetch.correlation_id)]).outbound
    assert c.log.end_offset == 3
    refetch = replies(out, m.FetchRequest)[0]
    assert refetch.fetch_offset == 3
    # A duplicate of the old response is stale: nothing changes.
    poll(c, 3, [env(1, 2, diverge, fetch.correlation_id)])
    assert c.log.end_offset == 3


def test_follower_appends_flushes_and_takes_the_leaders_high_watermark() -> None:
    c = make(2)
    out = poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 1))]).outbound
    fetch = [e for e in out if isinstance(e.message, m.FetchRequest)][0]
    records = (LogEntry(0, 1, 0, None, None, control=True), LogEntry(1, 1, 1, b"k", b"v"))
    poll(c, 2, [env(1, 2, m.FetchResponse(ErrorCode.none, 1, 1, 1, records, None), fetch.correlation_id)])
    assert c.log.end_offset == 2 and c.log.flushed_end_offset == 2 and c.high_watermark == 1


def test_follower_times_out_into_a_pre_vote_without_bumping_its_epoch() -> None:
    c = make(2)
    poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 3))])
    out = poll(c, 1 + c.config.fetch_timeout_ms).outbound
    assert c.state is S.PROSPECTIVE and c.epoch == 3
    pre = replies(out, m.VoteRequest)
    assert pre and all(r.pre_vote and r.candidate_epoch == 4 for r in pre)


def test_stale_begin_quorum_epoch_is_fenced() -> None:
    c = make(2)
    poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 5))])
    out = poll(c, 2, [env(3, 2, m.BeginQuorumEpochRequest(CID, 3, 4))]).outbound
    resp = replies(out, m.BeginQuorumEpochResponse)[0]
    assert resp.error_code == ErrorCode.fenced_leader_epoch and resp.leader_epoch == 5 and resp.leader_id == 1


def test_leader_without_a_quorum_resigns_and_ends_its_epoch() -> None:
    c = make()
    _elect(c)
    out = poll(c, 5002 + c.config.fetch_timeout_ms * 3 // 2 + 1).outbound
    assert c.state is S.RESIGNED
    assert {e.dst for e in out if isinstance(e.message, m.EndQuorumEpochRequest)} == {2, 3}
    with pytest.raises(NotLeaderError):
        c.append([(b"k", b"v")], now_ms=0)


def test_describe_quorum_is_the_leaders_view_of_its_voters() -> None:
    follower = make(2)
    assert follower.describe_quorum().error_code == ErrorCode.not_leader_or_follower
    c = make()
    _elect(c)
    poll(c, 5003, [env(2, 1, m.FetchRequest(CID, 2, 1, 1, 1, 0, 0), 5)])
    desc = c.describe_quorum()
    assert (desc.error_code, desc.leader_id, desc.leader_epoch, desc.high_watermark) == (ErrorCode.none, 1, 1, 1)
    by_id = {r.replica_id: r for r in desc.current_voters}
    assert by_id[2] == m.ReplicaDescription(2, 1, 5003, 5003)
    assert by_id[3] == m.ReplicaDescription(3, -1, -1, -1)
    assert by_id[1].log_end_offset == 1


def test_a_follower_whose_leader_connection_closed_stands_soon_and_grants_pre_votes() -> None:
    from kavka.raft.client import LEADER_LOSS_GRACE_MS as G

    c = make(2)
    out = poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 3))]).outbound
    fetch = next(e for e in out if isinstance(e.message, m.FetchRequest))
    poll(c, 2, [env(1, 2, m.FetchResponse(ErrorCode.none, 1, 3, 0, (), None), fetch.correlation_id)])
    assert c.state is S.FOLLOWER
    # While it hears from its leader it refuses pre-votes (KIP-996) ...
    out = poll(c, 3, [env(3, 2, m.VoteRequest(CID, 4, 3, 0, 0, pre_vote=True))]).outbound
    assert not replies(out, m.VoteResponse)[0].vote_granted
    c.peer_unreachable(3, 10)  # another voter: nothing changes
    out = poll(c, 11, [env(3, 2, m.VoteRequest(CID, 4, 3, 0, 0, pre_vote=True))]).outbound
    assert not replies(out, m.VoteResponse)[0].vote_granted
    # ... and once its connection to the leader closed, grants them and stands itself within the grace.
    c.peer_unreachable(1, 100)
    out = poll(c, 101, [env(3, 2, m.VoteRequest(CID, 4, 3, 0, 0, pre_vote=True))]).outbound
    assert replies(out, m.VoteResponse)[0].vote_granted and c.state is S.FOLLOWER
    assert poll(c, 100 + G - 1).next_deadline_ms <= 100 + 2 * G
    out = poll(c, 100 + 2 * G).outbound
    assert c.state is S.PROSPECTIVE and c.epoch == 3 and all(r.pre_vote for r in replies(out, m.VoteRequest))
    assert 100 + 2 * G < c.config.fetch_timeout_ms  # sooner than the fetch timeout


def test_an_unreachable_peer_that_is_not_the_leader_changes_nothing_for_a_follower() -> None:
    c = make(2)
    poll(c, 1, [env(1, 2, m.BeginQuorumEpochRequest(CID, 1, 3))])
    c.peer_unreachable(3, 5)
    poll(c, 5 + c.config.fetch_timeout_ms - 10)
    assert c.state is S.FOLLOWER


def test_fetch_requests_are_counted_on_arrival_not_when_a_parked_one_is_answered() -> None:
    """The controller's proof that a broker's node lives on after its heartbeat connection
    closed: new Fetch requests. A long-poll parked before the node died and answered later must
    not count (it did once: a dead node looked alive)."""
    c = make()
    _elect(c)
    assert c.fetch_requests_from(2) == 0
    poll(c, 5003, [env(2, 1, m.FetchRequest(CID, 2, 1, 1, 1, 0, 0), 5)])  # catches up
    assert c.fetch_requests_from(2) == 1
    # caught up: the next fetch is parked (max wait 500 ms) ...
    out = poll(c, 5004, [env(2, 1, m.FetchRequest(CID, 2, 1, 1, 1, 1, 500), 6)]).outbound
    assert replies(out, m.FetchResponse) == [] and c.fetch_requests_from(2) == 2
    # ... and answered when it expires, with no new request from node 2
    out = poll(c, 5600).outbound
    assert len(replies(out, m.FetchResponse)) == 1
    assert c.fetch_requests_from(2) == 2
    assert c.fetch_requests_from(3) == 0
    # a fenced epoch's request is not counted
    poll(c, 5601, [env(3, 1, m.FetchRequest(CID, 3, 0, 1, 0, 0, 0), 7)])
    assert c.fetch_requests_from(3) == 0


def test_quorum_contact_is_the_latest_time_a_majority_had_fetched() -> None:
    """What a combined node's broker dates its own controller's heartbeat answers by
    (broker.session_watch): the leader's last contact with a majority, counting itself; None
    when it is not the leader."""
    c = make()
    assert c.quorum_contact_ms() is None
    _elect(c, now=5000)
    assert c.quorum_contact_ms() == 5002  # the election: every voter counts as heard from then
    poll(c, 6000, [env(2, 1, m.FetchRequest(CID, 2, 1, 1, 1, 0, 0), 7)])
    assert c.quorum_contact_ms() == 6000  # node 2 and the leader are a majority of three
    poll(c, 7000, [env(3, 1, m.FetchRequest(CID, 3, 1, 1, 1, 0, 0), 8)])
    poll(c, 7500)
    assert c.quorum_contact_ms() == 7000  # the more recent of the other two
