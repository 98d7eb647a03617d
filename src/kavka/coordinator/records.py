"""Kafka's record formats for `__consumer_offsets`, and which partition holds a group.

Keys and values are the group coordinator's own (non-flexible) schemas, so
Kafka's tools can read kavka's `__consumer_offsets` and the other way round:

    OffsetCommitKey   v1: version int16=1, group string, topic string, partition int32
    OffsetCommitValue v3: version int16=3, offset int64, leader_epoch int32, metadata string,
                          commit_timestamp int64
                      v1 (read only): offset, metadata, commit_timestamp, expire_timestamp int64
                      v4 (read only; what Kafka 4.x writes): v3's fields, flexible (compact
                          string, tagged fields: Kafka 4.4 puts the topic id in one)
    GroupMetadataKey  v2: version int16=2, group string
    GroupMetadataValue v3: version int16=3, protocol_type string, generation int32,
                          protocol nullable string, leader nullable string,
                          current_state_timestamp int64,
                          members [member_id string, group_instance_id nullable string,
                                   client_id string, client_host string, rebalance_timeout int32,
                                   session_timeout int32, subscription bytes, assignment bytes]
                      v4 (read only): v3's fields, flexible (compact strings, arrays and bytes,
                          tagged fields after each member and at the end)

A null value is a tombstone (offset deleted / group deleted). Strings are
int16-length-prefixed UTF-8 (-1 for null), bytes int32-length-prefixed.
The partition of a group is `abs(java_hash(group_id)) % partitions`, Kafka's
`Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`.
Pure functions; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from kavka.coordinator.group import GroupSnapshot, MemberSnapshot, OffsetAndMetadata

OFFSETS_TOPIC = "__consumer_offsets"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value in `__consumer_offsets` that this version cannot read."""


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself.
    return (0 if h == -(2**31) else abs(h)) % partitions


# ------------------------------------------------------------------ writers


def _str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    b = s.encode("utf-8")
    out += _I16.pack(len(b))
    out += b


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(b))
    out += b


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(1))
    _str(out, group_id)
    _str(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def offset_value(v: OffsetAndMetadata) -> bytes:
    out = bytearray(_I16.pack(3))
    out += _I64.pack(v.offset)
    out += _I32.pack(v.leader_epoch)
    _str(out, v.metadata)
    out += _I64.pack(v.commit_timestamp_ms)
    return bytes(out)


def group_key(group_id: str) -> bytes:
    out = bytearray(_I16.pack(2))
    _str(out, group_id)
    return bytes(out)


def group_value(g: GroupSnapshot) -> bytes:
    out = bytearray(_I16.pack(3))
    _str(out, g.protocol_type)
    out += _I32.pack(g.generation_id)
    _str(out, g.protocol_name)
    _str(out, g.leader)
    out += _I64.pack(g.current_state_timestamp_ms)
    out += _I32.pack(len(g.members))
    for m in g.members:
        _str(out, m.member_id)
        _str(out, m.group_instance_id)
        _str(out, m.client_id)
        _str(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# ------------------------------------------------------------------ readers


class _Reader:
    """Reads a record's fields; `flexible` (set once the version is known) switches strings,
    bytes and arrays to their compact forms (unsigned varint length + 1) and `tags` to skipping
    tagged fields (KIP-482), as Kafka's flexible message versions are laid out."""

    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = False

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise RecordFormatError("truncated or overlong varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def _length(self, fixed: struct.Struct) -> int:
        return self.uvarint() - 1 if self.flexible else self._take(fixed)

    def array_length(self) -> int:
        return self._length(_I32)

    def tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # the tag
                self._raw(self.uvarint())

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise RecordFormatError("truncated record")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self._length(_I16)
        if n < 0:
            return None
        return self._raw(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self._length(_I32)
        if n < 0:
            return None
        return self._raw(n)

    def _raw(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise RecordFormatError("truncated record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)


def parse_key(key: bytes) -> tuple[str, str, int] | tuple[str] | None:
    """("offset", group, topic, partition) keys as (group, topic, partition); group keys as (group,).

    None for key versions that carry neither (transaction markers use other topics)."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        if group is None or topic is None:
            raise RecordFormatError("null group or topic in an offset key")
        return group, topic, r.i32()
    if version == 2:
        group = r.string()
        if group is None:
            raise RecordFormatError("null group in a group metadata key")
        return (group,)
    return None


def parse_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value)
    version = r.i16()
    if version in (0, 1):
        offset, metadata, ts = r.i64(), r.string(), r.i64()
        return OffsetAndMetadata(offset, -1, metadata or "", ts)
    if version in (3, 4):
        r.flexible = version >= 4
        offset, epoch, metadata, ts = r.i64(), r.i32(), r.string(), r.i64()
        r.tags()
        return OffsetAndMetadata(offset, epoch, metadata or "", ts)
    raise RecordFormatError(f"offset commit value version {version} is not supported")


def parse_group_value(value: bytes) -> GroupSnapshot:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"group metadata value version {version} is not supported")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        subscription, assignment = r.bytes_() or b"", r.bytes_() or b""
        r.tags()
        members.append(
            MemberSnapshot(
                member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment
            )
        )
    r.tags()
    return GroupSnapshot(protocol_type, generation, protocol, leader, ts, tuple(members))


def consumer_subscription_topics(protocol_type: str, metadata: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolSubscription (version int16, topics [string], ...); None if not one."""
    if protocol_type != "consumer":
        return None
    try:
        r = _Reader(metadata)
        r.i16()
        n = r.i32()
        if n < 0 or n > len(metadata):
            return None
        return {t for t in (r.string() for _ in range(n)) if t is not None}
    except (RecordFormatError, UnicodeDecodeError):
        return None


def consumer_assignment_partitions(metadata: bytes) -> list[tuple[str, int]] | None:
    """Partitions in a ConsumerProtocolAssignment (version int16, [topic string, [partition int32]], ...)."""
    try:
        r = _Reader(metadata)
        r.i16()
        out = []
        n = r.i32()
        if n < 0 or n > len(metadata):
            return None
        for _ in range(n):
            topic = r.string() or ""
            k = r.i32()
            if k < 0 or k > len(metadata):
                return None
            out.extend((topic, r.i32()) for _ in range(k))
        return sorted(out)
    except (RecordFormatError, UnicodeDecodeError):
        return None


def partition_owners(protocol_type: str, members: Iterable[Any]) -> dict[tuple[str, int], Any]:
    """Which member of a described group (members with an `assignment`: DescribeGroups' bytes)
    owns each partition; empty unless the group is a consumer group (other protocols' assignments
    are opaque)."""
    owner: dict[tuple[str, int], Any] = {}
    if protocol_type != "consumer":
        return owner
    for m in members:
        for tp in consumer_assignment_partitions(m.assignment) or ():
            owner[tp] = m
    return owner


def consumer_assignment_bytes(partitions: Iterable[tuple[str, int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 (so classic tools can read a KIP-848 member's assignment)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(by_topic))
    for t, ps in by_topic.items():
        _str(out, t)
        out += _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(-1)  # no user data
    return bytes(out)
