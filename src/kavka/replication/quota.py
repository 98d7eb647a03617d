"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73): bytes per second for the
replicas a reassignment is copying, one quota for this broker as a leader and one as a follower.

- A quota's bound is the dynamic broker config `leader.replication.throttled.rate` or
  `follower.replication.throttled.rate` (unset: Long.MAX_VALUE, no throttle).
- Which replicas it applies to is the topic configs `leader.replication.throttled.replicas` /
  `follower.replication.throttled.replicas`: `*` (every partition of the topic) or
  `partition:broker` entries, of which a broker keeps those naming itself
  (Kafka's TopicConfigHandler.parseThrottledPartitions).
- The leader leaves the records out of its answer to a follower that is not in the ISR, for a
  throttled partition, while the quota is exceeded (ReplicaManager.shouldLeaderThrottle); the
  follower leaves such a partition out of its request (ReplicaFetcherThread.shouldFollowerThrottle).
  In-sync replicas are never throttled. Bytes sent or fetched for throttled partitions are
  recorded whether or not they were held back.
- The rate is Kafka's `Rate` (kavka.quota.SampledRate) over `replication.quota.window.num`
  samples of `replication.quota.window.size.seconds`: a burst of about (num - 1) windows' worth
  passes before the bound bites, as in Kafka.

Pure bookkeeping with the time passed in; used on the event loop by the fetch handler (leader)
and the replica fetchers (follower).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from kavka.quota import UNLIMITED as LONG_MAX  # Kafka's Long.MAX_VALUE: no bound
from kavka.quota import SampledRate


@functools.lru_cache(maxsize=1024)
def throttled_partitions(entries: tuple[str, ...], broker_id: int) -> frozenset[int] | None:
    """The partitions `entries` throttle on `broker_id`; None means every partition (`*`)."""
    if "*" in (e.strip() for e in entries):
        return None
    out = set()
    for e in entries:
        p, _, b = e.strip().partition(":")
        if p.isdigit() and b.isdigit() and int(b) == broker_id:
            out.add(int(p))
    return frozenset(out)


def is_throttled(entries: Sequence[str], broker_id: int, partition: int) -> bool:
    if not entries:
        return False
    parts = throttled_partitions(tuple(entries), broker_id)
    return parts is None or partition in parts


class ReplicationQuota:
    """One direction's quota: a byte rate bound and the sampled rate that measures it."""

    def __init__(self, *, samples: int = 11, window_s: float = 1.0) -> None:
        self.bound = float(LONG_MAX)
        self._rate = SampledRate(samples, window_s)

    def set_bound(self, bytes_per_second: int) -> None:
        self.bound = float(bytes_per_second)

    @property
    def enabled(self) -> bool:
        return self.bound < LONG_MAX

    def record(self, n: int, now: float) -> None:
        if n > 0:
            self._rate.record(n, now)

    def rate(self, now: float) -> float:
        return self._rate.rate(now)

    def is_exceeded(self, now: float) -> bool:
        return self.enabled and self._rate.rate(now) > self.bound

    def wait_s(self, now: float) -> float:
        """How long until the rate is back under the bound (0 if it is); Kafka's throttle time."""
        return self._rate.throttle_s(self.bound, now)


LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def _entries(raw: str | None) -> tuple[str, ...]:
    return tuple(x for x in (raw or "").split(",") if x.strip())


class ReplicationQuotas:
    """This broker's two replication quotas and the topic configs that say what they apply to.
    `image` arguments are anything with `topic_configs(name) -> mapping` (the MetadataImage)."""

    def __init__(self, broker_id: int, *, samples: int = 11, window_s: float = 1.0) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota(samples=samples, window_s=window_s)
        self.follower = ReplicationQuota(samples=samples, window_s=window_s)

    def _throttled(self, image: object, topic: str | None, partition: int, key: str) -> bool:
        if topic is None:
            return False
        raw = image.topic_configs(topic).get(key)  # type: ignore[attr-defined]
        return bool(raw) and is_throttled(_entries(raw), self.broker_id, partition)

    def leader_throttled(self, image: object, topic: str | None, partition: int) -> bool:
        return self.leader.enabled and self._throttled(image, topic, partition, LEADER_REPLICAS)

    def follower_throttled(self, image: object, topic: str | None, partition: int) -> bool:
        return self.follower.enabled and self._throttled(image, topic, partition, FOLLOWER_REPLICAS)
