"""Replica placement: which brokers hold the replicas of new partitions.

A small seam (`ReplicaPlacer`, one method) so that the KIP-879 multi-level
rack-aware placer can replace the default. The default spreads leaders and
followers round-robin from a start index, as Kafka's rack-unaware
AdminUtils.assignReplicasToBrokers does; when brokers report `broker.rack` it
places as Kafka's rack-aware assignment does: the brokers are ordered
alternating between racks (rack a's first broker, rack b's first, ..., rack a's
second, ...), leaders go round-robin over that order, and each further replica
is the next broker (shifted as the rack-unaware way shifts) on a rack that holds
no replica of the partition yet -- so with replication factor <= number of racks
every replica is on its own rack, and leaders spread evenly over racks.
A broker without a rack counts as one more rack (named ""). Pure: the start
index is passed in, never drawn from a global random source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class PlacementError(ValueError):
    pass


class ReplicaPlacer(Protocol):
    def place(
        self,
        brokers: Sequence[int],
        *,
        start_partition: int,
        num_partitions: int,
        replication_factor: int,
        start_index: int,
        racks: Mapping[int, str | None] | None = None,
    ) -> list[list[int]]: ...


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
            shift = 1 + (start_index + p // n) % max(n - 1, 1)
            replicas = [ids[first]]
            for j in range(replication_factor - 1):
                replicas.append(ids[(first + shift + j) % n] if n > 1 else ids[first])
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
