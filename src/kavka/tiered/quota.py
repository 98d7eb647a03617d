"""The remote fetch quota (KIP-956): `remote.log.manager.fetch.max.bytes.per.second`.

Kafka measures the bytes a broker reads from remote storage with a sampled rate
(`remote.log.manager.fetch.quota.window.num` windows of
`remote.log.manager.fetch.quota.window.size.seconds` each) and, while that rate
is over the quota, does not start remote reads: a consumer's Fetch gets no
records for a partition whose data is only in remote storage (no error; the
fetch waits out `fetch.max.wait.ms` like any fetch with too little data, and
the consumer asks again), while partitions read from local disk are served as
usual. Reads already started finish. This module is that rate, Kafka's
`SampledStat`/`Rate` semantics:

- samples are windows of `window_s`; at most `num_windows` are kept and a
  sample that started `num_windows * window_s` ago or more is dropped;
- the rate is the sum of the kept samples over the time since the oldest one
  started, counted as at least `num_windows - 1` full windows (so a burst on
  an idle broker is measured against the whole span, not one instant);
- the throttle time is `(rate - quota) / quota * elapsed`, as Kafka's
  `QuotaUtils.throttleTime`.

Used by the fetch handler (`kavka.broker.handlers.fetch`) through
`RemoteLogManager.fetch_throttle_ms`; the clock is injected for tests.
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

    def record(self, nbytes: int) -> None:
        now = self._clock()
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

    def rate(self) -> float:
        now = self._clock()
        self._purge(now)
        return sum(s[1] for s in self._samples) / self._elapsed(now)

    def throttle_ms(self, quota: int) -> int:
        """How long reads should wait for the rate to come back under ``quota`` bytes/s; 0 if it is."""
        if quota <= 0 or quota >= UNLIMITED:
            return 0
        now = self._clock()
        self._purge(now)
        rate = sum(s[1] for s in self._samples) / self._elapsed(now)
        if rate <= quota:
            return 0
        return max(1, round((rate - quota) / quota * self._elapsed(now) * 1000))
