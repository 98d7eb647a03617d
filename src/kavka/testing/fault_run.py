"""One fault run end to end: cluster, workload, nemesis, final heal and read, replica dumps, checker.

`run(FaultRun(...))` starts a `NetnsCluster` (5 nodes: 3 broker,controller voters and 2 brokers
by default), creates the topic (RF 3, min.insync.replicas 2), starts the producer and the
concurrent consumer in the client namespace (`kavka.testing.fault_workload`), plays the seeded
schedule (`kavka.testing.nemesis`), heals everything, lets the producer run through a quiet
period, reads every partition below its high watermark, waits until every replica's log reaches
that high watermark, dumps every replica with `kavka dump-log --json`, and hands it all to
`kavka.testing.fault_checker.check`. Everything started is killed and every namespace deleted in a
`finally`, whatever failed. `python -m kavka.testing.fault_run --seed 7 --length 300` is the long run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kavka.testing.fault_checker import Ack, Batch, CheckResult, Read, check
from kavka.testing.nemesis import Event, Fault, plan, play
from kavka.testing.netns import KAVKA, NetnsCluster

WORKLOAD = [sys.executable, "-m", "kavka.testing.fault_workload"]
REPLICATION_FACTOR = 3  # the workload's topic: RF 3, min.insync.replicas 2 (fault_workload's defaults)


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRun:
    seed: int
    root: Path
    length: float = 40.0  # seconds of faults (the last fault may end a little after)
    quiet: float = 8.0  # seconds of healed cluster with the producer still writing
    nodes: int = 5
    voters: int = 3
    partitions: int = 3
    rate: float = 100.0
    fault_seconds: tuple[float, float] = (3.0, 8.0)
    quiet_seconds: tuple[float, float] = (2.0, 5.0)
    double: float = 0.0  # the share of steps that are two faults at once (nemesis.plan)
    topic: str = "jepsen"
    overrides: tuple[tuple[str, str], ...] = ()  # broker properties over NetnsCluster's (e.g. an unsafe one)


@dataclass(slots=True)
class RunResult:
    check: CheckResult
    schedule: list[Fault]
    events: list[Event]
    fails: int = 0
    fatal: int = 0
    wall_seconds: float = 0.0
    high_watermarks: dict[int, int] = field(default_factory=dict)
    down: list[int] = field(default_factory=list)  # nodes not ready after the final heal

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.down

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.schedule) + Counter(f.also.kind for f in self.schedule if f.also)
        lines = [f"{len(self.schedule)} faults ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}) "
                 f"in {self.wall_seconds:.0f}s; {self.fails} writes failed or "
                 f"indeterminate, {self.fatal} fatal producer errors; high watermarks {self.high_watermarks}"]
        if self.down:
            lines.append(f"NODES NOT READY after the final heal: {self.down}")
        lines += [f"  {e.what}" for e in self.events]
        return "\n".join([*lines, self.check.summary()])


class _History:
    """A workload's JSON-lines file, read incrementally (the producer's grows during the run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._pos = 0

    def refresh(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.events
        with open(self.path) as f:
            f.seek(self._pos)
            chunk = f.read()
        whole = chunk[: chunk.rfind("\n") + 1]
        self._pos += len(whole.encode())
        self.events.extend(json.loads(line) for line in whole.splitlines() if line)
        return self.events


def _leader_finder(history: _History) -> Callable[[int], int | None]:
    def leader_of(partition: int) -> int | None:
        for e in reversed(history.refresh()):
            if "leaders" in e:
                leader = e["leaders"].get(str(partition), -1)
                return leader if leader > 0 else None
        return None

    return leader_of


def dump_replicas(cluster: NetnsCluster, topic: str, partitions: int) -> dict[int, dict[int, list[Batch]]]:
    """Every replica's batches, by partition and node, read with `kavka dump-log --json`."""
    dirs = {(p, i): cluster.partition_dir(i, topic, p) for p in range(partitions) for i in cluster.nodes}
    present = {k: d for k, d in dirs.items() if d.is_dir()}
    out: dict[int, dict[int, list[Batch]]] = {p: {} for p in range(partitions)}
    if not present:
        return out
    res = subprocess.run([*KAVKA, "dump-log", "--json", "--files", ",".join(str(d) for d in present.values())],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"kavka dump-log failed: {res.stdout}{res.stderr}")
    by_dir = {str(d): k for k, d in present.items()}
    for k in present:
        out[k[0]][k[1]] = []
    for seg in sorted(json.loads(res.stdout), key=lambda s: s["file"]):
        p, i = by_dir[str(Path(seg["file"]).parent)]
        out[p][i].extend(Batch(b["baseOffset"], b["lastOffset"], b["partitionLeaderEpoch"], b["crc"])
                         for b in seg["batches"])
    return out


def _caught_up(replicas: dict[int, dict[int, list[Batch]]], hws: dict[int, int], rf: int) -> bool:
    return all(len(by_node) >= rf and all((bs[-1].last_offset + 1 if bs else 0) >= hws[p] for bs in by_node.values())
               for p, by_node in replicas.items())


def _run_client(cluster: NetnsCluster, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cluster.client_argv([*WORKLOAD, *args]), capture_output=True, text=True, timeout=timeout)


def run(cfg: FaultRun, *, log: Callable[[str], None] = lambda line: None) -> RunResult:
    began = time.monotonic()
    schedule = plan(cfg.seed, nodes=range(1, cfg.nodes + 1), partitions=cfg.partitions, length=cfg.length,
                    fault_seconds=cfg.fault_seconds, quiet_seconds=cfg.quiet_seconds, double=cfg.double)
    cfg.root.mkdir(parents=True, exist_ok=True)
    cluster = NetnsCluster(cfg.root, cfg.nodes, voters=cfg.voters, overrides=dict(cfg.overrides))
    procs: list[subprocess.Popen[str]] = []
    stderrs: list[Any] = []
    try:
        cluster.start()
        log(f"cluster of {cfg.nodes} ready in {time.monotonic() - began:.1f}s")
        common = ["--bootstrap", cluster.bootstrap, "--topic", cfg.topic, "--partitions", str(cfg.partitions)]
        res = _run_client(cluster, ["setup", *common, "--brokers", str(cfg.nodes)], timeout=90)
        if res.returncode != 0:
            raise RuntimeError(f"workload setup failed: {res.stdout}{res.stderr}")
        end_of_faults = max((f.start + f.duration for f in schedule), default=0.0)
        produce_for = end_of_faults + cfg.quiet
        produced, consumed, final = (cfg.root / n for n in ("produce.jsonl", "consume.jsonl", "read.jsonl"))
        for argv in (["produce", *common, "--rate", str(cfg.rate), "--duration", str(produce_for),
                      "--out", str(produced)],
                     ["consume", *common, "--duration", str(produce_for + 5), "--out", str(consumed)]):
            stderrs.append(open(cfg.root / f"{argv[0]}.stderr", "w"))  # noqa: SIM115 -- closed in the finally
            procs.append(subprocess.Popen(cluster.client_argv([*WORKLOAD, *argv]), stdout=subprocess.DEVNULL,
                                          stderr=stderrs[-1]))
        history = _History(produced)
        events = play(schedule, cluster, _leader_finder(history), log=log)
        log("healed; quiet period")
        for p in procs:
            p.wait(timeout=cfg.quiet + 90)
        down = []
        for i, n in cluster.nodes.items():
            try:
                n.wait_ready(30)
            except (TimeoutError, RuntimeError):
                down.append(i)  # a node that cannot start again after a kill -9 is a finding of its own
        res = _run_client(cluster, ["read", *common, "--timeout", "60", "--out", str(final)], timeout=90)
        if res.returncode != 0:
            raise RuntimeError(f"final read failed: {res.stdout}{res.stderr}")
        read_events = _History(final).refresh()
        hws = {int(p): hw for e in read_events if "hw" in e for p, hw in e["hw"].items()}
        deadline = time.monotonic() + 60
        replicas = dump_replicas(cluster, cfg.topic, cfg.partitions)
        while not _caught_up(replicas, hws, REPLICATION_FACTOR) and time.monotonic() < deadline:
            time.sleep(0.5)  # a follower still fetching up to the high watermark
            replicas = dump_replicas(cluster, cfg.topic, cfg.partitions)
        produce_events = history.refresh()
        start = next(e["start"] for e in produce_events if "start" in e)
        stop = next(e["stop"] for e in produce_events if "stop" in e)
        result = check(
            acks=[Ack(*e["ack"]) for e in produce_events if "ack" in e],
            final_read=[Read(*e["read"][:3]) for e in read_events if "read" in e],
            reads=[Read(*e["read"][:3]) for e in _History(consumed).refresh() if "read" in e],
            high_watermarks=hws,
            replicas=replicas,
            attempts=(start, stop),
            partitions=range(cfg.partitions),
            replication_factor=REPLICATION_FACTOR,
        )
        return RunResult(check=result, schedule=schedule, events=events,
                         fails=sum("fail" in e for e in produce_events),
                         fatal=sum("fatal" in e for e in produce_events),
                         wall_seconds=time.monotonic() - began, high_watermarks=hws, down=down)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for f in stderrs:
            f.close()
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kavka.testing.fault_run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--length", type=float, default=300.0)
    parser.add_argument("--double", type=float, default=0.0, help="share of steps with two faults at once")
    parser.add_argument("--fault-seconds", default="3,8", help="shortest,longest fault")
    parser.add_argument("--gap-seconds", default="2,5", help="shortest,longest quiet gap between faults")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property for every node (repeatable)")
    parser.add_argument("--root", type=Path, default=None, help="where nodes keep their data (a temp dir by default)")
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="kavka-faults-"))

    def pair(text: str) -> tuple[float, float]:
        low, high = (float(x) for x in text.split(","))
        return low, high

    cfg = FaultRun(seed=args.seed, root=root, length=args.length, double=args.double,
                   fault_seconds=pair(args.fault_seconds), quiet_seconds=pair(args.gap_seconds),
                   overrides=tuple(tuple(kv.split("=", 1)) for kv in args.set))
    result = run(cfg, log=lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", flush=True))
    print(result.summary())
    print(f"(data and logs in {root})")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
