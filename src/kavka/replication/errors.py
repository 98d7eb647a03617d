"""Exceptions from the layers below -> Kafka error codes, as a table (the data path answers every
partition error with one of these; the handlers and the ReplicaManager share it)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kavka.protocol import records as rb
from kavka.replication.partition import PartitionError
from kavka.storage import errors as se
from kavka.storage import log_validator as lv

_TABLE: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (rb.RecordTooLargeError, ErrorCode.message_too_large),
    # Produce v3+ may carry only magic v2 batches (ProduceRequest.validateRecords).
    (rb.UnsupportedMagicError, ErrorCode.invalid_record),
    (lv.InvalidTimestampError, ErrorCode.invalid_timestamp),
    # Before CorruptRecordError, which it subclasses: a well-formed batch breaking a rule.
    (rb.InvalidRecordError, ErrorCode.invalid_record),
    (rb.CorruptRecordError, ErrorCode.corrupt_message),
    (se.OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (se.OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
    (se.InvalidProducerEpochError, ErrorCode.invalid_producer_epoch),
    (se.InvalidTxnStateError, ErrorCode.invalid_txn_state),
    (se.TransactionCoordinatorFencedError, ErrorCode.transaction_coordinator_fenced),
    (se.RecordBatchTooLargeError, ErrorCode.record_list_too_large),
    (se.KafkaStorageError, ErrorCode.kafka_storage_error),
    (se.LogDirNotFoundError, ErrorCode.log_dir_not_found),
    (OSError, ErrorCode.kafka_storage_error),
)


def error_for(exc: BaseException) -> tuple[ErrorCode, str]:
    if isinstance(exc, PartitionError):
        return exc.error, str(exc)
    for cls, code in _TABLE:
        if isinstance(exc, cls):
            return code, str(exc)
    return ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}"
