"""The leader's cache of its newest appends (storage.segment.TailCache): a read served from it is
byte for byte the read from the segment file, through appends, rolls, truncations, retention,
follower appends and evictions; and a follower that keeps up gets an append's bytes without a
read of the file."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kavka.protocol.records import assign_offsets, build_batch
from kavka.storage import segment as segment_module
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000


def _batches(sizes: list[int], tag: int) -> bytes:
    return b"".join(
        build_batch([(NOW, f"k{tag}.{i}".encode(), b"v" * (7 * n + i)) for i in range(n)]) for n in sizes
    )


def _open(path: Path, cfg: LogConfig) -> Log:
    return Log.open(path, cfg, topic_id="J8aAPcfLQt2bqs1JT_rMgQ", recovery_point=0, log_start_offset=0,
                    clean_shutdown=True, now_ms=NOW)


def _uncached_read(lg: Log, offset: int, **kw) -> tuple[bytes, bool, int]:
    saved = [(s, s._tail) for s in lg.segments]
    for s, _ in saved:
        s._tail = deque()
    try:
        info = lg.read(offset, **kw)
    finally:
        for s, tail in saved:
            s._tail = tail
    return bytes(info.records), info.first_entry_incomplete, info.fetch_offset_metadata.relative_position_in_segment


def _cached_read(lg: Log, offset: int, **kw) -> tuple[bytes, bool, int]:
    info = lg.read(offset, **kw)
    return bytes(info.records), info.first_entry_incomplete, info.fetch_offset_metadata.relative_position_in_segment


_OP = st.one_of(
    st.tuples(st.just("lead"), st.lists(st.integers(1, 4), min_size=1, max_size=3)),
    st.tuples(st.just("follow"), st.lists(st.integers(1, 4), min_size=1, max_size=3)),
    st.tuples(st.just("truncate"), st.integers(1, 6)),
    st.tuples(st.just("roll"), st.just(0)),
    st.tuples(st.just("delete_records"), st.integers(1, 5)),
)


def test_only_appends_asked_to_are_kept(tmp_path) -> None:
    lg = _open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(_batches([3], 0), leader_epoch=1, now_ms=NOW)  # a partition without followers
    assert not lg.active_segment._tail
    lg.append_as_leader(_batches([3], 1), leader_epoch=1, now_ms=NOW, cache=True)
    assert [e[0] for e in lg.active_segment._tail] == [3]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OP, min_size=1, max_size=30), budget=st.sampled_from([150, 2_000, 1 << 20]),
       reads=st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 2_000), st.booleans(), st.integers(0, 3)),
                      min_size=4, max_size=12))
def test_cached_reads_equal_the_files(tmp_path_factory, monkeypatch, ops, budget, reads) -> None:
    """After every step, reads at random offsets, sizes and upper bounds (max_offset: a
    consumer's high watermark) answer the same bytes, position and incompleteness with the cache
    as without it."""
    monkeypatch.setattr(segment_module, "TAIL_CACHE", segment_module.TailCache(budget))
    path = tmp_path_factory.mktemp("tail") / "t-0"
    cfg = LogConfig(segment_bytes=900, index_interval_bytes=200)
    lg = _open(path, cfg)
    epoch = 1
    starts: list[int] = []  # the batches' base offsets
    for step, (op, arg) in enumerate(ops):
        first = lg.log_end_offset
        if op == "lead":
            lg.append_as_leader(_batches(arg, step), leader_epoch=epoch, now_ms=NOW, cache=True)
        elif op == "follow":
            # This replica follows for a while: batches that carry their offsets, not cached.
            buf = bytearray(_batches(arg, step))
            assign_offsets(buf, base_offset=first, partition_leader_epoch=epoch, log_append_time_ms=None)
            lg.append_as_follower(bytes(buf), now_ms=NOW)
            epoch += 1
        if op in ("lead", "follow"):
            for n in arg:
                starts.append(first)
                first += n
        elif op == "truncate":
            # Truncations land on batch boundaries, as in a broker (KIP-320 epochs).
            kept = [o for o in starts if o >= lg.log_start_offset]
            if kept:
                cut = kept[max(len(kept) - arg, 0)]
                lg.truncate_to(cut)
                starts = [o for o in starts if o < cut]
        elif op == "roll" and lg.active_segment.size:
            lg.roll(NOW)
        elif op == "delete_records" and lg.log_end_offset > lg.log_start_offset:
            lg.maybe_increment_log_start_offset(min(lg.log_start_offset + arg, lg.log_end_offset), "DeleteRecords")
        start, end = lg.log_start_offset, lg.log_end_offset
        if end == start:
            continue
        for at, size, min_one, upper in reads:
            offset = start + at % (end - start)
            kw = {"max_bytes": size, "min_one_message": min_one}
            if upper:
                kw["max_offset"] = offset + upper
            assert _cached_read(lg, offset, **kw) == _uncached_read(lg, offset, **kw), (step, offset, kw)
    assert segment_module.TAIL_CACHE.size <= budget
    lg.close()
    assert all(not s._tail for s in lg.segments)


def test_a_follower_that_keeps_up_gets_the_append_itself_without_reading_the_file(tmp_path, monkeypatch) -> None:
    lg = _open(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(_batches([3], 0), leader_epoch=1, now_ms=NOW, cache=True)
    info = lg.append_as_leader(_batches([2, 4], 1), leader_epoch=1, now_ms=NOW, cache=True)
    on_disk = os.pread(os.open(lg.active_segment.log_path, os.O_RDONLY), 1 << 20, 0)

    def no_read(*_a: object) -> bytes:
        raise AssertionError("the segment file was read")

    monkeypatch.setattr(segment_module.LogSegment, "_pread", no_read)
    first = lg.read(info.first_offset, max_bytes=1 << 20, min_one_message=True).records
    second = lg.read(info.first_offset, max_bytes=1 << 20, min_one_message=True).records
    assert first is second  # both followers' fetches: the append's own bytes, not copies
    assert first == on_disk[-len(first):]
    # From inside an append and over several appends: the same bytes as the file, still no read.
    assert lg.read(info.first_offset + 2, max_bytes=1 << 20).records == on_disk[-len(_batches([4], 1)):]
    assert lg.read(0, max_bytes=1 << 20).records == on_disk
    # A truncation drops the cache: the next read goes to the file.
    monkeypatch.undo()
    lg.truncate_to(3)
    assert not lg.active_segment._tail
    monkeypatch.setattr(segment_module.LogSegment, "_pread", no_read)
    with pytest.raises(AssertionError, match="was read"):
        lg.read(0, max_bytes=1 << 20)


def test_the_budget_is_for_the_whole_process_and_evicts_the_oldest(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(segment_module, "TAIL_CACHE", segment_module.TailCache(1_000))
    a = _open(tmp_path / "a-0", LogConfig())
    b = _open(tmp_path / "b-0", LogConfig())
    a.append_as_leader(_batches([4], 0), leader_epoch=1, now_ms=NOW, cache=True)
    for i in range(6):
        b.append_as_leader(_batches([4], i), leader_epoch=1, now_ms=NOW, cache=True)
    assert segment_module.TAIL_CACHE.size <= 1_000
    assert not a.active_segment._tail  # the oldest append went first
    assert b.active_segment._tail and b.active_segment._tail[-1][0] == 20
    assert a.read(0, max_bytes=1 << 20).records == _uncached_read(a, 0, max_bytes=1 << 20)[0]
    b.close()
    assert segment_module.TAIL_CACHE.size == 0
    a.close()
