"""Log compaction on a real Log: last value per key at its original offset, tombstones, codecs, crashes.

The expected result is computed independently from what was appended (a
dict of key -> last (offset, value)), never from the cleaner's own code.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from kavka.protocol import compression
from kavka.protocol.records import build_batch, decode_batch, iter_batches
from kavka.storage.cleaner import maybe_clean
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
DAY = 86_400_000


def config(**kw) -> LogConfig:  # noqa: ANN003
    base = dict(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0, index_interval_bytes=256)
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def open_log(path: Path, cfg: LogConfig, *, clean: bool = True) -> Log:
    return Log.open(path, cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=clean, now_ms=NOW)


def all_records(lg: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, codec) of every record, reading the log from its start."""
    out = []
    off = lg.log_start_offset
    for _ in range(100_000):
        if off >= lg.log_end_offset:
            break
        data = lg.read(off, max_bytes=1 << 20, min_one_message=True).records
        if not data:
            break
        for pos, h in iter_batches(data):
            _, recs = decode_batch(data, pos)
            out += [(r.offset, r.key, r.value, h.compression) for r in recs if r.offset >= off]
            off = max(off, h.next_offset)
    return out


def fill(lg: Log, rng: random.Random, *, batches: int, ts: int) -> list[tuple[int, bytes, bytes | None, int]]:
    """Keyed overwrites and tombstones, in batches of mixed codecs; returns what was written."""
    written = []
    codecs = [compression.NONE, compression.GZIP, compression.NONE, compression.ZSTD]
    for b in range(batches):
        codec = codecs[b % len(codecs)]
        recs = []
        for _ in range(rng.randint(1, 6)):
            key = f"key-{rng.randint(0, 14)}".encode()
            value = None if rng.random() < 0.15 else f"v{rng.random():.6f}".encode().ljust(40, b".")
            recs.append((ts, key, value))
        info = lg.append_as_leader(build_batch(recs, compression=codec), leader_epoch=0, now_ms=ts)
        written += [(info.first_offset + i, k, v, codec) for i, (_, k, v) in enumerate(recs)]
    return written


def expected_after_clean(written, first_uncleanable: int, *, drop_tombstones: bool):  # noqa: ANN001, ANN202
    last: dict[bytes, int] = {}
    for off, key, _v, _c in written:
        if off < first_uncleanable:
            last[key] = off
    out = []
    for off, key, value, codec in written:
        if off >= first_uncleanable:
            out.append((off, key, value, codec))
        elif last[key] == off and not (value is None and drop_tombstones):
            out.append((off, key, value, codec))
    return out


def test_compaction_keeps_last_value_per_key_at_its_offset_and_survives_restart(tmp_path: Path) -> None:
    rng = random.Random(5)
    cfg = config()
    lg = open_log(tmp_path / "c-0", cfg)
    written = fill(lg, rng, batches=120, ts=NOW)
    assert len(lg.segments) > 3
    active_base = lg.segments[-1].base_offset
    result = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW + 1000)
    assert result is not None and result.first_uncleanable_offset == active_base and result.records_removed > 0
    want = expected_after_clean(written, active_base, drop_tombstones=False)
    assert all_records(lg) == want
    assert lg.segments[-1].base_offset == active_base  # the active segment is untouched
    lg.close()
    # After an unclean restart (indexes and segments recovered from disk) the same records.
    lg = open_log(tmp_path / "c-0", cfg, clean=False)
    assert all_records(lg) == want
    # delete.retention.ms counts from the pass that first kept a tombstone (NOW + 1000), not from
    # its CreateTime (NOW): a day after the CreateTime they are still there ...
    again = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW + DAY + 1)
    assert again is not None
    assert all_records(lg) == want
    # ... and a day after that first pass they go.
    again = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW + 1000 + DAY)
    assert again is not None
    assert all_records(lg) == expected_after_clean(written, active_base, drop_tombstones=True)
    lg.close()


def test_dirty_ratio_and_compaction_lag_hold_cleaning_back(tmp_path: Path) -> None:
    rng = random.Random(7)
    lg = open_log(tmp_path / "c-0", config(min_cleanable_dirty_ratio=0.9))
    fill(lg, rng, batches=60, ts=NOW)
    first = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW)
    assert first is not None  # all dirty: ratio 1.0
    # Nothing new: the cleaned part is all clean, ratio 0 < 0.9.
    assert maybe_clean(lg, first_dirty_offset=first.first_uncleanable_offset, high_watermark=lg.log_end_offset, now_ms=NOW) is None
    lg.close()
    lag = open_log(tmp_path / "d-0", config(min_compaction_lag_ms=60_000))
    fill(lag, rng, batches=60, ts=NOW)
    assert maybe_clean(lag, first_dirty_offset=0, high_watermark=lag.log_end_offset, now_ms=NOW + 1000) is None
    # Nothing at or above the high watermark is cleaned.
    assert maybe_clean(lag, first_dirty_offset=0, high_watermark=0, now_ms=NOW + 61_000) is None
    assert maybe_clean(lag, first_dirty_offset=0, high_watermark=lag.log_end_offset, now_ms=NOW + 61_000) is not None
    lag.close()


def test_delete_policy_only_is_never_compacted(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "c-0", config(cleanup_policy=("delete",)))
    fill(lg, random.Random(1), batches=40, ts=NOW)
    assert maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW) is None
    lg.close()


def raw_batches(lg: Log) -> list:  # noqa: ANN201
    """Every batch header below the log end, read from the segment files."""
    out = []
    for seg in lg.segments:
        out += [h for _, h in iter_batches(seg.log_path.read_bytes())]
    return out


def test_tombstone_with_an_old_create_time_lives_delete_retention_ms_after_its_clean(tmp_path: Path) -> None:
    """KIP-534: the horizon is stamped in the cleaned batch (attribute bit 0x40, baseTimestamp),
    so it survives a restart; the record's CreateTime (ten days old here) does not matter."""
    cfg = config(delete_retention_ms=DAY)
    d = tmp_path / "t-0"
    lg = open_log(d, cfg)
    old = NOW - 10 * DAY
    lg.append_as_leader(build_batch([(old, b"a", b"1"), (old, b"b", b"2")]), leader_epoch=0, now_ms=NOW)
    lg.append_as_leader(build_batch([(old + 5, b"a", None)]), leader_epoch=0, now_ms=NOW)  # tombstone for a
    lg.roll(NOW)
    lg.append_as_leader(build_batch([(NOW, b"c", b"3")]), leader_epoch=0, now_ms=NOW)
    hw = lg.log_end_offset
    first = maybe_clean(lg, first_dirty_offset=0, high_watermark=hw, now_ms=NOW)
    assert first is not None
    keys = [(o, k, v) for o, k, v, _ in all_records(lg)]
    assert keys == [(1, b"b", b"2"), (2, b"a", None), (3, b"c", b"3")]
    [tomb] = [h for h in raw_batches(lg) if h.base_offset == 2]
    assert tomb.has_delete_horizon and tomb.base_timestamp == NOW + DAY
    _, [rec] = decode_batch(build_batch([(old + 5, b"a", None)]))
    assert [r.timestamp for r in decode_batch(lg.read(2, max_bytes=1 << 20).records)[1]] == [rec.timestamp]
    lg.close()
    lg = open_log(d, cfg, clean=False)  # the horizon is on disk
    assert maybe_clean(lg, first_dirty_offset=0, high_watermark=hw, now_ms=NOW + DAY - 1, force=True) is not None
    assert (2, b"a", None) in [(o, k, v) for o, k, v, _ in all_records(lg)]
    assert maybe_clean(lg, first_dirty_offset=0, high_watermark=hw, now_ms=NOW + DAY, force=True) is not None
    assert [(o, k, v) for o, k, v, _ in all_records(lg)] == [(1, b"b", b"2"), (3, b"c", b"3")]
    lg.close()


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path: Path) -> None:
    rng = random.Random(3)
    lg = open_log(tmp_path / "m-0", config(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=60_000))
    fill(lg, rng, batches=80, ts=NOW)
    first = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW, force=True)
    assert first is not None
    # A little dirty data on top of the clean part: far below the 0.9 ratio.
    written = fill(lg, rng, batches=12, ts=NOW + 1000)
    lg.roll(NOW + 1000)
    lg.append_as_leader(build_batch([(NOW + 1000, b"tail", b"x")]), leader_epoch=0, now_ms=NOW + 1000)
    from kavka.storage.cleaner import dirty_ratio

    assert dirty_ratio(lg, first.end_offset, lg.segments[-1].base_offset) < 0.9
    args = dict(first_dirty_offset=first.end_offset, high_watermark=lg.log_end_offset)
    assert maybe_clean(lg, **args, now_ms=NOW + 1000 + 59_000) is None  # not overdue yet
    forced = maybe_clean(lg, **args, now_ms=NOW + 1000 + 61_000)  # overdue: cleaned whatever the ratio
    assert forced is not None and forced.end_offset == lg.segments[-1].base_offset
    assert written[-1][0] < forced.end_offset
    lg.close()


def test_small_segments_are_merged_up_to_segment_bytes(tmp_path: Path) -> None:
    rng = random.Random(4)
    cfg = config(segment_bytes=4096)
    d = tmp_path / "s-0"
    lg = open_log(d, cfg)
    written = fill(lg, rng, batches=400, ts=NOW)
    # Kafka groups by the sizes before cleaning: the first pass shrinks full segments one by
    # one, the next one merges what they shrank to.
    first = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW)
    assert first is not None
    closed_before = len(lg.segments) - 1
    written += fill(lg, rng, batches=30, ts=NOW)
    lg.roll(NOW)
    active_base = lg.segments[-1].base_offset
    result = maybe_clean(lg, first_dirty_offset=first.end_offset, high_watermark=lg.log_end_offset, now_ms=NOW, force=True)
    assert result is not None
    closed = lg.segments[:-1]
    want = expected_after_clean(written, active_base, drop_tombstones=False)
    assert all_records(lg) == want
    # 15 keys' last values need far less than 4096 bytes a segment: the groups became few segments.
    assert closed_before >= 10 and len(closed) <= closed_before // 3
    assert result.segments_after == len(closed)
    assert all(seg.size <= cfg.segment_bytes for seg in closed)
    assert closed[0].base_offset == 0
    # No file of a merged-away segment is left, and a restart reads the same.
    bases = {int(p.name[:20]) for p in d.iterdir() if p.name[:20].isdigit() and p.suffix in (".log", ".index", ".timeindex")}
    assert bases == {s.base_offset for s in lg.segments}
    lg.close()
    lg = open_log(d, cfg, clean=False)
    assert all_records(lg) == want
    lg.close()


def test_a_dedupe_buffer_too_small_for_the_dirty_section_cleans_in_several_passes(tmp_path: Path) -> None:
    from kavka.storage.cleaner import CleanerConfig

    rng = random.Random(8)
    lg = open_log(tmp_path / "b-0", config())
    written = []
    for b in range(150):  # 60 keys, so the map below (18 keys) cannot hold them
        recs = [(NOW, f"key-{rng.randint(0, 59)}".encode(), f"v{b}-{i}".encode()) for i in range(3)]
        info = lg.append_as_leader(build_batch(recs), leader_epoch=0, now_ms=NOW)
        written += [(info.first_offset + i, k, v, 0) for i, (_, k, v) in enumerate(recs)]
    active_base = lg.segments[-1].base_offset
    tiny = CleanerConfig(dedupe_buffer_size=20 * 24, io_buffer_size=1024, io_buffer_load_factor=0.9)
    first_dirty, passes = 0, 0
    while True:
        result = maybe_clean(lg, first_dirty_offset=first_dirty, high_watermark=lg.log_end_offset, now_ms=NOW, cleaner=tiny, force=True)
        if result is None:
            break
        passes += 1
        assert result.end_offset > first_dirty  # every pass makes progress
        assert result.map_full == (result.end_offset < active_base)
        first_dirty = result.end_offset
        assert passes < 100
    assert passes >= 3 and first_dirty == active_base
    assert all_records(lg) == expected_after_clean(written, active_base, drop_tombstones=False)
    lg.close()


def test_the_offset_map_reads_only_the_dirty_section(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from kavka.storage import cleaner

    rng = random.Random(12)
    lg = open_log(tmp_path / "r-0", config())
    fill(lg, rng, batches=100, ts=NOW)
    first = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW)
    assert first is not None
    clean_segments = {s.log_path for s in lg.segments[:-1]}
    fill(lg, rng, batches=60, ts=NOW)
    lg.roll(NOW)
    reads: list[tuple[Path, int]] = []
    real_iter = cleaner._iter_file_batches
    real_build = cleaner._build_offset_map

    def build(plan):  # noqa: ANN001, ANN202
        def spy(path, start, end, chunk):  # noqa: ANN001, ANN202
            reads.append((path, start))
            return real_iter(path, start, end, chunk)

        monkeypatch.setattr(cleaner, "_iter_file_batches", spy)
        try:
            return real_build(plan)
        finally:
            monkeypatch.setattr(cleaner, "_iter_file_batches", real_iter)

    monkeypatch.setattr(cleaner, "_build_offset_map", build)
    second = maybe_clean(lg, first_dirty_offset=first.end_offset, high_watermark=lg.log_end_offset, now_ms=NOW, force=True)
    assert second is not None and reads
    assert not {p for p, _ in reads} & clean_segments
    lg.close()


def test_a_crash_in_the_middle_of_a_group_swap_is_completed_on_open(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import kavka.storage.local_log as log_module

    rng = random.Random(9)
    cfg = config()
    d = tmp_path / "c-0"
    lg = open_log(d, cfg)
    written = fill(lg, rng, batches=120, ts=NOW)
    active_base = lg.segments[-1].base_offset
    real_replace = os.replace

    def crash_before_the_last_rename(src, dst):  # noqa: ANN001, ANN202
        if str(src).endswith(".log.swap"):
            raise SystemExit("power cut")
        return real_replace(src, dst)

    monkeypatch.setattr(log_module.os, "replace", crash_before_the_last_rename)
    try:
        maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW)
    except SystemExit:
        pass
    monkeypatch.setattr(log_module.os, "replace", real_replace)
    assert list(d.glob("*.log.swap")) and list(d.glob("*.deleted"))
    lg = open_log(d, cfg, clean=False)
    got = all_records(lg)
    want = expected_after_clean(written, active_base, drop_tombstones=False)
    # The first group's swap is completed; later groups were never cleaned: their records are
    # all there (so a key may appear twice), none lost, offsets increasing.
    assert [o for o, *_ in got] == sorted({o for o, *_ in got})
    assert set(want) <= set(got) <= set((o, k, v, c) for o, k, v, c in written)
    assert not list(d.glob("*.swap")) and not list(d.glob("*.deleted")) and not (d / "cleaner-tmp").exists()
    lg.close()


def test_a_crash_while_writing_the_cleaned_segment_leaves_the_originals(tmp_path: Path) -> None:
    rng = random.Random(10)
    cfg = config()
    d = tmp_path / "c-0"
    lg = open_log(d, cfg)
    fill(lg, rng, batches=80, ts=NOW)
    original = all_records(lg)
    lg.close()
    (d / "cleaner-tmp").mkdir()
    (d / "cleaner-tmp" / "00000000000000000000.log").write_bytes(b"partial")
    (d / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    lg = open_log(d, cfg, clean=False)
    assert all_records(lg) == original
    assert not (d / "cleaner-tmp").exists() and not list(d.glob("*.cleaned"))
    lg.close()


def test_a_log_deleted_while_its_group_is_being_written_stops_the_pass_quietly(tmp_path: Path) -> None:
    """The worker's writes fail when the topic is deleted under it: that is no disk failure."""
    from kavka.storage.log_manager import LogManager

    lm = LogManager([tmp_path / "d"], default_config=config(), now_ms=NOW)
    lg = lm.get_or_create_log("gone", 0, topic_id=None)
    fill(lg, random.Random(2), batches=60, ts=NOW)
    steps = lm.clean_logs_steps(NOW, {("gone", 0): lg.log_end_offset})
    build_map = steps.send(None)
    offset_map = build_map()
    clean_group = steps.send(offset_map)
    assert lm.delete_log("gone", 0)  # the loop deletes the topic while the worker writes
    try:
        clean_group()
        raise AssertionError("writing into a deleted partition dir succeeded")
    except OSError as e:
        try:
            steps.throw(e)
        except StopIteration as stop:
            assert stop.value == 0
    assert not lm.offline_dirs
    lm.shutdown()
