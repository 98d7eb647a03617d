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
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

UNLIMITED = 2**63 - 1  # Kafka's default, Long.MAX_VALUE: no quota


class SampledRate:
    """Bytes per second over a few sampled windows (Kafka's `Rate` with `SampledStat`)."""

    def __init__(self, num_windows: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if num_windows < 1 or window_s <= 0:
            raise ValueError("a sampled rate needs at least one window of positive length")
        self.num_windows = num_windows
        self.window_s = window_s
        self._clock = clock
        self._samples: deque[list[float]] = deque()  # [window start, bytes]

    def record(self, nbytes: int, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_s:
            self._samples.append([now, 0.0])
            while len(self._samples) > self.num_windows:
                self._samples.popleft()
        self._samples[-1][1] += nbytes

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
