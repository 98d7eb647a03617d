"""Seeded simulation of tiered storage (the model: kavka.testing.tiered_simulation): produce / copy
(sometimes killed half way) / local retention / total retention / restart, checking after every
step that no offset at or above the log start offset is ever in neither tier."""

from __future__ import annotations

import random

import pytest

from kavka.testing.tiered_simulation import Partition
from kavka.tiered.remote_log_rules import TieredTopicConfig


@pytest.mark.parametrize("seed", range(30))
def test_simulation_never_loses_an_offset(seed: int) -> None:
    rng = random.Random(seed)
    config = TieredTopicConfig(
        remote_storage_enable=True,
        retention_ms=rng.choice([-1, 3000, 8000]),
        retention_bytes=rng.choice([-1, 2000, 5000]),
        local_retention_ms=rng.choice([-2, 500, 1000]),
        local_retention_bytes=rng.choice([-2, 300, 600]),
    )
    p = Partition(rng, config)
    steps = [p.produce] * 5 + [p.copy, p.copy, p.clean_unfinished, p.local_retention,
                               p.total_retention, p.restart]
    for _ in range(400):
        p.now += rng.randint(0, 100)
        rng.choice(steps)()
        p.check()
    assert p.cache.highest_offset_in_remote_storage >= 0  # the run did tier something
