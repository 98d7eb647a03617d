"""The broker's client byte quotas (KIP-13, KIP-55, KIP-219): Kafka's produce and fetch
ClientQuotaManagers (kavka.quota) over the quotas in this node's metadata image.

A request's user is its principal's name (User:alice -> alice; User:ANONYMOUS -> ANONYMOUS, as
Kafka's quota callback takes KafkaPrincipal.getName), its client id the header's ("" if null).
Produce records the request's size when it arrives; Fetch records the response's record bytes and,
when over quota, takes them back and answers an empty response instead (Kafka's
getThrottledResponse). Either way the response carries throttle_time_ms and the connection stops
reading for that long once the response is written (broker.server, KIP-219). Follower fetches are
never recorded (replication has its own throttles). New connections count against their IP's
connection_creation_rate (KIP-612; broker.server closes a throttled one after the time). Called on
the event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from kavka.metadata.image import MetadataImage
from kavka.quota import ClientQuotaManager, ConnectionRateQuotaManager

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"


def quota_user(principal: str) -> str:
    """KafkaPrincipal.getName: the part after the type."""
    return principal.partition(":")[2] or principal


class ClientQuotas:
    def __init__(self, num_windows: int, window_s: float, image: Callable[[], MetadataImage]) -> None:
        self._image = image
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, num_windows, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, num_windows, window_s)
        self.connections = ConnectionRateQuotaManager(num_windows, window_s)

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
