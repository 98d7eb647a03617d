"""A model partition for the seeded tiered-storage simulation (tests/simulation/test_tiered_simulation.py).

`Partition` drives the remote log manager's pure planners (`segments_to_copy`,
`local_segments_to_delete`, `remote_segments_to_delete`) the way the remote log manager does,
over a list of local segment views and a `RemoteLogMetadataCache` fed by encoded
__remote_log_metadata events: produce, copy (sometimes killed half way: COPY_SEGMENT_STARTED
without FINISHED), clean unfinished copies, local retention, total retention, restart (the cache
rebuilt by replaying the events). `check()` asserts the invariants after every step (InvariantViolation, named): no offset at
or above the log start offset is ever in neither tier, no segment is deleted locally before it
was copied, only finished copies are readable. Every choice comes from the `random.Random` the test seeds. Used by tests only.
"""

from __future__ import annotations

import random
import uuid

from kavka.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kavka.tiered.metadata import (
    RemoteLogMetadataCache,
    RemoteLogSegmentMetadataUpdate,
    decode_event,
    encode_event,
)
from kavka.tiered.remote_log_rules import (
    LocalSegmentView,
    TieredTopicConfig,
    local_segments_to_delete,
    remote_segments_to_delete,
    segments_to_copy,
)

S = RemoteLogSegmentState
TP = TopicIdPartition(uuid.UUID(int=99), "tiered", 2)


def view(base: int, last: int, size: int = 100, ts: int = 0) -> LocalSegmentView:
    return LocalSegmentView(base_offset=base, last_offset=last, size_in_bytes=size,
                            largest_timestamp_ms=ts)


def update(md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
           ) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(segment_id=md.segment_id, state=state,
                                          event_timestamp_ms=7, broker_id=1)


class InvariantViolation(AssertionError):
    pass


class Partition:
    """A model partition driven by the planner the way the remote log manager will drive it."""

    def __init__(self, rng: random.Random, config: TieredTopicConfig) -> None:
        self.rng = rng
        self.config = config
        self.local: list[LocalSegmentView] = [view(0, -1, size=0)]
        self.log_start = 0
        self.events: list[bytes] = []  # the __remote_log_metadata partition, encoded
        self.cache = RemoteLogMetadataCache()
        self.now = 0
        self.ever_deleted_uncopied = False

    @property
    def leo(self) -> int:
        return self.local[-1].last_offset + 1

    def emit(self, event: object) -> None:
        raw = encode_event(event)  # type: ignore[arg-type]
        self.events.append(raw)
        self.cache.apply(decode_event(raw, {TP.topic_id: TP.topic}))

    def produce(self) -> None:
        n = self.rng.randint(1, 20)
        a = self.local[-1]
        self.local[-1] = view(a.base_offset, a.last_offset + n, a.size_in_bytes + 10 * n, self.now)
        if self.local[-1].size_in_bytes > 100:
            self.local.append(view(self.leo, self.leo - 1, 0, self.now))

    def copy(self) -> None:
        lso = self.leo - self.rng.randint(0, 15)  # an open transaction may hold it back
        for seg in segments_to_copy(self.local, highest_copied_offset=
                                    self.cache.highest_offset_in_remote_storage,
                                    last_stable_offset=lso):
            md = RemoteLogSegmentMetadata(
                segment_id=RemoteLogSegmentId.generate(TP), start_offset=seg.base_offset,
                end_offset=seg.last_offset, max_timestamp_ms=seg.largest_timestamp_ms,
                broker_id=1, event_timestamp_ms=self.now, segment_size_in_bytes=seg.size_in_bytes)
            self.emit(md)
            if self.rng.random() < 0.15:
                return  # kill -9 mid-copy: STARTED stays, FINISHED never comes
            self.emit(update(md, S.COPY_SEGMENT_FINISHED))

    def clean_unfinished(self) -> None:
        for md in list(self.cache.unfinished()):
            if md.state is S.COPY_SEGMENT_STARTED:
                self.emit(update(md, S.DELETE_SEGMENT_STARTED))
            self.emit(update(md, S.DELETE_SEGMENT_FINISHED))

    def local_retention(self) -> None:
        highest = self.cache.highest_offset_in_remote_storage
        doomed = local_segments_to_delete(self.local, config=self.config,
                                          highest_copied_offset=highest, now_ms=self.now)
        for seg in doomed:
            if seg.last_offset > highest:
                self.ever_deleted_uncopied = True
        self.local = self.local[len(doomed):]

    def total_retention(self) -> None:
        highest = self.cache.highest_offset_in_remote_storage
        local_only = sum(s.size_in_bytes for s in self.local if s.last_offset > highest)
        exp = remote_segments_to_delete(
            self.cache.readable(), config=self.config, log_start_offset=self.log_start,
            local_only_bytes=local_only, now_ms=self.now)
        assert exp.new_log_start_offset >= self.log_start
        # Kafka moves the log start offset before deleting, so no reader is sent to a doomed one
        self.log_start = exp.new_log_start_offset
        for md in exp.delete:
            self.emit(update(md, S.DELETE_SEGMENT_STARTED))
            self.emit(update(md, S.DELETE_SEGMENT_FINISHED))
        # the local "log start offset breach" pass (Log.delete_retention_segments)
        while len(self.local) > 1 and self.local[1].base_offset <= self.log_start:
            self.local.pop(0)

    def restart(self) -> None:
        fresh = RemoteLogMetadataCache()
        fresh.replay(decode_event(raw, {TP.topic_id: TP.topic}) for raw in self.events)
        assert fresh.readable() == self.cache.readable()
        assert list(fresh.unfinished()) == list(self.cache.unfinished())
        self.cache = fresh

    def check(self) -> None:
        if self.ever_deleted_uncopied:
            raise InvariantViolation("a local segment was deleted before it was copied to remote storage")
        local_start = self.local[0].base_offset
        if self.log_start > self.leo:
            raise InvariantViolation(f"log start offset {self.log_start} past the log end {self.leo}")
        # every offset from the log start to the local log start is in a readable remote segment
        offset = self.log_start
        while offset < local_start:
            md = self.cache.segment_for_offset(offset)
            if md is None or md.start_offset > offset:
                raise InvariantViolation(
                    f"offset {offset} is in neither tier (log start {self.log_start}, local start {local_start})")
            offset = md.end_offset + 1
        for md in self.cache.readable():
            if md.state is not S.COPY_SEGMENT_FINISHED:
                raise InvariantViolation(f"a remote segment in state {md.state.name} is readable")
