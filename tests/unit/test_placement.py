"""Replica placement at creation: round-robin, and Kafka's rack-aware spread when brokers have racks."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.controller.placement import RoundRobinPlacer, rack_alternated


def test_rack_alternated_order():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "a"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]


def test_every_replica_on_its_own_rack_and_leaders_spread_over_racks():
    racks = {b: f"r{b % 3}" for b in range(1, 7)}  # 6 brokers, 3 racks
    out = RoundRobinPlacer().place(
        list(racks), start_partition=0, num_partitions=12, replication_factor=3, start_index=2, racks=racks
    )
    assert len(out) == 12
    for replicas in out:
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(racks[r[0]] for r in out) == {"r0": 4, "r1": 4, "r2": 4}
    assert set(Counter(r[0] for r in out).values()) == {2}


def test_without_racks_the_rack_unaware_spread_is_kept():
    plain = RoundRobinPlacer().place([1, 2, 3], start_partition=0, num_partitions=6, replication_factor=2, start_index=0)
    none = RoundRobinPlacer().place(
        [1, 2, 3], start_partition=0, num_partitions=6, replication_factor=2, start_index=0, racks={1: None, 2: None, 3: None}
    )
    assert plain == none
    assert Counter(r[0] for r in plain) == {1: 2, 2: 2, 3: 2}


@settings(max_examples=300, deadline=None)
@given(
    rack_of=st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=1, max_size=9),
    rf=st.integers(1, 9),
    parts=st.integers(1, 30),
    start=st.integers(0, 50),
    first=st.integers(0, 40),
)
def test_rack_aware_placement_properties(rack_of, rf, parts, start, first):
    racks = {i + 1: r for i, r in enumerate(rack_of)}
    rf = min(rf, len(racks))
    out = RoundRobinPlacer().place(
        list(racks), start_partition=first, num_partitions=parts, replication_factor=rf, start_index=start, racks=racks
    )
    num_racks = len({r or "" for r in racks.values()})
    for replicas in out:
        assert len(replicas) == rf and len(set(replicas)) == rf
        # As many distinct racks as the replication factor allows.
        assert len({racks[b] or "" for b in replicas}) == min(rf, num_racks)
    # Leaders go round-robin over the brokers: no broker leads two more than another.
    if parts >= len(racks):
        counts = Counter(r[0] for r in out)
        assert max(counts.values()) - min(counts.get(b, 0) for b in racks) <= 1
