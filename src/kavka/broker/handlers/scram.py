"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51), KIP-554.

Describe is answered by any broker from its own metadata image (Kafka's KafkaApis ->
ScramImage.describe); alter is forwarded to the active controller (node.controller), which
validates and commits it (controller.scram_control). Both take only names, mechanisms,
iterations, salts and salted passwords: no password crosses the wire, and nothing here logs one.
Called on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.alter_user_scram_credentials.v0 import response as auc_resp
from kio.schema.describe_user_scram_credentials.v0 import response as duc_resp
from kio.schema.errors import ErrorCode

from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.scram_control import (
    ScramDeletion,
    ScramUpsertion,
    UserResult,
    describe_credentials,
)
from kavka.protocol.messages import NO_THROTTLE

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_describe_user_scram_credentials(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    users = None if req.users is None else [u.name for u in req.users]
    results = tuple(
        duc_resp.DescribeUserScramCredentialsResult(
            user=r.user,
            error_code=r.error,
            error_message=r.message,
            credential_infos=tuple(duc_resp.CredentialInfo(mechanism=m, iterations=i) for m, i in r.credentials),
        )
        for r in describe_credentials(node.image, users)
    )
    return duc_resp.DescribeUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=results
    )


async def alter_user_scram_credentials(controller: Any, req: Any) -> Any:
    """The response to an AlterUserScramCredentials request, decided by `controller` (a
    ControllerClient on a broker, the QuorumController on the controller listener)."""
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)) for u in req.upsertions]
    try:
        results = await controller.alter_user_scram_credentials(deletions, upsertions)
    except UNAVAILABLE as e:
        failed = unavailable_result(e)
        names = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        results = [UserResult(n, failed.error, failed.message) for n in names]
    return auc_resp.AlterUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(auc_resp.AlterUserScramCredentialsResult(user=r.user, error_code=r.error, error_message=r.message) for r in results),
    )


async def handle_alter_user_scram_credentials(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return await alter_user_scram_credentials(node.controller, req)
