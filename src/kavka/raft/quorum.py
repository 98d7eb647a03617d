"""The metadata log and its quorum -- a single voter for now.

A single broker is a combined broker+controller with a one-voter quorum
(KIP-500/KIP-595 with one voter): the voter is always the leader, each
startup begins a new epoch (as a restarted sole voter does after it elects
itself), and a record is committed as soon as it is durable locally, so the
high watermark is the log end offset after the fsync.

Layout, as Kafka's KRaft writes it:
    <metadata.log.dir>/__cluster_metadata-0/   the log (ordinary segments)
    <metadata.log.dir>/__cluster_metadata-0/quorum-state   {"leaderId", "leaderEpoch", ...}

The interface (`append`, `read_committed`, `high_watermark`) is what a
multi-voter RaftClient driven by poll(now) will keep. Called only from the
controller, on the event-loop thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from kavka.protocol.records import build_batch, iter_records
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's fixed METADATA_TOPIC_ID (Uuid 0,1)
METADATA_DIR_NAME = f"{METADATA_TOPIC}-0"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class SingleVoterQuorum:
    def __init__(self, metadata_log_dir: Path, *, node_id: int, now_ms: int, clean_shutdown: bool) -> None:
        self.node_id = node_id
        self.dir = metadata_log_dir / METADATA_DIR_NAME
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state_file = self.dir / "quorum-state"
        epoch = 0
        if self._state_file.exists():
            try:
                epoch = int(json.loads(self._state_file.read_text())["leaderEpoch"])
            except (ValueError, KeyError, TypeError) as e:
                raise RuntimeError(f"corrupt quorum-state file {self._state_file}: {e}") from None
        self.leader_epoch = epoch + 1
        self._write_state()
        # The metadata log keeps everything: retention would lose cluster state
        # (kavka has no metadata snapshots yet).
        config = LogConfig(retention_ms=-1, retention_bytes=-1, segment_bytes=64 * 1024 * 1024)
        self.log = Log.open(
            self.dir,
            config,
            topic_id=METADATA_TOPIC_ID,
            recovery_point=0,
            log_start_offset=0,
            clean_shutdown=clean_shutdown,
            now_ms=now_ms,
        )

    def _write_state(self) -> None:
        state = {
            "leaderId": self.node_id,
            "leaderEpoch": self.leader_epoch,
            "votedId": self.node_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": self.node_id}],
            "data_version": 0,
        }
        _write_atomic(self._state_file, json.dumps(state).encode())

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    def append(self, records: Sequence[tuple[bytes, bytes]], *, now_ms: int) -> int:
        """Append one batch atomically, make it durable, return its last offset."""
        batch = build_batch(
            [(now_ms, k, v, ()) for k, v in records],
            partition_leader_epoch=self.leader_epoch,
        )
        info = self.log.append_as_leader(batch, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self.log.flush()
        return info.last_offset

    def read_committed(self, from_offset: int = 0) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        offset = max(from_offset, self.log.log_start_offset)
        end = self.high_watermark
        while offset < end:
            data = self.log.read(offset, max_bytes=4 * 1024 * 1024, max_offset=end, min_one_message=True)
            buf = data.records
            if not buf:
                break
            last = offset
            for rec in iter_records(buf):
                if rec.offset >= offset:
                    yield rec.offset, rec.key, rec.value
                last = rec.offset
            offset = last + 1

    def close(self) -> None:
        self.log.close()
