"""The log cleaner's memory does not grow with the segment: a 256 MiB segment is cleaned
within a bound derived from log.cleaner.dedupe.buffer.size and the io buffers.

Measured in-process with tracemalloc around the pass (every Python allocation: the offset
map's bytearray, read chunks, decoded records, rebuilt batches, the write buffer).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from kavka.protocol.records import build_batch, iter_batches
from kavka.storage.cleaner import CleanerConfig, maybe_clean
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
MIB = 1 << 20
VALUE = 64 * 1024  # one 64 KiB record a batch
KEYS = 512


def test_cleaning_a_256_mib_segment_stays_under_the_dedupe_plus_io_bound(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=512 * MIB, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    lg = Log.open(tmp_path / "big-0", cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=NOW)
    value = b"v" * VALUE
    batch_size = 0
    n = (256 * MIB) // VALUE
    for i in range(n):
        batch = build_batch([(NOW, f"key-{i % KEYS:04d}".encode(), value)])
        batch_size = max(batch_size, len(batch))
        lg.append_as_leader(batch, leader_epoch=0, now_ms=NOW)
    lg.roll(NOW)
    lg.append_as_leader(build_batch([(NOW, b"tail", b"x")]), leader_epoch=0, now_ms=NOW)
    [segment] = lg.segments[:-1]
    assert segment.size >= 256 * MIB

    cleaner = CleanerConfig(dedupe_buffer_size=1 * MIB, io_buffer_size=512 * 1024)
    # The map, one read chunk and one write buffer (io.buffer.size in all), and a batch being
    # decoded and rebuilt (its bytes a few times over: read, records, rebuilt), plus slack for
    # the interpreter's own objects.
    bound = cleaner.dedupe_buffer_size + cleaner.io_buffer_size + 4 * batch_size + 2 * MIB
    tracemalloc.start()
    try:
        result = maybe_clean(lg, first_dirty_offset=0, high_watermark=lg.log_end_offset, now_ms=NOW, cleaner=cleaner)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result is not None and result.records_removed == n - KEYS
    assert peak < bound, f"peak {peak / MIB:.1f} MiB >= bound {bound / MIB:.1f} MiB"
    assert peak < segment.size // 16  # nothing close to the segment itself
    # Correct, too: the last record of each key, at its offset.
    [cleaned] = lg.segments[:-1]
    offsets = [h.base_offset for _, h in iter_batches(cleaned.log_path.read_bytes())]
    assert offsets == list(range(n - KEYS, n))
    lg.close()
