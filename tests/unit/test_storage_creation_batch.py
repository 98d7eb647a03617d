"""New logs of one metadata delta created together (LogManager.placement_batch, issue 32).

Creating 10,000 partitions cost each log two atomic writes (partition.metadata, the leader epoch)
with four fsyncs, one log at a time; a batch writes them all at once. These tests count the writes
below the process boundary (no timing) and check what a crash before the batch's write leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from kavka.protocol.records import build_batch
from kavka.storage import checkpoints, log_manager
from kavka.storage.checkpoints import PARTITION_METADATA_FILE, PartitionMetadataFile
from kavka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochFileCache
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

NOW = 1_700_000_000_000
TID = "J8aAPcfLQt2bqs1JT_rMgQ"


def crash(lm: LogManager) -> None:
    """What kill -9 leaves behind: no checkpoints, no marker, locks released by the kernel."""
    import os

    for fd in lm._lock_fds:
        os.close(fd)
    lm._lock_fds = []


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Every atomic write of a small file: one by one, and batched (with the files of each batch)."""
    out: dict[str, list] = {"single": [], "batched": []}
    single, batched = checkpoints.write_atomically, checkpoints.write_all_atomically

    def one(path, data):
        out["single"].append(path)
        single(path, data)

    def many(files, dirs=()):
        out["batched"].append(sorted(files))
        batched(files, dirs)

    monkeypatch.setattr(checkpoints, "write_atomically", one)
    monkeypatch.setattr(log_manager, "write_all_atomically", many)
    return out


def test_a_batch_writes_its_new_logs_files_once_per_log_dir(tmp_path: Path, writes) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, default_config=LogConfig(), now_ms=NOW)
    with lm.placement_batch():
        logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(40)]
        for lg in logs:
            lg.leader_epoch_cache.assign(5, 0)  # the replica becoming leader
        assert writes["single"] == [] and writes["batched"] == []
        assert not any((lg.dir / PARTITION_METADATA_FILE).exists() for lg in logs)
    assert writes["single"] == []
    assert len(writes["batched"]) == 2  # one per log dir, however many logs
    assert sum(len(files) for files in writes["batched"]) == 80
    for lg in logs:
        assert PartitionMetadataFile(lg.dir).read() == TID
        assert LeaderEpochFileCache.load(lg.dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(5, 0)]
    # After the batch a log's epoch is written as it changes, as before.
    logs[0].leader_epoch_cache.assign(6, 0)
    assert writes["single"] == [logs[0].dir / LEADER_EPOCH_CHECKPOINT]
    lm.shutdown()


def test_a_log_deleted_inside_the_batch_gets_no_files(tmp_path: Path, writes) -> None:
    lm = LogManager([tmp_path / "a"], default_config=LogConfig(), now_ms=NOW)
    with lm.placement_batch():
        gone = lm.get_or_create_log("t", 0, topic_id=TID)
        kept = lm.get_or_create_log("t", 1, topic_id=TID)
        lm.delete_log("t", 0)
    assert writes["batched"] == [[kept.dir / PARTITION_METADATA_FILE]]
    assert not gone.dir.exists()
    lm.shutdown()


def test_a_crash_before_the_batch_is_written_recovers_the_topic_id_and_epochs(tmp_path: Path) -> None:
    d = tmp_path / "a"
    lm = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    batch = lm.placement_batch()
    batch.__enter__()  # the crash comes before the batch ends
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    empty = lm.get_or_create_log("t", 1, topic_id=TID)
    for x in (lg, empty):
        x.leader_epoch_cache.assign(3, 0)
    lg.append_as_leader(build_batch([(NOW, b"k", b"v")] * 4), leader_epoch=3, now_ms=NOW)
    lg.flush()
    crash(lm)
    assert not (lg.dir / PARTITION_METADATA_FILE).exists()
    assert not (lg.dir / LEADER_EPOCH_CHECKPOINT).exists()

    lm2 = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    assert not lm2.had_clean_shutdown
    back = lm2.get_log("t", 0)
    assert back is not None and back.log_end_offset == 4
    assert back.leader_epoch_cache.epoch_entries() == [EpochEntry(3, 0)]  # from the recovered batches
    assert back.topic_id is None and lm2.get_log("t", 1).topic_id is None
    # The replica manager applies the partitions again: their topic ids come from the metadata.
    assert lm2.get_or_create_log("t", 0, topic_id=TID) is back
    assert back.topic_id == TID and PartitionMetadataFile(back.dir).read() == TID
    lm2.shutdown()
    lm3 = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    assert lm3.get_log("t", 0).topic_id == TID
    lm3.shutdown()


def test_existing_logs_epoch_changes_in_a_batch_are_written_together(tmp_path: Path, writes) -> None:
    """A restarted broker's replicas all take a new leader epoch: one write for them all."""
    d = tmp_path / "a"
    lm = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    with lm.placement_batch():
        for p in range(30):
            lm.get_or_create_log("t", p, topic_id=TID).leader_epoch_cache.assign(1, 0)
    lm.shutdown()
    writes["single"].clear()
    writes["batched"].clear()
    lm = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    with lm.placement_batch():
        logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(30)]
        for lg in logs:
            lg.leader_epoch_cache.assign(2, 0)
        assert writes["batched"] == []
    assert writes["single"] == []
    assert writes["batched"] == [sorted(lg.dir / LEADER_EPOCH_CHECKPOINT for lg in logs)]
    assert LeaderEpochFileCache.load(logs[7].dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(2, 0)]
    lm.shutdown()


def test_a_new_leaders_epoch_is_written_with_its_first_batch(tmp_path: Path, writes) -> None:
    """A replica becoming leader assigns (epoch, log end) without a write (every load drops that
    entry anyway): creating or restarting 10,000 partitions skips 10,000 files. The epoch's
    first batch writes it, so it is in the file before any record of that epoch is acknowledged."""
    d = tmp_path / "a"
    lm = LogManager([d], default_config=LogConfig(), now_ms=NOW)
    lg = lm.get_or_create_log("t", 0, topic_id=TID)
    writes["single"].clear()
    lg.leader_epoch_cache.assign(4, 0, flush=False)
    assert writes["single"] == [] and not (lg.dir / LEADER_EPOCH_CHECKPOINT).exists()
    lg.append_as_leader(build_batch([(NOW, b"k", b"v")] * 2), leader_epoch=4, now_ms=NOW)
    assert writes["single"] == [lg.dir / LEADER_EPOCH_CHECKPOINT]
    assert LeaderEpochFileCache.load(lg.dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(4, 0)]
    lg.append_as_leader(build_batch([(NOW, b"k", b"v")]), leader_epoch=4, now_ms=NOW)
    assert len(writes["single"]) == 1  # once per epoch, not per batch
    lm.shutdown()


# ---------------------------------------------------------------- written in the background


class _HeldWriter:
    """The writer thread's work held until released: what the loop does meanwhile is visible."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading

        self.release = threading.Event()
        self.started = threading.Event()
        self.batches: list[list[Path]] = []
        real = log_manager._write_dirs

        def held(jobs):
            self.started.set()
            assert self.release.wait(30), "the test never released the writer"
            self.batches.append(sorted(p for files in jobs.values() for p in files))
            return real(jobs)

        monkeypatch.setattr(log_manager, "_write_dirs", held)


async def _until(cond, what: str, timeout_s: float = 10.0) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        await asyncio.sleep(0.005)


def test_a_background_batch_is_written_while_the_loop_goes_on_and_a_later_change_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes
) -> None:
    import asyncio

    held = _HeldWriter(monkeypatch)

    async def main() -> None:
        lm = LogManager([tmp_path / "a"], default_config=LogConfig(), now_ms=NOW)
        with lm.placement_batch(background=True):
            logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(5)]
            for lg in logs:
                lg.leader_epoch_cache.assign(5, 0)
        # The batch ended and the loop goes on; its files are not written yet.
        await _until(held.started.is_set, "the writer thread took the batch")
        assert not any((lg.dir / PARTITION_METADATA_FILE).exists() for lg in logs)
        # A change to one log's epochs meanwhile waits for the batch (no second writer of the file).
        logs[0].leader_epoch_cache.assign(6, 0)
        assert writes["single"] == []
        held.release.set()
        await _until(lambda: not lm._in_flight, "the batch landed")
        assert len(held.batches) == 1 and len(held.batches[0]) == 10
        for lg in logs:
            assert PartitionMetadataFile(lg.dir).read() == TID
        # The change made while the batch was in flight was written after it: the file ends newest.
        assert writes["single"] == [logs[0].dir / LEADER_EPOCH_CHECKPOINT]
        assert LeaderEpochFileCache.load(logs[0].dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(6, 0)]
        assert LeaderEpochFileCache.load(logs[1].dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(5, 0)]
        assert not logs[0].leader_epoch_cache.deferred
        lm.shutdown()

    asyncio.run(main())


def test_a_log_deleted_while_its_files_are_written_waits_for_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    held = _HeldWriter(monkeypatch)

    async def main() -> None:
        lm = LogManager([tmp_path / "a"], default_config=LogConfig(), now_ms=NOW)
        with lm.placement_batch(background=True):
            gone = lm.get_or_create_log("t", 0, topic_id=TID)
            kept = lm.get_or_create_log("t", 1, topic_id=TID)
        await _until(held.started.is_set, "the writer thread took the batch")
        threading.Timer(0.05, held.release.set).start()
        assert lm.delete_log("t", 0)  # waits for the batch before renaming the dir
        assert held.release.is_set() and not lm._in_flight
        assert not gone.dir.exists() and not list((tmp_path / "a").glob("t-0*"))
        assert PartitionMetadataFile(kept.dir).read() == TID
        assert lm.offline_dirs == {}
        lm.shutdown()

    asyncio.run(main())


def test_shutdown_waits_for_the_background_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import threading

    held = _HeldWriter(monkeypatch)

    async def main() -> None:
        d = tmp_path / "a"
        lm = LogManager([d], default_config=LogConfig(), now_ms=NOW)
        with lm.placement_batch(background=True):
            lg = lm.get_or_create_log("t", 0, topic_id=TID)
            lg.leader_epoch_cache.assign(2, 0)
        await _until(held.started.is_set, "the writer thread took the batch")
        threading.Timer(0.05, held.release.set).start()
        lm.shutdown()
        assert PartitionMetadataFile(lg.dir).read() == TID
        lm2 = LogManager([d], default_config=LogConfig(), now_ms=NOW)
        assert lm2.had_clean_shutdown and lm2.get_log("t", 0).topic_id == TID
        lm2.shutdown()

    asyncio.run(main())


def test_a_failed_background_write_is_done_again_one_file_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes
) -> None:
    """The batch's write failed (or partly): each current log's files are written on the loop,
    where a disk that fails again takes its dir offline as any write does."""
    import asyncio
    import errno

    def failing(files, dirs=()):
        raise OSError(errno.EIO, "injected", str(next(iter(files))))

    monkeypatch.setattr(log_manager, "write_all_atomically", failing)

    async def main() -> None:
        lm = LogManager([tmp_path / "a", tmp_path / "b"], default_config=LogConfig(), now_ms=NOW)
        with lm.placement_batch(background=True):
            logs = [lm.get_or_create_log("t", p, topic_id=TID) for p in range(4)]
            for lg in logs:
                lg.leader_epoch_cache.assign(1, 0)
        await _until(lambda: not lm._in_flight, "the batch was tried")
        assert lm.offline_dirs == {}
        for lg in logs:
            assert PartitionMetadataFile(lg.dir).read() == TID
            assert LeaderEpochFileCache.load(lg.dir / LEADER_EPOCH_CHECKPOINT).epoch_entries() == [EpochEntry(1, 0)]
        assert len(writes["single"]) == 8  # one by one, after the batch failed

        # A disk that fails the single writes too: its dir goes offline.
        def broken(path, data):
            raise OSError(errno.EIO, "injected", str(path))

        monkeypatch.setattr(checkpoints, "write_atomically", broken)
        with lm.placement_batch(background=True):
            lg = lm.get_or_create_log("u", 0, topic_id=TID)
        await _until(lambda: not lm._in_flight, "the batch was tried")
        assert lg.dir.parent in lm.offline_dirs
        lm.shutdown()

    asyncio.run(main())


def test_a_write_landing_after_the_loop_closed_is_settled_by_shutdown_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer thread's wake-up call finds the loop closed: shutdown takes the result itself,
    nothing logs a callback error, and the writer thread is gone afterwards."""
    import asyncio
    import logging
    import threading

    held = _HeldWriter(monkeypatch)
    lm = LogManager([tmp_path / "a"], default_config=LogConfig(), now_ms=NOW)

    async def main() -> object:
        with lm.placement_batch(background=True):
            lg = lm.get_or_create_log("t", 0, topic_id=TID)
        await _until(held.started.is_set, "the writer thread took the batch")
        return lg

    lg = asyncio.run(main())  # the loop closes with the batch in flight
    caplog.set_level(logging.DEBUG)
    held.release.set()
    lm.shutdown()
    assert PartitionMetadataFile(lg.dir).read() == TID and not lm._in_flight
    assert not [t for t in threading.enumerate() if t.name.startswith("kavka-checkpoints")]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
