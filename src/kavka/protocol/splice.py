"""Responses whose record bytes bypass the encoder: a Fetch body as a list of buffers.

kio encodes an entity into one BytesIO, so a Fetch response would copy every
record byte it carries (and grow that buffer as it goes): on a 1 KiB-record
consume that was about half of the broker's CPU. Instead the Fetch handler
puts a short placeholder where each partition's records go and hands the
record chunks over separately; `encode_spliced` encodes the (now small)
entity, finds each placeholder with its length prefix, and returns the
buffers to write in order -- encoded bytes, the real length prefix, the
records as they came from the segment file, encoded bytes, ... The socket
gets them with one writev (transport.writelines).

Placeholders start with a NUL byte, which no topic name (``[a-zA-Z0-9._-]``)
or other string field of a Fetch response can contain, and carry their index,
so a match is unambiguous.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from kavka.protocol.framing import encode_entity, uvarint

_MARK = b"\x00kavka-records\x00"


def placeholder(index: int) -> bytes:
    return _MARK + struct.pack(">I", index)


def _length_prefix(n: int, *, flexible: bool) -> bytes:
    """The prefix of a (nullable) bytes field: compact uvarint(n + 1), or int32 n."""
    return uvarint(n + 1) if flexible else struct.pack(">i", n)


@dataclass(slots=True)
class SplicedResponse:
    """A response entity holding placeholders, and the record chunks they stand for -- or, when
    `buffers` is set, the response already encoded (protocol.fetch_wire). `topic_bytes`: the
    record bytes it carries per topic (for BytesOutPerSec)."""

    entity: Any
    flexible: bool
    chunks: list[bytes | memoryview] = field(default_factory=list)
    buffers: list[bytes | memoryview] | None = None
    topic_bytes: dict[str, int] = field(default_factory=dict)

    def add(self, chunk: bytes | memoryview) -> bytes:
        """Register a record chunk; returns the placeholder to put in the entity."""
        self.chunks.append(chunk)
        return placeholder(len(self.chunks) - 1)


def encode_spliced(resp: Any) -> list[bytes | memoryview] | bytes:
    """Encode a SplicedResponse as buffers to write in order (or a plain entity as bytes)."""
    if not isinstance(resp, SplicedResponse):
        return encode_entity(resp)
    if resp.buffers is not None:
        return resp.buffers
    body = encode_entity(resp.entity)
    if not resp.chunks:
        return body
    out: list[bytes | memoryview] = []
    view = memoryview(body)
    pos = 0
    for i, chunk in enumerate(resp.chunks):
        ph = placeholder(i)
        needle = _length_prefix(len(ph), flexible=resp.flexible) + ph
        at = body.find(needle, pos)
        if at < 0:
            raise AssertionError(f"record placeholder {i} not found in the encoded response")
        out.append(view[pos:at])
        out.append(_length_prefix(len(chunk), flexible=resp.flexible))
        out.append(chunk)
        pos = at + len(needle)
    out.append(view[pos:])
    return out
