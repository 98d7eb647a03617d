"""A request's actions checked against the node's authorizer (kavka.authorizer), and the
authorizer log.

`checker(node, ctx)` is None when `authorizer.class.name` is unset (everything allowed, nothing to
ask), else a function (operation, resource type, name) -> allowed for the request's principal and
client host (the connection's IP address, as Kafka's `clientAddress().getHostAddress()`).

What each API needs is declared in broker.api_authorization (`NEEDS`): Cluster-level APIs are
checked by broker.apis before their handler runs; per-item checks (topics, groups, transactional
ids, config resources) are made by the handlers with `checker`, as Kafka answers them per item.

Every denial is logged on the logger `kavka.authorizer` (Kafka's `kafka.authorizer.logger`) at
INFO, with principal, host, operation, resource and API name. `DenialLog` limits it to
`LINES_PER_SECOND` lines per principal per second; the lines it drops are counted and the count is
reported on that principal's next line, so a client retrying a refused request in a loop cannot
flood the log. `authorized_operations` is KIP-430's bit set (Kafka's Utils.to32BitField) of the
operations a principal may perform on one resource.
Called on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING

from kavka.authorizer import CLUSTER_NAME
from kavka.common import AclOperation, ResourceType
from kavka.protocol.api import ApiKey

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

Checker = Callable[[AclOperation, ResourceType, str], bool]

log = logging.getLogger("kavka.authorizer")

LINES_PER_SECOND = 5


class DenialLog:
    """Rate-limited denial lines: at most `per_second` lines per principal in any one-second
    window (fixed windows from the principal's first line in it); the clock is injected."""

    def __init__(self, per_second: int = LINES_PER_SECOND, clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log) -> None:
        self.per_second = per_second
        self.clock = clock
        self.logger = logger
        # principal -> [window start, lines in window, suppressed since the last line]
        self._windows: dict[str, list[float]] = {}

    def denied(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
               name: str, api_name: str) -> bool:
        """Logs one denial unless over the limit; True if it was written."""
        now = self.clock()
        w = self._windows.get(principal)
        if w is None or now - w[0] >= 1.0:
            suppressed = int(w[2]) if w is not None else 0
            w = self._windows[principal] = [now, 0, suppressed]
            if len(self._windows) > 10_000:  # forget principals idle for a second or more
                self._windows = {p: v for p, v in self._windows.items() if now - v[0] < 1.0 or p == principal}
        if w[1] >= self.per_second:
            w[2] += 1
            return False
        w[1] += 1
        suppressed, w[2] = int(w[2]), 0
        more = f" ({suppressed} more denials for this principal not logged)" if suppressed else ""
        self.logger.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
                         "for request = %s%s", principal, _name(operation), host, _name(resource_type), name,
                         api_name, more)
        return True


def _name(e: AclOperation | ResourceType) -> str:
    """Kafka's spelling in the authorizer log: CLUSTER_ACTION -> ClusterAction."""
    return "".join(part.capitalize() for part in e.name.split("_"))


DENIALS = DenialLog()


@cache
def api_name(key: int) -> str:
    """Kafka's name of an API key (ApiKeys.name): 16 -> ListGroups."""
    try:
        return _name(ApiKey(key))  # type: ignore[arg-type]
    except ValueError:
        return str(key)


def client_host(peer: str) -> str:
    """The IP address of a connection's peer, "host:port" or "[v6]:port"."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


def checker(node: BrokerNode, ctx: RequestContext, *, log_denials: bool = True) -> Checker | None:
    auth = node.authorizer()
    if auth is None:
        return None
    principal, host = ctx.principal, client_host(ctx.peer)
    name = api_name(ctx.api_key)

    def check(op: AclOperation, rt: ResourceType, resource: str) -> bool:
        allowed = auth.authorize(principal, host, op, rt, resource)
        if not allowed and log_denials:
            DENIALS.denied(principal, host, op, rt, resource, name)
        return allowed

    return check


def authorized_by_resource_type(node: BrokerNode, ctx: RequestContext, op: AclOperation, rt: ResourceType) -> bool:
    """May the request's principal perform `op` on some resource of type `rt` (Kafka's
    authorizeByResourceType: InitProducerId's "Write on any topic"); True without an authorizer."""
    auth = node.authorizer()
    return auth is None or auth.authorize_by_resource_type(ctx.principal, client_host(ctx.peer), op, rt)


# KIP-430: the operations reported for each resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


def to_32bit_field(ops: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit n set for operation code n."""
    out = 0
    for op in ops:
        out |= 1 << int(op)
    return out


def authorized_operations(node: BrokerNode, ctx: RequestContext, rt: ResourceType, name: str) -> int:
    """KIP-430's authorized_operations for one resource: every supported operation when no
    authorizer is configured, else those the principal may perform (denials are not logged, as
    Kafka's authorizedOperations passes logIfDenied=false)."""
    check = checker(node, ctx, log_denials=False)
    ops = SUPPORTED_OPERATIONS[rt]
    return to_32bit_field(op for op in ops if check is None or check(op, rt, name))


def cluster_authorized_operations(node: BrokerNode, ctx: RequestContext) -> int:
    """Metadata's and DescribeCluster's cluster_authorized_operations (Kafka's AuthHelper): 0
    unless the principal may Describe the Cluster, else the Cluster's bit set."""
    check = checker(node, ctx)
    if check is not None and not check(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorized_operations(node, ctx, ResourceType.CLUSTER, CLUSTER_NAME)
