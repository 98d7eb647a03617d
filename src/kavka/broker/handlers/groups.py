"""The classic group protocol's APIs: thin translations between kio messages and the group coordinator.

JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
OffsetCommit (8), OffsetFetch (9), ListGroups (16), DescribeGroups (15),
DeleteGroups (42), OffsetDelete (47), and KIP-848's ConsumerGroupHeartbeat
(68), which names topics by id on the wire. The rules live in
`coordinator.group`; the waits and the log writes in `coordinator.manager`
(reached as `node.groups`). Version differences handled here:

- JoinGroup v4+ gets MEMBER_ID_REQUIRED for an unknown member (KIP-394);
  v0 has no rebalance timeout (the session timeout stands in, as in Kafka);
  v7+ carries protocol_type/name (nullable), older versions a plain string.
- LeaveGroup v0-v2 names one member; v3+ a batch (KIP-345), per-member errors.
- OffsetFetch v8+ batches groups (KIP-709); v2+ accepts null topics (all); v7+ with
  require_stable answers UNSTABLE_OFFSET_COMMIT for a partition an open transaction holds an
  offset for (KIP-447).
- TxnOffsetCommit (28, v0-v4): a transactional producer's offsets, held pending until the
  transaction's marker (coordinator.manager.commit_txn_offsets); Write on the TransactionalId,
  Read on the Group, Read on each topic.

Authorization (broker.api_authorization, Kafka's KafkaApis): Join/Sync/Heartbeat/Leave,
OffsetCommit and ConsumerGroupHeartbeat need Read on the Group, OffsetFetch and DescribeGroups
Describe, DeleteGroups and OffsetDelete Delete, else GROUP_AUTHORIZATION_FAILED. Then per topic:
OffsetCommit and OffsetDelete need Read (TOPIC_AUTHORIZATION_FAILED on its partitions); OffsetFetch
Describe (a named topic's partitions TOPIC_AUTHORIZATION_FAILED, left out of an all-topics answer).
ListGroups lists every group with Describe on the Cluster, else only those with Describe on the
Group. DescribeGroups v3+ fills KIP-430's authorized_operations when asked.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import authorized_operations, checker
from kavka.common import AclOperation, ResourceType, TopicPartition
from kavka.coordinator.group import OffsetAndMetadata
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested, uuid_from_str, uuid_to_str

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

# DescribeGroups v3+: "authorized operations not requested" (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000) if hasattr(td, "total_seconds") else int(td)


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0]


def _resp(ctx: RequestContext) -> type:
    return api.response_schema(ctx.api_key, ctx.api_version)


def _allowed(node: BrokerNode, ctx: RequestContext) -> Any:
    """(operation, resource type, name) -> allowed; always True without an authorizer."""
    check = checker(node, ctx)
    return (lambda _op, _rt, _name: True) if check is None else check


def _group_allowed(node: BrokerNode, ctx: RequestContext, op: AclOperation, group_id: str) -> bool:
    return bool(_allowed(node, ctx)(op, ResourceType.GROUP, group_id))


async def handle_join_group(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    if not _group_allowed(node, ctx, AclOperation.READ, req.group_id):
        return make(_resp(ctx), throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                    generation_id=-1, protocol_type=None, protocol_name=None if ctx.api_version >= 7 else "",
                    leader="", skip_assignment=False, member_id="", members=())
    session = _ms(req.session_timeout)
    rebalance = _ms(req.rebalance_timeout) if hasattr(req, "rebalance_timeout") else session
    result = await node.groups.join_group(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=ctx.api_version >= 4,
    )
    cls = _resp(ctx)
    member_cls = nested(cls, "JoinGroupResponseMember")
    nullable = ctx.api_version >= 7
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type if nullable else None,
        protocol_name=result.protocol_name if nullable else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            make(member_cls, member_id=mid, group_instance_id=iid, metadata=meta) for mid, iid, meta in result.members
        ),
    )


async def handle_sync_group(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    if not _group_allowed(node, ctx, AclOperation.READ, req.group_id):
        return make(_resp(ctx), throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                    protocol_type=None, protocol_name=None, assignment=b"")
    result = await node.groups.sync_group(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id,
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignments=[(a.member_id, a.assignment) for a in req.assignments],
    )
    return make(
        _resp(ctx),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle_heartbeat(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    if not _group_allowed(node, ctx, AclOperation.READ, req.group_id):
        return make(_resp(ctx), throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed)
    error = node.groups.heartbeat(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id,
    )
    return make(_resp(ctx), throttle_time=NO_THROTTLE, error_code=error)


def handle_leave_group(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    if not _group_allowed(node, ctx, AclOperation.READ, req.group_id):
        return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed, members=())
    if ctx.api_version < 3:
        _top, errors = node.groups.leave_group(req.group_id, [(req.member_id, None)])
        return make(cls, throttle_time=NO_THROTTLE, error_code=errors[0])
    members = [(m.member_id, m.group_instance_id) for m in req.members]
    top, errors = node.groups.leave_group(req.group_id, members)
    member_cls = nested(cls, "MemberResponse")
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=top,
        members=tuple(
            make(member_cls, member_id=mid, group_instance_id=iid, error_code=err)
            for (mid, iid), err in zip(members, errors, strict=True)
        ),
    )


def _partition_exists(node: BrokerNode) -> Any:
    image = node.image

    def exists(topic: str, partition: int) -> bool:
        t = image.topics_by_name.get(topic)
        return t is not None and partition in t.partitions

    return exists


async def handle_offset_commit(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    allowed = _allowed(node, ctx)
    refused: dict[tuple[str, int], ErrorCode] = {}
    if not allowed(AclOperation.READ, ResourceType.GROUP, req.group_id):
        refused = {(t.name, p.partition_index): ErrorCode.group_authorization_failed
                   for t in req.topics for p in t.partitions}
    else:
        for t in req.topics:
            if not allowed(AclOperation.READ, ResourceType.TOPIC, t.name):
                refused.update({(t.name, p.partition_index): ErrorCode.topic_authorization_failed for p in t.partitions})
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for t in req.topics:
        for p in t.partitions:
            if (t.name, p.partition_index) in refused:
                continue
            offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata or "",
            )
    errors: dict[tuple[str, int], ErrorCode] = dict(refused)
    if offsets or not refused:
        errors.update(await node.groups.commit_offsets(
            group_id=req.group_id,
            generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id,
            offsets=offsets,
            partition_exists=_partition_exists(node),
            # OffsetCommit v9+ names an unknown group GROUP_ID_NOT_FOUND; older versions keep
            # ILLEGAL_GENERATION (Kafka 4's OffsetMetadataManager.validateOffsetCommit).
            unknown_group_error=(ErrorCode.group_id_not_found if ctx.api_version >= 9
                                 else ErrorCode.illegal_generation),
        ))
    cls = _resp(ctx)
    topic_cls = nested(cls, "OffsetCommitResponseTopic")
    part_cls = nested(cls, "OffsetCommitResponsePartition")
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            make(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    make(part_cls, partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


async def handle_txn_offset_commit(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """TxnOffsetCommit (API 28, v0-v5): a transactional producer's offsets for a group, held
    pending by the group coordinator until the transaction's marker (KIP-98; v3+ carry the
    consumer's generation, member id and instance id for KIP-447's checks). v5 is transactions v2
    (KIP-890 part 2): no AddOffsetsToTxn came first, so the group's __consumer_offsets partition is
    added to the transaction here, before the offsets are written. Authorization as Kafka's
    KafkaApis: Write on the TransactionalId, Read on the Group, Read on each topic."""
    allowed = _allowed(node, ctx)
    every = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    refused: dict[tuple[str, int], ErrorCode] = {}
    if not allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        refused = dict.fromkeys(every, ErrorCode.transactional_id_authorization_failed)
    elif not allowed(AclOperation.READ, ResourceType.GROUP, req.group_id):
        refused = dict.fromkeys(every, ErrorCode.group_authorization_failed)
    else:
        exists = _partition_exists(node)
        for t in req.topics:
            if not allowed(AclOperation.READ, ResourceType.TOPIC, t.name):
                refused.update({(t.name, p.partition_index): ErrorCode.topic_authorization_failed for p in t.partitions})
            elif node.image.topics_by_name.get(t.name) is None:
                refused.update({(t.name, p.partition_index): ErrorCode.unknown_topic_or_partition for p in t.partitions})
            else:
                refused.update({(t.name, p.partition_index): ErrorCode.unknown_topic_or_partition
                                for p in t.partitions if not exists(t.name, p.partition_index)})
    offsets = {
        (t.name, p.partition_index): OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                       p.committed_metadata or "")
        for t in req.topics for p in t.partitions if (t.name, p.partition_index) not in refused
    }
    errors: dict[tuple[str, int], ErrorCode] = dict(refused)
    if offsets and ctx.api_version >= 5:
        added = await _add_offsets_partition(node, req)
        if added != ErrorCode.none:
            errors.update(dict.fromkeys(offsets, added))
            offsets = {}
    if offsets:
        errors.update(await node.groups.commit_txn_offsets(
            group_id=req.group_id,
            producer_id=int(req.producer_id),
            producer_epoch=int(req.producer_epoch),
            generation_id=int(getattr(req, "generation_id", -1)),
            member_id=str(getattr(req, "member_id", "")),
            group_instance_id=getattr(req, "group_instance_id", None),
            offsets=offsets,
            partition_exists=_partition_exists(node),
        ))
    if ctx.api_version < 2:  # PRODUCER_FENCED came with v2
        errors = {tp: ErrorCode.invalid_producer_epoch if e == ErrorCode.producer_fenced else e
                  for tp, e in errors.items()}
    cls = _resp(ctx)
    topic_cls = nested(cls, "TxnOffsetCommitResponseTopic")
    part_cls = nested(cls, "TxnOffsetCommitResponsePartition")
    return make(cls, throttle_time=NO_THROTTLE, topics=tuple(
        make(topic_cls, name=t.name, partitions=tuple(
            make(part_cls, partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
            for p in t.partitions))
        for t in req.topics))


async def _add_offsets_partition(node: BrokerNode, req: Any) -> ErrorCode:
    """Transactions v2: add the group's __consumer_offsets partition to the producer's transaction
    (what AddOffsetsToTxn did in v1), through the transaction coordinator as a partition leader
    adds a partition for Produce v12 (BrokerNode.verify_txn_partitions with add)."""
    from kavka.coordinator.records import OFFSETS_TOPIC, partition_for

    n = node._topic_partition_count(OFFSETS_TOPIC)
    if not n:
        return ErrorCode.coordinator_not_available
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(str(req.group_id), n))
    got = await node.verify_txn_partitions(str(req.transactional_id), int(req.producer_id),
                                           int(req.producer_epoch), [tp], add=True)
    return got.get(tp, ErrorCode.invalid_txn_state)


def _fetch_group(node: BrokerNode, group_id: str, topics: Any,
                 may_describe: Any) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None | ErrorCode]]]]:
    """A group's committed offsets by topic; a topic the principal may not Describe is left out of
    an all-topics answer, and a named one answers TOPIC_AUTHORIZATION_FAILED (Kafka's
    fetchOffsetsForGroup / fetchAllOffsetsForGroup)."""
    refused = [] if topics is None else [t for t in topics if not may_describe(t.name)]
    asked = None if topics is None else [t for t in topics if may_describe(t.name)]
    wanted = None if asked is None else [(t.name, p) for t in asked for p in t.partition_indexes]
    found = node.groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None | ErrorCode]]] = {}
    if asked is not None:
        for t in asked:
            by_topic.setdefault(t.name, [])
    for (topic, partition), om in found.items():
        if topics is None and not may_describe(topic):
            continue
        by_topic.setdefault(topic, []).append((partition, om))
    for t in refused:
        by_topic[t.name] = [(p, ErrorCode.topic_authorization_failed) for p in t.partition_indexes]
    return list(by_topic.items())


def handle_offset_fetch(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    if ctx.api_version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        topic_cls = nested(cls, "OffsetFetchResponseTopics")
        part_cls = nested(cls, "OffsetFetchResponsePartitions")
    else:
        topic_cls = nested(cls, "OffsetFetchResponseTopic")
        part_cls = nested(cls, "OffsetFetchResponsePartition")

    allowed = _allowed(node, ctx)

    def may_describe(topic: str) -> bool:
        return bool(allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic))

    # KIP-447: a consumer asking for stable offsets (v7+) is told UNSTABLE_OFFSET_COMMIT for a
    # partition an open transaction holds an offset for; it retries until the marker.
    require_stable = ctx.api_version >= 7 and bool(getattr(req, "require_stable", False))

    def partition(p: int, om: OffsetAndMetadata | None | ErrorCode) -> Any:
        if isinstance(om, ErrorCode):
            return make(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                        metadata="", error_code=om)
        return make(part_cls, partition_index=p, committed_offset=om.offset if om else -1,
                    committed_leader_epoch=om.leader_epoch if om else -1, metadata=om.metadata if om else "",
                    error_code=ErrorCode.none)

    def topics_of(group_id: str, topics: Any) -> tuple[Any, ...]:
        def stable(name: str, p: int, om: OffsetAndMetadata | None | ErrorCode) -> OffsetAndMetadata | None | ErrorCode:
            if require_stable and not isinstance(om, ErrorCode) and node.groups.has_pending_txn_offset(group_id, (name, p)):
                return ErrorCode.unstable_offset_commit
            return om

        return tuple(
            make(topic_cls, name=name, partitions=tuple(partition(p, stable(name, p, om)) for p, om in parts))
            for name, parts in _fetch_group(node, group_id, topics, may_describe)
        )

    def error_of(group_id: str) -> ErrorCode:
        if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed
        return ErrorCode.none if node.groups.owns(group_id) else ErrorCode.not_coordinator

    if ctx.api_version >= 8:
        return make(
            cls,
            throttle_time=NO_THROTTLE,
            groups=tuple(
                make(
                    group_cls,
                    group_id=g.group_id,
                    topics=topics_of(g.group_id, g.topics) if error_of(g.group_id) == ErrorCode.none else (),
                    error_code=error_of(g.group_id),
                )
                for g in req.groups
            ),
        )
    error = error_of(req.group_id)
    if error != ErrorCode.none and ctx.api_version >= 2:
        return make(cls, throttle_time=NO_THROTTLE, topics=(), error_code=error)
    if error == ErrorCode.group_authorization_failed:
        # v0-v1 have no top-level error code: every asked partition carries it (Kafka's
        # OffsetFetchResponse for old versions).
        return make(cls, throttle_time=NO_THROTTLE, topics=tuple(
            make(topic_cls, name=t.name, partitions=tuple(partition(p, error) for p in t.partition_indexes))
            for t in req.topics or ()))
    return make(cls, throttle_time=NO_THROTTLE, topics=topics_of(req.group_id, req.topics), error_code=ErrorCode.none)


def handle_list_groups(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    listed = nested(cls, "ListedGroup")
    groups = node.groups.list_groups(req.states_filter or ())
    quiet = checker(node, ctx, log_denials=False)  # a filter, not a refusal: Kafka logs none of these
    allowed = (lambda _op, _rt, _name: True) if quiet is None else quiet
    if not allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        groups = [g for g in groups if allowed(AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(make(listed, group_id=g, protocol_type=pt, group_state=st) for g, pt, st in groups),
    )


def handle_describe_groups(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    group_cls = nested(cls, "DescribedGroup")
    member_cls = nested(cls, "DescribedGroupMember")
    out = []
    allowed = _allowed(node, ctx)
    for group_id in req.groups:
        if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(make(group_cls, error_code=ErrorCode.group_authorization_failed, group_id=group_id,
                            group_state="", protocol_type="", protocol_data="", members=(),
                            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        d = node.groups.describe_group(group_id)
        out.append(
            make(
                group_cls,
                error_code=ErrorCode.invalid_group_id if not group_id else ErrorCode.none,
                group_id=group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_name,
                members=tuple(
                    make(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ),
                authorized_operations=authorized_operations(node, ctx, ResourceType.GROUP, group_id)
                if req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return make(cls, throttle_time=NO_THROTTLE, groups=tuple(out))


# ConsumerGroupDescribe's MemberType (v1): a member of the consumer protocol (0 would be classic).
_CONSUMER_MEMBER_TYPE = 1


def handle_consumer_group_describe(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """ConsumerGroupDescribe (API 69, KIP-848): each consumer-protocol group with its epochs and
    each member's current and target assignment. A group the principal may not Describe is
    GROUP_AUTHORIZATION_FAILED; one that is not a consumer-protocol group GROUP_ID_NOT_FOUND."""
    cls = _resp(ctx)
    group_cls, member_cls = nested(cls, "DescribedGroup"), nested(cls, "Member")
    assign_cls, tp_cls = nested(cls, "Assignment"), nested(cls, "TopicPartitions")
    allowed = _allowed(node, ctx)
    image = node.image

    def assignment(tps: Any) -> Any:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(tps):
            by_topic.setdefault(topic, []).append(p)
        return make(assign_cls, topic_partitions=tuple(
            make(tp_cls, topic_id=uuid_from_str(image.topics_by_name[t].topic_id), topic_name=t, partitions=tuple(ps))
            for t, ps in by_topic.items() if t in image.topics_by_name))

    def failed(group_id: str, error: ErrorCode, message: str | None) -> Any:
        return make(group_cls, error_code=error, error_message=message, group_id=group_id, group_state="",
                    group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    out = []
    for group_id in req.group_ids:
        if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(failed(group_id, ErrorCode.group_authorization_failed, None))
            continue
        g = node.groups.consumer_group_describe(group_id)
        if g == ErrorCode.group_id_not_found:
            out.append(failed(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."))
            continue
        if isinstance(g, ErrorCode):
            out.append(failed(group_id, g, None))
            continue
        assignors = [m.assignor for m in g.members.values() if m.assignor]
        out.append(make(
            group_cls, error_code=ErrorCode.none, error_message=None, group_id=group_id, group_state=g.state,
            group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
            assignor_name=max(set(assignors), key=assignors.count) if assignors else "uniform",
            members=tuple(
                make(member_cls, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                     member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                     subscribed_topic_names=tuple(m.subscribed), subscribed_topic_regex=None,
                     assignment=assignment(m.assigned), target_assignment=assignment(g.target.get(m.member_id, ())),
                     member_type=_CONSUMER_MEMBER_TYPE)
                for m in g.members.values()),
            authorized_operations=authorized_operations(node, ctx, ResourceType.GROUP, group_id)
            if req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED,
        ))
    return make(cls, throttle_time=NO_THROTTLE, groups=tuple(out))


def handle_delete_groups(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    result_cls = nested(cls, "DeletableGroupResult")
    allowed = _allowed(node, ctx)
    permitted = [g for g in req.groups_names if allowed(AclOperation.DELETE, ResourceType.GROUP, g)]
    errors = dict.fromkeys(req.groups_names, ErrorCode.group_authorization_failed)
    if permitted:
        errors.update(node.groups.delete_groups(permitted))
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(make(result_cls, group_id=g, error_code=errors[g]) for g in req.groups_names),
    )


def handle_offset_delete(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = _resp(ctx)
    topic_cls = nested(cls, "OffsetDeleteResponseTopic")
    part_cls = nested(cls, "OffsetDeleteResponsePartition")
    allowed = _allowed(node, ctx)
    if not allowed(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed, topics=())
    readable = {t.name for t in req.topics if allowed(AclOperation.READ, ResourceType.TOPIC, t.name)}
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name in readable]
    exists = _partition_exists(node)
    known = [tp for tp in wanted if exists(*tp)]
    top, errors = node.groups.delete_offsets(req.group_id, known)
    errors = {**errors, **{(t.name, p.partition_index): ErrorCode.topic_authorization_failed
                           for t in req.topics if t.name not in readable for p in t.partitions}}
    if top != ErrorCode.none:
        return make(cls, throttle_time=NO_THROTTLE, error_code=top, topics=())
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        topics=tuple(
            make(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=p.partition_index,
                        error_code=errors.get((t.name, p.partition_index), ErrorCode.unknown_topic_or_partition),
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
    )


async def handle_consumer_group_heartbeat(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    if not _group_allowed(node, ctx, AclOperation.READ, req.group_id):
        # getErrorResponse(Errors.GROUP_AUTHORIZATION_FAILED.exception): the error's own message
        return make(_resp(ctx), throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                    error_message="Group authorization failed.", member_id=None, member_epoch=0, heartbeat_interval=timedelta(0),
                    assignment=None)
    image = node.image
    owned = None
    if req.topic_partitions is not None:
        names = []
        for t in req.topic_partitions:
            topic = image.topics_by_id.get(uuid_to_str(t.topic_id))
            if topic is not None:
                names.extend((topic.name, p) for p in t.partitions)
        owned = frozenset(names)
    result = await node.groups.consumer_group_heartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=_ms(req.rebalance_timeout),
        subscribed_topic_names=req.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
    )
    cls = _resp(ctx)
    assignment = None
    if result.assignment is not None:
        assign_cls = nested(cls, "Assignment")
        tp_cls = nested(cls, "TopicPartitions")
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(result.assignment):
            by_topic.setdefault(topic, []).append(p)
        assignment = make(
            assign_cls,
            topic_partitions=tuple(
                make(tp_cls, topic_id=uuid_from_str(image.topics_by_name[t].topic_id), partitions=tuple(ps))
                for t, ps in by_topic.items()
                if t in image.topics_by_name
            ),
        )
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )
