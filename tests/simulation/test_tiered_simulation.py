"""Seeded simulation of tiered storage (the model: kavka.testing.tiered_simulation): produce / copy
(sometimes killed half way) / local retention / total retention / restart, checking after every
step that no offset at or above the log start offset is ever in neither tier, that no segment is
deleted locally before it was copied and that only finished copies are readable. Two broken
planners must be caught, each by the invariant named."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import kavka.testing.tiered_simulation as harness
from kavka.testing.tiered_simulation import InvariantViolation, Partition
from kavka.tiered import remote_log_rules as rules
from kavka.tiered.remote_log_rules import TieredTopicConfig


def run_seed(seed: int) -> Partition:
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
    return p


@pytest.mark.parametrize("seed", range(30))
def test_simulation_never_loses_an_offset(seed: int) -> None:
    p = run_seed(seed)
    assert p.cache.highest_offset_in_remote_storage >= 0  # the run did tier something


def _delete_uncopied(local, *, config, highest_copied_offset, now_ms):  # noqa: ANN001, ANN202
    """Local retention that forgets to wait for the copy."""
    return rules.local_segments_to_delete(local, config=config, highest_copied_offset=10**18, now_ms=now_ms)


def _copy_skips_a_segment(local, *, highest_copied_offset, last_stable_offset):  # noqa: ANN001, ANN202
    """A copier that, given several segments to copy, copies only the newest."""
    return rules.segments_to_copy(local, highest_copied_offset=highest_copied_offset,
                                  last_stable_offset=last_stable_offset)[-1:]


@contextmanager
def _broken(name: str, fn: object) -> Iterator[None]:
    original = getattr(harness, name)
    setattr(harness, name, fn)
    try:
        yield
    finally:
        setattr(harness, name, original)


# (planner name in the harness, broken planner, invariant that must fire, first failing seed)
BROKEN = [
    ("local_segments_to_delete", _delete_uncopied, "deleted before it was copied", 0),
    ("segments_to_copy", _copy_skips_a_segment, r"offset \d+ is in neither tier", 0),
]


@pytest.mark.parametrize(("name", "fn", "invariant", "first"), BROKEN, ids=[b[0] for b in BROKEN])
def test_simulation_catches_a_broken_planner(name: str, fn: object, invariant: str, first: int) -> None:
    with _broken(name, fn):
        for seed in range(30):
            try:
                run_seed(seed)
            except InvariantViolation as e:
                assert re.search(invariant, str(e)), f"seed {seed}: expected /{invariant}/, got: {e}"
                assert seed == first, f"first failing seed {seed}, recorded {first}"
                return
    pytest.fail(f"{name}: seeds 0-29 passed with a broken planner; the simulation cannot see it")
