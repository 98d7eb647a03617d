"""A minimal-move rebalance plan for growing or shrinking the cluster (issue 13, item 4).

Input: the current assignment (partition -> replicas, preferred leader first), the brokers the
cluster should use afterwards, optionally each broker's rack and each partition's size in bytes.
Output: a new assignment where

- no replica is on a broker outside the target set (a removed broker is emptied);
- every broker's replica count is within one of the mean (floor or ceil of replicas / brokers);
- every broker's preferred-leader count is within one of the mean, when the replica layout allows
  it -- leadership is balanced by reordering replica lists, which moves no data;
- a partition never loses rack diversity: a replica moves only to a broker whose rack no other
  replica of the partition uses (or to the rack it leaves), so the placer's rack constraints are
  kept;

with few moves: only the replicas of removed brokers and of brokers above the ceiling move, each
to the least loaded eligible broker, the smallest partitions first (fewest bytes). Adding one broker
to n moves about 1/(n+1) of the replicas, where re-placing every partition (what
kafka-reassign-partitions `--generate` does) moves most of them.

Leader balance is a flow problem: leadership can pass from broker a to broker b when a leads a
partition that b holds; an over-loaded broker's surplus travels along such a path (breadth-first)
to an under-loaded one. Pure: no I/O, deterministic for its input.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kavka.common import TopicPartition

Partition = TopicPartition  # plain (topic, partition) tuples are equal to it and hash the same


class RebalanceError(ValueError):
    """The plan cannot be made (no brokers left, a replication factor above the broker count)."""


@dataclass(frozen=True, slots=True)
class Plan:
    assignment: dict[Partition, list[int]]  # every partition, new replicas (preferred leader first)
    moved_replicas: int  # replicas that land on a broker that did not hold them
    moved_bytes: int

    def changed(self, current: Mapping[Partition, Sequence[int]]) -> dict[Partition, list[int]]:
        """The partitions whose replica list (or its order) changes."""
        return {p: r for p, r in self.assignment.items() if list(current[p]) != r}


def _bounds(total: int, n: int) -> tuple[int, int]:
    return total // n, -(-total // n)


def plan_rebalance(
    current: Mapping[Partition, Sequence[int]],
    brokers: Sequence[int],
    *,
    racks: Mapping[int, str | None] | None = None,
    sizes: Mapping[Partition, int] | None = None,
) -> Plan:
    brokers = sorted(set(brokers))
    if not brokers:
        raise RebalanceError("no brokers left to place replicas on")
    racks = racks or {}
    sizes = sizes or {}
    assignment = {p: list(r) for p, r in current.items()}
    for p, reps in assignment.items():
        if len(reps) > len(brokers):
            raise RebalanceError(f"partition {p} has {len(reps)} replicas but only {len(brokers)} brokers remain")
    count = Counter({b: 0 for b in brokers})
    for reps in assignment.values():
        count.update(r for r in reps if r in count)
    target = set(brokers)

    def rack_ok(p: Partition, src: int, dst: int) -> bool:
        rack = racks.get(dst)
        if rack is None or rack == racks.get(src):
            return True
        return all(racks.get(r) != rack for r in assignment[p] if r != src)

    def move(p: Partition, src: int, dst: int) -> None:
        reps = assignment[p]
        reps[reps.index(src)] = dst
        if src in count:
            count[src] -= 1
        count[dst] += 1

    by_size = sorted(assignment, key=lambda p: (sizes.get(p, 0), str(p)))
    # 1. Empty the brokers that leave.
    for p in by_size:
        for src in [r for r in assignment[p] if r not in target]:
            options = [b for b in brokers if b not in assignment[p] and rack_ok(p, src, b)]
            if not options:
                options = [b for b in brokers if b not in assignment[p]]  # diversity cannot be kept
            move(p, src, min(options, key=lambda b: (count[b], b)))
    # 2. Even out replica counts (max - min <= 1 is every count within one of the mean): move from
    #    the fullest broker to the emptiest that can take one; each move lowers the spread.
    while max(count.values()) - min(count.values()) > 1:
        done = False
        for src in sorted(brokers, key=lambda b: (-count[b], b)):
            for dst in sorted(brokers, key=lambda b: (count[b], b)):
                if count[src] - count[dst] < 2:
                    break
                p = next((p for p in by_size if src in assignment[p] and dst not in assignment[p]
                          and rack_ok(p, src, dst)), None)
                if p is not None:
                    move(p, src, dst)
                    done = True
                    break
            if done:
                break
        if not done:
            break  # racks allow no further move
    _balance_leaders(assignment, brokers)
    # Counted from the result, not per step: a replica that step 1 places and step 2 moves on (or
    # back to a broker that held it) is copied once, or not at all.
    moved = {p: len(set(reps) - set(current[p])) for p, reps in assignment.items()}
    return Plan(assignment, sum(moved.values()), sum(n * sizes.get(p, 0) for p, n in moved.items()))


def _balance_leaders(assignment: dict[Partition, list[int]], brokers: Sequence[int]) -> None:
    """Reorder replica lists so preferred-leader counts are within one of the mean."""
    leaders = Counter({b: 0 for b in brokers})
    leaders.update(reps[0] for reps in assignment.values() if reps)
    lo, hi = _bounds(sum(leaders.values()), len(brokers))
    for _ in range(len(assignment) * len(brokers) + 1):
        over = [b for b in brokers if leaders[b] > hi] or (
            [b for b in brokers if leaders[b] == hi] if any(leaders[b] < lo for b in brokers) else []
        )
        if not over:
            return
        want = {b for b in brokers if leaders[b] < lo} or (
            {b for b in brokers if leaders[b] == lo} if any(leaders[b] > hi for b in brokers) else set()
        )
        path = _leader_path(assignment, set(over), want)
        if path is None:
            return  # the layout allows no better balance
        for p, new in path:
            reps = assignment[p]
            old = reps[0]
            reps.remove(new)
            reps.insert(0, new)
            leaders[old] -= 1
            leaders[new] += 1


def _leader_path(
    assignment: Mapping[Partition, list[int]], sources: set[int], sinks: set[int]
) -> list[tuple[Partition, int]] | None:
    """A shortest chain of (partition, new leader) handing one leadership from a source to a sink."""
    led: dict[int, list[Partition]] = {}
    for p, reps in assignment.items():
        if reps:
            led.setdefault(reps[0], []).append(p)
    prev: dict[int, tuple[int, Partition] | None] = {s: None for s in sorted(sources)}
    queue = deque(sorted(sources))
    while queue:
        a = queue.popleft()
        for p in led.get(a, []):
            for b in assignment[p][1:]:
                if b in prev:
                    continue
                prev[b] = (a, p)
                if b in sinks:
                    chain = []
                    node = b
                    while prev[node] is not None:
                        src, part = prev[node]  # type: ignore[misc]
                        chain.append((part, node))
                        node = src
                    return list(reversed(chain))
                queue.append(b)
    return None
