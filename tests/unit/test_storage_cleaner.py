"""Log compaction on a real Log: last value per key at its original offset, tombstones, codecs, crashes.

The expected result is computed independently from what was appended (a
dict of key -> last (offset, value)), never from the cleaner's own code.
"""

from __future__ import annotations

import random
from pathlib import Path

from kavka.protocol import compression
from kavka.protocol.records import build_batch, decode_batch, iter_batches
from kavka.storage.cleaner import maybe_clean
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig

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
    # A day later (delete.retention.ms), the tombstones go too on the next pass.
    again = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW + DAY + 1)
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


def test_crash_mid_swap_leaves_a_readable_log(tmp_path: Path) -> None:
    rng = random.Random(9)
    cfg = config()
    d = tmp_path / "c-0"
    lg = open_log(d, cfg)
    written = fill(lg, rng, batches=80, ts=NOW)
    original = all_records(lg)
    assert [(o, k, v) for o, k, v, _ in original] == [(o, k, v) for o, k, v, _ in written]
    seg = lg.segments[0]
    lg.close()
    base = seg.log_path
    # A crash after writing .cleaned and renaming it to .swap, with the old indexes already gone.
    (base.with_name(base.name + ".cleaned")).write_bytes(b"partial")
    (base.with_name(base.name + ".swap")).write_bytes(base.read_bytes()[:100])
    for suffix in (".index", ".timeindex"):
        base.with_name(base.name[: -len(".log")] + suffix).unlink()
    lg = open_log(d, cfg, clean=False)
    assert all_records(lg) == original
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
    lg.close()
