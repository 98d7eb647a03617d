"""The core's RPC values <-> kio's generated KRaft messages, so a network driver only frames bytes.

Versions (what a Kafka 4.x controller sends): Vote v2 (KIP-996 PreVote),
BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18 (KIP-595 fetch of
__cluster_metadata-0 with ReplicaState, LastFetchedEpoch, DivergingEpoch,
SnapshotId; v18 adds the follower's HighWatermark the core parks on),
FetchSnapshot v1 (KIP-630: a chunk of a snapshot file as UnalignedRecords). Every request names
topic __cluster_metadata partition 0; Fetch names its topic id
(Kafka's fixed METADATA_TOPIC_ID). Records travel as record batch v2, one
batch per `append` (a control batch for the LeaderChange record), with the
batch's partition leader epoch the epoch it was written in.

`CODECS` is the whole mapping, one row per message type (its kio entity, encoder and decoder);
`encode` and `decode` only look a row up. `decode` raises ValueError on a message that is not one partition of
__cluster_metadata: a peer's bad bytes are its error, never ours. `refusal` is Kafka's answer to
such a request, where Kafka answers one.
Pure functions; any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.schema.begin_quorum_epoch.v1 import request as bqe_req
from kio.schema.begin_quorum_epoch.v1 import response as bqe_resp
from kio.schema.describe_quorum.v2 import response as dq_resp
from kio.schema.end_quorum_epoch.v1 import request as eqe_req
from kio.schema.end_quorum_epoch.v1 import response as eqe_resp
from kio.schema.fetch.v18 import request as fetch_req
from kio.schema.fetch.v18 import response as fetch_resp
from kio.schema.fetch_snapshot.v1 import request as fs_req
from kio.schema.fetch_snapshot.v1 import response as fs_resp
from kio.schema.types import BrokerId, TopicName
from kio.schema.vote.v2 import request as vote_req
from kio.schema.vote.v2 import response as vote_resp
from kio.static.primitive import i8, i32, i32Timedelta, i64, u16

from kavka.common import ErrorCode
from kavka.protocol.messages import make, uuid_from_str, uuid_to_str
from kavka.protocol.records import build_batch, decode_batch, iter_batches
from kavka.raft import messages as m
from kavka.raft.api import SnapshotId
from kavka.raft.quorum import METADATA_TOPIC
from kavka.raft.replicated_log import LogEntry

METADATA_TOPIC_UUID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID (0, 1)
_NO_LEADER = -1


def _bid(node: int | None) -> BrokerId:
    return BrokerId(_NO_LEADER if node is None else node)


def _node(bid: int) -> int | None:
    return None if bid < 0 else int(bid)


def _split_error(code: ErrorCode) -> tuple[ErrorCode, ErrorCode]:
    """(top-level, partition-level) codes: Kafka reports only INCONSISTENT_CLUSTER_ID at the top."""
    if code == ErrorCode.inconsistent_cluster_id:
        return ErrorCode(code), ErrorCode.none
    return ErrorCode.none, ErrorCode(code)


def _one(parts: tuple[Any, ...], what: str) -> Any:
    if len(parts) != 1:
        raise ValueError(f"{what}: expected one partition of {METADATA_TOPIC}, got {len(parts)}")
    return parts[0]


def _topic_name(topic: Any) -> str:
    return topic.topic_name


def _partition_index(part: Any) -> int:
    return part.partition_index


def _topic_partition(
    topics: tuple[Any, ...],
    what: str,
    *,
    name_of: Callable[[Any], str] | None = _topic_name,
    index_of: Callable[[Any], int] = _partition_index,
) -> Any:
    """The one partition entry, refused unless it is __cluster_metadata-0. Each message names its
    own fields: `name_of` reads the topic's name (None where the entry has none to check),
    `index_of` the partition's index."""
    topic = _one(topics, what)
    if name_of is not None and name_of(topic) != METADATA_TOPIC:
        raise ValueError(f"{what}: topic {name_of(topic)!r} is not {METADATA_TOPIC}")
    part = _one(topic.partitions, what)
    index = index_of(part)
    if index != 0:
        raise ValueError(f"{what}: partition {index} is not 0")
    return part


def encode_records(entries: tuple[LogEntry, ...]) -> bytes:
    out: list[bytes] = []
    i = 0
    while i < len(entries):
        j = i
        while j < len(entries) and entries[j].batch_base == entries[i].batch_base:
            j += 1
        batch = entries[i:j]
        out.append(
            build_batch(
                [(e.timestamp, e.key, e.value) for e in batch],
                base_offset=batch[0].offset,
                partition_leader_epoch=batch[0].epoch,
                is_control=batch[0].control,
            )
        )
        i = j
    return b"".join(out)


def decode_records(data: bytes | None) -> tuple[LogEntry, ...]:
    if not data:
        return ()
    entries: list[LogEntry] = []
    for pos, _header in iter_batches(data):
        header, records = decode_batch(data, pos)
        for r in records:
            entries.append(
                LogEntry(
                    r.offset,
                    header.partition_leader_epoch,
                    header.base_offset,
                    r.key,
                    r.value,
                    control=header.is_control,
                    timestamp=r.timestamp,
                )
            )
    return tuple(entries)


# ---------------------------------------------------------------------------- one entry per message
#
# Each message type has one `_Codec` row: the core's value class, the kio entity it travels as,
# and the two functions between them. `encode` and `decode` only look a row up; a type without a
# row is refused (TypeError for ours, ValueError for a peer's).


def _vote_request(msg: m.VoteRequest, destination: int) -> Any:
    part = vote_req.PartitionData(
        partition_index=i32(0),
        replica_epoch=i32(msg.candidate_epoch),
        replica_id=BrokerId(msg.candidate_id),
        replica_directory_id=None,
        voter_directory_id=uuid_from_str(msg.voter_directory_id) if msg.voter_directory_id else None,
        last_offset_epoch=i32(msg.last_offset_epoch),
        last_offset=i64(msg.last_offset),
        pre_vote=msg.pre_vote,
    )
    return vote_req.VoteRequest(
        cluster_id=msg.cluster_id,
        voter_id=BrokerId(destination),
        topics=(vote_req.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
    )


def _decode_vote_request(entity: vote_req.VoteRequest, request: m.Message | None) -> m.Message:
    p = _topic_partition(entity.topics, "Vote")
    return m.VoteRequest(
        cluster_id=entity.cluster_id or "",
        candidate_epoch=int(p.replica_epoch),
        candidate_id=int(p.replica_id),
        last_offset_epoch=int(p.last_offset_epoch),
        last_offset=int(p.last_offset),
        pre_vote=bool(p.pre_vote),
        voter_directory_id=_directory(p.voter_directory_id),
    )


def _vote_response(msg: m.VoteResponse, destination: int) -> Any:
    top, partition = _split_error(msg.error_code)
    part = vote_resp.PartitionData(
        partition_index=i32(0),
        error_code=partition,
        leader_id=_bid(msg.leader_id),
        leader_epoch=i32(msg.leader_epoch),
        vote_granted=msg.vote_granted,
    )
    return vote_resp.VoteResponse(
        error_code=top,
        topics=(vote_resp.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
    )


def _decode_vote_response(entity: vote_resp.VoteResponse, request: m.Message | None) -> m.Message:
    # A Vote response does not echo PreVote: it is the request's.
    pre_vote = isinstance(request, m.VoteRequest) and request.pre_vote
    if entity.error_code != ErrorCode.none or not entity.topics:
        return m.VoteResponse(ErrorCode(entity.error_code), None, -1, False, pre_vote)
    p = _topic_partition(entity.topics, "Vote response")
    return m.VoteResponse(ErrorCode(p.error_code), _node(p.leader_id), int(p.leader_epoch), bool(p.vote_granted), pre_vote)


def _begin_quorum_epoch_request(msg: m.BeginQuorumEpochRequest, destination: int) -> Any:
    part = bqe_req.PartitionData(
        partition_index=i32(0),
        voter_directory_id=None,
        leader_id=BrokerId(msg.leader_id),
        leader_epoch=i32(msg.leader_epoch),
    )
    return bqe_req.BeginQuorumEpochRequest(
        cluster_id=msg.cluster_id,
        voter_id=BrokerId(destination),
        topics=(bqe_req.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
        leader_endpoints=(),
    )


def _decode_begin_quorum_epoch_request(entity: bqe_req.BeginQuorumEpochRequest, request: m.Message | None) -> m.Message:
    p = _topic_partition(entity.topics, "BeginQuorumEpoch")
    return m.BeginQuorumEpochRequest(entity.cluster_id or "", int(p.leader_id), int(p.leader_epoch))


def _end_quorum_epoch_request(msg: m.EndQuorumEpochRequest, destination: int) -> Any:
    part = eqe_req.PartitionData(
        partition_index=i32(0),
        leader_id=BrokerId(msg.leader_id),
        leader_epoch=i32(msg.leader_epoch),
        preferred_candidates=tuple(
            eqe_req.ReplicaInfo(candidate_id=BrokerId(c), candidate_directory_id=None) for c in msg.preferred_successors
        ),
    )
    return eqe_req.EndQuorumEpochRequest(
        cluster_id=msg.cluster_id,
        topics=(eqe_req.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
        leader_endpoints=(),
    )


def _decode_end_quorum_epoch_request(entity: eqe_req.EndQuorumEpochRequest, request: m.Message | None) -> m.Message:
    p = _topic_partition(entity.topics, "EndQuorumEpoch")
    return m.EndQuorumEpochRequest(
        entity.cluster_id or "",
        int(p.leader_id),
        int(p.leader_epoch),
        tuple(int(c.candidate_id) for c in p.preferred_candidates),
    )


# BeginQuorumEpoch and EndQuorumEpoch responses have the same shape: (error, leader id, leader epoch).
_EpochResponse = m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse


def _epoch_response(schema: Any, response_cls: type, msg: _EpochResponse) -> Any:
    top, partition = _split_error(msg.error_code)
    part = schema.PartitionData(
        partition_index=i32(0),
        error_code=partition,
        leader_id=_bid(msg.leader_id),
        leader_epoch=i32(msg.leader_epoch),
    )
    return response_cls(
        error_code=top,
        topics=(schema.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
    )


def _decode_epoch_response(message_cls: type[_EpochResponse], entity: Any, what: str) -> m.Message:
    if entity.error_code != ErrorCode.none or not entity.topics:
        return message_cls(ErrorCode(entity.error_code), None, -1)
    p = _topic_partition(entity.topics, what)
    return message_cls(ErrorCode(p.error_code), _node(p.leader_id), int(p.leader_epoch))


def _fetch_request(msg: m.FetchRequest, destination: int) -> Any:
    part = fetch_req.FetchPartition(
        partition=i32(0),
        current_leader_epoch=i32(msg.current_leader_epoch),
        fetch_offset=i64(msg.fetch_offset),
        last_fetched_epoch=i32(msg.last_fetched_epoch),
        log_start_offset=i64(0),
        partition_max_bytes=i32(8 * 1024 * 1024),
        replica_directory_id=uuid_from_str(msg.replica_directory_id) if msg.replica_directory_id else None,
        high_watermark=i64(msg.high_watermark),
    )
    return fetch_req.FetchRequest(
        cluster_id=msg.cluster_id,
        replica_state=fetch_req.ReplicaState(replica_id=BrokerId(msg.replica_id), replica_epoch=i64(-1)),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=msg.max_wait_ms)),
        min_bytes=i32(0),
        max_bytes=i32(8 * 1024 * 1024),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(fetch_req.FetchTopic(topic_id=METADATA_TOPIC_UUID, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


def _decode_fetch_request(entity: fetch_req.FetchRequest, request: m.Message | None) -> m.Message:
    topic = _one(entity.topics, "Fetch")
    if topic.topic_id != METADATA_TOPIC_UUID:
        raise ValueError(f"Fetch: topic id {topic.topic_id} is not {METADATA_TOPIC}'s")
    p = _topic_partition(entity.topics, "Fetch", name_of=None, index_of=lambda part: part.partition)  # by topic id
    return m.FetchRequest(
        cluster_id=entity.cluster_id or "",
        replica_id=int(entity.replica_state.replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        fetch_offset=int(p.fetch_offset),
        last_fetched_epoch=int(p.last_fetched_epoch),
        high_watermark=int(p.high_watermark),
        max_wait_ms=int(entity.max_wait.total_seconds() * 1000),
        replica_directory_id=_directory(getattr(p, "replica_directory_id", None)),
    )


def _directory(value: Any) -> str | None:
    return uuid_to_str(value) if value is not None and value.int else None


def _fetch_response(msg: m.FetchResponse, destination: int) -> Any:
    top, partition = _split_error(msg.error_code)
    div = msg.diverging_epoch or (-1, -1)
    part = fetch_resp.PartitionData(
        partition_index=i32(0),
        error_code=partition,
        high_watermark=i64(msg.high_watermark),
        last_stable_offset=i64(msg.high_watermark),
        log_start_offset=i64(0),
        diverging_epoch=fetch_resp.EpochEndOffset(epoch=i32(div[0]), end_offset=i64(div[1])),
        current_leader=fetch_resp.LeaderIdAndEpoch(leader_id=_bid(msg.leader_id), leader_epoch=i32(msg.leader_epoch)),
        snapshot_id=fetch_resp.SnapshotId(
            end_offset=i64(msg.snapshot_id.end_offset if msg.snapshot_id else -1),
            epoch=i32(msg.snapshot_id.epoch if msg.snapshot_id else -1),
        ),
        aborted_transactions=None,
        preferred_read_replica=BrokerId(-1),
        records=encode_records(msg.records),
    )
    return fetch_resp.FetchResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)),
        error_code=top,
        session_id=i32(0),
        responses=(fetch_resp.FetchableTopicResponse(topic_id=METADATA_TOPIC_UUID, partitions=(part,)),),
    )


def _decode_fetch_response(entity: fetch_resp.FetchResponse, request: m.Message | None) -> m.Message:
    if entity.error_code != ErrorCode.none or not entity.responses:
        return m.FetchResponse(ErrorCode(entity.error_code), None, -1, 0, (), None)
    p = _topic_partition(entity.responses, "Fetch response", name_of=None)  # by topic id
    div = p.diverging_epoch
    snap = p.snapshot_id
    return m.FetchResponse(
        error_code=ErrorCode(p.error_code),
        leader_id=_node(p.current_leader.leader_id),
        leader_epoch=int(p.current_leader.leader_epoch),
        high_watermark=int(p.high_watermark),
        records=decode_records(p.records),
        diverging_epoch=None if div.epoch < 0 else (int(div.epoch), int(div.end_offset)),
        snapshot_id=None if snap.end_offset < 0 or snap.epoch < 0 else SnapshotId(int(snap.end_offset), int(snap.epoch)),
    )


def _fetch_snapshot_request(msg: m.FetchSnapshotRequest, destination: int) -> Any:
    part = fs_req.PartitionSnapshot(
        partition=i32(0),
        current_leader_epoch=i32(msg.current_leader_epoch),
        snapshot_id=fs_req.SnapshotId(end_offset=i64(msg.snapshot_id.end_offset), epoch=i32(msg.snapshot_id.epoch)),
        position=i64(msg.position),
        replica_directory_id=None,
    )
    return fs_req.FetchSnapshotRequest(
        cluster_id=msg.cluster_id,
        replica_id=BrokerId(msg.replica_id),
        max_bytes=i32(msg.max_bytes),
        topics=(fs_req.TopicSnapshot(name=TopicName(METADATA_TOPIC), partitions=(part,)),),
    )


def _decode_fetch_snapshot_request(entity: fs_req.FetchSnapshotRequest, request: m.Message | None) -> m.Message:
    # FetchSnapshot's topic entry calls its name `name`; it has never been checked (kept as it was).
    p = _topic_partition(entity.topics, "FetchSnapshot", name_of=None, index_of=lambda part: part.partition)
    if p.position < 0 or p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0:
        raise ValueError("FetchSnapshot: negative position or snapshot id")
    return m.FetchSnapshotRequest(
        cluster_id=entity.cluster_id or "",
        replica_id=int(entity.replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        snapshot_id=SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
        position=int(p.position),
        max_bytes=int(entity.max_bytes),
    )


def _fetch_snapshot_response(msg: m.FetchSnapshotResponse, destination: int) -> Any:
    top, partition = _split_error(msg.error_code)
    part = fs_resp.PartitionSnapshot(
        index=i32(0),
        error_code=partition,
        snapshot_id=fs_resp.SnapshotId(end_offset=i64(msg.snapshot_id.end_offset), epoch=i32(msg.snapshot_id.epoch)),
        current_leader=fs_resp.LeaderIdAndEpoch(leader_id=_bid(msg.leader_id), leader_epoch=i32(msg.leader_epoch)),
        size=i64(msg.size),
        position=i64(msg.position),
        unaligned_records=msg.data,
    )
    return fs_resp.FetchSnapshotResponse(
        throttle_time=i32Timedelta.parse(timedelta(0)),
        error_code=top,
        topics=(fs_resp.TopicSnapshot(name=TopicName(METADATA_TOPIC), partitions=(part,)),),
    )


def _decode_fetch_snapshot_response(entity: fs_resp.FetchSnapshotResponse, request: m.Message | None) -> m.Message:
    # An error answer carries no snapshot id or position of its own: they are the request's.
    asked = request if isinstance(request, m.FetchSnapshotRequest) else None
    if entity.error_code != ErrorCode.none or not entity.topics:
        return m.FetchSnapshotResponse(
            ErrorCode(entity.error_code),
            None,
            -1,
            asked.snapshot_id if asked else SnapshotId(-1, -1),
            -1,
            asked.position if asked else -1,
            b"",
        )
    p = _topic_partition(entity.topics, "FetchSnapshot response", name_of=None, index_of=lambda part: part.index)
    return m.FetchSnapshotResponse(
        error_code=ErrorCode(p.error_code),
        leader_id=_node(p.current_leader.leader_id),
        leader_epoch=int(p.current_leader.leader_epoch),
        snapshot_id=SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
        size=int(p.size),
        position=int(p.position),
        data=bytes(p.unaligned_records or b""),
    )


@dataclass(frozen=True, slots=True)
class _Codec:
    """One KRaft message: the core's value class <-> the kio entity it travels as."""

    message: type
    entity: type
    encode: Callable[[Any, int], Any]  # (message, destination node) -> entity
    decode: Callable[[Any, m.Message | None], m.Message]  # (entity, the request it answers) -> message


CODECS: tuple[_Codec, ...] = (
    _Codec(m.VoteRequest, vote_req.VoteRequest, _vote_request, _decode_vote_request),
    _Codec(m.VoteResponse, vote_resp.VoteResponse, _vote_response, _decode_vote_response),
    _Codec(
        m.BeginQuorumEpochRequest,
        bqe_req.BeginQuorumEpochRequest,
        _begin_quorum_epoch_request,
        _decode_begin_quorum_epoch_request,
    ),
    _Codec(
        m.BeginQuorumEpochResponse,
        bqe_resp.BeginQuorumEpochResponse,
        lambda msg, _dst: _epoch_response(bqe_resp, bqe_resp.BeginQuorumEpochResponse, msg),
        lambda e, _req: _decode_epoch_response(m.BeginQuorumEpochResponse, e, "BeginQuorumEpoch response"),
    ),
    _Codec(
        m.EndQuorumEpochRequest,
        eqe_req.EndQuorumEpochRequest,
        _end_quorum_epoch_request,
        _decode_end_quorum_epoch_request,
    ),
    _Codec(
        m.EndQuorumEpochResponse,
        eqe_resp.EndQuorumEpochResponse,
        lambda msg, _dst: _epoch_response(eqe_resp, eqe_resp.EndQuorumEpochResponse, msg),
        lambda e, _req: _decode_epoch_response(m.EndQuorumEpochResponse, e, "EndQuorumEpoch response"),
    ),
    _Codec(m.FetchRequest, fetch_req.FetchRequest, _fetch_request, _decode_fetch_request),
    _Codec(m.FetchResponse, fetch_resp.FetchResponse, _fetch_response, _decode_fetch_response),
    _Codec(m.FetchSnapshotRequest, fs_req.FetchSnapshotRequest, _fetch_snapshot_request, _decode_fetch_snapshot_request),
    _Codec(
        m.FetchSnapshotResponse, fs_resp.FetchSnapshotResponse, _fetch_snapshot_response, _decode_fetch_snapshot_response
    ),
)
_BY_MESSAGE: dict[type, _Codec] = {c.message: c for c in CODECS}
_BY_ENTITY: dict[type, _Codec] = {c.entity: c for c in CODECS}


def encode(msg: m.Message, *, destination: int) -> Any:
    """A kio request/response entity for `msg`, sent to node `destination`."""
    row = _BY_MESSAGE.get(type(msg))
    if row is None:
        raise TypeError(f"not a raft message: {type(msg).__name__}")
    return row.encode(msg, destination)


def decode(entity: Any, *, request: m.Message | None = None) -> m.Message:
    """The core's value for a kio KRaft request/response entity (ValueError if malformed).

    A Vote response does not echo PreVote, nor an error FetchSnapshot response its snapshot id:
    pass the request it answers.
    """
    row = _BY_ENTITY.get(type(entity))
    if row is None:
        raise ValueError(f"not a KRaft message: {type(entity).__name__}")
    return row.decode(entity, request)


def encode_describe_quorum(desc: m.QuorumDescription, wall_clock_offset_ms: int = 0) -> Any:
    """DescribeQuorumResponse v2 for the core's description (errors at partition level). The core's
    timestamps are on the driver's clock; `wall_clock_offset_ms` (wall clock minus that clock) makes
    them the epoch milliseconds Kafka's LastFetchTimestamp / LastCaughtUpTimestamp are (-1 stays)."""
    def wall(ts: int) -> i64:
        return i64(ts + wall_clock_offset_ms if ts >= 0 else ts)

    def states(replicas: tuple[m.ReplicaDescription, ...]) -> tuple[dq_resp.ReplicaState, ...]:
        return tuple(
            dq_resp.ReplicaState(
                replica_id=BrokerId(r.replica_id),
                replica_directory_id=uuid_from_str(r.directory_id) if r.directory_id else None,
                log_end_offset=i64(r.log_end_offset),
                last_fetch_timestamp=wall(r.last_fetch_timestamp),
                last_caught_up_timestamp=wall(r.last_caught_up_timestamp),
            )
            for r in replicas
        )

    voters = states(desc.current_voters)
    part = dq_resp.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode(desc.error_code),
        error_message=None,
        leader_id=_bid(desc.leader_id),
        leader_epoch=i32(desc.leader_epoch),
        high_watermark=i64(desc.high_watermark),
        current_voters=voters,
        observers=states(desc.observers),
    )
    return dq_resp.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message=None,
        topics=(dq_resp.TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(part,)),),
        nodes=tuple(
            dq_resp.Node(
                node_id=BrokerId(node_id),
                listeners=tuple(dq_resp.Listener(name=n, host=h, port=u16(p)) for n, h, p in listeners),
            )
            for node_id, listeners in desc.voter_endpoints
        ),
    )


API_VERSIONS: dict[type, int] = {
    vote_req.VoteRequest: 2,
    bqe_req.BeginQuorumEpochRequest: 1,
    eqe_req.EndQuorumEpochRequest: 1,
    fetch_req.FetchRequest: 18,
    fs_req.FetchSnapshotRequest: 1,
}
RESPONSE_SCHEMA: dict[type, type] = {
    vote_req.VoteRequest: vote_resp.VoteResponse,
    bqe_req.BeginQuorumEpochRequest: bqe_resp.BeginQuorumEpochResponse,
    eqe_req.EndQuorumEpochRequest: eqe_resp.EndQuorumEpochResponse,
    fetch_req.FetchRequest: fetch_resp.FetchResponse,
    fs_req.FetchSnapshotRequest: fs_resp.FetchSnapshotResponse,
}

# The requests Kafka's KafkaRaftClient answers with a top-level error when they are not about its
# one partition (hasValidTopicPartition: INVALID_REQUEST). FetchSnapshot's checks differ (a wrong
# partition is UNKNOWN_TOPIC_OR_PARTITION at partition level, a bad position POSITION_OUT_OF_RANGE):
# one `decode` refuses is closed instead.
_REFUSED_WITH_INVALID_REQUEST = (vote_req.VoteRequest, bqe_req.BeginQuorumEpochRequest, eqe_req.EndQuorumEpochRequest,
                                  fetch_req.FetchRequest)


def refusal(entity: Any, cluster_id: str) -> Any | None:
    """Kafka's response to a KRaft request entity that `decode` refused, or None (close the
    connection): a cluster id that is not `cluster_id` is INCONSISTENT_CLUSTER_ID, checked first
    as Kafka does (a null one is not checked: hasValidClusterId), anything else INVALID_REQUEST;
    the error at top level, no topics."""
    if not isinstance(entity, _REFUSED_WITH_INVALID_REQUEST):
        return None
    foreign = entity.cluster_id is not None and entity.cluster_id != cluster_id
    error = ErrorCode.inconsistent_cluster_id if foreign else ErrorCode.invalid_request
    return make(RESPONSE_SCHEMA[type(entity)], error_code=error, topics=(), responses=(), node_endpoints=(),
                throttle_time=i32Timedelta.parse(timedelta(0)), session_id=i32(0))
