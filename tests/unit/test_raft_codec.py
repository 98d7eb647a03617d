"""KRaft RPCs through kio and bytes: every core message survives encode -> frame bytes -> decode."""

from __future__ import annotations

import pytest

from kavka.common import ErrorCode
from kavka.protocol.framing import decode_body, encode_entity
from kavka.raft import codec
from kavka.raft import messages as m
from kavka.raft.api import SnapshotId
from kavka.raft.replicated_log import LogEntry

CID = "abcdefghijklmnopqrstuv"
ENTRIES = (
    LogEntry(10, 3, 10, None, None, control=True),
    LogEntry(11, 3, 11, b"k1", b"v1", timestamp=1_795_000_000_000),
    LogEntry(12, 3, 11, None, b"v2"),
    LogEntry(13, 4, 13, b"k3", None),
)

MESSAGES: list[m.Message] = [
    m.VoteRequest(CID, 5, 2, 4, 100, pre_vote=True),
    m.VoteRequest(CID, 5, 2, 4, 100, pre_vote=False),
    m.VoteResponse(ErrorCode.none, 3, 5, True, False),
    m.VoteResponse(ErrorCode.none, None, 5, False, False),
    m.BeginQuorumEpochRequest(CID, 1, 7),
    m.BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, 2, 8),
    m.EndQuorumEpochRequest(CID, 1, 7, (3, 2)),
    m.EndQuorumEpochResponse(ErrorCode.none, None, 7),
    m.FetchRequest(CID, 2, 7, 120, 6, 99, 500),
    m.FetchResponse(ErrorCode.none, 1, 7, 11, ENTRIES, None),
    m.FetchResponse(ErrorCode.none, 1, 7, 11, (), (4, 90)),
    m.FetchResponse(ErrorCode.not_leader_or_follower, None, 8, 0, (), None),
    m.VoteResponse(ErrorCode.inconsistent_voter_set, 1, 3, False, False),
    m.FetchResponse(ErrorCode.none, 1, 7, 500, (), None, SnapshotId(400, 6)),
    m.FetchSnapshotRequest(CID, 2, 7, SnapshotId(400, 6), 4096, 1 << 20),
    m.FetchSnapshotResponse(ErrorCode.none, 1, 7, SnapshotId(400, 6), 9000, 4096, b"\x00\x01chunk"),
    m.FetchSnapshotResponse(ErrorCode.snapshot_not_found, 1, 7, SnapshotId(400, 6), -1, 0, b""),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda x: type(x).__name__)
def test_round_trip_through_bytes(msg: m.Message) -> None:
    entity = codec.encode(msg, destination=3)
    wire = encode_entity(entity)
    back = decode_body(type(entity), wire, 0)
    assert codec.decode(back) == msg


def test_inconsistent_cluster_id_is_a_top_level_error() -> None:
    entity = codec.encode(m.VoteResponse(ErrorCode.inconsistent_cluster_id, None, -1, False, False), destination=2)
    assert entity.error_code == ErrorCode.inconsistent_cluster_id
    assert codec.decode(entity).error_code == ErrorCode.inconsistent_cluster_id


def test_vote_response_takes_pre_vote_from_its_request() -> None:
    req = m.VoteRequest(CID, 5, 2, 4, 100, pre_vote=True)
    resp = m.VoteResponse(ErrorCode.none, None, 4, True, True)
    entity = codec.encode(resp, destination=2)
    assert codec.decode(entity, request=req) == resp


def test_records_are_record_batches_split_per_append_with_control_and_epoch() -> None:
    from kavka.protocol.records import iter_batches

    data = codec.encode_records(ENTRIES)
    headers = [h for _pos, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (10, 3, True),
        (11, 3, False),
        (13, 4, False),
    ]
    assert codec.decode_records(data) == ENTRIES


def test_a_request_for_another_partition_is_refused() -> None:
    from dataclasses import replace

    entity = codec.encode(m.BeginQuorumEpochRequest(CID, 1, 7), destination=2)
    part = replace(entity.topics[0].partitions[0], partition_index=1)
    bad = replace(entity, topics=(replace(entity.topics[0], partitions=(part,)),))
    with pytest.raises(ValueError, match="partition 1"):
        codec.decode(bad)
    other = replace(entity, topics=(replace(entity.topics[0], topic_name="t"),))
    with pytest.raises(ValueError, match="is not __cluster_metadata"):
        codec.decode(other)
    # Kafka answers it (KafkaRaftClient.hasValidTopicPartition), a foreign cluster id first.
    for request, error in ((bad, ErrorCode.invalid_request), (replace(other, cluster_id=None), ErrorCode.invalid_request),
                           (replace(other, cluster_id="elsewhere"), ErrorCode.inconsistent_cluster_id)):
        answer = codec.refusal(request, CID)
        back = decode_body(type(answer), encode_entity(answer), 0)
        assert (back.error_code, back.topics) == (error, ())


def test_describe_quorum_response_encodes_as_kafkas_v2() -> None:
    desc = m.QuorumDescription(
        ErrorCode.none, 1, 4, 77, (m.ReplicaDescription(1, 80, 1000, 1000), m.ReplicaDescription(2, -1, -1, -1))
    )
    entity = codec.encode_describe_quorum(desc)
    back = decode_body(type(entity), encode_entity(entity), 0)
    part = back.topics[0].partitions[0]
    assert (back.topics[0].topic_name, part.leader_id, part.leader_epoch, part.high_watermark) == (
        "__cluster_metadata",
        1,
        4,
        77,
    )
    assert [(r.replica_id, r.log_end_offset, r.last_fetch_timestamp) for r in part.current_voters] == [
        (1, 80, 1000),
        (2, -1, -1),
    ]


def test_fetch_snapshot_with_a_negative_position_is_refused() -> None:
    entity = codec.encode(m.FetchSnapshotRequest(CID, 2, 7, SnapshotId(400, 6), 0, 100), destination=1)
    part = entity.topics[0].partitions[0]
    bad = type(entity)(
        cluster_id=CID,
        replica_id=entity.replica_id,
        max_bytes=entity.max_bytes,
        topics=(type(entity.topics[0])(name=entity.topics[0].name, partitions=(type(part)(
            partition=part.partition, current_leader_epoch=part.current_leader_epoch,
            snapshot_id=part.snapshot_id, position=-5),)),),
    )
    with pytest.raises(ValueError):
        codec.decode(bad)
    assert codec.refusal(bad, CID) is None  # Kafka words FetchSnapshot's errors otherwise: closed
