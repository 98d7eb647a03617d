"""One partition's local log (Kafka's UnifiedLog and LocalLog, merged).

Owns the partition dir ``<topic>-<partition>/``: the segments (sorted by base
offset, the last one active), ``leader-epoch-checkpoint`` and
``partition.metadata``. Keeps Kafka's offsets:

* ``log_start_offset`` <= first offset readable; advanced by retention and
  DeleteRecords, never moved back except by ``truncate_fully_and_start_at``;
* ``log_end_offset`` (LEO): the offset the next appended record gets;
* ``recovery_point``: every offset below it has been fsynced, so recovery
  after a crash only scans segments from there on;
* ``local_log_start_offset`` (KIP-405): the first offset on local disk. It
  equals ``log_start_offset`` unless the topic is tiered
  (``remote.storage.enable``): then offsets in [log_start_offset,
  local_log_start_offset) live only in remote storage (kavka.tiered), local
  retention (``local.retention.*``) deletes only segments whose last offset is
  at or below ``highest_offset_in_remote`` (set by the remote log manager), and
  only total retention in remote storage moves ``log_start_offset``.

The high watermark is not kept here: it belongs to the broker's Partition,
which passes it in as ``max_offset`` on reads and ``high_watermark`` to
retention. Producer state is snapshotted to ``<offset>.snapshot`` at each roll
and at close (storage.producer_state).

Threading: the broker calls every method from its single asyncio thread (the
owner); nothing here takes locks. Work handed to worker threads never calls a
Log method: a `FlushJob` (from `prepare_flush`) fsyncs duplicated descriptors,
the log cleaner reads segment files through its own descriptors and hands a
finished segment back to `replace_segments`, and retention run with
`deferred_unlinks` set leaves the unlinks of ``.deleted`` files to a worker.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    Record,
    assign_offsets,
    batch_crc_ok,
    decode_batch,
    iter_batches,
    iter_records,
    parse_header,
    validate_batches,
)
from kavka.storage.checkpoints import PartitionMetadataFile, write_atomically
from kavka.storage.errors import (
    InconsistentTopicIdError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kavka.storage.faults import FAULTS
from kavka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kavka.storage.log_config import LogConfig
from kavka.storage.log_validator import CODECS, ValidationConfig, validate_records
from kavka.storage.producer_state import (
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateManager,
    read_snapshot,
    snapshot_offsets,
    snapshot_path,
    write_snapshot,
)
from kavka.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    TimestampAndOffset,
)

log = logging.getLogger("kavka.storage")

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """``my.topic-name-3`` -> ("my.topic-name", 3): the partition follows the
    LAST '-' (topic names may contain '.', '_' and '-')."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


def parse_special_dir_name(name: str) -> tuple[str, int, str] | None:
    """``<topic>-<partition>.<uuidhex>-(delete|future|stray)`` -> parts, else None."""
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            base, dot, unique = stem.rpartition(".")
            if not dot or not unique:
                return None
            try:
                topic, partition = parse_partition_dir_name(base)
            except ValueError:
                return None
            return topic, partition, suffix[1:]
    return None


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: bytes
    first_entry_incomplete: bool = False


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    num_messages: int
    num_batches: int
    valid_bytes: int


@dataclass(slots=True)
class FlushJob:
    """fsyncs a worker does for `Log.prepare_flush`: it owns (and closes, once) the duplicated
    descriptors and never touches the Log, so the owner may append meanwhile."""

    dir: Path
    target: int
    files: tuple[tuple[int, Path], ...]  # (dup of the .log descriptor, its path)
    index_paths: tuple[Path, ...]
    unflushed_messages: int
    closed: bool = False

    def run(self) -> None:
        try:
            for fd, path in self.files:
                FAULTS.check(path)
                FAULTS.before_fsync(path)
                os.fsync(fd)
            for path in self.index_paths:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue  # deleted or not written yet: indexes are rebuilt from the log
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        finally:
            self.close()

    def close(self) -> None:
        """Close the descriptors; idempotent (a second close could hit a reused number)."""
        if self.closed:
            return
        self.closed = True
        for fd, _ in self.files:
            with contextlib.suppress(OSError):
                os.close(fd)


class Log:
    """Use :meth:`Log.open`; the constructor only stores state."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        topic_id: str | None,
        segments: list[LogSegment],
        leader_epoch_cache: LeaderEpochFileCache,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        now_ms: int,
    ) -> None:
        self.dir = Path(dir)
        self.config = config
        self.topic_id = topic_id
        special = parse_special_dir_name(self.dir.name)
        # A -future dir holds a replica being moved here (KIP-113).
        self.topic_partition: tuple[str, int] = (
            (special[0], special[1]) if special is not None else parse_partition_dir_name(self.dir.name)
        )
        self._segments = segments
        self._base_offsets = [s.base_offset for s in segments]
        self.leader_epoch_cache = leader_epoch_cache
        self.log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._flush_pending_below: int | None = None
        self._flush_in_flight = False  # a FlushJob is out on a worker
        # Set by the LogManager around retention: removed segments' files are only renamed
        # ``.deleted`` and listed here, for a worker to unlink.
        self.deferred_unlinks: list[Path] | None = None
        self._closed = False
        # The last offset copied to remote storage (KIP-405), -1 before any; the broker's
        # remote log manager sets it. Local retention of a tiered log never goes past it.
        self.highest_offset_in_remote = -1
        self._checkpointed_log_start_offset: int | None = None
        # Built from the batch headers on first use (see producer_state).
        self._producer_state: ProducerStateManager | None = None

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        dir: Path | str,
        config: LogConfig,
        *,
        topic_id: str | None,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        now_ms: int,
    ) -> Log:
        """Load (creating if needed) and, after an unclean shutdown, recover.

        ``topic_id`` None means "whatever partition.metadata says".
        """
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        pmf = PartitionMetadataFile(dir)
        if pmf.exists():
            stored = pmf.read()
            if topic_id is not None and stored != topic_id:
                raise InconsistentTopicIdError(
                    f"{pmf.path} has topic id {stored}, expected {topic_id}"
                )
            topic_id = stored
        elif topic_id is not None:
            pmf.write(topic_id)

        _complete_swaps(dir)
        _remove_temporary_files(dir)
        epoch_path = dir / LEADER_EPOCH_CHECKPOINT
        leader_epoch_cache = LeaderEpochFileCache.load(epoch_path)

        segments: list[LogSegment] = []
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in dir.iterdir()
            if p.name.endswith(LOG_SUFFIX) and p.name[: -len(LOG_SUFFIX)].isdigit()
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

        if not clean_shutdown and segments:
            segments = _recover_segments(segments, recovery_point, leader_epoch_cache)

        if not segments:
            segments.append(
                LogSegment(
                    dir,
                    log_start_offset,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_size=config.segment_index_bytes,
                    now_ms=now_ms,
                )
            )
        log_end_offset = segments[-1].read_next_offset()
        checkpointed = min(log_start_offset, log_end_offset)
        if config.remote_storage_enable:
            # Offsets below the first local segment may be in remote storage: keep the checkpoint's.
            log_start_offset = checkpointed
        else:
            log_start_offset = min(max(log_start_offset, segments[0].base_offset), log_end_offset)
        if clean_shutdown:
            recovery_point = log_end_offset
        else:
            recovery_point = min(recovery_point, log_end_offset)
        leader_epoch_cache.truncate_from_end(log_end_offset, flush=False)
        leader_epoch_cache.truncate_from_start(log_start_offset, flush=False)
        opened = cls(
            dir,
            config,
            topic_id=topic_id,
            segments=segments,
            leader_epoch_cache=leader_epoch_cache,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            recovery_point=recovery_point,
            now_ms=now_ms,
        )
        if checkpointed < log_start_offset:
            # Opened before the topic's config is known (LogManager loads with the defaults):
            # update_config puts it back if the topic turns out to be tiered.
            opened._checkpointed_log_start_offset = checkpointed
        return opened

    # ------------------------------------------------------------------ facts

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self._log_end_offset})"
        )

    @property
    def topic(self) -> str:
        return self.topic_partition[0]

    @property
    def partition(self) -> int:
        return self.topic_partition[1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (KIP-405's localLogStartOffset)."""
        return min(max(self.log_start_offset, self._base_offsets[0]), self._log_end_offset)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def update_config(self, config: LogConfig) -> None:
        restore, self._checkpointed_log_start_offset = self._checkpointed_log_start_offset, None
        if config.remote_storage_enable and restore is not None and restore < self.log_start_offset:
            log.info("%s is tiered: its log start offset is %d (below its first local segment)", self.dir.name, restore)
            self.log_start_offset = restore
        self.config = config

    @property
    def _validation(self) -> ValidationConfig:
        c = self.config
        return ValidationConfig(
            compacted=c.compact_enabled,
            log_append_time=c.log_append_time,
            timestamp_before_max_ms=c.message_timestamp_before_max_ms,
            timestamp_after_max_ms=c.message_timestamp_after_max_ms,
            target_codec=CODECS.get(c.compression_type),
        )

    def _segment_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (floor)."""
        return max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            now_ms=now_ms,
        )

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control: bool = False,
    ) -> AppendInfo:
        """Validate, assign offsets from the log end, and append.

        Raises CorruptRecordError / InvalidRecordError / UnsupportedMagicError /
        RecordTooLargeError (from protocol.records) or RecordBatchTooLargeError.
        Nothing is written if validation fails.
        """
        headers = validate_batches(
            records, max_message_bytes=self.config.max_message_bytes, allow_control=allow_control
        )
        if any(h.producer_id >= 0 for h in headers):
            duplicates = self.producer_state.check(headers)
            if any(d is not None for d in duplicates):
                return self._duplicate_append_info(headers, duplicates)
        # Per-record checks and rewrites (Kafka's LogValidator): may recompress.
        buf = validate_records(bytearray(records), self._validation, now_ms=now_ms)
        if len(buf) > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {len(buf)} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        log_append_time = now_ms if self.config.log_append_time else None
        first_offset = self._log_end_offset
        assign_offsets(
            buf,
            base_offset=first_offset,
            partition_leader_epoch=leader_epoch,
            log_append_time_ms=log_append_time,
        )
        headers = [h for _, h in iter_batches(buf)]
        return self._append(
            buf,
            headers,
            leader_epoch_hint=leader_epoch,
            now_ms=now_ms,
            log_append_time=log_append_time,
        )

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent producers' state: the latest usable ``.snapshot`` plus the batches after it."""
        if self._producer_state is None:
            state, start = self._load_producer_snapshot()
            for i in range(self._segment_for(start), len(self._segments)):
                segment = self._segments[i]
                position = 0
                if segment.base_offset < start:
                    found = segment.translate_offset(start)
                    if found is None:
                        continue
                    position = found.position
                for _pos, header in segment.iter_batches_from(position):
                    if header.base_offset >= start:
                        state.update(header)
            self._producer_state = state
        return self._producer_state

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Drop expired producer ids (producer_state.remove_expired) if the state is loaded."""
        if self._producer_state is None or self._closed:
            return 0
        return self._producer_state.remove_expired(now_ms, expiration_ms)

    def _load_producer_snapshot(self) -> tuple[ProducerStateManager, int]:
        """The newest snapshot at or below the log end (newer ones, left by an unclean stop, go)."""
        for offset in reversed(snapshot_offsets(self.dir)):
            path = snapshot_path(self.dir, offset)
            if offset > self._log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                return read_snapshot(path), offset
            except (OSError, CorruptSnapshotError) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
        return ProducerStateManager(), 0

    def take_producer_snapshot(self) -> None:
        """Write ``<log end>.snapshot`` if the state is loaded; keep the two newest (Kafka keeps
        one per segment; two is enough to survive a torn latest one)."""
        if self._producer_state is None or self._closed:
            return
        write_snapshot(self.dir, self._log_end_offset, self._producer_state)
        # A tiered log ships each segment with the snapshot at its end (KIP-405: a follower
        # rebuilt from remote storage loads it): those of segments not copied yet stay.
        tiered = self.config.remote_storage_enable and not self.config.remote_log_copy_disable
        for offset in snapshot_offsets(self.dir)[:-2]:
            if tiered and offset > self.highest_offset_in_remote + 1:
                continue
            snapshot_path(self.dir, offset).unlink(missing_ok=True)

    def _delete_snapshots_above(self, offset: int) -> None:
        for o in snapshot_offsets(self.dir):
            if o > offset:
                snapshot_path(self.dir, o).unlink(missing_ok=True)

    def _duplicate_append_info(
        self, headers: list[BatchHeader], duplicates: list[BatchMetadata | None]
    ) -> AppendInfo:
        """A retried idempotent batch: answer with where it was first written."""
        if len(headers) != 1:
            raise OutOfOrderSequenceError(
                "a duplicate idempotent batch arrived together with other batches"
            )
        dup = duplicates[0]
        assert dup is not None
        return AppendInfo(
            first_offset=dup.first_offset,
            last_offset=dup.last_offset,
            max_timestamp=dup.timestamp,
            offset_of_max_timestamp=dup.last_offset,
            log_append_time_ms=-1,
            log_start_offset=self.log_start_offset,
            num_messages=0,
            num_batches=0,
            valid_bytes=0,
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int
    ) -> AppendInfo | None:
        """Append batches that already carry offsets (replication).

        Only the whole, CRC-valid prefix is appended (a fetch response may end
        in a partial batch). Returns None if there was nothing to append.
        """
        view = memoryview(records).cast("B")
        headers: list[BatchHeader] = []
        end = 0
        for pos, header in iter_batches(view):
            if not batch_crc_ok(view, pos, header):
                raise CorruptRecordError(f"record batch at position {pos} fails its CRC-32C check")
            headers.append(header)
            end = pos + header.size_in_bytes
        if not headers:
            return None
        if headers[0].base_offset < self._log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"follower append at offset {headers[0].base_offset} is below the log end "
                f"offset {self._log_end_offset} of {self.dir.name}"
            )
        prev_next = self._log_end_offset
        for h in headers:
            if h.base_offset < prev_next:
                raise CorruptRecordError(f"offsets go backwards at batch {h.base_offset}")
            prev_next = h.next_offset
        return self._append(bytes(view[:end]), headers, leader_epoch_hint=None, now_ms=now_ms)

    def _append(
        self,
        buf: bytes | bytearray,
        headers: list[BatchHeader],
        *,
        leader_epoch_hint: int | None,
        now_ms: int,
        log_append_time: int | None = None,
    ) -> AppendInfo:
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        max_timestamp = -1
        offset_of_max = first_offset
        for h in headers:
            if h.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = h.max_timestamp, h.last_offset
        segment = self._maybe_roll(
            len(buf),
            max_timestamp_in_messages=max_timestamp,
            first_offset=first_offset,
            last_offset=last_offset,
            now_ms=now_ms,
        )
        # Kafka's maybeAssignEpochStartOffset, per batch, before the write.
        for h in headers:
            epoch = h.partition_leader_epoch
            latest = self.leader_epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self.leader_epoch_cache.assign(epoch, h.base_offset)
        segment.append(
            largest_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
            records=buf,
            headers=headers,
        )
        self._log_end_offset = last_offset + 1
        if self._producer_state is not None:
            for h in headers:
                self._producer_state.update(h)
        num_messages = sum(h.records_count for h in headers)
        self._unflushed_messages += num_messages
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
            self._last_flush_ms = now_ms
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
            log_append_time_ms=log_append_time if log_append_time is not None else -1,
            log_start_offset=self.log_start_offset,
            num_messages=num_messages,
            num_batches=len(headers),
            valid_bytes=len(buf),
        )

    def _maybe_roll(
        self,
        size: int,
        *,
        max_timestamp_in_messages: int,
        first_offset: int,
        last_offset: int,
        now_ms: int,
    ) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(
            max_segment_bytes=self.config.segment_bytes,
            max_segment_ms=self.config.segment_ms,
            roll_jitter_ms=self.config.segment_jitter_for(segment.base_offset),
            messages_size=size,
            max_timestamp_in_messages=max_timestamp_in_messages,
            max_offset_in_messages=last_offset,
            now_ms=now_ms,
        ):
            return self.roll(now_ms, expected_next_offset=first_offset)
        return segment

    def roll(self, now_ms: int, *, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO)."""
        new_base = max(expected_next_offset or 0, self._log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.is_empty:
                # Kafka: an empty active segment at the same offset is reused.
                return active
            raise RuntimeError(f"cannot roll {self.dir.name}: segment {new_base} already exists")
        active.on_become_inactive()
        self.take_producer_snapshot()  # Kafka snapshots producer state at every roll
        segment = self._new_segment(new_base, now_ms)
        self._segments.append(segment)
        self._base_offsets.append(new_base)
        # Kafka flushes the old segments asynchronously after a roll
        # (flushUptoOffsetExclusive); maybe_flush does it off the append path.
        self._flush_pending_below = new_base
        log.debug("rolled %s to a new segment at offset %d", self.dir.name, new_base)
        return segment

    # ------------------------------------------------------------------ compaction

    def replace_segments(
        self, old: list[LogSegment], old_sizes: list[int], cleaned_dir: Path, *, now_ms: int
    ) -> list[Path] | None:
        """Swap the cleaner's output for a group of closed segments (Kafka's ``replaceSegments``).

        ``cleaned_dir`` holds ONE finished, fsynced segment (``.log``, ``.index``,
        ``.timeindex``) with the base offset of ``old[0]`` and the survivors of
        all of ``old``. Returns None, changing nothing, if the group is no longer
        what the cleaner read (a segment was deleted, truncated or replaced, or the
        log closed); else the ``.deleted`` files left for the caller to unlink.
        Crash-safe order: the new ``.log`` becomes ``<base>.log.swap``; the old
        files are renamed ``.deleted``; the new indexes move in; the swap becomes
        ``<base>.log``. `Log.open` completes a swap it finds (`_complete_swaps`).
        Event-loop thread (it changes the segment list); renames only, no fsync.
        """
        if self._closed or len(old) != len(old_sizes) or old[-1] is self._segments[-1]:
            return None
        try:
            i = next(k for k, s in enumerate(self._segments) if s is old[0])
        except StopIteration:
            return None
        if self._segments[i : i + len(old)] != old or any(s.size != n for s, n in zip(old, old_sizes, strict=True)):
            return None
        base = old[0].base_offset
        new_log = cleaned_dir / old[0].log_path.name
        swap_path = old[0].log_path.with_name(old[0].log_path.name + SWAP_SUFFIX)
        os.replace(new_log, swap_path)
        leftovers: list[Path] = []
        for segment in old:
            segment.close_handles()
            for index in (segment._offset_index, segment._time_index):
                if index is not None:
                    index.close()
            for p in (segment.log_path, segment._index_path, segment._time_index_path):
                target = p.with_name(p.name + DELETED_SUFFIX)
                try:
                    os.replace(p, target)
                    leftovers.append(target)
                except FileNotFoundError:
                    pass
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            src = cleaned_dir / (old[0].log_path.name[: -len(LOG_SUFFIX)] + suffix)
            if src.exists():
                os.replace(src, self.dir / src.name)
        os.replace(swap_path, old[0].log_path)
        new = self._new_segment(base, now_ms)
        self._segments[i : i + len(old)] = [new]
        self._base_offsets = [s.base_offset for s in self._segments]
        return leftovers

    # ------------------------------------------------------------------ read

    def replay_records(self, *, chunk_bytes: int = 1 << 20) -> Iterator[Record]:
        """Every record from the log start to the log end as it is now, read `chunk_bytes` at a
        time -- what an internal topic's owner replays into memory (the group coordinator's
        `__consumer_offsets`, tiered storage's `__remote_log_metadata`). A batch that starts
        below a chunk's first offset is yielded only from that offset on."""
        offset, end = self.log_start_offset, self._log_end_offset
        while offset < end:
            data = self.read(offset, max_bytes=chunk_bytes, min_one_message=True).records
            if not data:
                return
            next_offset = offset
            for _pos, header in iter_batches(data):
                next_offset = max(next_offset, header.next_offset)
            for r in iter_records(data):
                if r.offset >= offset:
                    yield r
            if next_offset <= offset:
                return  # no progress: never loop forever on an odd log
            offset = next_offset

    def read(
        self,
        fetch_offset: int,
        *,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the batch holding ``fetch_offset``.

        ``max_offset`` is an exclusive bound (the high watermark for
        consumers); batches containing it or later are not returned.
        """
        leo = self._log_end_offset
        if fetch_offset < self.local_log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {self.dir.name}: log start "
                f"offset {self.log_start_offset}, local log start offset "
                f"{self.local_log_start_offset}, log end offset {leo}",
                log_start_offset=self.log_start_offset,
                log_end_offset=leo,
            )
        empty = FetchDataInfo(LogOffsetMetadata(fetch_offset), b"")
        if fetch_offset == leo or (max_offset is not None and fetch_offset >= max_offset):
            return empty
        i = self._segment_for(fetch_offset)
        while i < len(self._segments):
            segment = self._segments[i]
            max_position = None
            if max_offset is not None:
                nxt = self._base_offsets[i + 1] if i + 1 < len(self._segments) else leo
                if max_offset < nxt:
                    found = segment.translate_offset(max_offset)
                    max_position = found.position if found is not None else segment.size
            result = segment.read(
                fetch_offset,
                max_bytes,
                max_position=max_position,
                min_one_message=min_one_message,
            )
            if result is not None:
                return FetchDataInfo(
                    LogOffsetMetadata(fetch_offset, segment.base_offset, result.start_position),
                    result.records,
                    result.first_entry_incomplete,
                )
            i += 1
        return empty

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record at or above log_start_offset with timestamp >= ``timestamp``
        (ListOffsets with a timestamp)."""
        for segment in self._segments:
            if segment.is_empty or segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (ListOffsets MAX_TIMESTAMP, -3;
        the record itself, not its batch's last offset, after KIP-734)."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.is_empty:
                continue
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        if best is None or best.max_timestamp_so_far < 0:
            return None
        target_ts = best.max_timestamp_so_far
        found = best.translate_offset(best.offset_of_max_timestamp_so_far)
        if found is None:
            return None
        header, records = decode_batch(best._pread(found.size, found.position))
        epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
        for rec in records:
            if rec.timestamp == target_ts and rec.offset >= self.log_start_offset:
                return TimestampAndOffset(rec.timestamp, rec.offset, epoch)
        return TimestampAndOffset(target_ts, header.last_offset, epoch)

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, target_offset: int, *, now_ms: int | None = None) -> bool:
        """Remove everything at and above ``target_offset`` (follower
        truncation). Returns False if there was nothing to remove."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.dir.name} to a negative offset")
        if target_offset >= self._log_end_offset:
            # Kafka's UnifiedLog.truncateTo: the epoch cache is truncated at the log end even
            # so. A broker that took a leader epoch and appended nothing in it holds an entry
            # (epoch, log end); kept while it follows, that epoch would be sent as its last
            # fetched epoch and every fetch would answer the same diverging epoch.
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset, now_ms=now_ms)
            return True
        doomed = [s for s in self._segments if s.base_offset > target_offset]
        self._remove_segments(doomed, reason=f"truncation to offset {target_offset}")
        self.active_segment.truncate_to(target_offset, now_ms=now_ms)
        self._log_end_offset = target_offset
        self._producer_state = None
        self._delete_snapshots_above(target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        self.log_start_offset = min(self.log_start_offset, target_offset)
        self.recovery_point = min(self.recovery_point, target_offset)
        self._unflushed_messages = 0
        return True

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and restart the log at ``new_offset``."""
        self._remove_segments(list(self._segments), reason=f"restart at offset {new_offset}")
        segment = self._new_segment(
            new_offset, now_ms if now_ms is not None else self._last_flush_ms
        )
        self._segments = [segment]
        self._base_offsets = [new_offset]
        self._log_end_offset = new_offset
        self.log_start_offset = new_offset
        self.recovery_point = new_offset
        self._unflushed_messages = 0
        self._flush_pending_below = None
        self._producer_state = None
        self._delete_snapshots_above(-1)
        self.leader_epoch_cache.clear_and_flush()

    def start_at_remote_boundary(
        self,
        next_offset: int,
        *,
        log_start_offset: int,
        epoch_entries: list[tuple[int, int]],
        producer_snapshot: bytes,
        now_ms: int | None = None,
    ) -> None:
        """KIP-405 follower rebuild (Kafka's ``buildRemoteLogAuxState`` then
        ``truncateFullyAndStartAt(nextOffset, leaderLogStartOffset)``): drop every local
        segment and start the local log at ``next_offset`` -- the end of a remote segment --
        while the log start offset stays the leader's (below it: remote storage). The leader
        epoch cache and producer state are those the remote segment was shipped with, so the
        next fetch's last fetched epoch and idempotent dedup hold as if the log had been
        replicated from the start. The caller (tiered.follower) fetched them from remote
        storage; only a tiered log is started this way."""
        if not log_start_offset <= next_offset:
            raise ValueError(f"log start offset {log_start_offset} above the local start {next_offset}")
        self.truncate_fully_and_start_at(next_offset, now_ms=now_ms)
        self.log_start_offset = log_start_offset
        self._checkpointed_log_start_offset = None
        for epoch, start in sorted(epoch_entries, key=lambda e: e[1]):
            if start < next_offset:
                self.leader_epoch_cache.assign(epoch, start)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        if producer_snapshot:
            write_atomically(snapshot_path(self.dir, next_offset), producer_snapshot)
        self._producer_state = None  # loaded from that snapshot on first use

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str) -> bool:
        """Advance log_start_offset (DeleteRecords, retention) and delete the
        segments wholly below it. The caller ensures it is <= high watermark."""
        if new_log_start_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset of {self.dir.name} to "
                f"{new_log_start_offset}: it is above the log end offset {self._log_end_offset}",
                log_start_offset=self.log_start_offset,
                log_end_offset=self._log_end_offset,
            )
        self._checkpointed_log_start_offset = None
        if new_log_start_offset <= self.log_start_offset:
            return False
        log.info(
            "incrementing the log start offset of %s to %d (%s)",
            self.dir.name,
            new_log_start_offset,
            reason,
        )
        self.log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        self._delete_segments_below_log_start()
        return True

    def _delete_segments_below_log_start(self) -> int:
        doomed = []
        for i, segment in enumerate(self._segments[:-1]):
            if self._base_offsets[i + 1] <= self.log_start_offset:
                doomed.append(segment)
            else:
                break
        if doomed:
            self._remove_segments(doomed, reason="log start offset breach")
        return len(doomed)

    def delete_retention_segments(self, now_ms: int, *, high_watermark: int) -> int:
        """Delete old segments by log start offset, retention.bytes and
        retention.ms (Kafka's ``UnifiedLog.deleteOldSegments``). Only
        segments wholly below the high watermark go. Returns how many."""
        deleted = self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
            high_watermark=high_watermark,
            now_ms=now_ms,
            reason="log start offset breach",
        )
        if not self.config.delete_enabled:
            return deleted
        if self.config.remote_storage_enable:
            # Local retention of a tiered log: closed segments already in remote storage and
            # past local.retention.bytes / local.retention.ms go; the log start offset stays (the
            # data is still readable from remote storage). An uncopied segment is never deleted.
            copied = self.highest_offset_in_remote
            return deleted + self._delete_by_retention(
                now_ms,
                high_watermark=high_watermark,
                retention_bytes=self.config.effective_local_retention_bytes,
                retention_ms=self.config.effective_local_retention_ms,
                eligible=lambda nxt: nxt is not None and nxt.base_offset - 1 <= copied,
                names=("local retention bytes", "local retention ms"),
                move_log_start=False,
            )
        return deleted + self._delete_by_retention(
            now_ms,
            high_watermark=high_watermark,
            retention_bytes=self.config.retention_bytes,
            retention_ms=self.config.retention_ms,
            eligible=lambda nxt: True,
            names=("retention.bytes", "retention.ms"),
            move_log_start=True,
        )

    def _delete_by_retention(
        self,
        now_ms: int,
        *,
        high_watermark: int,
        retention_bytes: int,
        retention_ms: int,
        eligible: Callable[[LogSegment | None], bool],
        names: tuple[str, str],
        move_log_start: bool,
    ) -> int:
        """Oldest segments first while the log is over `retention_bytes`, then segments whose
        newest record is older than `retention_ms` (-1: no limit); only those `eligible` (given
        the segment after them) may go."""
        deleted = 0
        suffix = "" if move_log_start else " (copied to remote storage)"
        if retention_bytes >= 0 and self.size_in_bytes > retention_bytes:
            remaining = [self.size_in_bytes - retention_bytes]

            def size_breached(seg: LogSegment, nxt: LogSegment | None) -> bool:
                if eligible(nxt) and remaining[0] - seg.size >= 0:
                    remaining[0] -= seg.size
                    return True
                return False

            deleted += self._delete_old_segments(
                size_breached,
                high_watermark=high_watermark,
                now_ms=now_ms,
                reason=f"{names[0]} {retention_bytes} breach{suffix}",
                move_log_start=move_log_start,
            )
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda seg, nxt: eligible(nxt) and now_ms - seg.largest_timestamp > retention_ms,
                high_watermark=high_watermark,
                now_ms=now_ms,
                reason=f"{names[1]} {retention_ms} breach{suffix}",
                move_log_start=move_log_start,
            )
        return deleted

    def _delete_old_segments(
        self,
        predicate: Callable[[LogSegment, LogSegment | None], bool],
        *,
        high_watermark: int,
        now_ms: int,
        reason: str,
        move_log_start: bool = True,
    ) -> int:
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            is_last_and_empty = nxt is None and segment.is_empty
            if high_watermark >= upper and not is_last_and_empty and predicate(segment, nxt):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            # There must always be an active segment: roll first.
            new_segment = self.roll(now_ms)
            if deletable[-1] is new_segment:
                deletable.pop()
        self._remove_segments(deletable, reason=reason)
        if move_log_start and self._segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self._segments[0].base_offset
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return len(deletable)

    def _remove_segments(self, doomed: list[LogSegment], *, reason: str) -> None:
        if not doomed:
            return
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._base_offsets = [s.base_offset for s in self._segments]
        for segment in doomed:
            log.info(
                "deleting segment %s of %s (%d bytes): %s",
                segment.base_offset,
                self.dir.name,
                segment.size,
                reason,
            )
            if self.deferred_unlinks is not None:
                self.deferred_unlinks += segment.delete(unlink=False)
            else:
                segment.delete()

    # ------------------------------------------------------------------ flush and lifecycle

    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding offsets in [recovery_point, offset) and
        move the recovery point to ``offset`` (default: the log end)."""
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target > self.recovery_point:
            for segment in self._unflushed_segments(target):
                segment.flush()
        self.recovery_point = max(self.recovery_point, target)
        if target >= self._log_end_offset:
            self._unflushed_messages = 0
        if self._flush_pending_below is not None and self._flush_pending_below <= target:
            self._flush_pending_below = None

    def _unflushed_segments(self, target: int) -> Iterator[LogSegment]:
        """The segments holding offsets in [recovery_point, target): what a flush to `target` fsyncs."""
        for i, segment in enumerate(self._segments):
            upper = self._base_offsets[i + 1] if i + 1 < len(self._segments) else None
            if upper is not None and upper <= self.recovery_point:
                continue
            if segment.base_offset >= target:
                break
            yield segment

    def prepare_flush(self, offset: int | None = None) -> FlushJob | None:
        """`flush` split for a worker thread: here (the owner's thread) pick the segments and
        duplicate their descriptors; `FlushJob.run` fsyncs on any thread; `complete_flush`
        (owner's thread again) moves the recovery point. None if nothing needs an fsync."""
        if self._flush_in_flight or self._closed:
            return None
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target <= self.recovery_point:
            if target >= self._log_end_offset:
                self._unflushed_messages = 0
            if self._flush_pending_below is not None and self._flush_pending_below <= target:
                self._flush_pending_below = None
            return None
        files: list[tuple[int, Path]] = []
        indexes: list[Path] = []
        try:
            for segment in self._unflushed_segments(target):
                fd, index_paths = segment.prepare_flush()
                files.append((fd, segment.log_path))
                indexes += index_paths
        except BaseException:
            for fd, _ in files:
                os.close(fd)
            raise
        self._flush_in_flight = True
        return FlushJob(
            dir=self.dir,
            target=target,
            files=tuple(files),
            index_paths=tuple(indexes),
            unflushed_messages=self._unflushed_messages if target >= self._log_end_offset else 0,
        )

    def complete_flush(self, job: FlushJob, *, ok: bool) -> None:
        """After `FlushJob.run` returned (ok) or raised (not ok: nothing moves)."""
        self._flush_in_flight = False
        if not ok:
            return
        target = min(job.target, self._log_end_offset)  # a truncation meanwhile lowers it
        self.recovery_point = max(self.recovery_point, target)
        self._unflushed_messages = max(self._unflushed_messages - job.unflushed_messages, 0)
        if self._flush_pending_below is not None and self._flush_pending_below <= target:
            self._flush_pending_below = None

    def prepare_maybe_flush(self, now_ms: int) -> FlushJob | None:
        """`maybe_flush`'s policy (flush.ms, the deferred post-roll flush) as a `prepare_flush`."""
        if self._flush_in_flight or self._closed:
            return None
        if self._unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self._last_flush_ms = now_ms
            return self.prepare_flush()
        if self._flush_pending_below is not None:
            return self.prepare_flush(self._flush_pending_below)
        return None

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms policy, and the deferred post-roll flush. True if flushed."""
        if self._unflushed_messages > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms
            return True
        if self._flush_pending_below is not None:
            self.flush(self._flush_pending_below)
            return True
        return False

    def close(self) -> None:
        """Close files; indexes are written out trimmed. Does not fsync the
        log (call flush() first for a clean shutdown)."""
        if self._closed:
            return
        self.take_producer_snapshot()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Rename the dir to ``<topic>-<partition>.<uuidhex>-delete`` (Kafka's
        convention, so a crash mid-delete is finished at the next start), then
        remove it."""
        for segment in self._segments:
            segment.close_handles()
        self._closed = True
        base = partition_dir_name(*self.topic_partition)
        target = self.dir.with_name(f"{base}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(self.dir, target)
        self.dir = target
        shutil.rmtree(target, ignore_errors=True)


def _complete_swaps(dir: Path) -> None:
    """Finish a cleaner swap a crash interrupted: a ``<base>.log.swap`` is a whole,
    fsynced replacement for the segments its offsets cover; those go, it stays."""
    shutil.rmtree(dir / "cleaner-tmp", ignore_errors=True)  # an unfinished group: the originals are intact
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
            if stem.isdigit() and base <= int(stem) <= last and "." + suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                p.unlink()  # the replaced segments, and indexes the new log gets rebuilt
        log.info("completing the interrupted cleaner swap %s", swap)
        os.replace(swap, dir / (prefix + LOG_SUFFIX))


def _remove_temporary_files(dir: Path) -> None:
    """Leftovers of deletes, compaction and swaps that never finished."""
    log_bases = set()
    for p in dir.iterdir():
        if p.name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")):
            log.info("deleting leftover file %s", p)
            p.unlink(missing_ok=True)
        elif p.name.endswith(LOG_SUFFIX):
            log_bases.add(p.name[: -len(LOG_SUFFIX)])
    for p in dir.iterdir():
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if p.name.endswith(suffix) and p.name[: -len(suffix)] not in log_bases:
                log.warning("deleting orphaned index file %s", p)
                p.unlink(missing_ok=True)


def _recover_segments(
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
    # Drop empty segments in the middle that recovery emptied, except the last.
    return kept
