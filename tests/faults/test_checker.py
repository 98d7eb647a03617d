"""The fault checker can fail: histories with each anomaly planted are reported, a clean one is valid.

Also the nemesis's schedule: a seed names one schedule, every kind occurs, every fault is bounded.
"""

from __future__ import annotations

from kavka.testing.fault_checker import Ack, Batch, Read, check
from kavka.testing.nemesis import KINDS, LEADER, plan


def _clean() -> tuple[list[Ack], list[Read]]:
    acks = [Ack(p, o, f"v{p}-{o}", 100.0 + o) for p in range(2) for o in range(5)]
    return acks, [Read(a.partition, a.offset, a.value) for a in acks]


def _replicas() -> dict[int, dict[int, list[Batch]]]:
    batches = [Batch(0, 1, 0, 11), Batch(2, 4, 1, 22)]
    return {0: {1: list(batches), 2: list(batches), 3: list(batches)}}


def test_a_clean_history_is_valid() -> None:
    acks, final = _clean()
    result = check(acks=acks, final_read=final, reads=final[:3], high_watermarks={0: 5}, replicas=_replicas(),
                   attempts=(100.0, 104.0), partitions=range(2))
    assert result.ok, result.summary()
    assert result.counts()["acked"] == 10
    assert "VALID" in result.summary()


def test_every_planted_anomaly_is_reported() -> None:
    acks, final = _clean()
    final = [r for r in final if r.value != "v0-3"]  # lost: acknowledged, never read back
    final.append(Read(1, 5, "v1-2"))  # duplicated: one value at two offsets
    final = [Read(0, 9, r.value) if r.value == "v0-4" else r for r in final]  # wrong offset: acked at 0@4
    reads = [Read(1, 0, "something-else")]  # inconsistent read: the final read has v1-0 there
    replicas = _replicas()
    replicas[0][3] = [Batch(0, 1, 0, 11), Batch(2, 4, 2, 99)]  # divergent: another batch below the HW
    replicas[0][1] = [Batch(0, 1, 0, 11)]  # behind: its log ends below the HW

    result = check(acks=acks, final_read=final, reads=reads, high_watermarks={0: 5}, replicas=replicas)

    assert [a.value for a in result.lost] == ["v0-3"]
    assert result.duplicated == {"v1-2": [(1, 2), (1, 5)]}
    assert [(a.value, at) for a, at in result.wrong_offset] == [("v0-4", (0, 9))]
    assert [(r.value, final) for r, final in result.inconsistent_reads] == [("something-else", "v1-0")]
    assert {(d.node, d.offset) for d in result.divergent} == {(3, 2), (1, 2)}
    assert result.anomalies == 6 and not result.ok
    text = result.summary()
    for word in ("INVALID", "lost: v0-3", "duplicated: v1-2", "wrong offset: v0-4", "divergent: partition 0 node 3",
                 "inconsistent read"):
        assert word in text


def test_a_missing_replica_is_divergent() -> None:
    replicas = _replicas()
    del replicas[0][2]
    result = check(acks=[], final_read=[], high_watermarks={0: 5}, replicas=replicas, replication_factor=3)
    assert [d.detail for d in result.divergent] == ["2 replicas on disk, not 3"]


def test_divergence_above_the_high_watermark_is_not_an_anomaly() -> None:
    replicas = _replicas()
    replicas[0][3] = [*replicas[0][3], Batch(5, 6, 3, 77)]  # the leader's tail, not yet replicated
    result = check(acks=[], final_read=[], high_watermarks={0: 5}, replicas=replicas)
    assert result.divergent == []


def test_unavailability_is_the_longest_gap_between_acks_within_the_attempts() -> None:
    acks = [Ack(0, 0, "a", 10.0), Ack(0, 1, "b", 11.0), Ack(0, 2, "c", 17.5), Ack(1, 0, "d", 12.0)]
    result = check(acks=acks, final_read=[Read(a.partition, a.offset, a.value) for a in acks],
                   attempts=(9.0, 20.0), partitions=range(3))
    gaps = {p: round(g.seconds, 1) for p, g in result.unavailability.items()}
    assert gaps == {0: 6.5, 1: 8.0, 2: 11.0}  # partition 2 never acknowledged: the whole run
    assert "partition 0: longest unavailability 6.5s (+2.0s to +8.5s)" in result.summary()


def test_a_seed_names_one_bounded_schedule_with_every_kind() -> None:
    a = plan(7, nodes=range(1, 6), partitions=3, length=10.0)
    assert a == plan(7, nodes=range(1, 6), partitions=3, length=10.0)
    assert a != plan(8, nodes=range(1, 6), partitions=3, length=10.0)
    assert {f.kind for f in a} == set(KINDS)
    for before, after in zip(a, a[1:], strict=False):
        assert before.start + before.duration < after.start  # healed, then a quiet gap
    for f in a:
        assert 3.0 <= f.duration <= 8.0
        if f.kind in ("majority-minority", "one-way"):
            assert sorted(f.side_a + f.side_b) == [1, 2, 3, 4, 5]
            assert min(len(f.side_a), len(f.side_b)) in (1, 2)
        elif f.kind == "isolate-leader":
            assert f.node == LEADER


def test_double_steps_start_two_faults_together_after_one_of_each_kind() -> None:
    steps = plan(3, nodes=range(1, 6), partitions=3, length=60.0, double=1.0)
    assert all(f.also is None for f in steps[: len(KINDS)])
    assert all(f.also is not None for f in steps[len(KINDS):])
    assert all(f.also.start == f.start and f.also.duration == f.duration for f in steps if f.also)
    assert " + " in steps[-1].describe()
    assert plan(3, nodes=range(1, 6), partitions=3, length=60.0) != steps


def test_an_ack_without_an_offset_is_checked_for_presence_and_partition_only() -> None:
    # librdkafka's implicit ack: a timed-out batch proven written by a later one, no offset known.
    acks = [Ack(0, None, "a", 1.0), Ack(0, 1, "b", 1.1), Ack(0, None, "c", 1.2), Ack(1, None, "d", 1.3)]
    final = [Read(0, 0, "a"), Read(0, 1, "b"), Read(0, 2, "d")]
    result = check(acks=acks, final_read=final)
    assert [a.value for a in result.lost] == ["c"]
    assert [(a.value, at) for a, at in result.wrong_offset] == [("d", (0, 2))]  # acked in partition 1
    assert result.acked_without_offset == 3 and result.anomalies == 2
    assert "3 acknowledged without an offset" in result.summary()
