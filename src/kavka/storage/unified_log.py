"""The unified log of one partition (Kafka's UnifiedLog): the class keeps the name ``Log``.

Owns, above the segments (storage.local_log.LocalLog, which it holds), Kafka's
offsets and per-partition state:

* ``log_start_offset`` <= first offset readable; advanced by retention and
  DeleteRecords, never moved back except by ``truncate_fully_and_start_at``;
* ``log_end_offset`` (LEO) and ``recovery_point``: kept by the LocalLog;
* ``local_log_start_offset`` (KIP-405): the first offset on local disk. It
  equals ``log_start_offset`` unless the topic is tiered
  (``remote.storage.enable``): then offsets in [log_start_offset,
  local_log_start_offset) live only in remote storage (kavka.tiered), local
  retention (``local.retention.*``) deletes only segments whose last offset is
  at or below ``highest_offset_in_remote`` (set by the remote log manager), and
  only total retention in remote storage moves ``log_start_offset``;
* ``leader-epoch-checkpoint`` (the leader epoch cache) and ``partition.metadata``
  (the topic id);
* producer state (storage.producer_state), rebuilt on first use by
  storage.log_loader and snapshotted to ``<offset>.snapshot`` at each roll and at close;
* transactions (KIP-98): an end-transaction marker (protocol.control_records), appended
  by the leader for the transaction coordinator (``append_as_leader(allow_control=True)``)
  or replicated, closes its producer's transaction; an aborted one is written to the
  ``.txnindex`` of the segment the marker lands in (storage.txn_index) with the last
  stable offset after it. ``first_unstable_offset`` (the lowest first offset of an open
  transaction, at least the log start) bounds the partition's last stable offset, and
  ``collect_aborted_transactions`` answers a read_committed fetch;
* validation of appends (storage.log_validator) and retention
  (``delete_retention_segments``).

Opening a dir (recovery included) is storage.log_loader.LogLoader's, through `Log.open`.
The high watermark is not kept here: it belongs to the broker's Partition,
which passes it in as ``max_offset`` on reads and ``high_watermark`` to
retention.

Threading: the broker calls every method from its single asyncio thread (the
owner); nothing here takes locks. Work handed to worker threads never calls a
Log method: a `FlushJob` (from `prepare_flush`) fsyncs duplicated descriptors,
the log cleaner reads segment files through its own descriptors and hands a
finished segment back to `replace_segments`, and retention run with
`deferred_unlinks` set leaves the unlinks of ``.deleted`` files to a worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kavka.common import TopicPartition
from kavka.protocol.control_records import parse_end_txn_marker
from kavka.protocol.records import (
    BatchHeader,
    CorruptRecordError,
    Record,
    assign_offsets,
    batch_crc_ok,
    decode_batch,
    iter_batches,
    validate_batches,
)
from kavka.storage.checkpoints import write_atomically
from kavka.storage.errors import (
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kavka.storage.leader_epoch import LeaderEpochFileCache
from kavka.storage.local_log import FetchDataInfo, FlushJob, LocalLog
from kavka.storage.log_config import LogConfig
from kavka.storage.log_loader import LogLoader, rebuild_producer_state, replay_batch
from kavka.storage.log_validator import CODECS, ValidationConfig, validate_records
from kavka.storage.producer_state import (
    BatchMetadata,
    ProducerStateManager,
    snapshot_offsets,
    snapshot_path,
    write_snapshot,
)
from kavka.storage.segment import LogSegment, TimestampAndOffset
from kavka.storage.txn_index import AbortedTxn

log = logging.getLogger("kavka.storage")


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
        self._local = LocalLog(
            dir,
            config,
            segments=segments,
            log_end_offset=log_end_offset,
            recovery_point=recovery_point,
            now_ms=now_ms,
        )
        self.topic_id = topic_id
        self.leader_epoch_cache = leader_epoch_cache
        self.log_start_offset = log_start_offset
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
        """Load (creating if needed) and, after an unclean shutdown, recover (storage.log_loader).

        ``topic_id`` None means "whatever partition.metadata says".
        """
        dir = Path(dir)
        loaded = LogLoader(
            dir,
            config,
            topic_id=topic_id,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            now_ms=now_ms,
        ).load()
        opened = cls(
            dir,
            config,
            topic_id=loaded.topic_id,
            segments=loaded.segments,
            leader_epoch_cache=loaded.leader_epoch_cache,
            log_start_offset=loaded.log_start_offset,
            log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point,
            now_ms=now_ms,
        )
        if loaded.checkpointed_log_start_offset is not None:
            # Opened before the topic's config is known (LogManager loads with the defaults):
            # update_config puts it back if the topic turns out to be tiered.
            opened._checkpointed_log_start_offset = loaded.checkpointed_log_start_offset
        return opened

    # ------------------------------------------------------------------ facts

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset})"
        )

    @property
    def local_log(self) -> LocalLog:
        return self._local

    @property
    def dir(self) -> Path:
        return self._local.dir

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @property
    def topic_partition(self) -> TopicPartition:
        return self._local.topic_partition

    @property
    def topic(self) -> str:
        return self.topic_partition[0]

    @property
    def partition(self) -> int:
        return self.topic_partition[1]

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @recovery_point.setter
    def recovery_point(self, value: int) -> None:
        self._local.recovery_point = value

    @property
    def deferred_unlinks(self) -> list[Path] | None:
        """Set by the LogManager and the remote log manager around retention: removed segments'
        files are only renamed ``.deleted`` and listed here, for a worker to unlink."""
        return self._local.deferred_unlinks

    @deferred_unlinks.setter
    def deferred_unlinks(self, value: list[Path] | None) -> None:
        self._local.deferred_unlinks = value

    @property
    def segments(self) -> list[LogSegment]:
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def size_in_bytes(self) -> int:
        return self._local.size_in_bytes

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (KIP-405's localLogStartOffset)."""
        return min(max(self.log_start_offset, self._local.first_segment_base_offset), self._local.log_end_offset)

    @property
    def unflushed_messages(self) -> int:
        return self._local.unflushed_messages

    def update_config(self, config: LogConfig) -> None:
        restore, self._checkpointed_log_start_offset = self._checkpointed_log_start_offset, None
        if config.remote_storage_enable and restore is not None and restore < self.log_start_offset:
            log.info("%s is tiered: its log start offset is %d (below its first local segment)", self.dir.name, restore)
            self.log_start_offset = restore
        self._local.config = config

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

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        allow_control: bool = False,
        in_place: bool = False,
    ) -> AppendInfo:
        """Validate, assign offsets from the log end, and append.

        The batches are rewritten (maxTimestamp, offsets, leader epoch) in a copy of `records`,
        or, with `in_place` and a writable memoryview (a request frame's own buffer, which the
        caller gives up: protocol.framing.FrameDecoder), where they are: then the bytes are
        copied only by the write itself.

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
        if allow_control:
            # The coordinator's markers (Kafka's AppendOrigin.COORDINATOR): one from a fenced
            # coordinator is refused before anything is written.
            for pos, h in iter_batches(records):
                if h.is_control and h.producer_id >= 0:
                    _, marker = parse_end_txn_marker(records, pos)
                    if marker is not None:
                        self.producer_state.check_marker(h, marker.coordinator_epoch)
        # Per-record checks and rewrites (Kafka's LogValidator): may recompress.
        writable = in_place and isinstance(records, memoryview) and not records.readonly
        buf = validate_records(records if writable else bytearray(records), self._validation, now_ms=now_ms)
        if len(buf) > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {len(buf)} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        log_append_time = now_ms if self.config.log_append_time else None
        first_offset = self.log_end_offset
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
        """Idempotent producers' state: the latest usable ``.snapshot`` plus the batches after it
        (storage.log_loader.rebuild_producer_state), built on first use."""
        if self._producer_state is None:
            self._producer_state = rebuild_producer_state(self._local)
        return self._producer_state

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction, at least the log start offset
        (Kafka's firstUnstableOffset); None when no transaction is open. Loads producer state."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self.log_start_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The last stable offset given the partition's high watermark: no read_committed
        consumer reads at or past it."""
        first = self.first_unstable_offset
        return high_watermark if first is None else min(first, high_watermark)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound_offset), from the ``.txnindex``
        of the segment holding `fetch_offset` on (Kafka's collectAbortedTransactions)."""
        out: list[AbortedTxn] = []
        for segment in self._local.segments_from(fetch_offset):
            result = segment.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
            out += result.aborted
            if result.complete:
                break
        return out

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Drop expired producer ids (producer_state.remove_expired) if the state is loaded."""
        if self._producer_state is None or self._local.closed:
            return 0
        return self._producer_state.remove_expired(now_ms, expiration_ms)

    def take_producer_snapshot(self) -> None:
        """Write ``<log end>.snapshot`` if the state is loaded; keep the two newest (Kafka keeps
        one per segment; two is enough to survive a torn latest one)."""
        if self._producer_state is None or self._local.closed:
            return
        write_snapshot(self.dir, self.log_end_offset, self._producer_state)
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
        leo = self.log_end_offset
        if headers[0].base_offset < leo:
            raise UnexpectedAppendOffsetError(
                f"follower append at offset {headers[0].base_offset} is below the log end "
                f"offset {leo} of {self.dir.name}"
            )
        prev_next = leo
        for h in headers:
            if h.base_offset < prev_next:
                raise CorruptRecordError(f"offsets go backwards at batch {h.base_offset}")
            prev_next = h.next_offset
        # Written straight from the fetch response's buffer (the segment keeps no reference to it).
        return self._append(view[:end], headers, leader_epoch_hint=None, now_ms=now_ms)

    def _append(
        self,
        buf: bytes | bytearray | memoryview,
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
        self._maybe_roll(
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
        self.leader_epoch_cache.flush_if_unflushed()  # a new leader's epoch, with its first batch
        if any(h.is_control for h in headers):
            # A marker closes a transaction and may index it: the state must be loaded (from the
            # log as it is before this append) to know where the transaction began.
            _ = self.producer_state
        segment = self.active_segment
        position = segment.size
        self._local.append(
            buf,
            headers,
            last_offset=last_offset,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max,
        )
        if self._producer_state is not None:
            for h in headers:
                replay_batch(self._producer_state, segment, position, h, index=True)
                position += h.size_in_bytes
        num_messages = sum(h.records_count for h in headers)
        self._local.add_unflushed_messages(num_messages, now_ms)
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
        # Kafka snapshots producer state at every roll.
        return self._local.roll(
            now_ms, expected_next_offset=expected_next_offset, before_new_segment=self.take_producer_snapshot
        )

    # ------------------------------------------------------------------ compaction

    def replace_segments(
        self,
        old: list[LogSegment],
        old_sizes: list[int],
        cleaned_dir: Path,
        *,
        now_ms: int,
        aborted_txns: list[AbortedTxn] | None = None,
    ) -> list[Path] | None:
        """Swap the cleaner's output for a group of closed segments (LocalLog.replace_segments)."""
        return self._local.replace_segments(old, old_sizes, cleaned_dir, now_ms=now_ms, aborted_txns=aborted_txns)

    # ------------------------------------------------------------------ read

    def replay_records(self, *, chunk_bytes: int = 1 << 20) -> Iterator[Record]:
        """Every record from the log start to the log end as it is now, read `chunk_bytes` at a
        time -- what an internal topic's owner replays into memory (the group coordinator's
        `__consumer_offsets`, tiered storage's `__remote_log_metadata`). A batch that starts
        below a chunk's first offset is yielded only from that offset on."""
        for _header, records in self.replay_batches(chunk_bytes=chunk_bytes):
            yield from records

    def replay_batches(self, *, chunk_bytes: int = 1 << 20) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """`replay_records` by batch: each batch's header (its producer id, the transactional
        and control bits) with its records from the replay position on -- what the group
        coordinator needs to hold transactional offsets until their marker."""
        offset, end = self.log_start_offset, self.log_end_offset
        while offset < end:
            data = self.read(offset, max_bytes=chunk_bytes, min_one_message=True).records
            if not data:
                return
            next_offset = offset
            for pos, header in iter_batches(data):
                next_offset = max(next_offset, header.next_offset)
                records = [r for r in decode_batch(data, pos)[1] if r.offset >= offset]
                if records:
                    yield header, records
            if next_offset <= offset:
                return
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
        leo = self.log_end_offset
        if fetch_offset < self.local_log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {self.dir.name}: log start "
                f"offset {self.log_start_offset}, local log start offset "
                f"{self.local_log_start_offset}, log end offset {leo}",
                log_start_offset=self.log_start_offset,
                log_end_offset=leo,
            )
        return self._local.read(
            fetch_offset, max_bytes=max_bytes, max_offset=max_offset, min_one_message=min_one_message
        )

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record at or above log_start_offset with timestamp >= ``timestamp``
        (ListOffsets with a timestamp)."""
        for segment in self._local.segments:
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
        for segment in self._local.segments:
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
        if target_offset >= self.log_end_offset:
            # Kafka's UnifiedLog.truncateTo: the epoch cache is truncated at the log end even
            # so. A broker that took a leader epoch and appended nothing in it holds an entry
            # (epoch, log end); kept while it follows, that epoch would be sent as its last
            # fetched epoch and every fetch would answer the same diverging epoch.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self._local.first_segment_base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset, now_ms=now_ms)
            return True
        self._local.truncate_to(target_offset, now_ms=now_ms)
        self._producer_state = None
        self._delete_snapshots_above(target_offset)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        self.log_start_offset = min(self.log_start_offset, target_offset)
        self._local.reset_after_truncation(target_offset, full=False)
        return True

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and restart the log at ``new_offset``."""
        self._local.truncate_fully_and_start_at(new_offset, now_ms=now_ms)
        self.log_start_offset = new_offset
        self._local.reset_after_truncation(new_offset, full=True)
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
        leo = self.log_end_offset
        if new_log_start_offset > leo:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset of {self.dir.name} to "
                f"{new_log_start_offset}: it is above the log end offset {leo}",
                log_start_offset=self.log_start_offset,
                log_end_offset=leo,
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
        segments = self._local.segments
        for i, segment in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= self.log_start_offset:
                doomed.append(segment)
            else:
                break
        if doomed:
            self._local.remove_segments(doomed, reason="log start offset breach")
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
        segments = self._local.segments
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            is_last_and_empty = nxt is None and segment.is_empty
            if high_watermark >= upper and not is_last_and_empty and predicate(segment, nxt):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            # There must always be an active segment: roll first.
            new_segment = self.roll(now_ms)
            if deletable[-1] is new_segment:
                deletable.pop()
        self._local.remove_segments(deletable, reason=reason)
        first_base = self._local.first_segment_base_offset
        if move_log_start and first_base > self.log_start_offset:
            self.log_start_offset = first_base
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return len(deletable)

    # ------------------------------------------------------------------ flush and lifecycle

    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding offsets in [recovery_point, offset) and
        move the recovery point to ``offset`` (default: the log end)."""
        self._local.flush(offset)

    def prepare_flush(self, offset: int | None = None) -> FlushJob | None:
        """`flush` split for a worker thread: here (the owner's thread) pick the segments and
        duplicate their descriptors; `FlushJob.run` fsyncs on any thread; `complete_flush`
        (owner's thread again) moves the recovery point. None if nothing needs an fsync."""
        return self._local.prepare_flush(offset)

    def complete_flush(self, job: FlushJob, *, ok: bool) -> None:
        """After `FlushJob.run` returned (ok) or raised (not ok: nothing moves)."""
        self._local.complete_flush(job, ok=ok)

    def prepare_maybe_flush(self, now_ms: int) -> FlushJob | None:
        """`maybe_flush`'s policy (flush.ms, the deferred post-roll flush) as a `prepare_flush`."""
        return self._local.prepare_maybe_flush(now_ms)

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms policy, and the deferred post-roll flush. True if flushed."""
        return self._local.maybe_flush(now_ms)

    def close(self) -> None:
        """Close files; indexes are written out trimmed. Does not fsync the
        log (call flush() first for a clean shutdown)."""
        if self._local.closed:
            return
        self.take_producer_snapshot()
        self._local.close()

    def delete(self) -> None:
        """Rename the dir to ``<topic>-<partition>.<uuidhex>-delete`` (Kafka's
        convention, so a crash mid-delete is finished at the next start), then
        remove it."""
        self._local.delete()
