"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), KIP-546.

Describe is answered by any broker from its own metadata image (Kafka's KafkaApis ->
ClientQuotasImage.describe); alter is forwarded to the active controller (node.controller), which
validates and commits it (controller.quota_control). Called on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.quota_control import (
    QuotaAlteration,
    QuotaFilterError,
    QuotaResult,
    describe_client_quotas,
)
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_describe_client_quotas(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    cls = api.response_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, ctx.api_version)
    entry_cls, entity_cls, value_cls = nested(cls, "EntryData"), nested(cls, "EntityData"), nested(cls, "ValueData")
    components = [(c.entity_type, int(c.match_type), c.match) for c in req.components]
    try:
        found = describe_client_quotas(node.image, components, strict=req.strict)
    except QuotaFilterError as e:
        return make(cls, throttle_time=NO_THROTTLE, error_code=e.error, error_message=str(e), entries=None)
    entries = tuple(
        entry_cls(
            entity=tuple(entity_cls(entity_type=t, entity_name=n) for t, n in entity),
            values=tuple(value_cls(key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in found
    )
    return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, entries=entries)


async def alter_client_quotas(controller: Any, req: Any, version: int = 1) -> Any:
    """The response to an AlterClientQuotas request, decided by `controller` (a ControllerClient
    on a broker, the QuorumController on the controller listener)."""
    alterations = [
        QuotaAlteration(
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in req.entries
    ]
    try:
        results = await controller.alter_client_quotas(alterations, validate_only=req.validate_only)
    except UNAVAILABLE as e:
        failed = unavailable_result(e)
        results = [QuotaResult(a.entity, failed.error, failed.message) for a in alterations]
    cls = api.response_schema(ApiKey.ALTER_CLIENT_QUOTAS, version)
    entry_cls, entity_cls = nested(cls, "EntryData"), nested(cls, "EntityData")
    return make(
        cls,
        throttle_time=NO_THROTTLE,
        entries=tuple(
            entry_cls(
                error_code=r.error,
                error_message=r.message,
                entity=tuple(entity_cls(entity_type=t, entity_name=n) for t, n in r.entity),
            )
            for r in results
        ),
    )


async def handle_alter_client_quotas(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return await alter_client_quotas(node.controller, req, ctx.api_version)
