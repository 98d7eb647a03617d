"""Remote log segment metadata: the events a RemoteLogMetadataManager stores and the cache every
broker replays them into.

KIP-405 keeps segment metadata apart from segment data so an eventually consistent object store is
enough: the leader announces each state change of a remote segment as an event, and any broker
(a restarted one, a follower, a new leader) rebuilds the same remote state by replaying the events
in order. Kafka's default manager appends them to the internal topic ``__remote_log_metadata``,
keyed by topic-partition so every event of a partition lands in one metadata partition, in order;
so does kavka's (tiered.topic_metadata.TopicBasedRemoteLogMetadataManager): this module is the
event format it writes and the replay it runs.

Event encoding (big-endian; version 0) -- kavka's own, Kafka's record *names* and *states*:

==========  =====  ===================================================================
field       type   meaning
==========  =====  ===================================================================
apiKey      int16  0 RemoteLogSegmentMetadataRecord, 1 RemoteLogSegmentMetadataUpdateRecord
version     int16  0
topicId     16B    topic UUID
partition   int32
segmentId   16B    RemoteLogSegmentId UUID
state       int8   RemoteLogSegmentState id
eventTs     int64  event timestamp (ms)
brokerId    int32  broker that wrote the event
apiKey 0 only:
startOff    int64, endOff int64, maxTs int64, size int64 (segment bytes)
epochs      int32 count, then (epoch int32, start offset int64) pairs
topic       int16 length + UTF-8 topic name
==========  =====  ===================================================================

Invariants the cache enforces (``RemoteLogMetadataCache.apply``): a segment is added only in
COPY_SEGMENT_STARTED; every update follows api.TRANSITIONS; an update for an unknown segment, or
an out-of-table transition, raises, so a corrupt metadata log is noticed rather than believed.
Only COPY_SEGMENT_FINISHED segments are readable; a STARTED one (a copy that died, e.g. kill -9)
is invisible to reads and listed by ``unfinished`` so the next leader deletes its data.

The cache is a plain object owned by one thread (the broker's event loop); it never does I/O.
"""

from __future__ import annotations

import bisect
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kavka.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
SEGMENT_METADATA = 0
SEGMENT_UPDATE = 1
_HEAD = struct.Struct(">hh16si16sbqi")
_ADD = struct.Struct(">qqqqi")
_EPOCH = struct.Struct(">iq")


class RemoteMetadataError(ValueError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLogSegmentMetadataUpdate:
    segment_id: RemoteLogSegmentId
    state: RemoteLogSegmentState
    event_timestamp_ms: int
    broker_id: int


MetadataEvent = RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate


def encode_event(event: MetadataEvent) -> bytes:
    sid = event.segment_id
    tp = sid.topic_id_partition
    api_key = SEGMENT_METADATA if isinstance(event, RemoteLogSegmentMetadata) else SEGMENT_UPDATE
    out = bytearray(_HEAD.pack(api_key, 0, tp.topic_id.bytes, tp.partition, sid.id.bytes,
                               int(event.state), event.event_timestamp_ms, event.broker_id))
    if isinstance(event, RemoteLogSegmentMetadata):
        epochs = sorted(event.segment_leader_epochs.items())
        out += _ADD.pack(event.start_offset, event.end_offset, event.max_timestamp_ms,
                         event.segment_size_in_bytes, len(epochs))
        for epoch, offset in epochs:
            out += _EPOCH.pack(epoch, offset)
        name = tp.topic.encode()
        out += struct.pack(">h", len(name)) + name
    return bytes(out)


def decode_event(buf: bytes, topic_names: dict[uuid.UUID, str] | None = None) -> MetadataEvent:
    """``topic_names`` supplies the name for update events, which carry only the topic id."""
    try:
        api_key, version, topic_id, partition, seg, state, ts, broker = _HEAD.unpack_from(buf, 0)
        if version != 0:
            raise RemoteMetadataError(f"unsupported remote metadata event version {version}")
        tid = uuid.UUID(bytes=topic_id)
        st = RemoteLogSegmentState(state)
        pos = _HEAD.size
        if api_key == SEGMENT_UPDATE:
            name = (topic_names or {}).get(tid, "")
            sid = RemoteLogSegmentId(TopicIdPartition(tid, name, partition), uuid.UUID(bytes=seg))
            return RemoteLogSegmentMetadataUpdate(segment_id=sid, state=st,
                                                  event_timestamp_ms=ts, broker_id=broker)
        if api_key != SEGMENT_METADATA:
            raise RemoteMetadataError(f"unknown remote metadata event apiKey {api_key}")
        start, end, max_ts, size, n = _ADD.unpack_from(buf, pos)
        pos += _ADD.size
        epochs = {}
        for _ in range(n):
            epoch, offset = _EPOCH.unpack_from(buf, pos)
            epochs[epoch] = offset
            pos += _EPOCH.size
        (name_len,) = struct.unpack_from(">h", buf, pos)
        name = bytes(buf[pos + 2:pos + 2 + name_len]).decode()
        if pos + 2 + name_len != len(buf):
            raise RemoteMetadataError("trailing or missing bytes in remote metadata event")
        sid = RemoteLogSegmentId(TopicIdPartition(tid, name, partition), uuid.UUID(bytes=seg))
        return RemoteLogSegmentMetadata(
            segment_id=sid, start_offset=start, end_offset=end, max_timestamp_ms=max_ts,
            broker_id=broker, event_timestamp_ms=ts, segment_size_in_bytes=size,
            segment_leader_epochs=epochs, state=st)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, RemoteMetadataError):
            raise
        raise RemoteMetadataError(f"corrupt remote metadata event: {e}") from e


class RemoteLogMetadataCache:
    """The remote state of one topic-partition, rebuilt by replaying its events in order."""

    def __init__(self) -> None:
        self._segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}
        # COPY_SEGMENT_FINISHED segments ordered by start offset, for reads
        self._starts: list[int] = []
        self._finished: list[RemoteLogSegmentMetadata] = []
        self.version = 0  # bumped by every applied event (callers cache what they derive)

    def apply(self, event: MetadataEvent) -> None:
        self.version += 1
        key = event.segment_id.id
        if isinstance(event, RemoteLogSegmentMetadata):
            if event.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                raise RemoteMetadataError(f"segment {key} added in state {event.state.name}")
            if key in self._segments:
                raise RemoteMetadataError(f"segment {key} added twice")
            self._segments[key] = event
            return
        current = self._segments.get(key)
        if current is None:
            raise RemoteMetadataError(f"update for unknown remote segment {key}")
        updated = current.with_state(event.state, event.event_timestamp_ms)
        self._segments[key] = updated
        if event.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            i = bisect.bisect_left(self._starts, updated.start_offset)
            self._starts.insert(i, updated.start_offset)
            self._finished.insert(i, updated)
        elif current.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            i = next(i for i, m in enumerate(self._finished) if m.segment_id.id == key)
            del self._starts[i]
            del self._finished[i]
        if event.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self._segments[key]

    def replay(self, events: Iterable[MetadataEvent]) -> None:
        for e in events:
            self.apply(e)

    def readable(self) -> list[RemoteLogSegmentMetadata]:
        """COPY_SEGMENT_FINISHED segments by start offset."""
        return list(self._finished)

    def unfinished(self) -> Iterator[RemoteLogSegmentMetadata]:
        """Segments whose copy or delete started and did not finish: data to delete."""
        for m in self._segments.values():
            if m.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                yield m

    def segment_for_offset(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The readable segment holding ``offset``, or the first one after it (a gap left by
        compaction or an aborted transaction); None past the highest copied offset."""
        i = max(0, bisect.bisect_right(self._starts, offset) - 1)
        for m in self._finished[i:]:
            if m.end_offset >= offset:
                return m
        return None

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """Kafka's highestOffsetInRemoteStorage: -1 when nothing is copied."""
        return max((m.end_offset for m in self._finished), default=-1)

    @property
    def remote_log_start_offset(self) -> int | None:
        return self._finished[0].start_offset if self._finished else None

    @property
    def remote_size_in_bytes(self) -> int:
        return sum(m.segment_size_in_bytes for m in self._finished)
