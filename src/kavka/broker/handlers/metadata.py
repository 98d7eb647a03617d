"""Metadata (API 3) and DescribeCluster (API 60).

Topics missing from the image are auto-created when the request allows it
and auto.create.topics.enable is on (Kafka's AutoTopicCreationManager); the
controller is local, so the new topic is in this very response instead of a
LEADER_NOT_AVAILABLE that makes the client ask again. With an authorizer, a topic needs Describe
to be shown (an all-topics answer leaves it out, a named one is TOPIC_AUTHORIZATION_FAILED) and
Create on the cluster or itself to be auto-created (broker.authorization). KIP-430: Metadata v8+
fills topic_authorized_operations / cluster_authorized_operations when the request sets
include_topic_authorized_operations / include_cluster_authorized_operations, and DescribeCluster
cluster_authorized_operations when include_cluster_authorized_operations is set (the bit set of
the operations the principal may perform, broker.authorization.authorized_operations);
Integer.MIN_VALUE otherwise; the cluster's is 0 without Describe on the Cluster. DescribeCluster
itself needs no ACL (Kafka's AuthHelper.computeDescribeClusterResponse).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import authorized_operations, checker, cluster_authorized_operations
from kavka.common import AclOperation, ResourceType
from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.controller.replication_control import INTERNAL_TOPICS, validate_topic_name
from kavka.controller.results import NewTopic
from kavka.protocol import metadata_wire
from kavka.protocol.messages import NO_THROTTLE, ZERO_UUID, make, nested, uuid_from_str, uuid_to_str

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

_OPS_UNSET = metadata_wire.OPS_UNSET  # topic_authorized_operations when not requested


def _broker_rows(node: BrokerNode, ctx: RequestContext, *, include_fenced: bool = False) -> list[tuple[int, str, int, str | None, bool]]:
    """Live (unfenced) brokers as (id, host, port, rack, fenced), as Kafka's KRaft metadata cache
    answers; DescribeCluster v2 may ask for all. Each at its endpoint on the listener the request
    came in on; a broker without one is left out (Kafka)."""
    out = []
    for b in sorted(node.image.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoint(ctx.listener)
        if ep is None or (b.fenced and not include_fenced):
            continue
        if b.broker_id == node.node_id and _lapsed_without_leading(node) and not include_fenced:
            continue  # it may have been fenced (see live_brokers)
        host, port = ep
        out.append((b.broker_id, host, port, b.rack, b.fenced))
    return out


def _lapsed_without_leading(node: BrokerNode) -> bool:
    rm = node.replica_manager
    return rm.leadership_lapsed and not rm.leading_while_lapsed


def live_brokers(node: BrokerNode, image: Any) -> set[int]:
    """The unfenced brokers of `image`, without this one while its controller session has lapsed
    (broker.session_watch) and every partition it leads has stepped down (ReplicaManager.
    set_leadership_lapsed): the controller may have fenced it and elected leaders elsewhere, so
    clients ask again (another broker, in time) instead of coming back to it. One that still
    leads a partition stays listed, so that its clients keep reaching it."""
    live = {b.broker_id for b in image.brokers.values() if not b.fenced}
    if _lapsed_without_leading(node):
        live.discard(node.node_id)
    return live


def _stepped_down(node: BrokerNode, topic: str, partition_id: int) -> bool:
    """This broker leads the partition but stepped down with its lapsed controller session."""
    if not node.replica_manager.leadership_lapsed:
        return False
    local = node.replica_manager.get_partition(topic, partition_id)
    return local is not None and local.stepped_down


def partition_rows(node: BrokerNode, live: set[int], topic: str, partitions: Iterable[Any]) -> list[metadata_wire.Partition]:
    """Each partition as Metadata and DescribeTopicPartitions answer it: (error code, index, leader,
    leader epoch, replicas, ISR, offline replicas). Kafka: no live leader (offline) ->
    LEADER_NOT_AVAILABLE, leader -1; so does a partition this broker leads but stepped down from
    (`_stepped_down`). Offline: replicas on fenced or unknown brokers, or (KIP-112) on a failed log
    dir of this broker. A Metadata request for every topic runs this over every partition of the
    cluster, so the usual case (leader live, every replica live) costs a few operations."""
    me = node.node_id
    lapsed = node.replica_manager.leadership_lapsed
    is_offline = node.log_manager.is_offline
    all_live = live.issuperset
    ok, unavailable = ErrorCode.none, ErrorCode.leader_not_available
    out = []
    for p in partitions:
        leader, replicas, index = p.leader, p.replicas, p.partition_id
        if leader in live and not (lapsed and leader == me and _stepped_down(node, topic, index)):
            error = ok
        else:
            error, leader = unavailable, -1
        if all_live(replicas) and not (me in replicas and is_offline(topic, index)):
            offline: tuple[int, ...] = ()
        else:
            offline = tuple(r for r in replicas if r not in live or (r == me and is_offline(topic, index)))
        out.append((error, index, leader, p.leader_epoch, replicas, p.isr, offline))
    return out


def _by_id(t: Any) -> list[Any]:
    """A topic's partitions in id order."""
    parts = t.partitions
    return [parts[i] for i in sorted(parts)]


async def handle_metadata(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    image = node.image
    requested: list[tuple[str | None, Any]] | None
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        requested = None
    else:
        requested = [(t.name, t.topic_id) for t in req.topics]

    # With an authorizer (broker.authorization): Describe on a topic to see it, Create on the
    # cluster or the topic to auto-create it (Kafka's KafkaApis.getTopicMetadata).
    check = checker(node, ctx)
    quiet = checker(node, ctx, log_denials=False)  # Kafka asks Create on the Cluster with logIfDenied=false

    def may_describe(name: str) -> bool:
        return check is None or check(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def may_create(name: str) -> bool:
        return check is None or (quiet is not None and quiet(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)) or check(
            AclOperation.CREATE, ResourceType.TOPIC, name)

    allow_create = req.allow_auto_topic_creation and node.config["auto.create.topics.enable"]
    if requested and allow_create:
        missing = [
            n for n, _ in requested
            if n is not None and n not in image.topics_by_name and validate_topic_name(n) is None
            and n not in INTERNAL_TOPICS and may_describe(n) and may_create(n)
        ]
        if missing:
            # Not created (no controller, or the commit timed out): the topics answer as
            # missing and the client asks again, as with Kafka.
            with contextlib.suppress(*UNAVAILABLE):
                await node.controller.create_topics([NewTopic(n) for n in dict.fromkeys(missing)])
            image = node.image

    live = live_brokers(node, image)
    include_ops = req.include_topic_authorized_operations

    def topic_entry(t: Any) -> metadata_wire.Topic:
        name = t.name
        ops = authorized_operations(node, ctx, ResourceType.TOPIC, name) if include_ops else _OPS_UNSET
        return (ErrorCode.none, name, uuid_from_str(t.topic_id), name in INTERNAL_TOPICS,
                partition_rows(node, live, name, _by_id(t)), ops)

    def error_entry(error: ErrorCode, name: str | None, tid: Any) -> metadata_wire.Topic:
        # Before v12 the response name is not nullable: a topic asked by id alone is named "".
        return (error, name if name is not None or ctx.api_version >= 12 else "",
                tid if tid is not None else ZERO_UUID, False, (), _OPS_UNSET)

    topics: list[metadata_wire.Topic] = []
    if requested is None:
        topics = [topic_entry(t) for t in sorted(image.topics_by_name.values(), key=lambda t: t.name)
                  if may_describe(t.name)]
    else:
        for name, tid in requested:
            t = image.topics_by_name.get(name) if name is not None else None
            if t is None and name is None and tid is not None:
                t = image.topics_by_id.get(uuid_to_str(tid))
            if (t is not None or name is not None) and not may_describe(t.name if t is not None else name):
                topics.append(error_entry(ErrorCode.topic_authorization_failed, name, tid))
                continue
            if t is not None:
                topics.append(topic_entry(t))
                continue
            error = ErrorCode.unknown_topic_or_partition
            if name is not None and validate_topic_name(name) is not None:
                error = ErrorCode.invalid_topic_exception
            elif name is None and ctx.api_version < 12:
                # v10-v11 carry topic ids but no null names (Kafka: INVALID_REQUEST).
                error = ErrorCode.invalid_request
            elif name is None:
                error = ErrorCode.unknown_topic_id
            topics.append(error_entry(error, name, tid))
    # Written by hand (protocol.metadata_wire): an all-topics answer is every partition of the cluster.
    return metadata_wire.MetadataResponse(
        brokers=[row[:4] for row in _broker_rows(node, ctx)],
        cluster_id=node.cluster_id,
        controller_id=_controller_id(node),
        topics=topics,
        cluster_authorized_operations=cluster_authorized_operations(node, ctx)
        if req.include_cluster_authorized_operations else _OPS_UNSET,
    )


def _resp_cls(ctx: RequestContext) -> type:
    from kavka.protocol import api

    return api.response_schema(ctx.api_key, ctx.api_version)


def handle_describe_cluster(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = _resp_cls(ctx)
    broker_cls = nested(resp_cls, "DescribeClusterBroker")
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=req.endpoint_type,
        cluster_id=node.cluster_id,
        controller_id=_controller_id(node),
        brokers=tuple(
            make(broker_cls, broker_id=broker_id, host=host, port=port, rack=rack, is_fenced=fenced)
            for broker_id, host, port, rack, fenced in _broker_rows(
                node, ctx, include_fenced=bool(getattr(req, "include_fenced_brokers", False)))
        ),
        cluster_authorized_operations=cluster_authorized_operations(node, ctx)
        if req.include_cluster_authorized_operations else _OPS_UNSET,
    )


def _controller_id(node: BrokerNode) -> int:
    """What a KRaft broker tells clients: a live broker (Kafka picks a random one), here itself.

    Clients send admin requests to the "controller"; any broker forwards them to the
    active controller, and this one is certainly alive. DescribeQuorum names the raft leader.
    """
    return node.node_id


# DescribeTopicPartitions (API 75, KIP-966): Metadata's topic part, paged. The broker caps the
# client's response_partition_limit at max.request.partition.size.limit (Kafka's default 2000).
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000


def handle_describe_topic_partitions(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """Kafka's DescribeTopicPartitionsRequestHandler: the requested topics (or, with none named,
    every topic the principal may Describe) in name order from the cursor's topic on, partitions
    from the cursor's partition on, at most `response_partition_limit` partitions in all; where
    the limit cuts, `next_cursor` names the first topic partition left out. A named topic the
    principal may not Describe is TOPIC_AUTHORIZATION_FAILED (never counted against the limit).
    Each partition carries its eligible leader replicas and last-known ELR (KIP-966)."""
    resp_cls = _resp_cls(ctx)
    topic_cls = nested(resp_cls, "DescribeTopicPartitionsResponseTopic")
    part_cls = nested(resp_cls, "DescribeTopicPartitionsResponsePartition")
    image = node.image
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if cursor is not None and cursor.partition_index < 0:
        # Kafka throws InvalidRequestException: its error response, INVALID_REQUEST on each topic.
        return make(resp_cls, throttle_time=NO_THROTTLE, next_cursor=None, topics=tuple(
            make(topic_cls, error_code=ErrorCode.invalid_request, name=t.name, topic_id=uuid_from_str(None),
                 is_internal=False, partitions=(), topic_authorized_operations=_OPS_UNSET) for t in req.topics))
    fetch_all = not req.topics
    names = image.topics_by_name.keys() if fetch_all else {t.name for t in req.topics}
    check = checker(node, ctx, log_denials=not fetch_all)
    denied: list[Any] = []
    allowed: list[str] = []
    for name in sorted(n for n in names if n >= cursor_topic):
        if check is None or check(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            allowed.append(name)
        elif not fetch_all:
            denied.append(make(topic_cls, error_code=ErrorCode.topic_authorization_failed, name=name,
                               topic_id=uuid_from_str(None), is_internal=False, partitions=(),
                               topic_authorized_operations=_OPS_UNSET))
    live = live_brokers(node, image)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
    next_cursor = None
    topics: list[Any] = []
    for name in allowed:
        if remaining == 0:  # the previous topic filled the page: the next one starts the next page
            next_cursor = make(nested(resp_cls, "Cursor"), topic_name=name, partition_index=0)
            break
        t = image.topics_by_name.get(name)
        if t is None:
            if not fetch_all:
                error = ErrorCode.unknown_topic_or_partition if validate_topic_name(name) is None else ErrorCode.invalid_topic_exception
                topics.append(make(topic_cls, error_code=error, name=name, topic_id=uuid_from_str(None),
                                   is_internal=name in INTERNAL_TOPICS, partitions=(),
                                   topic_authorized_operations=_OPS_UNSET))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        ordered = [p for p in _by_id(t) if p.partition_id >= start]
        page, rest = ordered[:remaining], ordered[remaining:]
        remaining -= len(page)
        if rest:
            next_cursor = make(nested(resp_cls, "Cursor"), topic_name=name, partition_index=rest[0].partition_id)
        parts = [
            make(part_cls, error_code=error, partition_index=index, leader_id=leader, leader_epoch=epoch,
                 replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline,
                 eligible_leader_replicas=p.elr, last_known_elr=p.last_known_elr)
            for (error, index, leader, epoch, replicas, isr, offline), p in zip(
                partition_rows(node, live, name, page), page, strict=True)
        ]
        topics.append(make(
            topic_cls, error_code=ErrorCode.none, name=name, topic_id=uuid_from_str(t.topic_id),
            is_internal=name in INTERNAL_TOPICS, partitions=tuple(parts),
            topic_authorized_operations=authorized_operations(node, ctx, ResourceType.TOPIC, name),
        ))
        if rest:
            break
    return make(resp_cls, throttle_time=NO_THROTTLE, topics=(*topics, *denied), next_cursor=next_cursor)
