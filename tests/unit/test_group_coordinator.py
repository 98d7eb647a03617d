"""The pure group state machine: joins, syncs, rebalances, timeouts, static members, offsets.

Driven in memory with an explicit clock and deterministic member ids; every
parked request's answer is read from the outbox.
"""

from __future__ import annotations

import itertools

from kio.schema.errors import ErrorCode

from kavka.coordinator import records as rec
from kavka.coordinator.group import (
    TRANSITIONS,
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    GroupSnapshot,
    GroupState,
    JoinResult,
    MemberSnapshot,
    OffsetAndMetadata,
    OffsetRecord,
    Parked,
    SyncResult,
)

SESSION = 1000
REBALANCE = 3000


def make(delay: int = 0) -> GroupCoordinator:
    counter = itertools.count(1)
    return GroupCoordinator(
        GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=delay),
        new_member_id=lambda prefix: f"{prefix}-{next(counter)}",
    )


def join(gc: GroupCoordinator, member_id: str = "", *, now: int = 0, instance: str | None = None,
         protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),), v4: bool = True, group: str = "g"):
    return gc.join_group(
        group_id=group, member_id=member_id, group_instance_id=instance, client_id="c", client_host="/h",
        session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE, protocol_type="consumer",
        protocols=protocols, require_known_member_id=v4, now_ms=now,
    )


def sync(gc: GroupCoordinator, member_id: str, generation: int, assignments=(), *, now: int = 0):
    return gc.sync_group(group_id="g", generation_id=generation, member_id=member_id, group_instance_id=None,
                         protocol_type=None, protocol_name=None, assignments=assignments, now_ms=now)


def answers(gc: GroupCoordinator) -> dict[int, JoinResult | SyncResult]:
    done, _ = gc.drain()
    return dict(done)


def join_new(gc: GroupCoordinator, *, now: int = 0) -> tuple[str, Parked | JoinResult]:
    first = join(gc, now=now)
    assert isinstance(first, JoinResult) and first.error == ErrorCode.member_id_required
    return first.member_id, join(gc, first.member_id, now=now)


def stable_group(gc: GroupCoordinator, n: int) -> tuple[list[str], int]:
    """n members joined and synced; returns member ids (leader first) and the generation."""
    ids, tokens = [], []
    for _ in range(n):
        mid, parked = join_new(gc)
        assert isinstance(parked, Parked)
        ids.append(mid)
        tokens.append(parked.token)
        gc.poll(0)  # zero initial delay: the first join completes at once
        res = answers(gc)
        if len(ids) > 1:
            # Joining a Stable group forces the others to rejoin.
            for other in ids[:-1]:
                p = join(gc, other)
                assert isinstance(p, Parked)
                res.update(answers(gc))
                tokens[ids.index(other)] = p.token
        res.update(answers(gc))
    g = gc.groups["g"]
    assert g.state == GroupState.COMPLETING_REBALANCE
    gen = g.generation_id
    leader = g.leader_id
    assert leader is not None
    assignments = [(m, f"a-{m}".encode()) for m in ids]
    for m in ids:
        if m != leader:
            assert isinstance(sync(gc, m, gen), Parked)
    assert isinstance(sync(gc, leader, gen, assignments), Parked)
    done = answers(gc)
    assert len(done) == n and all(r.error == ErrorCode.none for r in done.values())
    assert g.state == GroupState.STABLE
    return [leader, *[m for m in ids if m != leader]], gen


def test_transition_table_is_kafkas() -> None:
    assert GroupState.STABLE not in TRANSITIONS[GroupState.EMPTY]
    assert TRANSITIONS[GroupState.DEAD] == frozenset()


def test_member_id_required_then_single_member_becomes_leader() -> None:
    gc = make()
    mid, parked = join_new(gc)
    assert mid == "c-1"
    assert isinstance(parked, Parked)
    done = answers(gc)
    res = done[parked.token]
    assert isinstance(res, JoinResult)
    assert (res.error, res.generation_id, res.leader, res.member_id, res.protocol_name) == (ErrorCode.none, 1, "c-1", "c-1", "range")
    assert [m[0] for m in res.members] == ["c-1"]


def test_three_members_one_generation_and_everyone_gets_its_assignment() -> None:
    gc = make()
    ids, gen = stable_group(gc, 3)
    for m in ids:
        r = sync(gc, m, gen)
        assert isinstance(r, SyncResult) and r.assignment == f"a-{m}".encode()
    assert gc.heartbeat(group_id="g", generation_id=gen, member_id=ids[1], group_instance_id=None, now_ms=10) == ErrorCode.none


def test_stale_generation_and_unknown_member() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    hb = gc.heartbeat(group_id="g", generation_id=gen - 1, member_id=ids[0], group_instance_id=None, now_ms=0)
    assert hb == ErrorCode.illegal_generation
    assert gc.heartbeat(group_id="g", generation_id=gen, member_id="nobody", group_instance_id=None, now_ms=0) == ErrorCode.unknown_member_id
    assert isinstance(sync(gc, ids[0], gen + 5), SyncResult)
    assert sync(gc, ids[0], gen + 5).error == ErrorCode.illegal_generation  # type: ignore[union-attr]
    assert join(gc, "nobody").error == ErrorCode.unknown_member_id  # type: ignore[union-attr]


def test_leave_rebalances_and_survivors_get_a_new_generation() -> None:
    gc = make()
    ids, gen = stable_group(gc, 3)
    top, errs = gc.leave_group(group_id="g", members=[(ids[2], None)], now_ms=5)
    assert (top, errs) == (ErrorCode.none, [ErrorCode.none])
    assert gc.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert gc.heartbeat(group_id="g", generation_id=gen, member_id=ids[0], group_instance_id=None, now_ms=5) == ErrorCode.rebalance_in_progress
    tokens = [join(gc, m, now=6) for m in ids[:2]]
    done = answers(gc)
    results = [done[t.token] for t in tokens]  # type: ignore[union-attr]
    assert all(r.generation_id == gen + 1 and r.error == ErrorCode.none for r in results)
    leader = [r for r in results if r.member_id == r.leader]
    assert len(leader) == 1 and sorted(m[0] for m in leader[0].members) == sorted(ids[:2])


def test_session_expiry_removes_a_silent_member() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    gc.heartbeat(group_id="g", generation_id=gen, member_id=ids[0], group_instance_id=None, now_ms=900)
    gc.poll(999)
    assert set(gc.groups["g"].members) == set(ids)
    gc.poll(1000)  # ids[1] last heard at 0, session 1000 ms
    assert set(gc.groups["g"].members) == {ids[0]}
    assert gc.groups["g"].state == GroupState.PREPARING_REBALANCE


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    p = join(gc, ids[0], now=100)  # the leader rejoins: rebalance
    assert isinstance(p, Parked)
    # ids[1] keeps heartbeating (answered REBALANCE_IN_PROGRESS) but never rejoins.
    for t in range(100, 100 + REBALANCE, 500):
        hb = gc.heartbeat(group_id="g", generation_id=gen, member_id=ids[1], group_instance_id=None, now_ms=t)
        assert hb == ErrorCode.rebalance_in_progress
        gc.poll(t)
    gc.poll(100 + REBALANCE - 1)
    assert not answers(gc)
    gc.poll(100 + REBALANCE)
    res = answers(gc)[p.token]
    assert isinstance(res, JoinResult) and res.generation_id == gen + 1 and [m[0] for m in res.members] == [ids[0]]


def test_initial_delay_gathers_members_into_one_generation() -> None:
    gc = make(delay=300)
    a, pa = join_new(gc, now=0)
    b, pb = join_new(gc, now=100)
    gc.poll(399)
    assert not answers(gc)
    gc.poll(400)  # the second join pushed the deadline to 100 + 300
    done = answers(gc)
    assert {done[pa.token].generation_id, done[pb.token].generation_id} == {1}  # type: ignore[union-attr]


def test_sync_during_rebalance_and_rejoin_answers() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    same = join(gc, ids[1])  # a follower rejoining a Stable group with the same protocols: no rebalance
    assert isinstance(same, JoinResult) and same.generation_id == gen and same.members == ()
    assert gc.groups["g"].state == GroupState.STABLE
    assert isinstance(join(gc, ids[0]), Parked)  # the leader rejoining: rebalance
    r = sync(gc, ids[1], gen)
    assert isinstance(r, SyncResult) and r.error == ErrorCode.rebalance_in_progress


def test_static_member_rejoin_keeps_assignment_and_fences_old_id() -> None:
    gc = make()
    r = join(gc, instance="i-1")
    assert isinstance(r, Parked)
    res = answers(gc)[r.token]
    assert isinstance(res, JoinResult) and res.member_id == "i-1-1"
    assert isinstance(sync(gc, "i-1-1", 1, [("i-1-1", b"A")]), Parked)
    answers(gc)
    again = join(gc, instance="i-1", now=50)  # restarted with the same group.instance.id
    assert isinstance(again, JoinResult)
    assert (again.error, again.member_id, again.generation_id) == (ErrorCode.none, "i-1-2", 1)
    assert gc.groups["g"].state == GroupState.STABLE
    assert gc.heartbeat(group_id="g", generation_id=1, member_id="i-1-1", group_instance_id="i-1", now_ms=60) == ErrorCode.fenced_instance_id
    s = sync(gc, "i-1-2", 1)
    assert isinstance(s, SyncResult) and s.assignment == b"A"


def test_static_member_restart_with_other_metadata_keeps_assignment() -> None:
    """A restarted consumer's subscription bytes differ from its last join (it no longer owns
    partitions, KIP-429's owned partitions and generation): Kafka keeps the Stable group's
    assignment all the same, rebalancing only when the selected protocol would change (found with
    the Java client, whose other member was rebalanced)."""
    gc = make()
    r = join(gc, instance="i-1", protocols=(("range", b"owned:t-0"),))
    assert isinstance(r, Parked)
    answers(gc)
    assert isinstance(sync(gc, "i-1-1", 1, [("i-1-1", b"A")]), Parked)
    answers(gc)
    again = join(gc, instance="i-1", protocols=(("range", b"owned:none"),), now=50)
    assert isinstance(again, JoinResult) and (again.error, again.generation_id) == (ErrorCode.none, 1)
    g = gc.groups["g"]
    assert g.state == GroupState.STABLE and g.members["i-1-2"].protocols == [("range", b"owned:none")]
    s = sync(gc, "i-1-2", 1)
    assert isinstance(s, SyncResult) and s.assignment == b"A"
    # A restart that changes the group's selected protocol rebalances.
    changed = join(gc, instance="i-1", protocols=(("cooperative-sticky", b""), ("range", b"")), now=60)
    assert isinstance(changed, Parked) and g.state != GroupState.STABLE


def test_inconsistent_protocols_and_bad_session_timeout() -> None:
    gc = make()
    stable_group(gc, 1)
    bad = join(gc, protocols=(("other", b""),), v4=False)
    assert isinstance(bad, JoinResult) and bad.error == ErrorCode.inconsistent_group_protocol
    r = gc.join_group(group_id="g", member_id="", group_instance_id=None, client_id="c", client_host="h",
                      session_timeout_ms=10, rebalance_timeout_ms=10, protocol_type="consumer",
                      protocols=[("range", b"")], require_known_member_id=True, now_ms=0)
    assert isinstance(r, JoinResult) and r.error == ErrorCode.invalid_session_timeout


def test_offset_commit_checks() -> None:
    gc = make()
    kw = dict(group_instance_id=None, now_ms=0)
    assert gc.validate_offset_commit(group_id="nope", generation_id=3, member_id="m", **kw) == ErrorCode.illegal_generation
    assert gc.validate_offset_commit(group_id="simple", generation_id=-1, member_id="", **kw) == ErrorCode.none
    ids, gen = stable_group(gc, 2)
    assert gc.validate_offset_commit(group_id="g", generation_id=gen, member_id="stale", **kw) == ErrorCode.unknown_member_id
    assert gc.validate_offset_commit(group_id="g", generation_id=gen + 1, member_id=ids[0], **kw) == ErrorCode.illegal_generation
    assert gc.validate_offset_commit(group_id="g", generation_id=gen, member_id=ids[0], **kw) == ErrorCode.none
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(42)})
    assert gc.fetch_offsets("g", [("t", 0), ("t", 1)]) == {("t", 0): OffsetAndMetadata(42), ("t", 1): None}
    join(gc, ids[1])  # rebalance in progress; the group is PreparingRebalance: commits still allowed
    assert gc.validate_offset_commit(group_id="g", generation_id=gen, member_id=ids[0], **kw) == ErrorCode.none


def test_delete_group_only_when_empty_and_tombstones() -> None:
    gc = make()
    ids, gen = stable_group(gc, 1)
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(1)})
    assert gc.delete_group("g", 0) == ErrorCode.non_empty_group
    gc.leave_group(group_id="g", members=[(ids[0], None)], now_ms=0)
    gc.drain()
    assert gc.groups["g"].state == GroupState.EMPTY
    assert gc.delete_group("g", 0) == ErrorCode.none
    _, recs = gc.drain()
    assert recs == [OffsetRecord("g", "t", 0, None), GroupRecord("g", None)]
    assert gc.delete_group("g", 0) == ErrorCode.group_id_not_found


def test_records_round_trip_and_replay_rebuilds_state() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    gc.apply_offsets("g", {("t", 3): OffsetAndMetadata(7, 2, "meta", 123)})
    _, recs = gc.drain()
    snap = gc.groups["g"].snapshot()
    log = [
        (rec.group_key("g"), rec.group_value(snap)),
        (rec.offset_key("g", "t", 3), rec.offset_value(OffsetAndMetadata(7, 2, "meta", 123))),
        (rec.offset_key("g", "t", 4), rec.offset_value(OffsetAndMetadata(9))),
        (rec.offset_key("g", "t", 4), None),
    ]
    fresh = make()
    for k, v in log:
        parsed = rec.parse_key(k)
        if len(parsed) == 3:  # type: ignore[arg-type]
            fresh.load_offset(*parsed, rec.parse_offset_value(v) if v else None, now_ms=0)  # type: ignore[misc]
        else:
            fresh.load_group(parsed[0], rec.parse_group_value(v) if v else None, now_ms=0)  # type: ignore[index]
    g = fresh.groups["g"]
    assert (g.state, g.generation_id, g.leader_id, list(g.members)) == (GroupState.STABLE, gen, ids[0], list(gc.groups["g"].members))
    assert g.offsets == {("t", 3): OffsetAndMetadata(7, 2, "meta", 123)}
    assert rec.parse_group_value(rec.group_value(snap)) == snap


def test_partition_for_matches_java_hash() -> None:
    # Known java.lang.String.hashCode values.
    assert rec.java_string_hash("g1") == 103 * 31 + 49
    assert rec.java_string_hash("hello") == 99162322
    assert rec.partition_for("hello", 50) == 99162322 % 50
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0.
    assert rec.java_string_hash("polygenelubricants") == -(2**31)
    assert rec.partition_for("polygenelubricants", 50) == 0


def test_java_hash_of_non_ascii_uses_utf16() -> None:
    # "é" is one UTF-16 unit 0x00E9; "𝄞" is the surrogate pair D834 DD1E.
    assert rec.java_string_hash("é") == 0xE9
    assert rec.java_string_hash("𝄞") == (0xD834 * 31 + 0xDD1E)


def test_subscription_topics_parse() -> None:
    sub = b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    assert rec.consumer_subscription_topics("consumer", sub) == {"a", "bc"}
    assert rec.consumer_subscription_topics("connect", sub) is None
    assert rec.consumer_subscription_topics("consumer", b"\x00") is None


def test_offset_delete_refuses_subscribed_topics_while_members_remain() -> None:
    gc = make()
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    r = join(gc, protocols=(("range", sub),), v4=False)
    assert isinstance(r, Parked)
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(3), ("u", 0): OffsetAndMetadata(4)})
    gc.drain()
    top, errs = gc.delete_offsets("g", [("t", 0), ("u", 0)], rec.consumer_subscription_topics)
    assert top == ErrorCode.none
    assert errs == {("t", 0): ErrorCode.group_subscribed_to_topic, ("u", 0): ErrorCode.none}
    _, recs = gc.drain()
    assert recs == [OffsetRecord("g", "u", 0, None)]
    assert gc.fetch_offsets("g", None) == {("t", 0): OffsetAndMetadata(3)}
    assert gc.delete_offsets("nope", [("t", 0)], rec.consumer_subscription_topics)[0] == ErrorCode.group_id_not_found


def test_list_and_describe_groups() -> None:
    gc = make()
    ids, gen = stable_group(gc, 2)
    gc.validate_offset_commit(group_id="simple", generation_id=-1, member_id="", group_instance_id=None, now_ms=0)
    assert sorted(gc.list_groups()) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert gc.list_groups(["empty"]) == [("simple", "", "Empty")]
    d = gc.describe_group("g")
    assert (d.state, d.protocol_name, sorted(m.member_id for m in d.members)) == ("Stable", "range", sorted(ids))
    assert {m.assignment for m in d.members} == {f"a-{m}".encode() for m in ids}
    assert gc.describe_group("missing").state == "Dead"


def test_offsets_of_empty_groups_expire_after_retention() -> None:
    gc = make()
    ids, gen = stable_group(gc, 1)
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(5, commit_timestamp_ms=0)})
    gc.validate_offset_commit(group_id="simple", generation_id=-1, member_id="", group_instance_id=None, now_ms=0)
    gc.apply_offsets("simple", {("t", 0): OffsetAndMetadata(1, commit_timestamp_ms=100), ("t", 1): OffsetAndMetadata(2, commit_timestamp_ms=500)})
    gc.drain()
    assert gc.expire_offsets(10_000, 1000) == 2  # a group with members keeps its offsets; simple ones expire by commit time
    assert gc.fetch_offsets("g", None) == {("t", 0): OffsetAndMetadata(5, commit_timestamp_ms=0)}
    _, recs = gc.drain()
    assert recs == [OffsetRecord("simple", "t", 0, None), OffsetRecord("simple", "t", 1, None), GroupRecord("simple", None)]
    assert "simple" not in gc.groups
    gc.leave_group(group_id="g", members=[(ids[0], None)], now_ms=20_000)  # empty since 20 000
    gc.drain()
    assert gc.expire_offsets(20_999, 1000) == 0
    assert gc.expire_offsets(21_000, 1000) == 1
    assert "g" not in gc.groups


def test_offset_expiry_keeps_a_group_whose_member_is_about_to_rejoin() -> None:
    """KIP-394: between MEMBER_ID_REQUIRED and the rejoin the group is Empty with no offsets;
    the expiry pass must not delete it (the rejoin would get UNKNOWN_MEMBER_ID)."""
    gc = make()
    first = join(gc)
    assert isinstance(first, JoinResult) and first.error == ErrorCode.member_id_required
    gc.expire_offsets(1, 1000)
    second = join(gc, first.member_id, now=2)
    assert not (isinstance(second, JoinResult) and second.error == ErrorCode.unknown_member_id)


def test_txn_offset_commit_checks() -> None:
    """KIP-447: the generation and member are checked only when the request carries them."""
    gc = make()
    kw = dict(group_instance_id=None, now_ms=0)
    # An unknown group is created (a producer commits for a group that has no members yet).
    assert gc.validate_txn_offset_commit(group_id="fresh", generation_id=-1, member_id="", **kw) == ErrorCode.none
    assert "fresh" in gc.groups
    ids, gen = stable_group(gc, 2)
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=-1, member_id="", **kw) == ErrorCode.none
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=gen, member_id=ids[0], **kw) == ErrorCode.none
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=gen, member_id="stale",
                                         **kw) == ErrorCode.unknown_member_id
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=gen + 1, member_id=ids[0],
                                         **kw) == ErrorCode.illegal_generation
    assert gc.validate_txn_offset_commit(group_id="", generation_id=-1, member_id="", **kw) == ErrorCode.invalid_group_id
    # A generation without a member: Kafka checks the member first.
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=gen, member_id="", **kw) == ErrorCode.unknown_member_id
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=gen, member_id=ids[0], group_instance_id="nope",
                                         now_ms=0) == ErrorCode.unknown_member_id


def test_txn_offset_commit_checks_static_member_fencing() -> None:
    gc = make()
    mid = join(gc, instance="i1")
    assert isinstance(mid, Parked)
    gc.poll(0)
    (res,) = answers(gc).values()
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=res.generation_id, member_id="other",
                                         group_instance_id="i1", now_ms=0) == ErrorCode.fenced_instance_id
    assert gc.validate_txn_offset_commit(group_id="g", generation_id=res.generation_id, member_id=res.member_id,
                                         group_instance_id="i1", now_ms=0) == ErrorCode.none


def test_pending_txn_offsets_are_invisible_until_their_commit_and_dropped_on_abort() -> None:
    gc = make()
    gc.validate_offset_commit(group_id="g", generation_id=-1, member_id="", group_instance_id=None, now_ms=0)
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(5)})
    gc.add_pending_txn_offsets("g", 7, {("t", 0): OffsetAndMetadata(9)}, 0)
    gc.add_pending_txn_offsets("g", 8, {("t", 1): OffsetAndMetadata(3)}, 0)
    gc.add_pending_txn_offsets("other", 7, {("t", 0): OffsetAndMetadata(1)}, 0)
    assert gc.fetch_offsets("g", [("t", 0), ("t", 1)]) == {("t", 0): OffsetAndMetadata(5), ("t", 1): None}
    assert gc.has_pending_txn_offset("g", ("t", 0)) and gc.has_pending_txn_offset("g", ("t", 1))
    assert not gc.has_pending_txn_offset("g", ("t", 2))
    # Producer 7's marker on the partition of "g" only: "other" (another partition) stays pending.
    assert gc.complete_txn(7, True, lambda g: g == "g") == 1
    assert gc.fetch_offsets("g", [("t", 0)]) == {("t", 0): OffsetAndMetadata(9)}
    assert not gc.has_pending_txn_offset("g", ("t", 0))
    assert gc.has_pending_txn_offset("other", ("t", 0))
    assert gc.complete_txn(8, False, lambda g: True) == 0  # aborted: dropped, never shown
    assert gc.fetch_offsets("g", [("t", 1)]) == {("t", 1): None}
    assert not gc.has_pending_txn_offset("g", ("t", 1))
    # A group reloaded from its metadata record keeps what is pending.
    gc.load_group("other", gc.groups["g"].snapshot(), 0)
    assert gc.has_pending_txn_offset("other", ("t", 0))


def test_a_group_with_pending_txn_offsets_does_not_expire() -> None:
    gc = make()
    gc.add_pending_txn_offsets("g", 7, {("t", 0): OffsetAndMetadata(9)}, 0)
    gc.expire_offsets(10**9, 1)
    assert "g" in gc.groups
    gc.complete_txn(7, True, lambda g: True)
    assert gc.fetch_offsets("g", [("t", 0)]) == {("t", 0): OffsetAndMetadata(9)}


def test_a_plain_commit_written_after_a_transactions_offset_wins_its_commit() -> None:
    """Kafka's completePendingTxnOffsetCommit: the committed offset is the one written last in
    `__consumer_offsets`, so a plain OffsetCommit appended after the transactional record (but
    before the marker) is not replaced when the transaction commits."""
    gc = make()
    gc.add_pending_txn_offsets("g", 7, {("t", 0): OffsetAndMetadata(9), ("t", 1): OffsetAndMetadata(4)}, 0,
                               {("t", 0): 10, ("t", 1): 11})
    gc.apply_offsets("g", {("t", 0): OffsetAndMetadata(20)}, {("t", 0): 12})
    gc.apply_offsets("g", {("t", 1): OffsetAndMetadata(2)}, {("t", 1): 5})
    assert gc.complete_txn(7, True, lambda g: True) == 1
    assert gc.fetch_offsets("g", [("t", 0), ("t", 1)]) == {("t", 0): OffsetAndMetadata(20),
                                                          ("t", 1): OffsetAndMetadata(4)}


def test_failed_txn_offsets_are_forgotten_unless_replaced() -> None:
    gc = make()
    gc.add_pending_txn_offsets("g", 7, {("t", 0): OffsetAndMetadata(9)}, 0, {("t", 0): 10})
    gc.add_pending_txn_offsets("g", 7, {("t", 1): OffsetAndMetadata(3)}, 0, {("t", 1): 11})
    gc.add_pending_txn_offsets("g", 7, {("t", 1): OffsetAndMetadata(4)}, 0, {("t", 1): 12})
    gc.fail_pending_txn_offsets("g", 7, {("t", 0): 10, ("t", 1): 11})
    assert not gc.has_pending_txn_offset("g", ("t", 0))
    assert gc.has_pending_txn_offset("g", ("t", 1))  # replaced by the later write, which stands
    gc.fail_pending_txn_offsets("g", 7, {("t", 1): 12})
    assert gc.groups["g"].pending_txn_offsets == {}


def test_kafka_4_flexible_offset_and_group_values_are_read() -> None:
    # OffsetCommitValue v4 as Kafka 4.4.0 wrote it (a real broker's __consumer_offsets, the
    # migration test's): offset 11, no leader epoch, empty metadata (compact string), the commit
    # time, and one tagged field (tag 0, 16 bytes: the topic id), which kavka skips.
    v4 = bytes.fromhex("0004" "000000000000000b" "ffffffff" "01" "000001a21c3e9b78"
                       "01" "00" "10" "9343751fa06d4e97adb24e5584748dc6")
    assert rec.parse_offset_value(v4) == OffsetAndMetadata(11, -1, "", 1795770194808)
    # GroupMetadataValue v4, the first flexible version: compact strings, array and bytes, tagged
    # fields after each member and at the end (one unknown tag here, skipped).
    group = bytes.fromhex(
        "0004" "09" + b"consumer".hex() + "00000005" "06" + b"range".hex() + "03" + b"m1".hex()
        + "00000000000004d2" "02"
        + "03" + b"m1".hex() + "00" "02" + b"c".hex() + "03" + b"/h".hex() + "000493e0" "0000afc8"
        + "02" + b"s".hex() + "02" + b"a".hex() + "00"
        + "01" "05" "02" "abcd")
    assert rec.parse_group_value(group) == GroupSnapshot(
        "consumer", 5, "range", "m1", 1234,
        (MemberSnapshot("m1", None, "c", "/h", 300000, 45000, b"s", b"a"),))
