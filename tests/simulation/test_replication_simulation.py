"""Seeded simulation of partition replication (the harness: kavka.testing.replication_simulation).

Three brokers, one partition (RF=3, min.insync.replicas=2), running the broker's own Log,
ReplicaManager, Partition and the replica fetcher's answer handling, with the controller's
election rules, under delays, drops, duplicates, partitions and hard kills that lose unflushed
data; the invariants are checked after every event (see the harness's docstring). The default
run covers KAVKA_SIM_SEEDS (SEEDS_DEFAULT) and KAVKA_SIM_ELECTION_SEEDS (ELECTION_SEEDS_DEFAULT)
seeds; `-m slow` runs many more. Each of `BROKEN_VARIANTS` (a patch of production code) must be
caught, naming its invariant, within the seeds given here. The replication seeds run again with
KIP-966's eligible leader replicas on (`elr=True`). A failing seed replays exactly:
`run_seed(seed)`, `run_seed(seed, elr=True)`, or `run_seed(seed, elections=True)`.
"""

from __future__ import annotations

import os
import re

import pytest
from kio.schema.errors import ErrorCode

from kavka.controller import partition_change as pc
from kavka.testing.replication_simulation import BROKEN_VARIANTS, InvariantViolation, run_seed

SEEDS_DEFAULT = 200
ELECTION_SEEDS_DEFAULT = 100
SEEDS = int(os.environ.get("KAVKA_SIM_SEEDS", str(SEEDS_DEFAULT)))
ELECTION_SEEDS = int(os.environ.get("KAVKA_SIM_ELECTION_SEEDS", str(ELECTION_SEEDS_DEFAULT)))


@pytest.mark.parametrize("block", range(10))
def test_replication_seeds(block: int) -> None:
    licensed = 0
    acked = 0
    isr_changes = 0
    for seed in range(block, SEEDS, 10):
        sim = run_seed(seed)
        licensed += sim.licensed_loss
        acked += len(sim.producer.acked)
        isr_changes += sim.isr_shrinks + sim.isr_expands
    # The simulation must exercise something: records acknowledged through the faults, and ISR
    # changes for the shrink check to judge.
    assert acked > 0
    assert isr_changes > 0
    # The KIP-966 case must stay rare, or the checks would prove little.
    assert licensed <= SEEDS // 10 // 5 + 1


@pytest.mark.parametrize("block", range(10))
def test_replication_seeds_with_elr(block: int) -> None:
    """KIP-966 on: the same seeds with the controller's ELR rules (the ISR may empty; an ELR member
    is elected; a new incarnation leaves the ELR). Every check holds, leaders are elected from
    the ELR, and no acknowledged record is lost: the last-ISR replica that lost unflushed data
    no longer leads again while an ELR member's data survives (measured, seeds 0-199: 0 licensed
    losses with ELR on and 36 ELR elections, 1 loss with it off)."""
    licensed = 0
    from_elr = 0
    acked = 0
    for seed in range(block, SEEDS, 10):
        sim = run_seed(seed, elr=True)
        # A loss is allowed only after the last leader's balanced recovery (nothing else eligible).
        assert not sim.licensed_loss or sim.recoveries > 0, seed
        licensed += sim.licensed_loss
        from_elr += sim.elr_elections
        acked += len(sim.producer.acked)
    assert acked > 0
    assert licensed == 0
    if SEEDS >= 100:
        assert from_elr > 0  # the ELR election is exercised


@pytest.mark.parametrize("block", range(5))
def test_preferred_elections_seeds(block: int) -> None:
    """ElectLeaders PREFERRED and the automatic rebalance move leadership under faults: every
    election picks a live ISR member and no acknowledged or committed record is lost."""
    elected = 0
    acked = 0
    licensed = 0
    for seed in range(500_000 + block, 500_000 + ELECTION_SEEDS, 5):
        sim = run_seed(seed, elections=True)
        elected += sim.preferred_elections
        acked += len(sim.producer.acked)
        licensed += sim.licensed_loss
    n = ELECTION_SEEDS // 5
    assert elected >= n // 2  # most seeds move leadership at least once: the property is exercised
    assert acked > 0
    assert licensed <= n // 5 + 1


@pytest.mark.slow
@pytest.mark.parametrize("block", range(25))
def test_preferred_elections_many_seeds(block: int) -> None:
    for seed in range(600_000 + block * 200, 600_000 + (block + 1) * 200):
        run_seed(seed, duration_ms=3000, elections=True)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(50))
def test_replication_many_seeds(block: int) -> None:
    for seed in range(100_000 + block * 200, 100_000 + (block + 1) * 200):
        run_seed(seed, duration_ms=3000)


def test_kip966_loss_stays_within_its_license() -> None:
    """Seed 39: broker 3, the last ISR member, loses what lay above its recovery point in a hard
    kill and leads again on return (KIP-966's case). Acknowledged records are lost, only at or
    above that recovery point, and the committed-bytes check ran on after it."""
    sim = run_seed(39)
    assert sim.licensed_loss
    assert sim.license_from is not None
    assert all(offset >= sim.license_from for offset in sim.lost_acked)
    assert max(sim.committed) > sim.license_from  # records committed again past the license, and checked


# Seeds each broken variant is given (0, 1, 2, ..., or a range), with the share of seeds 0-99
# that caught it when measured: the chance that a reshuffled simulation misses it in that many is
# below 1e-4.
VARIANT_SEEDS: dict[str, int | range] = {
    "isr flapping": 3,  # 100/100
    "isr flapping on offset lag": 3,  # 100/100
    "acks=all at the log end": 3,  # 100/100
    "follower high watermark uncapped": 5,  # 90/100, the first at seed 0
    "follower never truncates": 20,  # 40/100, the first at 2
    "elect outside the ISR": 50,  # 17/100, the first at 5
    "fencing empties the ISR": 55,  # 16/100, the first at 5
    "no diverging-epoch check": 35,  # 25/100, the first at 2
    "high watermark past a lagging ISR member": 90,  # 6/60, the first at 6
    # Rare: 3/800 with ELR on, at seeds 513, 747 and 751, since the purgatory's deadlines share
    # one heap (it was 1/60, at 39, before): given those seeds, not a count from 0. A schedule
    # change that moves them fails this test; search again with more seeds.
    "unclean shutdown stays in the ELR": range(745, 752),
}


def test_every_variant_has_seeds() -> None:
    assert set(VARIANT_SEEDS) == set(BROKEN_VARIANTS)


@pytest.mark.parametrize("name", sorted(VARIANT_SEEDS))
def test_broken_variant_is_caught(name: str) -> None:
    """The production code patched to misbehave must fail the simulation, and by the invariant
    meant for it (not any assertion): the simulation runs that code and the check has teeth."""
    variant = BROKEN_VARIANTS[name]
    with variant.applied(), pytest.raises(InvariantViolation, match=re.escape(variant.invariant)):
        seeds = VARIANT_SEEDS[name]
        for seed in seeds if isinstance(seeds, range) else range(seeds):
            run_seed(seed, elr=variant.elr)


def test_simulation_can_fail() -> None:
    """A leader that skips the diverging-epoch check (KIP-320) must be caught by some seed."""
    with BROKEN_VARIANTS["no diverging-epoch check"].applied(), pytest.raises(InvariantViolation):
        for seed in range(300):
            run_seed(seed)


def test_elections_simulation_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """A preferred election that ignores the ISR must be caught by some seed (measured: 9 of
    seeds 0-149, the first at 8)."""

    def reckless(reg, *, live, elr_min_isr=None):  # noqa: ANN001, ANN202
        preferred = reg.replicas[0]
        if reg.leader == preferred or preferred not in live:
            return ErrorCode.election_not_needed, reg
        return ErrorCode.none, pc._change(reg, leader=preferred, isr=reg.isr)

    monkeypatch.setattr(pc, "elect_preferred", reckless)
    with pytest.raises(InvariantViolation, match="preferred election|leader elected from the ISR"):
        for seed in range(300):
            run_seed(seed, elections=True)
