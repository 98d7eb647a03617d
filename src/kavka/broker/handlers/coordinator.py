"""FindCoordinator (API 10): which broker coordinates a group or a transaction.

The coordinator of a group is the leader of its `__consumer_offsets` partition, that of a
transactional id the leader of its `__transaction_state` partition; the first lookup of each
kind creates its topic, as Kafka does. The answer matters beyond groups: librdkafka turns LZ4
(and, in 2.0.x, gzip and snappy) off unless the broker advertises FindCoordinator, which is how
Kafka brokers since 0.9 look to it.

v0-v3 carry one key (`key`, `key_type` from v1); v4+ batch keys in
`coordinator_keys` and answer one `Coordinator` entry per key (KIP-699).

Authorization: a group key needs Describe on the Group, else GROUP_AUTHORIZATION_FAILED (Kafka's
KafkaApis.getCoordinator); a transaction key needs Describe on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.broker.authorization import Checker, checker
from kavka.common import AclOperation, ResourceType
from kavka.coordinator.records import OFFSETS_TOPIC
from kavka.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


@dataclass(frozen=True)
class _KeyKind:
    """What a key type needs: the Describe ACL on its resource, the topic whose partition
    leader coordinates it, and the node's coordinator (None when this node runs none)."""

    resource: ResourceType
    denied: ErrorCode
    topic: str
    coordinator: Callable[[BrokerNode], Any]  # with `partition_for(key)`
    ensure_topic: Callable[[Any], Awaitable[bool]]  # creates the topic if missing; False if that failed


_KINDS = {
    GROUP_KEY_TYPE: _KeyKind(ResourceType.GROUP, ErrorCode.group_authorization_failed, OFFSETS_TOPIC,
                             lambda node: node.groups, lambda groups: groups.ensure_offsets_topic()),
    TRANSACTION_KEY_TYPE: _KeyKind(ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed,
                                   TRANSACTION_STATE_TOPIC, lambda node: node.transactions,
                                   lambda txns: txns.ensure_topic()),
}


# Kafka's Errors.INVALID_REQUEST message, which it sends for an unknown key type.
_INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                            "the message was sent to an incompatible broker. See the broker logs for more details.")


def _message(error: ErrorCode) -> str | None:
    return _INVALID_REQUEST_MESSAGE if error == ErrorCode.invalid_request else None


async def _locate(node: BrokerNode, listener: str, key_type: int, key: str,
                  check: Checker | None) -> tuple[ErrorCode, int, str, int]:
    kind = _KINDS.get(key_type)
    if kind is None:
        return ErrorCode.invalid_request, -1, "", -1
    # Kafka checks Describe on the key before looking it up.
    if check is not None and not check(AclOperation.DESCRIBE, kind.resource, key):
        return kind.denied, -1, "", -1
    # The topic is created on first use, as Kafka does; until it exists, clients retry.
    coordinator = kind.coordinator(node)
    if coordinator is None or not await kind.ensure_topic(coordinator):
        return ErrorCode.coordinator_not_available, -1, "", -1
    topic_name, partition = kind.topic, coordinator.partition_for(key)
    # The coordinator is the leader of the key's partition.
    image = node.image
    topic = image.topics_by_name.get(topic_name)
    reg = topic.partitions.get(partition) if topic is not None else None
    broker = image.brokers.get(reg.leader) if reg is not None and reg.leader is not None else None
    ep = broker.endpoint(listener) if broker is not None else None  # the endpoint Metadata advertises
    if broker is None or broker.fenced or ep is None:
        return ErrorCode.coordinator_not_available, -1, "", -1
    host, port = ep
    return ErrorCode.none, broker.broker_id, host, port


async def handle_find_coordinator(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    key_type = int(req.key_type)
    check = checker(node, ctx)
    if ctx.api_version < 4:
        error, node_id, host, port = await _locate(node, ctx.listener, key_type, req.key, check)
        return make(
            resp_cls,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=_message(error),
            node_id=node_id,
            host=host,
            port=port,
        )
    coord_cls = nested(resp_cls, "Coordinator")
    coordinators = []
    for key in req.coordinator_keys:
        error, node_id, host, port = await _locate(node, ctx.listener, key_type, key, check)
        coordinators.append(
            make(
                coord_cls,
                key=key,
                node_id=node_id,
                host=host,
                port=port,
                error_code=error,
                error_message=_message(error),
            )
        )
    return make(resp_cls, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
