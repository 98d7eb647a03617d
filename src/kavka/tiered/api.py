"""The KIP-405 plugin seam: RemoteStorageManager and the remote segment metadata it is handed.

Owns the value objects shared by every backend and by the remote log metadata manager:

* ``RemoteLogSegmentId`` -- a topic-partition plus a random UUID, unique per *copy*: copying the
  same local segment twice yields two ids, so a retried copy never overwrites a segment another
  reader may already trust (KIP-405, "RemoteLogSegmentId").
* ``RemoteLogSegmentMetadata`` -- what is known about one remote segment: offsets, max timestamp,
  size, leader epochs and its ``RemoteLogSegmentState``.
* ``LogSegmentData`` -- the local files of one closed segment handed to ``copy_log_segment_data``:
  the ``.log``, its two indexes, the transaction index if any, the producer snapshot, the
  leader-epoch checkpoint bytes, and the seed's three remote index files (remote_index.py).

States and their transitions are Kafka's (``RemoteLogSegmentState``): a segment becomes readable
only in COPY_SEGMENT_FINISHED, so a copy that dies half way (kill -9) leaves a STARTED entry no
reader looks at, which the next pass deletes. ``TRANSITIONS`` is the table; anything not in it is
refused by ``check_transition``.

The protocol is narrow as Kafka's SPI: copy (idempotent for one id), fetch a byte range of a
segment, fetch one index, delete (idempotent: deleting what is gone is not an error). Backends are
called from the remote log manager's worker threads, never from the event loop; each backend must
be safe to call from several threads at once.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from kavka.common import TopicIdPartition


class RemoteStorageError(Exception):
    """A backend failed (after its own retries); the caller may retry the whole operation."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """The segment or index asked for is not in remote storage (Kafka's
    RemoteResourceNotFoundException)."""


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType`` plus the seed's three remote index files.

    The value is the file suffix the backends store the index under."""

    OFFSET = ".index"
    TIMESTAMP = ".timeindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    TRANSACTION = ".txnindex"
    LEADER_EPOCH = ".leader-epoch-checkpoint"
    REMOTE_LOG_INDEX = ".remoteLogIndex"
    REMOTE_OFFSET_INDEX = ".remoteOffsetIndex"
    REMOTE_TIME_INDEX = ".remoteTimeIndex"


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's ids (RemoteLogSegmentState.java), as written in __remote_log_metadata."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


S = RemoteLogSegmentState
# Kafka's RemoteLogSegmentState.isValidTransition: a copy may be abandoned straight into deletion.
TRANSITIONS: Mapping[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    S.COPY_SEGMENT_STARTED: frozenset({S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED}),
    S.COPY_SEGMENT_FINISHED: frozenset({S.DELETE_SEGMENT_STARTED}),
    S.DELETE_SEGMENT_STARTED: frozenset({S.DELETE_SEGMENT_FINISHED}),
    S.DELETE_SEGMENT_FINISHED: frozenset(),
}


class InvalidStateTransitionError(ValueError):
    pass


def check_transition(current: RemoteLogSegmentState, target: RemoteLogSegmentState) -> None:
    if target not in TRANSITIONS[current]:
        raise InvalidStateTransitionError(f"remote segment state {current.name} -> {target.name}")


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate(cls, tp: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(tp, uuid.uuid4())


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogSegmentMetadata:
    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int  # the last offset in the segment, inclusive (Kafka's endOffset)
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    # leader epoch -> first offset of that epoch inside the segment
    segment_leader_epochs: Mapping[int, int] = field(default_factory=dict)
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            raise ValueError(f"end offset {self.end_offset} < start offset {self.start_offset}")

    def with_state(self, state: RemoteLogSegmentState, event_timestamp_ms: int
                   ) -> RemoteLogSegmentMetadata:
        check_transition(self.state, state)
        return RemoteLogSegmentMetadata(
            segment_id=self.segment_id, start_offset=self.start_offset,
            end_offset=self.end_offset, max_timestamp_ms=self.max_timestamp_ms,
            broker_id=self.broker_id, event_timestamp_ms=event_timestamp_ms,
            segment_size_in_bytes=self.segment_size_in_bytes,
            segment_leader_epochs=self.segment_leader_epochs, state=state,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSegmentData:
    """Local files of one closed segment (Kafka's LogSegmentData) plus the seed's remote indexes."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes
    remote_log_index: Path | None = None
    remote_offset_index: Path | None = None
    remote_time_index: Path | None = None

    def files(self) -> dict[IndexType | None, Path | bytes]:
        """What a backend stores: ``None`` is the segment itself."""
        out: dict[IndexType | None, Path | bytes] = {
            None: self.log_segment,
            IndexType.OFFSET: self.offset_index,
            IndexType.TIMESTAMP: self.time_index,
            IndexType.PRODUCER_SNAPSHOT: self.producer_snapshot_index,
            IndexType.LEADER_EPOCH: self.leader_epoch_index,
        }
        optional = {
            IndexType.TRANSACTION: self.transaction_index,
            IndexType.REMOTE_LOG_INDEX: self.remote_log_index,
            IndexType.REMOTE_OFFSET_INDEX: self.remote_offset_index,
            IndexType.REMOTE_TIME_INDEX: self.remote_time_index,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


@runtime_checkable
class RemoteStorageManager(Protocol):
    """Kafka's RemoteStorageManager SPI. ``configure`` gets the ``rsm.config.*`` keys with the prefix
    removed. ``end_position`` in ``fetch_log_segment`` is inclusive, as in Kafka; ``None`` reads to
    the end of the segment."""

    def configure(self, configs: Mapping[str, str]) -> None: ...

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None: ...

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes: ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes: ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None: ...

    def close(self) -> None: ...


def check_range(start_position: int, end_position: int | None) -> None:
    """fetch_log_segment's byte range, checked the same way by every RemoteStorageManager."""
    if start_position < 0 or (end_position is not None and end_position < start_position):
        raise ValueError(f"bad range [{start_position}, {end_position}]")


def object_name(segment_id: RemoteLogSegmentId, index_type: IndexType | None) -> str:
    """The name every built-in backend stores a file under, relative to its root:
    ``<topic>-<partition>-<topic id>/<segment uuid>.log`` (or the index's suffix). Topic names
    cannot contain '/', so names never collide across partitions."""
    tp = segment_id.topic_id_partition
    suffix = ".log" if index_type is None else index_type.value
    return f"{tp.topic}-{tp.partition}-{tp.topic_id}/{segment_id.id}{suffix}"
