"""The KRaft RPCs the core exchanges, as plain values carrying Kafka's field names.

One class per request/response of Vote (api 52, with KIP-996's PreVote),
BeginQuorumEpoch (53), EndQuorumEpoch (54) and Fetch (1) of
__cluster_metadata-0 (KIP-595: the leader answers a fetch whose last fetched
epoch diverges with DivergingEpoch instead of records; one below its log
start offset with a SnapshotId, fetched with FetchSnapshot, api 59). They hold exactly the
fields of the kio request/response partition entries the network driver will
build from them (kio/schema/<api>/vN); the core never encodes bytes.

`Envelope.correlation_id` pairs a response with its request, as the Kafka
request header does: a response whose request is no longer outstanding is
stale (delayed or duplicated) and is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from kavka.common import ErrorCode
from kavka.raft.api import SnapshotId
from kavka.raft.replicated_log import LogEntry


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str
    candidate_epoch: int  # replica_epoch; for a pre-vote, the epoch the sender would stand in
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    # KIP-853 VoterDirectoryId: the receiver's directory id in the candidate's voter set; a
    # receiver on another disk (its metadata dir wiped) is not that voter and refuses.
    voter_directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str
    replica_id: int  # ReplicaState.ReplicaId
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int  # what the follower knows; lets the leader park an idle fetch
    max_wait_ms: int
    replica_directory_id: str | None = None  # KIP-853 ReplicaDirectoryId: which disk of the replica fetches


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: ErrorCode
    leader_id: int | None  # CurrentLeader
    leader_epoch: int
    high_watermark: int
    records: tuple[LogEntry, ...]
    diverging_epoch: tuple[int, int] | None  # DivergingEpoch (epoch, end_offset)
    # SnapshotId: the fetch offset is below the leader's log start; fetch this snapshot.
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """FetchSnapshot (api 59): `max_bytes` of snapshot `snapshot_id` from byte `position`."""

    cluster_id: str
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: ErrorCode
    leader_id: int | None  # CurrentLeader
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int  # of the whole snapshot
    position: int  # of `data` within it
    data: bytes  # UnalignedRecords


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """DescribeQuorum's ReplicaState; timestamps in the driver's clock, -1 if never."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str | None = None  # KIP-853: the voter's metadata log dir (None: static quorum)


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum (api 55) for __cluster_metadata-0, as only the leader can answer it."""

    error_code: ErrorCode
    leader_id: int | None
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...] = ()
    # KIP-853: each voter's endpoints (node id, ((listener, host, port), ...))
    voter_endpoints: tuple[tuple[int, tuple[tuple[str, str, int], ...]], ...] = ()


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Envelope:
    src: int
    dst: int
    correlation_id: int
    message: Message
