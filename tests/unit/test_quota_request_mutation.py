"""The request quota (KIP-124) and the controller mutation quota (KIP-599): kavka.quota's managers
with an injected clock, Kafka's precedence for the two DOUBLE keys, and the per-request view
broker.mutation_quota.MutationQuota gives the topic handlers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kavka.broker.client_quotas import ClientQuotas
from kavka.broker.mutation_quota import (
    MutationQuota,
    create_topics_within_quota,
    new_topic_partitions,
)
from kavka.controller.results import ApiResult, CreatedTopic, NewTopic
from kavka.metadata.image import MetadataImage
from kavka.protocol.api import ApiKey
from kavka.quota import (
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    TokenBucket,
    quota_entity_for,
)

R = "request_percentage"
M = "controller_mutation_rate"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# Kafka's eight quota levels, most specific first, and the (user, client-id) metric tags each
# gives alice's app (test_quota_control's precedence test uses them too).
LEVELS = [
    ((("client-id", "app"), ("user", "alice")), ("alice", "app")),
    ((("client-id", None), ("user", "alice")), ("alice", "app")),
    ((("user", "alice"),), ("alice", "")),
    ((("client-id", "app"), ("user", None)), ("alice", "app")),
    ((("client-id", None), ("user", None)), ("alice", "app")),
    ((("user", None),), ("alice", "")),
    ((("client-id", "app"),), ("", "app")),
    ((("client-id", None),), ("", "app")),
]


@pytest.mark.parametrize("key", [R, M])
def test_eight_level_precedence_for_the_double_keys(key):
    quotas = {entity: {key: float(i + 1)} for i, (entity, _) in enumerate(LEVELS)}
    for entity, tags in LEVELS:
        assert quota_entity_for(quotas, key, "alice", "app") == (entity, tags)
        # The other DOUBLE key and the byte keys do not see it.
        assert quota_entity_for(quotas, R if key == M else M, "alice", "app") is None
        del quotas[entity]
    assert quota_entity_for(quotas, key, "alice", "app") is None


def test_request_quota_is_a_percentage_and_its_throttle_is_capped_at_one_window():
    clock = Clock()
    quotas = {(("user", "alice"),): {R: 10.0}}  # 10% of one thread
    m = ClientQuotaManager(R, num_windows=3, window_s=1.0, clock=clock, max_throttle_ms=1000)
    # 15 ms of loop time = 1.5 "percent-seconds": over 2 windows 0.75%/s, under 10.
    assert m.record(quotas, "alice", "c", 1.5) == 0
    # 25 percent-seconds more (250 ms of loop): 26.5 / 2 s = 13.25%; (13.25 - 10) / 10 * 2 s = 650 ms.
    assert m.record(quotas, "alice", "c", 25.0) == 650
    # Far over: capped at one window (Kafka's ClientRequestQuotaManager.maxThrottleTimeMs).
    assert m.record(quotas, "alice", "c", 1000.0) == 1000
    # Time recorded after the throttle was decided (Kafka's network-thread time, recordNoThrottle)
    # counts in the rate but hands out no throttle time.
    assert m.record(quotas, "alice", "c", 1000.0, throttle=False) == 0
    # bob has no quota: never recorded, never throttled.
    assert m.record(quotas, "bob", "c", 1e9) == 0
    assert m.rate(("bob", "")) == 0.0
    # The sensors of the last windows, with their mean throttle time (Kafka's throttle-time Avg).
    (stats,) = m.active()
    assert stats.tags == ("alice", "") and stats.throttle_time_ms == pytest.approx((650 + 1000) / 2)
    clock.now += 10.0
    assert m.active() == []  # idle for longer than the windows: no longer reported


def test_token_bucket_is_kafkas():
    b = TokenBucket()
    # quota 5/s, burst 5 * 2 windows * 1 s = 10 tokens, full at the start.
    assert b.measure(5.0, 10.0, 0.0) == 10.0
    b.record(12.0, 5.0, 10.0, 0.0)
    assert b.tokens == -2.0
    assert b.measure(5.0, 10.0, 1.0) == 3.0  # refilled at 5/s
    assert b.measure(5.0, 10.0, 100.0) == 10.0  # never above the burst


def test_strict_takes_a_topic_within_quota_whole_then_refuses():
    clock = Clock()
    quotas = {(("user", None),): {M: 5.0}}
    m = ControllerMutationQuotaManager(num_windows=2, window_s=1.0, clock=clock)  # burst 10
    assert m.record(quotas, "alice", "c", 8, strict=True) == (True, 0)
    # 2 tokens left: a topic of 6 is within quota at its start, taken whole, not throttled (strict
    # checks before it records); the bucket is now at -4.
    assert m.record(quotas, "alice", "c", 6, strict=True) == (True, 0)
    # The next is refused, nothing recorded; throttle -tokens / quota = 4 / 5 s.
    assert m.record(quotas, "alice", "c", 1, strict=True) == (False, 800)
    assert m.tokens(("alice", ""), 5.0) == -4.0
    # Another user of the default entity has its own bucket (tags (bob, "")).
    assert m.record(quotas, "bob", "c", 10, strict=True) == (True, 0)
    # A second later the bucket is back above zero (-4 + 5): accepted again.
    clock.now += 1.0
    assert m.record(quotas, "alice", "c", 1, strict=True) == (True, 0)
    assert m.tokens(("alice", ""), 5.0) == pytest.approx(0.0)
    # A mutation that did not happen gives its tokens back.
    m.unrecord(quotas, "alice", "c", 1)
    assert m.tokens(("alice", ""), 5.0) == pytest.approx(1.0)


def test_permissive_always_takes_and_throttles_below_zero():
    clock = Clock()
    quotas = {(("client-id", "c"),): {M: 2.0}}
    m = ControllerMutationQuotaManager(num_windows=2, window_s=1.0, clock=clock)  # burst 4
    assert m.record(quotas, "u", "c", 4, strict=False) == (True, 0)
    assert m.record(quotas, "u", "c", 3, strict=False) == (True, 1500)  # -3 tokens at 2/s
    assert m.record(quotas, "u", "c", 1, strict=False) == (True, 2000)
    assert m.throttle_ms(quotas, "u", "c") == 2000
    assert m.record(quotas, "u", "other", 100, strict=False) == (True, 0)  # no quota for client "other"
    (stats,) = m.active()
    assert stats.tags == ("", "c") and stats.throttle_time_ms == 1750.0


def _quota_view(api_key: int, version: int, quotas: dict, clock: Clock) -> MutationQuota:
    image = MetadataImage(client_quotas=quotas)
    cq = ClientQuotas(2, 1.0, lambda: image)
    cq.controller_mutation = ControllerMutationQuotaManager(2, 1.0, clock)
    ctx = SimpleNamespace(api_key=api_key, api_version=version, principal="User:alice", client_id="app")
    return MutationQuota(cq, ctx, clock=clock)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("api_key", "strict_since"), [(ApiKey.CREATE_TOPICS, 6), (ApiKey.CREATE_PARTITIONS, 3), (ApiKey.DELETE_TOPICS, 5)]
)
def test_strict_from_kafkas_versions(api_key, strict_since):
    clock = Clock()
    quotas = {(("user", "alice"),): {M: 1.0}}
    assert _quota_view(api_key, strict_since, quotas, clock).strict
    assert not _quota_view(api_key, strict_since - 1, quotas, clock).strict


def test_create_topics_within_quota_refuses_the_excess_topics_in_order():
    clock = Clock()
    quota = _quota_view(ApiKey.CREATE_TOPICS, 7, {(("user", "alice"),): {M: 5.0}}, clock)  # burst 10
    specs = [NewTopic(f"t{i}", num_partitions=4) for i in range(5)] + [NewTopic("dflt")]
    created: list[str] = []

    async def create(admitted: list[NewTopic]) -> list[CreatedTopic]:
        created.extend(s.name for s in admitted)
        # The controller refuses t1 (say it exists): its partitions are given back.
        return [CreatedTopic(s.name, ApiResult(36, "exists") if s.name == "t1" else ApiResult()) for s in admitted]

    out = asyncio.run(create_topics_within_quota(quota, specs, 3, create))
    # 10 tokens: t0 (6 left), t1 (2 left), t2 (taken whole: -2); t3, t4 and dflt refused.
    assert created == ["t0", "t1", "t2"]
    assert [(r.name, int(r.result.error)) for r in out] == [("t0", 0), ("t1", 36), ("t2", 0), ("t3", 89), ("t4", 89), ("dflt", 89)]
    assert out[3].result.message == "The throttling quota has been exceeded."
    # -2 + 4 (t1 given back) = 2 tokens: not below zero now, but the throttle time handed out
    # when t3 was refused (-2 tokens at 5/s = 400 ms) is reported, less the time since.
    assert quota.throttle_time().total_seconds() == pytest.approx(0.4)
    clock.now += 0.1
    assert quota.throttle_time().total_seconds() == pytest.approx(0.3)
    assert new_topic_partitions(NewTopic("a", assignments={0: (1,), 1: (2,)}), 3) == 2
    assert new_topic_partitions(NewTopic("a"), 3) == 3
