"""Kafka request/response framing, sans-I/O.

Wire format (https://kafka.apache.org/protocol#protocol_common):

    Request  => Size:int32 RequestHeader Body
    Response => Size:int32 ResponseHeader Body

Request header v1 (non-flexible APIs): api_key int16, api_version int16,
correlation_id int32, client_id nullable_string (int16 length).
Request header v2 (flexible APIs): the same, plus tagged fields. client_id keeps
its non-compact encoding even in v2 (KIP-482).
Response header v0: correlation_id int32. v1 (flexible APIs): plus tagged
fields -- except ApiVersions, whose response header is always v0 so that a
client can parse it before it knows which versions the broker speaks.

`FrameDecoder` is fed bytes and yields whole frames; it checks the declared
size against a limit *before* buffering the body, so an oversized frame is
refused without allocating it (Kafka's socket.request.max.bytes).
Called only from the connection task that owns it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")
_PREFIX_V0 = struct.Struct(">ii")  # size, correlation_id
_PREFIX_V1 = struct.Struct(">iib")  # size, correlation_id, empty tagged fields
API_VERSIONS_KEY = 18


class ProtocolError(Exception):
    """The peer sent bytes that break the protocol; its connection is closed."""


class FrameTooLargeError(ProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Splits a byte stream into Kafka frames (without the 4-byte size prefix), copying each byte
    at most once: a frame that arrived whole inside one chunk is a read-only view of that chunk
    (no copy; the chunk lives as long as a view of it does), and a frame that spans chunks is
    joined once, when its last byte arrives, into a bytearray of its own -- a writable view, which
    the produce path may rewrite in place (offsets, leader epoch) and append without copying it
    again. Chunks fed are kept, not copied: they must not change afterwards (bytes never do)."""

    __slots__ = ("_head", "_parts", "_have", "_size", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._head = b""  # the first 1-3 bytes of a size prefix cut by a chunk boundary
        self._parts: list[memoryview] = []  # the received part of a frame spanning chunks
        self._have = 0
        self._size = -1  # that frame's declared size; -1 when none is in progress
        self._max_size = max_size

    def feed(self, data: bytes) -> list[memoryview]:
        if not isinstance(data, bytes):
            data = bytes(data)
        frames: list[memoryview] = []
        view = memoryview(data)
        n = len(data)
        pos = 0
        if self._head:
            need = 4 - len(self._head)
            if n < need:
                self._head += data
                return frames
            self._begin(_I32.unpack(self._head + data[:need])[0])
            self._head = b""
            pos = need
        if self._size >= 0:
            take = min(self._size - self._have, n - pos)
            if take:
                self._parts.append(view[pos : pos + take])
                self._have += take
                pos += take
            if self._have < self._size:
                return frames
            frames.append(memoryview(bytearray().join(self._parts)))
            self._parts = []
            self._size = -1
        while n - pos >= 4:
            (size,) = _I32.unpack_from(data, pos)
            pos += 4
            if n - pos >= size:
                if size < 0 or size > self._max_size:
                    raise FrameTooLargeError(size, self._max_size)
                frames.append(view[pos : pos + size])
                pos += size
                continue
            self._begin(size)
            self._parts.append(view[pos:])
            self._have = n - pos
            return frames
        if pos < n:
            self._head = data[pos:]
        return frames

    def _begin(self, size: int) -> None:
        """A frame of `size` bytes starts: refused from its prefix alone, before any is buffered."""
        if size < 0 or size > self._max_size:
            raise FrameTooLargeError(size, self._max_size)
        self._size = size
        self._have = 0

    def set_max_size(self, max_size: int) -> None:
        """Change the limit for frames not yet received (a SASL connection's limit rises once authenticated)."""
        self._max_size = max_size

    def pending_frame_size(self) -> int | None:
        """Declared size of the frame being received, if its prefix has arrived."""
        return self._size if self._size >= 0 else None


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_size: int  # bytes of header inside the frame (body starts here)


def peek_request_header(frame: memoryview | bytes) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable for any API, known or not."""
    if len(frame) < _HEADER_FIXED.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEADER_FIXED.unpack_from(frame, 0)


def read_request_header(frame: memoryview | bytes, *, flexible: bool) -> RequestHeaderInfo:
    """Parse header v1 (or v2 when `flexible`), returning where the body starts."""
    api_key, api_version, correlation_id = peek_request_header(frame)
    pos = _HEADER_FIXED.size
    if len(frame) < pos + 2:
        raise ProtocolError("request header truncated in client_id")
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2
    client_id: str | None = None
    if n >= 0:
        if len(frame) < pos + n:
            raise ProtocolError("request header truncated in client_id")
        client_id = bytes(frame[pos : pos + n]).decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise ProtocolError(f"invalid client_id length {n}")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeaderInfo(api_key, api_version, correlation_id, client_id, pos)


def read_uvarint(buf: memoryview | bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """An unsigned varint at `pos`, read no further than `end` (the buffer's end by default):
    (value, position after it); ProtocolError when truncated or longer than 5 bytes."""
    if end is None:
        end = len(buf)
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint too long")


def uvarint(n: int) -> bytes:
    """An unsigned varint (compact lengths, tag counts)."""
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_UVARINTS = [bytes([i]) for i in range(0x80)]


def encode_string(s: str | None, flexible: bool) -> bytes:
    """A (nullable) string field as the hand codecs write it: compact (uvarint length + 1) in
    flexible versions, int16 length before them; null is length 0 / -1."""
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else _I16.pack(len(b))) + b


def encode_count(n: int, flexible: bool) -> bytes:
    """An array's element count: compact (uvarint n + 1) in flexible versions, int32 before them."""
    return uvarint(n + 1) if flexible else _I32.pack(n)


def skip_tagged_fields(buf: memoryview | bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("truncated tagged field")
    return pos


def decode_body(schema: type, frame: memoryview | bytes, pos: int) -> Any:
    """Decode a kio entity from the frame; any failure is a ProtocolError.

    The body is structure-checked first (protocol.guard): kio's native decoder
    would abort the process on an absurd array length.
    """
    from kavka.protocol.guard import check_body

    check_body(schema, frame, pos)
    if isinstance(frame, memoryview) and not frame.readonly:
        # A frame joined from several reads is a bytearray (FrameDecoder); kio's native reader
        # refuses a writable buffer, so it gets a read-only view of the same bytes.
        frame = frame.toreadonly()
    try:
        entity, _size = entity_reader(schema)(frame, pos)
    except ProtocolError:
        raise
    except Exception as e:  # kio raises assorted errors on malformed input
        raise ProtocolError(f"malformed {schema.__name__}: {e}") from e
    return entity


def encode_entity(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def response_prefix(correlation_id: int, body_size: int, *, flexible_header: bool) -> bytes:
    """Size prefix + response header (v1 when flexible_header, else v0): what precedes a body."""
    if flexible_header:
        return _PREFIX_V1.pack(4 + 1 + body_size, correlation_id, 0)
    return _PREFIX_V0.pack(4 + body_size, correlation_id)


def encode_response(correlation_id: int, body: bytes, *, flexible_header: bool) -> bytes:
    """Size prefix + response header (v1 when flexible_header, else v0) + body."""
    return response_prefix(correlation_id, len(body), flexible_header=flexible_header) + body


def encode_request(
    *,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: bytes,
    flexible: bool,
) -> bytes:
    """Size prefix + request header (v2 when flexible, else v1) + body."""
    parts = [_HEADER_FIXED.pack(api_key, api_version, correlation_id)]
    if client_id is None:
        parts.append(b"\xff\xff")
    else:
        cid = client_id.encode()
        parts.append(struct.pack(">h", len(cid)) + cid)
    if flexible:
        parts.append(b"\x00")
    parts.append(body)
    payload = b"".join(parts)
    return _I32.pack(len(payload)) + payload


def read_response(
    frame: memoryview | bytes, schema: type, *, flexible_header: bool
) -> tuple[int, Any]:
    """Client side: correlation id and decoded body of a response frame."""
    (correlation_id,) = _I32.unpack_from(frame, 0)
    pos = 4
    if flexible_header:
        pos = skip_tagged_fields(frame, pos)
    return correlation_id, decode_body(schema, frame, pos)
