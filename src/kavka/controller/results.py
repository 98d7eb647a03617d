"""The controller's request and result values: what a handler asks the QuorumController and what it gets back.

One small module of frozen values, shared by the managers that decide (replication_control,
cluster_control, configuration_control), the QuorumController that commits, the broker's request
handlers that translate them to and from Kafka's wire messages, and the broker's controller RPC code.
Each mirrors a Kafka request or response entry (named in its docstring); error codes are kio's
ErrorCode, messages Kafka's. Pure values: no I/O, nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

__all__ = [
    "ApiResult",
    "CreatedTopic",
    "NewTopic",
    "OngoingReassignment",
    "PartitionElection",
    "ReassignmentResult",
    "TopicElections",
]


@dataclass(frozen=True, slots=True)
class ApiResult:
    """An error code and Kafka's message for it (Kafka's ApiError); `ok` when there is none."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.none


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic of a CreateTopics request (CreatableTopic); -1 means the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """One topic's CreateTopics result (CreatableTopicResult)."""

    name: str
    result: ApiResult
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class PartitionElection:
    """One partition's ElectLeaders result (ElectLeadersResponse.PartitionResult)."""

    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TopicElections:
    """One topic's ElectLeaders results (ElectLeadersResponse.ReplicaElectionResult)."""

    topic: str
    partitions: tuple[PartitionElection, ...]


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """One partition's AlterPartitionReassignments result (ReassignablePartitionResponse)."""

    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition of ListPartitionReassignments' answer (OngoingPartitionReassignment)."""

    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
