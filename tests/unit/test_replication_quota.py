"""Replication throttles' bookkeeping (Kafka's ReplicationQuotaManager and the throttled-replica
list format of TopicConfigHandler.parseThrottledPartitions / ThrottledReplicaListValidator)."""

import pytest

from kavka.config import ConfigError, validate_topic_configs
from kavka.replication.quota import (
    ReplicationQuota,
    ReplicationQuotas,
    is_throttled,
    throttled_partitions,
)


def test_throttled_partitions_keep_the_entries_naming_this_broker():
    assert throttled_partitions(("0:1", "1:2", "2:1"), 1) == frozenset({0, 2})
    assert throttled_partitions(("0:1",), 3) == frozenset()
    assert throttled_partitions(("*",), 3) is None
    assert is_throttled(["*"], 7, 99) and not is_throttled([], 1, 0) and is_throttled(["4:2"], 2, 4)


@pytest.mark.parametrize("value", ["*", "0:1,1:2", ""])
def test_valid_lists(value: str) -> None:
    validate_topic_configs({"leader.replication.throttled.replicas": value})


@pytest.mark.parametrize("value", ["0-1", "a:1", "*,0:1", "1:"])
def test_invalid_lists_are_refused_with_kafkas_message(value: str) -> None:
    with pytest.raises(ConfigError, match=r"must be the literal '\*' or a list of replicas"):
        validate_topic_configs({"follower.replication.throttled.replicas": value})


def test_rate_is_bytes_over_at_least_num_minus_one_windows():
    q = ReplicationQuota(samples=3, window_s=1.0)
    assert not q.is_exceeded(0.0)  # unbounded by default
    q.set_bound(1000)
    q.record(1500, 0.0)
    assert q.rate(0.0) == 750.0  # 1500 B over the minimum 2 s
    assert not q.is_exceeded(0.0)
    q.record(1500, 0.5)  # same window: 3000 B over 0.5 s, counted as 2.5 s (Kafka's windowSize)
    assert q.is_exceeded(0.5) and q.rate(0.5) == 1200.0
    assert q.wait_s(0.5) == pytest.approx(0.5)  # 3000 B needs 3 s
    assert q.is_exceeded(1.0) and not q.is_exceeded(3.0)
    # Old samples age out: after num windows the early bytes no longer count.
    q.record(10, 10.0)
    assert q.rate(10.0) == pytest.approx(10 / 2)


def test_a_long_transfer_keeps_to_the_bound():
    """Send as the leader does (a chunk whenever the quota is not exceeded): the bytes sent by time t
    never exceed the bound * t plus the (num - 1) windows' burst."""
    q = ReplicationQuota(samples=4, window_s=1.0)
    q.set_bound(10_000)
    sent, t = 0, 0.0
    while t < 30.0:
        if not q.is_exceeded(t):
            q.record(1000, t)
            sent += 1000
        t += 0.01
        assert sent <= 10_000 * t + 3 * 10_000 + 1000
    assert sent >= 10_000 * 25  # and it is not starved either


def test_quotas_read_the_topic_configs_of_the_image():
    class Image:
        def topic_configs(self, name):
            return {"leader.replication.throttled.replicas": "0:1,1:2", "follower.replication.throttled.replicas": "*"} if name == "t" else {}

    q = ReplicationQuotas(1)
    assert not q.leader_throttled(Image(), "t", 0)  # no rate set: nothing is throttled
    q.leader.set_bound(100)
    q.follower.set_bound(100)
    assert q.leader_throttled(Image(), "t", 0) and not q.leader_throttled(Image(), "t", 1)
    assert q.follower_throttled(Image(), "t", 5) and not q.follower_throttled(Image(), "u", 0)
