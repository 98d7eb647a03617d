"""Replica placement: which brokers hold the replicas of new partitions.

A small seam (`ReplicaPlacer`, one method) so that the KIP-879 multi-level
rack-aware placer can replace the default. The default spreads leaders and
followers round-robin from a start index, as Kafka's rack-unaware
AdminUtils.assignReplicasToBrokers does. Pure: the start index is passed in,
never drawn from a global random source.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    ) -> list[list[int]]: ...


class RoundRobinPlacer:
    def place(
        self,
        brokers: Sequence[int],
        *,
        start_partition: int,
        num_partitions: int,
        replication_factor: int,
        start_index: int,
    ) -> list[list[int]]:
        ids = sorted(brokers)
        n = len(ids)
        if replication_factor > n:
            raise PlacementError(
                f"Replication factor: {replication_factor} larger than available brokers: {n}."
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
