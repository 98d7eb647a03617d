"""Produce v3-v12 on the wire, by hand: the produce hot path without kio entities.

Every produced batch arrives in a Produce request and is answered by a Produce response. Through
kio the request is walked twice (protocol.guard, then kio's reader, which copies each partition's
records into new bytes) and the response is built entity by entity (`messages.make`) and written by
a generic walker. These functions read and write the same bytes with `struct`, for every version
kavka appends with (v3-v12: record batch v2; v0-v2 carry message format v0/v1 and go through kio
and protocol.legacy). Layout (Kafka's ProduceRequest.json / ProduceResponse.json): v9 and later
are flexible (compact strings, arrays and records, tagged fields); kavka writes no tagged field
in a response (KIP-951's current_leader and node_endpoints are left at their defaults, as its kio
responses left them).

The decoder refuses exactly what protocol.guard refuses on kio's path, with ProtocolError: a null
where the field is not nullable (arrays, topic names; transactional_id and records may be null),
a negative length other than -1, a length or element count past the end of the frame, a compact
string over 0x7fff bytes, a string that is not UTF-8. A partition's `records` is a memoryview into
the frame, not a copy: the append copies it at most once (protocol.framing.FrameDecoder).
`tests/unit/test_produce_wire.py` checks both directions against kio, byte for byte and field for
field, over hypothesis-generated messages and garbled bodies.

The decoded and encoded objects carry the attribute names of kio's entities, so handlers and the
legacy encoder read them the same way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from kavka.protocol.framing import ProtocolError, encode_count, encode_string, read_uvarint

FIRST = 3
FIRST_FLEXIBLE = 9
LAST = 12

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_HEAD = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_I64 = struct.Struct(">q")
_NO_THROTTLE = timedelta(0)
_MS = timedelta(milliseconds=1)


# ---------------------------------------------------------------- request


class PartitionProduceData:
    __slots__ = ("index", "records")

    index: int
    records: memoryview | None


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    name: str
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequest:
    __slots__ = ("__version__", "transactional_id", "acks", "timeout", "topic_data")

    transactional_id: str | None
    acks: int
    timeout: timedelta
    topic_data: tuple[TopicProduceData, ...]


def _null(field: str, version: int) -> ProtocolError:
    return ProtocolError(f"null in non-nullable field {field} (v{version})")


def decode_request(buf: memoryview | bytes, pos: int, version: int) -> ProduceRequest:
    """A ProduceRequest body (v3-v12); records are memoryviews into `buf`."""
    if not FIRST <= version <= LAST:
        raise ValueError(f"Produce v{version} is not hand-decoded")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    flexible = version >= FIRST_FLEXIBLE

    def need(p: int, n: int) -> int:
        if n < 0 or p + n > end:
            raise ProtocolError(f"truncated Produce v{version}: {n} bytes needed at {p}, {end - p} left")
        return p + n

    def length(p: int, field: str, nullable: bool, width: struct.Struct = _I16) -> tuple[int, int]:
        """A (nullable) length: (-1 for null, position after it)."""
        if flexible:
            n, p = read_uvarint(view, p, end)
            n -= 1
        else:
            q = need(p, width.size)
            (n,) = width.unpack_from(view, p)
            p = q
        if n < 0:
            if n != -1:
                raise ProtocolError(f"negative length {n} in field {field} (v{version})")
            if not nullable:
                raise _null(field, version)
        return n, p

    def string(p: int, field: str, nullable: bool) -> tuple[str | None, int]:
        n, p = length(p, field, nullable)
        if n < 0:
            return None, p
        if n > 0x7FFF:  # an int16 length on the wire, compact or not
            raise ProtocolError(f"string of {n} bytes in field {field} (v{version})")
        q = need(p, n)
        try:
            return str(view[p:q], "utf-8"), q
        except UnicodeDecodeError as e:
            raise ProtocolError(f"field {field} (v{version}) is not UTF-8: {e}") from e

    def count(p: int, field: str) -> tuple[int, int]:
        n, p = length(p, field, False, _I32)
        need(p, n)  # every element takes a byte at least
        return n, p

    def tagged(p: int) -> int:
        if not flexible:
            return p
        if p < end and view[p] == 0:  # none: the usual case
            return p + 1
        n, p = read_uvarint(view, p, end)
        need(p, n)
        for _ in range(n):
            _tag, p = read_uvarint(view, p, end)
            size, p = read_uvarint(view, p, end)
            p = need(p, size)
        return p

    req = ProduceRequest()
    req.__version__ = version
    try:
        req.transactional_id, p = string(pos, "ProduceRequest.transactional_id", True)
        q = need(p, 6)
        req.acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, p)
        req.timeout = timedelta(milliseconds=timeout_ms)
        topics_n, p = count(q, "ProduceRequest.topic_data")
        topics = []
        for _ in range(topics_n):
            t = TopicProduceData()
            t.name, p = string(p, "TopicProduceData.name", False)
            parts_n, p = count(p, "TopicProduceData.partition_data")
            parts = []
            for _ in range(parts_n):
                pd = PartitionProduceData()
                q = need(p, 4)
                (pd.index,) = _I32.unpack_from(view, p)
                n, p = length(q, "PartitionProduceData.records", True, _I32)
                if n < 0:
                    pd.records = None
                else:
                    q = need(p, n)
                    pd.records = view[p:q]
                    p = q
                p = tagged(p)
                parts.append(pd)
            t.partition_data = tuple(parts)
            p = tagged(p)
            topics.append(t)
        req.topic_data = tuple(topics)
        tagged(p)
    except struct.error as e:
        raise ProtocolError(f"malformed Produce v{version}: {e}") from e
    return req


# ---------------------------------------------------------------- response


class PartitionProduceResponse(NamedTuple):
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch index, message): v8+
    error_message: str | None = None  # v8+


class TopicProduceResponse(NamedTuple):
    name: str
    partition_responses: tuple[PartitionProduceResponse, ...]


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """What the Produce handler answers, for `encode_response` (or protocol.legacy's encoder)."""

    responses: tuple[TopicProduceResponse, ...]
    throttle_time: timedelta = _NO_THROTTLE


def all_failed(req: ProduceRequest | Any, error: int) -> ProduceResponse:
    """Every partition of `req` (hand-decoded, or a kio entity) answered `error`, nothing appended."""
    return ProduceResponse(tuple(
        TopicProduceResponse(t.name, tuple(PartitionProduceResponse(pd.index, error) for pd in t.partition_data))
        for t in req.topic_data
    ))



def encode_response(version: int, resp: ProduceResponse) -> bytes:
    """A ProduceResponse body (v3-v12)."""
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray(encode_count(len(resp.responses), flexible))
    for name, parts in resp.responses:
        out += encode_string(name, flexible)
        out += encode_count(len(parts), flexible)
        for index, error, base_offset, append_time, start_offset, record_errors, message in parts:
            out += _PART_HEAD.pack(index, error, base_offset, append_time)
            if version >= 5:
                out += _I64.pack(start_offset)
            if version >= 8:
                out += encode_count(len(record_errors), flexible)
                for batch_index, batch_message in record_errors:
                    out += _I32.pack(batch_index)
                    out += encode_string(batch_message, flexible)
                    if flexible:
                        out += b"\x00"
                out += encode_string(message, flexible)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(resp.throttle_time // _MS)
    if flexible:
        out += b"\x00"
    return bytes(out)
