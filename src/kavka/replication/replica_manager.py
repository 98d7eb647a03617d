"""ReplicaManager: the partitions this broker hosts, their roles, and the data path through them.

Kafka's ReplicaManager. The two data-path entry points are Kafka's:

- `append_records` (Kafka's appendRecords): a Produce's batches, per partition, appended to the
  leader's log (validated, given offsets and the leader epoch in place); answered at once for
  acks=0/1, or -- acks=all -- by a DelayedProduce once the high watermark passes each batch
  (purgatory.py). The answer goes through the caller's `respond` callback, which builds the
  response. `append_end_txn_markers` is the same path for the transaction coordinator's
  COMMIT/ABORT markers (KIP-98, Kafka's origin COORDINATOR; always acks=all).
- `fetch_messages` (Kafka's fetchMessages): a Fetch's partitions read up to the high watermark
  for consumers (up to the last stable offset for read_committed ones, with the aborted
  transactions of the range read), up to the log end for followers (whose fetch also records their position:
  high-watermark moves and ISR expansions), with KIP-320 epoch checks, KIP-392 reads from
  followers and preferred read replicas, the replication throttle (KIP-73), reads below the local
  log start from tiered storage (KIP-405, OFFSET_MOVED_TO_TIERED_STORAGE for followers) and the
  long poll: with less than min_bytes and no error, the read waits in the purgatory as a
  DelayedFetch until a partition changes or max_wait passes, then reads again.

It creates and removes Partition objects as the metadata image says (the broker's replica
publisher calls `apply_partition` / `remove_partition`); a partition whose leader is another
broker is handed to the replica fetchers (`fetchers`, set by the node), one this broker leads is
taken from them. ISR changes a leader wants go to the controller through the
AlterPartitionManager (alter_partition.py).

JBOD (KIP-112/113): partitions on a failed log dir are marked offline (`mark_offline`, called by
the broker's dir-failure listener); `alter_replica_log_dir` starts a move between this broker's log
dirs and `swap_in_future` puts the caught-up copy in place between two requests.

Its collaborators are plain attributes set once by the node that builds it, each None when the
broker runs without that part: `fetchers`, `replication_quotas`, `remote_log_manager`; `metadata`
returns the broker's current MetadataImage (brokers' registrations and epochs, topics).

Event-loop thread only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from kavka.common import ErrorCode, IsolationLevel, TopicPartition
from kavka.metadata.image import MetadataImage, PartitionRegistration
from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.records import iter_batches
from kavka.replication.alter_partition import AlterPartitionManager
from kavka.replication.errors import error_for
from kavka.replication.partition import Partition, PartitionError
from kavka.replication.purgatory import DelayedFetch, DelayedProduce, Purgatory
from kavka.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ClientMetadata,
    ReplicaSelector,
    preferred_read_replica,
)
from kavka.replication.replica_state import IsrProposal, diverging_epoch
from kavka.storage.errors import KafkaStorageError, LogDirNotFoundError, OffsetOutOfRangeError
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager
from kavka.storage.log_validator import RecordValidationError
from kavka.storage.unified_log import Log

if TYPE_CHECKING:
    from kavka.replication.quota import ReplicationQuotas

log = logging.getLogger("kavka.replication")
T = TypeVar("T")


class FetcherManager(Protocol):
    def update(self, partition: Partition) -> None: ...
    def remove(self, tp: TopicPartition) -> None: ...


# ---------------------------------------------------------------- the data path's values


@dataclass(frozen=True, slots=True)
class PartitionResponse:
    """One partition's answer to an append (Kafka's ProduceResponse.PartitionResponse)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch index, message): KIP-467


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What a Fetch asks as a whole (Kafka's FetchParams). `client_metadata` is set for a
    consumer's Fetch v11+ (KIP-392): without it a consumer reads from leaders only."""

    replica_id: int = -1
    replica_epoch: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    client_metadata: ClientMetadata | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class FetchPartitionData(NamedTuple):
    """One partition's answer to a Fetch (Kafka's FetchPartitionData). `diverging_epoch` is
    (epoch, end offset) when a follower's log diverges (KIP-320); `aborted_transactions` is, for
    read_committed, the (producer id, first offset) of each aborted transaction with data in
    `records` (KIP-98), None otherwise."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: tuple[int, int] | None
    aborted_transactions: tuple[Any, ...] | None
    preferred_read_replica: int
    records: bytes | memoryview


# What a Fetch names, per partition: the partition (None: a topic id this broker does not know),
# and the request's entry for it (fetch_offset, partition_max_bytes, current_leader_epoch and,
# when the version has them, last_fetched_epoch and log_start_offset -- the decoded request's own
# objects, kio's or protocol.fetch_wire's).
FetchInfo = tuple[TopicPartition | None, Any]
RemoteReads = dict[TopicPartition, bytes | BaseException]


class ReplicaManager:
    def __init__(
        self,
        *,
        node_id: int,
        log_manager: LogManager,
        now_ms: Callable[[], int],
        fetch_max_bytes: int = 57671680,
        replica_selector: ReplicaSelector | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        replica_lag_time_max_ms: int = 30000,
    ) -> None:
        self.node_id = node_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms  # also how silent a follower may be while lapsed
        self.log_manager = log_manager
        self.now_ms = now_ms
        self._monotonic = monotonic
        self.fetch_max_bytes = fetch_max_bytes  # fetch.max.bytes
        self.replica_selector = replica_selector  # replica.selector.class (KIP-392)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.purgatory = Purgatory()
        self.alter_partition = AlterPartitionManager(self.partitions)
        self._hw_checkpoint = log_manager.read_high_watermarks()
        # Collaborators, set by the node that builds this; None where the broker runs without them.
        self.metadata: Callable[[], MetadataImage] = MetadataImage
        self.fetchers: FetcherManager | None = None
        self.replication_quotas: ReplicationQuotas | None = None
        self.remote_log_manager: Any = None  # kavka.tiered.remote_log_manager.RemoteLogManager when tiered storage is on
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leadership_lapsed = False  # the controller session has lapsed: see set_leadership_lapsed
        self.leading_while_lapsed = False  # ... and some partition led here has not stepped down
        self.bytes_out: dict[str, int] = {}  # topic -> record bytes sent to consumers (BytesOutPerSec)
        self.bytes_in: dict[str, int] = {}  # topic -> record bytes appended as leader (BytesInPerSec)
        # Told (partition, producer id, committed) of each end-transaction marker written here and
        # replicated: the group coordinator completes the transactional offsets of that producer
        # on a `__consumer_offsets` partition (Kafka's GroupCoordinator.onTransactionCompleted).
        self.txn_marker_listeners: list[Callable[[TopicPartition, int, bool], None]] = []

    # ------------------------------------------------------------ lifecycle

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, partition))

    def apply_partition(
        self,
        tp: TopicPartition,
        *,
        topic_id: str,
        registration: PartitionRegistration,
        config: LogConfig,
        min_insync_replicas: int,
    ) -> Partition | None:
        p = self.partitions.get(tp)
        if p is None:
            try:
                plog = self.log_manager.get_or_create_log(tp.topic, tp.partition, topic_id=topic_id, config=config)
            except KafkaStorageError as e:
                log.error("cannot host %s: %s", tp, e)
                return None
            p = Partition(
                tp,
                topic_id=topic_id,
                log=plog,
                local_broker_id=self.node_id,
                registration=registration,
                high_watermark=self._hw_checkpoint.get((tp.topic, tp.partition), 0),
                now_ms=self.now_ms(),
                min_insync_replicas=min_insync_replicas,
                on_storage_error=self.handle_storage_error,
                on_change=self.purgatory.visible_change,
            )
            self.partitions[tp] = p
            role_changed = True
        else:
            self.log_manager.batch_epoch_writes(p.log)  # a large leadership change: one write at the end
            old_isr = set(p.isr)
            role_changed = p.apply_registration(registration, now_ms=self.now_ms())
            if p.is_leader and not role_changed:  # IsrShrinksPerSec / IsrExpandsPerSec, counted by leaders
                new_isr = set(p.isr)
                self.isr_expands += new_isr > old_isr
                self.isr_shrinks += new_isr < old_isr
            p.min_insync_replicas = min_insync_replicas
            p.log.update_config(config)
            fut = self.log_manager.future_log((tp.topic, tp.partition))
            if fut is not None:
                fut.update_config(config)
        self._review_step_down(p, self.now_ms())
        if role_changed:
            self.alter_partition.forget(tp)
            self.purgatory.wake_all(tp)  # a waiting follower fetch answers NOT_LEADER now
        if self.fetchers is not None:
            self.fetchers.update(p)
        return p

    def update_config(self, tp: TopicPartition, config: LogConfig, min_insync_replicas: int) -> None:
        p = self.partitions.get(tp)
        if p is not None:
            p.log.update_config(config)
            p.min_insync_replicas = min_insync_replicas

    def remove_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        p = self.partitions.pop(tp, None)
        self.alter_partition.forget(tp)
        if self.fetchers is not None:
            self.fetchers.remove(tp)
        self.purgatory.wake_all(tp)
        if p is not None and delete:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def set_leadership_lapsed(self, lapsed: bool) -> None:
        """This broker lost (True) or regained its controller session (broker.session_watch).

        While lapsed, a partition it leads steps down only where the controller may have elected
        another leader (Partition.review_step_down): some other ISR member stopped fetching, or
        it is the ISR alone with other replicas. A stepped-down leader takes no writes and
        acknowledges none: appends answer NOT_LEADER_OR_FOLLOWER, and acks=all produces waiting
        in the purgatory are answered so at once, so that clients go looking for the leader the
        controller may have elected elsewhere. The others keep serving, as Kafka's brokers do with
        their last metadata: losing the controller quorum alone stops no writes."""
        if lapsed == self.leadership_lapsed:
            return
        self.leadership_lapsed = lapsed
        self.review_step_downs()

    def review_step_downs(self) -> None:
        """Re-judge each partition's step-down as followers' fetches come and go (a timer calls
        this while lapsed; one pass over the partitions, never per request)."""
        now = self.now_ms()
        leading = False
        for p in self.partitions.values():
            if p.is_leader or p.stepped_down:
                self._review_step_down(p, now)
                leading = leading or (p.is_leader and not p.stepped_down)
        self.leading_while_lapsed = leading and self.leadership_lapsed

    def _review_step_down(self, p: Partition, now_ms: int) -> None:
        if p.review_step_down(self.leadership_lapsed, now_ms=now_ms, replica_lag_time_max_ms=self.replica_lag_time_max_ms):
            log.warning("%s: %s", p.tp, "stepped down as leader: the controller session has lapsed and another "
                        "replica may lead it" if p.stepped_down else "no longer stepped down")
            if p.stepped_down:
                self.purgatory.wake_all(p.tp)

    # ------------------------------------------------------------ produce (Kafka's appendRecords)

    def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, memoryview | bytes]],
        *,
        required_acks: int,
        timeout_s: float,
        respond: Callable[[dict[TopicPartition, PartitionResponse]], T],
        allow_control: bool = False,
        in_place: bool = False,
    ) -> T | DelayedProduce[T]:
        """Append each partition's batches to its leader log; answer `respond(responses)` now
        (acks 0 and 1, or acks=all when nothing must wait) or through the returned DelayedProduce
        once every appended partition's high watermark passes its batches (or at `timeout_s`).
        A partition's failure is its own answer; the others are appended all the same.
        `allow_control` is for the broker's own control batches only (`append_end_txn_markers`).
        `in_place`: the entries' records are the caller's to give up (a Produce request's frame),
        so writable ones are validated and given their offsets where they are (Log.append_as_leader)."""
        now_ms = self.now_ms()
        out: dict[TopicPartition, PartitionResponse] = {}
        waits: list[tuple[TopicPartition, int]] = []  # acks=all: (partition, offset the high watermark must reach)
        for tp, records in entries:
            p = self.partitions.get(tp)
            if p is None:
                out[tp] = PartitionResponse(ErrorCode.unknown_topic_or_partition)
                continue
            try:
                info = p.append_records_to_leader(
                    records, required_acks=required_acks, now_ms=now_ms, allow_control=allow_control,
                    in_place=in_place,
                )
            except Exception as e:  # mapped to Kafka's code; the broker carries on
                error, message = error_for(e)
                record_errors = tuple(e.record_errors) if isinstance(e, RecordValidationError) else ()
                if error == ErrorCode.unknown_server_error:
                    log.exception("append to %s failed", tp)
                elif error == ErrorCode.out_of_order_sequence_number:
                    # Rare and a sign of a race between a producer's batches: enough to tell, from the
                    # logs alone, which broker refused which batch and what it held.
                    log.info("%s (leader epoch %d, log end %d): OUT_OF_ORDER_SEQUENCE_NUMBER: %s",
                             tp, p.leader_epoch, p.log_end_offset, message)
                # A record validation error carries the log start offset, as Kafka's
                # unknownLogAppendInfoWithLogStartOffset; other errors carry -1.
                start = p.log_start_offset if error in (ErrorCode.invalid_record, ErrorCode.invalid_timestamp) else -1
                out[tp] = PartitionResponse(error, message, log_start_offset=start, record_errors=record_errors)
                continue
            out[tp] = PartitionResponse(
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time_ms,
                log_start_offset=info.log_start_offset,
            )
            if not allow_control:
                self.bytes_in[tp.topic] = self.bytes_in.get(tp.topic, 0) + len(records)
            self.purgatory.appended(tp)
            if required_acks == -1:
                waits.append((tp, info.last_offset + 1))

        pending = [(tp, off) for tp, off in waits if (p := self.partitions.get(tp)) is None or p.acks_all_state(off) != ErrorCode.none]
        if not pending:
            return respond(out)

        def finish(acked: dict[TopicPartition, ErrorCode]) -> T:
            for tp, err in acked.items():
                if err != ErrorCode.none and out[tp].error == ErrorCode.none:
                    out[tp] = replace(out[tp], error=err, message=ACK_MESSAGES.get(err))
            return respond(out)

        return self.acks_future(pending, max(timeout_s, 0.0), finish)

    def append_end_txn_markers(
        self,
        partitions: Sequence[TopicPartition],
        control_type: ControlRecordType,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        timeout_s: float,
        respond: Callable[[dict[TopicPartition, PartitionResponse]], T],
    ) -> T | DelayedProduce[T]:
        """Write a COMMIT or ABORT marker for one producer's transaction to each partition this
        broker leads, acks=all (Kafka's WriteTxnMarkers: appendRecords with origin COORDINATOR).
        A marker from an older producer epoch is answered INVALID_PRODUCER_EPOCH, one from an
        older coordinator epoch TRANSACTION_COORDINATOR_FENCED."""
        now_ms = self.now_ms()
        batch = build_end_txn_marker_batch(
            control_type,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=now_ms,
        )
        commit = control_type == ControlRecordType.COMMIT

        def written(answers: dict[TopicPartition, PartitionResponse]) -> T:
            for tp, r in answers.items():
                if r.error == ErrorCode.none:
                    for listener in self.txn_marker_listeners:
                        try:
                            listener(tp, producer_id, commit)
                        except Exception:
                            log.exception("a transaction marker listener failed for %s", tp)
            return respond(answers)

        return self.append_records(
            [(tp, batch) for tp in partitions],
            required_acks=-1,
            timeout_s=timeout_s,
            respond=written,
            allow_control=True,
        )

    def acks_future(
        self, waits: list[tuple[TopicPartition, int]], timeout_s: float, finish: Callable[[dict[TopicPartition, ErrorCode]], T]
    ) -> DelayedProduce[T]:
        """acks=all for records already appended (Kafka's DelayedProduce): `finish(answers)` once
        each partition's high watermark reaches its required offset, or at the timeout."""
        return DelayedProduce(self.purgatory, self.partitions, waits, timeout_s, finish)

    async def wait_for_acks(self, waits: list[tuple[TopicPartition, int]], timeout_s: float) -> dict[TopicPartition, ErrorCode]:
        """`acks_future` awaited: the answer per partition (the coordinators' own appends)."""
        return await self.acks_future(waits, timeout_s, dict).future

    # ------------------------------------------------------------ fetch (Kafka's fetchMessages)

    def fetch_messages(
        self, params: FetchParams, fetch_infos: Sequence[FetchInfo], respond: Callable[[list[FetchPartitionData]], T]
    ) -> T | DelayedFetch[T] | Awaitable[T]:
        """Read each named partition (see the module docstring) and answer `respond(results)`,
        results in the order of `fetch_infos`: now when there is min_bytes of data, an error, no
        wait, or nothing to wait on; else through the returned DelayedFetch. A consumer Fetch
        with partitions in tiered storage returns an awaitable (their remote reads run in the
        remote reader's pool) and does not long-poll."""
        follower = params.is_from_follower
        if follower and self._stale_replica(params.replica_id, params.replica_epoch):
            # A fetch from an earlier incarnation of that broker (KIP-903): it must not move the high watermark.
            return respond(self._read_all(params, fetch_infos, stale_replica=True)[0])
        remote_plan, throttled = ({}, frozenset()) if follower else self._remote_plan(fetch_infos)
        if remote_plan:
            return self._read_with_remote(params, fetch_infos, remote_plan, throttled, respond)
        results, total, errors = self._read_all(params, fetch_infos, throttled=throttled)
        if total >= params.min_bytes or errors or params.max_wait_ms <= 0 or not fetch_infos:
            return respond(results)
        tps = [tp for tp, _ in fetch_infos if tp is not None]
        return DelayedFetch(
            self.purgatory, tps, follower, params.max_wait_ms / 1000,
            lambda: self._read_all(params, fetch_infos, throttled=throttled), params.min_bytes, respond,
        )

    async def _read_with_remote(
        self, params: FetchParams, fetch_infos: Sequence[FetchInfo], plan: dict[TopicPartition, Any],
        throttled: frozenset[TopicPartition], respond: Callable[[list[FetchPartitionData]], T],
    ) -> T:
        keys = list(plan)
        rlm = self.remote_log_manager
        results = await rlm.read([plan[k] for k in keys])
        remote = dict(zip(keys, results, strict=True))
        aborted: dict[TopicPartition, tuple[Any, ...]] = {}
        if params.isolation_level == IsolationLevel.READ_COMMITTED:
            # Kafka's RemoteLogManager.addAbortedTransactions: the remote segments' .txnindex, then the local ones.
            for tp, data in remote.items():
                p = self.partitions.get(tp)
                if p is None or isinstance(data, BaseException):
                    continue
                first = upper = None
                for _pos, header in iter_batches(data):
                    first = header.base_offset if first is None else first
                    upper = header.next_offset
                if first is None or upper is None:
                    continue
                try:
                    txns = await rlm.aborted_transactions(p, plan[tp].metadata, first, upper)
                except Exception as e:
                    remote[tp] = e
                    continue
                aborted[tp] = tuple((t.producer_id, t.first_offset) for t in txns)
        return respond(self._read_all(params, fetch_infos, remote=remote, remote_aborted=aborted, throttled=throttled)[0])

    def _stale_replica(self, replica_id: int, replica_epoch: int) -> bool:
        b = self.metadata().brokers.get(replica_id)
        return b is None or (replica_epoch >= 0 and replica_epoch < b.epoch)

    def _isr_eligible(self, replica_id: int, replica_epoch: int) -> bool:
        """May the leader propose this follower for the ISR (Kafka's isReplicaIsrEligible): unfenced,
        not in controlled shutdown, and -- when its fetch says -- of the broker epoch the metadata holds."""
        b = self.metadata().brokers.get(replica_id)
        return b is not None and b.usable and (replica_epoch < 0 or b.epoch == replica_epoch)

    def _remote_plan(self, fetch_infos: Sequence[FetchInfo]) -> tuple[dict[TopicPartition, Any], frozenset[TopicPartition]]:
        """The partitions of a consumer's Fetch to read from remote storage, with what to read; and
        those that would be but the remote fetch quota is used up (KIP-956: answered with no
        records and no error, so the fetch waits like one with too little data and the consumer
        asks again)."""
        rlm = self.remote_log_manager
        if rlm is None:
            return {}, frozenset()
        from kavka.tiered.remote_reader import RemoteFetch

        plan: dict[TopicPartition, Any] = {}
        throttled: set[TopicPartition] = set()
        throttle_ms: int | None = None
        for tp, fp in fetch_infos:
            p = self.partitions.get(tp) if tp is not None else None
            if p is None or not p.is_leader or p.offline:
                continue
            lg = p.log
            if lg.log_start_offset <= fp.fetch_offset < lg.local_log_start_offset:
                md = rlm.segment_for(p, fp.fetch_offset)
                if md is None:
                    continue
                if throttle_ms is None:
                    throttle_ms = rlm.fetch_throttle_ms()
                if throttle_ms > 0:
                    throttled.add(tp)
                    rlm.remote_fetches_throttled += 1
                    continue
                plan[tp] = RemoteFetch(md, fp.fetch_offset, fp.partition_max_bytes, min_one_message=True)
        return plan, frozenset(throttled)

    def _read_all(
        self,
        params: FetchParams,
        fetch_infos: Sequence[FetchInfo],
        *,
        remote: RemoteReads | None = None,
        remote_aborted: Mapping[TopicPartition, tuple[Any, ...]] | None = None,
        stale_replica: bool = False,
        throttled: frozenset[TopicPartition] = frozenset(),
    ) -> tuple[list[FetchPartitionData], int, bool]:
        """One read of every partition (Kafka's readFromLog): (results, record bytes, whether an
        error or a diverging epoch must be answered at once). Within the Fetch's max_bytes and
        each partition's partition_max_bytes, the first partition with data sends at least one
        whole batch (KIP-74)."""
        remaining = min(params.max_bytes if params.max_bytes > 0 else 2**31 - 1, self.fetch_max_bytes)
        total = 0
        any_error = False
        min_one = True
        now_ms = self.now_ms()
        out: list[FetchPartitionData] = []
        follower = params.is_from_follower
        eligible = follower and self._isr_eligible(params.replica_id, params.replica_epoch)
        for tp, fp in fetch_infos:
            p = self.partitions.get(tp) if tp is not None else None
            if p is None:
                r = _failed(self._missing_partition_error(tp), params)
            elif follower:
                r = self._read_for_follower(p, fp, params, max(min(fp.partition_max_bytes, remaining), 0), min_one,
                                            now_ms, stale_replica=stale_replica, isr_eligible=eligible)
            else:
                r = self._read_for_consumer(p, fp, params, max(min(fp.partition_max_bytes, remaining), 0), min_one,
                                            now_ms, remote=remote, throttled=tp in throttled,
                                            remote_aborted=(remote_aborted or {}).get(tp))
            if r.error != ErrorCode.none or r.diverging_epoch is not None or r.preferred_read_replica != NO_PREFERRED_REPLICA:
                any_error = True  # answered at once, as Kafka does
            n = len(r.records)
            if n:
                min_one = False
                remaining -= n
                total += n
            out.append(r)
        return out, total, any_error

    def _missing_partition_error(self, tp: TopicPartition | None) -> ErrorCode:
        """A partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the cluster has it
        (the client's metadata is stale, e.g. it was sent to a replica that has since moved away),
        else unknown -- Kafka's ReplicaManager.getPartitionOrError."""
        if tp is None:
            return ErrorCode.unknown_topic_id
        t = self.metadata().topics_by_name.get(tp.topic)
        if t is not None and tp.partition in t.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def _read_for_follower(
        self, p: Partition, fp: Any, params: FetchParams, max_bytes: int, min_one: bool, now_ms: int,
        *, stale_replica: bool, isr_eligible: bool,
    ) -> FetchPartitionData:
        """A follower's fetch (Kafka's replica fetcher): everything up to the log end, and the
        follower's new position."""
        hw, start = p.high_watermark, p.log_start_offset
        last_fetched_epoch = getattr(fp, "last_fetched_epoch", -1)
        try:
            if stale_replica:
                raise PartitionError(ErrorCode.not_leader_or_follower, f"fetch from a stale or unknown broker {params.replica_id}")
            self._maybe_moved_to_tiered_storage(p, fp.fetch_offset, last_fetched_epoch)
            # Replication throttle (KIP-73): an out-of-sync follower of a throttled partition gets no
            # records while the leader quota is exceeded; its position still counts.
            quotas = self.replication_quotas
            now_s = self._monotonic()
            throttled = quotas is not None and quotas.leader_throttled(self.metadata(), p.tp.topic, p.tp.partition)
            hold = throttled and params.replica_id not in p.isr and quotas.leader.is_exceeded(now_s)  # type: ignore[union-attr]
            r = p.fetch_for_follower(
                params.replica_id,
                fetch_offset=fp.fetch_offset,
                last_fetched_epoch=last_fetched_epoch,
                current_leader_epoch=fp.current_leader_epoch,
                max_bytes=max_bytes,
                min_one_message=min_one,
                now_ms=now_ms,
                log_start_offset=getattr(fp, "log_start_offset", -1),
                hold_back=hold,
                isr_eligible=isr_eligible,
            )
            self.propose(p, r.proposal)
            hw, start = r.high_watermark, r.log_start_offset
            if r.diverging is not None:
                return FetchPartitionData(ErrorCode.none, hw, hw, start, (r.diverging.epoch, r.diverging.end_offset),
                                          _aborted(params), NO_PREFERRED_REPLICA, b"")
            records: bytes | memoryview = b""
            if r.data is not None:
                records = r.data.records
                if throttled:
                    quotas.leader.record(len(records), now_s)  # type: ignore[union-attr]
            return FetchPartitionData(ErrorCode.none, hw, hw, start, None, _aborted(params), NO_PREFERRED_REPLICA, records)
        except Exception as e:
            return FetchPartitionData(error_for(e)[0], hw, hw, start, None, _aborted(params), NO_PREFERRED_REPLICA, b"")

    def _read_for_consumer(
        self, p: Partition, fp: Any, params: FetchParams, limit: int, min_one: bool, now_ms: int,
        *, remote: RemoteReads | None, throttled: bool, remote_aborted: tuple[Any, ...] | None = None,
    ) -> FetchPartitionData:
        """A consumer's fetch: up to the high watermark (the last stable offset for
        read_committed), from the leader or -- KIP-392, v11+ -- any replica."""
        hw = p.high_watermark
        lso = hw
        start = p.log_start_offset
        preferred = NO_PREFERRED_REPLICA
        records: bytes | memoryview = b""
        aborted = _aborted(params)
        try:
            p.check_online()
            lso = p.last_stable_offset
            p.check_leader_epoch(fp.current_leader_epoch)
            if not p.is_leader and params.client_metadata is None:
                # Before v11 a consumer sends no client metadata and reads from leaders only (KIP-392).
                raise PartitionError(ErrorCode.not_leader_or_follower)
            upper = lso if params.isolation_level == IsolationLevel.READ_COMMITTED else hw
            if fp.fetch_offset < start or fp.fetch_offset > p.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"fetch offset {fp.fetch_offset} is outside [{start}, {p.log_end_offset}] of {p.tp}"
                )
            if not p.is_leader and fp.fetch_offset < p.log.local_log_start_offset:
                # Only leaders read tiered storage (kavka.tiered): the client goes back to the leader.
                raise PartitionError(ErrorCode.not_leader_or_follower, "remote reads are served by the leader")
            fetched = remote.get(p.tp) if remote is not None else None
            if isinstance(fetched, BaseException):
                raise fetched
            if fetched is None and p.is_leader and not throttled:
                preferred = self._preferred_read_replica(p, params, fetch_offset=fp.fetch_offset, now_ms=now_ms)
            if fetched is None and throttled:
                pass  # remote fetch quota used up: no records, no error (KIP-956)
            elif fetched is not None:
                records = _cut(fetched, limit, min_one)
                if params.isolation_level == IsolationLevel.READ_COMMITTED and remote_aborted is not None:
                    aborted = remote_aborted
            elif fp.fetch_offset < upper and preferred == NO_PREFERRED_REPLICA:
                records = p.read_records(fp.fetch_offset, max_bytes=limit, max_offset=upper, min_one_message=min_one).records
                if params.isolation_level == IsolationLevel.READ_COMMITTED:
                    aborted = _aborted_in(p, fp.fetch_offset, records)
        except Exception as e:
            return FetchPartitionData(error_for(e)[0], hw, lso, start, None, _aborted(params), preferred, b"")
        return FetchPartitionData(ErrorCode.none, hw, lso, start, None, aborted, preferred, records)

    def _preferred_read_replica(self, p: Partition, params: FetchParams, *, fetch_offset: int, now_ms: int) -> int:
        """The replica a consumer's fetch (v11+, with client metadata) should read from instead of
        this leader, chosen by `replica.selector.class`; NO_PREFERRED_REPLICA when it should read here."""
        if params.client_metadata is None or self.replica_selector is None:
            return NO_PREFERRED_REPLICA
        return preferred_read_replica(self.replica_selector, p, client=params.client_metadata,
                                      brokers=self.metadata().brokers, fetch_offset=fetch_offset, now_ms=now_ms)

    def _maybe_moved_to_tiered_storage(self, p: Partition, fetch_offset: int, last_fetched_epoch: int) -> None:
        """KIP-405 follower fetch: a follower asking for an offset that only remote storage holds
        (at or above the log start offset, below the local log start offset of a tiered topic) is
        answered OFFSET_MOVED_TO_TIERED_STORAGE, as Kafka's leader does (ReplicaManager.readFromLog);
        it rebuilds its epochs and producer state from remote storage and fetches the local tail
        (tiered.follower) instead of having the leader read remote segments for it."""
        lg = p.log
        if self.remote_log_manager is None or not lg.config.remote_storage_enable or not p.is_leader:
            return
        if lg.log_start_offset <= fetch_offset < lg.local_log_start_offset:
            if diverging_epoch(lg.leader_epoch_cache, fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                               log_end_offset=lg.log_end_offset, log_start_offset=lg.log_start_offset) is not None:
                return  # a diverging epoch is answered first (KIP-320), as for any follower fetch
            raise PartitionError(
                ErrorCode.offset_moved_to_tiered_storage,
                f"offset {fetch_offset} of {p.tp} is in tiered storage (local log start {lg.local_log_start_offset})",
            )

    # ------------------------------------------------------------ ISR changes (AlterPartition)

    def propose(self, partition: Partition, proposal: IsrProposal | None) -> None:
        """Queue a leader's ISR proposal for the AlterPartition sender."""
        if proposal is not None:
            self.alter_partition.submit(partition, proposal)

    def shrink_isrs(self, *, replica_lag_time_max_ms: int) -> None:
        """Propose dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = self.now_ms()
        for p in self.leader_partitions():
            self.propose(p, p.maybe_shrink_isr(now_ms=now, replica_lag_time_max_ms=replica_lag_time_max_ms))

    # ------------------------------------------------------------ log dirs (KIP-112, KIP-113)

    def handle_storage_error(self, lg: Log, exc: OSError) -> None:
        self.log_manager.handle_io_error(lg.dir, exc)

    def mark_offline(self, tps: Iterable[tuple[str, int]]) -> None:
        """Replicas whose log dir failed: from now on they answer KAFKA_STORAGE_ERROR."""
        for topic, partition in tps:
            tp = TopicPartition(topic, partition)
            p = self.partitions.get(tp)
            if p is not None:
                p.offline = True
                if self.fetchers is not None:
                    self.fetchers.update(p)  # an offline replica is not fetched
            self.purgatory.wake_all(tp)

    def alter_replica_log_dir(self, tp: TopicPartition, path: str, *, now_ms: int) -> tuple[ErrorCode, bool]:
        """AlterReplicaLogDirs for one replica: (error, whether a mover must start)."""
        lm = self.log_manager
        key = (tp.topic, tp.partition)
        p = self.partitions.get(tp)
        try:
            if p is None:
                if lm.is_offline(*key):
                    return ErrorCode.kafka_storage_error, False
                # Kafka remembers the dir and uses it when the replica is created.
                lm.prefer_log_dir(key, Path(path))
                return ErrorCode.replica_not_available, False
            if p.offline:
                return ErrorCode.kafka_storage_error, False
            fut = lm.create_future_log(key, Path(path), now_ms=now_ms)
        except LogDirNotFoundError:
            return ErrorCode.log_dir_not_found, False
        except KafkaStorageError:
            return ErrorCode.kafka_storage_error, False
        return ErrorCode.none, fut is not None

    def swap_in_future(self, tp: TopicPartition, *, crash_point: Callable[[str], None]) -> Log:
        """The end of a move: the future log becomes the partition's log."""
        p = self.partitions[tp]
        new = self.log_manager.replace_current_with_future(
            (tp.topic, tp.partition), now_ms=self.now_ms(), crash_point=crash_point
        )
        p.log = new
        return new

    # ------------------------------------------------------------ waits for the coordinators' own appends

    def notify_append(self, tp: TopicPartition) -> None:
        """Records were appended to `tp` outside `append_records` (a coordinator's own write)."""
        self.purgatory.appended(tp)

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float, *, follower: bool = False) -> None:
        await self.purgatory.wait_for_data(tps, timeout_s, follower=follower)

    # ------------------------------------------------------------ checkpoints

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())


ACK_MESSAGES = {
    ErrorCode.request_timed_out: "the in-sync replicas did not all acknowledge the records within the request's timeout",
    ErrorCode.not_enough_replicas_after_append: "the records were written, but fewer in-sync replicas than min.insync.replicas hold them",
    ErrorCode.not_leader_or_follower: "leadership moved before the in-sync replicas acknowledged the records",
}


def _aborted_in(p: Partition, fetch_offset: int, records: bytes | memoryview) -> tuple[Any, ...]:
    """(producer id, first offset) of each aborted transaction with data in the returned batches
    (the consumer drops those records, KIP-98); the range ends after the last whole batch."""
    upper = fetch_offset
    for _pos, header in iter_batches(records):
        upper = header.next_offset
    if upper <= fetch_offset:
        return ()
    return tuple((t.producer_id, t.first_offset) for t in p.log.collect_aborted_transactions(fetch_offset, upper))


def _aborted(params: FetchParams) -> tuple[Any, ...] | None:
    return () if params.isolation_level == IsolationLevel.READ_COMMITTED else None


# Errors Kafka finds before reading (KafkaApis' "erroneous" partitions): their answer has an
# empty aborted-transactions list, where an error from the log read has a null one.
_REQUEST_LEVEL_ERRORS = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id})


def _failed(error: ErrorCode, params: FetchParams) -> FetchPartitionData:
    aborted = () if error in _REQUEST_LEVEL_ERRORS else _aborted(params)
    return FetchPartitionData(error, -1, -1, -1, None, aborted, NO_PREFERRED_REPLICA, b"")


def _cut(records: bytes, limit: int, min_one: bool) -> bytes:
    """Whole batches of ``records`` within ``limit`` bytes (at least one if ``min_one``)."""
    end = 0
    for pos, h in iter_batches(records):
        if pos + h.size_in_bytes > limit and not (min_one and end == 0):
            break
        end = pos + h.size_in_bytes
    return records[:end]
