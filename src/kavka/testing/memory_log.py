"""An in-memory ReplicatedLog that loses what was not flushed when the test crashes it.

Format: a list of `LogEntry` from `start_offset` (entries[i] has offset
start_offset + i), a flushed end offset, an epoch cache derived from the
entries, and snapshots as the bytes raft/snapshot.py encodes (durable the
moment they are written, as a fsynced file is). A `crash()` keeps only
entries below the flushed end offset -- the page cache lost in a hard kill,
as Kafka's simulation MockLog does -- and never reaches below the latest
snapshot (a log shorter than its snapshot restarts at the snapshot's end,
as Kafka's truncateToLatestSnapshot does at start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kavka.raft.api import SnapshotId
from kavka.raft.replicated_log import LogEntry


@dataclass(frozen=True, slots=True)
class MemoryFlush:
    target: int
    truncations: int

    def run(self) -> None:
        pass


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self._start = 0
        self._flushed = 0
        # Leader epoch cache: (epoch, start offset), epochs increasing.
        self._epochs: list[tuple[int, int]] = []
        self.snapshots: dict[SnapshotId, bytes] = {}
        self._latest: SnapshotId | None = None
        self._truncations = 0  # a flush begun before a truncation moves nothing

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self.entries)

    @property
    def last_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        return self._latest.epoch if self._latest is not None else 0

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest

    def entry(self, offset: int) -> LogEntry | None:
        i = offset - self._start
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def append(self, entries: Sequence[LogEntry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise ValueError(f"append at {e.offset}, log end offset is {self.end_offset}")
            if e.epoch < self.last_epoch:
                raise ValueError(f"epoch {e.epoch} below last epoch {self.last_epoch}")
            if not self._epochs or e.epoch > self._epochs[-1][0]:
                self._epochs.append((e.epoch, e.offset))
            self.entries.append(e)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._start:
            raise ValueError(f"truncation to {offset} below the log start offset {self._start}")
        del self.entries[offset - self._start :]
        self._truncations += 1
        self._flushed = min(self._flushed, offset)
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found = None
        for i, (ep, _start) in enumerate(self._epochs):
            if ep > epoch:
                break
            found = i
        if found is None:
            snap = self._latest
            if snap is not None and snap.epoch <= epoch:
                return snap.epoch, snap.end_offset
            return (0, self._start) if not self._epochs else (0, self._epochs[0][1])
        ep = self._epochs[found][0]
        end = self._epochs[found + 1][1] if found + 1 < len(self._epochs) else self.end_offset
        return ep, end

    def read(self, start_offset: int, max_entries: int) -> list[LogEntry]:
        i = start_offset - self._start
        if i < 0:
            raise ValueError(f"read at {start_offset} below the log start offset {self._start}")
        return self.entries[i : i + max_entries]

    def flush(self) -> None:
        self._flushed = self.end_offset

    def begin_flush(self) -> MemoryFlush | None:
        if self._flushed >= self.end_offset:
            return None
        return MemoryFlush(self.end_offset, self._truncations)

    def end_flush(self, ticket: MemoryFlush, *, ok: bool) -> None:
        if ok and ticket.truncations == self._truncations:
            self._flushed = max(self._flushed, min(ticket.target, self.end_offset))

    # ---- snapshots ---------------------------------------------------------------------------

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.snapshots[snapshot_id] = data

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        return self.snapshots.get(snapshot_id)

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        if self._latest is not None and snapshot_id.end_offset <= self._latest.end_offset:
            return
        self._latest = snapshot_id
        # Drop the log below the snapshot (Kafka's deleteBeforeSnapshot) and every snapshot
        # but this one and the one before it.
        self._advance_start(min(snapshot_id.end_offset, self.end_offset))
        for old in sorted(self.snapshots, key=lambda s: s.end_offset)[:-2]:
            del self.snapshots[old]

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.write_snapshot(snapshot_id, data)
        self.entries = []
        self._epochs = []
        self._truncations += 1
        self._start = self._flushed = snapshot_id.end_offset
        self._latest = None
        self.snapshot_frozen(snapshot_id)

    def _advance_start(self, offset: int) -> None:
        if offset <= self._start:
            return
        del self.entries[: offset - self._start]
        self._start = offset
        self._flushed = max(self._flushed, offset)
        # Kafka's LeaderEpochFileCache.truncateFromStart: the epoch in force at the new
        # start keeps an entry, moved up to it.
        kept = [(ep, s) for ep, s in self._epochs if s > offset]
        below = [(ep, s) for ep, s in self._epochs if s <= offset]
        if below and self.entries:
            kept.insert(0, (below[-1][0], offset))
        self._epochs = kept

    def crash(self) -> None:
        """A hard kill: everything not flushed is gone (never below the latest snapshot)."""
        if self._flushed < self._start:
            self.entries, self._epochs = [], []
            return
        self.truncate_to(self._flushed)
