"""Storage exceptions, each named after the Kafka exception it mirrors.

The broker maps them to protocol error codes; storage never imports kio.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base class for storage failures."""


class KafkaStorageError(StorageError):
    """An I/O failure on a log dir (Kafka's KafkaStorageException, KIP-112)."""


class LogDirNotFoundError(StorageError):
    """A path that is not one of this broker's log dirs: LOG_DIR_NOT_FOUND (57)."""


class OffsetOutOfRangeError(StorageError):
    """Fetch/ListOffsets/DeleteRecords outside [log_start_offset, log_end_offset]."""

    def __init__(self, message: str, *, log_start_offset: int = -1, log_end_offset: int = -1):
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLargeError(StorageError):
    """One append is larger than segment.bytes: RECORD_LIST_TOO_LARGE (18)."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""


class CorruptIndexError(StorageError):
    """An index file that fails its sanity check (Kafka's CorruptIndexException)."""


class InvalidOffsetError(StorageError):
    """An index append out of order (Kafka's InvalidOffsetException)."""


class CorruptCheckpointError(StorageError, ValueError):
    """A checkpoint or metadata file that cannot be parsed; names the file."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"corrupt checkpoint file {path}: {reason}")
        self.path = path
        self.reason = reason


class InconsistentTopicIdError(StorageError):
    """partition.metadata names a different topic id than the caller expects."""


class LogDirLockedError(StorageError):
    """Another process holds the log dir's .lock file."""


class OutOfOrderSequenceError(StorageError):
    """An idempotent batch whose sequence does not follow the last one: OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""


class InvalidProducerEpochError(StorageError):
    """A batch from an older producer epoch (a fenced producer): INVALID_PRODUCER_EPOCH (47)."""


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer with a transaction open: INVALID_TXN_STATE (48)."""


class TransactionCoordinatorFencedError(StorageError):
    """A marker from an older coordinator epoch than the last one seen: TRANSACTION_COORDINATOR_FENCED (52)."""
