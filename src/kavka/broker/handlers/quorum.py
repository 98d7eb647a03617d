"""DescribeQuorum (API 55): the metadata quorum as its leader sees it (kafka-metadata-quorum.sh describe).

Any node answers: the raft leader describes itself, every other node asks it
over the controller listener (broker.controller_rpc) and relays the answer in
the client's version.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.protocol import api
from kavka.protocol.messages import make, nested

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


async def handle_describe_quorum(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    try:
        answer = await node.controller.describe_quorum()
    except UNAVAILABLE as e:
        return make(resp_cls, error_code=ErrorCode.request_timed_out, error_message=str(e), topics=(), nodes=())
    return _in_version(answer, resp_cls)
