"""DescribeQuorum (API 55): the metadata quorum as its leader sees it (kafka-metadata-quorum.sh
describe); AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): KIP-853 voter changes.

Any node answers: the raft leader itself, every other node asks it over the controller listener
(broker.controller_client) and relays the answer in the client's version.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.protocol import api
from kavka.protocol.messages import make, nested
from kavka.raft.codec import METADATA_TOPIC

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def _in_version(entity: Any, cls: type) -> Any:
    """The same answer in another version's classes (fields that version lacks are dropped)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not hasattr(entity, f.name):
            continue
        value = getattr(entity, f.name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            sub = nested(cls, type(value[0]).__name__)
            value = tuple(_in_version(v, sub) for v in value)
        kwargs[f.name] = value
    return make(cls, **kwargs)


def _asks_for_the_metadata_partition(req: Any) -> bool:
    """Kafka's hasValidTopicPartition: one topic, `__cluster_metadata`, one partition, 0."""
    return (
        len(req.topics) == 1
        and req.topics[0].topic_name == METADATA_TOPIC
        and len(req.topics[0].partitions) == 1
        and req.topics[0].partitions[0].partition_index == 0
    )


async def handle_describe_quorum(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    if not _asks_for_the_metadata_partition(req):
        # Kafka's partition-level answer: every requested partition UNKNOWN_TOPIC_OR_PARTITION.
        topic_cls, part_cls = nested(resp_cls, "TopicData"), nested(resp_cls, "PartitionData")
        return make(
            resp_cls,
            error_code=ErrorCode.none,
            error_message=None,
            topics=tuple(
                make(
                    topic_cls,
                    topic_name=t.topic_name,
                    partitions=tuple(
                        make(
                            part_cls,
                            partition_index=p.partition_index,
                            error_code=ErrorCode.unknown_topic_or_partition,
                            error_message="This server does not host this topic-partition.",
                            leader_id=-1,
                            leader_epoch=-1,
                            high_watermark=-1,
                            current_voters=(),
                            observers=(),
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            ),
            nodes=(),
        )
    try:
        answer = await node.controller.describe_quorum()
    except UNAVAILABLE as e:
        return make(resp_cls, error_code=ErrorCode.request_timed_out, error_message=str(e), topics=(), nodes=())
    return _in_version(answer, resp_cls)


async def handle_raft_voter_change(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """AddRaftVoter v0-v1, RemoveRaftVoter v0, UpdateRaftVoter v0 (KIP-853): on the active controller,
    answered once the new voter set commits, or with AddRaftVoter v1's AckWhenCommitted false once it
    is appended (controller_apis.voter_change_response)."""
    try:
        return _in_version(await node.controller.change_raft_voters(req), api.response_schema(ctx.api_key, ctx.api_version))
    except UNAVAILABLE as e:
        resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
        leader = None
        if ctx.api_key == api.ApiKey.UPDATE_RAFT_VOTER:
            leader = nested(resp_cls, "CurrentLeader")(host="", port=-1)
        return make(
            resp_cls,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.request_timed_out,
            error_message=str(e),
            current_leader=leader,
        )
