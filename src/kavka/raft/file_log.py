"""The metadata log on disk: a ReplicatedLog over kavka.storage.unified_log.Log.

Layout, as Kafka's KRaft writes it:
    <metadata.log.dir>/__cluster_metadata-0/00000000000000000000.log|.index|.timeindex
    <metadata.log.dir>/__cluster_metadata-0/leader-epoch-checkpoint
    <metadata.log.dir>/__cluster_metadata-0/partition.metadata   (Kafka's fixed METADATA_TOPIC_ID)
    <metadata.log.dir>/__cluster_metadata-0/<end offset>-<epoch>.checkpoint   snapshots (raft.snapshot)

Each `append` call of the core is one record batch v2 (a control batch for the
LeaderChange record) carrying its epoch as partition leader epoch, appended
with the offsets the core assigned (Log.append_as_follower), so the leader
epoch cache (leader-epoch-checkpoint) is maintained by the storage layer.
`flushed_end_offset` is the Log's recovery point: everything below it was
fsynced. The log is opened as after an unclean shutdown (recovered from the
start), which is always correct; time and size retention are off -- only
snapshots delete metadata: once a snapshot is frozen the log start offset
moves up to its end offset (Kafka's deleteBeforeSnapshot; whole segments
below it are deleted) and every snapshot but the newest and the one before it
is deleted. At open, torn `.part` files are deleted, snapshots that fail to
decode are ignored with a warning, and a log that ends below the newest
snapshot restarts at its end (Kafka's truncateToLatestSnapshot). Called only
by RaftClient's thread, except `write_snapshot` (a worker thread may write a
new file while the loop goes on).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kavka.protocol.records import iter_batches
from kavka.raft import snapshot as snapshots
from kavka.raft.api import SnapshotId
from kavka.raft.codec import decode_records, encode_records
from kavka.raft.quorum import METADATA_DIR_NAME, METADATA_TOPIC_ID
from kavka.raft.replicated_log import LogEntry
from kavka.storage.local_log import FlushJob
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

_READ_BYTES = 1024 * 1024
_log = logging.getLogger("kavka.raft")


@dataclass(slots=True)
class _FileFlush:
    job: FlushJob
    truncations: int

    def run(self) -> None:
        self.job.run()


def _offset(entry: LogEntry) -> int:
    return entry.offset


class NoSnapshotError(Exception):
    """The log starts above 0 but no readable snapshot covers what it dropped."""


class FileReplicatedLog:
    def __init__(self, log: Log) -> None:
        self.log = log
        self._snapshots: list[SnapshotId] = []  # valid ones, oldest first
        self._truncations = 0  # a flush begun before a truncation moves nothing
        # The batch `read` decoded last, as (base offset, truncations then, entries): a listener
        # reads a batch larger than its 1,024 entries a read in several reads, each of which
        # decoded it whole (a restart's batch of 10,000 partition changes, ten times). A batch
        # never changes in place; only a truncation may put another at the same offset.
        self._decoded: tuple[int, int, list[LogEntry]] | None = None
        self._load_snapshots()

    @classmethod
    def open(
        cls, metadata_log_dir: Path, *, now_ms: int, segment_bytes: int = 64 * 1024 * 1024
    ) -> FileReplicatedLog:
        config = LogConfig(retention_ms=-1, retention_bytes=-1, segment_bytes=segment_bytes)
        log = Log.open(
            metadata_log_dir / METADATA_DIR_NAME,
            config,
            topic_id=METADATA_TOPIC_ID,
            recovery_point=0,
            log_start_offset=0,
            clean_shutdown=False,
            now_ms=now_ms,
        )
        return cls(log)

    @property
    def dir(self) -> Path:
        return self.log.dir

    def _load_snapshots(self) -> None:
        valid: list[SnapshotId] = []
        for sid, path in snapshots.scan(self.log.dir):
            try:
                snapshots.decode(path.read_bytes())
            except (OSError, snapshots.CorruptSnapshotError) as e:
                _log.warning("ignoring metadata snapshot %s: %s", path, e)
                continue
            valid.append(sid)
        self._snapshots = valid
        latest = self.latest_snapshot_id
        if latest is None:
            if self.log.log_start_offset > 0:
                raise NoSnapshotError(
                    f"{self.log.dir} starts at offset {self.log.log_start_offset} but holds no readable "
                    "snapshot (.checkpoint) of the records below it"
                )
            return
        if self.log.log_start_offset > latest.end_offset:
            raise NoSnapshotError(
                f"{self.log.dir} starts at offset {self.log.log_start_offset}, above its newest readable "
                f"snapshot {snapshots.file_name(latest)}"
            )
        if self.log.log_end_offset < latest.end_offset:
            _log.info("restarting the metadata log at the end of snapshot %s", snapshots.file_name(latest))
            self.log.truncate_fully_and_start_at(latest.end_offset)
        else:
            self.log.maybe_increment_log_start_offset(latest.end_offset, "metadata snapshot")

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    @property
    def last_epoch(self) -> int:
        latest = self.log.leader_epoch_cache.latest_epoch
        if latest is None:
            snap = self.latest_snapshot_id
            return 0 if snap is None else snap.epoch
        return latest

    @property
    def flushed_end_offset(self) -> int:
        return self.log.recovery_point

    def append(self, entries: Sequence[LogEntry]) -> None:
        if not entries:
            return
        if entries[0].offset != self.end_offset:
            raise ValueError(f"append at {entries[0].offset}, log end offset is {self.end_offset}")
        if entries[0].epoch < self.last_epoch:
            raise ValueError(f"epoch {entries[0].epoch} below last epoch {self.last_epoch}")
        self.log.append_as_follower(encode_records(tuple(entries)), now_ms=0)

    def truncate_to(self, offset: int) -> None:
        if self.log.truncate_to(offset):
            self._truncations += 1
            self._decoded = None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        # The same contract as MemoryLog (largest epoch <= `epoch`, and where it ends), from
        # leader-epoch-checkpoint rather than Kafka's endOffsetFor, whose "unknown" answers
        # the core has no use for.
        entries = self.log.leader_epoch_cache.epoch_entries()
        found = None
        for i, e in enumerate(entries):
            if e.epoch > epoch:
                break
            found = i
        if found is None:
            snap = self.latest_snapshot_id
            if snap is not None and snap.epoch <= epoch:
                return snap.epoch, snap.end_offset
            return (0, self.start_offset) if not entries else (0, entries[0].start_offset)
        end = entries[found + 1].start_offset if found + 1 < len(entries) else self.end_offset
        return entries[found].epoch, end

    def read(self, start_offset: int, max_entries: int) -> list[LogEntry]:
        if start_offset >= self.end_offset or max_entries <= 0:
            return []
        out: list[LogEntry] = []
        offset = start_offset
        while len(out) < max_entries and offset < self.end_offset:
            data = bytes(self.log.read(offset, max_bytes=_READ_BYTES, min_one_message=True).records)
            got = 0
            # Batch by batch, only as many as asked for: a read of one entry (the last, or the next
            # 1,024 for a listener) used to decode the whole megabyte read, so replaying a metadata
            # log of 10,000 partitions decoded it about ten times over.
            for pos, header in iter_batches(data):
                if header.last_offset < offset:
                    continue
                cached = self._decoded
                if cached is not None and cached[:2] == (header.base_offset, self._truncations):
                    decoded = cached[2]
                else:
                    decoded = list(decode_records(data[pos : pos + header.size_in_bytes]))
                    self._decoded = (header.base_offset, self._truncations, decoded)
                entries = decoded[bisect.bisect_left(decoded, offset, key=_offset) :]
                out.extend(entries)
                got += len(entries)
                if len(out) >= max_entries:
                    break
            if not got:
                break
            offset = out[-1].offset + 1
        return out[:max_entries]

    def flush(self) -> None:
        self.log.flush()

    def begin_flush(self) -> _FileFlush | None:
        job = self.log.prepare_flush()
        return None if job is None else _FileFlush(job, self._truncations)

    def end_flush(self, ticket: _FileFlush, *, ok: bool) -> None:
        # After a truncation the entries now below the job's target may be new, unsynced ones.
        self.log.complete_flush(ticket.job, ok=ok and ticket.truncations == self._truncations)

    # ---- snapshots -------------------------------------------------------------------------

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        snapshots.write(self.log.dir, snapshot_id, data)

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        if snapshot_id not in self._snapshots:
            return None
        try:
            return (self.log.dir / snapshots.file_name(snapshot_id)).read_bytes()
        except FileNotFoundError:
            return None

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        latest = self.latest_snapshot_id
        if latest is not None and snapshot_id.end_offset <= latest.end_offset:
            (self.log.dir / snapshots.file_name(snapshot_id)).unlink(missing_ok=True)
            return
        self._snapshots.append(snapshot_id)
        if snapshot_id.end_offset <= self.log.log_end_offset:
            self.log.maybe_increment_log_start_offset(snapshot_id.end_offset, "metadata snapshot")
        for old in self._snapshots[:-2]:
            _log.info("deleting metadata snapshot %s", snapshots.file_name(old))
            (self.log.dir / snapshots.file_name(old)).unlink(missing_ok=True)
        self._snapshots = self._snapshots[-2:]

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.write_snapshot(snapshot_id, data)
        self._truncations += 1
        self._decoded = None
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._snapshots = [s for s in self._snapshots if s.end_offset < snapshot_id.end_offset]
        self.snapshot_frozen(snapshot_id)

    def close(self) -> None:
        self.log.close()
