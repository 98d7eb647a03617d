"""Background storage passes as steps: the loop hands each slow part to a worker and resumes.

Drives LogManager passes through the broker's StorageIoManager on a real event loop and
checks what the loop sees: the flush moves the recovery point only after its worker step
returned, appends go on while a worker's fsync is blocked, descriptors are neither leaked
nor closed twice, retention unlinks happen on a worker, checkpoints are written.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from kavka.broker.storage_io import StorageIoManager
from kavka.protocol.records import build_batch
from kavka.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

NOW = 1_700_000_000_000


def _open_files(under: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            out.append(target)
    return sorted(out)


def _manager(tmp_path: Path, **cfg) -> LogManager:  # noqa: ANN003
    config = LogConfig(segment_bytes=2048, flush_ms=0, **cfg)
    return LogManager([tmp_path / "d"], default_config=config, now_ms=NOW)


def _append(lm: LogManager, topic: str, n: int) -> None:
    lg = lm.get_or_create_log(topic, 0, topic_id=None)
    for i in range(n):
        lg.append_as_leader(build_batch([(NOW, None, b"x" * 300)]), leader_epoch=0, now_ms=NOW + i)


def test_a_flush_pass_fsyncs_on_a_worker_while_the_loop_keeps_appending(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from kavka.storage import local_log as log_module

    lm = _manager(tmp_path)
    _append(lm, "a", 20)
    lg = lm.get_log("a", 0)
    assert lg is not None and lg.recovery_point == 0
    entered, release = threading.Event(), threading.Event()
    threads: set[str] = set()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        threads.add(threading.current_thread().name)
        entered.set()
        assert release.wait(10)
        real_fsync(fd)

    async def scenario() -> None:
        io = StorageIoManager(threads=2)
        io.start()
        monkeypatch.setattr(log_module.os, "fsync", slow_fsync)
        task = asyncio.create_task(io.drive(lm.flush_dirty_steps(NOW + 100)))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        # The worker is inside fsync: the loop appends and reads meanwhile.
        leo = lg.log_end_offset
        _append(lm, "a", 5)
        assert lg.log_end_offset == leo + 5 and lg.recovery_point == 0
        second = lm.flush_dirty_steps(NOW + 200)
        try:
            second.send(None)
            raise AssertionError("a second flush of a log whose fsync is out started")
        except StopIteration as stop:
            assert stop.value == 0
        release.set()
        flushed = await task
        monkeypatch.setattr(log_module.os, "fsync", real_fsync)
        assert flushed == 1
        assert lg.recovery_point == leo  # what was there when the flush began, not the later appends
        # Every duplicated descriptor closed: each segment file is open once, by its segment.
        files = _open_files(lg.dir)
        assert len(files) == len(set(files)) and files
        await io.stop()

    asyncio.run(scenario())
    assert threads and all(t.startswith("storage-io") for t in threads)
    # The log's own descriptors still work: append and flush again.
    _append(lm, "a", 3)
    lm.flush_dirty(NOW + 300)
    assert lg.recovery_point == lg.log_end_offset
    lm.shutdown()


def test_retention_unlinks_and_checkpoints_go_through_worker_steps(tmp_path: Path) -> None:
    lm = _manager(tmp_path, retention_bytes=2048)
    _append(lm, "r", 60)
    lg = lm.get_log("r", 0)
    assert lg is not None
    before = len(lg.segments)
    steps = lm.cleanup_logs_steps(NOW + 1000, {("r", 0): lg.log_end_offset})
    job = steps.send(None)  # retention decided on the "loop"; the unlinks are the worker's
    assert len(lg.segments) < before
    pending = sorted(p.name for p in lg.dir.glob("*.deleted"))
    assert pending  # renamed, not yet unlinked
    result = job()
    try:
        steps.send(result)
    except StopIteration as stop:
        assert stop.value == before - len(lg.segments)
    assert not list(lg.dir.glob("*.deleted"))

    async def checkpoint() -> None:
        io = StorageIoManager(threads=1)
        io.start()
        await io.drive(lm.checkpoint_recovery_points_steps())
        await io.stop()

    lm.flush_dirty(NOW + 2000)
    asyncio.run(checkpoint())
    assert OffsetCheckpointFile(tmp_path / "d" / RECOVERY_POINT_CHECKPOINT).read() == {("r", 0): lg.log_end_offset}
    lm.shutdown()


def test_a_flush_job_closes_its_descriptors_once(tmp_path: Path) -> None:
    """A second close after `run` would close whatever file reused the number meanwhile."""
    lm = _manager(tmp_path)
    _append(lm, "c", 3)
    lg = lm.get_log("c", 0)
    assert lg is not None
    job = lg.prepare_flush()
    assert job is not None
    job.run()
    reused = os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT)  # takes the lowest free number
    try:
        job.close()  # the loop's cleanup after the worker step
        os.fstat(reused)  # still ours
    finally:
        os.close(reused)
    lg.complete_flush(job, ok=True)
    assert lg.recovery_point == lg.log_end_offset
    lm.shutdown()
