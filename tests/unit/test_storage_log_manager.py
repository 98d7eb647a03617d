"""LogManager: dirs, checkpoints, clean-shutdown marker, retention, deletes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kavka.protocol.records import build_batch, iter_records
from kavka.storage.errors import LogDirLockedError
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

NOW = 1_700_000_000_000
TID = "J8aAPcfLQt2bqs1JT_rMgQ"


def records(n: int, ts: int = NOW) -> bytes:
    return build_batch([(ts, b"k", b"v" * 50) for _ in range(n)])


def test_create_spread_checkpoint_and_reload(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert not lm.had_clean_shutdown  # no marker yet, as in Kafka
    logs = [lm.get_or_create_log("my.topic-x", p, topic_id=TID) for p in range(4)]
    assert {lg.dir.parent for lg in logs} == set(dirs)
    assert lm.get_or_create_log("my.topic-x", 0, topic_id=TID) is logs[0]
    for lg in logs:
        lg.append_as_leader(records(3), leader_epoch=0, now_ms=NOW)
    logs[1].maybe_increment_log_start_offset(2, "test")
    lm.checkpoint_high_watermarks({("my.topic-x", p): 3 for p in range(4)})
    lm.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        assert (d / "recovery-point-offset-checkpoint").read_text().startswith("0\n2\n")
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert lm2.had_clean_shutdown
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert sorted(lg.topic_partition for lg in lm2.all_logs()) == [
        ("my.topic-x", p) for p in range(4)
    ]
    assert lm2.get_log("my.topic-x", 1).log_start_offset == 2
    assert lm2.get_log("my.topic-x", 3).log_end_offset == 3
    assert lm2.get_log("my.topic-x", 3).topic_id == TID
    assert lm2.read_high_watermarks() == {("my.topic-x", p): 3 for p in range(4)}
    lm2.shutdown()


def test_logs_by_dir_groups_every_log_under_its_dir(tmp_path: Path) -> None:
    """Found from each log's path string, not Path.parent: the same grouping (a dir named with a
    "." component included)."""
    dirs = [tmp_path / "d1", tmp_path / "d2" / ".", tmp_path / "d3"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW, select_strategy="partitions")
    logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(5)]
    by_dir = lm.logs_by_dir()
    assert set(by_dir) == {Path(d) for d in dirs}
    for d, in_dir in by_dir.items():
        assert sorted(lg.partition for lg in in_dir) == sorted(lg.partition for lg in logs if lg.dir.parent == d)
    assert sum(len(v) for v in by_dir.values()) == 5 and len(by_dir[tmp_path / "d1"]) >= 2
    lm.shutdown()


def test_the_marker_names_the_broker_epoch_the_next_registration_gives(tmp_path: Path) -> None:
    """KIP-966's clean-shutdown detection: the marker holds the broker epoch as Kafka's
    CleanShutdownFileHandler writes it; -1 after a crash or when the dirs disagree."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert lm.previous_broker_epoch == -1
    lm.shutdown(broker_epoch=42)
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":0,"brokerEpoch":42}'
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert lm2.previous_broker_epoch == 42
    lm2.shutdown(broker_epoch=43)
    (dirs[1] / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":7}')
    lm3 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert lm3.previous_broker_epoch == -1
    lm3.shutdown()


def test_unclean_start_is_detected_and_recovers(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    lg.append_as_leader(records(2), leader_epoch=0, now_ms=NOW)
    lm.checkpoint_recovery_points()
    # simulate a crash: no shutdown(), release the lock by hand
    lg.close()
    for fd in lm._lock_fds:
        os.close(fd)
    lm2 = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    assert not lm2.had_clean_shutdown
    assert [
        r.offset for r in iter_records(lm2.get_log("t", 0).read(0, max_bytes=10**6).records)
    ] == [0, 1]
    lm2.shutdown()


def test_dir_lock(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    with pytest.raises(LogDirLockedError):
        LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    lm.shutdown()


def test_delete_dirs_and_skipped_dirs(tmp_path: Path) -> None:
    (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete" / "x.log").write_bytes(b"x")
    (tmp_path / "t-1.0123456789abcdef0123456789abcdef-future").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "not_a_partition").mkdir()
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    assert not (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete").exists()
    # KIP-113: a future replica without a current one is promoted.
    assert not (tmp_path / "t-1.0123456789abcdef0123456789abcdef-future").exists()
    assert [lg.topic_partition for lg in lm.all_logs()] == [("t", 1)]
    assert (tmp_path / "t-1").is_dir()
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    lg.append_as_leader(records(1), leader_epoch=0, now_ms=NOW)
    assert lm.delete_log("t", 0)
    assert not (tmp_path / "t-0").exists() and lm.get_log("t", 0) is None
    lm.shutdown()


def test_corrupt_recovery_checkpoint_falls_back_to_full_recovery(tmp_path: Path, caplog) -> None:
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    lm.get_or_create_log("t", 0, topic_id=TID).append_as_leader(
        records(2), leader_epoch=0, now_ms=NOW
    )
    lm.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    lm2 = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    assert lm2.get_log("t", 0).log_end_offset == 2
    assert "recovery-point-offset-checkpoint" in caplog.text
    lm2.shutdown()


def test_cleanup_and_flush_dirty(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=10)
    lm = LogManager([tmp_path], default_config=cfg, now_ms=NOW)
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    other = lm.get_or_create_log("u", 0, topic_id=TID)
    for i in range(6):
        lg.append_as_leader(records(2, ts=NOW + i), leader_epoch=0, now_ms=NOW)
        other.append_as_leader(records(2, ts=NOW + i), leader_epoch=0, now_ms=NOW)
    assert len(lg.segments) > 2
    assert lm.flush_dirty(NOW + 100) == 2
    assert lg.recovery_point == lg.log_end_offset
    # "u" has no known high watermark: left alone
    deleted = lm.cleanup_logs(NOW + 10_000, {("t", 0): lg.log_end_offset})
    assert deleted > 0 and lg.log_start_offset > 0 and other.log_start_offset == 0
    lm.shutdown()


def test_the_flush_pass_visits_the_logs_that_want_a_flush_only(tmp_path: Path, monkeypatch) -> None:
    """Issue 32: the pass once a second walked every idle log of the broker. It visits the logs
    that had an unflushed append or a roll since they were last clean -- created, loaded at start,
    or swapped in -- and every such log is flushed as before (flush.ms, the post-roll flush)."""
    from kavka.storage.unified_log import Log

    visited: list[tuple[str, int]] = []
    prepare = Log.prepare_maybe_flush

    def counting(self, now_ms):
        visited.append(self.topic_partition)
        return prepare(self, now_ms)

    monkeypatch.setattr(Log, "prepare_maybe_flush", counting)
    cfg = LogConfig(segment_bytes=300, flush_ms=10)
    lm = LogManager([tmp_path], default_config=cfg, now_ms=NOW)
    logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(20)]
    assert lm.flush_dirty(NOW + 100) == 0 and visited == []
    logs[3].append_as_leader(records(2), leader_epoch=0, now_ms=NOW)
    logs[7].append_as_leader(records(2), leader_epoch=0, now_ms=NOW)
    # flush.ms not yet passed: visited, not flushed, and still a candidate.
    assert lm.flush_dirty(NOW + 5) == 0 and sorted(visited) == [("t", 3), ("t", 7)]
    visited.clear()
    assert lm.flush_dirty(NOW + 100) == 2 and sorted(visited) == [("t", 3), ("t", 7)]
    assert logs[3].recovery_point == logs[3].log_end_offset == 2
    visited.clear()
    assert lm.flush_dirty(NOW + 200) == 0 and visited == []  # clean again: left out

    # A roll (the post-roll flush) with flush.ms never due.
    lm.shutdown()
    lm = LogManager([tmp_path], default_config=LogConfig(segment_bytes=300), now_ms=NOW)
    lg = lm.get_log("t", 5)
    assert lm.flush_dirty(NOW) == 0 and visited == []  # loaded, all clean
    for i in range(6):
        lg.append_as_leader(records(2, ts=NOW + i), leader_epoch=0, now_ms=NOW)
    assert len(lg.segments) > 2 and lg.recovery_point == 0
    assert lm.flush_dirty(NOW + 1) == 1 and set(visited) == {("t", 5)}
    assert lg.recovery_point == lg.segments[-1].base_offset  # below the active segment, as before
    visited.clear()
    assert lm.flush_dirty(NOW + 2) == 0 and visited == [("t", 5)]  # the active segment's messages stay unflushed
    lm.shutdown()
