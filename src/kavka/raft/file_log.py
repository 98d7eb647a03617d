"""The metadata log on disk: a ReplicatedLog over kavka.storage.log.Log.

Layout, as Kafka's KRaft writes it:
    <metadata.log.dir>/__cluster_metadata-0/00000000000000000000.log|.index|.timeindex
    <metadata.log.dir>/__cluster_metadata-0/leader-epoch-checkpoint
    <metadata.log.dir>/__cluster_metadata-0/partition.metadata   (Kafka's fixed METADATA_TOPIC_ID)

Each `append` call of the core is one record batch v2 (a control batch for the
LeaderChange record) carrying its epoch as partition leader epoch, appended
with the offsets the core assigned (Log.append_as_follower), so the leader
epoch cache (leader-epoch-checkpoint) is maintained by the storage layer.
`flushed_end_offset` is the Log's recovery point: everything below it was
fsynced. The log is opened as after an unclean shutdown (recovered from the
start), which is always correct; retention is off -- only snapshots, not yet
written, may ever delete metadata. Called only by RaftClient's thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kavka.raft.codec import decode_records, encode_records
from kavka.raft.quorum import METADATA_DIR_NAME, METADATA_TOPIC_ID
from kavka.raft.replicated_log import LogEntry
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig

_READ_BYTES = 1024 * 1024


class FileReplicatedLog:
    def __init__(self, log: Log) -> None:
        self.log = log

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
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_epoch(self) -> int:
        latest = self.log.leader_epoch_cache.latest_epoch
        return 0 if latest is None else latest

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
        self.log.truncate_to(offset)

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
            return (0, 0) if not entries else (0, entries[0].start_offset)
        end = entries[found + 1].start_offset if found + 1 < len(entries) else self.end_offset
        return entries[found].epoch, end

    def read(self, start_offset: int, max_entries: int) -> list[LogEntry]:
        if start_offset >= self.end_offset or max_entries <= 0:
            return []
        out: list[LogEntry] = []
        offset = start_offset
        while len(out) < max_entries and offset < self.end_offset:
            data = self.log.read(offset, max_bytes=_READ_BYTES, min_one_message=True)
            got = [e for e in decode_records(bytes(data.records)) if e.offset >= offset]
            if not got:
                break
            out.extend(got)
            offset = got[-1].offset + 1
        return out[:max_entries]

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()
