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
removed). Rebuilt by storage.log_loader (``rebuild_producer_state``) and kept current by
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
from kavka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

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


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(self, headers: Iterable[BatchHeader]) -> list[BatchMetadata | None]:
        """Validate the idempotent batches of one append, in order.

        Returns, per batch, the metadata of the original if it is a duplicate
        of a batch already in the log, else None. Raises on a sequence gap or
        a fenced epoch; nothing is changed either way.
        """
        staged: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last seq) within this append
        out: list[BatchMetadata | None] = []
        for h in headers:
            if h.producer_id < 0 or h.is_control:
                out.append(None)
                continue
            entry = self.producers.get(h.producer_id)
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
            if h.producer_epoch != cur_epoch:
                # A new epoch starts at sequence 0. A producer this partition
                # has no state for (its batches removed by retention, KIP-360)
                # is taken at its word, as Kafka does.
                if h.base_sequence != 0 and cur_epoch >= 0:
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id}: the first sequence of new epoch {h.producer_epoch} must be 0, got {h.base_sequence}"
                    )
            elif cur_last >= 0 and h.base_sequence != _next_seq(cur_last):
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {h.producer_id}: expected {_next_seq(cur_last)}, got {h.base_sequence}"
                )
            staged[h.producer_id] = (h.producer_epoch, _last_seq(h))
            out.append(None)
        return out

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is ``expiration_ms`` or older; returns how many."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if not e.batches or now_ms - e.batches[-1].timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def update(self, h: BatchHeader) -> None:
        """Record a batch written to the log (with its final offsets)."""
        if h.producer_id < 0 or h.is_control:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.producer_epoch:
            entry = ProducerStateEntry(h.producer_id, h.producer_epoch)
            self.producers[h.producer_id] = entry
        entry.batches.append(
            BatchMetadata(
                h.base_sequence, _last_seq(h), h.base_offset, h.last_offset, h.max_timestamp
            )
        )


# --------------------------------------------------------------------------- snapshots
#
# ``<offset>.snapshot`` (20-digit offset: the log end offset the state is valid at), Kafka's
# ProducerStateManager snapshot, version 1:
#
#   version int16 = 1, crc int32 (CRC-32C of everything after it), entries int32 count, then per producer:
#   producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
#   timestamp int64, coordinator_epoch int32 (-1), current_txn_first_offset int64 (-1)
#
# As in Kafka, a snapshot keeps the last batch of each producer; the batches after the snapshot
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
        if not entry.batches:
            continue
        last = entry.batches[-1]
        body += _SNAP_ENTRY.pack(
            pid, entry.producer_epoch, last.last_seq, last.last_offset,
            last.last_offset - last.first_offset, last.timestamp, -1, -1,
        )
    count = sum(1 for e in state.producers.values() if e.batches)
    body[0:4] = struct.pack(">i", count)
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
        pid, epoch, last_seq, last_offset, delta, ts, _ce, _txn = _SNAP_ENTRY.unpack_from(body, 4 + i * _SNAP_ENTRY.size)
        entry = ProducerStateEntry(pid, epoch)
        first_seq = (last_seq - delta) % (INT32_MAX + 1)
        entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
        state.producers[pid] = entry
    return state


class CorruptSnapshotError(ValueError):
    """A producer-state snapshot that cannot be trusted (the state is rebuilt from the log)."""
