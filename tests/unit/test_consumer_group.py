"""KIP-848 consumer groups: reconciliation, fencing, expiry -- and a seeded simulation that checks
no partition is ever owned by two members at once, and that the group converges."""

from __future__ import annotations

import itertools
import random

from kio.schema.errors import ErrorCode

from kavka.coordinator.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatResult,
    assign,
)

TOPICS = {"a": 6, "b": 3}


def make() -> ConsumerGroupCoordinator:
    ids = itertools.count(1)
    return ConsumerGroupCoordinator(
        ConsumerGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=100),
        topic_partitions=TOPICS.get,
        new_member_id=lambda: f"m{next(ids)}",
    )


def hb(cg: ConsumerGroupCoordinator, member_id: str = "", epoch: int = 0, *, owned=None, topics=("a",), now: int = 0,  # noqa: ANN001
       assignor: str | None = None) -> HeartbeatResult:
    return cg.heartbeat(
        group_id="g", member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None, rebalance_timeout_ms=5000,
        subscribed_topic_names=topics, subscribed_topic_regex=None, server_assignor=assignor, owned=owned,
        client_id="c", client_host="/h", now_ms=now,
    )


def test_assignors_cover_every_partition_once() -> None:
    for name in ("uniform", "range"):
        out = assign(name, {"x": ("a", "b"), "y": ("a",), "z": ("a", "b")}, TOPICS, {})
        flat = sorted(tp for tps in out.values() for tp in tps)
        assert flat == sorted((t, p) for t, n in TOPICS.items() for p in range(n)), name
        assert all(tp[0] == "a" for tp in out["y"])  # only what it subscribes to
    uniform = assign("uniform", {"x": ("a",), "y": ("a",)}, {"a": 6}, {"x": frozenset({("a", 0), ("a", 1), ("a", 2), ("a", 3)})})
    assert len(uniform["x"]) == len(uniform["y"]) == 3 and uniform["x"] < {("a", 0), ("a", 1), ("a", 2), ("a", 3)}


def test_join_gets_everything_then_a_second_member_waits_for_the_revocation() -> None:
    cg = make()
    first = hb(cg)
    assert (first.error, first.member_id, first.member_epoch) == (ErrorCode.none, "m1", 1)
    assert first.assignment == frozenset(("a", p) for p in range(6))
    second = hb(cg)
    assert second.member_id == "m2" and second.assignment == frozenset()  # nothing is free yet
    # m1 is told to give up half, keeping its epoch until it has.
    r1 = hb(cg, "m1", first.member_epoch, owned=first.assignment)
    assert r1.member_epoch == first.member_epoch and r1.assignment is not None and len(r1.assignment) == 3
    released = first.assignment - r1.assignment
    assert hb(cg, "m2", second.member_epoch).assignment is None  # still owned by m1
    r1 = hb(cg, "m1", r1.member_epoch, owned=r1.assignment)  # revoked
    assert r1.member_epoch == 2
    r2 = hb(cg, "m2", second.member_epoch, owned=frozenset())
    assert r2.assignment == released and r2.member_epoch == 2


def test_fencing_unknown_members_and_leave() -> None:
    cg = make()
    r = hb(cg)
    assert hb(cg, "m1", r.member_epoch + 5).error == ErrorCode.fenced_member_epoch
    assert hb(cg, "nobody", 3).error == ErrorCode.unknown_member_id
    assert cg.validate_offset_commit("g", "m1", r.member_epoch - 1) == ErrorCode.stale_member_epoch
    assert cg.validate_offset_commit("g", "m1", r.member_epoch) == ErrorCode.none
    assert cg.validate_offset_commit("g", "ghost", 1) == ErrorCode.unknown_member_id
    left = hb(cg, "m1", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
    assert cg.groups["g"].state == "Empty"
    assert hb(cg, topics=None).error == ErrorCode.invalid_request
    assert hb(cg, assignor="sticky-ish").error == ErrorCode.unsupported_assignor


def test_session_expiry_frees_the_partitions() -> None:
    cg = make()
    a = hb(cg, now=0)
    b = hb(cg, now=0)
    hb(cg, "m1", a.member_epoch, owned=a.assignment, now=900)
    cg.poll(999)
    assert set(cg.groups["g"].members) == {"m1", "m2"}
    hb(cg, "m1", a.member_epoch, owned=a.assignment, now=999)
    cg.poll(1000)  # m2 last heard at 0
    assert set(cg.groups["g"].members) == {"m1"}
    assert b.member_id == "m2"


def test_seeded_simulation_never_double_assigns_and_converges() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        cg = make()
        clients: dict[str, tuple[int, frozenset]] = {}  # member id -> (epoch, partitions it believes it owns)
        now = 0
        for step in range(300):
            now += 10
            action = rng.random()
            if action < 0.05 and len(clients) < 5:
                r = hb(cg, now=now, topics=rng.choice([("a",), ("a", "b")]))
                clients[r.member_id] = (r.member_epoch, r.assignment or frozenset())  # type: ignore[index]
            elif action < 0.08 and len(clients) > 1:
                mid = rng.choice(sorted(clients))
                hb(cg, mid, -1, now=now)
                del clients[mid]
            elif clients:
                mid = rng.choice(sorted(clients))
                epoch, owned = clients[mid]
                r = hb(cg, mid, epoch, owned=owned, topics=None, now=now)
                assert r.error == ErrorCode.none, (seed, step, r)
                clients[mid] = (r.member_epoch, r.assignment if r.assignment is not None else owned)
            for mid in list(clients):  # keep everyone's session alive in this simulation
                cg.groups["g"].members[mid].session_deadline_ms = now + 1000
            seen: set = set()
            for _mid, (_e, owned) in clients.items():
                assert not (owned & seen), f"seed {seed} step {step}: a partition owned twice"
                seen |= owned
        # Converge: everyone heartbeats until stable.
        for _ in range(20):
            for mid in sorted(clients):
                epoch, owned = clients[mid]
                r = hb(cg, mid, epoch, owned=owned, topics=None, now=now)
                clients[mid] = (r.member_epoch, r.assignment if r.assignment is not None else owned)
        g = cg.groups["g"]
        assert g.state == "Stable", seed
        subscribed = {(t, p) for m in g.members.values() for t in m.subscribed for p in range(TOPICS[t])}
        flat = [tp for _e, owned in clients.values() for tp in owned]
        assert sorted(flat) == sorted(subscribed), seed
