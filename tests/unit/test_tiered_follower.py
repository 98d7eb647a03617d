"""KIP-405 follower fetch (tiered.follower): a replica rebuilt from remote storage.

A leader's log (real segment files) has idempotent batches over three leader epochs; its closed
segments are staged and copied by the remote log manager's own staging code to the ``local``
backend. A second, empty log -- a wiped follower -- is then started from remote storage at the
leader's local log start: it must hold no segment data below it, keep the leader's log start
offset, carry the leader's epochs below the new start and the idempotent producer's state
(so a retried batch is still recognised), and fetch nothing twice.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kavka.protocol.records import build_batch
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log
from kavka.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kavka.tiered.backends import load_remote_storage_manager
from kavka.tiered.follower import (
    RemoteAuxStateNotReady,
    build_remote_log_aux_state,
    parse_leader_epoch_checkpoint,
)
from kavka.tiered.metadata import RemoteLogMetadataCache, RemoteLogSegmentMetadataUpdate
from kavka.tiered.remote_log_manager import _stage_segment

NOW = 1_700_000_000_000
PID = 4242
TIP = TopicIdPartition(uuid.uuid4(), "t", 0)


def open_log(path: Path) -> Log:
    cfg = LogConfig(segment_bytes=2048, remote_storage_enable=True)
    return Log.open(path / "t-0", cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=NOW)


@dataclass
class FakePartition:
    """What tiered.follower needs of a replication.partition.Partition."""

    log: Log
    tp: str = "t-0"

    def restart_at_remote_boundary(self, next_offset: int, **kw: object) -> None:
        self.log.start_at_remote_boundary(next_offset, **kw)  # type: ignore[arg-type]


def leader_with_remote_copies(tmp_path: Path) -> tuple[Log, RemoteLogMetadataCache, object]:
    leader = open_log(tmp_path / "leader")
    seq = 0
    for epoch in (0, 1, 2):
        for _ in range(15):
            batch = build_batch([(NOW, b"k%d" % seq, b"v" * 200)], producer_id=PID, producer_epoch=0, base_sequence=seq)
            leader.append_as_leader(batch, leader_epoch=epoch, now_ms=NOW)
            seq += 1
    rsm = load_remote_storage_manager("local", {"dir": str(tmp_path / "remote")})
    cache = RemoteLogMetadataCache()
    segs = leader.segments
    assert len(segs) >= 4
    for i, seg in enumerate(segs[:-1]):  # the RLM copies closed segments only
        last = segs[i + 1].base_offset - 1
        sid = RemoteLogSegmentId.generate(TIP)
        epochs = [(e.epoch, e.start_offset) for e in leader.leader_epoch_cache.epoch_entries() if e.start_offset <= last]
        md = RemoteLogSegmentMetadata(segment_id=sid, start_offset=seg.base_offset, end_offset=last,
                                      max_timestamp_ms=NOW, broker_id=1, event_timestamp_ms=NOW,
                                      segment_size_in_bytes=seg.size, segment_leader_epochs={})
        stage, data = _stage_segment(leader.dir, seg.base_offset, last + 1, sid.id, epochs)
        rsm.copy_log_segment_data(md, data)
        cache.apply(md)
        cache.apply(RemoteLogSegmentMetadataUpdate(segment_id=sid, state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                                   event_timestamp_ms=NOW, broker_id=1))
    return leader, cache, rsm


async def run_io(fn):  # noqa: ANN001, ANN201
    return fn()


def test_epoch_checkpoint_parsing() -> None:
    assert parse_leader_epoch_checkpoint(b"0\n2\n0 0\n3 17\n") == [(0, 0), (3, 17)]
    for bad in (b"", b"1\n0\n", b"0\n2\n0 0\n", b"0\nx\n"):
        with pytest.raises(ValueError):
            parse_leader_epoch_checkpoint(bad)


def test_wiped_follower_starts_at_the_leaders_local_tail(tmp_path: Path) -> None:
    leader, cache, rsm = leader_with_remote_copies(tmp_path)
    remote = cache.readable()
    # the leader deleted its first two segments locally: its local log starts at the third
    local_start = remote[2].start_offset
    follower = open_log(tmp_path / "follower")
    part = FakePartition(follower)
    next_offset = asyncio.run(build_remote_log_aux_state(
        part, cache=cache, rsm=rsm, run_io=run_io, leader_local_log_start_offset=local_start,
        leader_log_start_offset=0, now_ms=NOW))
    assert next_offset == remote[1].end_offset + 1 == local_start
    assert follower.log_end_offset == follower.local_log_start_offset == next_offset
    assert follower.log_start_offset == 0  # below the local start: remote storage
    assert sum(s.size for s in follower.segments) == 0  # nothing downloaded
    # the leader's epochs below the new start, as the leader has them
    want = [(e.epoch, e.start_offset) for e in leader.leader_epoch_cache.epoch_entries() if e.start_offset < next_offset]
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.epoch_entries()] == want
    assert follower.leader_epoch_cache.latest_epoch == leader.leader_epoch_cache.epoch_for_offset(next_offset - 1)
    # the idempotent producer's state: its last sequence before the new start is known
    entry = follower.producer_state.producers[PID]
    assert entry.batches[-1].last_offset == next_offset - 1
    # it survives a restart of the follower (checkpointed epochs, snapshot file, log start)
    follower.close()
    again = open_log(tmp_path / "follower")
    again.update_config(again.config)
    assert again.log_end_offset == next_offset
    assert again.producer_state.producers[PID].batches[-1].last_offset == next_offset - 1


def test_unknown_boundary_waits_and_a_chasing_replica_takes_the_newest_segment(tmp_path: Path) -> None:
    _leader, cache, rsm = leader_with_remote_copies(tmp_path)
    remote = cache.readable()
    follower = FakePartition(open_log(tmp_path / "follower"))
    with pytest.raises(RemoteAuxStateNotReady):  # the leader's local start is above what this broker knows
        asyncio.run(build_remote_log_aux_state(
            follower, cache=cache, rsm=rsm, run_io=run_io,
            leader_local_log_start_offset=remote[-1].end_offset + 2, leader_log_start_offset=0, now_ms=NOW))
    assert follower.log.log_end_offset == 0  # nothing changed
    next_offset = asyncio.run(build_remote_log_aux_state(
        follower, cache=cache, rsm=rsm, run_io=run_io, leader_local_log_start_offset=remote[1].start_offset,
        leader_log_start_offset=0, now_ms=NOW, chasing=True))
    assert next_offset == remote[-1].end_offset + 1
