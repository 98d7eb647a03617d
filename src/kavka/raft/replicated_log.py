"""The log a raft voter replicates: the ReplicatedLog protocol and its entry type.

Invariants every implementation keeps (Kafka's ReplicatedLog):
- offsets are dense from 0 (no snapshots yet, so the log start offset is 0);
- each entry carries the leader epoch it was written in, and epochs never
  decrease along the log; the leader epoch cache is derived from them;
- `flushed_end_offset <= end_offset`; entries at or above it may be lost by a
  crash (`kavka.testing.MemoryLog.crash` does exactly that);
- `truncate_to(offset)` drops every entry at or above `offset` (a diverging
  follower, KIP-595); raft never truncates below its high watermark.

Entries are single records; `batch_base` groups the records one `append`
wrote so a listener receives the batch whole. Implementations: the in-memory
`kavka.testing.MemoryLog`; a file-backed one on kavka.storage.log.Log under
<metadata.log.dir>/__cluster_metadata-0/ is not written yet.
Called only by RaftClient, on the thread that polls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    batch_base: int
    key: bytes | None
    value: bytes | None
    # A control record (Kafka's LeaderChangeMessage, written at the start of every epoch).
    control: bool = False


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

    def flush(self) -> None: ...
