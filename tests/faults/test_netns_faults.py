"""Five real kavka nodes, each in its own network namespace, under a seeded nemesis; zero anomalies.

The harness is `kavka.testing.fault_run` (see docs/testing.md, "Faults across network
namespaces"): partitions (majority/minority, the leader isolated, one-way) as blackhole routes
inside the node namespaces, SIGSTOP/SIGCONT pauses, kill -9 and restart; an idempotent acks=all
confluent-kafka producer and a concurrent consumer in a client namespace; after the final heal a
full read and every replica's log (`kavka dump-log`) compared below the high watermark. Skipped
where namespaces cannot be made (not root, no `ip`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kavka.testing.fault_run import FaultRun, run
from kavka.testing.nemesis import KINDS
from kavka.testing.netns import netns_names, netns_unavailable_reason

_REASON = netns_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces here: {_REASON}")


def _run_and_check(cfg: FaultRun, min_acked: int) -> None:
    before = netns_names()
    result = run(cfg, log=print)
    assert netns_names() <= before, "the run left network namespaces behind"
    print(result.summary())
    assert result.ok, result.summary()
    assert result.check.acked >= min_acked, result.summary()
    started = {e.what.split()[1] for e in result.events if e.what.startswith("start ")}
    assert started == set(KINDS), result.summary()


def test_a_short_seeded_schedule_loses_nothing(tmp_path: Path) -> None:
    # ~35 s of faults, one of each kind, 3 to 5 s each: long enough for a fencing (3 s session).
    cfg = FaultRun(seed=20251126, root=tmp_path, length=10.0, quiet=5.0, fault_seconds=(3.0, 5.0),
                   quiet_seconds=(1.5, 2.5))
    _run_and_check(cfg, min_acked=1000)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("seed", "double"), [(1, 0.0), (2, 0.0), (3, 0.5)])
def test_a_long_seeded_schedule_loses_nothing(tmp_path: Path, seed: int, double: float) -> None:
    """Five minutes of faults; with `double`, half the steps are two faults at once."""
    _run_and_check(FaultRun(seed=seed, root=tmp_path, length=300.0, quiet=10.0, double=double), min_acked=10000)
