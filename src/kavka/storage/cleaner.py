"""Log compaction (Kafka's LogCleaner) for logs with cleanup.policy=compact (or compact,delete).

Theory of operation. A log is split at two offsets:

    log start ... first_dirty_offset ... first_uncleanable_offset ... log end
    |-- clean (compacted before) --|-- dirty --|-- uncleanable --|

`first_dirty_offset` is where the previous pass stopped (the per-log-dir
``cleaner-offset-checkpoint``, Kafka's file). `first_uncleanable_offset` is
the lowest of: the active segment's base offset (the active segment is never
touched), the high watermark, and the base of the first segment holding a
record younger than min.compaction.lag.ms. A pass runs when the dirty share
of the cleanable bytes reaches min.cleanable.dirty.ratio. It builds an offset
map (key -> offset of its last record) over the dirty section, then rewrites
every closed segment below `first_uncleanable_offset`, keeping a record only
if it has a key, is the last one for its key (or its key is not in the map),
and -- for a tombstone (null value) -- its batch is younger than
delete.retention.ms (measured from the batch's max timestamp). Offsets never
change: a batch keeps its base offset, its surviving records keep theirs
(gaps are fine, as in Kafka); a batch left with no records disappears.
Compressed batches are decompressed and rebuilt with the same codec, and keep
their producer id/epoch, base sequence, leader epoch and timestamp type.

Each segment is swapped in by `Log.swap_cleaned_segment` (``.cleaned`` ->
``.swap`` -> ``.log``), which survives a crash at any step; the checkpoint is
written after the swaps, so a crash mid-pass just cleans again.

Known simplification: Kafka keeps the last batch of every idempotent producer
(emptied if need be) so producer state survives compaction; kavka does not yet.

Pure apart from the Log it is handed; called on the event-loop thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kavka.protocol.records import Record, build_batch, decode_batch, iter_batches
from kavka.storage.log import Log
from kavka.storage.segment import LogSegment

log = logging.getLogger("kavka.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_READ_CHUNK = 1 << 30


@dataclass(frozen=True, slots=True)
class CleanResult:
    first_dirty_offset: int
    first_uncleanable_offset: int
    segments_cleaned: int
    records_removed: int
    bytes_before: int
    bytes_after: int


def _segment_bytes(seg: LogSegment) -> bytes:
    return seg._pread(seg.size, 0) if seg.size else b""


def first_uncleanable_offset(lg: Log, *, high_watermark: int, now_ms: int) -> int:
    segments = lg.segments
    limit = min(segments[-1].base_offset, high_watermark)
    lag = lg.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segments[:-1]:
            if seg.largest_timestamp > now_ms - lag:
                limit = min(limit, seg.base_offset)
                break
    return limit


def dirty_ratio(lg: Log, first_dirty: int, first_uncleanable: int) -> float:
    clean = dirty = 0
    segments = lg.segments
    for i, seg in enumerate(segments[:-1]):
        end = segments[i + 1].base_offset
        if end <= first_uncleanable:
            if seg.base_offset >= first_dirty:
                dirty += seg.size
            elif end <= first_dirty:
                clean += seg.size
            else:
                dirty += seg.size  # a segment straddling the dirty point counts as dirty
    total = clean + dirty
    return dirty / total if total else 0.0


def _build_offset_map(lg: Log, first_dirty: int, first_uncleanable: int) -> dict[bytes, int]:
    offset_map: dict[bytes, int] = {}
    for seg in lg.segments[:-1]:
        if seg.base_offset >= first_uncleanable:
            break
        data = _segment_bytes(seg)
        for pos, header in iter_batches(data):
            if header.last_offset < first_dirty or header.base_offset >= first_uncleanable or header.is_control:
                continue
            _, records = decode_batch(data, pos)
            for r in records:
                if first_dirty <= r.offset < first_uncleanable and r.key is not None:
                    offset_map[r.key] = r.offset
    return offset_map


def _clean_segment(data: bytes, offset_map: dict[bytes, int], *, tombstone_horizon_ms: int) -> tuple[bytes, int]:
    out = bytearray()
    removed = 0
    for pos, header in iter_batches(data):
        if header.is_control:
            out += data[pos : pos + header.size_in_bytes]
            continue
        _, records = decode_batch(data, pos)
        keep: list[Record] = []
        for r in records:
            latest = r.key is not None and offset_map.get(r.key, r.offset) <= r.offset
            expired_tombstone = r.value is None and header.max_timestamp < tombstone_horizon_ms
            if latest and not expired_tombstone:
                keep.append(r)
        removed += len(records) - len(keep)
        if len(keep) == len(records):
            out += data[pos : pos + header.size_in_bytes]  # untouched: the exact bytes
        elif keep:
            out += build_batch(
                keep,
                base_offset=header.base_offset,
                compression=header.compression,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                timestamp_type=header.timestamp_type,
                partition_leader_epoch=header.partition_leader_epoch,
                is_transactional=header.is_transactional,
            )
    return bytes(out), removed


def maybe_clean(lg: Log, *, first_dirty_offset: int, high_watermark: int, now_ms: int, force: bool = False) -> CleanResult | None:
    """One cleaning pass if the log is due (compact policy, dirty ratio); None if not."""
    if not lg.config.compact_enabled:
        return None
    first_dirty = max(first_dirty_offset, lg.log_start_offset)
    first_uncleanable = first_uncleanable_offset(lg, high_watermark=high_watermark, now_ms=now_ms)
    if first_dirty >= first_uncleanable:
        return None
    if not force and dirty_ratio(lg, first_dirty, first_uncleanable) < lg.config.min_cleanable_dirty_ratio:
        return None
    offset_map = _build_offset_map(lg, first_dirty, first_uncleanable)
    horizon = now_ms - lg.config.delete_retention_ms
    cleaned = removed = before = after = 0
    segments = lg.segments
    for i, seg in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > first_uncleanable:
            break
        data = _segment_bytes(seg)
        new, n = _clean_segment(data, offset_map, tombstone_horizon_ms=horizon)
        before += len(data)
        after += len(new)
        if n:
            lg.swap_cleaned_segment(seg, new, now_ms=now_ms)
            cleaned += 1
            removed += n
    log.info(
        "cleaned %s: offsets [%d, %d), %d segments rewritten, %d records removed, %d -> %d bytes",
        lg.dir.name, first_dirty, first_uncleanable, cleaned, removed, before, after,
    )
    return CleanResult(first_dirty, first_uncleanable, cleaned, removed, before, after)
