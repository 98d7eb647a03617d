"""The fault harness's checker: a pure function from a run's history to its anomalies, in Jepsen's words.

Values in, a `CheckResult` out; no I/O. The history is what the workload and the harness recorded:

- `acks`: every write the producer had acknowledged (partition, offset, value, time);
- `final_read`: every record below each partition's high watermark, read after the final heal;
- `reads`: what the concurrent consumer read during the run;
- `high_watermarks` and `replicas`: each replica's batches (`kavka dump-log`: base and last offset,
  leader epoch, CRC) per partition, taken after the final heal;
- `attempts`: the window during which the producer kept writing (start, stop).

Anomalies (each must be zero in a correct run):

- **lost**: an acknowledged value absent from the final read;
- **duplicated**: a value at two or more offsets of the final read;
- **wrong offset**: an acknowledged value read at another (partition, offset) than acknowledged
  (or, acknowledged without an offset, in another partition);
- **divergent**: two replicas of a partition whose batches below the high watermark differ, or a
  replica missing some of them;
- **inconsistent read**: the concurrent consumer read a value at an offset the final read holds
  another value at (it read something later truncated: data above a true high watermark).

Not an anomaly, measured: the longest **unavailability** of each partition, the longest gap
between two successive acknowledgements (the run's start and stop count as bounds) while the
producer kept writing to it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged write. `offset` None: acknowledged without one -- librdkafka's idempotent
    producer "implicitly acks" a batch whose request timed out once a later batch of the same
    partition succeeds (the sequence proves it was written), and reports no offset for it."""

    partition: int
    offset: int | None
    value: str
    time: float


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Batch:
    """One record batch of a replica's log, as `kavka dump-log --json` lists it."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass(frozen=True, slots=True)
class Divergence:
    partition: int
    node: int
    reference_node: int
    offset: int
    detail: str


@dataclass(frozen=True, slots=True)
class Gap:
    partition: int
    seconds: float
    start: float
    end: float


@dataclass(slots=True)
class CheckResult:
    acked: int
    read: int
    lost: list[Ack] = field(default_factory=list)
    duplicated: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    wrong_offset: list[tuple[Ack, tuple[int, int]]] = field(default_factory=list)
    divergent: list[Divergence] = field(default_factory=list)
    inconsistent_reads: list[tuple[Read, str]] = field(default_factory=list)
    unavailability: dict[int, Gap] = field(default_factory=dict)
    acked_without_offset: int = 0  # checked for presence and partition only (see Ack)
    started: float | None = None  # when the producer started writing (times in the summary count from it)

    @property
    def anomalies(self) -> int:
        return (len(self.lost) + len(self.duplicated) + len(self.wrong_offset) + len(self.divergent)
                + len(self.inconsistent_reads))

    @property
    def ok(self) -> bool:
        return self.anomalies == 0

    def counts(self) -> dict[str, int]:
        return {"acked": self.acked, "read": self.read, "lost": len(self.lost), "duplicated": len(self.duplicated),
                "wrong_offset": len(self.wrong_offset), "divergent": len(self.divergent),
                "inconsistent_reads": len(self.inconsistent_reads)}

    def summary(self, examples: int = 5) -> str:
        c = self.counts()
        lines = [f"{'VALID' if self.ok else 'INVALID'}: {c['acked']} writes acknowledged, {c['read']} records read "
                 f"back, {self.anomalies} anomalies",
                 f"  lost {c['lost']}, duplicated {c['duplicated']}, wrong offset {c['wrong_offset']}, "
                 f"divergent replicas {c['divergent']}, inconsistent reads {c['inconsistent_reads']}"]
        if self.acked_without_offset:
            lines.append(f"  ({self.acked_without_offset} acknowledged without an offset: checked for presence and "
                         "partition only)")
        for a in self.lost[:examples]:
            lines.append(f"  lost: {a.value} acked at {a.partition}@{a.offset}")
        for value, where in list(self.duplicated.items())[:examples]:
            lines.append(f"  duplicated: {value} at " + ", ".join(f"{p}@{o}" for p, o in where))
        for a, (p, o) in self.wrong_offset[:examples]:
            lines.append(f"  wrong offset: {a.value} acked at {a.partition}@{a.offset}, read at {p}@{o}")
        for d in self.divergent[:examples]:
            lines.append(f"  divergent: partition {d.partition} node {d.node} vs node {d.reference_node} "
                         f"at offset {d.offset}: {d.detail}")
        for r, final in self.inconsistent_reads[:examples]:
            lines.append(f"  inconsistent read: {r.value} read at {r.partition}@{r.offset}, final read has {final}")
        origin = self.started if self.started is not None else min((g.start for g in self.unavailability.values()),
                                                                    default=0.0)
        for p, g in sorted(self.unavailability.items()):
            lines.append(f"  partition {p}: longest unavailability {g.seconds:.1f}s "
                         f"(+{g.start - origin:.1f}s to +{g.end - origin:.1f}s)")
        return "\n".join(lines)


def check(
    *,
    acks: Sequence[Ack],
    final_read: Sequence[Read],
    reads: Sequence[Read] = (),
    high_watermarks: Mapping[int, int] | None = None,
    replicas: Mapping[int, Mapping[int, Sequence[Batch]]] | None = None,
    attempts: tuple[float, float] | None = None,
    partitions: Iterable[int] = (),
    replication_factor: int | None = None,
) -> CheckResult:
    """The anomalies of one run's history (see the module docstring)."""
    result = CheckResult(acked=len(acks), read=len(final_read), started=attempts[0] if attempts else None)
    at: dict[tuple[int, int], str] = {}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in final_read:
        at[(r.partition, r.offset)] = r.value
        where[r.value].append((r.partition, r.offset))
    result.duplicated = {v: sorted(w) for v, w in where.items() if len(w) > 1}
    for a in acks:
        result.acked_without_offset += a.offset is None
        found = where.get(a.value)
        if not found:
            result.lost.append(a)
        elif a.offset is None:
            if all(p != a.partition for p, _ in found):
                result.wrong_offset.append((a, found[0]))
        elif (a.partition, a.offset) not in found:
            result.wrong_offset.append((a, found[0]))
    for r in reads:
        final = at.get((r.partition, r.offset))
        if final != r.value:
            result.inconsistent_reads.append((r, final if final is not None else "nothing"))
    for p, by_node in sorted((replicas or {}).items()):
        hw = (high_watermarks or {}).get(p)
        if replication_factor is not None and len(by_node) < replication_factor:
            result.divergent.append(Divergence(p, 0, 0, 0, f"{len(by_node)} replicas on disk, not {replication_factor}"))
        if hw is not None:
            result.divergent.extend(_diverging(p, hw, by_node))
    result.unavailability = _unavailability(acks, attempts, partitions)
    return result


def _diverging(partition: int, hw: int, by_node: Mapping[int, Sequence[Batch]]) -> list[Divergence]:
    """Replicas whose batches starting below `hw` differ from the first replica's (by node id)."""
    below = {n: [b for b in batches if b.base_offset < hw] for n, batches in by_node.items()}
    out: list[Divergence] = []
    nodes = sorted(below)
    covered = {n: below[n][-1].last_offset + 1 if below[n] else 0 for n in nodes}
    ref = next((n for n in nodes if covered[n] >= hw), 0)  # compared with the first replica that reaches the HW
    for n in nodes:
        if covered[n] < hw:
            covered_n = covered[n]
            out.append(Divergence(partition, n, n, covered_n,
                                  f"its log ends at {covered_n}, below the high watermark {hw}"))
            continue
        if n == ref:
            continue
        for mine, theirs in zip(below[n], below[ref], strict=False):
            if mine != theirs:
                out.append(Divergence(partition, n, ref, min(mine.base_offset, theirs.base_offset),
                                      f"batch {mine} against {theirs}"))
                break
        else:
            if len(below[n]) != len(below[ref]):
                shorter, longer = sorted((below[n], below[ref]), key=len)
                offset = longer[len(shorter)].base_offset
                out.append(Divergence(partition, n, ref, offset,
                                      f"{len(below[n])} batches below the high watermark against {len(below[ref])}"))
    return out


def _unavailability(acks: Sequence[Ack], attempts: tuple[float, float] | None,
                    partitions: Iterable[int]) -> dict[int, Gap]:
    times: dict[int, list[float]] = defaultdict(list)
    for p in partitions:
        times[p]  # noqa: B018 -- a partition never acknowledged is unavailable the whole run
    for a in acks:
        times[a.partition].append(a.time)
    out: dict[int, Gap] = {}
    for p, ts in times.items():
        ts.sort()
        if attempts is not None:
            start, stop = attempts
            ts = [start, *(t for t in ts if start <= t <= stop), stop]
        best = Gap(p, 0.0, 0.0, 0.0)
        for a, b in zip(ts, ts[1:], strict=False):
            if b - a > best.seconds:
                best = Gap(p, b - a, a, b)
        out[p] = best
    return out
