"""The transaction coordinator's deterministic core (KIP-98, KIP-360, KIP-890 parts 1 and 2).

Theory of operation. One `TransactionCoordinator` holds the metadata of every transactional
id whose `__transaction_state` partition this node leads (`load` when it becomes leader,
`unload` when it stops). It does no I/O and never reads the clock: every call takes `now_ms`,
producer ids come from an injected `allocate_producer_id`, and what must happen is put in an
outbox that `poll(now_ms)` returns:

    AppendTxnRecord  a key/value (value None: tombstone) to append to a __transaction_state
                     partition; the caller answers `on_append(append_id, error, now_ms)`
                     once the append is committed (error NONE) or has failed
    WriteMarkers     a WriteTxnMarkers to send (commit or abort, with the coordinator epoch)
                     to the leaders of `partitions`; the caller answers
                     `on_markers(markers_id, error, now_ms)`; a failed write is resent on the
                     next poll, as Kafka's marker channel retries until it succeeds
    TxnReply         the answer to a request, by the caller's `request_id`

A state change is never applied before its record is committed: it is held as the id's
pending transition (Kafka's pendingState), and any request meanwhile gets
CONCURRENT_TRANSACTIONS. EndTxn is answered once PrepareCommit/PrepareAbort is committed;
the markers and the CompleteCommit/CompleteAbort record follow. `poll` also aborts ONGOING
transactions older than their timeout (bumping the epoch, so the producer is fenced) and
writes tombstones for ids idle longer than transactional.id.expiration.ms.

Transactions v2 (KIP-890 part 2: EndTxn v5, `tv2=True`): every EndTxn bumps the producer epoch.
The Prepare record carries the bumped epoch (the markers are written with it, so a late batch of
the transaction that just ended is fenced on every partition), EndTxn answers with the producer
id and epoch the client uses for its next transaction, and when the epoch is exhausted the
Prepare record names the next producer id, which the Complete record switches to at epoch 0.
A v2 client may abort with no partition added (Empty/Complete* -> PrepareAbort), and retries
are told apart by the epoch (the retried EndTxn carries the epoch before the bump).

Errors are Kafka's (kio ErrorCode). PRODUCER_FENCED is returned where Kafka's coordinator
does; a handler for an old request version maps it to INVALID_PRODUCER_EPOCH.

Single-threaded: called from the event-loop thread only.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from kavka.common import TopicPartition
from kavka.coordinator.records import OFFSETS_TOPIC, partition_for
from kavka.coordinator.txn_records import (
    TRANSACTION_STATE_TOPIC,
    TxnLogValue,
    key_bytes,
    replay,
    value_bytes,
)
from kavka.coordinator.txn_state import EXPIRATION_ALLOWED, TxnState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


# Kafka's TransactionStateManager.appendTransactionToLog: what a client is told when the
# __transaction_state append fails (others pass through).
APPEND_ERROR_TO_CLIENT: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's isEpochExhausted: one epoch is kept in reserve for fencing."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """Kafka's transaction coordinator configs (names as Kafka's)."""

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_state_log_num_partitions: int = 50
    offsets_topic_num_partitions: int = 50
    log_value_version: int = 0  # 1 once transaction.version >= 1


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """A transactional id's metadata (Kafka's TransactionMetadata, without the pending part)."""

    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int  # in memory only: not in TransactionLogValue
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID  # transactions v2: the id to rotate to on Complete
    client_transaction_version: int = 0

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            partitions=self.partitions,
            last_update_timestamp_ms=self.last_update_ms,
            start_timestamp_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(
            transactional_id=transactional_id,
            producer_id=v.producer_id,
            previous_producer_id=v.previous_producer_id,
            producer_epoch=v.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=v.transaction_timeout_ms,
            state=TxnState(v.transaction_status),
            partitions=v.partitions,
            start_ms=v.start_timestamp_ms,
            last_update_ms=v.last_update_timestamp_ms,
            next_producer_id=v.next_producer_id,
            client_transaction_version=v.client_transaction_version,
        )


@dataclass(frozen=True, slots=True)
class AppendTxnRecord:
    append_id: int
    partition: TopicPartition
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    markers_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnReply:
    request_id: int
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partition_errors: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


Action = AppendTxnRecord | WriteMarkers | TxnReply


class _Then(enum.Enum):
    """What to do once a pending record is committed."""

    REPLY_IDS = enum.auto()  # InitProducerId: answer with the new producer id/epoch
    REPLY_NONE = enum.auto()  # AddPartitions / EndTxn: answer NONE (EndTxn: then markers)
    REPLY_NEXT_IDS = enum.auto()  # EndTxn v5: NONE with the ids of the next transaction
    REPLY_CONCURRENT = enum.auto()  # fencing InitProducerId: CONCURRENT_TRANSACTIONS
    COMPLETE = enum.auto()  # the CompleteCommit/CompleteAbort record
    EXPIRE = enum.auto()  # the tombstone


@dataclass(slots=True)
class _Pending:
    append_id: int
    target: TxnMetadata | None  # None: tombstone
    then: _Then
    request_id: int | None


@dataclass(slots=True)
class _Entry:
    meta: TxnMetadata
    coordinator_partition: int
    pending: _Pending | None = None
    markers_id: int | None = None  # markers in flight for a PrepareCommit/PrepareAbort
    logged: bool = False  # meta is in the log (False: created by InitProducerId, not yet written)


class TransactionCoordinator:
    """Transactional ids of the __transaction_state partitions this node leads."""

    def __init__(
        self,
        config: TxnConfig,
        *,
        allocate_producer_id: Callable[[], int],
    ) -> None:
        self.config = config
        self._allocate = allocate_producer_id
        self._epochs: dict[int, int] = {}  # owned partition -> coordinator epoch
        self._txns: dict[str, _Entry] = {}
        self._appends: dict[int, str] = {}  # append id -> transactional id
        self._markers: dict[int, str] = {}
        self._resend: list[str] = []  # ids whose markers must be resent
        self._retry_complete: list[tuple[str, TxnMetadata]] = []  # failed Complete appends
        self._ids = itertools.count(1)
        self._outbox: list[Action] = []

    # ------------------------------------------------------------ partitions

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def owned(self) -> dict[int, int]:
        return dict(self._epochs)

    def load(
        self,
        partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[bytes, bytes | None]],
        now_ms: int,
    ) -> None:
        """Become the coordinator of `partition`: replay its records (log order) and resend the
        markers of every transaction found in PrepareCommit/PrepareAbort."""
        self.unload(partition)
        self._epochs[partition] = coordinator_epoch
        for txn_id, v in replay(records).items():
            self._txns[txn_id] = _Entry(TxnMetadata.from_log(txn_id, v), partition, logged=True)
        for txn_id, e in self._txns.items():
            if e.coordinator_partition == partition and e.meta.state in (
                TxnState.PREPARE_COMMIT,
                TxnState.PREPARE_ABORT,
            ):
                self._send_markers(txn_id, e)

    def unload(self, partition: int) -> None:
        """Stop coordinating `partition`: forget its ids; requests waiting on them get
        NOT_COORDINATOR, and later outcomes of its appends and markers are ignored."""
        if self._epochs.pop(partition, None) is None:
            return
        gone = {t for t, e in self._txns.items() if e.coordinator_partition == partition}
        # Appends and markers not yet handed over must not leave after the unload: another
        # coordinator owns the partition now (the simulation found this).
        self._outbox = [
            a
            for a in self._outbox
            if not (isinstance(a, AppendTxnRecord) and a.key in {key_bytes(t) for t in gone})
            and not (isinstance(a, WriteMarkers) and a.transactional_id in gone)
        ]
        for txn_id in sorted(gone):
            e = self._txns.pop(txn_id)
            if e.pending is not None and e.pending.request_id is not None:
                self._outbox.append(TxnReply(e.pending.request_id, ErrorCode.not_coordinator))
        self._appends = {a: t for a, t in self._appends.items() if t in self._txns}
        self._markers = {m: t for m, t in self._markers.items() if t in self._txns}
        self._resend = [t for t in self._resend if t in self._txns]
        self._retry_complete = [(t, m) for t, m in self._retry_complete if t in self._txns]

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        e = self._txns.get(transactional_id)
        return None if e is None else e.meta

    def snapshot(self, partition: int) -> dict[str, TxnMetadata]:
        """The committed metadata of a partition's ids that are in its log (for tests and
        DescribeTransactions)."""
        return {
            t: e.meta
            for t, e in self._txns.items()
            if e.coordinator_partition == partition and e.logged
        }

    # ------------------------------------------------------------ queries (KIP-664)

    def describe(self, transactional_id: str) -> TxnMetadata | ErrorCode:
        """DescribeTransactions for one id (Kafka's TransactionStateManager.getTransactionState):
        NOT_COORDINATOR if its partition is not led here, TRANSACTIONAL_ID_NOT_FOUND if it is
        unknown or Dead, else its committed metadata (a pending transition is not shown)."""
        if self._not_here(transactional_id):
            return ErrorCode.not_coordinator
        meta = self.metadata(transactional_id)
        if meta is None or meta.state == TxnState.DEAD:
            return ErrorCode.transactional_id_not_found
        return meta

    def list_transactions(
        self,
        now_ms: int,
        *,
        states: frozenset[TxnState] = frozenset(),
        producer_ids: frozenset[int] = frozenset(),
        min_duration_ms: int = -1,
    ) -> list[TxnMetadata]:
        """ListTransactions (Kafka's listTransactionStates): every id this node coordinates, by
        id; an empty filter matches all. `min_duration_ms` >= 0 (v1's DurationFilter) keeps
        transactions started more than that long ago. Dead ids are never listed."""
        out = []
        for txn_id in sorted(self._txns):
            meta = self._txns[txn_id].meta
            if meta.state == TxnState.DEAD:
                continue
            if states and meta.state not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and now_ms - meta.start_ms <= min_duration_ms:
                continue
            out.append(meta)
        return out

    # ------------------------------------------------------------ requests

    def _not_here(self, transactional_id: str) -> bool:
        return self.partition_of(transactional_id) not in self._epochs

    def _reply(self, request_id: int, error: ErrorCode, **kw: object) -> None:
        self._outbox.append(TxnReply(request_id, error, **kw))  # type: ignore[arg-type]

    def handle_init_producer_id(
        self,
        request_id: int,
        transactional_id: str | None,
        timeout_ms: int,
        now_ms: int,
        *,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        if transactional_id is None:  # idempotent producer: a fresh id, epoch 0
            self._reply(request_id, ErrorCode.none, producer_id=self._allocate(), producer_epoch=0)
            return
        if not transactional_id:  # Kafka refuses an empty transactional id
            self._reply(request_id, ErrorCode.invalid_request)
            return
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            self._reply(request_id, ErrorCode.invalid_transaction_timeout)
            return
        if self._not_here(transactional_id):
            self._reply(request_id, ErrorCode.not_coordinator)
            return
        e = self._txns.get(transactional_id)
        if e is None:
            meta = TxnMetadata(
                transactional_id=transactional_id,
                producer_id=self._allocate(),
                previous_producer_id=NO_PRODUCER_ID,
                producer_epoch=NO_PRODUCER_EPOCH,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
            e = _Entry(meta, self.partition_of(transactional_id))
            self._txns[transactional_id] = e
        m = e.meta
        if e.pending is not None:
            self._reply(request_id, ErrorCode.concurrent_transactions)
            return
        expected = expected_producer_id != NO_PRODUCER_ID
        if expected and not (
            m.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == m.producer_id
            or (
                expected_producer_id == m.previous_producer_id
                and epoch_exhausted(expected_producer_epoch)
            )
        ):
            self._reply(request_id, ErrorCode.producer_fenced)
            return
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) or e.markers_id:
            self._reply(request_id, ErrorCode.concurrent_transactions)
            return
        if m.state == TxnState.ONGOING:
            # Fence the running instance: abort its transaction under a bumped epoch, and make
            # this caller retry (the retry bumps the epoch again, or rotates the id).
            self._fence_and_abort(e, now_ms, request_id)
            return
        if m.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            self._reply(request_id, ErrorCode.invalid_txn_state)
            return
        base = replace(m, timeout_ms=timeout_ms, partitions=frozenset(), last_update_ms=now_ms)
        if epoch_exhausted(m.producer_epoch) and (
            not expected or expected_producer_epoch == m.producer_epoch
        ):
            target = replace(
                base,
                producer_id=self._allocate(),
                previous_producer_id=m.producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                state=TxnState.EMPTY,
                start_ms=-1,
            )
        elif not expected:
            target = replace(
                base,
                producer_epoch=m.producer_epoch + 1,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                state=TxnState.EMPTY,
                start_ms=-1,
            )
        elif m.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == m.producer_epoch:
            target = replace(
                base,
                producer_epoch=m.producer_epoch + 1,
                last_producer_epoch=m.producer_epoch,
                state=TxnState.EMPTY,
                start_ms=-1,
            )
        elif expected_producer_epoch == m.last_producer_epoch:
            # KIP-360: a retry of an InitProducerId that succeeded; answer the same epoch.
            self._reply(
                request_id,
                ErrorCode.none,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
            )
            return
        else:
            self._reply(request_id, ErrorCode.producer_fenced)
            return
        self._propose(e, target, _Then.REPLY_IDS, request_id)

    def _check_producer(self, e: _Entry | None, producer_id: int, epoch: int) -> ErrorCode:
        if e is None or e.meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if e.meta.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        if e.pending is not None:
            return ErrorCode.concurrent_transactions
        return ErrorCode.none

    def handle_add_partitions(
        self,
        request_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        *,
        verify_only: bool = False,
        client_transaction_version: int = 0,
    ) -> None:
        """AddPartitionsToTxn. `verify_only` is v4's VerifyOnly (KIP-890 part 1): a partition
        leader asks whether the partitions are already in the transaction; nothing is added.
        As Kafka's handleVerifyPartitionsInTransaction: a pending append is not waited for,
        PrepareCommit/PrepareAbort is CONCURRENT_TRANSACTIONS, and each partition gets NONE or
        TRANSACTION_ABORTABLE (KIP-1050). `client_transaction_version` 2 is a partition leader
        adding a partition for a transactions-v2 producer (Produce v12, TxnOffsetCommit v5)."""
        wanted = frozenset(partitions)
        if self._not_here(transactional_id):
            self._reply(request_id, ErrorCode.not_coordinator)
            return
        e = self._txns.get(transactional_id)
        if verify_only:
            self._verify(request_id, e, producer_id, producer_epoch, wanted)
            return
        if (
            e is not None
            and e.meta.next_producer_id != NO_PRODUCER_ID
            and producer_id == e.meta.next_producer_id
        ):
            # A v2 producer told its rotated id (EndTxn answers once Prepare is written) before
            # the Complete record switched to it: not yet, rather than a fatal id mismatch.
            self._reply(request_id, ErrorCode.concurrent_transactions)
            return
        err = self._check_producer(e, producer_id, producer_epoch)
        if err != ErrorCode.none:
            self._reply(request_id, err)
            return
        assert e is not None
        m = e.meta
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._reply(request_id, ErrorCode.concurrent_transactions)
            return
        if m.state == TxnState.ONGOING and wanted <= m.partitions:
            self._reply(request_id, ErrorCode.none)
            return
        if m.state not in (
            TxnState.ONGOING,
            TxnState.EMPTY,
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        ):
            self._reply(request_id, ErrorCode.invalid_txn_state)
            return
        starting = m.state != TxnState.ONGOING
        target = replace(
            m,
            state=TxnState.ONGOING,
            partitions=m.partitions | wanted,
            start_ms=now_ms if starting else m.start_ms,
            last_update_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )
        self._propose(e, target, _Then.REPLY_NONE, request_id)

    def _verify(
        self,
        request_id: int,
        e: _Entry | None,
        producer_id: int,
        producer_epoch: int,
        wanted: frozenset[TopicPartition],
    ) -> None:
        if e is None or e.meta.producer_id != producer_id:
            self._reply(request_id, ErrorCode.invalid_producer_id_mapping)
        elif e.meta.producer_epoch != producer_epoch:
            self._reply(request_id, ErrorCode.producer_fenced)
        elif e.meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._reply(request_id, ErrorCode.concurrent_transactions)
        else:
            errors = tuple(
                (
                    tp,
                    ErrorCode.none if tp in e.meta.partitions else ErrorCode.transaction_abortable,
                )
                for tp in sorted(wanted)
            )
            self._reply(request_id, ErrorCode.none, partition_errors=errors)

    def handle_add_offsets(
        self,
        request_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
    ) -> None:
        """AddOffsetsToTxn: add the group's __consumer_offsets partition to the transaction."""
        tp = TopicPartition(
            OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_num_partitions)
        )
        self.handle_add_partitions(
            request_id, transactional_id, producer_id, producer_epoch, [tp], now_ms
        )

    def handle_end_txn(
        self,
        request_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
        *,
        tv2: bool = False,
    ) -> None:
        """EndTxn; `tv2` is EndTxn v5 (transactions v2: the epoch is bumped, see the module)."""
        if self._not_here(transactional_id):
            self._reply(request_id, ErrorCode.not_coordinator)
            return
        e = self._txns.get(transactional_id)
        if tv2:
            self._end_txn_v2(request_id, e, producer_id, producer_epoch, commit, now_ms)
            return
        err = self._check_producer(e, producer_id, producer_epoch)
        if err != ErrorCode.none:
            self._reply(request_id, err)
            return
        assert e is not None
        state = e.meta.state
        same = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        prep_same = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state == TxnState.ONGOING:
            target = replace(e.meta, state=prep_same, last_update_ms=now_ms)
            self._propose(e, target, _Then.REPLY_NONE, request_id)
        elif state == same:  # a retry of an EndTxn that completed
            self._reply(request_id, ErrorCode.none)
        elif state == prep_same:  # a retry while the markers are being written
            self._reply(request_id, ErrorCode.concurrent_transactions)
        else:  # Empty, the other outcome, Dead, PrepareEpochFence
            self._reply(request_id, ErrorCode.invalid_txn_state)

    def _end_txn_v2(
        self,
        request_id: int,
        e: _Entry | None,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
    ) -> None:
        """EndTxn v5 (Kafka's TransactionCoordinator.endTransaction for transaction version 2).
        The epoch tells a retry from the next transaction's EndTxn: a retry carries the epoch
        before the bump (or, across a producer id rotation, the old id at the last epoch)."""
        if e is None:
            self._reply(request_id, ErrorCode.invalid_producer_id_mapping)
            return
        m = e.meta
        if e.pending is not None:
            self._reply(request_id, ErrorCode.concurrent_transactions)
            return
        retry_on_overflow = (
            m.previous_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and m.producer_epoch == 0
        )
        retry_on_bump = m.producer_epoch == producer_epoch + 1
        if m.producer_id != producer_id and not retry_on_overflow:
            self._reply(request_id, ErrorCode.invalid_producer_id_mapping)
            return
        S = TxnState
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry_on_bump
        elif m.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == m.producer_epoch
        else:
            valid = producer_epoch == m.producer_epoch
        if not valid:
            self._reply(request_id, ErrorCode.producer_fenced)
            return
        retry = retry_on_bump or retry_on_overflow
        same_done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        same_prep = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if m.state == S.ONGOING:
            self._prepare_v2(e, same_prep, now_ms, request_id, no_partition_added=False)
        elif m.state == same_done and retry:  # the EndTxn that completed, retried
            self._reply(
                request_id,
                ErrorCode.none,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
            )
        elif not commit and not retry and m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            # an abort with nothing added: still bumps the epoch, fencing any batch in flight
            self._prepare_v2(e, S.PREPARE_ABORT, now_ms, request_id, no_partition_added=True)
        elif m.state == same_prep:  # a retry while the markers are being written
            self._reply(request_id, ErrorCode.concurrent_transactions)
        else:
            self._reply(request_id, ErrorCode.invalid_txn_state)

    def _prepare_v2(
        self,
        e: _Entry,
        state: TxnState,
        now_ms: int,
        request_id: int | None,
        *,
        no_partition_added: bool,
        then: _Then = _Then.REPLY_NEXT_IDS,
    ) -> None:
        """PrepareCommit/PrepareAbort under transactions v2 (Kafka's prepareAbortOrCommit): the
        epoch bumped (an abort at the very last epoch keeps it), and the next producer id
        allocated when the epoch is exhausted."""
        m = e.meta
        exhausted = epoch_exhausted(m.producer_epoch)
        bumped = m.producer_epoch if m.producer_epoch >= MAX_EPOCH else m.producer_epoch + 1
        target = replace(
            m,
            state=state,
            producer_epoch=bumped,
            last_producer_epoch=m.producer_epoch,
            next_producer_id=self._allocate() if exhausted else NO_PRODUCER_ID,
            start_ms=now_ms if no_partition_added else m.start_ms,
            last_update_ms=now_ms,
            client_transaction_version=2,
        )
        self._propose(e, target, then, request_id)

    # ------------------------------------------------------------ timers

    def poll(self, now_ms: int) -> list[Action]:
        """Fire the timers, retry failed marker writes and Complete appends, and hand over the
        outbox."""
        retry, self._retry_complete = self._retry_complete, []
        for txn_id, target in retry:
            e = self._txns.get(txn_id)
            if e is not None and e.pending is None:
                self._propose(e, replace(target, last_update_ms=now_ms), _Then.COMPLETE, None)
        resend, self._resend = self._resend, []
        for txn_id in resend:
            e = self._txns.get(txn_id)
            if e is None:
                continue
            if e.pending is None and e.markers_id is None:
                self._send_markers(txn_id, e)
        for e in list(self._txns.values()):
            if e.pending is not None or e.markers_id is not None:
                continue
            m = e.meta
            # Kafka's timedOutTransactions: strictly older than the timeout
            if m.state == TxnState.ONGOING and m.start_ms + m.timeout_ms < now_ms:
                self._fence_and_abort(e, now_ms, None)
            elif (
                m.state in EXPIRATION_ALLOWED
                and m.last_update_ms + self.config.transactional_id_expiration_ms <= now_ms
            ):
                check_transition(m.state, TxnState.DEAD)
                self._propose(e, None, _Then.EXPIRE, None)
        out, self._outbox = self._outbox, []
        return out

    # ------------------------------------------------------------ outcomes

    def on_append(self, append_id: int, error: ErrorCode, now_ms: int) -> None:
        """The outcome of an AppendTxnRecord (NONE: committed to the in-sync replicas; else
        the append's own error, which the waiting request gets through
        APPEND_ERROR_TO_CLIENT)."""
        txn_id = self._appends.pop(append_id, None)
        if txn_id is None:
            return  # the partition was unloaded since
        e = self._txns[txn_id]
        p = e.pending
        assert p is not None and p.append_id == append_id
        e.pending = None
        if error != ErrorCode.none:
            if not e.logged:  # created by this InitProducerId and never written: forget it
                del self._txns[txn_id]
            if p.then == _Then.COMPLETE and p.target is not None:
                # The markers are written; only the Complete record must be retried.
                self._retry_complete.append((txn_id, p.target))
            elif p.request_id is not None:
                self._reply(p.request_id, APPEND_ERROR_TO_CLIENT.get(error, error))
            return
        if p.target is None:  # tombstone
            del self._txns[txn_id]
            return
        e.meta = p.target
        e.logged = True
        if p.then == _Then.REPLY_IDS:
            self._reply(
                p.request_id,  # type: ignore[arg-type]
                ErrorCode.none,
                producer_id=e.meta.producer_id,
                producer_epoch=e.meta.producer_epoch,
            )
        elif p.then == _Then.REPLY_NONE and p.request_id is not None:
            self._reply(p.request_id, ErrorCode.none)
        elif p.then == _Then.REPLY_NEXT_IDS and p.request_id is not None:
            # the ids the Complete record will hold: the client's next transaction uses them
            rotated = e.meta.next_producer_id != NO_PRODUCER_ID
            self._reply(
                p.request_id,
                ErrorCode.none,
                producer_id=e.meta.next_producer_id if rotated else e.meta.producer_id,
                producer_epoch=0 if rotated else e.meta.producer_epoch,
            )
        elif p.then == _Then.REPLY_CONCURRENT and p.request_id is not None:
            self._reply(p.request_id, ErrorCode.concurrent_transactions)
        if e.meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._send_markers(txn_id, e)

    def on_markers(self, markers_id: int, error: ErrorCode, now_ms: int) -> None:
        """The outcome of a WriteMarkers (NONE: every partition has its marker)."""
        txn_id = self._markers.pop(markers_id, None)
        if txn_id is None:
            return
        e = self._txns[txn_id]
        e.markers_id = None
        if error != ErrorCode.none:
            self._resend.append(txn_id)
            return
        done = (
            TxnState.COMPLETE_COMMIT
            if e.meta.state == TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        self._propose(e, _completed(e.meta, done, now_ms), _Then.COMPLETE, None)

    # ------------------------------------------------------------ internals

    def _fence_and_abort(self, e: _Entry, now_ms: int, request_id: int | None) -> None:
        m = e.meta
        check_transition(m.state, TxnState.PREPARE_EPOCH_FENCE)
        if m.client_transaction_version >= 2:
            # Kafka's v2 epoch fence: one bump (through prepareAbortOrCommit), the next producer
            # id allocated if the epoch is exhausted
            self._prepare_v2(
                e, TxnState.PREPARE_ABORT, now_ms, request_id, no_partition_added=False,
                then=_Then.REPLY_CONCURRENT,
            )
            return
        bumped = m.producer_epoch if m.producer_epoch >= MAX_EPOCH else m.producer_epoch + 1
        fenced = replace(m, state=TxnState.PREPARE_EPOCH_FENCE, producer_epoch=bumped)
        target = replace(
            fenced,
            state=TxnState.PREPARE_ABORT,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            last_update_ms=now_ms,
        )
        check_transition(fenced.state, target.state)
        self._propose(e, target, _Then.REPLY_CONCURRENT, request_id)

    def _propose(
        self, e: _Entry, target: TxnMetadata | None, then: _Then, request_id: int | None
    ) -> None:
        if target is not None:
            check_transition(e.meta.state, target.state)
        append_id = next(self._ids)
        version = self.config.log_value_version
        if target is not None and (
            target.client_transaction_version >= 2 or target.next_producer_id != NO_PRODUCER_ID
        ):
            version = max(version, 1)  # v0 has no tagged fields: they would be lost on reload
        e.pending = _Pending(append_id, target, then, request_id)
        txn_id = e.meta.transactional_id
        self._appends[append_id] = txn_id
        value = (
            None
            if target is None
            else value_bytes(target.log_value(), version=version)
        )
        self._outbox.append(
            AppendTxnRecord(
                append_id,
                TopicPartition(TRANSACTION_STATE_TOPIC, e.coordinator_partition),
                key_bytes(txn_id),
                value,
            )
        )

    def _send_markers(self, txn_id: str, e: _Entry) -> None:
        if not e.meta.partitions:
            # a v2 abort with nothing added: no marker to write
            done = (
                TxnState.COMPLETE_COMMIT
                if e.meta.state == TxnState.PREPARE_COMMIT
                else TxnState.COMPLETE_ABORT
            )
            self._propose(e, _completed(e.meta, done, e.meta.last_update_ms), _Then.COMPLETE, None)
            return
        markers_id = next(self._ids)
        e.markers_id = markers_id
        self._markers[markers_id] = txn_id
        m = e.meta
        self._outbox.append(
            WriteMarkers(
                markers_id=markers_id,
                transactional_id=txn_id,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                coordinator_epoch=self._epochs[e.coordinator_partition],
                commit=m.state == TxnState.PREPARE_COMMIT,
                partitions=m.partitions,
            )
        )


def _completed(m: TxnMetadata, done: TxnState, now_ms: int) -> TxnMetadata:
    """The CompleteCommit/CompleteAbort metadata after a Prepare (Kafka's prepareComplete): the
    partitions cleared and, under transactions v2 with a next producer id, that id at epoch 0
    (the last epoch the client saw stays in last_producer_epoch)."""
    if m.client_transaction_version >= 2 and m.next_producer_id != NO_PRODUCER_ID:
        return replace(
            m,
            state=done,
            partitions=frozenset(),
            last_update_ms=now_ms,
            producer_id=m.next_producer_id,
            previous_producer_id=m.producer_id,
            producer_epoch=0,
            next_producer_id=NO_PRODUCER_ID,
        )
    return replace(m, state=done, partitions=frozenset(), last_update_ms=now_ms)
