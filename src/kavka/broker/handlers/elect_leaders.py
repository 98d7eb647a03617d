"""ElectLeaders (API 43): preferred and unclean leader elections, as kafka-leader-election.sh asks them.

The active controller decides and commits (`ReplicationControlManager.elect_leaders`, KIP-183 and KIP-460);
any other node forwards the request to it over the controller listener
(`broker.controller_client`), as Kafka's brokers forward it. Answers are Kafka's:

- `election_type` 0 PREFERRED, 1 UNCLEAN (v0 has no field: preferred); any other value is
  INVALID_REQUEST at the top level and for every named partition.
- `topic_partitions` null: every partition of every topic, and the answer leaves out the
  partitions whose election was not needed; an empty list: an empty answer, nothing elected.
- Per partition: NONE (elected, committed before the answer), ELECTION_NOT_NEEDED,
  PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION.
- No controller reachable or no commit in time: NOT_CONTROLLER / REQUEST_TIMED_OUT at the top level
  and for every named partition (Kafka's ElectLeadersRequest.getErrorResponse). kavka has no
  authorizer, so CLUSTER_AUTHORIZATION_FAILED is never answered.

The request-to-controller half (`elect_leaders`) is shared with the controller listener, where
`controller` is the QuorumController instead of the node's ControllerClient. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.common import ElectionType
from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.results import PartitionElection, TopicElections
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

TopicPartitions = Sequence[tuple[str, Sequence[int]]]


@dataclass(frozen=True, slots=True)
class ElectionAnswer:
    """What ElectLeadersResponse carries: a top-level error and the per-topic results."""

    error: ErrorCode
    results: tuple[TopicElections, ...]


def requested(req: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    """The request's topic partitions; None asks for every partition."""
    if req.topic_partitions is None:
        return None
    return [(t.topic, tuple(t.partitions)) for t in req.topic_partitions]


def _failed(topic_partitions: TopicPartitions | None, error: ErrorCode, message: str | None) -> ElectionAnswer:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error everywhere a partition was named."""
    results = tuple(
        TopicElections(topic, tuple(PartitionElection(p, error, message) for p in parts))
        for topic, parts in (topic_partitions or ())
    )
    return ElectionAnswer(error, results)


async def elect_leaders(
    controller: Any, election_type: int, topic_partitions: TopicPartitions | None, *, timeout_s: float | None = None
) -> ElectionAnswer:
    if election_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        return _failed(topic_partitions, ErrorCode.invalid_request, f"Unknown election type {election_type}")
    if topic_partitions is not None and not topic_partitions:
        return ElectionAnswer(ErrorCode.none, ())  # QuorumController.electLeaders: nothing to do
    try:
        if timeout_s is None:
            results = await controller.elect_leaders(election_type, topic_partitions)
        else:
            results = await controller.elect_leaders(election_type, topic_partitions, timeout_s=timeout_s)
    except UNAVAILABLE as e:
        failed = unavailable_result(e)
        return _failed(topic_partitions, failed.error, failed.message)
    return ElectionAnswer(ErrorCode.none, tuple(results))


def encode(resp_cls: type, answer: ElectionAnswer) -> Any:
    """The answer in `resp_cls`'s version (v0 has no top-level error code)."""
    topic_cls = nested(resp_cls, "ReplicaElectionResult")
    part_cls = nested(resp_cls, "PartitionResult")
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        replica_election_results=tuple(
            make(
                topic_cls,
                topic=t.topic,
                partition_result=tuple(
                    make(part_cls, partition_id=p.partition, error_code=p.error, error_message=p.message)
                    for p in t.partitions
                ),
            )
            for t in answer.results
        ),
    )


def decode(resp: Any) -> ElectionAnswer:
    """A forwarded ElectLeadersResponse back into values."""
    return ElectionAnswer(
        ErrorCode(resp.error_code),
        tuple(
            TopicElections(
                t.topic,
                tuple(PartitionElection(p.partition_id, ErrorCode(p.error_code), p.error_message) for p in t.partition_result),
            )
            for t in resp.replica_election_results
        ),
    )


async def handle_elect_leaders(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    timeout_s = max(req.timeout.total_seconds(), 0.1)
    answer = await elect_leaders(node.controller, req.election_type, requested(req), timeout_s=timeout_s)
    return encode(resp_cls, answer)
