"""kavka.quota.SampledRate: Kafka's sampled Rate and throttle time, on an injected clock."""

from __future__ import annotations

import pytest

from kavka.quota import UNLIMITED, SampledRate


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_on_an_idle_broker_is_measured_over_the_whole_span() -> None:
    clock = Clock()
    r = SampledRate(11, 1.0, clock)
    r.record(10_000)
    assert r.rate() == pytest.approx(1000.0)  # at least 10 full windows of elapsed time
    assert r.throttle_ms(1000) == 0
    assert r.throttle_ms(500) == 10_000  # (1000 - 500) / 500 * 10 s


def test_the_rate_follows_the_windows_and_forgets_old_samples() -> None:
    clock = Clock()
    r = SampledRate(2, 1.0, clock)
    r.record(4000)
    assert r.throttle_ms(2000) > 0
    clock.t += 1.5
    r.record(1000)  # a second sample
    assert r.rate() == pytest.approx(5000 / 1.5)
    clock.t += 1.0  # the first sample (started 2.5 s ago) is older than 2 windows: dropped
    assert r.rate() == pytest.approx(1000.0)
    clock.t += 5
    assert r.rate() == 0 and r.throttle_ms(1) == 0


def test_no_quota_never_throttles() -> None:
    r = SampledRate(2, 1.0, Clock())
    r.record(10**12)
    assert r.throttle_ms(UNLIMITED) == 0


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        SampledRate(0, 1.0)
