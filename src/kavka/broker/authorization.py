"""A request's actions checked against the node's authorizer (kavka.authorizer).

`checker(node, ctx)` is None when `authorizer.class.name` is unset (everything allowed, nothing to
ask), else a function (operation, resource type, name) -> allowed for the request's principal and
client host (the connection's IP address, as Kafka's `clientAddress().getHostAddress()`).

Enforced today, with Kafka's errors (KafkaApis): Produce (Write on each topic, else that
partition's TOPIC_AUTHORIZATION_FAILED), Fetch (a consumer: Read on each topic; a follower:
ClusterAction on the cluster, else every partition TOPIC_AUTHORIZATION_FAILED) and Metadata
(Describe on each topic: left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when
named; auto-creation needs Create on the cluster or the topic). Every other API is not checked yet.
Called on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kavka.common import AclOperation, ResourceType

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

Checker = Callable[[AclOperation, ResourceType, str], bool]


def client_host(peer: str) -> str:
    """The IP address of a connection's peer, "host:port" or "[v6]:port"."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


def checker(node: BrokerNode, ctx: RequestContext) -> Checker | None:
    auth = node.authorizer()
    if auth is None:
        return None
    principal, host = ctx.principal, client_host(ctx.peer)
    return lambda op, rt, name: auth.authorize(principal, host, op, rt, name)
