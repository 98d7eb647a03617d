"""Bulk encoding of Arrow columns into the records region of a v2 record batch (sink executors).

`encode_records(values, keys=..., headers=..., timestamps=...)` returns a
`kavka.client.producer.RecordsRegion`: the uncompressed records of one batch
(layout in `kavka.protocol.records`: per record a length varint, attributes,
timestamp delta, offset delta, key length + key, value length + value,
header count + headers) with the record count and first/max timestamps. The
producer seals it (`kavka.client.producer.seal_batch`: compression once,
header, CRC) when it assigns the batch's sequence number.

How: no Python work per record. Every varint of every record (lengths,
deltas, header counts) is encoded at once with numpy as a (rows x 10) byte
matrix and a mask of the bytes in use; the mask picks them out row by row,
so each record's run of varints is contiguous. Each record is then five
pieces -- varints before the key, the key, the value length, the value, the
headers -- concatenated element-wise by Arrow's C++ kernel
(`binary_join_element_wise`); the result's data buffer is the records
region. Headers are built the same way per header, then joined per record
(`binary_join` over the list column).

`chunk_bounds(sizes, max_bytes)` splits rows into batches of at most
`max_bytes` of estimated record bytes (at least one record each), as
`batch.size` does for Kafka's producer.

Invariant: the output equals, byte for byte, what `kavka.protocol.records.
build_batch` writes for the same records (tests/spark/test_arrow_encode.py,
hypothesis). Imports numpy, pyarrow and `kavka.client` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kavka.client.producer import RecordsRegion

_SHIFTS = np.arange(10, dtype=np.uint64) * np.uint64(7)


def _binary(arr: Any, name: str) -> pa.Array:
    """`arr` as a plain (int32-offset) binary array; strings become their UTF-8 bytes."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return arr.cast(pa.binary())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    raise TypeError(f"{name}: must be binary or string, not {t}")


# Arrow -> numpy goes through the buffers: pyarrow's to_numpy()/__array__ import
# pandas on first use, seconds of a fresh Spark worker's first task.


def validity(arr: pa.Array) -> np.ndarray:
    """True where `arr` is not null, as a numpy bool array."""
    n = len(arr)
    bitmap = arr.buffers()[0]
    if arr.null_count == 0 or bitmap is None:
        return np.ones(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[arr.offset : arr.offset + n].astype(bool)


def int_values(arr: pa.Array, fill: int) -> np.ndarray:
    """An int32/int64 Arrow array as int64 numpy, `fill` where null."""
    dtype = {pa.int32(): np.int32, pa.int64(): np.int64}.get(arr.type)
    if dtype is None:
        raise TypeError(f"expected int32 or int64, not {arr.type}")
    size = np.dtype(dtype).itemsize
    out = np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=size * arr.offset)
    out = out.astype(np.int64)
    if arr.null_count:
        out[~validity(arr)] = fill
    return out


def _offsets(arr: pa.Array) -> np.ndarray:
    """The n + 1 int32 value offsets of a binary or list array."""
    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)


def _lengths(arr: pa.Array) -> np.ndarray:
    """Byte length (binary) or element count (list) per element, -1 where null."""
    out = np.diff(_offsets(arr)).astype(np.int64)
    if arr.null_count:
        out[~validity(arr)] = -1
    return out


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _width(z: np.ndarray) -> int:
    """Bytes of the longest varint among zigzagged `z` (at least 1)."""
    top = int(z.max()) if len(z) else 0
    return max(1, -(-top.bit_length() // 7))


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each zigzag varint of `values`."""
    z = _zigzag(values)
    sizes = np.ones(len(z), dtype=np.int64)
    for k in range(1, _width(z)):
        sizes += z >= np.uint64(1 << (7 * k))
    return sizes


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints of int64 `values`: (bytes uint8 (n, w), in-use mask (n, w)).

    Only as many columns as the longest varint needs (most are 1-2 bytes)."""
    z = _zigzag(values)
    width = _width(z)
    groups = z[:, None] >> _SHIFTS[:width]  # 7-bit groups, lowest first
    nbytes = 1 + np.count_nonzero(groups[:, 1:], axis=1) if width > 1 else np.ones(len(z), np.int64)
    cols = np.arange(width)
    mask = cols < nbytes[:, None]
    cont = (cols < (nbytes - 1)[:, None]).astype(np.uint64) << np.uint64(7)
    out = ((groups & np.uint64(0x7F)) | cont).astype(np.uint8)
    return out, mask


def _varint_runs(columns: list[np.ndarray]) -> tuple[pa.Array, np.ndarray]:
    """Per row, the varints of each of `columns` back to back: (binary array, byte length per row)."""
    parts = [_varints(c) for c in columns]
    matrix = np.hstack([p[0] for p in parts])
    mask = np.hstack([p[1] for p in parts])
    sizes = mask.sum(axis=1)
    data = matrix[mask]  # row-major: each row's bytes stay together, in column order
    offsets = np.zeros(len(sizes) + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    arr = pa.Array.from_buffers(
        pa.binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return arr, sizes


def _join(pieces: list[pa.Array]) -> pa.Array:
    return pc.binary_join_element_wise(
        *pieces, b"", null_handling="replace", null_replacement=b""
    )


def _headers(headers: Any, n: int) -> tuple[pa.Array, np.ndarray]:
    """Encoded header section per row (count varint + headers): (binary array, lengths)."""
    if headers is None:
        return _varint_runs([np.zeros(n, dtype=np.int64)])
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    counts = np.maximum(_lengths(headers), 0)
    count_bytes, count_sizes = _varint_runs([counts])
    if not counts.any():
        return count_bytes, count_sizes
    flat = pc.list_flatten(headers)  # header structs of non-null lists, in row order
    if flat.null_count:
        raise ValueError("headers: a header is null (each needs a key)")
    hkey, hvalue = (_binary(c, "headers") for c in flat.flatten())
    if hkey.null_count:
        raise ValueError("headers: a header has a null key (Kafka header keys are strings)")
    klen, vlen = _lengths(hkey), _lengths(hvalue)
    before_key, bk_sizes = _varint_runs([klen])
    before_value, bv_sizes = _varint_runs([vlen])
    one = _join([before_key, hkey, before_value, hvalue])
    one_sizes = bk_sizes + klen + bv_sizes + np.maximum(vlen, 0)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    per_row = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), one), b"")
    sizes = count_sizes.copy()
    np.add.at(sizes, np.repeat(np.arange(n), counts), one_sizes)
    return _join([count_bytes, per_row]), sizes


def encode_records(
    values: Any,
    *,
    keys: Any = None,
    headers: Any = None,
    timestamps: np.ndarray | int,
) -> RecordsRegion:
    """The records region of one batch holding every row given (at least one).

    `values`/`keys`: binary or string Arrow arrays (nulls allowed; `keys`
    None means every key is null). `headers`: a list<struct<key: string,
    value: binary>> array or None. `timestamps`: one CreateTime (ms) for
    every record or an int64 array, one per row.
    """
    n = len(values)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    return encode_chunks(values, keys=keys, headers=headers, timestamps=timestamps, bounds=[(0, n)])[0]


def encode_chunks(
    values: Any,
    *,
    keys: Any = None,
    headers: Any = None,
    timestamps: np.ndarray | int,
    bounds: list[tuple[int, int]],
) -> list[RecordsRegion]:
    """One records region per [start, end) row range of `bounds` (contiguous, covering every row).

    Arguments as `encode_records`. Every row is encoded in one pass (offset
    and timestamp deltas relative to its range's first row); each region is
    a view of the one encoded buffer, so many small batches cost one call."""
    vals = _binary(values, "value")
    n = len(vals)
    if not bounds or bounds[0][0] != 0 or bounds[-1][1] != n:
        raise ValueError("bounds must cover every row")
    starts = np.array([b[0] for b in bounds], dtype=np.int64)
    lens = np.array([b[1] - b[0] for b in bounds], dtype=np.int64)
    if (lens <= 0).any() or (starts[1:] != starts[:-1] + lens[:-1]).any():
        raise ValueError("bounds must be contiguous, non-empty row ranges")
    ts = np.broadcast_to(np.asarray(timestamps, dtype=np.int64), (n,))
    vlen = _lengths(vals)
    if keys is None:
        key_arr = None
        klen = np.full(n, -1, dtype=np.int64)
    else:
        key_arr = _binary(keys, "key")
        if len(key_arr) != n:
            raise ValueError("key and value columns differ in length")
        klen = _lengths(key_arr)
    hdr, hdr_sizes = _headers(headers, n)
    first = np.repeat(starts, lens)  # the first row of each row's batch
    ts_delta = ts - ts[first]
    offset_delta = np.arange(n, dtype=np.int64) - first
    zero = np.zeros(n, dtype=np.int64)
    # attributes (a 0 byte), timestamp delta, offset delta, key length
    inner_sizes = 1 + _varint_sizes(ts_delta) + _varint_sizes(offset_delta) + _varint_sizes(klen)
    before_value, bv_sizes = _varint_runs([vlen])
    length = inner_sizes + np.maximum(klen, 0) + bv_sizes + np.maximum(vlen, 0) + hdr_sizes
    before_key, _ = _varint_runs([length, zero, ts_delta, offset_delta, klen])
    pieces = [before_key] + ([key_arr] if key_arr is not None else []) + [before_value, vals, hdr]
    joined = _join(pieces)
    offsets = _offsets(joined)
    data = joined.buffers()[2]
    # Views of Arrow's buffer, not copies: the producer copies each once, into the sealed batch.
    whole = memoryview(data) if data is not None else memoryview(b"")
    max_ts = np.maximum.reduceat(ts, starts) if len(ts) else ts
    return [
        RecordsRegion(
            data=whole[int(offsets[s]) : int(offsets[s + k])],
            count=int(k),
            base_timestamp=int(ts[s]),
            max_timestamp=int(m),
        )
        for s, k, m in zip(starts.tolist(), lens.tolist(), max_ts.tolist(), strict=True)
    ]


def record_sizes(values: Any, keys: Any = None, headers: Any = None) -> np.ndarray:
    """Estimated encoded size of each row: key + value + header bytes + 16 (varints)."""
    size = np.maximum(_lengths(_binary(values, "value")), 0) + 16
    if keys is not None:
        size += np.maximum(_lengths(_binary(keys, "key")), 0)
    if headers is not None:
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        counts = np.maximum(_lengths(headers), 0)
        if counts.any():
            flat = pc.list_flatten(headers)
            hk, hv = (_binary(c, "headers") for c in flat.flatten())
            each = np.maximum(_lengths(hk), 0) + np.maximum(_lengths(hv), 0) + 4
            np.add.at(size, np.repeat(np.arange(len(counts)), counts), each)
    return size


def chunk_bounds(sizes: np.ndarray, max_bytes: int) -> list[tuple[int, int]]:
    """[start, end) row ranges of at most `max_bytes` of `sizes` each (one row at least)."""
    n = len(sizes)
    bounds: list[tuple[int, int]] = []
    cum = np.cumsum(sizes, dtype=np.int64)
    start, before = 0, 0
    while start < n:
        end = int(np.searchsorted(cum, before + max_bytes, side="right"))
        end = max(end, start + 1)
        bounds.append((start, end))
        before = int(cum[end - 1])
        start = end
    return bounds


__all__ = ["chunk_bounds", "encode_chunks", "encode_records", "int_values", "record_sizes", "validity"]
