"""Vectorised decoding of fetched record batches straight into Arrow arrays (executor side).

`decode_arrow(buf, start, end, topic, partition, schema)` takes the records
bytes of one Fetch response (whole batches, v2 layout in
`kavka.protocol.records`) and returns ``(RecordBatch | None, next_position)``
with the same contract as `kavka.client.fetcher._decode_into`: records with
``start <= offset < end``; control batches, compacted gaps and batches below
``start`` skipped; next_position past the last consumed batch, capped at
``end``.

How: batches are decompressed and concatenated into one byte buffer. The only
per-record Python work is following the chain of record lengths (one varint
per record) to find where each record starts; every field after that --
attributes, timestamp and offset deltas, key and value lengths, header counts
-- is decoded for all records at once with numpy (a varint is decoded at an
array of positions by gathering up to ten bytes), and the key and value
columns are built by gathering their bytes into Arrow buffers (offsets +
data + validity), not by making a Python object per record.

Records with headers, when headers are asked for, are decoded by the
per-record decoder of `kavka.client.fetcher` (the reference this module is
tested against, tests/spark/test_arrow_decode.py) for that fetch only.

Invariants: output is byte-for-byte what the reference decoder yields, turned
into Arrow; a malformed batch raises `CorruptRecordError`, never a numpy
IndexError. Imports only numpy, pyarrow, `kavka.protocol` and `kavka.client`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kavka.client.fetcher import RecordColumns, _decode_into
from kavka.protocol import compression as _compression
from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    CorruptRecordError,
    iter_batches,
)

_PAD = 16  # zero bytes after the buffer so gathers at pos+k never go out of bounds
_U8 = np.uint8
_GATHER_BYTES_PER_RECORD = 256  # below this average field size, gather bytes with numpy


def _varints(arr: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at each of `pos`: (values int64, sizes int64)."""
    b = arr[pos].astype(np.uint64)
    result = b & np.uint64(0x7F)
    size = np.ones(len(pos), dtype=np.int64)
    cont = b >= 0x80
    k = 1
    while cont.any():
        if k >= max_bytes:
            raise CorruptRecordError("varint too long")
        b = arr[pos + k].astype(np.uint64)
        result |= np.where(cont, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        size += cont
        cont &= b >= 0x80
        k += 1
    signed = (result >> np.uint64(1)).astype(np.int64) ^ -(result & np.uint64(1)).astype(np.int64)
    return signed, size


def _record_starts(data: bytes, base: int, count: int, out: list[int]) -> None:
    """Append the absolute start of each of `count` records in `data` (at `base`)."""
    n = len(data)
    p = 0
    append = out.append
    try:
        for _ in range(count):
            append(base + p)
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                b2 = data[p + 1]
                if b2 < 0x80:
                    r = (b & 0x7F) | (b2 << 7)
                    p += 2
                else:
                    r = (b & 0x7F) | ((b2 & 0x7F) << 7)
                    shift, p = 14, p + 2
                    while True:
                        b = data[p]
                        p += 1
                        r |= (b & 0x7F) << shift
                        if b < 0x80:
                            break
                        shift += 7
                        if shift > 28:
                            raise CorruptRecordError("record length varint too long")
                length = (r >> 1) ^ -(r & 1)
            if length < 0 or p + length > n:
                raise CorruptRecordError(f"record of length {length} overruns its batch")
            p += length
    except IndexError as exc:
        raise CorruptRecordError("records of a fetched batch are truncated") from exc


def _gather(mv: memoryview, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, bytes]:
    """Concatenate mv[starts[i]:starts[i]+lens[i]]: (int32 Arrow offsets, data bytes).

    A small share of the buffer is gathered by index; short fields filling
    much of it are picked out with a numpy mask; long ones as one slice per
    record joined in C, cheaper once fields pass a few hundred bytes
    (measured with 100 B and 1 KiB values, docs/benchmarks.md).
    """
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    if int(offsets[-1]) >= 2**31:
        raise CorruptRecordError("a fetch of over 2 GiB of keys or values")
    total = int(offsets[-1])
    if total * 8 <= len(mv):
        # Fields are a small part of the buffer (keys next to large values):
        # gather their bytes by index, a run 0..len-1 per record.
        nz = lens > 0
        idx = np.arange(total, dtype=np.int64)
        idx += np.repeat(starts[nz] - offsets[:-1][nz], lens[nz])
        data = np.frombuffer(mv, dtype=_U8)[idx].tobytes()
    elif total <= _GATHER_BYTES_PER_RECORD * len(lens):
        # Short fields filling much of the buffer: a mask over the buffer, +1 where a field starts and -1
        # where it ends, summed up; fields never overlap, so it is 0 or 1.
        nz = lens > 0
        delta = np.zeros(len(mv) + 1, dtype=np.int8)
        delta[starts[nz]] = 1
        delta[(starts + lens)[nz]] -= 1
        mask = np.cumsum(delta[:-1], dtype=np.int8).view(np.bool_)
        data = np.frombuffer(mv, dtype=_U8)[mask].tobytes()
    else:
        ends = starts + lens
        data = b"".join([mv[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)])
    return offsets.astype(np.int32), data


def _binary(mv: memoryview, starts: np.ndarray, lens: np.ndarray) -> Any:
    """Arrow binary array; a negative length is a null."""
    valid = lens >= 0
    offsets, data = _gather(mv, starts, np.where(valid, lens, 0))
    n = len(lens)
    if valid.all():
        bitmap, nulls = None, 0
    else:
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
        nulls = int(n - valid.sum())
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)],
        null_count=nulls,
    )


def _constant_string(s: str, n: int) -> Any:
    raw = s.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(raw * n)]
    )


def columns_to_arrow(cols: RecordColumns, topic: str, partition: int, schema: Any) -> Any:
    """The reference conversion: per-record lists (`RecordColumns`) to a record batch."""
    n = len(cols)
    arrays = [
        pa.array(cols.keys, pa.binary()),
        pa.array(cols.values, pa.binary()),
        _constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(np.asarray(cols.offsets, dtype=np.int64)),
        pa.array(np.asarray(cols.timestamps, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(np.asarray(cols.timestamp_types, dtype=np.int32)),
    ]
    if cols.headers is not None:
        arrays.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in hdrs] for hdrs in cols.headers],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _reference(
    buf: bytes, start: int, end: int, topic: str, partition: int, schema: Any, headers: bool
) -> tuple[Any, int]:
    cols = RecordColumns(headers=[] if headers else None)
    nxt = _decode_into(cols, buf, start, end)
    return (columns_to_arrow(cols, topic, partition, schema) if len(cols) else None), nxt


def decode_arrow(
    buf: bytes, start: int, end: int, topic: str, partition: int, schema: Any
) -> tuple[Any, int]:
    """Records of `buf` with start <= offset < end as one Arrow batch (None if none)."""
    headers = "headers" in schema.names
    pieces: list[bytes | memoryview] = []
    base = 0
    starts: list[int] = []
    batch_counts: list[int] = []
    base_offsets: list[int] = []
    base_ts: list[int] = []
    lat: list[int] = []  # log-append time, or -1 for CreateTime
    payload_ends: list[int] = []
    position = start
    view = memoryview(buf)
    for pos, header in iter_batches(buf):
        if header.next_offset <= position:
            continue
        if header.base_offset >= end:
            break
        if not header.is_control and header.records_count > 0:
            payload: bytes | memoryview = view[pos + BATCH_HEADER_SIZE : pos + header.size_in_bytes]
            if header.compression:
                payload = _compression.decompress(header.compression, payload)
            before = len(starts)
            _record_starts(payload, base, header.records_count, starts)
            batch_counts.append(len(starts) - before)
            base_offsets.append(header.base_offset)
            base_ts.append(header.base_timestamp)
            lat.append(header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else -1)
            pieces.append(payload)
            base += len(payload)
            payload_ends.append(base)
        position = min(header.next_offset, end)
    n = len(starts)
    if n == 0:
        return None, position

    joined = b"".join([*pieces, bytes(_PAD)])
    arr = np.frombuffer(joined, dtype=_U8)
    mv = memoryview(joined)
    s = np.asarray(starts, dtype=np.int64)
    counts = np.asarray(batch_counts, dtype=np.int64)
    length, sz = _varints(arr, s, 5)
    rec_end = s + sz + length  # within the buffer: _record_starts checked it

    def within(p: np.ndarray) -> np.ndarray:
        # Checked before every read, so no gather goes past rec_end + _PAD.
        if (p > rec_end).any():
            raise CorruptRecordError("record fields run past the record length")
        return p

    p = within(s + sz + 1)  # past the attributes byte
    ts_delta, sz = _varints(arr, p, 10)
    p = within(p + sz)
    off_delta, sz = _varints(arr, p, 5)
    p = within(p + sz)
    offsets = np.repeat(np.asarray(base_offsets, dtype=np.int64), counts) + off_delta
    klen, sz = _varints(arr, p, 5)
    kstart = within(p + sz)
    p = within(kstart + np.maximum(klen, 0))
    vlen, sz = _varints(arr, p, 5)
    vstart = within(p + sz)
    p = within(vstart + np.maximum(vlen, 0))
    nheaders, sz = _varints(arr, p, 5)
    within(p + sz)
    if (klen < -1).any() or (vlen < -1).any() or (nheaders < 0).any():
        raise CorruptRecordError("negative length in a record")
    if headers and (nheaders != 0).any():
        return _reference(buf, start, end, topic, partition, schema, headers)

    keep = (offsets >= start) & (offsets < end)
    lat_rec = np.repeat(np.asarray(lat, dtype=np.int64), counts)
    timestamps = np.where(
        lat_rec >= 0, lat_rec, np.repeat(np.asarray(base_ts, dtype=np.int64), counts) + ts_delta
    )
    if not keep.all():
        offsets, timestamps, lat_rec = offsets[keep], timestamps[keep], lat_rec[keep]
        kstart, klen, vstart, vlen = kstart[keep], klen[keep], vstart[keep], vlen[keep]
        nheaders = nheaders[keep]
    m = len(offsets)
    if m == 0:
        return None, position
    arrays = [
        _binary(mv, kstart, klen),
        _binary(mv, vstart, vlen),
        _constant_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.array(timestamps * 1000, pa.timestamp("us", tz="UTC")),
        pa.array((lat_rec >= 0).astype(np.int32)),
    ]
    if headers:
        # Every kept record has zero headers here.
        htype = schema.field("headers").type
        arrays.append(
            pa.ListArray.from_arrays(
                pa.array(np.zeros(m + 1, dtype=np.int32)),
                pa.array([], htype.value_type),
                type=htype,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema), position


__all__ = ["columns_to_arrow", "decode_arrow"]
