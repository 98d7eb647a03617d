"""A seeded in-memory network: delivery delays, drops, duplicates and partitions.

`send(message, src, dst, now_ms)` returns the delivery times (none if dropped,
two if duplicated); the simulation puts them in its event queue. Partitions
are a set of node groups: a message crosses only inside one group. All choices
come from the `random.Random` given, so a seed replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Iterable


class SimNetwork:
    def __init__(
        self,
        rng: random.Random,
        *,
        min_delay_ms: int = 1,
        max_delay_ms: int = 20,
        drop_rate: float = 0.0,
        duplicate_rate: float = 0.0,
    ) -> None:
        self.rng = rng
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.drop_rate = drop_rate
        self.duplicate_rate = duplicate_rate
        self._group: dict[int, int] = {}  # node -> partition group; absent: reachable by all

    def partition(self, groups: Iterable[Iterable[int]]) -> None:
        self._group = {n: i for i, g in enumerate(groups) for n in g}

    def heal(self) -> None:
        self._group = {}

    def reachable(self, src: int, dst: int) -> bool:
        return self._group.get(src, -1) == self._group.get(dst, -1)

    def send(self, src: int, dst: int, now_ms: int) -> list[int]:
        if not self.reachable(src, dst) or self.rng.random() < self.drop_rate:
            return []
        times = [now_ms + self.rng.randint(self.min_delay_ms, self.max_delay_ms)]
        if self.rng.random() < self.duplicate_rate:
            times.append(now_ms + self.rng.randint(self.min_delay_ms, self.max_delay_ms * 3))
        return times
