"""Kafka's sampled rate (`Rate` over a `SampledStat`): the measure behind its byte quotas.

Used for the remote fetch quota (KIP-956, `remote.log.manager.fetch.max.bytes.per.second`,
kavka.tiered.remote_log_manager) and the replication throttles (KIP-73, kavka.replication.quota). Semantics as
Kafka's:

- samples are windows of `window_s`; at most `num_windows` are kept and a sample that started
  `num_windows * window_s` ago or more is dropped;
- the rate is the sum of the kept samples over the time since the oldest one started, counted as
  at least `num_windows - 1` full windows (so a burst on an idle broker is measured against the
  whole span, not one instant: about `num_windows - 1` windows' worth passes before a quota bites);
- the throttle time is `(rate - quota) / quota * elapsed`, as Kafka's `QuotaUtils.throttleTime`.

The clock is injected; every method also takes `now` for callers that read the time once for
several quotas.

`ClientQuotaManager` is Kafka's ClientQuotaManager for one byte quota (produce or fetch, KIP-13 and
KIP-55): the quota of a (user, client id) found with Kafka's eight-level precedence
(`quota_entity_for`) in the quotas of the metadata image, bytes recorded in one SampledRate per
quota "sensor" (the (user, client-id) tags every client mapped to the same quota shares), and the
throttle time when the rate is over it. `ConnectionRateQuotaManager` is Kafka's per-IP connection
creation rate (KIP-612, ConnectionQuotas): connections accepted per second per IP.

The same manager serves the request quota (KIP-124, `request_percentage`): the value recorded is
the time spent on a request as a percentage of one second of one thread (Kafka's
ClientRequestQuotaManager: nanos * 100 / 1e9), and its throttle time is capped at one window
(Kafka's boundedThrottleTime with quota.window.size.seconds). `ControllerMutationQuotaManager` is
Kafka's (KIP-599): partitions created or deleted, measured by a `TokenBucket` per quota sensor
(burst `quota * num_windows * window_s`, refilled at `quota` per second); `strict` (the request
versions that can carry THROTTLING_QUOTA_EXCEEDED) refuses a mutation once the bucket is below
zero, `permissive` always takes it and only reports the throttle time.

Every manager also keeps, per sensor, the throttle times it handed out (Kafka's `throttle-time`
sensor: the average over the kept windows of the throttle times recorded) and when the sensor was
last used, so metrics can show the sensors active in the last windows only (`active`).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

UNLIMITED = 2**63 - 1  # Kafka's default, Long.MAX_VALUE: no quota


class SampledRate:
    """Bytes per second over a few sampled windows (Kafka's `Rate` with `SampledStat`)."""

    def __init__(self, num_windows: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if num_windows < 1 or window_s <= 0:
            raise ValueError("a sampled rate needs at least one window of positive length")
        self.num_windows = num_windows
        self.window_s = window_s
        self._clock = clock
        self._samples: deque[list[float]] = deque()  # [window start, bytes, values recorded]

    def record(self, nbytes: float, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_s:
            self._samples.append([now, 0.0, 0.0])
            while len(self._samples) > self.num_windows:
                self._samples.popleft()
        self._samples[-1][1] += nbytes
        self._samples[-1][2] += 1

    def _purge(self, now: float) -> None:
        horizon = now - self.num_windows * self.window_s  # Kafka: a sample whose window started that long ago
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.popleft()

    def _elapsed(self, now: float) -> float:
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        full = int(elapsed // self.window_s)
        if full < self.num_windows - 1:
            elapsed += (self.num_windows - 1 - full) * self.window_s
        return max(elapsed, self.window_s)

    def rate(self, now: float | None = None) -> float:
        now = self._clock() if now is None else now
        self._purge(now)
        return sum(s[1] for s in self._samples) / self._elapsed(now)

    def avg(self, now: float | None = None) -> float:
        """The mean of the values recorded in the kept windows (Kafka's `Avg`); 0 if none."""
        now = self._clock() if now is None else now
        self._purge(now)
        count = sum(s[2] for s in self._samples)
        return sum(s[1] for s in self._samples) / count if count else 0.0

    def throttle_s(self, quota: float, now: float | None = None) -> float:
        """How long to wait for the rate to come back under `quota` bytes/s; 0 if it is."""
        if quota <= 0 or quota >= UNLIMITED:
            return 0.0
        now = self._clock() if now is None else now
        rate = self.rate(now)
        if rate <= quota:
            return 0.0
        return (rate - quota) / quota * self._elapsed(now)

    def throttle_ms(self, quota: float, now: float | None = None) -> int:
        """`throttle_s` in whole milliseconds, at least 1 while throttled."""
        s = self.throttle_s(quota, now)
        return max(1, round(s * 1000)) if s > 0 else 0


# A client quota entity: (entity type, entity name) pairs sorted by type; a None name is the
# default (kavka.metadata.image.QuotaEntity).
QuotaEntity = tuple[tuple[str, str | None], ...]
QuotaTags = tuple[str, str]  # (user, client id) of the rate a quota is measured by; "" for neither


def quota_entity_for(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[QuotaEntity, QuotaTags] | None:
    """Kafka's DefaultQuotaCallback: the entity whose `key` quota applies to (user, client_id), and
    the (user, client-id) tags of the rate it is measured by (Kafka's quota metric tags: every
    client mapped to the same tags shares one rate). None: no quota applies. Precedence:

        1 /users/<user>/clients/<client-id>     5 /users/<default>/clients/<default>
        2 /users/<user>/clients/<default>       6 /users/<default>
        3 /users/<user>                         7 /clients/<client-id>
        4 /users/<default>/clients/<client-id>  8 /clients/<default>
    """
    levels: tuple[tuple[QuotaEntity, QuotaTags], ...] = (
        ((("client-id", client_id), ("user", user)), (user, client_id)),
        ((("client-id", None), ("user", user)), (user, client_id)),
        ((("user", user),), (user, "")),
        ((("client-id", client_id), ("user", None)), (user, client_id)),
        ((("client-id", None), ("user", None)), (user, client_id)),
        ((("user", None),), (user, "")),
        ((("client-id", client_id),), ("", client_id)),
        ((("client-id", None),), ("", client_id)),
    )
    for entity, tags in levels:
        values = quotas.get(entity)
        if values is not None and key in values:
            return entity, tags
    return None


@dataclass(frozen=True, slots=True)
class SensorStats:
    """One quota sensor's values for metrics: its (user, client id) tags, its measured rate (bytes/s,
    request-time percent or partition mutations/s) and the mean throttle time in ms it handed out."""

    tags: QuotaTags
    rate: float
    throttle_time_ms: float


class _Sensors:
    """Per quota sensor (QuotaTags): a rate, a throttle-time average and when it was last used;
    sensors idle for `expire_s` are dropped (Kafka expires idle quota sensors after an hour)."""

    def __init__(self, num_windows: int, window_s: float, clock: Callable[[], float], expire_s: float) -> None:
        self.num_windows = num_windows
        self.window_s = window_s
        self._clock = clock
        self._expire_s = expire_s
        self._rates: dict[QuotaTags, tuple[SampledRate, float]] = {}  # tags -> (rate, last used)
        self._throttles: dict[QuotaTags, SampledRate] = {}
        self._next_sweep = 0.0

    def _rate(self, tags: QuotaTags, now: float) -> SampledRate:
        if now >= self._next_sweep:
            self._next_sweep = now + min(60.0, self._expire_s)
            for t, (_, used) in list(self._rates.items()):
                if now - used > self._expire_s:
                    del self._rates[t]
                    self._throttles.pop(t, None)
                    self._forget(t)
        entry = self._rates.get(tags)
        rate = entry[0] if entry is not None else SampledRate(self.num_windows, self.window_s, self._clock)
        self._rates[tags] = (rate, now)
        return rate

    def _forget(self, tags: QuotaTags) -> None:
        """An idle sensor was dropped: drop what a subclass keeps for it."""

    def _record_throttle(self, tags: QuotaTags, throttle_ms: int, now: float) -> None:
        if throttle_ms > 0:
            t = self._throttles.get(tags)
            if t is None:
                t = self._throttles[tags] = SampledRate(self.num_windows, self.window_s, self._clock)
            t.record(throttle_ms, now)

    def rate(self, user_client: QuotaTags, now: float | None = None) -> float:
        """The measured rate of one quota sensor (0 if it has none): for metrics and tests."""
        entry = self._rates.get(user_client)
        return 0.0 if entry is None else entry[0].rate(now)

    def active(self, now: float | None = None) -> list[SensorStats]:
        """The sensors used within the last `num_windows` windows, with their values (for metrics:
        the label set stays bounded by the clients active lately)."""
        now = self._clock() if now is None else now
        horizon = now - self.num_windows * self.window_s
        out = []
        for tags, (rate, used) in sorted(self._rates.items()):
            if used >= horizon:
                t = self._throttles.get(tags)
                out.append(SensorStats(tags, rate.rate(now), t.avg(now) if t is not None else 0.0))
        return out


class ClientQuotaManager(_Sensors):
    """Kafka's ClientQuotaManager for one quota (`key`: producer_byte_rate, consumer_byte_rate, or
    request_percentage with `max_throttle_ms` of one window as Kafka's ClientRequestQuotaManager).
    `record(quotas, user, client_id, value)` records the value against the rate of the quota that
    applies (none: nothing is recorded) and returns the throttle time in ms, 0 while under it. A
    rate unused for `expire_s` is dropped (Kafka expires idle quota sensors after an hour). Called
    on the event loop; the clock is injected."""

    def __init__(
        self,
        key: str,
        num_windows: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        expire_s: float = 3600.0,
        max_throttle_ms: int | None = None,
    ) -> None:
        super().__init__(num_windows, window_s, clock, expire_s)
        self.key = key
        self._max_throttle_ms = max_throttle_ms

    def limit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str) -> float | None:
        """The quota for (user, client_id), None if none applies."""
        found = quota_entity_for(quotas, self.key, user, client_id)
        return None if found is None else quotas[found[0]][self.key]

    def max_value_in_window(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str) -> int | None:
        """Kafka's getMaxValueInQuotaWindow: the most bytes one response may carry under the quota
        (the quota times the num_windows - 1 windows the rate is at least measured over)."""
        limit = self.limit(quotas, user, client_id)
        if limit is None:
            return None
        return max(1, int(limit * max(1, self.num_windows - 1) * self.window_s))

    def record(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        user: str,
        client_id: str,
        nbytes: float,
        now: float | None = None,
        *,
        throttle: bool = True,
    ) -> int:
        """Record `nbytes` for (user, client_id); the throttle time in ms (Kafka's
        QuotaUtils.throttleTime). `throttle=False`: only record, return 0 (Kafka's recordNoThrottle)."""
        found = quota_entity_for(quotas, self.key, user, client_id)
        if found is None:
            return 0
        now = self._clock() if now is None else now
        rate = self._rate(found[1], now)
        rate.record(nbytes, now)
        if not throttle:
            return 0
        throttle_ms = rate.throttle_ms(quotas[found[0]][self.key], now)
        if self._max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self._max_throttle_ms)
        self._record_throttle(found[1], throttle_ms, now)
        return throttle_ms

    def unrecord(
        self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str, nbytes: int, now: float | None = None
    ) -> None:
        """Take back bytes recorded for a response that was not sent (Kafka's unrecordQuotaSensor:
        a throttled fetch answers empty)."""
        found = quota_entity_for(quotas, self.key, user, client_id)
        if found is not None:
            now = self._clock() if now is None else now
            self._rate(found[1], now).record(-nbytes, now)


class TokenBucket:
    """Kafka's TokenBucket stat (KIP-599): starts full at `burst = quota * num_windows * window_s`
    tokens, refills at `quota` per second up to the burst, and a record takes its value out (the
    tokens may go below zero). Time is passed in."""

    __slots__ = ("tokens", "_last")

    def __init__(self) -> None:
        self.tokens = math.inf  # full: the first refill caps it at the burst
        self._last = -math.inf

    def measure(self, quota: float, burst: float, now: float) -> float:
        if now > self._last:
            self.tokens = min(burst, self.tokens + quota * (now - self._last))
            self._last = now
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now: float) -> None:
        self.tokens = min(burst, self.measure(quota, burst, now) - value)


class ControllerMutationQuotaManager(_Sensors):
    """Kafka's ControllerMutationQuotaManager (KIP-599) for `controller_mutation_rate`: partitions
    created or deleted per second per quota sensor, measured by a TokenBucket. `record(quotas,
    user, client_id, partitions, strict=...)` returns (accepted, throttle time in ms):

    - strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+; Kafka's
      StrictControllerMutationQuota): refused -- nothing recorded, the throttle time is how long
      until the bucket is back at zero -- if the bucket is already below zero; else recorded and
      accepted with no throttle time, even when it takes the bucket below zero (a topic within
      quota at its start is taken whole; the next one is refused);
    - permissive (older versions; PermissiveControllerMutationQuota): always recorded and accepted,
      with the throttle time if the bucket is now below zero.

    The throttle time is `-tokens / quota` seconds (ControllerMutationQuotaManager.throttleTimeMs).
    """

    KEY = "controller_mutation_rate"

    def __init__(self, num_windows: int, window_s: float, clock: Callable[[], float] = time.monotonic, *, expire_s: float = 3600.0) -> None:
        super().__init__(num_windows, window_s, clock, expire_s)
        self._buckets: dict[QuotaTags, TokenBucket] = {}

    def limit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str) -> float | None:
        found = quota_entity_for(quotas, self.KEY, user, client_id)
        return None if found is None else quotas[found[0]][self.KEY]

    def _forget(self, tags: QuotaTags) -> None:
        self._buckets.pop(tags, None)

    def tokens(self, user_client: QuotaTags, quota: float, now: float | None = None) -> float:
        """The tokens left in one sensor's bucket (for metrics and tests; a full bucket if none)."""
        now = self._clock() if now is None else now
        burst = quota * self.num_windows * self.window_s
        bucket = self._buckets.get(user_client)
        return burst if bucket is None else bucket.measure(quota, burst, now)

    def record(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        user: str,
        client_id: str,
        partitions: float,
        *,
        strict: bool,
        now: float | None = None,
    ) -> tuple[bool, int]:
        found = quota_entity_for(quotas, self.KEY, user, client_id)
        if found is None:
            return True, 0
        now = self._clock() if now is None else now
        tags = found[1]
        quota = quotas[found[0]][self.KEY]
        burst = quota * self.num_windows * self.window_s
        rate = self._rate(tags, now)
        bucket = self._buckets.setdefault(tags, TokenBucket())
        if strict and bucket.measure(quota, burst, now) < 0:
            throttle_ms = _bucket_throttle_ms(bucket.tokens, quota)
            self._record_throttle(tags, throttle_ms, now)
            return False, throttle_ms
        bucket.record(partitions, quota, burst, now)
        rate.record(partitions, now)
        # Strict checks before it records, so what it takes is never throttled; permissive checks after.
        throttle_ms = _bucket_throttle_ms(bucket.tokens, quota) if bucket.tokens < 0 and not strict else 0
        self._record_throttle(tags, throttle_ms, now)
        return True, throttle_ms

    def unrecord(
        self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str, partitions: float, now: float | None = None
    ) -> None:
        """Give back the tokens of a mutation that did not happen (the controller refused it)."""
        found = quota_entity_for(quotas, self.KEY, user, client_id)
        if found is None or found[1] not in self._buckets:
            return
        now = self._clock() if now is None else now
        quota = quotas[found[0]][self.KEY]
        self._buckets[found[1]].record(-partitions, quota, quota * self.num_windows * self.window_s, now)
        self._rate(found[1], now).record(-partitions, now)

    def throttle_ms(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str, now: float | None = None) -> int:
        """How long until the bucket of (user, client_id) is back at zero (0: it is not below)."""
        found = quota_entity_for(quotas, self.KEY, user, client_id)
        if found is None or found[1] not in self._buckets:
            return 0
        now = self._clock() if now is None else now
        quota = quotas[found[0]][self.KEY]
        tokens = self._buckets[found[1]].measure(quota, quota * self.num_windows * self.window_s, now)
        return _bucket_throttle_ms(tokens, quota) if tokens < 0 else 0


def _bucket_throttle_ms(tokens: float, quota: float) -> int:
    return max(1, round(-tokens / quota * 1000))


class ConnectionRateQuotaManager:
    """Kafka's per-IP connection creation rate quota (KIP-612): `record(quotas, ip)` counts a new
    connection from `ip` against its `connection_creation_rate` (the IP's own entity, else the
    default IP's) and returns the throttle time in ms, 0 if it is within the quota. A throttled
    connection is taken back out of the rate (it is not served) and the time is capped at one
    window (Kafka's boundedThrottleTime with quota.window.size.seconds). Called on the event loop."""

    KEY = "connection_creation_rate"

    def __init__(self, num_windows: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.num_windows = num_windows
        self.window_s = window_s
        self._clock = clock
        self._rates: dict[str, tuple[SampledRate, float]] = {}  # ip -> (rate, last used)
        self._next_sweep = 0.0

    def limit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], ip: str) -> float | None:
        default: float | None = None
        for entity, values in quotas.items():
            if self.KEY not in values or len(entity) != 1 or entity[0][0] != "ip":
                continue
            name = entity[0][1]
            if name is None:
                default = values[self.KEY]
            elif _same_ip(name, ip):
                return values[self.KEY]
        return default

    def record(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], ip: str, now: float | None = None) -> int:
        limit = self.limit(quotas, ip)
        if limit is None:
            return 0
        now = self._clock() if now is None else now
        if now >= self._next_sweep:  # Kafka expires idle sensors after an hour
            self._next_sweep = now + 60.0
            for k, (_, used) in list(self._rates.items()):
                if now - used > 3600.0:
                    del self._rates[k]
        entry = self._rates.get(ip)
        rate = entry[0] if entry is not None else SampledRate(self.num_windows, self.window_s, self._clock)
        self._rates[ip] = (rate, now)
        rate.record(1, now)
        throttle_ms = rate.throttle_ms(limit, now)
        if throttle_ms > 0:
            rate.record(-1, now)
        return min(throttle_ms, int(self.window_s * 1000))


def _same_ip(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b
