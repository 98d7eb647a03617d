"""Compression codecs: round trips and interop with the reference libraries."""

from __future__ import annotations

import gzip
import os
import struct

import pytest

from kavka.protocol import compression as c

PAYLOADS = [b"", b"x", b"hello kafka " * 1000, os.urandom(70_000)]


@pytest.mark.parametrize("codec", [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "text", "random"])
def test_round_trip(codec: int, payload: bytes) -> None:
    assert c.decompress(codec, c.compress(codec, payload)) == payload


def test_unknown_codec() -> None:
    with pytest.raises(ValueError):
        c.compress(5, b"x")
    with pytest.raises(ValueError):
        c.decompress(7, b"x")
    with pytest.raises(ValueError):
        c.codec_name(9)


def test_garbage_raises_value_error() -> None:
    for codec in (c.GZIP, c.LZ4, c.ZSTD):
        with pytest.raises(ValueError):
            c.decompress(codec, b"\x00not compressed data at all")


def test_gzip_interop_with_stdlib() -> None:
    data = b"abc" * 5000
    assert c.decompress(c.GZIP, gzip.compress(data)) == data
    assert gzip.decompress(c.compress(c.GZIP, data)) == data


def test_snappy_writes_xerial_framing() -> None:
    data = b"0123456789" * 10_000  # > one 32 KiB block
    out = c.compress(c.SNAPPY, data)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)
    snappy = pytest.importorskip("snappy")
    # Walk the xerial blocks with python-snappy's raw decoder.
    pos, parts = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        parts.append(snappy.decompress(out[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert b"".join(parts) == data
    assert len(parts) == 4


def test_snappy_reads_raw_and_framed_and_xerial() -> None:
    snappy = pytest.importorskip("snappy")
    data = b"kavka snappy " * 3000
    assert c.decompress(c.SNAPPY, snappy.compress(data)) == data  # raw block
    framed = snappy.StreamCompressor().add_chunk(data)
    assert c.decompress(c.SNAPPY, framed) == data
    # a hand-built xerial stream with two blocks, as snappy-java writes it
    half = len(data) // 2
    blocks = [snappy.compress(data[:half]), snappy.compress(data[half:])]
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for b in blocks:
        xerial += struct.pack(">i", len(b)) + b
    assert c.decompress(c.SNAPPY, xerial) == data


def test_snappy_truncated_xerial_raises() -> None:
    out = c.compress(c.SNAPPY, b"abc" * 1000)
    with pytest.raises(ValueError):
        c.decompress(c.SNAPPY, out[:-3])


def test_lz4_frame_interop() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = b"lz4 in kafka is the frame format " * 5000
    out = c.compress(c.LZ4, data)
    info = lz4_frame.get_frame_info(out)
    # Java's KafkaLZ4BlockInputStream decodes blocks independently.
    assert info["block_linked"] is False
    assert lz4_frame.decompress(out) == data
    for linked in (True, False):
        produced = lz4_frame.compress(data, block_linked=linked, content_checksum=True)
        assert c.decompress(c.LZ4, produced) == data


def test_zstd_interop() -> None:
    zstandard = pytest.importorskip("zstandard")
    data = b"zstd kip-110 " * 4000
    assert c.decompress(c.ZSTD, zstandard.ZstdCompressor().compress(data)) == data
    assert zstandard.ZstdDecompressor().decompress(c.compress(c.ZSTD, data)) == data


def test_zstd_streamed_frame_without_content_size() -> None:
    # zstd-jni's streaming output (what Java producers write) omits the size.
    zstandard = pytest.importorskip("zstandard")
    data = os.urandom(1000) * 50
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    chunker = cctx.compressobj()
    produced = chunker.compress(data) + chunker.flush()
    assert c.decompress(c.ZSTD, produced) == data
