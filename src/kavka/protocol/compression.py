"""Record batch compression codecs, as Kafka clients write and read them.

Owns the mapping from the batch attribute codec id (bits 0-2 of a record batch
v2 ``attributes``) to byte-level compress/decompress. Pure functions, no I/O;
any task or thread may call them.

Codec ids and the stream formats Kafka uses for each (``CompressionType`` in
Kafka's clients):

====  ======  ================================================================
id    name    stream format
====  ======  ================================================================
0     none    the bytes themselves
1     gzip    RFC 1952 gzip member(s)
2     snappy  xerial framing as written by Java's ``SnappyOutputStream``:
              ``b"\\x82SNAPPY\\x00"`` + int32 version(1) + int32 compatible(1),
              then repeated ``int32 length`` + raw snappy block. librdkafka
              writes the same; some older clients write one raw snappy block,
              so decompress accepts raw blocks (and the Google framing format)
              too.
3     lz4     LZ4 *frame* format (magic ``04 22 4D 18``). Java's
              ``KafkaLZ4BlockInputStream`` decodes each block on its own, so we
              write independent blocks and no content checksum.
4     zstd    a standard zstd frame (KIP-110)
====  ======  ================================================================

Any other id raises ``ValueError``; a stream that fails to decode raises
``ValueError`` too (the caller turns it into CORRUPT_MESSAGE).
"""

from __future__ import annotations

import struct

import cramjam

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "codec_name",
    "compress",
    "decompress",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)  # 16
# Java's SnappyOutputStream default block size (snappy-java DEFAULT_BLOCK_SIZE).
_XERIAL_BLOCK_SIZE = 32 * 1024
# Google's snappy framing format stream identifier chunk.
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"

_Bytes = bytes | bytearray | memoryview


def codec_name(codec: int) -> str:
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data: _Bytes) -> bytes:
    """Compress ``data`` as Kafka's Java producer would for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: _Bytes) -> bytes:
    """Decompress a record-batch payload; raises ``ValueError`` on bad input."""
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise ValueError(f"unknown compression codec id {codec}")
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except ValueError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError type
        raise ValueError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc


def _xerial_compress(data: _Bytes) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: _Bytes) -> bytes:
    view = memoryview(data).cast("B")
    if bytes(view[:8]) == _XERIAL_MAGIC and len(view) >= _XERIAL_HEADER_SIZE:
        out = []
        pos = _XERIAL_HEADER_SIZE
        end = len(view)
        while pos < end:
            if pos + 4 > end:
                raise ValueError("snappy: truncated xerial block length")
            (length,) = struct.unpack_from(">i", view, pos)
            pos += 4
            if length < 0 or pos + length > end:
                raise ValueError(f"snappy: xerial block length {length} exceeds the stream")
            out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
            pos += length
        return b"".join(out)
    if bytes(view[:10]) == _SNAPPY_FRAMED_MAGIC:
        return bytes(cramjam.snappy.decompress(view))
    return bytes(cramjam.snappy.decompress_raw(view))
