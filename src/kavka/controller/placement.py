"""Replica placement: which brokers hold the replicas of new partitions (KIP-879's pluggable placer).

The seam is `ReplicaPlacer`, one method, the KIP's
`place(placement_spec, cluster_view, broker_ids) -> list[list[int]]`: for the partitions
`spec.start_partition .. start_partition + num_partitions - 1` it returns, in that order, each
partition's replicas, the preferred leader first. `broker_ids` are the brokers a placer may use
(the unfenced ones, or the NodeIds of a CreateReplicaPlacement request); `cluster_view` gives every
broker's rack and the current assignment of every topic. When a partition of `spec.topic` already
exists in the view (a replication-factor increase), its replicas must be kept as the prefix of the
answer. A placer signals refusal by raising `PlacementError` (with the Kafka error it means); the
controller checks every answer (`check_assignment`) and turns anything else -- an exception, a
duplicate broker, a wrong length, an unknown broker -- into INVALID_REPLICA_ASSIGNMENT, so a broken
plugin never takes the controller down.

Built-ins, chosen by `broker.replica.placer` (`load_placer`):
- `simple` (KIP-879's rack-unaware formula): with the brokers sorted, partition p = k*n + i has its
  first replica on broker i and its j-th further replica on broker (i + j + k) mod n -- exactly
  that while k + j < n, then wrapped as Kafka's shift is so a partition never repeats a broker.
- `striped` (default): Kafka's assignment -- rack-unaware round robin from a start index, or, when
  brokers report `broker.rack`, the rack-alternated list with one rack level (`RoundRobinPlacer`).
- `multi-level` (KIP-879): racks are paths (`/DC1/R1`). The brokers form a tree (root, DCs, racks,
  ..., brokers as leaves); every inner node has a ring of its children, sorted, whose pointer starts
  at a child chosen by the per-topic seed. One replica is placed by walking from the root: at each
  node the next child along the ring that still has a free broker for this partition and holds the
  fewest of its replicas is taken, and the ring pointer moves past it. Pointers persist from replica
  to replica and partition to partition, so every level is visited round robin; new partitions or a
  higher replication factor continue where the topic's last replica left off (the pointers are
  replayed by walking the existing assignment again). The preferred leader is the partition's replica that leads
  fewest partitions so far. With 3 DCs x 2 racks and RF=3 every partition has one replica per DC.

Pure: the per-topic seed comes in as `spec.seed`; nothing here reads the clock or a random source.
Called by the controller (`ReplicationControlManager`) on the active controller's event loop only.
"""

from __future__ import annotations

import importlib
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kio.schema.errors import ErrorCode

from kavka.config import register_validator


class PlacementError(ValueError):
    """A placer's refusal: `code` is the Kafka error the client receives with the message."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.invalid_replication_factor) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """What to place (KIP-879's PlacementSpec plus the topic, so a placer can see its existing partitions)."""

    num_partitions: int
    replication_factor: int
    start_partition: int = 0
    force_simple: bool = False
    seed: int = 0  # per topic (`topic_seed`); random for CreateReplicaPlacement; a test fixes it
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The cluster as the placer sees it: every registered broker's rack and each topic's replicas."""

    racks: Mapping[int, str | None] = field(default_factory=dict)
    assignments: Mapping[str, Sequence[Sequence[int]]] = field(default_factory=dict)

    def existing(self, spec: PlacementSpec) -> dict[int, list[int]]:
        """Current replicas of the partitions in the spec's range (for a replication-factor increase)."""
        parts = self.assignments.get(spec.topic or "", ()) if spec.topic is not None else ()
        end = spec.start_partition + spec.num_partitions
        return {p: list(r) for p, r in enumerate(parts) if spec.start_partition <= p < end}


def topic_seed(topic: str) -> int:
    """A topic's placement seed: stable, so CreatePartitions continues the layout CreateTopics began
    (as Kafka's old addPartitions started from partition 0's leader), yet spread over topics as
    Kafka's random start index is. crc32, not hash(): the same on every controller."""
    return zlib.crc32(topic.encode())


@runtime_checkable
class ReplicaPlacer(Protocol):
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]: ...


def _check_rf(spec: PlacementSpec, n: int) -> None:
    if spec.num_partitions <= 0:
        raise PlacementError("Number of partitions must be larger than 0.", ErrorCode.invalid_partitions)
    if spec.replication_factor <= 0:
        raise PlacementError("Replication factor must be larger than 0.")
    if spec.replication_factor > n:
        raise PlacementError(f"Replication factor: {spec.replication_factor} larger than available brokers: {n}.")


def _extend(existing: list[int], proposal: Sequence[int], ring: Sequence[int], rf: int) -> list[int]:
    """Existing replicas first, then the proposal's new brokers, then any broker of the ring, up to rf."""
    out = list(existing)
    for b in list(proposal) + list(ring):
        if len(out) >= rf:
            break
        if b not in out:
            out.append(b)
    return out


# --------------------------------------------------------------------------- simple


class SimplePlacer:
    """KIP-879's rack-unaware placer: the seed's formula, no randomness (see the module doc)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        ids = sorted(set(broker_ids))
        n = len(ids)
        _check_rf(spec, n)
        existing = cluster.existing(spec)
        out = []
        for p in range(spec.start_partition, spec.start_partition + spec.num_partitions):
            k, i = divmod(p, n)
            proposal = [ids[i]]
            for j in range(1, spec.replication_factor):
                # (i + j + k) mod n while k + j < n; beyond that the shift wraps within 1..n-1
                proposal.append(ids[(i + 1 + (k + j - 1) % max(n - 1, 1)) % n])
            out.append(_extend(existing.get(p, []), proposal, ids, spec.replication_factor))
        return out


# --------------------------------------------------------------------------- striped


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks and brokers within a rack sorted)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b] or "", []).append(b)
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        brokers = by_rack[names[i % len(names)]]
        k = i // len(names)
        if k < len(brokers):
            out.append(brokers[k])
        i += 1
    return out


class RoundRobinPlacer:
    """Kafka's AdminUtils assignment (rack-unaware, or rack-aware with one rack level), by start index.

    The default spreads leaders and followers round-robin from a start index, as Kafka's rack-unaware
    assignReplicasToBrokers does; when brokers report `broker.rack` the brokers are ordered
    alternating between racks, leaders go round-robin over that order, and each further replica is the
    next broker (shifted as the rack-unaware way shifts) on a rack that holds no replica of the
    partition yet -- so with replication factor <= number of racks every replica is on its own rack.
    A broker without a rack counts as one more rack (named "").
    """

    def place(
        self,
        brokers: Sequence[int],
        *,
        start_partition: int,
        num_partitions: int,
        replication_factor: int,
        start_index: int,
        racks: Mapping[int, str | None] | None = None,
    ) -> list[list[int]]:
        ids = sorted(brokers)
        n = len(ids)
        if replication_factor > n:
            raise PlacementError(
                f"Replication factor: {replication_factor} larger than available brokers: {n}."
            )
        if racks and any(racks.get(b) for b in ids):
            return self._rack_aware(
                {b: racks.get(b) for b in ids}, start_partition, num_partitions, replication_factor, start_index
            )
        out = []
        for i in range(num_partitions):
            p = start_partition + i
            first = (start_index + p) % n
            shift = start_index + p // n
            replicas = [ids[first]]
            for j in range(replication_factor - 1):
                # Kafka's replicaIndex: the shift wraps within 1..n-1, so a follower never lands on
                # the leader (adding j after the wrap, as this did before, repeated brokers).
                replicas.append(ids[(first + 1 + (shift + j) % max(n - 1, 1)) % n] if n > 1 else ids[first])
            # guard against duplicate picks for tiny clusters
            seen: list[int] = []
            for r in replicas + ids:
                if r not in seen:
                    seen.append(r)
            out.append(seen[:replication_factor])
        return out

    @staticmethod
    def _rack_aware(
        racks: Mapping[int, str | None], start_partition: int, num_partitions: int, rf: int, start_index: int
    ) -> list[list[int]]:
        arranged = rack_alternated(racks)
        n = len(arranged)
        num_racks = len({r or "" for r in racks.values()})
        shift_base = start_index
        out = []
        for i in range(num_partitions):
            p = start_partition + i
            first = (p + start_index) % n
            replica_shift = shift_base + p // n
            leader = arranged[first]
            replicas = [leader]
            used_racks = {racks[leader] or ""}
            k = 0
            while len(replicas) < rf:
                shift = 1 + (replica_shift * num_racks + k) % max(n - 1, 1)
                b = arranged[(first + shift) % n]
                rack = racks[b] or ""
                if (rack not in used_racks or len(used_racks) == num_racks) and b not in replicas:
                    replicas.append(b)
                    used_racks.add(rack)
                k += 1
                if k > 4 * n * n:  # cannot happen with rf <= n; a guard against an endless loop
                    raise PlacementError(f"cannot place {rf} replicas on {n} brokers")
            out.append(replicas)
        return out


class StripedPlacer:
    """The default: Kafka's assignment (`RoundRobinPlacer`) with the seed as its start index."""

    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        ids = sorted(set(broker_ids))
        _check_rf(spec, len(ids))
        proposals = RoundRobinPlacer().place(
            ids,
            start_partition=spec.start_partition,
            num_partitions=spec.num_partitions,
            replication_factor=spec.replication_factor,
            start_index=spec.seed % len(ids),
            racks={b: cluster.racks.get(b) for b in ids},
        )
        existing = cluster.existing(spec)
        return [
            _extend(existing.get(spec.start_partition + i, []), prop, ids, spec.replication_factor)
            for i, prop in enumerate(proposals)
        ]


# --------------------------------------------------------------------------- multi-level


def rack_path(rack: str | None) -> tuple[str, ...]:
    """`/DC1/R1` -> ("DC1", "R1"); a plain rack name is one level; no rack is the root itself."""
    return tuple(c for c in (rack or "").split("/") if c)


class _Node:
    __slots__ = ("children", "ptr", "brokers", "ring")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}  # name -> subtree; a broker leaf is named "#<id>"
        self.ptr = 0
        self.brokers: set[int] = set()  # every broker below this node
        self.ring: list[str] = []  # the children's names, sorted (set once the tree is built)


def _leaf(b: int) -> str:
    return f"#{b}"


class MultiLevelPlacer:
    """KIP-879's multi-level rack-aware placer (see the module doc for the walk)."""

    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        ids = sorted(set(broker_ids))
        _check_rf(spec, len(ids))
        root = self._tree(ids, cluster.racks, spec.seed)
        paths = {b: rack_path(cluster.racks.get(b)) + (_leaf(b),) for b in ids}
        leaders: Counter[int] = Counter()
        # Continue where the topic left off: replay the existing replicas through the rings.
        before = cluster.assignments.get(spec.topic, ()) if spec.topic is not None else ()
        for replicas in before:
            if replicas and replicas[0] in paths:
                leaders[replicas[0]] += 1
            # Walk again, allowed only onto this partition's brokers: the same choices the walk made
            # when it placed them (whatever order the leader pick left them in), so the rings end
            # where they ended then. Brokers no longer offered are skipped.
            offered = set(replicas) & set(ids)
            used = set(ids) - offered
            walked: Counter[tuple[str, ...]] = Counter()
            for _ in offered:
                used.add(self._walk(root, used, walked))
        existing = cluster.existing(spec)
        out = []
        for p in range(spec.start_partition, spec.start_partition + spec.num_partitions):
            keep = existing.get(p, [])
            used = set(keep)
            counts: Counter[tuple[str, ...]] = Counter()
            for b in (b for b in keep if b in paths):
                path = paths[b]
                for d in range(len(path)):
                    counts[path[: d + 1]] += 1
            new: list[int] = []
            while len(keep) + len(new) < spec.replication_factor:
                b = self._walk(root, used, counts)
                used.add(b)
                new.append(b)
            if keep:
                out.append(keep + new)
                continue
            # The preferred leader: the replica that leads fewest partitions so far (ties: walk order).
            leader = min(new, key=lambda b: (leaders[b], new.index(b)))
            leaders[leader] += 1
            out.append([leader] + [b for b in new if b != leader])
        return out

    @staticmethod
    def _tree(ids: Sequence[int], racks: Mapping[int, str | None], seed: int) -> _Node:
        root = _Node()
        for b in ids:
            node = root
            node.brokers.add(b)
            for name in rack_path(racks.get(b)):
                node = node.children.setdefault(name, _Node())
                node.brokers.add(b)
            leaf = node.children.setdefault(_leaf(b), _Node())
            leaf.brokers.add(b)

        def start(node: _Node, path: str) -> None:
            node.ring = sorted(node.children)
            if node.children:
                # The ring's first child, seeded per topic; crc32 keeps it stable across processes.
                node.ptr = (seed + zlib.crc32(path.encode())) % len(node.children)
                for name, child in node.children.items():
                    start(child, f"{path}/{name}")

        start(root, "")
        return root

    @staticmethod
    def _walk(root: _Node, used: set[int], counts: Counter[tuple[str, ...]]) -> int:
        node, path = root, ()
        while node.children:
            ring = node.ring
            best: tuple[int, int] | None = None  # (replicas of this partition below, ring distance)
            for d in range(len(ring)):
                i = (node.ptr + d) % len(ring)
                child = node.children[ring[i]]
                if child.brokers <= used:
                    continue
                key = (counts[path + (ring[i],)], d)
                if best is None or key < best:
                    best = key
                    if key[0] == 0:
                        break  # nothing comes before the nearest child holding none of this partition
            if best is None:  # unreachable: _check_rf guarantees a free broker
                raise PlacementError("no free broker left for this partition")
            i = (node.ptr + best[1]) % len(ring)
            node.ptr = (i + 1) % len(ring)
            path = path + (ring[i],)
            counts[path] += 1
            node = node.children[ring[i]]
        (b,) = node.brokers
        return b


# --------------------------------------------------------------------------- loading and checking


BUILT_IN: dict[str, type] = {"simple": SimplePlacer, "striped": StripedPlacer, "multi-level": MultiLevelPlacer}
DEFAULT_PLACER = "striped"


def placer_name_problem(value: str) -> str | None:
    """Why `broker.replica.placer` cannot be this value at all (checked at startup), or None."""
    if value in BUILT_IN:
        return None
    module, sep, cls = value.partition(":")
    if not sep or not module or not cls or not all(p.isidentifier() for p in module.split(".") + cls.split(".")):
        return f"must be one of {', '.join(BUILT_IN)} or an importable module:Class"
    return None


register_validator("broker.replica.placer", placer_name_problem)  # kavka.config cannot import placement


def load_placer(value: str) -> ReplicaPlacer:
    """The placer named by `broker.replica.placer`; raises PlacementError when a plugin cannot be loaded."""
    if value in BUILT_IN:
        return BUILT_IN[value]()  # type: ignore[no-any-return]
    module_name, _, cls_name = value.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
        for part in cls_name.split("."):
            obj = getattr(obj, part)
        placer = obj() if isinstance(obj, type) else obj
    except Exception as e:  # a plugin's import or constructor may raise anything
        raise PlacementError(
            f"broker.replica.placer {value!r} could not be loaded: {type(e).__name__}: {e}",
            ErrorCode.invalid_replica_assignment,
        ) from e
    if not callable(getattr(placer, "place", None)):
        raise PlacementError(
            f"broker.replica.placer {value!r} has no place(placement_spec, cluster_view, broker_ids) method",
            ErrorCode.invalid_replica_assignment,
        )
    return placer  # type: ignore[no-any-return]


def check_assignment(
    name: str, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int], answer: object
) -> list[list[int]]:
    """The placer's answer if it is a valid placement for the spec; PlacementError naming the fault if not."""

    def bad(msg: str) -> PlacementError:
        return PlacementError(f"Replica placer {name!r} returned an invalid assignment: {msg}", ErrorCode.invalid_replica_assignment)

    if not isinstance(answer, list | tuple) or len(answer) != spec.num_partitions:
        got = len(answer) if isinstance(answer, list | tuple) else type(answer).__name__
        raise bad(f"expected {spec.num_partitions} partitions, got {got}")
    allowed = set(broker_ids)
    existing = cluster.existing(spec)
    out = []
    for i, reps in enumerate(answer):
        p = spec.start_partition + i
        if not isinstance(reps, list | tuple) or not all(isinstance(b, int) and not isinstance(b, bool) for b in reps):
            raise bad(f"partition {p}: {reps!r} is not a list of broker ids")
        if len(reps) != spec.replication_factor:
            raise bad(f"partition {p}: {len(reps)} replicas {list(reps)}, replication factor is {spec.replication_factor}")
        if len(set(reps)) != len(reps):
            raise bad(f"partition {p}: duplicate broker in {list(reps)}")
        old = existing.get(p, [])
        unknown = [b for b in reps if b not in allowed and b not in old]
        if unknown:
            raise bad(f"partition {p}: broker {unknown[0]} is not one of the available brokers {sorted(allowed)}")
        if list(reps[: len(old)]) != old:
            raise bad(f"partition {p}: existing replicas {old} must be kept first, got {list(reps)}")
        out.append(list(reps))
    return out


def run_placer(
    placer: ReplicaPlacer, name: str, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]
) -> list[list[int]]:
    """Ask a placer (or `simple` when the spec forces it), checking the answer; only PlacementError escapes."""
    if spec.force_simple:
        placer, name = SimplePlacer(), "simple"
    try:
        answer = placer.place(spec, cluster, list(broker_ids))
    except PlacementError:
        raise
    except Exception as e:  # a plugin may raise anything; the controller must survive it
        raise PlacementError(
            f"Replica placer {name!r} failed: {type(e).__name__}: {e}", ErrorCode.invalid_replica_assignment
        ) from e
    return check_assignment(name, spec, cluster, broker_ids, answer)
