"""The fault harness's nemesis: a seeded schedule of bounded faults, and the loop that plays it.

`plan(seed, ...)` is pure: a `random.Random(seed)` draws the faults, their targets and their
durations, so a seed names a schedule and a failing run is replayed by its seed. Every fault is
healed after its duration, a quiet gap follows each, and the schedule ends healed. The first
faults of a schedule are one of each kind (in a seeded order), so even a short schedule has them
all. Kinds:

- `majority-minority`: the nodes split in two (a minority of 1 or 2 of 5), cut both ways;
- `isolate-leader`: the leader of a partition (as the producer last saw it) cut from every node;
- `one-way`: one side's packets to the other dropped, the other way left open;
- `pause`: SIGSTOP of one node (the leader, half the time), SIGCONT at the heal;
- `kill`: kill -9 of one node (the leader, half the time), restarted at the heal.

Targets named "the leader" are resolved when the fault starts (`leader_of` is asked); the rest
are drawn in `plan`. `play` runs in the test's thread and sleeps only the schedule's own times.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kavka.testing.netns import NetnsCluster

KINDS = ("majority-minority", "isolate-leader", "one-way", "pause", "kill")
LEADER = -1  # a target resolved at run time: the leader of `Fault.partition`


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    kind: str
    start: float  # seconds after the schedule starts
    duration: float
    side_a: tuple[int, ...] = ()
    side_b: tuple[int, ...] = ()
    node: int = 0
    partition: int = 0
    also: Fault | None = None  # a second fault started and healed with this one

    def describe(self) -> str:
        if self.also is not None:
            return f"{replace(self, also=None).describe()} + {self.also.describe()}"
        if self.kind in ("pause", "kill", "isolate-leader"):
            who = f"leader of partition {self.partition}" if self.node == LEADER else f"node {self.node}"
            return f"{self.kind} {who} for {self.duration:.1f}s"
        arrow = "->" if self.kind == "one-way" else "|"
        return f"{self.kind} {list(self.side_a)} {arrow} {list(self.side_b)} for {self.duration:.1f}s"


def _draw(rng: random.Random, kind: str, *, start: float, duration: float, nodes: Sequence[int],
          partitions: int) -> Fault:
    partition = rng.randrange(partitions)
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if kind in ("majority-minority", "one-way"):
        cut = rng.randint(1, (len(shuffled) - 1) // 2)
        minority, majority = tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:]))
        a, b = (minority, majority) if rng.random() < 0.5 else (majority, minority)
        return Fault(kind=kind, start=start, duration=duration, partition=partition, side_a=a, side_b=b)
    if kind == "isolate-leader":
        return Fault(kind=kind, start=start, duration=duration, partition=partition, node=LEADER)
    node = LEADER if rng.random() < 0.5 else shuffled[0]
    return Fault(kind=kind, start=start, duration=duration, partition=partition, node=node)


def plan(seed: int, *, nodes: Sequence[int], partitions: int, length: float,
         fault_seconds: tuple[float, float] = (3.0, 8.0), quiet_seconds: tuple[float, float] = (2.0, 5.0),
         double: float = 0.0) -> list[Fault]:
    """Faults one after another for about `length` seconds (the last may end after it).

    With `double` > 0, after the first one of each kind, that share of the steps are two faults at
    once (two kinds drawn, started together, healed together): a kill during a partition, a pause
    of one node while another is cut off, two nodes killed.
    """
    rng = random.Random(seed)
    first = list(KINDS)
    rng.shuffle(first)
    out: list[Fault] = []
    t = rng.uniform(*quiet_seconds)
    while t < length or first:
        forced = bool(first)  # the first one of each kind is a single fault
        kind = first.pop(0) if first else rng.choice(KINDS)
        duration = round(rng.uniform(*fault_seconds), 1)
        at = round(t, 1)
        fault = _draw(rng, kind, start=at, duration=duration, nodes=nodes, partitions=partitions)
        if double and not forced and rng.random() < double:
            also = _draw(rng, rng.choice(KINDS), start=at, duration=duration, nodes=nodes, partitions=partitions)
            fault = replace(fault, also=also)
        out.append(fault)
        t += duration + rng.uniform(*quiet_seconds)
    return out


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    what: str


def play(schedule: Sequence[Fault], cluster: NetnsCluster, leader_of: Callable[[int], int | None],
         *, log: Callable[[str], None] = lambda line: None) -> list[Event]:
    """Apply each fault at its time, heal it after its duration; heal everything at the end."""
    events: list[Event] = []
    rng = random.Random(0)

    def note(what: str) -> None:
        events.append(Event(time.time(), what))
        log(what)

    origin = time.monotonic()
    try:
        for fault in schedule:
            wait = origin + fault.start - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            note(f"start {fault.describe()}")
            for part in (fault, fault.also):
                if part is not None:
                    _apply(part, cluster, leader_of, rng, note)
            time.sleep(fault.duration)
            cluster.heal_all()
            note(f"heal {fault.kind}")
    finally:
        cluster.heal_all()
    return events


def _apply(fault: Fault, cluster: NetnsCluster, leader_of: Callable[[int], int | None], rng: random.Random,
           note: Callable[[str], None]) -> None:
    node = fault.node
    if node == LEADER:
        node = leader_of(fault.partition) or rng.choice(sorted(cluster.nodes))
        note(f"  (the leader of partition {fault.partition}: node {node})")
    if fault.kind in ("majority-minority", "one-way"):
        cluster.switch.partition(fault.side_a, fault.side_b, one_way=fault.kind == "one-way")
    elif fault.kind == "isolate-leader":
        cluster.switch.partition([node], [i for i in sorted(cluster.nodes) if i != node])
    elif fault.kind == "pause":
        cluster.nodes[node].pause()
    elif fault.kind == "kill":
        cluster.nodes[node].kill()
