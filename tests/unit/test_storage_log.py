"""Log and LogSegment: append/read, roll, retention, truncation, recovery."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kavka.protocol import compression
from kavka.protocol.records import (
    CorruptRecordError,
    RecordTooLargeError,
    build_batch,
    iter_batches,
    iter_records,
)
from kavka.storage.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from kavka.storage.local_log import parse_partition_dir_name, parse_special_dir_name
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
TOPIC_ID = "J8aAPcfLQt2bqs1JT_rMgQ"


def batch(n: int, *, ts: int = NOW, size: int = 10, codec: int = 0, tag: str = "") -> bytes:
    return build_batch(
        [(ts, f"k{tag}{i}".encode(), f"v{tag}{i}".encode().ljust(size, b".")) for i in range(n)],
        compression=codec,
    )


def open_log(path: Path, config: LogConfig | None = None, **kw) -> Log:
    args = dict(
        topic_id=TOPIC_ID, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=NOW
    )
    args.update(kw)
    return Log.open(path, config or LogConfig(), **args)


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in iter_records(data)]


def read_all(lg: Log, start: int | None = None) -> list[int]:
    out = []
    off = lg.log_start_offset if start is None else start
    while off < lg.log_end_offset:
        info = lg.read(off, max_bytes=1 << 20, min_one_message=True)
        got = [o for o in offsets(info.records) if o >= off]
        assert got, f"no progress at {off}"
        out += got
        off = got[-1] + 1
    return out


def test_dir_name_parsing() -> None:
    assert parse_partition_dir_name("my.topic-with-dashes_x-12") == ("my.topic-with-dashes_x", 12)
    for bad in ("nodash", "topic-", "-3", "t-x"):
        with pytest.raises(ValueError):
            parse_partition_dir_name(bad)
    assert parse_special_dir_name("a-b-3.0123abcd-delete") == ("a-b", 3, "delete")
    assert parse_special_dir_name("a-3.ff-future") == ("a", 3, "future")
    assert parse_special_dir_name("a-3") is None


def test_append_read_and_files(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0")
    info = lg.append_as_leader(batch(3), leader_epoch=5, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.num_messages, info.num_batches) == (
        0,
        2,
        3,
        1,
    )
    assert info.log_append_time_ms == -1 and info.max_timestamp == NOW
    info = lg.append_as_leader(batch(2, codec=compression.ZSTD), leader_epoch=5, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert lg.log_end_offset == 5
    assert lg.leader_epoch_cache.latest_epoch == 5
    data = lg.read(0, max_bytes=1 << 20).records
    assert offsets(data) == [0, 1, 2, 3, 4]
    assert {h.partition_leader_epoch for _, h in iter_batches(data)} == {5}
    # from the batch containing the offset
    assert offsets(lg.read(4, max_bytes=1 << 20).records) == [3, 4]
    assert lg.read(5, max_bytes=100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(6, max_bytes=100)
    # max_offset is exclusive: the batch holding it is not returned
    assert offsets(lg.read(0, max_bytes=1 << 20, max_offset=3).records) == [0, 1, 2]
    assert lg.read(3, max_bytes=1 << 20, max_offset=3).records == b""
    # max_bytes smaller than a batch: nothing unless min_one_message
    assert lg.read(0, max_bytes=10).records == b""
    assert lg.read(0, max_bytes=10).first_entry_incomplete
    assert offsets(lg.read(0, max_bytes=10, min_one_message=True).records) == [0, 1, 2]
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n5 0\n"
    lg.close()


def test_append_rejects_bad_input_without_writing(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=500, segment_bytes=2000))
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytes(bad), leader_epoch=0, now_ms=NOW)
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(batch(2, size=600), leader_epoch=0, now_ms=NOW)
    with pytest.raises(RecordBatchTooLargeError):
        lg.append_as_leader(
            b"".join(batch(3, size=100) for _ in range(6)), leader_epoch=0, now_ms=NOW
        )
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0


def test_log_append_time(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    info = lg.append_as_leader(batch(2, ts=5), leader_epoch=0, now_ms=NOW + 7)
    assert info.log_append_time_ms == NOW + 7
    assert {r.timestamp for r in iter_records(lg.read(0, max_bytes=1 << 20).records)} == {NOW + 7}


def test_roll_by_size_and_index_lookups(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=200)
    lg = open_log(tmp_path / "t-0", cfg)
    for _ in range(40):
        lg.append_as_leader(batch(3, size=30), leader_epoch=0, now_ms=NOW)
    assert len(lg.segments) >= 3
    assert all(s.size <= 2000 for s in lg.segments)
    bases = [s.base_offset for s in lg.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert lg.segments[0].offset_index.entries > 0
    assert read_all(lg) == list(range(120))
    for off in (0, 1, 59, 60, 61, 119):
        info = lg.read(off, max_bytes=1)
        assert info.records == b""
        first = offsets(lg.read(off, max_bytes=1, min_one_message=True).records)
        assert first[0] <= off <= first[-1]


def test_roll_by_time(tmp_path: Path) -> None:
    cfg = LogConfig(segment_ms=1000)
    lg = open_log(tmp_path / "t-0", cfg)
    lg.append_as_leader(batch(1, ts=NOW), leader_epoch=0, now_ms=NOW)
    lg.append_as_leader(batch(1, ts=NOW + 500), leader_epoch=0, now_ms=NOW + 500)
    assert len(lg.segments) == 1
    lg.append_as_leader(batch(1, ts=NOW + 1001), leader_epoch=0, now_ms=NOW + 1001)
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_retention_by_time_and_size(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, retention_ms=10_000)
    lg = open_log(tmp_path / "t-0", cfg)
    for i in range(20):
        lg.append_as_leader(batch(2, ts=NOW + i * 1000, size=50), leader_epoch=0, now_ms=NOW)
    nseg = len(lg.segments)
    assert nseg > 3
    # nothing above the high watermark may go
    assert lg.delete_retention_segments(NOW + 100_000, high_watermark=0) == 0
    deleted = lg.delete_retention_segments(NOW + 25_000, high_watermark=lg.log_end_offset)
    assert deleted > 0 and len(lg.segments) == nseg - deleted
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    assert all(NOW + 25_000 - s.largest_timestamp <= 10_000 for s in lg.segments[:-1])
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, max_bytes=100)
    assert read_all(lg) == list(range(lg.log_start_offset, 40))
    # size retention
    lg.update_config(LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=1500))
    lg.delete_retention_segments(NOW, high_watermark=lg.log_end_offset)
    assert lg.size_in_bytes - lg.active_segment.size <= 1500
    # everything expired: the active segment is rolled, never left missing
    lg.update_config(LogConfig(segment_bytes=1000, retention_ms=0))
    lg.delete_retention_segments(NOW + 10**9, high_watermark=lg.log_end_offset)
    assert len(lg.segments) == 1 and lg.active_segment.is_empty
    assert lg.log_start_offset == lg.log_end_offset == 40
    lg.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert read_all(lg) == [40]


def test_delete_records_advances_log_start(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500))
    for _ in range(10):
        lg.append_as_leader(batch(2, size=80), leader_epoch=0, now_ms=NOW)
    nseg = len(lg.segments)
    assert lg.maybe_increment_log_start_offset(9, "DeleteRecords")
    assert lg.log_start_offset == 9
    assert len(lg.segments) < nseg and lg.segments[0].base_offset <= 9
    assert read_all(lg) == list(range(9, 20))
    assert not lg.maybe_increment_log_start_offset(5, "DeleteRecords")
    with pytest.raises(OffsetOutOfRangeError):
        lg.maybe_increment_log_start_offset(21, "DeleteRecords")
    lg.close()
    lg2 = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500), log_start_offset=9)
    assert lg2.log_start_offset == 9 and read_all(lg2) == list(range(9, 20))


def test_truncate_to(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for epoch in range(6):
        lg.append_as_leader(batch(2, size=60), leader_epoch=epoch, now_ms=NOW)
    assert lg.log_end_offset == 12 and len(lg.segments) > 2
    assert not lg.truncate_to(12)
    assert lg.truncate_to(6)
    assert lg.log_end_offset == 6
    assert read_all(lg) == list(range(6))
    assert lg.leader_epoch_cache.latest_epoch == 2
    assert all(s.base_offset <= 6 for s in lg.segments)
    info = lg.append_as_leader(batch(1), leader_epoch=9, now_ms=NOW)
    assert info.first_offset == 6
    assert lg.leader_epoch_cache.end_offset_for(2, lg.log_end_offset) == (2, 6)
    # A leader epoch taken with nothing appended in it goes on a no-op truncation (Kafka's rule).
    lg.leader_epoch_cache.assign(11, lg.log_end_offset)
    assert not lg.truncate_to(lg.log_end_offset + 5)
    assert lg.leader_epoch_cache.latest_epoch == 9
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset, len(lg.segments)) == (100, 100, 1)
    assert lg.append_as_leader(batch(1), leader_epoch=10, now_ms=NOW).first_offset == 100


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.integers(1, 4), st.integers(-20, -1)), min_size=1, max_size=60))
def test_reads_near_the_end_are_exact_through_appends_and_truncations(tmp_path_factory, ops) -> None:
    """A read starts its scan at a recent append's position when it can (LogSegment._recent):
    every offset still reads as the batch that holds it after appends and truncations (a
    negative op truncates that many batches back), against a log reopened without the hints."""
    path = tmp_path_factory.mktemp("tail") / "t-0"
    cfg = LogConfig(segment_bytes=100_000, index_interval_bytes=100_000)  # one segment, no index help
    lg = open_log(path, cfg)
    starts: list[int] = []
    for op in ops:
        if op > 0:
            starts.append(lg.append_as_leader(batch(op, size=op * 7), leader_epoch=1, now_ms=NOW).first_offset)
        elif starts:
            cut = max(len(starts) + op, 0)
            lg.truncate_to(starts[cut])  # truncations land on batch boundaries, as in a broker
            del starts[cut:]

    def firsts(log: Log) -> list[tuple[int, int]]:
        out = []
        for off in range(log.log_end_offset):
            data = log.read(off, max_bytes=1, min_one_message=True).records
            rs = [r.offset for r in iter_records(data)]
            assert rs[0] <= off <= rs[-1], (off, rs)
            out.append((rs[0], rs[-1]))
        return out

    got = firsts(lg)
    lg.flush()
    lg.close()
    assert got == firsts(open_log(path, cfg, clean_shutdown=True))


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0")
    for e in (1, 1, 2):
        leader.append_as_leader(batch(3), leader_epoch=e, now_ms=NOW)
    data = leader.read(0, max_bytes=1 << 20).records
    follower = open_log(tmp_path / "f-0")
    info = follower.append_as_follower(data + data[:30], now_ms=NOW)  # torn tail ignored
    assert info is not None and (info.first_offset, info.last_offset) == (0, 8)
    assert follower.read(0, max_bytes=1 << 20).records == data
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.epoch_entries()] == [
        (1, 0),
        (2, 6),
    ]


def test_timestamp_lookups(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=600, index_interval_bytes=100))
    for i in range(10):
        recs = [(NOW + i * 100 + j, b"k", b"v" * 20) for j in range(3)]
        lg.append_as_leader(build_batch(recs), leader_epoch=i, now_ms=NOW)
    lg.append_as_leader(
        build_batch([(NOW + 5000, b"k", b"max"), (NOW + 1, b"k", b"v")]),
        leader_epoch=20,
        now_ms=NOW,
    )
    found = lg.fetch_offset_by_timestamp(NOW + 401)
    assert (found.offset, found.timestamp, found.leader_epoch) == (13, NOW + 401, 4)
    assert lg.fetch_offset_by_timestamp(NOW - 5).offset == 0
    assert lg.fetch_offset_by_timestamp(NOW + 10**6) is None
    mx = lg.max_timestamp_offset()
    assert (mx.offset, mx.timestamp, mx.leader_epoch) == (30, NOW + 5000, 20)
    lg.close()
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=600, index_interval_bytes=100))
    assert lg.fetch_offset_by_timestamp(NOW + 401).offset == 13
    assert lg.max_timestamp_offset().offset == 30


def _fill(path: Path, cfg: LogConfig, n: int) -> Log:
    lg = open_log(path, cfg)
    for i in range(n):
        lg.append_as_leader(batch(2, size=40, tag=str(i)), leader_epoch=0, now_ms=NOW)
    return lg


def test_recovery_truncates_corrupt_last_batch(tmp_path: Path, caplog) -> None:
    cfg = LogConfig(segment_bytes=800)
    lg = _fill(tmp_path / "t-0", cfg, 20)
    last = lg.active_segment
    last_path, size = last.log_path, last.size
    positions = [p for p, _ in last.iter_batches_from(0)]
    lg.flush()
    lg.close()
    with open(last_path, "r+b") as f:  # flip bytes in the last batch
        f.seek(positions[-1] + 40)
        f.write(b"\xde\xad")
    caplog.set_level(logging.WARNING, logger="kavka.storage")
    lg2 = open_log(tmp_path / "t-0", cfg, clean_shutdown=False, recovery_point=0)
    assert lg2.log_end_offset == 38
    assert last_path.stat().st_size == positions[-1]
    assert read_all(lg2) == list(range(38))
    msgs = [r.getMessage() for r in caplog.records if r.name == "kavka.storage"]
    assert any(
        str(last_path) in m
        and f"position {positions[-1]}" in m
        and f"{size - positions[-1]} bytes" in m
        for m in msgs
    ), msgs
    assert lg2.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW).first_offset == 38


def test_recovery_of_torn_write_and_later_segments(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=800)
    lg = _fill(tmp_path / "t-0", cfg, 20)
    segs = lg.segments
    assert len(segs) >= 3
    middle = segs[1]
    cut_at = [p for p, _ in middle.iter_batches_from(0)][2] + 17
    middle_end_offset = segs[2].base_offset
    lg.close()
    os.truncate(middle.log_path, cut_at)  # a torn write mid-batch
    lg2 = open_log(tmp_path / "t-0", cfg, clean_shutdown=False, recovery_point=0)
    assert len(lg2.segments) == 2  # segments after the torn one are deleted
    assert lg2.log_end_offset == middle.base_offset + 4 < middle_end_offset
    assert read_all(lg2) == list(range(lg2.log_end_offset))
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=150)
    lg = _fill(tmp_path / "t-0", cfg, 30)
    before = [(s.base_offset, s.offset_index.entries) for s in lg.segments]
    lg.flush()
    lg.close()
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix in (".index", ".timeindex"):
            p.unlink()
    lg2 = open_log(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert [(s.base_offset, s.offset_index.entries) for s in lg2.segments] == before
    assert all(s.offset_index.entries > 0 for s in lg2.segments[:-1])
    assert read_all(lg2) == list(range(60))
    for off in range(0, 60, 7):
        assert off in offsets(lg2.read(off, max_bytes=1, min_one_message=True).records)


def _index_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.suffix in (".index", ".timeindex"))


@pytest.mark.parametrize("clean", [True, False])
def test_an_idle_segment_has_no_index_files_and_behaves_as_before_once_written(
    tmp_path: Path, clean: bool, caplog
) -> None:
    """Issue 32 item 8: a new segment's index files (and a new log's `.log`) are created with its
    first append, not with the segment. Opened (cleanly or not) without them it reads, appends, looks up timestamps,
    truncates and recovers as a segment that had them; no rebuild is ever logged."""
    caplog.set_level(logging.WARNING, logger="kavka.storage")
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=800, index_interval_bytes=100)
    first = d / "00000000000000000000.log"
    lg = open_log(d, cfg)
    # A new log's first segment has no file at all until it is written (nor after a flush).
    assert _index_files(d) == [] and not first.exists()
    lg.flush()
    lg.close()
    assert not first.exists()
    lg = open_log(d, cfg, clean_shutdown=clean)  # an idle log loaded: still no files
    assert (lg.log_end_offset, lg.read(0, max_bytes=100).records, _index_files(d)) == (0, b"", [])
    assert lg.segments[0].largest_timestamp >= 0 and not first.exists()
    lg.close()
    lg = open_log(d, cfg, clean_shutdown=clean)
    for i in range(12):
        lg.append_as_leader(batch(2, ts=NOW + i, size=40, tag=str(i)), leader_epoch=0, now_ms=NOW)
        if i == 0:  # there before anything is flushed, so a crash cannot leave data without them
            assert _index_files(d) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
            assert first.stat().st_size > 0
    assert len(lg.segments) >= 3 and all(s.offset_index.entries for s in lg.segments[:-1])
    assert read_all(lg) == list(range(24))
    assert lg.fetch_offset_by_timestamp(NOW + 5).offset == 10
    lg.truncate_to(10)
    assert read_all(lg) == list(range(10))
    lg.flush()
    lg.close()
    lg = open_log(d, cfg, clean_shutdown=clean, recovery_point=0)
    assert read_all(lg) == list(range(10))
    assert lg.append_as_leader(batch(1, ts=NOW + 20), leader_epoch=0, now_ms=NOW).first_offset == 10
    assert lg.fetch_offset_by_timestamp(NOW + 20).offset == 10
    assert not [r.getMessage() for r in caplog.records if "rebuild" in r.getMessage()]
    lg.close()


def test_clean_shutdown_skips_the_scan(tmp_path: Path, monkeypatch) -> None:
    cfg = LogConfig(segment_bytes=800)
    lg = _fill(tmp_path / "t-0", cfg, 20)
    lg.flush()
    lg.close()
    from kavka.storage import segment as segment_mod

    calls = []
    original = segment_mod.LogSegment.recover
    monkeypatch.setattr(
        segment_mod.LogSegment, "recover", lambda self, *a: calls.append(self) or original(self, *a)
    )
    lg2 = open_log(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert calls == [] and lg2.log_end_offset == 40 and lg2.recovery_point == 40
    lg2.close()
    open_log(
        tmp_path / "t-0", cfg, clean_shutdown=False, recovery_point=lg2.segments[-2].base_offset
    )
    assert len(calls) == 2  # only from the segment holding the recovery point


def test_leftover_files_are_removed(tmp_path: Path) -> None:
    lg = _fill(tmp_path / "t-0", LogConfig(), 2)
    lg.close()
    d = tmp_path / "t-0"
    for name in (
        "00000000000000000007.log.deleted",
        "x.cleaned",
        "y.swap",
        "00000000000000000009.index",
    ):
        (d / name).write_bytes(b"junk")
    lg2 = open_log(d, LogConfig())
    assert sorted(p.name for p in d.iterdir() if not p.name.startswith("0000000000000000000")) == [
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert not (d / "00000000000000000009.index").exists()
    assert lg2.log_end_offset == 4


def test_flush_moves_recovery_point(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(flush_messages=5, segment_bytes=500, flush_ms=1000))
    lg.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    assert lg.recovery_point == 0
    lg.append_as_leader(batch(3), leader_epoch=0, now_ms=NOW)
    assert lg.recovery_point == 6  # flush.messages reached
    lg.append_as_leader(batch(1), leader_epoch=0, now_ms=NOW)
    assert not lg.maybe_flush(NOW + 10)
    assert lg.maybe_flush(NOW + 2000) and lg.recovery_point == 7


def test_delete_renames_then_removes(tmp_path: Path) -> None:
    lg = _fill(tmp_path / "t-0", LogConfig(), 2)
    lg.delete()
    assert list(tmp_path.iterdir()) == []


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(st.integers(1, 6), st.integers(0, 120), st.sampled_from([0, 0, 1, 4])),
        min_size=1,
        max_size=25,
    )
)
def test_property_appends_are_readable(tmp_path_factory, appends) -> None:
    path = tmp_path_factory.mktemp("prop") / "p-0"
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=128)
    lg = open_log(path, cfg)
    expected: dict[int, bytes] = {}
    for n, size, codec in appends:
        recs = [(NOW, None, os.urandom(size)) for _ in range(n)]
        info = lg.append_as_leader(build_batch(recs, compression=codec), leader_epoch=1, now_ms=NOW)
        assert info.first_offset == len(expected)
        for i, (_, _, v) in enumerate(recs):
            expected[info.first_offset + i] = v

    def check(log: Log) -> None:
        assert log.log_end_offset == len(expected)
        assert read_all(log) == list(range(len(expected)))
        for off in range(0, len(expected), 3):
            data = log.read(off, max_bytes=1, min_one_message=True).records
            vals = {r.offset: r.value for r in iter_records(data)}
            assert vals[off] == expected[off]

    check(lg)
    lg.flush()
    lg.close()
    check(open_log(path, cfg, clean_shutdown=True))
    check(open_log(path, cfg, clean_shutdown=False, recovery_point=0))


def test_tiered_local_retention_deletes_only_copied_segments(tmp_path: Path) -> None:
    """KIP-405: a tiered log's retention never deletes a segment not yet in remote storage, keeps
    its log start offset (the data is remote), and moves only the local log start offset."""
    cfg = LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=-1, remote_storage_enable=True,
                    local_retention_bytes=1000, local_retention_ms=-2)
    lg = open_log(tmp_path / "t-0", cfg)
    for i in range(40):
        lg.append_as_leader(batch(2, ts=NOW + i, size=50), leader_epoch=0, now_ms=NOW)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 4
    # nothing copied yet: nothing goes, however far past local retention
    assert lg.delete_retention_segments(NOW, high_watermark=lg.log_end_offset) == 0
    # the first two segments copied: only they may go
    lg.highest_offset_in_remote = bases[2] - 1
    assert lg.delete_retention_segments(NOW, high_watermark=lg.log_end_offset) == 2
    assert lg.log_start_offset == 0 and lg.local_log_start_offset == bases[2]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, max_bytes=100)  # below the local log start: the remote reader's job
    # everything copied but the active segment: local retention bytes keeps the newest segments
    lg.highest_offset_in_remote = lg.log_end_offset - 1
    lg.delete_retention_segments(NOW, high_watermark=lg.log_end_offset)
    assert lg.size_in_bytes - lg.active_segment.size <= 1000
    assert lg.log_start_offset == 0
    # a restart opens it with the defaults first: the tiered config puts the log start offset back
    lg.close()
    again = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1000), log_start_offset=0)
    assert again.log_start_offset == again.local_log_start_offset > 0
    again.update_config(cfg)
    assert again.log_start_offset == 0 and again.local_log_start_offset > 0


def test_replay_records_yields_every_record_once_in_order(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "t-0", LogConfig(segment_bytes=600))
    for i in range(12):  # several segments, compressed and plain batches of 3
        lg.append_as_leader(batch(3, codec=i % 2, tag=f"b{i}-"), leader_epoch=0, now_ms=NOW)
    lg.maybe_increment_log_start_offset(4, "test")  # starts mid-batch
    want = list(range(4, 36))
    for chunk in (1, 150, 1 << 20):  # a chunk smaller than a batch still makes progress
        got = [r.offset for r in lg.replay_records(chunk_bytes=chunk)]
        assert got == want, chunk
    values = [r.value for r in lg.replay_records()]
    assert len(set(values)) == len(values) == 32


def test_in_place_append_rewrites_a_writable_view_and_copies_anything_else(tmp_path: Path) -> None:
    """`in_place` with a writable view (a request frame of its own): the offsets go into it and it
    is what gets written; a read-only view, or no `in_place`, is copied and left as it was."""
    lg = open_log(tmp_path / "t-0")
    lg.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW)  # the next append starts at offset 2
    frame = bytearray(b"head" + batch(3, tag="a"))
    view = memoryview(frame)[4:]
    lg.append_as_leader(view, leader_epoch=5, now_ms=NOW, in_place=True)
    (_, h), = iter_batches(view)
    assert (h.base_offset, h.partition_leader_epoch) == (2, 5)  # rewritten where it was
    readonly = memoryview(batch(1, tag="b"))
    kept = bytearray(batch(1, tag="c"))
    lg.append_as_leader(readonly, leader_epoch=5, now_ms=NOW, in_place=True)
    lg.append_as_leader(memoryview(kept), leader_epoch=5, now_ms=NOW)
    assert bytes(readonly) == batch(1, tag="b") and bytes(kept) == batch(1, tag="c")
    assert read_all(lg) == list(range(7))
    records = iter_records(lg.read(2, max_bytes=1 << 20).records)
    assert [r.value[:2] for r in records] == [b"va", b"va", b"va", b"vb", b"vc"]
