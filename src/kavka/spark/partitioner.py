"""Kafka's default partitioner for a whole Arrow column of keys at once (sink executors).

`key_partitions(keys, num_partitions)` returns, for every row, the partition
`kavka.client.producer.default_partition` picks for its key (murmur2 of the
key bytes, positive, modulo the partition count), or -1 where the key is
null (those keep the producer's sticky partition). murmur2 runs over all keys
together in numpy uint32 arithmetic (wrapping multiplies), one step per
4-byte block of the longest key, instead of a Python loop per record.

Invariant: equal to `default_partition` for every key (tests/spark/
test_partitioner.py checks it on random keys). Imports numpy, pyarrow and
`kavka.spark.arrow_encode` (its buffer-level Arrow -> numpy helpers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kavka.spark.arrow_encode import validity

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def _u32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.uint32)


def key_partitions(keys: Any, num_partitions: int) -> np.ndarray:
    """Partition per row of a binary or string Arrow array; -1 for a null key."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if pa.types.is_string(keys.type):
        keys = keys.cast(pa.binary())
    if not pa.types.is_binary(keys.type):
        raise TypeError(f"keys must be binary or string, not {keys.type}")
    n = len(keys)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    bufs = keys.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[keys.offset : keys.offset + n + 1]
    raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    data = np.concatenate([raw, np.zeros(8, dtype=np.uint8)])
    h = _SEED ^ _u32(lengths)
    blocks = lengths // 4
    with np.errstate(over="ignore"):
        for j in range(int(blocks.max()) if n else 0):
            active = j < blocks
            p = np.where(active, starts + 4 * j, 0)
            k = (_u32(data[p]) | (_u32(data[p + 1]) << np.uint32(8))
                 | (_u32(data[p + 2]) << np.uint32(16)) | (_u32(data[p + 3]) << np.uint32(24)))
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
            h = np.where(active, (h * _M) ^ k, h)
        extra = lengths % 4
        tail = np.where(extra > 0, starts + (lengths & ~3), 0)
        h = np.where(extra == 3, h ^ (_u32(data[tail + 2]) << np.uint32(16)), h)
        h = np.where(extra >= 2, h ^ (_u32(data[tail + 1]) << np.uint32(8)), h)
        h = np.where(extra >= 1, (h ^ _u32(data[tail])) * _M, h)
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    part = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
    valid = validity(keys)
    out[valid] = part[valid]
    return out


__all__ = ["key_partitions"]
