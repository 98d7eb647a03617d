"""InitProducerId (API 22) for idempotent producers.

Producer ids come in blocks from the controller (a ProducerIdsRecord in the
metadata log, so an id is never handed out twice, across restarts too); an
idempotent producer gets a fresh id with epoch 0, as Kafka gives one to a
producer without a transactional id. A request with a transactional id is answered by the
transaction coordinator (handlers.transactions).

Authorization (Kafka's KafkaApis.handleInitProducerIdRequest): with a transactional id, Write on
that TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, checked first, as Kafka does);
without one, IdempotentWrite on the Cluster or Write on any topic (authorizeByResourceType), else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import authorized_by_resource_type, checker
from kavka.broker.handlers.transactions import init_transactional_producer_id
from kavka.common import AclOperation, ResourceType
from kavka.controller.quorum_controller import UNAVAILABLE
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


class ProducerIdManager:
    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self._next = 0
        self._end = 0

    async def generate(self) -> int:
        if self._next >= self._end:
            self._next, self._end = await self.node.controller.allocate_producer_ids(self.node.node_id)
        pid = self._next
        self._next += 1
        return pid


async def handle_init_producer_id(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    check = checker(node, ctx)
    if req.transactional_id is None and check is not None and not check(
            AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) and not authorized_by_resource_type(
            node, ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
                    producer_id=-1, producer_epoch=-1)
    if req.transactional_id is not None:
        return await init_transactional_producer_id(node, ctx, req)
    try:
        pid = await node.producer_ids.generate()
    except UNAVAILABLE:
        # Kafka's answer while no producer id block can be had: retriable.
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.coordinator_load_in_progress, producer_id=-1, producer_epoch=-1)
    return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0)
