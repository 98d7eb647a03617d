"""Produce (API 0).

Each partition's bytes are handed to the leader's Log as they arrived (a
memoryview into the request frame): validated batch by batch (CRC-32C,
structure), given offsets and the leader epoch in place, written with one
write. acks=0 gets no response; an error under acks=0 closes the connection,
as Kafka does, since that is the only way to tell the producer.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.broker.handlers.errors import error_for
from kavka.protocol import api
from kavka.protocol.compression import ZSTD
from kavka.protocol.framing import ProtocolError
from kavka.protocol.legacy import LEGACY_PRODUCE_VERSIONS, refuse_legacy_produce
from kavka.protocol.messages import NO_THROTTLE, make, nested
from kavka.protocol.records import iter_batches
from kavka.replication.partition import TopicPartition
from kavka.storage.log_validator import RecordValidationError

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

log = logging.getLogger("kavka.produce")


def handle_produce(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    rm = node.replica_manager
    now_ms = node.now_ms()
    acks = req.acks
    # v0-v2 answers are built v3-shaped and written by protocol.legacy.
    resp_cls = api.response_schema(ctx.api_key, max(ctx.api_version, 3))
    topic_cls = nested(resp_cls, "TopicProduceResponse")
    part_cls = nested(resp_cls, "PartitionProduceResponse")
    err_cls = nested(resp_cls, "BatchIndexAndErrorMessage") if ctx.api_version >= 8 else None
    any_error = False
    topics = []
    if acks not in (0, 1, -1):
        return _all_failed(req, resp_cls, ErrorCode.invalid_required_acks)
    if ctx.api_version in LEGACY_PRODUCE_VERSIONS:
        # Message format v0/v1: never appended (protocol.legacy explains why these versions exist).
        if acks == 0:
            raise ProtocolError("produce v0-v2 (message format v0/v1) is not supported; closing the connection")
        return refuse_legacy_produce(req, resp_cls)
    waits: list[tuple[TopicPartition, int]] = []  # acks=all: (partition, offset the high watermark must reach)
    answers: list[tuple[str, list[dict[str, Any]]]] = []
    for t in req.topic_data:
        parts: list[dict[str, Any]] = []
        for pd in t.partition_data:
            p = rm.get_partition(t.name, pd.index)
            error, message = ErrorCode.none, None
            base_offset, append_time, start = -1, None, -1
            record_errors: tuple[Any, ...] = ()
            if p is None:
                error = ErrorCode.unknown_topic_or_partition
            elif pd.records is None or len(pd.records) == 0:
                error, message = ErrorCode.invalid_record, "no records in produce request"
            elif ctx.api_version < 7 and _uses_zstd(pd.records):
                # KIP-110: zstd needs Produce v7+; Kafka answers older versions so.
                error = ErrorCode.unsupported_compression_type
                message = "zstd-compressed batches need Produce v7 or later"
            else:
                try:
                    info = p.append_records_to_leader(memoryview(pd.records), required_acks=acks, now_ms=now_ms)
                except Exception as e:  # mapped to Kafka's code; the broker carries on
                    error, message = error_for(e)
                    if isinstance(e, RecordValidationError) and err_cls is not None:
                        record_errors = tuple(
                            make(err_cls, batch_index=i, batch_index_error_message=m)
                            for i, m in e.record_errors
                        )
                    if error == ErrorCode.unknown_server_error:
                        log.exception("append to %s-%d failed", t.name, pd.index)
                else:
                    base_offset = info.first_offset
                    if info.log_append_time_ms >= 0:
                        append_time = datetime.fromtimestamp(info.log_append_time_ms / 1000, UTC)
                    start = info.log_start_offset
                    tp = TopicPartition(t.name, pd.index)
                    rm.notify_append(tp)
                    if acks == -1:
                        waits.append((tp, info.last_offset + 1))
            any_error = any_error or error != ErrorCode.none
            parts.append(
                dict(
                    index=pd.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time=append_time,
                    log_start_offset=start,
                    record_errors=record_errors,
                    error_message=message,
                )
            )
        answers.append((t.name, parts))
    if acks == 0:
        if any_error:
            raise ProtocolError("produce with acks=0 failed; closing the connection to tell the producer")
        return None

    def respond(acked: dict[TopicPartition, ErrorCode]) -> Any:
        for name, parts in answers:
            for part in parts:
                err = acked.get(TopicPartition(name, part["index"]), ErrorCode.none)
                if err != ErrorCode.none and part["error_code"] == ErrorCode.none:
                    part["error_code"] = err
                    part["error_message"] = _ACK_MESSAGES.get(err)
            topics.append(make(topic_cls, name=name, partition_responses=tuple(make(part_cls, **p) for p in parts)))
        return make(resp_cls, responses=tuple(topics), throttle_time=NO_THROTTLE)

    pending = [(tp, off) for tp, off in waits if (p := rm.partitions.get(tp)) is None or p.acks_all_state(off) != ErrorCode.none]
    if not pending:
        return respond({})

    # Kafka's DelayedProduce: answered when the high watermark passes, or at timeout.ms.
    return rm.acks_future(pending, max(req.timeout.total_seconds(), 0.0), respond)


_ACK_MESSAGES = {
    ErrorCode.request_timed_out: "the in-sync replicas did not all acknowledge the records within the request's timeout",
    ErrorCode.not_enough_replicas_after_append: "the records were written, but fewer in-sync replicas than min.insync.replicas hold them",
    ErrorCode.not_leader_or_follower: "leadership moved before the in-sync replicas acknowledged the records",
}


def _uses_zstd(records: bytes | memoryview) -> bool:
    try:
        return any(h.compression == ZSTD for _, h in iter_batches(memoryview(records)))
    except ValueError:
        return False  # malformed: the append's validation answers it


def _all_failed(req: Any, resp_cls: type, error: ErrorCode) -> Any:
    topic_cls = nested(resp_cls, "TopicProduceResponse")
    part_cls = nested(resp_cls, "PartitionProduceResponse")
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            make(
                topic_cls,
                name=t.name,
                partition_responses=tuple(
                    make(part_cls, index=pd.index, error_code=error, base_offset=-1, log_append_time=None,
                         log_start_offset=-1, record_errors=(), error_message=None)
                    for pd in t.partition_data
                ),
            )
            for t in req.topic_data
        ),
    )
