"""Per-partition state of idempotent producers (Kafka's ProducerStateManager).

For each producer id the partition remembers the producer epoch and the
metadata of its last five batches (first/last sequence, first/last offset):
the window an idempotent producer may have in flight
(max.in.flight.requests.per.connection <= 5). That is enough to

- answer a retried batch with the offsets it was first written at, without
  writing it again (the broker side of exactly-once per partition);
- refuse a gap or reordering: OUT_OF_ORDER_SEQUENCE_NUMBER;
- refuse a fenced (older) producer epoch: INVALID_PRODUCER_EPOCH.

Sequences are per (producer id, partition) and wrap from Int32.MAX to 0. A new
epoch must start at sequence 0. The state is rebuilt from the batch headers of
the latest ``.snapshot`` file (written at each segment roll and at clean
shutdown) plus the batches after it, the first time a partition needs it, and
kept current on every append -- so dedup survives a restart, and compaction or
retention removing a producer's batches, without scanning the whole log.

Producer ids expire (KIP-854): `remove_expired` drops every producer whose
last batch's max timestamp is `producer.id.expiration.ms` or more before now,
as Kafka's removeExpiredProducers does; the broker calls it every
`producer.id.expiration.check.interval.ms` on each loaded state, so the map
cannot grow without bound with short-lived producers. A producer that comes
back after expiring is taken at its word (as one whose batches retention
removed). A producer with a transaction open never expires (Kafka's isProducerExpired).

Transactions (KIP-98): a transactional batch opens a transaction for its
producer (``current_txn_first_offset``: the batch's first offset) unless one is
open already; a non-transactional batch while one is open is refused
(INVALID_TXN_STATE). An end-transaction marker (protocol.control_records)
closes it and yields a `CompletedTxn` -- none if the producer had no open
transaction, as Kafka's ProducerAppendInfo.appendEndTxnMarker. A marker with
an older producer epoch is refused (INVALID_PRODUCER_EPOCH) and one with an
older coordinator epoch than the last marker's (TRANSACTION_COORDINATOR_FENCED),
except when replicated (a follower takes the leader's log as it is). The
lowest first offset of the open transactions is the log's first unstable
offset (`first_unstable_offset`), the start of the last stable offset.

Rebuilt by storage.log_loader (``rebuild_producer_state``) and kept current by
the unified Log (storage.unified_log), on the event-loop thread.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kavka.protocol.records import BatchHeader
from kavka.storage.checkpoints import write_atomically
from kavka.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: data in [first_offset, last_offset], the marker at last_offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _last_seq(h: BatchHeader) -> int:
    # The sequence of the batch's last record, wrapping at Int32.MAX (DefaultRecordBatch.lastSequence).
    return (h.base_sequence + h.last_offset_delta) % (INT32_MAX + 1)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class VerificationGuard:
    """KIP-890 part 1 (Kafka's VerificationStateEntry): the token a partition leader takes before
    asking the transaction coordinator whether a producer's transaction includes this partition.
    The append that follows a positive answer must still find this very guard: a marker written
    (or a newer epoch seen) in between clears it, so a batch verified before an abort marker
    cannot open a transaction after it. Compared by identity.

    `supports_epoch_bump` (transactions v2): the guard of a partition being added for the next
    transaction survives the previous transaction's marker when that marker carries the guard's
    epoch (the bumped epoch both share); any other marker clears it (Kafka's updateProducers).

    `lowest_sequence`: the lowest first sequence of the batches verified under this guard (Kafka's
    VerificationStateEntry.lowestSequence). While the guard stands, a batch of a producer the
    partition has no state for, with a higher first sequence, is refused
    OUT_OF_ORDER_SEQUENCE_NUMBER (`ProducerStateManager.check`) instead of being taken at its word:
    when the lowest one's verification failed with a retriable error (the coordinator busy:
    CONCURRENT_TRANSACTIONS) and a later one's passed, the later one would be appended first and
    the lowest one's retry refused for ever. The producer retries a refused batch that is not its
    next one. (Kafka refuses such a batch even where the partition knows the producer; there the
    sequence check refuses it anyway, and a guard a failed verification left behind cannot block a
    known producer.)"""

    __slots__ = ("producer_epoch", "supports_epoch_bump", "lowest_sequence")

    def __init__(self, producer_epoch: int, supports_epoch_bump: bool = False, lowest_sequence: int = 0) -> None:
        self.producer_epoch = producer_epoch
        self.supports_epoch_bump = supports_epoch_bump
        self.lowest_sequence = lowest_sequence


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction (mirrors the entries' field, so
        # the first unstable offset is a min over open transactions, not over every producer)
        self.ongoing_txns: dict[int, int] = {}
        # producer id -> the guard of a verification in flight (never persisted: a restarted
        # leader has none, and an append then needs a new verification)
        self.verification_guards: dict[int, VerificationGuard] = {}

    # ------------------------------------------------------------ KIP-890 verification

    def needs_verification(self, producer_id: int, producer_epoch: int) -> bool:
        """A transactional batch from `producer_id` at `producer_epoch` would open a transaction
        here: none is open, or the open one is of another epoch (Kafka's hasOngoingTransaction
        with the epoch: under transactions v2 the next transaction's batches carry the bumped
        epoch while the previous transaction's markers may still be on their way)."""
        return not self._ongoing_at(producer_id, producer_epoch)

    def _ongoing_at(self, producer_id: int, producer_epoch: int) -> bool:
        if producer_id not in self.ongoing_txns:
            return False
        entry = self.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == producer_epoch

    def start_verification(self, producer_id: int, producer_epoch: int, first_sequence: int, *,
                           supports_epoch_bump: bool = False) -> VerificationGuard:
        """The guard for a verification of `producer_id`'s batch at `producer_epoch` starting at
        `first_sequence`; a verification already in flight at the same epoch shares its guard,
        which keeps the lowest first sequence (Kafka's maybeCreateVerificationStateEntry)."""
        g = self.verification_guards.get(producer_id)
        if g is None or g.producer_epoch != producer_epoch:
            g = self.verification_guards[producer_id] = VerificationGuard(
                producer_epoch, supports_epoch_bump, first_sequence)
        elif first_sequence < g.lowest_sequence:
            g.lowest_sequence = first_sequence
        return g

    def verified(self, producer_id: int, producer_epoch: int, guard: VerificationGuard | None) -> bool:
        """May a transactional batch of `producer_id`/`producer_epoch`, verified under `guard`, be
        appended now? Yes while its transaction is open here; else only if `guard` is still the
        producer's guard, at that epoch."""
        if self._ongoing_at(producer_id, producer_epoch):
            return True
        g = self.verification_guards.get(producer_id)
        return guard is not None and g is guard and g.producer_epoch == producer_epoch

    def clear_verification(self, producer_id: int) -> None:
        self.verification_guards.pop(producer_id, None)

    @property
    def first_unstable_offset(self) -> int | None:
        """The lowest first offset of an open transaction; None if none is open."""
        return min(self.ongoing_txns.values(), default=None)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset once `completed` is complete (Kafka's lastStableOffset(CompletedTxn)):
        the first offset of the earliest other open transaction, else just past the marker."""
        others = [o for pid, o in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others, default=completed.last_offset + 1)

    def check(self, headers: Iterable[BatchHeader]) -> list[BatchMetadata | None]:
        """Validate the idempotent batches of one append, in order.

        Returns, per batch, the metadata of the original if it is a duplicate
        of a batch already in the log, else None. Raises on a sequence gap or
        a fenced epoch; nothing is changed either way.
        """
        staged: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last seq) within this append
        out: list[BatchMetadata | None] = []
        for h in headers:
            if h.producer_id < 0:
                out.append(None)
                continue
            entry = self.producers.get(h.producer_id)
            if h.is_control:
                # A marker's epoch may be newer (the coordinator bumped it on abort), never older.
                if entry is not None and h.producer_epoch < entry.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"marker of producer {h.producer_id} has epoch {h.producer_epoch}, older than the current epoch {entry.producer_epoch}"
                    )
                out.append(None)
                continue
            if h.base_sequence < 0:
                # A coordinator's transactional data batch (the group coordinator's TxnOffsetCommit,
                # Kafka's AppendOrigin.COORDINATOR; protocol.records refuses it from a client):
                # no sequence to check, only a fenced epoch.
                if entry is not None and h.producer_epoch < entry.producer_epoch:
                    raise InvalidProducerEpochError(
                        f"producer {h.producer_id} epoch {h.producer_epoch} is older than the current epoch {entry.producer_epoch}"
                    )
                out.append(None)
                continue
            if not h.is_transactional and entry is not None and entry.current_txn_first_offset is not None:
                raise InvalidTxnStateError(
                    f"non-transactional batch from producer {h.producer_id}, which has a transaction open"
                )
            cur_epoch, cur_last = staged.get(
                h.producer_id, (entry.producer_epoch, entry.last_seq) if entry else (-1, -1)
            )
            if (
                entry is not None
                and h.producer_id not in staged
                and h.producer_epoch == entry.producer_epoch
            ):
                dup = entry.find_duplicate(h.base_sequence, _last_seq(h))
                if dup is not None:
                    out.append(dup)
                    continue
            if cur_epoch >= 0 and h.producer_epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"producer {h.producer_id} epoch {h.producer_epoch} is older than the current epoch {cur_epoch}"
                )
            if cur_epoch < 0:
                # A producer this partition has no state for (a new one, or its batches removed by
                # retention, KIP-360) is taken at its word, as Kafka does -- but not past one of its
                # batches still to be verified (VerificationGuard.lowest_sequence).
                guard = self.verification_guards.get(h.producer_id)
                if guard is not None and h.base_sequence > guard.lowest_sequence:
                    raise OutOfOrderSequenceError(
                        f"out of order sequence for producer {h.producer_id} epoch {h.producer_epoch}: "
                        f"{h.base_sequence} while its batch at sequence {guard.lowest_sequence} is still to be verified"
                    )
            elif h.producer_epoch != cur_epoch:
                if h.base_sequence != 0:  # a new epoch starts at sequence 0
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id} epoch {h.producer_epoch} (current epoch {cur_epoch}): the first "
                        f"sequence of a new epoch must be 0, got {h.base_sequence}"
                    )
            elif h.base_sequence != _next_seq(cur_last):
                # (An epoch with no batch here yet -- its first was a marker, the transactions v2
                # marker carrying the bumped epoch -- starts at 0: Kafka's inSequence(-1, seq).)
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {h.producer_id} epoch {h.producer_epoch}: "
                    f"expected {_next_seq(cur_last)}, got {h.base_sequence}"
                )
            staged[h.producer_id] = (h.producer_epoch, _last_seq(h))
            out.append(None)
        return out

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is ``expiration_ms`` or older; returns how many."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def check_marker(self, h: BatchHeader, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced coordinator (Kafka's checkCoordinatorEpoch); the producer
        epoch is checked by `check`."""
        entry = self.producers.get(h.producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {h.producer_id} from coordinator epoch {coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    def _entry_for_epoch(self, producer_id: int, producer_epoch: int) -> ProducerStateEntry:
        # A new epoch forgets the old epoch's batches but not an open transaction
        # (Kafka's ProducerStateEntry.maybeUpdateProducerEpoch).
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, producer_epoch)
        elif producer_epoch != entry.producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()
        g = self.verification_guards.get(producer_id)
        if g is not None and g.producer_epoch < producer_epoch:
            del self.verification_guards[producer_id]  # a newer epoch: the old verification is stale
        return entry

    def update(self, h: BatchHeader) -> None:
        """Record a data batch written to the log (with its final offsets); markers go to
        `update_marker`."""
        if h.producer_id < 0 or h.is_control:
            return
        entry = self._entry_for_epoch(h.producer_id, h.producer_epoch)
        if h.base_sequence >= 0:  # a coordinator's batch has no sequence to remember
            entry.batches.append(
                BatchMetadata(h.base_sequence, _last_seq(h), h.base_offset, h.last_offset, h.max_timestamp)
            )
        entry.last_timestamp = h.max_timestamp
        if h.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing_txns[h.producer_id] = h.base_offset
            self.verification_guards.pop(h.producer_id, None)  # the transaction is open: used up

    def update_marker(self, h: BatchHeader, *, coordinator_epoch: int, is_abort: bool) -> CompletedTxn | None:
        """Record an end-transaction marker written at ``h.base_offset``: the transaction it
        closes, or None if the producer had none open (an empty transaction)."""
        entry = self._entry_for_epoch(h.producer_id, h.producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        # A marker ends whatever was verified before it (Kafka clears the VerificationStateEntry),
        # except a v2 guard of the marker's own (bumped) epoch: that is the next transaction's.
        g = self.verification_guards.get(h.producer_id)
        if g is None or not (g.supports_epoch_bump and g.producer_epoch == h.producer_epoch):
            self.verification_guards.pop(h.producer_id, None)
        entry.last_timestamp = h.max_timestamp
        first = entry.current_txn_first_offset
        if first is None:
            return None
        return CompletedTxn(h.producer_id, first, h.base_offset, is_aborted=is_abort)

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Forget the open transaction `completed` ended (after the caller indexed it)."""
        entry = self.producers.get(completed.producer_id)
        if entry is not None and entry.current_txn_first_offset == completed.first_offset:
            entry.current_txn_first_offset = None
        if self.ongoing_txns.get(completed.producer_id) == completed.first_offset:
            del self.ongoing_txns[completed.producer_id]


# --------------------------------------------------------------------------- snapshots
#
# ``<offset>.snapshot`` (20-digit offset: the log end offset the state is valid at), Kafka's
# ProducerStateManager snapshot, version 1:
#
#   version int16 = 1, crc int32 (CRC-32C of everything after it), entries int32 count, then per producer:
#   producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
#   timestamp int64, coordinator_epoch int32, current_txn_first_offset int64 (-1: no open transaction)
#
# As in Kafka, a snapshot keeps the last batch of each producer (last_sequence and last_offset -1
# for a producer whose current epoch has only written markers); the batches after the snapshot
# offset are replayed from the log on load. Written atomically (temp file + rename).

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hI")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")


def snapshot_path(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(dir: Path) -> list[int]:
    out = []
    for p in dir.iterdir():
        stem = p.name[: -len(SNAPSHOT_SUFFIX)]
        if p.name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def write_snapshot(dir: Path, offset: int, state: ProducerStateManager) -> Path:
    body = bytearray(struct.pack(">i", len(state.producers)))
    for pid, entry in sorted(state.producers.items()):
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        if entry.batches:
            last = entry.batches[-1]
            seq, last_offset, delta = last.last_seq, last.last_offset, last.last_offset - last.first_offset
        else:
            seq, last_offset, delta = -1, -1, 0
        body += _SNAP_ENTRY.pack(
            pid, entry.producer_epoch, seq, last_offset, delta, entry.last_timestamp, entry.coordinator_epoch, txn,
        )
    data = _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)
    path = snapshot_path(dir, offset)
    write_atomically(path, data)
    return path


def read_snapshot(path: Path) -> ProducerStateManager:
    """The state in a snapshot file; raises CorruptSnapshotError if it does not check out."""
    data = path.read_bytes()
    if len(data) < _SNAP_HEADER.size + 4:
        raise CorruptSnapshotError(f"{path}: truncated")
    version, crc = _SNAP_HEADER.unpack_from(data, 0)
    body = data[_SNAP_HEADER.size :]
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{path}: unknown snapshot version {version}")
    if crc32c(body) != crc:
        raise CorruptSnapshotError(f"{path}: CRC mismatch")
    (count,) = struct.unpack_from(">i", body, 0)
    if count < 0 or 4 + count * _SNAP_ENTRY.size != len(body):
        raise CorruptSnapshotError(f"{path}: bad entry count {count}")
    state = ProducerStateManager()
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn = _SNAP_ENTRY.unpack_from(
            body, 4 + i * _SNAP_ENTRY.size
        )
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=ts)
        if last_offset >= 0:
            first_seq = (last_seq - delta) % (INT32_MAX + 1)
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
        if txn >= 0:
            entry.current_txn_first_offset = txn
            state.ongoing_txns[pid] = txn
        state.producers[pid] = entry
    return state


class CorruptSnapshotError(ValueError):
    """A producer-state snapshot that cannot be trusted (the state is rebuilt from the log)."""
