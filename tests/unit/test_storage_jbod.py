"""JBOD storage: placement, offline dirs on I/O errors (KIP-112), moves and their crash recovery (KIP-113)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kavka.protocol.records import build_batch, iter_records
from kavka.storage.errors import KafkaStorageError, LogDirNotFoundError
from kavka.storage.faults import FAULTS
from kavka.storage.log_config import LogConfig
from kavka.common import TopicPartition
from kavka.storage.log_manager import DirStats, LogManager, select_log_dir
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
TID = "J8aAPcfLQt2bqs1JT_rMgQ"
GiB = 1 << 30


def records(n: int, tag: str = "v") -> bytes:
    return build_batch([(NOW, b"k", f"{tag}{i}".encode() * 20) for i in range(n)])


def values(lg: Log) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = lg.log_start_offset
    for _ in range(10_000):  # one segment per read
        if offset >= lg.log_end_offset:
            break
        data = lg.read(offset, max_bytes=1 << 30).records
        for r in iter_records(data):
            out.append((r.offset, bytes(r.value or b"")))
        offset = out[-1][0] + 1
    assert [o for o, _ in out] == list(range(lg.log_start_offset, lg.log_end_offset))
    return out


def crash(lm: LogManager) -> None:
    """What kill -9 leaves behind: no checkpoints, no marker, locks released by the kernel."""
    for fd in lm._lock_fds:
        os.close(fd)
    lm._lock_fds = []


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[Path]:
    control = tmp_path / "failing-dirs"
    control.write_text("")
    FAULTS.configure(str(control))
    yield control
    FAULTS.configure(None)


def fail(control: Path, *dirs: Path) -> None:
    control.write_text("".join(f"{d}\n" for d in dirs))
    FAULTS._next_stat = 0.0
    FAULTS._mtime_ns = -1


# ---------------------------------------------------------------- placement


def test_partitions_strategy_is_kafkas_fewest_partitions() -> None:
    stats = [DirStats(3, 10 * GiB, GiB), DirStats(2, 0, GiB), DirStats(2, 0, GiB)]
    assert select_log_dir(stats, "partitions") == 1


def test_size_strategy_prefers_the_emptier_dir_not_the_one_with_fewer_partitions() -> None:
    # d0: one 5 GiB partition; d1: four tiny ones. Kafka's rule picks d0.
    stats = [DirStats(1, 5 * GiB, 50 * GiB), DirStats(4, 4 << 20, 55 * GiB)]
    assert select_log_dir(stats, "partitions") == 0
    assert select_log_dir(stats, "size") == 1


def test_size_strategy_weighs_free_space_of_unequal_disks() -> None:
    # Same bytes used; d1 is a much bigger disk.
    stats = [DirStats(2, 2 * GiB, 1 * GiB), DirStats(2, 2 * GiB, 100 * GiB)]
    assert select_log_dir(stats, "size") == 1


def test_size_strategy_spreads_a_burst_of_new_partitions(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    placed = [lm.get_or_create_log("t", p, topic_id=TID).dir.parent for p in range(9)]
    assert sorted(placed.count(d) for d in dirs) == [3, 3, 3]
    lm.shutdown()


def test_size_strategy_fills_the_dir_with_fewer_bytes(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    big = lm.get_or_create_log("big", 0, topic_id=TID)
    assert big.dir.parent == dirs[0]
    for _ in range(50):
        big.append_as_leader(records(20), leader_epoch=0, now_ms=NOW)
    small = [lm.get_or_create_log("small", p, topic_id=TID) for p in range(3)]
    # Fewest partitions would alternate a, b, a; by size all three go to b.
    assert [lg.dir.parent for lg in small] == [dirs[1]] * 3
    lm.shutdown()


def _count_size_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often placement reads a log's size (each read sums every segment of that log)."""
    reads = [0]
    size = Log.size_in_bytes

    def counted(self: Log) -> int:
        reads[0] += 1
        return size.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(Log, "size_in_bytes", property(counted))
    return reads


def test_a_placement_batch_reads_each_log_size_once_and_still_spreads(tmp_path: Path, monkeypatch) -> None:
    """Issue 32: placing each new replica walked every log of the broker, so a CreateTopics of
    thousands of partitions cost time quadratic in the partitions (12 ms a creation, then 30)."""
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    for p in range(30):
        lm.get_or_create_log("old", p, topic_id=TID)
    reads = _count_size_reads(monkeypatch)
    with lm.placement_batch():
        placed = [lm.get_or_create_log("t", p, topic_id=TID).dir.parent for p in range(60)]
    assert reads[0] == 30  # once per log there was at the first placement, not per new replica
    assert sorted(placed.count(d) for d in dirs) == [20, 20, 20]
    reads[0] = 0
    lm.get_or_create_log("after", 0, topic_id=TID)  # outside a batch: fresh stats of all 90 logs
    assert reads[0] == 90
    lm.shutdown()


def test_one_log_dir_places_without_reading_any_size(tmp_path: Path, monkeypatch) -> None:
    lm = LogManager([tmp_path / "only"], default_config=LogConfig(), now_ms=NOW)
    for p in range(5):
        lm.get_or_create_log("old", p, topic_id=TID)
    reads = _count_size_reads(monkeypatch)
    assert lm.get_or_create_log("t", 0, topic_id=TID).dir.parent == tmp_path / "only"
    assert reads[0] == 0
    lm.shutdown()


# ---------------------------------------------------------------- offline dirs (KIP-112)


def test_io_error_takes_only_that_dir_offline_once(tmp_path: Path, faults: Path, caplog) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    events: list[tuple[Path, list[tuple[str, int]]]] = []
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW, on_dir_failure=lambda d, r, lost: events.append((d, lost)))
    la = lm.get_or_create_log("t", 0, topic_id=TID)
    lb = lm.get_or_create_log("t", 1, topic_id=TID)
    assert (la.dir.parent, lb.dir.parent) == (dirs[0], dirs[1])
    la.append_as_leader(records(2), leader_epoch=0, now_ms=NOW)
    lb.append_as_leader(records(2), leader_epoch=0, now_ms=NOW)
    fail(faults, dirs[1])
    with pytest.raises(OSError):
        lb.append_as_leader(records(1), leader_epoch=0, now_ms=NOW)
    caplog.set_level(logging.ERROR)
    lm.handle_io_error(lb.dir, OSError(5, "EIO"))
    lm.handle_io_error(lb.dir, OSError(5, "EIO again"))
    lm.checkpoint_recovery_points()  # skips the offline dir, no second report
    assert events == [(dirs[1], [("t", 1)])]
    assert [r for r in caplog.records if "is offline" in r.getMessage()].__len__() == 1
    assert "OfflineLogDirectoryCount=1" in caplog.text
    assert lm.offline_log_directory_count == 1 and lm.is_offline("t", 1)
    assert lm.get_log("t", 1) is None
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log("t", 1, topic_id=TID)
    # New replicas go to the healthy dir; the healthy log keeps working.
    assert lm.get_or_create_log("t", 2, topic_id=TID).dir.parent == dirs[0]
    la.append_as_leader(records(1), leader_epoch=0, now_ms=NOW)
    desc = {d.path: d for d in lm.describe_dirs()}
    assert desc[dirs[1]].error and desc[dirs[1]].total_bytes == -1 and desc[dirs[1]].replicas == ()
    assert {(r.topic, r.partition) for r in desc[dirs[0]].replicas} == {("t", 0), ("t", 2)}
    # Asked for some partitions, the dirs list those only (an unknown one is left out).
    some = {d.path: d for d in lm.describe_dirs([TopicPartition("t", 2), TopicPartition("t", 9), TopicPartition("u", 0)])}
    assert [(r.topic, r.partition) for r in some[dirs[0]].replicas] == [("t", 2)]
    assert some[dirs[1]].error and some[dirs[1]].replicas == ()
    lm.shutdown()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    assert not (dirs[1] / ".kafka_cleanshutdown").exists()  # recovered at the next start
    # The disk is repaired: after a restart the dir is online with its acknowledged data.
    fail(faults)
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert lm2.offline_log_directory_count == 0
    assert len(values(lm2.get_log("t", 1))) == 2
    assert len(values(lm2.get_log("t", 0))) == 3
    lm2.shutdown()


def test_checkpoint_failure_takes_the_dir_offline(tmp_path: Path, faults: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    fail(faults, dirs[0])
    lm.checkpoint_high_watermarks({})
    assert list(lm.offline_dirs) == [dirs[0]]
    lm.shutdown()


def test_every_dir_failing_at_start_refuses_to_start(tmp_path: Path) -> None:
    d = tmp_path / "file-not-dir"
    d.write_text("x")
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        LogManager([d], default_config=LogConfig(), now_ms=NOW)


# ---------------------------------------------------------------- moves (KIP-113)


def copy_all(lm: LogManager, tp: tuple[str, int]) -> None:
    src, fut = lm.get_log(*tp), lm.future_log(tp)
    assert src is not None and fut is not None
    while fut.log_end_offset < src.log_end_offset:
        data = src.read(fut.log_end_offset, max_bytes=300, min_one_message=True)
        fut.append_as_follower(data.records, now_ms=NOW)


def start_move(tmp_path: Path) -> tuple[list[Path], LogManager, list[tuple[int, bytes]]]:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(segment_bytes=1000), now_ms=NOW)
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    for i in range(10):
        lg.append_as_leader(records(3, tag=f"b{i}-"), leader_epoch=i // 4, now_ms=NOW)
    assert len(lg.segments) > 2
    expected = values(lg)
    assert lm.create_future_log(("t", 0), dirs[0], now_ms=NOW) is None  # already there
    with pytest.raises(LogDirNotFoundError):
        lm.create_future_log(("t", 0), tmp_path / "elsewhere", now_ms=NOW)
    fut = lm.create_future_log(("t", 0), dirs[1], now_ms=NOW)
    assert fut is not None and fut.dir.name.endswith("-future") and fut.dir.parent == dirs[1]
    return dirs, lm, expected


def test_move_copies_then_swaps_and_leaves_a_delete_dir(tmp_path: Path) -> None:
    dirs, lm, expected = start_move(tmp_path)
    copy_all(lm, ("t", 0))
    lm.get_log("t", 0).append_as_leader(records(2, tag="late"), leader_epoch=3, now_ms=NOW)
    expected = values(lm.get_log("t", 0))
    with pytest.raises(RuntimeError):
        lm.replace_current_with_future(("t", 0), now_ms=NOW)  # not caught up
    lm.get_log("t", 0).maybe_increment_log_start_offset(12, "DeleteRecords during the move")
    expected = values(lm.get_log("t", 0))
    copy_all(lm, ("t", 0))
    lm.get_log("t", 0).leader_epoch_cache.assign(7, lm.get_log("t", 0).log_end_offset)  # no batch yet
    desc = {d.path: d for d in lm.describe_dirs()}
    assert [(r.is_future, r.offset_lag) for r in desc[dirs[1]].replicas] == [(True, 0)]
    new = lm.replace_current_with_future(("t", 0), now_ms=NOW)
    assert new.dir == dirs[1] / "t-0" and lm.get_log("t", 0) is new
    assert new.log_start_offset == 12 and new.segments[0].base_offset > 0  # segments below it are gone
    assert values(new) == expected
    assert new.leader_epoch_cache.latest_epoch == 7
    doomed = lm.take_pending_deletes()
    assert len(doomed) == 1 and doomed[0].name.endswith("-delete") and doomed[0].parent == dirs[0]
    new.append_as_leader(records(1), leader_epoch=3, now_ms=NOW)
    lm.shutdown()
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    assert not doomed[0].exists()  # finished at start
    assert lm2.get_log("t", 0).dir == dirs[1] / "t-0"
    assert values(lm2.get_log("t", 0))[:-1] == expected
    lm2.shutdown()


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", ["copying", "caught-up", "source-renamed", "future-promoted"])
def test_crash_at_each_step_recovers_by_kip_113_rules(tmp_path: Path, step: str) -> None:
    dirs, lm, expected = start_move(tmp_path)
    tp = ("t", 0)
    if step == "copying":
        src, fut = lm.get_log(*tp), lm.future_log(tp)
        fut.append_as_follower(src.read(0, max_bytes=300, min_one_message=True).records, now_ms=NOW)
    else:
        copy_all(lm, tp)

        def crash_point(s: str) -> None:
            if s == step:
                raise Crash(s)

        with pytest.raises(Crash):
            lm.replace_current_with_future(tp, now_ms=NOW, crash_point=crash_point)
    crash(lm)
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    names = {d: sorted(p.name for p in d.iterdir() if p.is_dir()) for d in dirs}
    assert not any(n.endswith("-delete") for ns in names.values() for n in ns)
    if step in ("copying", "caught-up"):
        # Source and future both present: the move resumes.
        assert lm2.get_log(*tp).dir == dirs[0] / "t-0"
        assert lm2.future_log(tp) is not None and lm2.future_log(tp).dir.parent == dirs[1]
        copy_all(lm2, tp)
        lm2.replace_current_with_future(tp, now_ms=NOW)
    else:
        # Only the future (or the promoted copy) is left: it is the replica.
        assert lm2.future_log(tp) is None
    assert lm2.get_log(*tp).dir == dirs[1] / "t-0"
    assert values(lm2.get_log(*tp)) == expected
    lm2.shutdown()


def test_remembered_dir_for_a_replica_not_created_yet(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    lm.prefer_log_dir(("later", 0), dirs[1])
    assert lm.get_or_create_log("later", 0, topic_id=TID).dir.parent == dirs[1]
    lm.shutdown()


def test_move_stops_when_the_destination_fails(tmp_path: Path, faults: Path) -> None:
    dirs, lm, expected = start_move(tmp_path)
    fail(faults, dirs[1])
    fut = lm.future_log(("t", 0))
    with pytest.raises(OSError):
        copy_all(lm, ("t", 0))
    lm.handle_io_error(fut.dir, OSError(5, "EIO"))
    assert lm.future_log(("t", 0)) is None
    assert values(lm.get_log("t", 0)) == expected  # the source keeps serving
    lm.shutdown()


def test_move_stops_when_the_source_fails_and_resumes_after_a_restart(tmp_path: Path, faults: Path) -> None:
    dirs, lm, expected = start_move(tmp_path)
    fail(faults, dirs[0])
    with pytest.raises(OSError):
        copy_all(lm, ("t", 0))
    assert lm.handle_io_error(lm.get_log("t", 0).dir, OSError(5, "EIO")) == dirs[0]
    assert lm.future_log(("t", 0)) is None  # the move stopped
    assert lm.get_log("t", 0) is None and dirs[0] in lm.offline_dirs  # the replica is offline, not moved
    assert (dirs[1] / next(p.name for p in dirs[1].iterdir() if p.name.endswith("-future"))).is_dir()
    crash(lm)
    fail(faults)  # the disk is repaired
    lm2 = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    # Source and future both present again: the move resumes, and ends with every record.
    assert lm2.get_log("t", 0).dir == dirs[0] / "t-0" and lm2.future_log(("t", 0)) is not None
    copy_all(lm2, ("t", 0))
    lm2.replace_current_with_future(("t", 0), now_ms=NOW)
    assert lm2.get_log("t", 0).dir == dirs[1] / "t-0"
    assert values(lm2.get_log("t", 0)) == expected
    lm2.shutdown()


# ---------------------------------------------------------------- the mover's throttle


def test_throttle_paces_chunks_to_the_rate_and_grants_no_burst_after_idling() -> None:
    from kavka.replication.log_dir_mover import UNLIMITED, Throttle

    now = [100.0]
    rate = [1000]
    t = Throttle(lambda: rate[0], clock=lambda: now[0])
    assert t.delay_for(500) == pytest.approx(0.5)
    assert t.delay_for(500) == pytest.approx(1.0)  # the schedule accumulates
    now[0] += 1.0
    assert t.delay_for(1000) == pytest.approx(1.0)
    now[0] += 60.0  # idle: the schedule restarts from now, no stored credit
    assert t.delay_for(250) == pytest.approx(0.25)
    rate[0] = UNLIMITED  # changed dynamically: no waiting at all
    assert t.delay_for(10**9) == 0.0


# ---------------------------------------------------------------- a replica on a failing dir


def test_partition_answers_kafka_storage_error_and_reports_the_dir_once(tmp_path: Path, faults: Path) -> None:
    from kio.schema.errors import ErrorCode

    from kavka.replication.partition import Partition, PartitionError, TopicPartition
    from kavka.replication.replica_state import PartitionRegistration

    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    reports: list[Path] = []

    def on_storage_error(log: Log, exc: OSError) -> None:
        reports.append(log.dir)
        lm.handle_io_error(log.dir, exc)

    p = Partition(TopicPartition("t", 0), topic_id=TID, log=lg, local_broker_id=1,
                  registration=PartitionRegistration(0, (1,), (1,), 1, 0, 0), high_watermark=0, now_ms=NOW,
                  on_storage_error=on_storage_error)
    p.append_records_to_leader(records(3), required_acks=-1, now_ms=NOW)
    assert len(p.read_records(0, max_bytes=1 << 20, max_offset=3, min_one_message=True).records) > 0
    fail(faults, dirs[0])
    with pytest.raises(PartitionError) as info:
        p.read_records(0, max_bytes=1 << 20, max_offset=3, min_one_message=True)
    assert info.value.error == ErrorCode.kafka_storage_error
    for call in (
        lambda: p.append_records_to_leader(records(1), required_acks=1, now_ms=NOW),
        lambda: p.read_records(0, max_bytes=1 << 20, max_offset=3, min_one_message=True),
    ):
        with pytest.raises(PartitionError) as info:
            call()
        assert info.value.error == ErrorCode.kafka_storage_error
    assert reports == [lg.dir] and p.offline and lm.is_offline("t", 0)
    lm.shutdown()
