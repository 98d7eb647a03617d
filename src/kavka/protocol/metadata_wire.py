"""Metadata (API 3) responses v0-v12 on the wire, by hand: every client's start and refresh.

A client asks for every topic when it starts and on each metadata refresh, so on a broker with
many partitions the answer is large: 10,000 partitions through kio were 10,000 partition entities
built by `messages.make` (with kio's per-field type checks) and written by kio's generic walker,
94-190 ms from the request to the answer's last byte on the 2-core benchmark VM (`bench.scale`,
Kafka 23-34 ms). Here the handler (broker.handlers.metadata) hands plain tuples and this module
writes the bytes with `struct`: a partition of v7 and later (with leader_epoch and
offline_replicas) is one `pack` of a format cached by its array lengths. 10-18 ms now.

Layout (Kafka's MetadataResponse.json): throttle_time_ms v3+; a broker's rack v1+; cluster_id
v2+; controller_id v1+; a topic's is_internal v1+, topic_id v10+ (a name may be null from v12);
a partition's offline_replicas v5+, leader_epoch v7+; topic_authorized_operations v8+,
cluster_authorized_operations v8-v10; v9 and later are flexible (compact strings and arrays,
tagged fields; kavka writes none). Fields a version lacks are not written, as kio's `make`
dropped them. `tests/unit/test_metadata_wire.py` checks every version byte for byte against kio's
encoder over hypothesis-generated responses.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from kavka.protocol.framing import encode_count, encode_string

LAST = 12
FIRST_FLEXIBLE = 9
OPS_UNSET = -2147483648  # KIP-430 authorized operations not asked for (Integer.MIN_VALUE)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hii")  # a partition's error_code, partition_index, leader_id
_NO_THROTTLE = timedelta(0)
_MS = timedelta(milliseconds=1)

# (node id, host, port, rack)
Broker = tuple[int, str, int, str | None]
# (error code, partition index, leader id, leader epoch, replica nodes, isr nodes, offline replicas)
Partition = tuple[int, int, int, int, Sequence[int], Sequence[int], Sequence[int]]
# (error code, name, topic id, is internal, partitions, topic authorized operations)
Topic = tuple[int, str | None, uuid.UUID, bool, Sequence[Partition], int]


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    """What the Metadata handler answers, for `encode_response`; `throttle_time` as in kio's
    entity (the server's client quotas read and raise it)."""

    brokers: Sequence[Broker]
    cluster_id: str | None
    controller_id: int
    topics: Sequence[Topic]
    cluster_authorized_operations: int = OPS_UNSET
    throttle_time: timedelta = _NO_THROTTLE



def _ints(values: Sequence[int], flexible: bool) -> bytes:
    n = len(values)
    return encode_count(n, flexible) + struct.pack(f">{n}i", *values)


@lru_cache(maxsize=512)
def _partition_struct(flexible: bool, replicas: int, isr: int, offline: int) -> struct.Struct:
    """A v7+ partition in one format: error_code, partition_index, leader_id, leader_epoch, then
    the three arrays, each a count (a one-byte compact count when flexible: callers keep every
    array under 127 elements) and its int32s; a flexible one ends with an empty tagged-field
    count, a pad byte (zero)."""
    c = "B" if flexible else "i"
    return struct.Struct(f">hiii{c}{replicas}i{c}{isr}i{c}{offline}i" + ("x" if flexible else ""))


def encode_response(version: int, resp: MetadataResponse) -> bytes:
    """A MetadataResponse body (v0-v12)."""
    if not 0 <= version <= LAST:
        raise ValueError(f"Metadata v{version} is not hand-encoded")  # a later version's fields are unknown here
    flexible = version >= FIRST_FLEXIBLE
    tags = b"\x00" if flexible else b""
    out = bytearray()
    if version >= 3:
        out += _I32.pack(resp.throttle_time // _MS)
    out += encode_count(len(resp.brokers), flexible)
    for node_id, host, port, rack in resp.brokers:
        out += _I32.pack(node_id)
        out += encode_string(host, flexible)
        out += _I32.pack(port)
        if version >= 1:
            out += encode_string(rack, flexible)
        out += tags
    if version >= 2:
        out += encode_string(resp.cluster_id, flexible)
    if version >= 1:
        out += _I32.pack(resp.controller_id)
    out += encode_count(len(resp.topics), flexible)
    bias = 1 if flexible else 0
    for error, name, topic_id, internal, partitions, topic_ops in resp.topics:
        out += _I16.pack(error)
        out += encode_string(name, flexible)
        if version >= 10:
            out += topic_id.bytes
        if version >= 1:
            out += b"\x01" if internal else b"\x00"
        out += encode_count(len(partitions), flexible)
        if version >= 7:
            shapes: dict[tuple[int, int, int], struct.Struct] = {}
            for p_error, index, leader, epoch, replicas, isr, offline in partitions:
                shape = (len(replicas), len(isr), len(offline))
                st = shapes.get(shape)
                if st is None:
                    if flexible and max(shape) >= 127:  # a count of two varint bytes
                        out += _partition(version, (p_error, index, leader, epoch, replicas, isr, offline))
                        continue
                    st = shapes[shape] = _partition_struct(flexible, *shape)
                out += st.pack(p_error, index, leader, epoch, shape[0] + bias, *replicas, shape[1] + bias, *isr,
                               shape[2] + bias, *offline)
        else:
            for p in partitions:
                out += _partition(version, p)
        if version >= 8:
            out += _I32.pack(topic_ops)
        out += tags
    if 8 <= version <= 10:
        out += _I32.pack(resp.cluster_authorized_operations)
    out += tags
    return bytes(out)


def _partition(version: int, p: Partition) -> bytes:
    """One partition field by field: versions before v7, and arrays of 127 elements or more."""
    flexible = version >= FIRST_FLEXIBLE
    error, index, leader, epoch, replicas, isr, offline = p
    out = _HEAD.pack(error, index, leader)
    if version >= 7:
        out += _I32.pack(epoch)
    out += _ints(replicas, flexible) + _ints(isr, flexible)
    if version >= 5:
        out += _ints(offline, flexible)
    return out + b"\x00" if flexible else out
