"""Metadata (API 3) and DescribeCluster (API 60).

Topics missing from the image are auto-created when the request allows it
and auto.create.topics.enable is on (Kafka's AutoTopicCreationManager); the
controller is local, so the new topic is in this very response instead of a
LEADER_NOT_AVAILABLE that makes the client ask again.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.controller.controller import INTERNAL_TOPICS, NewTopic, validate_topic_name
from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.protocol.messages import NO_THROTTLE, make, nested, uuid_from_str, uuid_to_str

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

_OPS_UNSET = -2147483648  # topic_authorized_operations when not requested


def _brokers(node: BrokerNode, cls: type, id_field: str) -> tuple[Any, ...]:
    out = []
    for b in sorted(node.image.brokers.values(), key=lambda b: b.broker_id):
        if not b.endpoints:
            continue
        name, host, port = b.endpoints[0]
        out.append(make(cls, **{id_field: b.broker_id}, host=host, port=port, rack=b.rack))
    return tuple(out)


async def handle_metadata(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = _resp_cls(ctx)
    topic_cls = nested(resp_cls, "MetadataResponseTopic")
    part_cls = nested(resp_cls, "MetadataResponsePartition")
    image = node.image
    requested: list[tuple[str | None, Any]] | None
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        requested = None
    else:
        requested = [(t.name, t.topic_id) for t in req.topics]

    allow_create = req.allow_auto_topic_creation and node.config["auto.create.topics.enable"]
    if requested and allow_create:
        missing = [
            n for n, _ in requested
            if n is not None and n not in image.topics_by_name and validate_topic_name(n) is None
            and n not in INTERNAL_TOPICS
        ]
        if missing:
            # Not created (no controller, or the commit timed out): the topics answer as
            # missing and the client asks again, as with Kafka.
            with contextlib.suppress(*UNAVAILABLE):
                await node.controller.create_topics([NewTopic(n) for n in dict.fromkeys(missing)])
            image = node.image

    def topic_entry(t: Any) -> Any:
        parts = tuple(
            make(
                part_cls,
                error_code=ErrorCode.none,
                partition_index=p.partition_id,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=tuple(p.replicas),
                isr_nodes=tuple(p.isr),
                # KIP-112: a replica on a failed log dir of this broker.
                offline_replicas=(
                    (node.node_id,) if node.log_manager.is_offline(t.name, p.partition_id) else ()
                ),
            )
            for p in sorted(t.partitions.values(), key=lambda p: p.partition_id)
        )
        return make(
            topic_cls,
            error_code=ErrorCode.none,
            name=t.name,
            topic_id=uuid_from_str(t.topic_id),
            is_internal=t.name in INTERNAL_TOPICS,
            partitions=parts,
            topic_authorized_operations=_OPS_UNSET,
        )

    topics = []
    if requested is None:
        topics = [topic_entry(t) for t in sorted(image.topics_by_name.values(), key=lambda t: t.name)]
    else:
        for name, tid in requested:
            t = image.topics_by_name.get(name) if name is not None else None
            if t is None and name is None and tid is not None:
                t = image.topics_by_id.get(uuid_to_str(tid))
            if t is not None:
                topics.append(topic_entry(t))
                continue
            error = ErrorCode.unknown_topic_or_partition
            if name is not None and validate_topic_name(name) is not None:
                error = ErrorCode.invalid_topic_exception
            elif name is None and ctx.api_version < 12:
                # v10-v11 carry topic ids but no null names (Kafka: INVALID_REQUEST);
                # the response name is not nullable there, so it is sent empty.
                error = ErrorCode.invalid_request
            elif name is None:
                error = ErrorCode.unknown_topic_id
            topics.append(
                make(
                    topic_cls,
                    error_code=error,
                    name=name if name is not None or ctx.api_version >= 12 else "",
                    topic_id=tid if tid is not None else uuid_from_str(None),
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=_OPS_UNSET,
                )
            )
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        brokers=_brokers(node, nested(resp_cls, "MetadataResponseBroker"), "node_id"),
        cluster_id=node.cluster_id,
        controller_id=_controller_id(node),
        topics=tuple(topics),
        cluster_authorized_operations=_OPS_UNSET,
    )


def _resp_cls(ctx: RequestContext) -> type:
    from kavka.protocol import api

    return api.response_schema(ctx.api_key, ctx.api_version)


def handle_describe_cluster(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = _resp_cls(ctx)
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=req.endpoint_type,
        cluster_id=node.cluster_id,
        controller_id=_controller_id(node),
        brokers=_brokers(node, nested(resp_cls, "DescribeClusterBroker"), "broker_id"),
        cluster_authorized_operations=_OPS_UNSET,
    )


def _controller_id(node: BrokerNode) -> int:
    """What a KRaft broker tells clients: a live broker (Kafka picks a random one), here itself.

    Clients send admin requests to the "controller"; any broker forwards them to the
    active controller, and this one is certainly alive. DescribeQuorum names the raft leader.
    """
    return node.node_id
