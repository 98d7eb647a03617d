"""An in-memory ReplicatedLog that loses what was not flushed when the test crashes it.

Format: a list of `LogEntry` indexed by offset (offset == index; no log start
yet), a flushed end offset, and an epoch cache derived from the entries. A
`crash()` keeps only entries below the flushed end offset -- the page cache
lost in a hard kill, as Kafka's simulation MockLog does.
"""

from __future__ import annotations

from collections.abc import Sequence

from kavka.raft.replicated_log import LogEntry


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self._flushed = 0
        # Leader epoch cache: (epoch, start offset), epochs increasing.
        self._epochs: list[tuple[int, int]] = []

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else 0

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    def append(self, entries: Sequence[LogEntry]) -> None:
        for e in entries:
            if e.offset != len(self.entries):
                raise ValueError(f"append at {e.offset}, log end offset is {len(self.entries)}")
            if e.epoch < self.last_epoch:
                raise ValueError(f"epoch {e.epoch} below last epoch {self.last_epoch}")
            if not self._epochs or e.epoch > self._epochs[-1][0]:
                self._epochs.append((e.epoch, e.offset))
            self.entries.append(e)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.entries):
            return
        del self.entries[offset:]
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
            return (0, 0) if not self._epochs else (0, self._epochs[0][1])
        ep = self._epochs[found][0]
        end = self._epochs[found + 1][1] if found + 1 < len(self._epochs) else len(self.entries)
        return ep, end

    def read(self, start_offset: int, max_entries: int) -> list[LogEntry]:
        return self.entries[start_offset : start_offset + max_entries]

    def flush(self) -> None:
        self._flushed = len(self.entries)

    def crash(self) -> None:
        """A hard kill: everything not flushed is gone."""
        self.truncate_to(self._flushed)
