"""Broker sessions on the active controller (Kafka's BrokerHeartbeatManager, the timing half).

Every broker heartbeats the active controller each `broker.heartbeat.interval.ms`
(BrokerHeartbeat); a broker that is not fenced and has not been heard from for
`broker.session.timeout.ms` is fenced: it leaves every ISR it is not the last member of,
its leaderships move (or the partition goes offline, leader -1) and it disappears from
Metadata. The decisions themselves (which records) are ControllerLogic's.

Session times are not metadata: they live only in the active controller's memory, on
a monotonic clock. A controller that becomes active gives every registered broker a
fresh session (Kafka does the same), so a failover never fences a healthy broker that
was heartbeating the previous controller. Pure: the caller passes `now_ms`.
"""

from __future__ import annotations

from collections.abc import Iterable

from kavka.controller.image import MetadataImage


class BrokerSessions:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._last_ms: dict[int, int] = {}
        self._active_since_ms: int | None = None

    def activate(self, broker_ids: Iterable[int], now_ms: int) -> None:
        """This node just became the active controller: every broker starts a fresh session."""
        self._active_since_ms = now_ms
        self._last_ms = dict.fromkeys(broker_ids, now_ms)

    def deactivate(self) -> None:
        self._active_since_ms = None
        self._last_ms.clear()

    @property
    def active(self) -> bool:
        return self._active_since_ms is not None

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last_ms[broker_id] = now_ms

    def last_contact_ms(self, broker_id: int) -> int | None:
        return self._last_ms.get(broker_id)

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers (shutting down or not) whose session ran out, oldest contact first."""
        if self._active_since_ms is None:
            return []
        out = []
        for b in image.brokers.values():
            if b.fenced:
                continue
            last = self._last_ms.get(b.broker_id, self._active_since_ms)
            if now_ms - last > self.session_timeout_ms:
                out.append((last, b.broker_id))
        return [b for _, b in sorted(out)]
