"""Leader epoch cache and its ``leader-epoch-checkpoint`` file.

Owns the mapping leader_epoch -> start offset of that epoch in this
partition's log (Kafka's ``LeaderEpochFileCache``, KIP-101/KIP-279). Used to
answer OffsetsForLeaderEpoch and to truncate followers correctly.

Invariants: entries are sorted with strictly increasing epochs and strictly
increasing start offsets; assigning an entry that breaks that removes the
conflicting tail first (``maybeTruncateNonMonotonicEntries``).

File format (``LeaderEpochCheckpointFile``), rewritten atomically on change::

    0            version
    2            number of entries
    0 0          epoch startOffset
    3 1200

Called from the broker's event-loop thread only.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

from kavka.storage.checkpoints import checkpoint_text, read_checkpoint_lines, write_checkpoint_lines
from kavka.storage.errors import CorruptCheckpointError

log = logging.getLogger("kavka.storage")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = list(entries or [])
        # What the file holds now (None: unknown, so the next flush writes).
        self._flushed: list[EpochEntry] | None = None
        # Set by LogManager while a new log's files wait for one write with the other new logs of
        # a metadata delta (`take_deferred`); flushes change only the cache meanwhile.
        self.deferred = False
        self._flush_requested = False  # while deferred
        self.unflushed = False  # an entry assigned with flush=False is not in the file yet

    @classmethod
    def load(cls, path: Path) -> LeaderEpochFileCache:
        entries: list[EpochEntry] = []
        for line in read_checkpoint_lines(path, version=0):
            parts = line.split()
            if len(parts) != 2:
                raise CorruptCheckpointError(path, f"malformed line {line!r}")
            try:
                entries.append(EpochEntry(int(parts[0]), int(parts[1])))
            except ValueError:
                raise CorruptCheckpointError(path, f"malformed line {line!r}") from None
        cache = cls(path)
        for entry in entries:
            cache._assign_no_flush(entry)
        if path.exists():
            cache._flushed = entries
        return cache

    # ------------------------------------------------------------------ queries

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which ``offset`` was written, if known."""
        starts = [e.start_offset for e in self._entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` exactly as Kafka's ``endOffsetFor``.

        The end offset of an epoch is the start offset of the next higher
        known epoch; the returned epoch is the largest known epoch <=
        ``requested_epoch``. Unknown -> (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            # A bootstrapping follower, or an old message format.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = self.latest_epoch
        if latest is not None and latest == requested_epoch:
            # The current epoch ends at the log end (a consumer may ask).
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi >= len(self._entries):
            # Larger than every known epoch.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[hi]
        if hi == 0:
            # Smaller than every known epoch: the best bound we have is the
            # start of the first larger epoch.
            return requested_epoch, higher.start_offset
        return self._entries[hi - 1].epoch, higher.start_offset

    # ------------------------------------------------------------------ updates

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """``flush=False``: the entry of an epoch that has no batch yet (a new leader's, at the
        log end). Every load drops such an entry (see `truncate_from_end`), so writing it buys
        nothing; it stays `unflushed` and is written with the epoch's first batch (the log's
        append calls `flush_if_unflushed`) or with the next change. A broker that creates or
        restarts with 10,000 partitions skips 10,000 file writes."""
        if epoch < 0 or start_offset < 0:
            return
        if self._assign_no_flush(EpochEntry(epoch, start_offset)):
            if flush:
                self._flush()
            else:
                self.unflushed = True

    def flush_if_unflushed(self) -> None:
        if self.unflushed:
            self._flush()

    def _assign_no_flush(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        if (
            latest is not None
            and entry.epoch == latest.epoch
            and entry.start_offset >= latest.start_offset
        ):
            return False  # Kafka's isUpdateNeeded
        # Remove anything that would break monotonicity: entries with an epoch
        # >= the new one, or a start offset >= the new one.
        removed = [
            e
            for e in self._entries
            if e.epoch >= entry.epoch or e.start_offset >= entry.start_offset
        ]
        if removed:
            log.info(
                "leader epoch cache %s: new entry %s removes conflicting entries %s",
                self.path,
                entry,
                removed,
            )
            self._entries = [e for e in self._entries if e not in removed]
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """Drop entries whose start offset >= ``end_offset`` (log truncation).

        ``flush=False`` (log loading) changes only the cache: every load
        truncates again, so entries left in the file beyond the log end are
        never believed, and the next change writes the file. An empty leader
        epoch -- ``(epoch, log end)``, the entry a leader adds when it takes
        over -- is dropped here and re-added by the leader a moment later;
        deferring the write saves two fsyncs per partition at startup.
        """
        if end_offset < 0:
            return
        latest = self.latest_entry
        if latest is not None and latest.start_offset >= end_offset:
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            if flush:
                self._flush()

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """Drop entries wholly below ``start_offset``; the last one dropped is
        kept with its start moved up to ``start_offset`` (log start advanced)."""
        if start_offset < 0:
            return
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
            return  # nothing wholly below the new start
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        if flush:
            self._flush()

    def clear_and_flush(self) -> None:
        self._entries = []
        self._flush()

    def take_deferred(self, *, keep_deferred: bool = False) -> tuple[bytes, list[EpochEntry]] | None:
        """End deferral: the file's new content and the entries it holds, if it changed (the
        caller writes it, then tells `written`), else None.

        ``keep_deferred``: the content is written in the background, so the cache stays
        deferred until `written` (a change meanwhile is written after it, never beside it)."""
        requested, self._flush_requested = self._flush_requested, False
        if not requested or self.path is None or self._entries == (self._flushed or []):
            self.deferred = False
            return None  # no write asked for, or nothing changed
        self.deferred = keep_deferred
        entries = list(self._entries)
        return checkpoint_text((f"{e.epoch} {e.start_offset}" for e in entries), version=0), entries

    def written(self, entries: list[EpochEntry]) -> None:
        """The file now holds `entries`. A change asked to be written while it was being written
        (still deferred) is written now."""
        self._flushed = entries
        self.unflushed = self.unflushed and self._entries != entries
        self.deferred = False
        if self._flush_requested:
            self._flush_requested = False
            self._flush()

    def rewrite_after_failed_write(self) -> None:
        """A background write of the file failed, or may not have landed: write it now."""
        self.deferred = False
        self._flush_requested = False
        self._flushed = None  # unknown
        self._flush()

    def _flush(self) -> None:
        if self.deferred:
            self._flush_requested = True
            return
        if self.path is not None and self._entries != self._flushed:
            write_checkpoint_lines(
                self.path, (f"{e.epoch} {e.start_offset}" for e in self._entries), version=0
            )
            self._flushed = list(self._entries)
        self.unflushed = False
