"""The per-partition step-down of a broker whose controller session lapsed (broker.session_watch,
LeaderState.may_lead_while_lapsed): a leader keeps serving while every other ISR member fetches
from it, and steps down only where the controller may have elected someone else. Deterministic:
the clock is the `now_ms` each call is given."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kavka.broker.handlers.metadata import live_brokers, partition_rows
from kavka.common import TopicPartition
from kavka.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration
from kavka.replication.replica_manager import ReplicaManager
from kavka.replication.replica_state import LeaderState
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

LAG_MS = 3000
T0 = 1_000_000


def _leader(replicas: tuple[int, ...], isr: tuple[int, ...] | None = None) -> LeaderState:
    reg = PartitionRegistration(0, replicas, isr if isr is not None else replicas, 1, 5, 0)
    return LeaderState.become_leader(1, reg, high_watermark=0, log_end_offset=10, now_ms=T0)


def _fetch(ls: LeaderState, replica: int, now_ms: int) -> None:
    ls.on_follower_fetch(replica, fetch_offset=10, now_ms=now_ms, log_end_offset=10)


def _may_lead(ls: LeaderState, now_ms: int) -> bool:
    return ls.may_lead_while_lapsed(now_ms=now_ms, replica_lag_time_max_ms=LAG_MS)


def test_a_leader_whose_isr_all_fetches_keeps_leading_while_lapsed() -> None:
    ls = _leader((1, 2, 3))
    now = T0
    for _ in range(20):  # a minute of fetches every 3 s: none of the followers leads elsewhere
        now += LAG_MS
        _fetch(ls, 2, now)
        _fetch(ls, 3, now)
        assert _may_lead(ls, now)
        assert _may_lead(ls, now + LAG_MS)  # the last fetches are replica.lag.time.max.ms old


def test_one_isr_follower_silent_for_the_lag_time_steps_the_leader_down() -> None:
    ls = _leader((1, 2, 3))
    _fetch(ls, 2, T0)
    _fetch(ls, 3, T0)
    now = T0
    while now < T0 + 4 * LAG_MS:  # follower 3 keeps fetching, follower 2 stopped at T0
        now += 500
        _fetch(ls, 3, now)
        assert _may_lead(ls, now) == (now - T0 <= LAG_MS), now
    _fetch(ls, 2, now)  # it fetches again at this leader epoch: it leads nowhere, so neither is
    assert _may_lead(ls, now)


def test_a_follower_that_never_fetched_in_this_leader_epoch_steps_the_leader_down() -> None:
    ls = _leader((1, 2, 3))
    _fetch(ls, 3, T0)
    assert not _may_lead(ls, T0)


def test_a_single_replica_never_steps_down() -> None:
    ls = _leader((1,))
    assert _may_lead(ls, T0)
    assert _may_lead(ls, T0 + 100 * LAG_MS)


def test_the_isr_alone_with_other_replicas_steps_down() -> None:
    """The others left the ISR; the controller may elect one of them (an ELR member, KIP-966, or
    uncleanly) once it fences this broker, even while they fetch from it -- and while the fetches
    propose them back into the ISR: the proposal may not be committed."""
    ls = _leader((1, 2, 3), isr=(1,))
    _fetch(ls, 2, T0)
    _fetch(ls, 3, T0)
    assert ls.pending is not None and 2 in ls.maximal_isr
    assert not _may_lead(ls, T0)


def test_only_isr_members_count() -> None:
    """A replica outside the ISR may be silent (it cannot be elected while an ISR member lives)."""
    ls = _leader((1, 2, 3), isr=(1, 2))
    _fetch(ls, 2, T0)
    assert _may_lead(ls, T0 + LAG_MS)
    assert not _may_lead(ls, T0 + LAG_MS + 1)


def test_a_new_leader_epoch_forgets_the_fetches_of_the_last() -> None:
    ls = _leader((1, 2))
    _fetch(ls, 2, T0)
    assert _may_lead(ls, T0)
    reg = PartitionRegistration(0, (1, 2), (1, 2), 1, 6, 1)
    ls = LeaderState.become_leader(1, reg, high_watermark=0, log_end_offset=10, now_ms=T0)
    assert not _may_lead(ls, T0)


def test_metadata_shows_only_the_stepped_down_partitions_leaderless(tmp_path: Path) -> None:
    """A lapsed broker leading two partitions, one whose follower fetches and one whose follower
    is silent: Metadata shows the second with leader -1 (LEADER_NOT_AVAILABLE) and the first led
    by it, and keeps it among the brokers; once both stepped down it leaves itself out."""
    clock = [T0]
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=T0)
    rm = ReplicaManager(node_id=1, log_manager=lm, now_ms=lambda: clock[0], replica_lag_time_max_ms=LAG_MS)
    regs = {p: PartitionRegistration(p, (1, 2), (1, 2), 1, 0, 0) for p in (0, 1)}
    for p, reg in regs.items():
        rm.apply_partition(TopicPartition("t", p), topic_id="AAAAAAAAAAAAAAAAAAAAAw", registration=reg,
                           config=LogConfig(), min_insync_replicas=1)
    brokers = {b: BrokerRegistration(b, f"inc{b}", (("PLAINTEXT", "h", 9000 + b),), None, (), epoch=10, fenced=False)
               for b in (1, 2)}
    image = MetadataImage(brokers=brokers)
    node = SimpleNamespace(node_id=1, replica_manager=rm, log_manager=lm)

    def follower_fetches(p: int) -> None:
        rm.get_partition("t", p).fetch_for_follower(
            2, fetch_offset=0, last_fetched_epoch=-1, current_leader_epoch=0, max_bytes=1 << 20,
            min_one_message=True, now_ms=clock[0])

    def leaders() -> dict[int, int]:
        live = live_brokers(node, image)
        return {index: leader for _, index, leader, *_ in partition_rows(node, live, "t", regs.values())}

    follower_fetches(0)
    follower_fetches(1)
    rm.set_leadership_lapsed(True)
    assert leaders() == {0: 1, 1: 1} and 1 in live_brokers(node, image)
    clock[0] += LAG_MS + 1
    follower_fetches(0)
    rm.review_step_downs()
    assert leaders() == {0: 1, 1: -1}
    assert 1 in live_brokers(node, image)
    clock[0] += LAG_MS + 1
    rm.review_step_downs()
    assert leaders() == {0: -1, 1: -1}
    assert live_brokers(node, image) == {2}
    rm.set_leadership_lapsed(False)
    assert leaders() == {0: 1, 1: 1} and live_brokers(node, image) == {1, 2}
