"""Message format v0/v1 (magic 0/1 "message sets") <-> record batch v2 conversion.

kavka stores only record batches v2. Old clients speak the message sets of
Kafka before 0.11, which Kafka 3.9 still converts:

- Produce v0-v2 carry a message set; `up_convert` turns it into one batch v2
  (Kafka's LogValidator does the same when the log is at v2): offsets are
  relative from 0, timestamps come from magic 1 messages (magic 0 has none:
  -1), a compressed wrapper's inner messages become the batch's records and
  the batch keeps the wrapper's codec.
- Fetch v0-v3 may only carry magic 0 (v0-v1) or magic 1 (v2-v3);
  `down_convert` rewrites the stored batches as uncompressed messages with
  absolute offsets (Kafka's down-conversion keeps the codec; kavka sends them
  uncompressed -- more bytes on the wire, less CPU; the cost per MB is in
  docs/benchmarks.md). Headers and producer ids are dropped, as in Kafka.

Layout of one message (big-endian): offset i64, size i32, crc u32 (CRC-32
over the rest), magic i8, attributes i8 (low 3 bits: codec; bit 3 in magic 1:
log-append time), timestamp i64 (magic 1 only), key bytes, value bytes
(length -1 = null). A compressed wrapper's value is a compressed message set;
in magic 1 its inner offsets are relative and the wrapper carries the last
one's absolute offset. Pure functions; any thread.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from kavka.protocol.compression import decompress
from kavka.protocol.records import Record, build_batch, decode_batch, iter_batches

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
NO_TIMESTAMP = -1
_MAX_DEPTH = 1  # Kafka never nests compressed wrappers


class MessageFormatError(ValueError):
    """A message set that cannot be parsed (bad size, CRC or magic)."""


def _bytes_field(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise MessageFormatError("message truncated in a key or value length")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise MessageFormatError("message truncated in a key or value")
    return buf[pos : pos + n], pos + n


def iter_messages(buf: bytes, depth: int = 0) -> Iterator[tuple[int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, timestamp, key, value) of every message, compressed wrappers opened.

    Inner offsets of a magic 1 wrapper are returned relative (as sent); a
    trailing partial message (a fetch cut) is ignored, as clients do.
    """
    pos, total = 0, len(buf)
    while pos + 12 <= total:
        offset, size = struct.unpack_from(">qi", buf, pos)
        end = pos + 12 + size
        if size < 14 or end > total:
            if end > total:
                return  # partial trailing message
            raise MessageFormatError(f"message size {size} is too small")
        _o, _s, crc, magic, attrs = _HEAD.unpack_from(buf, pos)
        if magic not in (0, 1):
            raise MessageFormatError(f"magic {magic} in a message set")
        if zlib.crc32(buf[pos + 16 : end]) != crc:
            raise MessageFormatError(f"CRC mismatch in the message at offset {offset}")
        p = pos + 18
        ts = NO_TIMESTAMP
        if magic == 1:
            (ts,) = _I64.unpack_from(buf, p)
            p += 8
        key, p = _bytes_field(buf, p, end)
        value, p = _bytes_field(buf, p, end)
        codec = attrs & 0x07
        if codec:
            if depth >= _MAX_DEPTH or value is None:
                raise MessageFormatError("nested or empty compressed message")
            inner = list(iter_messages(decompress(codec, value), depth + 1))
            if magic == 1 and inner:
                base = offset - inner[-1][0]
                inner = [(base + o, m, t if t != NO_TIMESTAMP else ts, k, v) for o, m, t, k, v in inner]
            yield from inner
        else:
            yield offset, magic, ts, key, value
        pos = end


def wrapper_codec(buf: bytes) -> int:
    """The codec of the first message (the set's compression), 0 if none."""
    if len(buf) < 18:
        return 0
    return _HEAD.unpack_from(buf, 0)[4] & 0x07


def up_convert(buf: bytes) -> bytes:
    """A produced message set as one record batch v2 (relative offsets from 0)."""
    msgs = list(iter_messages(buf))
    if not msgs:
        raise MessageFormatError("empty message set")
    records = [Record(i, ts, k, v) for i, (_o, _m, ts, k, v) in enumerate(msgs)]
    return build_batch(records, base_offset=0, compression=wrapper_codec(buf))


def _message(offset: int, magic: int, ts: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bb", magic, 0))
    if magic == 1:
        body += _I64.pack(ts)
    for part in (key, value):
        if part is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(part)) + part
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


def down_convert(batches: bytes | memoryview, magic: int) -> bytes:
    """Stored v2 batches as an uncompressed message set of `magic` (0 or 1), control records dropped."""
    out = []
    for pos, header in iter_batches(batches):
        if header.is_control:
            continue
        for r in decode_batch(batches, pos)[1]:
            out.append(_message(r.offset, magic, r.timestamp if magic == 1 else NO_TIMESTAMP, r.key, r.value))
    return b"".join(out)
