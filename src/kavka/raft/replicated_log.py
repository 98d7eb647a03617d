"""The log a raft voter replicates: the ReplicatedLog protocol and its entry type.

Invariants every implementation keeps (Kafka's ReplicatedLog):
- offsets are dense from `start_offset` to `end_offset`; `start_offset` is 0
  until a snapshot lets the prefix go, and then never above the latest
  snapshot's end offset (everything below it lives on only in snapshots);
- each entry carries the leader epoch it was written in, and epochs never
  decrease along the log; the leader epoch cache is derived from them;
- `flushed_end_offset <= end_offset`; entries at or above it may be lost by a
  crash (`kavka.testing.MemoryLog.crash` does exactly that). The fsync is
  split so it can run off the polling thread: `begin_flush` (owner thread)
  returns a ticket, `ticket.run()` fsyncs on any thread, `end_flush` (owner
  thread) moves `flushed_end_offset` -- unless the log was truncated since
  `begin_flush`, as the entries then on disk may not be the ones fsynced;
- `truncate_to(offset)` drops every entry at or above `offset` (a diverging
  follower, KIP-595); raft never truncates below its high watermark.

- snapshots (raft/snapshot.py bytes) are durable once `write_snapshot`
  returns; `snapshot_frozen` makes one the latest and may then drop the log
  below it and older snapshots (the newest and one earlier are kept);
  `install_snapshot` (a follower given one by FetchSnapshot) empties the log
  and restarts it at the snapshot's end offset. With the log empty after a
  snapshot, `last_epoch` is the snapshot's epoch.

Entries are single records; `batch_base` groups the records one `append`
wrote so a listener receives the batch whole. Implementations: the in-memory
`kavka.testing.MemoryLog`; `raft.file_log.FileReplicatedLog` on
kavka.storage.unified_log.Log under <metadata.log.dir>/__cluster_metadata-0/.
Called only by RaftClient, on the thread that polls it -- except
`write_snapshot`, which only writes a new file and may run on a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kavka.raft.api import SnapshotId


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    batch_base: int
    key: bytes | None
    value: bytes | None
    # A control record (Kafka's LeaderChangeMessage, written at the start of every epoch).
    control: bool = False
    # The record's timestamp (CreateTime): the leader's clock when it appended the record, as
    # Kafka's BatchAccumulator stamps it; followers keep the leader's. 0 in logs written before.
    timestamp: int = 0


class FlushTicket(Protocol):
    def run(self) -> None:
        """fsync what `begin_flush` picked; any thread; raises OSError if the disk fails."""
        ...


class ReplicatedLog(Protocol):
    @property
    def end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    @property
    def flushed_end_offset(self) -> int: ...

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append entries whose first offset is end_offset (as leader or as follower)."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch', end offset): the largest epoch <= `epoch` in the log and the offset where it ends."""
        ...

    def read(self, start_offset: int, max_entries: int) -> list[LogEntry]: ...

    def flush(self) -> None:
        """begin_flush + run + end_flush on this thread."""
        ...

    def begin_flush(self) -> FlushTicket | None:
        """A ticket to make everything appended so far durable; None if nothing is unflushed."""
        ...

    def end_flush(self, ticket: FlushTicket, *, ok: bool) -> None: ...

    @property
    def start_offset(self) -> int: ...

    @property
    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Make `data` durable as snapshot `snapshot_id` (any thread; not yet the latest)."""
        ...

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        """A written snapshot of committed records becomes the latest; old data may go."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None: ...

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Write, freeze and restart the (emptied) log at the snapshot's end offset."""
        ...
