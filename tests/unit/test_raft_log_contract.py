"""One contract for every ReplicatedLog: MemoryLog (simulations) and FileReplicatedLog (the node)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kavka.raft import snapshot as snapshots
from kavka.raft.api import SnapshotId
from kavka.raft.file_log import FileReplicatedLog
from kavka.raft.replicated_log import LogEntry, ReplicatedLog
from kavka.testing import MemoryLog


@pytest.fixture(params=["memory", "file"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ReplicatedLog]]:
    opened: list[FileReplicatedLog] = []

    def make() -> ReplicatedLog:
        if request.param == "memory":
            return MemoryLog()
        log = FileReplicatedLog.open(tmp_path, now_ms=0, segment_bytes=1024)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def batch(base: int, epoch: int, n: int, *, control: bool = False) -> list[LogEntry]:
    return [LogEntry(base + i, epoch, base, b"k%d" % (base + i), b"v" * 50, control) for i in range(n)]


def test_append_read_epochs_truncate(make_log: Callable[[], ReplicatedLog]) -> None:
    log = make_log()
    assert (log.end_offset, log.last_epoch, log.flushed_end_offset) == (0, 0, 0)
    log.append(batch(0, 1, 1, control=True))
    log.append(batch(1, 1, 3))
    log.append(batch(4, 3, 2, control=True))
    log.append(batch(6, 3, 20))  # crosses 1 KiB segments in the file log
    assert (log.end_offset, log.last_epoch) == (26, 3)
    assert log.read(1, 3) == batch(1, 1, 3)
    assert log.read(4, 100) == batch(4, 3, 2, control=True) + batch(6, 3, 20)
    assert log.read(26, 10) == []
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(2) == (1, 4)
    assert log.end_offset_for_epoch(3) == (3, 26)
    assert log.end_offset_for_epoch(7) == (3, 26)
    log.flush()
    assert log.flushed_end_offset == 26
    log.truncate_to(4)
    assert (log.end_offset, log.last_epoch) == (4, 1)
    assert log.flushed_end_offset <= 4
    log.append(batch(4, 5, 2))
    assert log.end_offset_for_epoch(3) == (1, 4) and log.end_offset_for_epoch(5) == (5, 6)
    with pytest.raises(ValueError):
        log.append(batch(9, 5, 1))
    with pytest.raises(ValueError):
        log.append(batch(6, 2, 1))


def test_read_returns_exactly_the_entries_asked_for(make_log: Callable[[], ReplicatedLog]) -> None:
    """Every (start, count), from inside a batch or at its edge, cut inside a batch or not: the
    file log reads batch by batch and stops at `count`, where it used to decode all it read."""
    log = make_log()
    entries: list[LogEntry] = []
    for base, n in ((0, 1), (1, 7), (8, 1), (9, 30), (39, 2), (41, 12)):
        entries += batch(base, 2, n, control=n == 1)
        log.append(batch(base, 2, n, control=n == 1))
    for start in range(len(entries) + 1):
        for count in (1, 2, 5, 13, 40, 100):
            assert log.read(start, count) == entries[start : start + count], (start, count)
    # A batch read in pieces, then truncated away and replaced at the same offset: the new one.
    assert log.read(12, 3) == entries[12:15]
    log.truncate_to(9)
    other = [LogEntry(9 + i, 4, 9, b"other%d" % i, b"w", False) for i in range(30)]
    log.append(other)
    assert log.read(12, 3) == other[3:6] and log.read(9, 100) == other


def test_file_log_reopens_with_its_records_and_epochs(tmp_path: Path) -> None:
    log = FileReplicatedLog.open(tmp_path, now_ms=0)
    log.append(batch(0, 2, 1, control=True))
    log.append(batch(1, 2, 4))
    log.flush()
    log.close()
    assert (tmp_path / "__cluster_metadata-0" / "leader-epoch-checkpoint").exists()
    again = FileReplicatedLog.open(tmp_path, now_ms=0)
    try:
        assert (again.end_offset, again.last_epoch) == (5, 2)
        assert again.read(0, 10) == batch(0, 2, 1, control=True) + batch(1, 2, 4)
    finally:
        again.close()


def test_one_voter_on_disk_commits_restarts_in_a_new_epoch_and_replays(tmp_path: Path) -> None:
    import random

    from kavka.raft.client import RaftClient, RaftConfig
    from kavka.raft.state import FileQuorumStateStore

    commits: list[tuple[int, int, list]] = []

    class Listener:
        def handle_commit(self, base_offset: int, epoch: int, records: list) -> None:
            commits.append((base_offset, epoch, records))

        def handle_load_snapshot(self, snapshot_id: object, records: object) -> None:
            raise AssertionError("no snapshots yet")

        def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
            pass

    def start() -> tuple[RaftClient, FileReplicatedLog]:
        log = FileReplicatedLog.open(tmp_path, now_ms=0)
        store = FileQuorumStateStore(tmp_path / "__cluster_metadata-0" / "quorum-state", (1,))
        config = RaftConfig(node_id=1, voters=(1,), cluster_id="c")
        client = RaftClient(config, log, store, random.Random(1), now_ms=0)
        client.register_listener(Listener())
        poll(client, 5000)
        return client, log

    def poll(client: RaftClient, now: int) -> None:
        # The core asks for the fsync; here it runs as the driver runs it: begin, run, end.
        if client.poll(now).flush_needed:
            ticket = client.log.begin_flush()
            assert ticket is not None
            ticket.run()
            client.log.end_flush(ticket, ok=True)
            client.poll(now)

    client, log = start()
    assert client.leader_and_epoch().epoch == 1
    client.append([(b"a", b"1")], now_ms=5000)
    poll(client, 5001)
    assert client.high_watermark == 2 and commits == [(1, 1, [(1, b"a", b"1")])]
    log.close()
    commits.clear()
    client, log = start()
    try:
        assert client.leader_and_epoch().epoch == 2 and client.high_watermark == 3
        assert commits == [(1, 1, [(1, b"a", b"1")])]  # replayed from the log on restart
    finally:
        log.close()


def test_snapshot_moves_the_log_start_and_keeps_two(make_log: Callable[[], ReplicatedLog]) -> None:
    log = make_log()
    log.append(batch(0, 1, 1, control=True))
    log.append(batch(1, 1, 30))
    log.append(batch(31, 2, 10))
    log.flush()
    assert log.start_offset == 0 and log.latest_snapshot_id is None
    ids = [SnapshotId(11, 1), SnapshotId(31, 1), SnapshotId(36, 2)]
    for sid in ids:
        log.write_snapshot(sid, snapshots.encode(sid, [(b"k", b"%d" % sid.end_offset)]))
        log.snapshot_frozen(sid)
        assert log.latest_snapshot_id == sid and log.start_offset == sid.end_offset
    assert log.read_snapshot(ids[0]) is None  # only the newest and the one before are kept
    assert snapshots.decode(log.read_snapshot(ids[1]) or b"") == [(b"k", b"31")]
    assert log.read(36, 100) == batch(31, 2, 10)[5:]
    # An older snapshot frozen late (written while a newer one landed) changes nothing.
    log.snapshot_frozen(SnapshotId(20, 1))
    assert log.latest_snapshot_id == ids[2] and log.start_offset == 36
    # The epoch cache still answers for epochs that ended before the start.
    assert log.end_offset_for_epoch(2) == (2, 41)
    assert log.end_offset_for_epoch(1)[1] <= 36


def test_install_snapshot_empties_the_log(make_log: Callable[[], ReplicatedLog]) -> None:
    log = make_log()
    log.append(batch(0, 1, 5))
    log.flush()
    sid = SnapshotId(100, 4)
    log.install_snapshot(sid, snapshots.encode(sid, []))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (100, 100, 4)
    assert log.latest_snapshot_id == sid
    assert log.end_offset_for_epoch(4) == (4, 100) and log.end_offset_for_epoch(9) == (4, 100)
    log.append(batch(100, 5, 2))
    assert log.read(100, 10) == batch(100, 5, 2) and log.last_epoch == 5


def test_file_log_reopens_at_its_snapshot(tmp_path: Path) -> None:
    log = FileReplicatedLog.open(tmp_path, now_ms=0, segment_bytes=1024)
    log.append(batch(0, 1, 40))
    log.flush()
    sid = SnapshotId(30, 1)
    log.write_snapshot(sid, snapshots.encode(sid, [(b"a", b"b")]))
    log.snapshot_frozen(sid)
    segments = len(log.log.segments)
    log.close()
    # A torn write of a newer snapshot and a corrupt one are both left aside.
    (log.dir / (snapshots.file_name(SnapshotId(35, 1))[: -len(".checkpoint")] + ".checkpoint.part")).write_bytes(b"x")
    (log.dir / snapshots.file_name(SnapshotId(38, 1))).write_bytes(snapshots.encode(SnapshotId(38, 1), [])[:-3])
    again = FileReplicatedLog.open(tmp_path, now_ms=0, segment_bytes=1024)
    try:
        assert again.latest_snapshot_id == sid and again.start_offset == 30 and again.end_offset == 40
        assert not list(again.dir.glob("*.part"))
        assert len(again.log.segments) == segments
        assert again.read(30, 100) == batch(0, 1, 40)[30:]
    finally:
        again.close()


def test_file_log_shorter_than_its_snapshot_restarts_at_it(tmp_path: Path) -> None:
    log = FileReplicatedLog.open(tmp_path, now_ms=0)
    log.append(batch(0, 1, 5))
    log.flush()
    sid = SnapshotId(50, 3)  # e.g. installed, then the log's tail was lost
    log.write_snapshot(sid, snapshots.encode(sid, []))
    log.close()
    again = FileReplicatedLog.open(tmp_path, now_ms=0)
    try:
        assert (again.start_offset, again.end_offset, again.last_epoch) == (50, 50, 3)
    finally:
        again.close()


def test_a_flush_begun_before_a_truncation_moves_nothing(make_log: Callable[[], ReplicatedLog]) -> None:
    log = make_log()
    log.append(batch(0, 1, 10))
    ticket = log.begin_flush()
    assert ticket is not None
    log.truncate_to(5)
    log.append(batch(5, 2, 5))  # new entries at the offsets the ticket was meant to cover
    ticket.run()
    log.end_flush(ticket, ok=True)
    assert log.flushed_end_offset <= 5
    again = log.begin_flush()
    assert again is not None
    again.run()
    log.end_flush(again, ok=True)
    assert log.flushed_end_offset == 10 and log.begin_flush() is None


def test_a_failed_flush_moves_nothing(make_log: Callable[[], ReplicatedLog]) -> None:
    log = make_log()
    log.append(batch(0, 1, 3))
    ticket = log.begin_flush()
    assert ticket is not None
    ticket.run()  # as if its fsync had raised afterwards
    log.end_flush(ticket, ok=False)
    assert log.flushed_end_offset == 0
