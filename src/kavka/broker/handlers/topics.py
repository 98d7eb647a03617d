"""CreateTopics (API 19), DeleteTopics (API 20), CreatePartitions (API 37).

The controller decides and commits; these handlers translate between the
wire messages and the controller's value types, and report each topic's
outcome with Kafka's error code and message. Each counts the partitions it
creates or deletes against the client's controller_mutation_rate (KIP-599,
broker.mutation_quota) and answers with its throttle time.

Authorization happens here, on the broker that received the request, as the request's principal,
before anything is forwarded to the controller (so a forwarded request is neither refused for
nor allowed by the broker's own identity), with Kafka's ControllerApis rules: CreateTopics needs
Create on the Cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED, "Authorization failed."),
and a created topic's configs are returned only with DescribeConfigs on it (else
topic_config_error_code TOPIC_AUTHORIZATION_FAILED, KIP-525); DeleteTopics needs Describe to learn
whether a topic exists and Delete to delete it, or Delete on the Cluster for every topic;
CreatePartitions needs Alter on the topic.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import Checker, checker
from kavka.broker.mutation_quota import THROTTLED, MutationQuota, create_topics_within_quota
from kavka.common import AclOperation, ConfigSource, ResourceType
from kavka.config import TOPIC_CONFIGS
from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.replication_control import INTERNAL_TOPICS
from kavka.controller.results import ApiResult, CreatedTopic, NewTopic
from kavka.protocol import api
from kavka.protocol.messages import make, nested, uuid_from_str, uuid_to_str

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


# The request-to-controller halves below are shared with the controller listener
# (broker.controller_client.ControllerApis): `controller` is the node's ControllerClient here and the
# QuorumController there (the same operations and signatures).


def new_topics(req: Any) -> list[NewTopic]:
    return [
        NewTopic(
            name=t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments={a.partition_index: tuple(a.broker_ids) for a in t.assignments},
            configs={c.name: c.value for c in t.configs},
        )
        for t in req.topics
    ]


async def create_topics(controller: Any, specs: list[NewTopic], *, validate_only: bool) -> list[CreatedTopic]:
    try:
        return list(await controller.create_topics(specs, validate_only=validate_only))
    except UNAVAILABLE as e:
        return [CreatedTopic(s.name, unavailable_result(e)) for s in specs]


async def create_partitions(controller: Any, req: Any, topics: Any = None) -> list[tuple[str, ApiResult]]:
    """`topics`: the request's topics to create partitions for (default: all of them)."""
    out = []
    for t in req.topics if topics is None else topics:
        assignments = [tuple(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            r = await controller.create_partitions(t.name, t.count, assignments, validate_only=req.validate_only)
        except UNAVAILABLE as e:
            r = unavailable_result(e)
        out.append((t.name, r))
    return out


AUTHORIZATION_FAILED = "Authorization failed."  # CreateTopics' message (ControllerApis.createTopics)
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."  # Errors.TOPIC_AUTHORIZATION_FAILED's own


def _allows(check: Checker | None, op: AclOperation, topic: str) -> bool:
    return check is None or check(op, ResourceType.TOPIC, topic)


async def handle_create_topics(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    result_cls = nested(resp_cls, "CreatableTopicResult")
    cfg_cls = nested(resp_cls, "CreatableTopicConfigs") if ctx.api_version >= 5 else None
    check = checker(node, ctx)
    quiet = checker(node, ctx, log_denials=False)  # ControllerApis asks these with logIfDenied=false
    cluster_create = quiet is None or quiet(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    all_specs = new_topics(req)
    permitted = [cluster_create or _allows(check, AclOperation.CREATE, s.name) for s in all_specs]
    specs = [s for s, ok in zip(all_specs, permitted, strict=True) if ok]
    quota = MutationQuota(node.client_quotas, ctx)
    if not specs:
        results: list[CreatedTopic] = []
    elif req.validate_only:
        results = await create_topics(node.controller, specs, validate_only=True)
    else:
        results = await create_topics_within_quota(
            quota, specs, node.config["num.partitions"], lambda admitted: create_topics(node.controller, admitted, validate_only=False)
        )
    answered = iter(results)
    out = []
    image = node.image
    for spec, ok in zip(all_specs, permitted, strict=True):
        if not ok:
            out.append(make(result_cls, name=spec.name, topic_id=uuid_from_str(None),
                            error_code=ErrorCode.topic_authorization_failed, error_message=AUTHORIZATION_FAILED,
                            topic_config_error_code=ErrorCode.none, num_partitions=-1, replication_factor=-1,
                            configs=None))
            continue
        r = next(answered)
        configs = None
        config_error = ErrorCode.none
        if cfg_cls is not None and r.result.ok and not _allows(quiet, AclOperation.DESCRIBE_CONFIGS, spec.name):
            config_error = ErrorCode.topic_authorization_failed
        elif cfg_cls is not None and r.result.ok:
            configs = []
            for key in sorted(TOPIC_CONFIGS):
                if req.validate_only or spec.name not in image.topics_by_name:
                    raw = spec.configs.get(key)
                    if raw is not None:
                        configs.append(make(cfg_cls, name=key, value=raw, read_only=False, config_source=ConfigSource.DYNAMIC_TOPIC_CONFIG, is_sensitive=False))
                        continue
                    res = node.resolver.topic(image, "\x00no-such-topic", key)
                else:
                    res = node.resolver.topic(image, spec.name, key)
                configs.append(make(cfg_cls, name=key, value=res.rendered, read_only=False, config_source=int(res.source), is_sensitive=False))
            configs = tuple(configs)
        out.append(
            make(
                result_cls,
                name=r.name,
                topic_id=uuid_from_str(r.topic_id),
                error_code=r.result.error,
                error_message=r.result.message,
                topic_config_error_code=config_error,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
                configs=configs,
            )
        )
    # A name given twice is answered once (its INVALID_REQUEST), as Kafka's ControllerApis does.
    seen: set[str] = set()
    out = [t for t in out if not (t.name in seen or seen.add(t.name))]
    return make(resp_cls, throttle_time=quota.throttle_time(), topics=tuple(out))


async def handle_delete_topics(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    res_cls = nested(resp_cls, "DeletableTopicResult")
    image = node.image
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    results = []
    to_delete = []
    check = checker(node, ctx)
    # Delete on the Cluster stands for Describe and Delete on every topic (ControllerApis; not logged).
    quiet = checker(node, ctx, log_denials=False)
    if quiet is not None and quiet(AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME):
        check = None
    for name, tid in wanted:
        error, message = ErrorCode.none, None
        t = None
        if name is not None:
            t = image.topics_by_name.get(name)
            if not _allows(check, AclOperation.DESCRIBE, name):
                # Without Describe the caller may not learn whether the topic exists (ControllerApis).
                error, message, t = ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED, None
            elif t is None:
                # Kafka's ApiError falls back to the error's own message.
                error, message = ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        elif tid is not None:
            t = image.topics_by_id.get(uuid_to_str(tid))
            if t is None:
                error, message = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
            elif not _allows(check, AclOperation.DESCRIBE, t.name):
                error, message, t = ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED, None
                name = None  # nor its name, asked by id
        else:
            error, message = ErrorCode.invalid_request, "neither topic name nor id given"
        if t is not None and not _allows(check, AclOperation.DELETE, t.name):
            error, message, name, t = ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED, t.name, None
        if t is not None:
            if not node.config["delete.topic.enable"]:
                error, message, t = ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.", None
            elif t.name in INTERNAL_TOPICS:
                error, message, t = ErrorCode.invalid_request, f"Cannot delete internal topic {t.name}", None
        if t is not None and t not in to_delete:
            to_delete.append(t)
        results.append(
            make(
                res_cls,
                name=t.name if t is not None else name,
                topic_id=uuid_from_str(t.topic_id) if t is not None else (tid or uuid_from_str(None)),
                error_code=error,
                error_message=message,
            )
        )
    quota = MutationQuota(node.client_quotas, ctx)
    to_delete, refused = quota.admit(to_delete, lambda t: len(t.partitions))
    if refused:
        names = {t.name for t in refused}
        results = [
            dataclasses.replace(r, error_code=THROTTLED.error, error_message=THROTTLED.message) if r.name in names else r
            for r in results
        ]
    try:
        await node.controller.delete_topics(to_delete)
    except UNAVAILABLE as e:
        quota.refund(sum(len(t.partitions) for t in to_delete))
        failed = unavailable_result(e)
        names = {t.name for t in to_delete}
        results = [
            dataclasses.replace(r, error_code=failed.error, error_message=failed.message) if r.name in names else r
            for r in results
        ]
    return make(resp_cls, throttle_time=quota.throttle_time(), responses=tuple(results))


async def handle_create_partitions(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    res_cls = nested(resp_cls, "CreatePartitionsTopicResult")
    check = checker(node, ctx)
    refused = {t.name for t in req.topics if not _allows(check, AclOperation.ALTER, t.name)}
    quota = MutationQuota(node.client_quotas, ctx)
    image = node.image

    def added(t: Any) -> int:  # the partitions a CreatePartitions topic adds
        topic = image.topics_by_name.get(t.name)
        return max(0, t.count - len(topic.partitions)) if topic is not None else 0

    permitted = [t for t in req.topics if t.name not in refused]
    admitted, _ = quota.admit(permitted, added) if not req.validate_only else (permitted, [])
    outcomes = iter(await create_partitions(node.controller, req, admitted) if admitted else [])
    taken = {id(t) for t in admitted}
    results = []
    for t in req.topics:
        if t.name in refused:
            results.append(make(res_cls, name=t.name, error_code=ErrorCode.topic_authorization_failed, error_message=None))
            continue
        r = next(outcomes)[1] if id(t) in taken else THROTTLED
        if id(t) in taken and not r.ok:
            quota.refund(added(t))
        results.append(make(res_cls, name=t.name, error_code=r.error, error_message=r.message))
    return make(resp_cls, throttle_time=quota.throttle_time(), results=tuple(results))
