"""`python -m bench.calls OLD_SRC NEW_SRC`: what each broker does per MB, counted, not timed.

CPU seconds per MB on a shared 2-core machine move by 30-50 % between runs of one tree (other
processes, frequency, the run's own speed: a slower run makes more, smaller fetches and more
timer ticks per MB). Function calls per MB barely move. This runs the RF=3 throughput workload
of `bench.replication` (one controller, three brokers, `--mb` MiB of 1 KiB records, acks=all)
once per tree with every broker under cProfile (bench/profile_hook, cut to exactly the produce
phase by SIGUSR2), and prints per role (the leader, each follower): Python function calls and
appends per MB, then the functions whose call counts differ most between the trees. cProfile
slows the brokers several times, so its times are not figures; the counts are.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.broker_harness import Cluster  # noqa: E402

import bench.replication as replication  # noqa: E402

HOOK = Path(__file__).resolve().parent / "profile_hook"


def _calls(path: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for (file, _line, fn), (_cc, nc, *_rest) in pstats.Stats(str(path)).stats.items():  # type: ignore[attr-defined]
        short = file.split("/src/")[-1] if "/src/" in file else file.rsplit("/", 1)[-1]
        out[f"{short}:{fn}"] += nc
    return out


def one_tree(src: Path, mb: int) -> dict[str, Counter[str]]:
    """{role: calls} for the produce phase of one RF=3 throughput run with `src` first on the path."""
    with tempfile.TemporaryDirectory() as d:
        prof = Path(d) / "prof"
        prof.mkdir()
        os.environ["PYTHONPATH"] = f"{HOOK}:{src}"
        os.environ["KAVKA_PROFILE_DIR"] = str(prof)
        try:
            c = Cluster(Path(d) / "cluster", 4, controllers=1).start(timeout=120)
        finally:
            del os.environ["KAVKA_PROFILE_DIR"]
        try:
            replication.throughput(c, max(mb // 5, 1), 3, "all")  # warm-up
            for b in c.brokers.values():
                os.kill(b.proc.pid, signal.SIGUSR2)  # cut: start afresh
            cut = {b.proc.pid: 1 for b in c.brokers.values()}
            time.sleep(0.5)
            replication.throughput(c, mb, 3, "all")
            for b in c.brokers.values():
                os.kill(b.proc.pid, signal.SIGUSR2)
            time.sleep(1.0)
            roles: dict[str, Counter[str]] = {}
            followers = 0
            for pid, n in cut.items():
                calls = _calls(prof / f"{pid}-{n}.prof")
                if calls["kavka/storage/unified_log.py:append_as_leader"] or calls["kavka/storage/log.py:append_as_leader"]:
                    roles["leader"] = calls
                else:
                    followers += 1
                    roles[f"follower {followers}"] = calls
            return roles
        finally:
            c.stop()


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.calls", description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="the src/ directory of the baseline checkout")
    ap.add_argument("new", type=Path, help="the src/ directory of the changed checkout")
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--top", type=int, default=12, help="functions to list per role (default 12)")
    a = ap.parse_args()
    trees = {"old": one_tree(a.old, a.mb), "new": one_tree(a.new, a.mb)}
    print(f"{'role':12} {'calls/MB old':>14} {'calls/MB new':>14} {'new/old':>8}")
    for role in sorted(trees["old"]):
        old, new = trees["old"][role], trees["new"].get(role, Counter())
        o, n = sum(old.values()) / a.mb, sum(new.values()) / a.mb
        print(f"{role:12} {o:14,.0f} {n:14,.0f} {n / o if o else float('nan'):8.2f}")
    for role in sorted(trees["old"]):
        old, new = trees["old"][role], trees["new"].get(role, Counter())
        print(f"\n{role}: the largest differences in calls per MB (old, new, function)")
        keys = sorted(set(old) | set(new), key=lambda k: -abs(old[k] - new[k]))
        for k in keys[: a.top]:
            print(f"  {old[k] / a.mb:10,.1f} {new[k] / a.mb:10,.1f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
