"""AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46), KIP-455.

Every broker answers them by asking the active controller (`node.controller`, which forwards
over the controller listener when this node is not the controller), as Kafka's brokers forward
them. The controller decides (`ReplicationControlManager.alter_partition_reassignments`) and commits before
answering; the replicas then move by themselves: adding replicas fetch as followers, the leader's
AlterPartition that puts the whole target in the ISR completes the move, and brokers delete the
replicas they no longer host. Answers are Kafka's:

- Alter, per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty,
  duplicate or unregistered brokers; a cancel that would need an unclean election),
  NO_REASSIGNMENT_IN_PROGRESS (a null target where nothing moves). No controller reachable or no
  commit in time: NOT_CONTROLLER / REQUEST_TIMED_OUT at the top level and for every partition
  (AlterPartitionReassignmentsRequest.getErrorResponse).
- List: the partitions with a reassignment in progress (replicas, adding, removing); null topics
  means every topic; unknown topics and partitions are left out.

The encode/decode halves are shared with the controller listener (`broker.controller_client`).
Called on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.results import OngoingReassignment, ReassignmentResult
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

Targets = Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]
Wanted = Sequence[tuple[str, Sequence[int]]] | None


@dataclass(frozen=True, slots=True)
class AlterAnswer:
    error: ErrorCode
    message: str | None
    results: tuple[tuple[str, tuple[ReassignmentResult, ...]], ...]


@dataclass(frozen=True, slots=True)
class ListAnswer:
    error: ErrorCode
    message: str | None
    topics: tuple[tuple[str, tuple[OngoingReassignment, ...]], ...]


def targets(req: Any) -> list[tuple[str, list[tuple[int, tuple[int, ...] | None]]]]:
    return [
        (t.name, [(p.partition_index, None if p.replicas is None else tuple(p.replicas)) for p in t.partitions])
        for t in req.topics
    ]


def wanted(req: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    if req.topics is None:
        return None
    return [(t.name, tuple(t.partition_indexes)) for t in req.topics]


async def alter(controller: Any, topics: Targets, *, timeout_s: float | None = None) -> AlterAnswer:
    try:
        if timeout_s is None:
            results = await controller.alter_partition_reassignments(topics)
        else:
            results = await controller.alter_partition_reassignments(topics, timeout_s=timeout_s)
    except UNAVAILABLE as e:
        failed = unavailable_result(e)
        return AlterAnswer(
            failed.error,
            failed.message,
            tuple((n, tuple(ReassignmentResult(p, failed.error, failed.message) for p, _ in ps)) for n, ps in topics),
        )
    return AlterAnswer(ErrorCode.none, None, tuple((n, tuple(rs)) for n, rs in results))


async def list_ongoing(controller: Any, topics: Wanted, *, timeout_s: float | None = None) -> ListAnswer:
    try:
        if timeout_s is None:
            ongoing = await controller.list_partition_reassignments(topics)
        else:
            ongoing = await controller.list_partition_reassignments(topics, timeout_s=timeout_s)
    except UNAVAILABLE as e:
        failed = unavailable_result(e)
        return ListAnswer(failed.error, failed.message, ())
    return ListAnswer(ErrorCode.none, None, tuple((n, tuple(ps)) for n, ps in ongoing))


def encode_alter(resp_cls: type, answer: AlterAnswer) -> Any:
    topic_cls = nested(resp_cls, "ReassignableTopicResponse")
    part_cls = nested(resp_cls, "ReassignablePartitionResponse")
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.message,
        responses=tuple(
            make(
                topic_cls,
                name=name,
                partitions=tuple(
                    make(part_cls, partition_index=r.partition, error_code=r.error, error_message=r.message) for r in rs
                ),
            )
            for name, rs in answer.results
        ),
    )


def decode_alter(resp: Any) -> AlterAnswer:
    return AlterAnswer(
        ErrorCode(resp.error_code),
        resp.error_message,
        tuple(
            (
                t.name,
                tuple(ReassignmentResult(p.partition_index, ErrorCode(p.error_code), p.error_message) for p in t.partitions),
            )
            for t in resp.responses
        ),
    )


def encode_list(resp_cls: type, answer: ListAnswer) -> Any:
    topic_cls = nested(resp_cls, "OngoingTopicReassignment")
    part_cls = nested(resp_cls, "OngoingPartitionReassignment")
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.message,
        topics=tuple(
            make(
                topic_cls,
                name=name,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=o.partition,
                        replicas=tuple(o.replicas),
                        adding_replicas=tuple(o.adding_replicas),
                        removing_replicas=tuple(o.removing_replicas),
                    )
                    for o in ps
                ),
            )
            for name, ps in answer.topics
        ),
    )


def decode_list(resp: Any) -> ListAnswer:
    return ListAnswer(
        ErrorCode(resp.error_code),
        resp.error_message,
        tuple(
            (
                t.name,
                tuple(
                    OngoingReassignment(
                        p.partition_index, tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
                    )
                    for p in t.partitions
                ),
            )
            for t in resp.topics
        ),
    )


def _timeout_s(req: Any) -> float:
    return max(req.timeout.total_seconds(), 0.1)


async def handle_alter_partition_reassignments(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    return encode_alter(resp_cls, await alter(node.controller, targets(req), timeout_s=_timeout_s(req)))


async def handle_list_partition_reassignments(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    return encode_list(resp_cls, await list_ongoing(node.controller, wanted(req), timeout_s=_timeout_s(req)))
