"""SaslHandshake and SaslAuthenticate where no authentication is in progress: ILLEGAL_SASL_STATE.

On a SASL listener, broker.sasl_authenticator answers these before authentication and for a
re-authentication; what reaches these handlers is Kafka's KafkaApis case -- a SASL request on a
listener without SASL, or a SaslAuthenticate (or SaslHandshake v0) after authentication.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import make

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_sasl_handshake(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return make(api.response_schema(ctx.api_key, ctx.api_version), error_code=ErrorCode.illegal_sasl_state, mechanisms=())


def handle_sasl_authenticate(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return make(
        api.response_schema(ctx.api_key, ctx.api_version),
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime=timedelta(0),
    )
