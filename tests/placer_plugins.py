"""Replica placer plugins for tests, loaded by `broker.replica.placer = tests.placer_plugins:<Class>`.

`Reversed` is a well-behaved plugin that defers to the default and reverses each partition's
replicas; the others are broken in one way each, to show the controller refuses their answers with
INVALID_REPLICA_ASSIGNMENT and keeps running.
"""

from __future__ import annotations

from collections.abc import Sequence

from kavka.controller.placement import ClusterView, PlacementSpec, StripedPlacer


class Reversed:
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        return [list(reversed(r)) for r in StripedPlacer().place(spec, cluster, broker_ids)]


class Raises:
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        raise RuntimeError("placer exploded")


class Duplicates:
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        return [[min(broker_ids)] * spec.replication_factor for _ in range(spec.num_partitions)]


class WrongReplicationFactor:
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        return [list(broker_ids)[: spec.replication_factor + 1] for _ in range(spec.num_partitions)]


class UnknownBroker:
    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        return [[9999 + j for j in range(spec.replication_factor)] for _ in range(spec.num_partitions)]


class BrokenConstructor:
    def __init__(self) -> None:
        raise OSError("cannot read my settings")

    def place(self, spec: PlacementSpec, cluster: ClusterView, broker_ids: Sequence[int]) -> list[list[int]]:
        return []
