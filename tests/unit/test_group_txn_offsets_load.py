"""GroupCoordinatorManager loading a real `__consumer_offsets` log with transactional offsets
(TxnOffsetCommit batches and their markers): a committed transaction's offset is the group's, an
aborted one's never is, one with no marker yet stays pending until a marker is written; and the
same after the log cleaner compacted the partition (an aborted offset must not shadow the
committed one). The replica manager is a stand-in holding the real log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kavka.coordinator import records as rec
from kavka.coordinator.group import GroupConfig, OffsetAndMetadata
from kavka.coordinator.manager import GroupCoordinatorManager
from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.records import build_batch
from kavka.replication.partition import TopicPartition
from kavka.storage.cleaner import maybe_clean
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
TP = TopicPartition(rec.OFFSETS_TOPIC, 0)
KEY = rec.offset_key("g", "t", 0)


@dataclass
class _Part:
    log: Log
    is_leader: bool = True


class _ReplicaManager:
    def __init__(self, lg: Log) -> None:
        self.partitions = {TP: _Part(lg)}

    def get_partition(self, topic: str, partition: int) -> _Part | None:
        return self.partitions.get(TopicPartition(topic, partition))


def _manager(lg: Log) -> GroupCoordinatorManager:
    async def create(_n: int) -> None:
        raise AssertionError("the topic exists")

    m = GroupCoordinatorManager(config=GroupConfig(), replica_manager=_ReplicaManager(lg),  # type: ignore[arg-type]
                                num_partitions=1, create_offsets_topic=create, now_ms=lambda: NOW,
                                topic_partitions=lambda t: 1 if t == rec.OFFSETS_TOPIC else None)
    m.load()
    return m


def _offset(v: int) -> bytes:
    return rec.offset_value(OffsetAndMetadata(v, -1, "", NOW))


def _txn(lg: Log, pid: int, v: int) -> None:
    lg.append_as_leader(build_batch([(NOW, KEY, _offset(v))], producer_id=pid, producer_epoch=0, is_transactional=True),
                        leader_epoch=0, now_ms=NOW, allow_control=True)


def _marker(lg: Log, pid: int, kind: ControlRecordType) -> None:
    lg.append_as_leader(build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                                   timestamp_ms=NOW), leader_epoch=0, now_ms=NOW, allow_control=True)


def _committed(m: GroupCoordinatorManager) -> int | None:
    om = m.fetch_offsets("g", [("t", 0)])[("t", 0)]
    return None if om is None else om.offset


def test_load_commits_aborts_and_keeps_pending_and_so_after_compaction(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    lg = Log.open(tmp_path / "__consumer_offsets-0", cfg, topic_id=None, recovery_point=0, log_start_offset=0,
                  clean_shutdown=True, now_ms=NOW)
    try:
        lg.append_as_leader(build_batch([(NOW, KEY, _offset(5))]), leader_epoch=0, now_ms=NOW)
        _txn(lg, 7, 9)
        _marker(lg, 7, ControlRecordType.COMMIT)
        _txn(lg, 8, 11)
        _marker(lg, 8, ControlRecordType.ABORT)
        lg.roll(NOW)
        _txn(lg, 9, 13)  # no marker: its transaction is open
        lg.roll(NOW)

        m = _manager(lg)
        assert _committed(m) == 9
        assert m.has_pending_txn_offset("g", ("t", 0))

        result = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW + 1000,
                             force=True)
        assert result is not None
        kept = [rec.parse_offset_value(r.value).offset for h, rs in lg.replay_batches() if not h.is_control
                for r in rs]
        assert kept == [9, 13]  # the plain 5 superseded, the aborted 11 dropped, the open 13 not cleaned
        m = _manager(lg)  # a new coordinator replaying the compacted partition
        assert _committed(m) == 9
        assert m.has_pending_txn_offset("g", ("t", 0))

        _marker(lg, 9, ControlRecordType.COMMIT)
        m.complete_txn(TP, 9, True)  # what ReplicaManager.txn_marker_listeners tells it
        assert _committed(m) == 13 and not m.has_pending_txn_offset("g", ("t", 0))
        assert _committed(_manager(lg)) == 13

        _txn(lg, 10, 20)
        m = _manager(lg)
        m.complete_txn(TP, 10, False)
        assert _committed(m) == 13 and not m.has_pending_txn_offset("g", ("t", 0))

        # A plain commit written after a transaction's record and before its marker stays the
        # group's offset when the transaction commits (the later write wins, as in Kafka).
        _txn(lg, 11, 30)
        lg.append_as_leader(build_batch([(NOW, KEY, _offset(31))]), leader_epoch=0, now_ms=NOW)
        _marker(lg, 11, ControlRecordType.COMMIT)
        assert _committed(_manager(lg)) == 31
    finally:
        lg.close()
