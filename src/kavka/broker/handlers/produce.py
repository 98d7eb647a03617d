"""Produce (API 0): decode the request, append through the ReplicaManager, encode the response.

v3-v12 are decoded and answered by hand (protocol.produce_wire: the server decodes them, this
handler returns a produce_wire.ProduceResponse); v0-v2 come through kio and protocol.legacy.

The append itself -- each partition's bytes handed to the leader's log as they arrived (a
memoryview into the request frame), validated batch by batch (CRC-32C, structure), given offsets
and the leader epoch in place, written with one write; and, for acks=all, the wait for the high
watermark in the purgatory -- is `ReplicaManager.append_records`
(kavka.replication.replica_manager). This handler refuses what the request itself gets wrong
(invalid acks, an empty records field, zstd before v7, message format v0/v1 from Produce v0-v2:
protocol.legacy) and, with an authorizer, partitions of topics the principal may not Write
(TOPIC_AUTHORIZATION_FAILED, broker.authorization), and encodes the answer. acks=0 gets no response; an error under acks=0 closes
the connection, as Kafka does, since that is the only way to tell the producer.

A transactional producer's appends keep the order its requests arrived in. Kafka reads one request
of a connection at a time, so a Produce that waits for the transaction coordinator (KIP-890
verification, `_verify`) holds back the producer's next ones. kavka reads requests ahead and
serves them concurrently, so such a Produce heads a line of its producer's requests
(`BrokerNode.txn_appends`, per transactional id): those read before it has appended (or been
refused) append after it, in turn -- only the appends wait, not the acks. Without the line, a
batch sent while the producer's earlier batch on that partition was still being verified (by
then the transaction was open there, so it needed no verification) was appended first, and
the earlier one was refused OUT_OF_ORDER_SEQUENCE_NUMBER -- fatal to the transaction, as the
producer had by then seen every batch before it acknowledged (issue 30: the Java client's
transactional test, on a fresh topic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kavka.broker.authorization import checker
from kavka.common import AclOperation, ErrorCode, ResourceType, TopicPartition
from kavka.protocol.compression import ZSTD
from kavka.protocol.framing import ProtocolError
from kavka.protocol.legacy import LEGACY_PRODUCE_VERSIONS, UNSUPPORTED_FOR_MESSAGE_FORMAT
from kavka.protocol.messages import NO_THROTTLE
from kavka.protocol.produce_wire import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
    all_failed,
)
from kavka.protocol.records import iter_batches
from kavka.replication.purgatory import Delayed
from kavka.replication.replica_manager import PartitionResponse, ReplicaManager

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_produce(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    # KIP-13: the request's bytes count against the producer's quota as it arrives (Kafka records
    # the request's size); the answer carries the throttle time (broker.client_quotas).
    throttle_ms = node.client_quotas.record_produce(ctx.principal, ctx.client_id, ctx.size)
    if throttle_ms > 0 and req.acks == 0 and ctx.mute is not None:
        ctx.mute(throttle_ms)  # no response will carry the time: Kafka throttles the channel anyway
    check = checker(node, ctx)
    if check is not None and req.transactional_id is not None and not check(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                      req.transactional_id):
        # Kafka's handleProduceRequest: a transactional produce needs Write on its TransactionalId.
        if req.acks == 0:
            raise ProtocolError("produce with acks=0 failed; closing the connection to tell the producer")
        return all_failed(req, ErrorCode.transactional_id_authorization_failed)
    may_write = None if check is None else (lambda topic: check(AclOperation.WRITE, ResourceType.TOPIC, topic))
    # acks=0 is never answered, so it cannot wait for a verification (transactional clients use acks=all).
    # Produce v12+ from a transactional producer is transactions v2 (KIP-890 part 2): the leader
    # adds the partition to the transaction itself, whatever transaction.partition.verification.enable says.
    add = ctx.api_version >= 12
    txn_id = str(req.transactional_id) if req.transactional_id is not None and req.acks != 0 else None
    if txn_id is None:
        return produce(node.replica_manager, ctx, req, throttle_ms=throttle_ms, may_write=may_write)
    ahead = node.txn_appends.get(txn_id)
    unverified = _needing_verification(node, req, may_write, add=add) if ahead is None else {}
    if ahead is None and not unverified:
        return produce(node.replica_manager, ctx, req, throttle_ms=throttle_ms, may_write=may_write)
    # This append waits (for the coordinator, or behind one that does): the producer's next
    # requests line up behind it until it is appended.
    appended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    node.txn_appends[txn_id] = appended
    return _produce_in_turn(node, ctx, req, txn_id=txn_id, ahead=ahead, appended=appended, unverified=unverified,
                            throttle_ms=throttle_ms, may_write=may_write, add=add)


async def _produce_in_turn(node: BrokerNode, ctx: RequestContext, req: Any, *, txn_id: str,
                           ahead: asyncio.Future[None] | None, appended: asyncio.Future[None],
                           unverified: dict[TopicPartition, tuple[int, int, Any]], throttle_ms: int,
                           may_write: Callable[[str], bool] | None, add: bool) -> Any:
    """Append once the request `ahead` (the same producer's, read before this one) has appended,
    verifying first what needs it -- decided only then, as the requests ahead may have opened the
    transaction here or been refused; then resolve `appended` for the request behind, and wait
    for the acks. `appended` is resolved however this ends (a closed connection cancels it)."""
    try:
        if ahead is not None:
            await asyncio.shield(ahead)  # (a cancelled wait must not cancel the future others share)
            unverified = _needing_verification(node, req, may_write, add=add)
        refused = await _verify(node, req, unverified, add=add) if unverified else {}
        result = produce(node.replica_manager, ctx, req, throttle_ms=throttle_ms, may_write=may_write,
                         refused_before=refused)
    finally:
        if not appended.done():
            appended.set_result(None)
        if node.txn_appends.get(txn_id) is appended:
            del node.txn_appends[txn_id]
    return await result.future if isinstance(result, Delayed) else result


def _needing_verification(node: BrokerNode, req: Any, may_write: Callable[[str], bool] | None, *,
                          add: bool = False) -> dict[TopicPartition, tuple[int, int, Any]]:
    """KIP-890 part 1: the partitions this broker leads where the request's transactional batch
    would open a transaction (its producer has none open there), each with the verification
    guard taken in that partition's producer state (storage.producer_state.VerificationGuard).
    Empty when `transaction.partition.verification.enable` is false, unless `add` (transactions v2)."""
    if not add and not node.resolver.broker_value(node.image, "transaction.partition.verification.enable"):
        return {}  # (dynamic)
    rm = node.replica_manager
    out: dict[TopicPartition, tuple[int, int, Any]] = {}
    for t in req.topic_data:
        if may_write is not None and not may_write(t.name):
            continue  # answered TOPIC_AUTHORIZATION_FAILED, never verified
        for pd in t.partition_data:
            if pd.records is None or len(pd.records) == 0:
                continue
            try:
                h = next((h for _, h in iter_batches(memoryview(pd.records)) if h.is_transactional), None)
            except ValueError:
                continue  # malformed: the append's validation answers it
            p = rm.get_partition(t.name, pd.index)
            if h is None or h.producer_id < 0 or p is None or not p.is_leader:
                continue  # the append answers a partition not led here
            state = p.log.producer_state
            if state.needs_verification(h.producer_id, h.producer_epoch):
                out[TopicPartition(t.name, pd.index)] = (
                    h.producer_id, h.producer_epoch,
                    state.start_verification(h.producer_id, h.producer_epoch, h.base_sequence, supports_epoch_bump=add))
    return out


async def _verify(node: BrokerNode, req: Any, unverified: dict[TopicPartition, tuple[int, int, Any]], *,
                  add: bool = False) -> dict[TopicPartition, PartitionResponse]:
    """Ask the transaction coordinator (BrokerNode.verify_txn_partitions) about `unverified`: the
    answers of the partitions not to append -- those the coordinator does not confirm, or whose
    guard a marker or a newer epoch cleared meanwhile -- with the verification's error. The caller
    appends the rest without yielding to the event loop in between, so the guards still hold. With
    `add` (Produce v12, transactions v2) the partitions are added rather than verified."""
    by_producer: dict[tuple[int, int], list[TopicPartition]] = {}
    for tp, (pid, epoch, _) in unverified.items():
        by_producer.setdefault((pid, epoch), []).append(tp)
    errors: dict[TopicPartition, ErrorCode] = {}
    for (pid, epoch), tps in by_producer.items():
        errors.update(await node.verify_txn_partitions(str(req.transactional_id), pid, epoch, tps, add=add))
    refused: dict[TopicPartition, PartitionResponse] = {}
    rm = node.replica_manager
    for tp, (pid, epoch, guard) in unverified.items():
        error = errors.get(tp, ErrorCode.invalid_txn_state)
        p = rm.get_partition(tp.topic, tp.partition)
        if error == ErrorCode.none and p is not None and p.is_leader \
                and not p.log.producer_state.verified(pid, epoch, guard):
            error = ErrorCode.invalid_txn_state  # a marker (or a newer epoch) came in between
        if error != ErrorCode.none:
            refused[tp] = PartitionResponse(error, "the partition is not in the producer's ongoing transaction"
                                            if error == ErrorCode.invalid_txn_state else None)
    return refused


def produce(rm: ReplicaManager, ctx: RequestContext, req: Any, *, throttle_ms: int = 0,
            may_write: Callable[[str], bool] | None = None,
            refused_before: dict[TopicPartition, PartitionResponse] | None = None) -> Any:
    """The handler on its narrow input: the replica manager, the quota's throttle time for the
    answer and, with an authorizer, whether the principal may Write each topic (a partition of one
    it may not is TOPIC_AUTHORIZATION_FAILED); `refused_before` answers partitions already
    refused (KIP-890 verification) without appending them."""
    acks = req.acks
    # The answer is a produce_wire.ProduceResponse, written by produce_wire (v3-v12) or protocol.legacy.
    if acks not in (0, 1, -1):
        return all_failed(req, ErrorCode.invalid_required_acks)
    if ctx.api_version in LEGACY_PRODUCE_VERSIONS:
        # Message format v0/v1: never appended (protocol.legacy explains why these versions exist).
        if acks == 0:
            raise ProtocolError("produce v0-v2 (message format v0/v1) is not supported; closing the connection")
        return all_failed(req, UNSUPPORTED_FOR_MESSAGE_FORMAT)
    # What the request itself gets wrong is answered here; the rest goes to the replica manager.
    refused: dict[TopicPartition, PartitionResponse] = dict(refused_before or {})
    entries: list[tuple[TopicPartition, memoryview]] = []
    order: list[tuple[str, list[TopicPartition]]] = []
    for t in req.topic_data:
        tps = []
        authorized = may_write is None or may_write(t.name)
        for pd in t.partition_data:
            tp = TopicPartition(t.name, pd.index)
            tps.append(tp)
            if tp in refused:
                continue
            if not authorized:
                refused[tp] = PartitionResponse(ErrorCode.topic_authorization_failed)
            elif pd.records is None or len(pd.records) == 0:
                refused[tp] = PartitionResponse(ErrorCode.invalid_record, "no records in produce request")
            elif ctx.api_version < 7 and _uses_zstd(pd.records):
                # KIP-110: zstd needs Produce v7+; Kafka answers older versions so.
                refused[tp] = PartitionResponse(ErrorCode.unsupported_compression_type,
                                                "zstd-compressed batches need Produce v7 or later")
            else:
                entries.append((tp, memoryview(pd.records)))
        order.append((t.name, tps))

    def respond(appended: dict[TopicPartition, PartitionResponse]) -> Any:
        answers = {**appended, **refused}
        if acks == 0:
            if any(r.error != ErrorCode.none for r in answers.values()):
                raise ProtocolError("produce with acks=0 failed; closing the connection to tell the producer")
            return None
        return _answer(order, answers, throttle_ms)

    # The records are views into the request's frame, which nothing reads after the append: a
    # writable one (a frame joined from several reads) is appended in place, without a copy.
    return rm.append_records(entries, required_acks=acks, timeout_s=req.timeout.total_seconds(), respond=respond,
                             in_place=True)


_MESSAGE_ERRORS = frozenset({ErrorCode.invalid_record, ErrorCode.invalid_timestamp})


def _answer(order: list[tuple[str, list[TopicPartition]]], answers: dict[TopicPartition, PartitionResponse],
            throttle_ms: int = 0) -> ProduceResponse:
    def part(tp: TopicPartition) -> PartitionProduceResponse:
        r = answers[tp]
        # Kafka sends a message only with a record validation error (its hasCustomErrorMessage).
        return PartitionProduceResponse(tp.partition, r.error, r.base_offset, r.log_append_time_ms,
                                        r.log_start_offset, r.record_errors,
                                        r.message if r.error in _MESSAGE_ERRORS else None)

    return ProduceResponse(
        tuple(TopicProduceResponse(name, tuple(part(tp) for tp in tps)) for name, tps in order),
        timedelta(milliseconds=throttle_ms) if throttle_ms else NO_THROTTLE,
    )


def _uses_zstd(records: bytes | memoryview) -> bool:
    try:
        return any(h.compression == ZSTD for _, h in iter_batches(memoryview(records)))
    except ValueError:
        return False  # malformed: the append's validation answers it
