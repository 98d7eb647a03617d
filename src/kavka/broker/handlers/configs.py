"""DescribeConfigs (API 32), AlterConfigs (API 33), IncrementalAlterConfigs (API 44).

DescribeConfigs answers every config of the resource (or the keys asked
for) with its effective value, source, read-only flag, synonyms (in
precedence order, as Kafka lists them) and, v3+, its type and documentation.
Dynamic broker configs are ConfigRecords in the metadata log: they persist
across restarts and take effect on every partition at once.

Authorization (Kafka's KafkaApis / ControllerApis): DescribeConfigs needs DescribeConfigs, the
Alter APIs AlterConfigs, on the Topic for a topic resource (else TOPIC_AUTHORIZATION_FAILED) and on
the Cluster for a broker or broker-logger resource (else CLUSTER_AUTHORIZATION_FAILED); checked
per resource on the receiving broker, as the request's principal, before anything is forwarded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import Checker, checker
from kavka.common import (
    AclOperation,
    AlterConfigOpType,
    ConfigResourceType,
    ConfigSource,
    ResourceType,
)
from kavka.config import BROKER_CONFIGS, KEYSTORE_KEYS, TOPIC_CONFIGS
from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.results import ApiResult
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.config_resolver import ResolvedConfig
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

BROKER_LOGGER_RESOURCE = 8


def config_resource_refusal(check: Checker | None, op: AclOperation, resource_type: int, name: str) -> ErrorCode | None:
    """The authorization error for one config resource, or None if allowed (Kafka's
    configsAuthorizationApiError): Topic for a topic, the Cluster for a broker or broker logger."""
    if check is None:
        return None
    if resource_type == ConfigResourceType.TOPIC:
        return None if check(op, ResourceType.TOPIC, name) else ErrorCode.topic_authorization_failed
    if resource_type in (ConfigResourceType.BROKER, BROKER_LOGGER_RESOURCE):
        return None if check(op, ResourceType.CLUSTER, CLUSTER_NAME) else ErrorCode.cluster_authorization_failed
    return None


_MESSAGES = {ErrorCode.topic_authorization_failed: "Topic authorization failed.",
             ErrorCode.cluster_authorization_failed: "Cluster authorization failed."}


def handle_describe_configs(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    result_cls = nested(resp_cls, "DescribeConfigsResult")
    entry_cls = nested(resp_cls, "DescribeConfigsResourceResult")
    syn_cls = nested(resp_cls, "DescribeConfigsSynonym")
    image = node.image
    include_synonyms = req.include_synonyms
    include_doc = req.include_documentation

    def entry(name: str, res: ResolvedConfig, read_only: bool) -> Any:
        d = res.definition
        return make(
            entry_cls,
            name=name,
            value=None if d.sensitive else res.rendered,
            read_only=read_only,
            config_source=int(res.source),
            is_default=res.source == ConfigSource.DEFAULT_CONFIG,  # v0 only
            is_sensitive=d.sensitive,
            synonyms=tuple(make(syn_cls, name=s.name, value=None if d.sensitive else s.value, source=int(s.source)) for s in res.synonyms)
            if include_synonyms
            else (),
            config_type=int(d.type),
            documentation=d.doc if include_doc else None,
        )

    results = []
    check = checker(node, ctx)
    for r in req.resources:
        keys = r.configuration_keys
        error, message, entries = ErrorCode.none, None, []
        refused = config_resource_refusal(check, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            error, message = refused, _MESSAGES[refused]
        elif r.resource_type == ConfigResourceType.TOPIC:
            if r.resource_name not in image.topics_by_name:
                error, message = ErrorCode.unknown_topic_or_partition, f"Topic {r.resource_name} does not exist"
            else:
                for key in sorted(TOPIC_CONFIGS):
                    if keys is None or key in keys:
                        entries.append(entry(key, node.resolver.topic(image, r.resource_name, key), False))
        elif r.resource_type == ConfigResourceType.BROKER:
            if r.resource_name == "":
                # The cluster-wide dynamic defaults only, as Kafka reports them.
                for key, value in sorted(image.broker_configs(None).items()):
                    if keys is None or key in keys:
                        d = BROKER_CONFIGS[key]
                        res = node.resolver.broker(image, key)
                        # Kafka's synonyms for the default resource: this broker's, less its own
                        # per-broker value (ConfigHelper, perBrokerConfig=false).
                        synonyms = tuple(
                            make(syn_cls, name=s.name, value=None if d.sensitive else s.value, source=int(s.source))
                            for s in res.synonyms if s.source != ConfigSource.DYNAMIC_BROKER_CONFIG
                        ) if include_synonyms else ()
                        entries.append(
                            make(entry_cls, name=key, value=value, read_only=False, config_source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, is_default=False, is_sensitive=False,
                                 synonyms=synonyms, config_type=int(d.type), documentation=d.doc if include_doc else None)
                        )
            elif r.resource_name != str(node.node_id):
                error, message = ErrorCode.invalid_request, f"Unexpected broker id, expected {node.node_id} or empty string, but received {r.resource_name}"
            else:
                for key in sorted(BROKER_CONFIGS):
                    if keys is None or key in keys:
                        d = BROKER_CONFIGS[key]
                        entries.append(entry(key, node.resolver.broker(image, key), not d.dynamic))
                for key, res in node.resolver.listener_ssl(image).items():  # a listener's own TLS keys
                    if keys is None or key in keys:
                        entries.append(entry(key, res, key.split(".", 3)[3] not in KEYSTORE_KEYS))
        elif r.resource_type == BROKER_LOGGER_RESOURCE:
            error, message = ErrorCode.invalid_request, "broker logger configs are not supported"
        else:
            error, message = ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
        results.append(
            make(
                result_cls,
                error_code=error,
                # Kafka answers a described resource with an empty message, not a null one.
                error_message="" if message is None and error == ErrorCode.none else message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=tuple(entries),
            )
        )
    return make(resp_cls, throttle_time=NO_THROTTLE, results=tuple(results))


async def alter_resources(controller: Any, req: Any, *, incremental: bool, precheck: Any = None) -> list[tuple[Any, ApiResult]]:
    """Each resource of an (Incremental)AlterConfigs request through `controller` -- the node's
    ControllerClient, or the QuorumController on the controller listener (broker.controller_client).
    `precheck(resource_type, resource_name, ops, validate_only=...)`: an ApiResult refusing the resource first, or None
    (the broker's check of a new keystore)."""
    out = []
    for r in req.resources:
        ops = [(c.name, c.config_operation if incremental else AlterConfigOpType.SET, c.value) for c in r.configs]
        refused = precheck(r.resource_type, r.resource_name, ops, validate_only=req.validate_only) if precheck is not None else None
        if refused is not None:
            out.append((r, refused))
            continue
        try:
            result = await controller.alter_configs(
                r.resource_type, r.resource_name, ops, incremental=incremental, validate_only=req.validate_only
            )
        except UNAVAILABLE as e:
            result = unavailable_result(e)
        out.append((r, result))
    return out


async def _alter(node: BrokerNode, ctx: RequestContext, req: Any, *, incremental: bool) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    res_cls = nested(resp_cls, "AlterConfigsResourceResponse")
    check = checker(node, ctx)

    def precheck(resource_type: int, resource_name: str, ops: Any, *, validate_only: bool) -> ApiResult | None:
        refused = config_resource_refusal(check, AclOperation.ALTER_CONFIGS, resource_type, resource_name)
        if refused is not None:
            return ApiResult(refused, None)
        return node.check_keystore_alter(resource_type, resource_name, ops, validate_only=validate_only)

    out = tuple(
        make(res_cls, error_code=result.error, error_message=result.message,
             resource_type=r.resource_type, resource_name=r.resource_name)
        for r, result in await alter_resources(node.controller, req, incremental=incremental, precheck=precheck)
    )
    return make(resp_cls, throttle_time=NO_THROTTLE, responses=out)


async def handle_alter_configs(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return await _alter(node, ctx, req, incremental=False)


async def handle_incremental_alter_configs(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return await _alter(node, ctx, req, incremental=True)
