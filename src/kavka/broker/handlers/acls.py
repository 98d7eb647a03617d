"""DescribeAcls (API 29), CreateAcls (API 30) and DeleteAcls (API 31), Kafka's AclApis.

Without `authorizer.class.name` every one is answered SECURITY_DISABLED ("No Authorizer is
configured on the broker" / "No Authorizer is configured."), as Kafka's broker does. With it:
Describe is answered by any broker from its own metadata image (ACLs grouped by resource
pattern); Create and Delete are forwarded to the active controller (node.controller), which
decides them (controller.acl_control) and commits the records, and the broker answers once its
own image shows the change, so a Describe through it sees it next. The request's raw enum codes
pass through: a code Kafka does not know is UNKNOWN, refused with INVALID_REQUEST by the
controller's checks. Called on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kavka.authorizer import Acl, AclFilter
from kavka.common import AclOperation, AclPermissionType, ErrorCode, PatternType, ResourceType
from kavka.controller.acl_control import AclResult, describe_acls
from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

NO_AUTHORIZER = "No Authorizer is configured."


def _enum(cls: type[Any], code: int) -> Any:
    """Kafka's fromCode: a code it does not know is UNKNOWN."""
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


def creation_acl(c: Any) -> Acl:
    return Acl(
        _enum(ResourceType, c.resource_type), c.resource_name,
        # v0 has no pattern type: LITERAL (kio's default for the field)
        _enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
        c.principal, c.host, _enum(AclOperation, c.operation), _enum(AclPermissionType, c.permission_type),
    )


def request_filter(f: Any) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        f.principal_filter, f.host_filter, _enum(AclOperation, f.operation), _enum(AclPermissionType, f.permission_type),
    )


def _grouped(acls: Iterable[Acl]) -> dict[tuple[int, str, int], list[Acl]]:
    out: dict[tuple[int, str, int], list[Acl]] = {}
    for a in acls:
        out.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(a)
    return out


def handle_describe_acls(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = api.response_schema(ctx.api_key, ctx.api_version)
    if node.authorizer() is None:
        return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.security_disabled,
                    error_message="No Authorizer is configured on the broker", resources=())
    result = describe_acls(node.image, request_filter(req))
    res_cls, acl_cls = nested(cls, "DescribeAclsResource"), nested(cls, "AclDescription")
    resources = tuple(
        make(res_cls, resource_type=rt, resource_name=name, pattern_type=pt, acls=tuple(
            acl_cls(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type)
            for a in acls))
        for (rt, name, pt), acls in _grouped(result.acls).items()
    )
    return make(cls, throttle_time=NO_THROTTLE, error_code=result.error, error_message=result.message, resources=resources)


def _failed(e: BaseException, n: int) -> list[AclResult]:
    failed = unavailable_result(e)  # type: ignore[arg-type]
    return [AclResult(failed.error, failed.message)] * n


async def handle_create_acls(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = api.response_schema(ctx.api_key, ctx.api_version)
    acls = [creation_acl(c) for c in req.creations]
    if node.authorizer() is None:
        results = [AclResult(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(acls)
    else:
        results = await create_acls(node.controller, acls)
    return create_acls_response(cls, results)


async def create_acls(controller: Any, acls: Sequence[Acl]) -> list[AclResult]:
    """Each binding's result, decided by `controller` (a ControllerClient on a broker, the
    QuorumController on the controller listener)."""
    try:
        return list(await controller.create_acls(acls))
    except UNAVAILABLE as e:
        return _failed(e, len(acls))


def create_acls_response(cls: type, results: Sequence[AclResult]) -> Any:
    result_cls = nested(cls, "AclCreationResult")
    return make(cls, throttle_time=NO_THROTTLE, results=tuple(
        result_cls(error_code=r.error, error_message=r.message) for r in results))


async def handle_delete_acls(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = api.response_schema(ctx.api_key, ctx.api_version)
    filters = [request_filter(f) for f in req.filters]
    if node.authorizer() is None:
        results = [AclResult(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(filters)
    else:
        results = await delete_acls(node.controller, filters)
    return delete_acls_response(cls, results)


async def delete_acls(controller: Any, filters: Sequence[AclFilter]) -> list[AclResult]:
    try:
        return list(await controller.delete_acls(filters))
    except UNAVAILABLE as e:
        return _failed(e, len(filters))


def delete_acls_response(cls: type, results: Sequence[AclResult]) -> Any:
    fr_cls, m_cls = nested(cls, "DeleteAclsFilterResult"), nested(cls, "DeleteAclsMatchingAcl")
    return make(cls, throttle_time=NO_THROTTLE, filter_results=tuple(
        fr_cls(error_code=r.error, error_message=r.message, matching_acls=tuple(
            make(m_cls, error_code=ErrorCode.none, error_message=None, resource_type=a.resource_type,
                 resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                 operation=a.operation, permission_type=a.permission_type)
            for a in r.acls))
        for r in results))
