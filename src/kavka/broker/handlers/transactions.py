"""The transactional APIs (KIP-98): InitProducerId with a transactional id, AddPartitionsToTxn
(API 24, v0-v3 from clients; v4-v5, batched and verify-only, from brokers: KIP-890),
AddOffsetsToTxn (API 25, v0-v4), EndTxn (API 26), all answered by the transaction coordinator
(coordinator.txn_manager) parked until the core's reply. AddOffsetsToTxn adds the group's
`__consumer_offsets` partition to the transaction; the offsets themselves come with
TxnOffsetCommit, which the group coordinator answers (broker.handlers.groups).

Authorization as Kafka's KafkaApis: Write on the TransactionalId (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn then Write on each topic (a refused
topic's partitions get TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED);
AddOffsetsToTxn then Read on the Group (else GROUP_AUTHORIZATION_FAILED).
PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH to versions before it existed (InitProducerId
< v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn < v2), as Kafka does.

WriteTxnMarkers (API 27, v0-v1; ClusterAction on the Cluster, checked in broker.apis) is served:
a partition leader writes the markers a coordinator asks for (kavka's coordinator sends it
through BrokerNode._send_txn_markers).

Not served yet: transactions v2 (KIP-890 part 2: EndTxn v5, TxnOffsetCommit v5).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import checker
from kavka.common import AclOperation, ResourceType
from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.protocol import api
from kavka.protocol.control_records import ControlRecordType
from kavka.protocol.messages import NO_THROTTLE, make, nested
from kavka.replication.partition import TopicPartition

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def _ms(v: Any) -> int:
    return int(v.total_seconds() * 1000) if isinstance(v, timedelta) else int(v)


def _fenced_for(error: ErrorCode, version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED did not exist before `since`: old clients get INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.producer_fenced and version < since:
        return ErrorCode.invalid_producer_epoch
    return error


def _may_write_txn_id(node: BrokerNode, ctx: RequestContext, transactional_id: str) -> bool:
    check = checker(node, ctx)
    return check is None or check(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def init_transactional_producer_id(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """InitProducerId with a transactional id (the handler in producer_ids.py sends it here)."""
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)

    def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> Any:
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=_fenced_for(error, ctx.api_version, 4),
                    producer_id=pid, producer_epoch=epoch)

    txn_id = str(req.transactional_id)
    if not _may_write_txn_id(node, ctx, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    txns = node.transactions
    if txns is None:
        return answer(ErrorCode.coordinator_not_available)
    try:
        pid = await node.producer_ids.generate()
    except UNAVAILABLE:
        return answer(ErrorCode.coordinator_load_in_progress)
    expected_pid = int(getattr(req, "producer_id", -1))
    expected_epoch = int(getattr(req, "producer_epoch", -1))
    timeout_ms = _ms(req.transaction_timeout)

    def request(rid: int, now: int) -> None:
        txns.reserve_producer_id(pid)
        txns.core.handle_init_producer_id(rid, txn_id, timeout_ms, now, expected_producer_id=expected_pid,
                                          expected_producer_epoch=expected_epoch)

    reply = await txns.call(request)
    return answer(reply.error, reply.producer_id, reply.producer_epoch)


async def handle_add_partitions_to_txn(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    if ctx.api_version >= 4:
        return await _handle_add_partitions_to_txn_batched(node, ctx, req)
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "AddPartitionsToTxnTopicResult")
    part_cls = nested(resp_cls, "AddPartitionsToTxnPartitionResult")
    txn_id = str(req.v3_and_below_transactional_id)
    wanted = [(str(t.name), [int(p) for p in t.partitions]) for t in req.v3_and_below_topics]

    def answer(errors: dict[str, ErrorCode] | ErrorCode, per: dict[TopicPartition, ErrorCode] | None = None) -> Any:
        out = []
        for name, parts in wanted:
            res = []
            for p in parts:
                if isinstance(errors, ErrorCode):
                    e = errors
                else:
                    e = errors.get(name, ErrorCode.none)
                if per is not None and TopicPartition(name, p) in per:
                    e = per[TopicPartition(name, p)]
                res.append(make(part_cls, partition_index=p,
                                partition_error_code=_fenced_for(e, ctx.api_version, 2)))
            out.append(make(topic_cls, name=name, results_by_partition=tuple(res)))
        return make(resp_cls, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(out))

    if not _may_write_txn_id(node, ctx, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    check = checker(node, ctx)
    image = node.image
    refused: dict[str, ErrorCode] = {}
    for name, parts in wanted:
        topic = image.topics_by_name.get(name)
        if check is not None and not check(AclOperation.WRITE, ResourceType.TOPIC, name):
            refused[name] = ErrorCode.topic_authorization_failed
        elif topic is None or any(p not in topic.partitions for p in parts):
            refused[name] = ErrorCode.unknown_topic_or_partition
    if refused:  # Kafka: the refused topics' error, OPERATION_NOT_ATTEMPTED for the rest
        return answer({name: refused.get(name, ErrorCode.operation_not_attempted) for name, _ in wanted})
    txns = node.transactions
    if txns is None:
        return answer(ErrorCode.coordinator_not_available)
    tps = [TopicPartition(name, p) for name, parts in wanted for p in parts]
    pid, epoch = int(req.v3_and_below_producer_id), int(req.v3_and_below_producer_epoch)
    reply = await txns.call(lambda rid, now: txns.core.handle_add_partitions(rid, txn_id, pid, epoch, tps, now))
    return answer(reply.error, dict(reply.partition_errors) or None)


async def handle_add_offsets_to_txn(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)

    def answer(error: ErrorCode) -> Any:
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=_fenced_for(error, ctx.api_version, 2))

    txn_id, group_id = str(req.transactional_id), str(req.group_id)
    if not _may_write_txn_id(node, ctx, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    check = checker(node, ctx)
    if check is not None and not check(AclOperation.READ, ResourceType.GROUP, group_id):
        return answer(ErrorCode.group_authorization_failed)
    txns = node.transactions
    if txns is None:
        return answer(ErrorCode.coordinator_not_available)
    pid, epoch = int(req.producer_id), int(req.producer_epoch)
    reply = await txns.call(lambda rid, now: txns.core.handle_add_offsets(rid, txn_id, pid, epoch, group_id, now))
    error = reply.error
    if error == ErrorCode.none and reply.partition_errors:
        error = next((e for _tp, e in reply.partition_errors if e != ErrorCode.none), ErrorCode.none)
    return answer(error)


async def _handle_add_partitions_to_txn_batched(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """AddPartitionsToTxn v4+ (KIP-890 part 1), the broker-to-broker form: many transactions per
    request, each either added (as v0-v3) or, with `verify_only`, only checked (per partition NONE
    when it is in the producer's ongoing transaction). As Kafka's KafkaApis: ClusterAction on the
    Cluster is required (else CLUSTER_AUTHORIZATION_FAILED on the top-level error code), no
    per-transactional-id or per-topic ACL; an unknown partition fails its transaction with
    UNKNOWN_TOPIC_OR_PARTITION (OPERATION_NOT_ATTEMPTED for its other partitions). The core answers
    TRANSACTION_ABORTABLE for a partition outside the transaction; v4 predates that code (v5,
    KIP-890) and gets INVALID_TXN_STATE."""
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    txn_cls = nested(resp_cls, "AddPartitionsToTxnResult")
    topic_cls = nested(resp_cls, "AddPartitionsToTxnTopicResult")
    part_cls = nested(resp_cls, "AddPartitionsToTxnPartitionResult")
    check = checker(node, ctx)
    if check is not None and not check(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
                    results_by_transaction=())

    def code(e: ErrorCode) -> ErrorCode:
        if e == ErrorCode.transaction_abortable and ctx.api_version < 5:
            return ErrorCode.invalid_txn_state
        return e

    async def one(t: Any) -> Any:
        txn_id = str(t.transactional_id)
        tps = [TopicPartition(str(tp.name), int(p)) for tp in t.topics for p in tp.partitions]
        errors: dict[TopicPartition, ErrorCode] = {}
        unknown = {tp for tp in tps if (topic := node.image.topics_by_name.get(tp.topic)) is None
                   or tp.partition not in topic.partitions}
        txns = node.transactions
        if unknown:
            errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                      for tp in tps}
        elif txns is None:
            errors = dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        else:
            pid, epoch, verify = int(t.producer_id), int(t.producer_epoch), bool(t.verify_only)
            # not verify-only: a partition leader adding a partition for a transactions-v2
            # producer (Produce v12, TxnOffsetCommit v5)
            reply = await txns.call(lambda rid, now: txns.core.handle_add_partitions(
                rid, txn_id, pid, epoch, tps, now, verify_only=verify,
                client_transaction_version=0 if verify else 2))
            per = dict(reply.partition_errors)
            errors = {tp: per.get(tp, reply.error) for tp in tps}
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                make(part_cls, partition_index=tp.partition, partition_error_code=code(errors[tp])))
        return make(txn_cls, transactional_id=txn_id, topic_results=tuple(
            make(topic_cls, name=name, results_by_partition=tuple(ps)) for name, ps in by_topic.items()))

    results = await asyncio.gather(*(one(t) for t in req.transactions))
    return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(results))


async def handle_end_txn(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)

    def answer(error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1) -> Any:
        extra = {"producer_id": producer_id, "producer_epoch": producer_epoch} if ctx.api_version >= 5 else {}
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=_fenced_for(error, ctx.api_version, 2), **extra)

    txn_id = str(req.transactional_id)
    if not _may_write_txn_id(node, ctx, txn_id):
        return answer(ErrorCode.transactional_id_authorization_failed)
    txns = node.transactions
    if txns is None:
        return answer(ErrorCode.coordinator_not_available)
    pid, epoch, commit = int(req.producer_id), int(req.producer_epoch), bool(req.committed)
    # v5 is transactions v2 (KIP-890 part 2): the epoch is bumped and the next ids answered
    tv2 = ctx.api_version >= 5
    reply = await txns.call(lambda rid, now: txns.core.handle_end_txn(rid, txn_id, pid, epoch, commit, now, tv2=tv2))
    if reply.error != ErrorCode.none:
        return answer(reply.error)
    return answer(reply.error, reply.producer_id, reply.producer_epoch)


async def handle_write_txn_markers(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """Write each marker on the partitions this broker leads (Kafka's handleWriteTxnMarkersRequest):
    acks=all, one answer per partition; a partition not led here gets NOT_LEADER_OR_FOLLOWER,
    an unknown one UNKNOWN_TOPIC_OR_PARTITION."""
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    marker_cls = nested(resp_cls, "WritableTxnMarkerResult")
    topic_cls = nested(resp_cls, "WritableTxnMarkerTopicResult")
    part_cls = nested(resp_cls, "WritableTxnMarkerPartitionResult")
    rm = node.replica_manager
    results = []
    for m in req.markers:
        tps = [TopicPartition(str(t.name), int(p)) for t in m.topics for p in t.partition_indexes]
        errors: dict[TopicPartition, ErrorCode] = {}
        local = []
        for tp in tps:
            if node.image.topics_by_name.get(tp.topic) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                local.append(tp)
        if local:
            control = ControlRecordType.COMMIT if m.transaction_result else ControlRecordType.ABORT
            result = rm.append_end_txn_markers(
                local, control, producer_id=int(m.producer_id), producer_epoch=int(m.producer_epoch),
                coordinator_epoch=int(m.coordinator_epoch), timeout_s=5.0, respond=lambda r: r)
            answers = result if isinstance(result, dict) else await result.future
            errors.update({tp: r.error for tp, r in answers.items()})
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                make(part_cls, partition_index=tp.partition, error_code=errors.get(tp, ErrorCode.none)))
        results.append(make(marker_cls, producer_id=m.producer_id, topics=tuple(
            make(topic_cls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items())))
    return make(resp_cls, markers=tuple(results))
