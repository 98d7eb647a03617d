"""LogLoader: opening one partition dir (Kafka's LogLoader).

Owns what happens between "a dir on disk" and "a log to append to", in this order:

1. ``partition.metadata``: the topic id is checked against the expected one, or
   written if the dir has none (InconsistentTopicIdError on a mismatch);
2. an interrupted cleaner swap (``<base>.log.swap``, fsynced and whole) is
   completed: the segments it covers go, it becomes ``<base>.log``
   (`complete_swaps`); then leftovers (``.deleted``, ``.cleaned``, ``.swap``,
   ``.tmp``) and index files without a ``.log`` are removed;
3. ``leader-epoch-checkpoint`` is loaded and the ``.log`` files become segments;
4. after an unclean shutdown, every segment from the one holding the recovery
   point on is recovered (storage.segment.LogSegment.recover: batches are
   CRC-checked, the segment is truncated at the last valid batch, its indexes
   and the leader epochs it holds are rebuilt); a segment with a corrupt tail
   deletes every later segment;
5. the offsets: the log end offset is the last segment's next offset; the
   recovery point is the log end after a clean shutdown, else at most the log
   end; the log start offset is clamped into [first segment base, log end] --
   unless the topic is tiered (KIP-405), where it may lie below the first local
   segment -- and the leader epoch cache is trimmed to [log start, log end].

6. transaction indexes (``.txnindex``, storage.txn_index): after an unclean
   shutdown those of every recovered segment, and at any start one that does
   not parse, are rebuilt (`rebuild_txn_indexes`: the newest snapshot at or
   below the first such segment, then the batches after it, markers parsed).
   A missing file is an empty index, as in Kafka.

Producer state is not rebuilt at open: the unified log rebuilds it on first use
with `rebuild_producer_state` (the newest usable ``.snapshot`` at or below the
log end, then the batch headers after it; an end-transaction marker is read to
close its transaction, and an aborted transaction missing from its segment's
``.txnindex`` is added -- so the index is whole up to the log end).

Callers: storage.unified_log.Log.open (through the LogManager, at start on the
broker's event-loop thread, and the raft layer for ``__cluster_metadata``).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kavka.protocol.control_records import parse_end_txn_marker
from kavka.protocol.records import BATCH_HEADER_SIZE, BatchHeader, parse_header
from kavka.storage.checkpoints import PARTITION_METADATA_FILE, PartitionMetadataFile
from kavka.storage.errors import CorruptIndexError, InconsistentTopicIdError
from kavka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kavka.storage.local_log import LocalLog
from kavka.storage.log_config import LogConfig
from kavka.storage.producer_state import (
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    read_snapshot,
    snapshot_offsets,
    snapshot_path,
)
from kavka.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kavka.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

log = logging.getLogger("kavka.storage")
_CLEANER_TMP = "cleaner-tmp"


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What `LogLoader.load` found (Kafka's LoadedLogOffsets, plus the segments and caches)."""

    topic_id: str | None
    segments: list[LogSegment]
    leader_epoch_cache: LeaderEpochFileCache
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    # The checkpoint's log start offset when it lies below the first local segment and the
    # topic's config (not known yet) may turn out to be tiered; else None.
    checkpointed_log_start_offset: int | None


class LogLoader:
    """Loads (creating if needed) and, after an unclean shutdown, recovers one partition dir."""

    def __init__(
        self,
        dir: Path | str,
        config: LogConfig,
        *,
        topic_id: str | None,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        now_ms: int,
    ) -> None:
        self.dir = Path(dir)
        self.config = config
        self.topic_id = topic_id  # None means "whatever partition.metadata says"
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        self.now_ms = now_ms

    def load(self) -> LoadedLog:
        dir, config, now_ms = self.dir, self.config, self.now_ms
        topic_id = self.topic_id
        recovery_point, log_start_offset = self.recovery_point, self.log_start_offset
        # One listing serves every step below (it was five per log: a start of 10,000 logs listed
        # their dirs 50,000 times); a dir created here has nothing to list.
        try:
            dir.mkdir(parents=True)
            names: list[str] = []
        except FileExistsError:
            names = os.listdir(dir)
        pmf = PartitionMetadataFile(dir)
        if PARTITION_METADATA_FILE in names:
            stored = pmf.read()
            if topic_id is not None and stored != topic_id:
                raise InconsistentTopicIdError(
                    f"{pmf.path} has topic id {stored}, expected {topic_id}"
                )
            topic_id = stored
        elif topic_id is not None:
            pmf.write(topic_id)

        swapped: list[int] = []
        if any(n.endswith(SWAP_SUFFIX) for n in names) or _CLEANER_TMP in names:
            swapped = complete_swaps(dir)
            names = os.listdir(dir)
        if remove_temporary_files(dir, names):
            names = os.listdir(dir)
        epoch_path = dir / LEADER_EPOCH_CHECKPOINT
        # A new dir has no checkpoint to read (10,000 new partitions: 10,000 failed opens).
        leader_epoch_cache = (
            LeaderEpochFileCache.load(epoch_path) if LEADER_EPOCH_CHECKPOINT in names else LeaderEpochFileCache(epoch_path)
        )

        segments: list[LogSegment] = []
        bases = sorted(
            int(n[: -len(LOG_SUFFIX)]) for n in names if n.endswith(LOG_SUFFIX) and n[: -len(LOG_SUFFIX)].isdigit()
        )
        for base in bases:
            segments.append(
                LogSegment(
                    dir,
                    base,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_size=config.segment_index_bytes,
                    now_ms=now_ms,
                )
            )

        rebuild = [s for s in segments if s.base_offset in swapped]
        if not self.clean_shutdown and segments:
            first_recovered = segments[_floor_index(segments, recovery_point)].base_offset
            segments = recover_segments(segments, recovery_point, leader_epoch_cache)
            rebuild = [s for s in segments if s.base_offset >= first_recovered or s.base_offset in swapped]
        with_txn_index = {n for n in os.listdir(dir) if n.endswith(TXN_INDEX_SUFFIX)} if rebuild or any(
            n.endswith(TXN_INDEX_SUFFIX) for n in names
        ) else set()
        for segment in segments:
            if segment in rebuild or segment.txn_index.path.name not in with_txn_index:
                continue  # a missing file is an empty index: nothing to check
            try:
                segment.txn_index.sanity_check()
            except CorruptIndexError as e:
                log.warning("%s; rebuilding it", e)
                rebuild.append(segment)
        rebuild_txn_indexes(dir, segments, sorted(rebuild, key=lambda s: s.base_offset))

        if not segments:  # its file is created with the first write (a new partition stays idle for free)
            segments.append(
                LogSegment(
                    dir,
                    log_start_offset,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_size=config.segment_index_bytes,
                    now_ms=now_ms,
                    create=False,
                )
            )
        log_end_offset = segments[-1].read_next_offset()
        checkpointed = min(log_start_offset, log_end_offset)
        if config.remote_storage_enable:
            # Offsets below the first local segment may be in remote storage: keep the checkpoint's.
            log_start_offset = checkpointed
        else:
            log_start_offset = min(max(log_start_offset, segments[0].base_offset), log_end_offset)
        if self.clean_shutdown:
            recovery_point = log_end_offset
        else:
            recovery_point = min(recovery_point, log_end_offset)
        leader_epoch_cache.truncate_from_end(log_end_offset, flush=False)
        leader_epoch_cache.truncate_from_start(log_start_offset, flush=False)
        return LoadedLog(
            topic_id=topic_id,
            segments=segments,
            leader_epoch_cache=leader_epoch_cache,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            recovery_point=recovery_point,
            # Opened before the topic's config is known (LogManager loads with the defaults):
            # Log.update_config puts it back if the topic turns out to be tiered.
            checkpointed_log_start_offset=checkpointed if checkpointed < log_start_offset else None,
        )


def rebuild_producer_state(local_log: LocalLog) -> ProducerStateManager:
    """Producers' state: the latest usable ``.snapshot`` plus the batches after it."""
    state, start = _load_producer_snapshot(local_log.dir, local_log.log_end_offset)
    for segment in local_log.segments_from(start):
        position = 0
        if segment.base_offset < start:
            found = segment.translate_offset(start)
            if found is None:
                continue
            position = found.position
        for pos, header in segment.iter_batches_from(position):
            if header.base_offset >= start:
                replay_batch(state, segment, pos, header, index=True)
    return state


def replay_batch(
    state: ProducerStateManager, segment: LogSegment, pos: int, header: BatchHeader, *, index: bool
) -> CompletedTxn | None:
    """Apply one batch already in `segment` (at `pos`) to `state`; a marker completes its
    transaction and, with `index`, an aborted one is added to the segment's ``.txnindex``
    unless the index holds it already. Returns the transaction a marker completed."""
    if not header.is_control:
        state.update(header)
        return None
    if header.producer_id < 0:
        return None
    _, marker = parse_end_txn_marker(segment._pread(header.size_in_bytes, pos))
    if marker is None:
        return None  # a control record of a type this broker does not know: skipped, as Kafka does
    completed = state.update_marker(header, coordinator_epoch=marker.coordinator_epoch, is_abort=marker.is_abort)
    if completed is None:
        return None
    if completed.is_aborted and index:
        entries = segment.txn_index.entries
        if not entries or entries[-1].last_offset < completed.last_offset:
            segment.txn_index.append(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    state.last_stable_offset_after(completed),
                )
            )
    state.complete_txn(completed)
    return completed


def rebuild_txn_indexes(dir: Path, segments: list[LogSegment], targets: list[LogSegment]) -> None:
    """Rewrite the ``.txnindex`` of each of `targets` (in offset order, all in `segments`) by
    replaying the log from the newest usable snapshot at or below the first target (from the
    first segment if there is none). A transaction whose start is below both (removed by
    retention with no snapshot to remember it) cannot be indexed; Kafka has the same limit."""
    if not targets:
        return
    for t in targets:
        t.txn_index.reset()
    state, start = _load_producer_snapshot(dir, targets[0].base_offset, delete_newer=False)
    wanted = {id(t) for t in targets}
    last_base = targets[-1].base_offset
    for i, segment in enumerate(segments):
        if segment.base_offset > last_base:
            break
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
            continue
        for pos, header in segment.iter_batches_from(0):
            if header.base_offset >= start:
                replay_batch(state, segment, pos, header, index=id(segment) in wanted)


def _floor_index(segments: list[LogSegment], offset: int) -> int:
    return max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)


def _load_producer_snapshot(
    dir: Path, log_end_offset: int, *, delete_newer: bool = True
) -> tuple[ProducerStateManager, int]:
    """The newest snapshot at or below `log_end_offset` (newer ones, left by an unclean stop, go
    unless `delete_newer` is False)."""
    for offset in reversed(snapshot_offsets(dir)):
        path = snapshot_path(dir, offset)
        if offset > log_end_offset:
            if delete_newer:
                path.unlink(missing_ok=True)
            continue
        try:
            return read_snapshot(path), offset
        except (OSError, CorruptSnapshotError) as e:
            log.warning("ignoring producer snapshot %s: %s", path, e)
            path.unlink(missing_ok=True)
    return ProducerStateManager(), 0


def complete_swaps(dir: Path) -> list[int]:
    """Finish a cleaner swap a crash interrupted: a ``<base>.log.swap`` is a whole,
    fsynced replacement for the segments its offsets cover; those go, it stays. Returns the
    base offsets of the swapped-in segments (their ``.txnindex`` is to be rebuilt)."""
    swapped: list[int] = []
    shutil.rmtree(dir / _CLEANER_TMP, ignore_errors=True)  # an unfinished group: the originals are intact
    for swap in sorted(dir.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)):
        prefix = swap.name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
        if not prefix.isdigit():
            continue
        base = int(prefix)
        last = base
        with open(swap, "rb") as f:
            data_pos = 0
            while True:
                f.seek(data_pos)
                raw = f.read(BATCH_HEADER_SIZE)
                if len(raw) < BATCH_HEADER_SIZE:
                    break
                header = parse_header(raw)
                last = header.last_offset
                data_pos += header.size_in_bytes
        for p in list(dir.iterdir()):
            stem, dot, suffix = p.name.partition(".")
            if stem.isdigit() and base <= int(stem) <= last and "." + suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                p.unlink()  # the replaced segments, and indexes the new log gets rebuilt
        log.info("completing the interrupted cleaner swap %s", swap)
        os.replace(swap, dir / (prefix + LOG_SUFFIX))
        swapped.append(base)
    return swapped


def remove_temporary_files(dir: Path, names: list[str] | None = None) -> bool:
    """Leftovers of deletes, compaction and swaps that never finished; `names` is the dir's
    listing if the caller has it. True if a file was removed."""
    if names is None:
        names = os.listdir(dir)
    log_bases = set()
    removed = False
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")):
            log.info("deleting leftover file %s", dir / name)
            (dir / name).unlink(missing_ok=True)
            removed = True
        elif name.endswith(LOG_SUFFIX):
            log_bases.add(name[: -len(LOG_SUFFIX)])
    for name in names:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if name.endswith(suffix) and name[: -len(suffix)] not in log_bases:
                log.warning("deleting orphaned index file %s", dir / name)
                (dir / name).unlink(missing_ok=True)
                removed = True
    return removed


def recover_segments(
    segments: list[LogSegment], recovery_point: int, leader_epoch_cache: LeaderEpochFileCache
) -> list[LogSegment]:
    """Recover every segment from the one holding the recovery point on;
    after a segment with a corrupt tail, later segments are deleted."""
    bases = [s.base_offset for s in segments]
    start = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    kept = segments[:start]
    for i in range(start, len(segments)):
        segment = segments[i]
        truncated = segment.recover(leader_epoch_cache)
        kept.append(segment)
        if truncated > 0 and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                log.warning(
                    "deleting segment %s (%d bytes) after the corrupt segment %s",
                    later.log_path,
                    later.size,
                    segment.log_path,
                )
                later.delete()
            break
    return kept
