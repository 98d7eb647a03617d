"""The pluggable replica placers (KIP-879): the seed's example, hypothesis properties, plugins.

Properties, for every built-in: each partition gets `rf` distinct brokers from those offered;
a replication-factor increase keeps the existing replicas first. Balance (replicas and preferred
leaders per broker within one of each other, hence of the mean) holds where the layout allows it,
and each test states its precondition: `simple` and `striped` place full stripes evenly (the
partitions cover whole rounds of the broker list; with racks, Kafka's own precondition: equal
racks and rf = number of racks); `multi-level` balances any number of partitions over a uniform
tree (every DC has the same racks count, every rack the same brokers count), and there no DC or
rack ever holds more than its fair share -- ceil(rf / DCs), ceil(rf / racks) -- of a partition.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.config import ConfigError, build_config
from kavka.controller.placement import (
    BUILT_IN,
    ClusterView,
    MultiLevelPlacer,
    PlacementError,
    PlacementSpec,
    SimplePlacer,
    StripedPlacer,
    check_assignment,
    load_placer,
    rack_path,
    run_placer,
    topic_seed,
)
from kavka.controller.replication_control import ReplicationControlManager
from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage

PLACERS = sorted(BUILT_IN)


def _table(assignment: list[list[int]], brokers: int, rf: int) -> list[list[str]]:
    """Kafka's documentation layout: one row per (replica rank, round), one column per broker."""
    rounds = math.ceil(len(assignment) / brokers)
    rows = []
    for j in range(rf):
        for k in range(rounds):
            row = ["" for _ in range(brokers)]
            for p in range(k * brokers, min((k + 1) * brokers, len(assignment))):
                row[assignment[p][j]] = f"p{p}"
            rows.append(row)
    return rows


def test_simple_reproduces_the_seed_example_p0_to_p14_over_five_brokers():
    out = SimplePlacer().place(PlacementSpec(15, 3), ClusterView(), [0, 1, 2, 3, 4])
    # partition p = 5k + i: first replica on broker i, the j-th further one on broker (i + j + k) mod 5
    assert _table(out, 5, 3) == [
        # broker-0 broker-1 broker-2 broker-3 broker-4
        ["p0", "p1", "p2", "p3", "p4"],  # 1st replica
        ["p5", "p6", "p7", "p8", "p9"],  # 1st replica
        ["p10", "p11", "p12", "p13", "p14"],  # 1st replica
        ["p4", "p0", "p1", "p2", "p3"],  # 2nd replica
        ["p8", "p9", "p5", "p6", "p7"],  # 2nd replica
        ["p12", "p13", "p14", "p10", "p11"],  # 2nd replica
        ["p3", "p4", "p0", "p1", "p2"],  # 3rd replica
        ["p7", "p8", "p9", "p5", "p6"],  # 3rd replica
        ["p11", "p12", "p13", "p14", "p10"],  # 3rd replica
    ]
    assert out[7] == [2, 4, 0]  # i=2, k=1: brokers 2, 2+1+1, 2+2+1 mod 5


def test_striped_is_todays_round_robin_placement():
    racks = {b: f"r{b % 3}" for b in range(1, 7)}
    spec = PlacementSpec(12, 3, seed=2)
    from kavka.controller.placement import RoundRobinPlacer

    expected = RoundRobinPlacer().place(list(racks), start_partition=0, num_partitions=12, replication_factor=3, start_index=2, racks=racks)
    assert StripedPlacer().place(spec, ClusterView(racks=racks), list(racks)) == expected


def test_multi_level_three_dcs_two_racks_rf3_one_replica_per_dc():
    racks = {b: f"/DC{b // 4 + 1}/R{b // 2 % 2 + 1}" for b in range(12)}  # 3 DCs x 2 racks x 2 brokers
    out = MultiLevelPlacer().place(PlacementSpec(24, 3, seed=7), ClusterView(racks=racks), list(racks))
    for reps in out:
        assert sorted(rack_path(racks[b])[0] for b in reps) == ["DC1", "DC2", "DC3"]
    assert set(Counter(b for r in out for b in r).values()) == {6}  # 72 replicas over 12 brokers
    assert set(Counter(r[0] for r in out).values()) == {2}  # 24 leaders over 12 brokers
    # The seed picks where each ring starts; another seed gives another (still balanced) layout.
    other = MultiLevelPlacer().place(PlacementSpec(24, 3, seed=8), ClusterView(racks=racks), list(racks))
    assert other != out


def test_rack_paths():
    assert rack_path("/DC1/R1") == ("DC1", "R1")
    assert rack_path("rack1") == ("rack1",)
    assert rack_path(None) == () and rack_path("") == () and rack_path("/") == ()


# --------------------------------------------------------------------------- properties

layouts = st.one_of(
    st.lists(st.none(), min_size=1, max_size=9),
    st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=9),
    st.lists(st.sampled_from(["/DC1/R1", "/DC1/R2", "/DC2/R1", "/DC2/R2/H1", "/DC3", "/DC3/R1"]), min_size=1, max_size=9),
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([*PLACERS, "tests.placer_plugins:Reversed"]),  # the shared contract, plugins too
    rack_of=layouts,
    rf=st.integers(1, 9),
    parts=st.integers(1, 25),
    first=st.integers(0, 30),
    seed=st.integers(0, 1000),
    first_id=st.integers(0, 5),
)
def test_every_placer_gives_distinct_offered_brokers(name, rack_of, rf, parts, first, seed, first_id):
    racks = {first_id + 2 * i: r for i, r in enumerate(rack_of)}
    rf = min(rf, len(racks))
    spec = PlacementSpec(parts, rf, start_partition=first, seed=seed)
    out = load_placer(name).place(spec, ClusterView(racks=racks), list(racks))
    assert len(out) == parts
    for reps in out:
        assert len(reps) == rf and len(set(reps)) == rf and set(reps) <= set(racks)
    assert check_assignment(name, spec, ClusterView(racks=racks), list(racks), out) == out


def _spread(counts: Counter[int], brokers) -> int:
    return max(counts.get(b, 0) for b in brokers) - min(counts.get(b, 0) for b in brokers)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["simple", "striped"]),
    n=st.integers(1, 9),
    rf=st.integers(1, 9),
    rounds=st.integers(1, 4),
    start_round=st.integers(0, 3),
    seed=st.integers(0, 100),
)
def test_simple_and_striped_balance_full_stripes_without_racks(name, n, rf, rounds, start_round, seed):
    # Precondition: the partitions cover whole rounds of the broker list.
    rf = min(rf, n)
    brokers = list(range(10, 10 + n))
    out = BUILT_IN[name]().place(PlacementSpec(rounds * n, rf, start_partition=start_round * n, seed=seed), ClusterView(), brokers)
    assert _spread(Counter(b for r in out for b in r), brokers) == 0
    assert _spread(Counter(r[0] for r in out), brokers) == 0


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 9), rf=st.integers(1, 9), parts=st.integers(1, 40), first=st.integers(0, 40), seed=st.integers(0, 100))
def test_leaders_within_one_for_any_partition_count(n, rf, parts, first, seed):
    # Rack-unaware simple and striped lead round robin over the broker list: no precondition.
    rf = min(rf, n)
    for placer in (SimplePlacer(), StripedPlacer()):
        out = placer.place(PlacementSpec(parts, rf, start_partition=first, seed=seed), ClusterView(), list(range(n)))
        assert _spread(Counter(r[0] for r in out), range(n)) <= 1


@settings(max_examples=200, deadline=None)
@given(racks_n=st.integers(1, 4), per_rack=st.integers(1, 3), rounds=st.integers(1, 4), seed=st.integers(0, 100))
def test_striped_balances_equal_racks_with_rf_equal_to_racks(racks_n, per_rack, rounds, seed):
    # Kafka's precondition for an even rack-aware spread: equal racks and rf = number of racks.
    racks = {b: f"rack{b % racks_n}" for b in range(racks_n * per_rack)}
    n = len(racks)
    out = StripedPlacer().place(PlacementSpec(rounds * n, racks_n, seed=seed), ClusterView(racks=racks), list(racks))
    for reps in out:
        assert len({racks[b] for b in reps}) == racks_n
    assert _spread(Counter(b for r in out for b in r), racks) == 0
    assert _spread(Counter(r[0] for r in out), racks) == 0


def _uniform(dcs: int, racks_per_dc: int, per_rack: int) -> dict[int, str]:
    out = {}
    for b, (d, r, _) in enumerate(itertools.product(range(dcs), range(racks_per_dc), range(per_rack))):
        out[100 + b] = f"/DC{d}/R{r}"
    return out


def _fair(out: list[list[int]], racks: dict[int, str], rf: int, dcs: int, racks_per_dc: int) -> None:
    for reps in out:
        dc = Counter(rack_path(racks[b])[0] for b in reps)
        rack = Counter(racks[b] for b in reps)
        assert max(dc.values()) <= math.ceil(rf / dcs), reps
        assert max(rack.values()) <= math.ceil(rf / (dcs * racks_per_dc)), reps


@settings(max_examples=300, deadline=None)
@given(
    dcs=st.integers(1, 4),
    racks_per_dc=st.integers(1, 3),
    per_rack=st.integers(1, 3),
    rf=st.integers(1, 8),
    parts=st.integers(1, 40),
    seed=st.integers(0, 10_000),
)
def test_multi_level_fair_share_and_balance_on_uniform_trees(dcs, racks_per_dc, per_rack, rf, parts, seed):
    racks = _uniform(dcs, racks_per_dc, per_rack)
    rf = min(rf, len(racks))
    out = MultiLevelPlacer().place(PlacementSpec(parts, rf, seed=seed), ClusterView(racks=racks), list(racks))
    _fair(out, racks, rf, dcs, racks_per_dc)
    assert _spread(Counter(b for r in out for b in r), racks) <= 1
    assert _spread(Counter(r[0] for r in out), racks) <= 1


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(PLACERS),
    dcs=st.integers(1, 3),
    racks_per_dc=st.integers(1, 3),
    per_rack=st.integers(1, 2),
    rf1=st.integers(1, 6),
    extra=st.integers(1, 4),
    parts=st.integers(1, 12),
    seed=st.integers(0, 1000),
)
def test_increasing_the_replication_factor_keeps_existing_replicas(name, dcs, racks_per_dc, per_rack, rf1, extra, parts, seed):
    racks = _uniform(dcs, racks_per_dc, per_rack)
    rf1 = min(rf1, len(racks))
    rf2 = min(rf1 + extra, len(racks))
    assume(rf2 > rf1)
    placer = BUILT_IN[name]()
    before = placer.place(PlacementSpec(parts, rf1, seed=seed, topic="t"), ClusterView(racks=racks), list(racks))
    view = ClusterView(racks=racks, assignments={"t": before})
    spec = PlacementSpec(parts, rf2, seed=seed, topic="t")
    after = run_placer(placer, name, spec, view, list(racks))
    for old, new in zip(before, after, strict=True):
        assert new[:rf1] == old and len(set(new)) == rf2
    if name == "multi-level":
        _fair(after, racks, rf2, dcs, racks_per_dc)


@settings(max_examples=100, deadline=None)
@given(dcs=st.integers(1, 3), racks_per_dc=st.integers(1, 3), rf=st.integers(1, 3), first=st.integers(1, 12), more=st.integers(1, 12), seed=st.integers(0, 1000))
def test_multi_level_new_partitions_continue_where_the_topic_left_off(dcs, racks_per_dc, rf, first, more, seed):
    racks = _uniform(dcs, racks_per_dc, 2)
    rf = min(rf, len(racks))
    view = ClusterView(racks=racks)
    before = MultiLevelPlacer().place(PlacementSpec(first, rf, seed=seed, topic="t"), view, list(racks))
    grown = MultiLevelPlacer().place(
        PlacementSpec(more, rf, start_partition=first, seed=seed, topic="t"),
        ClusterView(racks=racks, assignments={"t": before}),
        list(racks),
    )
    # The rings continue (replayed from the existing replicas): the same as placing all at once.
    at_once = MultiLevelPlacer().place(PlacementSpec(first + more, rf, seed=seed, topic="t"), view, list(racks))
    assert before + grown == at_once
    _fair(at_once, racks, rf, dcs, racks_per_dc)


# --------------------------------------------------------------------------- plugins and the controller


def _apply(image, records):
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(r, image.offset + 1 + i)
    return d.apply()


def _cluster(racks: dict[int, str | None]) -> MetadataImage:
    recs = [
        mr.RegisterBrokerRecord(b, f"inc{b}", (("PLAINTEXT", "h", 9000 + b),), rack, fenced=False) for b, rack in racks.items()
    ]
    return _apply(MetadataImage(), recs)


def _logic(placer: str) -> ReplicationControlManager:
    ids = (f"id{i}" for i in itertools.count())
    return ReplicationControlManager(build_config({"node.id": "1", "broker.replica.placer": placer}), new_uuid=lambda: next(ids))


def _replicas(image: MetadataImage, topic: str) -> list[list[int]]:
    t = image.topics_by_name[topic]
    return [list(t.partitions[p].replicas) for p in sorted(t.partitions)]


@pytest.mark.parametrize("name", [*PLACERS, "tests.placer_plugins:Reversed"])
def test_create_topics_and_partitions_go_through_the_configured_placer(name):
    racks = {1: "/DC1/R1", 2: "/DC1/R2", 3: "/DC2/R1", 4: "/DC2/R2"}
    logic, image = _logic(name), _cluster(racks)
    recs, res = logic.create_topics(image, [NewTopic("t", num_partitions=4, replication_factor=2)], validate_only=False)
    assert res[0].result.ok, res[0].result
    image = _apply(image, recs)
    recs, res2 = logic.create_partitions(image, "t", 8, None)
    assert res2.ok, res2
    image = _apply(image, recs)
    got = _replicas(image, "t")
    assert len(got) == 8 and all(len(set(r)) == 2 for r in got)
    if name == "simple":
        assert got == SimplePlacer().place(PlacementSpec(8, 2), ClusterView(), [1, 2, 3, 4])
    if name in ("striped", "multi-level"):
        # The topic's seed is stable, so the grown topic is laid out as if created with 8 partitions.
        at_once = BUILT_IN[name]().place(PlacementSpec(8, 2, seed=topic_seed("t"), topic="t"), ClusterView(racks=racks), [1, 2, 3, 4])
        assert got == at_once
    if name == "multi-level":
        assert all(len({racks[b][:4] for b in r}) == 2 for r in got)  # one replica in each DC
    if name.endswith("Reversed"):
        # The plugin reverses the default's answer: the controller used it for both requests.
        view = ClusterView(racks=racks)
        first, second = got[:4], got[4:]
        for seed in range(4):
            if [r[::-1] for r in StripedPlacer().place(PlacementSpec(4, 2, seed=seed), view, [1, 2, 3, 4])] == first:
                break
        else:
            pytest.fail(f"{first} is not a reversed striped placement")
        assert any(
            [r[::-1] for r in StripedPlacer().place(PlacementSpec(4, 2, start_partition=4, seed=s), view, [1, 2, 3, 4])] == second
            for s in range(4)
        )


def test_plugins_load_by_name_and_by_module_class():
    assert isinstance(load_placer("multi-level"), MultiLevelPlacer)
    assert type(load_placer("tests.placer_plugins:Reversed")).__name__ == "Reversed"


@pytest.mark.parametrize(
    ("plugin", "code", "words"),
    [
        ("tests.placer_plugins:Raises", ErrorCode.invalid_replica_assignment, "failed: RuntimeError: placer exploded"),
        ("tests.placer_plugins:Duplicates", ErrorCode.invalid_replica_assignment, "duplicate broker"),
        ("tests.placer_plugins:WrongReplicationFactor", ErrorCode.invalid_replica_assignment, "replication factor is 2"),
        ("tests.placer_plugins:UnknownBroker", ErrorCode.invalid_replica_assignment, "broker 9999 is not one of"),
        ("tests.placer_plugins:BrokenConstructor", ErrorCode.invalid_replica_assignment, "could not be loaded: OSError"),
        ("tests.placer_plugins:NoSuchClass", ErrorCode.invalid_replica_assignment, "could not be loaded: AttributeError"),
        ("tests.no_such_module:Placer", ErrorCode.invalid_replica_assignment, "could not be loaded: ModuleNotFoundError"),
    ],
)
def test_a_broken_plugin_gives_a_clear_error_and_the_controller_keeps_working(plugin, code, words):
    logic, image = _logic(plugin), _cluster({1: None, 2: None, 3: None})
    recs, res = logic.create_topics(image, [NewTopic("t", num_partitions=3, replication_factor=2)], validate_only=False)
    assert recs == [] and res[0].result.error == code
    assert words in res[0].result.message
    # Still serving: a manual assignment needs no placer, and a forced simple placement bypasses it.
    recs, res = logic.create_topics(image, [NewTopic("m", assignments={0: [1, 2]})], validate_only=False)
    assert res[0].result.ok
    spec = PlacementSpec(3, 2, force_simple=True)
    assert logic.place_replicas(image, spec, [1, 2, 3]) == SimplePlacer().place(spec, ClusterView(), [1, 2, 3])


def test_a_placer_refusal_keeps_its_error_code():
    logic, image = _logic("striped"), _cluster({1: None, 2: None})
    with pytest.raises(PlacementError) as e:
        logic.place_replicas(image, PlacementSpec(1, 3), [1, 2])
    assert e.value.code == ErrorCode.invalid_replication_factor and "larger than available brokers: 2" in str(e.value)


@pytest.mark.parametrize("value", ["", "round-robin", "module.only", ":Class", "mod:", "bad module:X"])
def test_a_bad_placer_value_stops_startup_naming_the_key(value):
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", "broker.replica.placer": value})
    assert "broker.replica.placer" in str(e.value)


def test_the_default_placer_is_striped():
    assert build_config({"node.id": "1"})["broker.replica.placer"] == "striped"
