"""The aborted-transaction index of one segment: ``<base offset>.txnindex`` (Kafka's TransactionIndex).

Format: a plain sequence of 34-byte entries, big-endian, no header, no checksum
(Kafka's AbortedTxn)::

    version           int16   0
    producer_id       int64
    first_offset      int64   the aborted transaction's first data offset
    last_offset       int64   the offset of its ABORT marker
    last_stable_offset int64  the partition's LSO once this abort completed

Invariants: an entry is appended when an ABORT marker completing a non-empty
transaction lands in this segment, so last offsets increase through the file
and every last offset lies in the segment (the first offset may lie in an
earlier segment). The file exists only once an entry was written: a missing
file is an empty index. It is truncated with its segment (entries whose last
offset is at or above the truncation point go) and deleted with it.

The index is rebuilt from the log, never trusted blindly: a file whose size is
not a multiple of 34, or holding an unknown version or last offsets that go
backwards, is a CorruptIndexError, and the log rebuilds it by replaying the
markers (storage.log_loader). A read_committed fetch asks
`collect_aborted_txns` which aborted transactions overlap the range it returns.

Owned by its LogSegment; called on the broker's event-loop thread. Appends are
written through at once (one ``os.write`` each, no fsync): the segment's flush
fsyncs the file with the ``.log``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kavka.storage.errors import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
assert ENTRY_SIZE == 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a range; `complete` once an entry's LSO reached the
    range's upper bound, so no later segment can hold one that overlaps it (Kafka's search result)."""

    aborted: list[AbortedTxn]
    complete: bool


def parse_entries(data: bytes, name: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes (a local one, or a copy fetched from remote
    storage); CorruptIndexError if they do not parse."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{name}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
    out: list[AbortedTxn] = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"{name}: entry at {pos} has unknown version {version}")
        if first > last or (out and last <= out[-1].last_offset):
            raise CorruptIndexError(f"{name}: entry at {pos} is out of order ({first}..{last})")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect_overlapping(entries: list[AbortedTxn], fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
    """Aborted transactions with data in [fetch_offset, upper_bound_offset) (Kafka's collectAbortedTxns)."""
    found: list[AbortedTxn] = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
            found.append(e)
        if e.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)


class TransactionIndex:
    """Entries are read from the file on first use and kept in memory (a segment holds few)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return parse_entries(data, str(self.path))

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file does not parse (it is then rebuilt)."""
        self._entries = self._load()

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} is not after the last one "
                f"({entries[-1].last_offset})"
            )
        data = _ENTRY.pack(ABORTED_TXN_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above `offset` (Kafka's truncateTo)."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._rewrite(keep)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.path.unlink(missing_ok=True)
        self._entries = []

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.reset()
            return
        with open(self.path, "r+b") as f:
            f.truncate(len(entries) * ENTRY_SIZE)
        self._entries = list(entries)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions with data in [fetch_offset, upper_bound_offset) (Kafka's collectAbortedTxns)."""
        return collect_overlapping(self.entries, fetch_offset, upper_bound_offset)

    def flush(self) -> None:
        if self._entries:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Forget the loaded entries (nothing is held open)."""
        self._entries = None
