"""Control records (KIP-98): the end-transaction marker, built and parsed, sans-I/O.

A transaction coordinator ends a transaction by having the leader of every
partition the transaction wrote to append a marker: a record batch v2 whose
attributes set isTransactional and isControl, with the transaction's producer
id and epoch, baseSequence -1, and one record (Kafka's EndTransactionMarker,
ControlRecordType, DefaultRecordBatch.writeEndTransactionalMarker)::

    record key   (ControlRecordType):  version int16 = 0, type int16
                                       (0 ABORT, 1 COMMIT)
    record value (EndTransactionMarker): version int16 = 0,
                                       coordinatorEpoch int32

Kafka reads only the first two fields of either part and ignores any bytes a
later version appends, so this module does the same. Clients may not write
control batches (protocol.records.validate_batches refuses them unless the
caller passes ``allow_control``, which only the broker's own marker append
does). Pure functions over bytes; any task or thread may call them.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from kavka.protocol.records import (
    BatchHeader,
    CorruptRecordError,
    build_batch,
    decode_batch,
)

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "build_end_txn_marker_batch",
    "control_record_type",
    "parse_end_txn_marker",
]

CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """The ``type`` field of a control record's key (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def build_end_txn_marker_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding the marker; the leader's append assigns its offset."""
    key = _KEY.pack(CONTROL_RECORD_KEY_VERSION, control_type)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(
        [(timestamp_ms, key, value)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def control_record_type(key: bytes | None) -> ControlRecordType | None:
    """The type in a control record's key; None for a type this broker does not know
    (Kafka's ControlRecordType.UNKNOWN: such records are skipped, never fatal)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes, need {_KEY.size}")
    version, type_ = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    try:
        return ControlRecordType(type_)
    except ValueError:
        return None


def parse_end_txn_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[BatchHeader, EndTransactionMarker | None]:
    """The header of the control batch at ``pos`` and its end-transaction marker, or None if
    the batch holds another kind of control record. Raises CorruptRecordError if the batch is
    not a control batch or the marker is malformed (Kafka wants exactly one record)."""
    header, records = decode_batch(buf, pos)
    if not header.is_control:
        raise CorruptRecordError(f"batch at offset {header.base_offset} is not a control batch")
    if len(records) != 1:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset} has {len(records)} records, expected 1"
        )
    record = records[0]
    control_type = control_record_type(record.key)
    if control_type is None:
        return header, None
    value = record.value
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"end transaction marker at offset {header.base_offset} is too short")
    version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker version {version} at offset {header.base_offset}")
    return header, EndTransactionMarker(control_type, coordinator_epoch)
