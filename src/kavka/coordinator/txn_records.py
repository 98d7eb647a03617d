"""Kafka's record formats for `__transaction_state` (TransactionLogKey / TransactionLogValue).

Byte-compatible with Kafka's transaction-coordinator schemas, so Kafka's tools read kavka's
`__transaction_state` and the other way round. Every key and value starts with its int16
schema version (Kafka's MessageUtil.toVersionPrefixedBytes):

    TransactionLogKey   v0: version int16=0, transactional_id string (int16 length, UTF-8)
    TransactionLogValue v0: version int16=0, producer_id int64, producer_epoch int16,
                            transaction_timeout_ms int32, transaction_status int8,
                            transaction_partitions nullable [topic string, partition_ids [int32]]
                              (arrays: int32 count, -1 for null),
                            transaction_last_update_timestamp_ms int64,
                            transaction_start_timestamp_ms int64
                        v1 (flexible): the same fields in the same order, but strings and arrays
                            are compact (unsigned varint length + 1, 0 for null), and each
                            struct (the value and every partitions entry) ends with tagged
                            fields: uvarint count, then (uvarint tag, uvarint size, data) in
                            tag order, written only when not the default:
                              tag 0 previous_producer_id int64 (default -1)
                              tag 1 next_producer_id int64 (default -1)
                              tag 2 client_transaction_version int16 (default 0)

`transaction_status` is TransactionState's id (txn_state.TxnState). Kafka writes a null
partition list for Empty and groups the partitions by topic. A null value is a tombstone: the
transactional id expired (transactional.id.expiration.ms) and is gone. Unknown tagged fields
are skipped on read, as Kafka does. The partition of a transactional id is
`abs(java_hash(transactional_id)) % partitions`, the same rule as for groups.

Pure functions; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kavka.common import TopicPartition
from kavka.coordinator.records import RecordFormatError, partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One TransactionLogValue: the durable part of a transactional id's metadata."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1  # v1+ tagged
    next_producer_id: int = -1  # v1+ tagged
    client_transaction_version: int = 0  # v1+ tagged


def transaction_partition_for(transactional_id: str, partitions: int) -> int:
    """The `__transaction_state` partition that holds this transactional id."""
    return partition_for(transactional_id, partitions)


# ------------------------------------------------------------------ writers


def _uvarint(out: bytearray, n: int) -> None:
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _str(out: bytearray, s: str, flexible: bool) -> None:
    b = s.encode("utf-8")
    if flexible:
        _uvarint(out, len(b) + 1)
    else:
        out += _I16.pack(len(b))
    out += b


def _array_len(out: bytearray, n: int | None, flexible: bool) -> None:
    if flexible:
        _uvarint(out, 0 if n is None else n + 1)
    else:
        out += _I32.pack(-1 if n is None else n)


def key_bytes(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(0))
    _str(out, transactional_id, flexible=False)
    return bytes(out)


def value_bytes(value: TxnLogValue, *, version: int = 0) -> bytes:
    """TransactionLogValue at `version` (0 or 1). v0 cannot carry the tagged fields; they are
    dropped, as Kafka does when transaction.version is below 1."""
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue v{version} is not defined")
    flexible = version >= 1
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.transaction_status)
    if value.transaction_status == 0:  # Empty: Kafka writes null, and Empty has no partitions
        if value.partitions:
            raise ValueError("an Empty transaction has no partitions")
        _array_len(out, None, flexible)
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(value.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        _array_len(out, len(by_topic), flexible)
        for topic, ids in by_topic.items():
            _str(out, topic, flexible)
            _array_len(out, len(ids), flexible)
            for p in ids:
                out += _I32.pack(p)
            if flexible:
                _uvarint(out, 0)  # no tagged fields in PartitionsSchema
    out += _I64.pack(value.last_update_timestamp_ms)
    out += _I64.pack(value.start_timestamp_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append(
                (_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version))
            )
        _uvarint(out, len(tags))
        for tag, data in tags:
            _uvarint(out, tag)
            _uvarint(out, len(data))
            out += data
    return bytes(out)


# ------------------------------------------------------------------ readers


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("truncated __transaction_state record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, st: struct.Struct) -> int:
        (v,) = st.unpack(self.take(st.size))
        return int(v)

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.unpack(_I16)
        if n < 0:
            raise RecordFormatError("null string where Kafka's schema has none")
        return self.take(n).decode("utf-8")

    def array_len(self, flexible: bool) -> int | None:
        n = self.uvarint() - 1 if flexible else self.unpack(_I32)
        return None if n < 0 else n

    def tagged(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise RecordFormatError(f"{len(self.buf) - self.pos} trailing bytes")


def read_key(key: bytes) -> str:
    r = _Reader(key)
    version = r.unpack(_I16)
    if version != 0:
        raise RecordFormatError(f"TransactionLogKey v{version} is not known")
    txn_id = r.string(flexible=False)
    r.done()
    return txn_id


def read_value(value: bytes | None) -> TxnLogValue | None:
    """The value, or None for a tombstone."""
    if value is None:
        return None
    r = _Reader(value)
    version = r.unpack(_I16)
    if version not in (0, 1):
        raise RecordFormatError(f"TransactionLogValue v{version} is not known")
    flexible = version >= 1
    producer_id = r.unpack(_I64)
    producer_epoch = r.unpack(_I16)
    timeout_ms = r.unpack(_I32)
    status = r.unpack(_I8)
    partitions: set[TopicPartition] = set()
    n_topics = r.array_len(flexible)
    for _ in range(n_topics or 0):
        topic = r.string(flexible)
        n_ids = r.array_len(flexible)
        if n_ids is None:
            raise RecordFormatError("null partition_ids")
        for _ in range(n_ids):
            partitions.add(TopicPartition(topic, r.unpack(_I32)))
        if flexible:
            r.tagged()
    last_update = r.unpack(_I64)
    start = r.unpack(_I64)
    previous_pid = next_pid = -1
    client_tv = 0
    if flexible:
        tags = r.tagged()
        if _TAG_PREVIOUS_PRODUCER_ID in tags:
            (previous_pid,) = _I64.unpack(tags[_TAG_PREVIOUS_PRODUCER_ID])
        if _TAG_NEXT_PRODUCER_ID in tags:
            (next_pid,) = _I64.unpack(tags[_TAG_NEXT_PRODUCER_ID])
        if _TAG_CLIENT_TRANSACTION_VERSION in tags:
            (client_tv,) = _I16.unpack(tags[_TAG_CLIENT_TRANSACTION_VERSION])
    r.done()
    return TxnLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        transaction_status=status,
        partitions=frozenset(partitions),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=previous_pid,
        next_producer_id=next_pid,
        client_transaction_version=client_tv,
    )


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TxnLogValue]:
    """The latest value per transactional id over a partition's records, in log order;
    a tombstone removes the id."""
    out: dict[str, TxnLogValue] = {}
    for key, value in records:
        txn_id = read_key(key)
        v = read_value(value)
        if v is None:
            out.pop(txn_id, None)
        else:
            out[txn_id] = v
    return out
