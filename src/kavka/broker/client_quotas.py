"""The broker's client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599): Kafka's produce, fetch,
request and controller-mutation quota managers (kavka.quota) over the quotas in this node's
metadata image.

A request's user is its principal's name (User:alice -> alice; User:ANONYMOUS -> ANONYMOUS, as
Kafka's quota callback takes KafkaPrincipal.getName), its client id the header's ("" if null).
Produce records the request's size when it arrives; Fetch records the response's record bytes and,
when over quota, takes them back and answers an empty response instead (Kafka's
getThrottledResponse). Either way the response carries throttle_time_ms and the connection stops
reading for that long once the response is written (broker.server, KIP-219). Follower fetches are
never recorded (replication has its own throttles). New connections count against their IP's
connection_creation_rate (KIP-612; broker.server closes a throttled one after the time).

Request quota (KIP-124, `request_percentage`). kavka has one event loop where Kafka has network
and request-handler threads, so a request's time is the wall time the loop spends on it: decoding
it and running its handler up to the response or the awaitable it returns (recorded when the
response is ready, which decides its throttle time, as Kafka's request-handler time), and encoding
the response (recorded after, counted against later requests, as Kafka's network-thread time).
Time a request spends waiting (a long-poll Fetch, acks=all) is not on the loop and not counted; nor
is time in worker threads (log appends, flushes), which kavka cannot attribute to one request.
100% is one loop busy for the whole window. Exempt, as Kafka's sendResponseExemptThrottle: follower
fetches (replication), ApiVersions, SaslHandshake and SaslAuthenticate; inter-broker APIs are served
on the controller listener, which has no request quota. The throttle time is capped at one window
(Kafka's ClientRequestQuotaManager) and is the larger of it and a byte quota's on Produce and Fetch.

Controller mutation quota (KIP-599): `controller_mutation_rate`, counted here on the broker that
receives the CreateTopics/CreatePartitions/DeleteTopics (broker.mutation_quota says how).

Called on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kavka.metadata.image import MetadataImage
from kavka.protocol.api import ApiKey
from kavka.quota import (
    ClientQuotaManager,
    ConnectionRateQuotaManager,
    ControllerMutationQuotaManager,
)

if TYPE_CHECKING:
    from kavka.broker.server import RequestContext

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"

# Never counted against request_percentage (Kafka's sendResponseExemptThrottle).
REQUEST_QUOTA_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def quota_user(principal: str) -> str:
    """KafkaPrincipal.getName: the part after the type."""
    return principal.partition(":")[2] or principal


class ClientQuotas:
    def __init__(self, num_windows: int, window_s: float, image: Callable[[], MetadataImage]) -> None:
        self._image = image
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, num_windows, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, num_windows, window_s)
        self.connections = ConnectionRateQuotaManager(num_windows, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, num_windows, window_s, max_throttle_ms=int(window_s * 1000))
        self.controller_mutation = ControllerMutationQuotaManager(num_windows, window_s)

    def record_mutation(self, user: str, client_id: str, partitions: int, *, strict: bool) -> tuple[bool, int]:
        """(accepted, throttle ms) of `partitions` created or deleted (broker.mutation_quota)."""
        quotas = self._image().client_quotas
        if not quotas:
            return True, 0
        return self.controller_mutation.record(quotas, user, client_id, partitions, strict=strict)

    def unrecord_mutation(self, user: str, client_id: str, partitions: int) -> None:
        quotas = self._image().client_quotas
        if quotas:
            self.controller_mutation.unrecord(quotas, user, client_id, partitions)

    def record_request_time(self, ctx: RequestContext, request: Any, seconds: float, throttle: bool = True) -> int:
        """Record `seconds` of the loop's time spent on a request; the throttle time in ms of the
        request quota (0: within it, or exempt, or `throttle` False: time recorded after the
        response's throttle time was decided, Kafka's recordNoThrottle)."""
        if ctx.api_key in REQUEST_QUOTA_EXEMPT or (ctx.api_key == ApiKey.FETCH and _from_follower(ctx.api_version, request)):
            return 0
        quotas = self._image().client_quotas
        if not quotas:
            return 0
        # Kafka's nanosToPercentage: one second of one thread is 100.
        return self.request.record(quotas, quota_user(ctx.principal), ctx.client_id or "", seconds * 100.0, throttle=throttle)

    def record_connection(self, ip: str) -> int:
        """A new connection from `ip`: ms to hold it before closing it unserved (0: serve it)."""
        quotas = self._image().client_quotas
        if not quotas:
            return 0
        return self.connections.record(quotas, ip)

    def record_produce(self, principal: str, client_id: str | None, nbytes: int) -> int:
        """The throttle time in ms of a Produce request of `nbytes` (0: within its quota)."""
        quotas = self._image().client_quotas
        if not quotas:
            return 0
        return self.produce.record(quotas, quota_user(principal), client_id or "", nbytes)

    def max_fetch_bytes(self, principal: str, client_id: str | None) -> int | None:
        """The most record bytes one Fetch response may carry under the consumer quota (None: no quota)."""
        quotas = self._image().client_quotas
        if not quotas:
            return None
        return self.fetch.max_value_in_window(quotas, quota_user(principal), client_id or "")

    def record_fetch(self, principal: str, client_id: str | None, nbytes: int) -> int:
        """Record a Fetch response's bytes; if that puts the client over its quota, take them back
        (the response will not carry them) and return the throttle time in ms."""
        quotas = self._image().client_quotas
        if not quotas:
            return 0
        user, cid = quota_user(principal), client_id or ""
        throttle_ms = self.fetch.record(quotas, user, cid, nbytes)
        if throttle_ms > 0:
            self.fetch.unrecord(quotas, user, cid, nbytes)
        return throttle_ms


def _from_follower(version: int, request: Any) -> bool:
    """A Fetch from a replica (FetchRequest.isFromFollower: replica id >= 0, in ReplicaState from v15)."""
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    return int(replica_id) >= 0
