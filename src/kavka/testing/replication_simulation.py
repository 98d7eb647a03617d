"""Seeded simulation of partition replication, running the broker's own replication code.

Three brokers host one partition (RF=3, min.insync.replicas=2). What runs for real, per broker:
a `storage.unified_log.Log` in a directory of its own (segments, indexes, the leader-epoch
checkpoint), the `replication.replica_manager.ReplicaManager` with its `Partition`
(`append_records` for acks=all produces, answered through the purgatory's `DelayedProduce`;
`fetch_messages` for followers' fetches, long-polled as a `DelayedFetch` in half the seeds: the KIP-320 diverging-epoch check, the follower's
position, high-watermark moves, ISR-expansion proposals, KIP-903 broker-epoch checks;
`shrink_isrs`; `apply_partition` for each metadata update; the high-watermark checkpoint), and
the replica fetcher's request and answer handling (`replication.fetcher.fetch_position`,
`answer_is_current`, `apply_partition_response`: append, truncate on a diverging epoch, take
the leader's high watermark). The controller side is the controller's rules
(`controller.partition_change`, `ReplicationControlManager.balance_leaders`) on one partition.

What is modelled: the clock (`ReplicaManager.now_ms` and the purgatory's timers run on
simulated milliseconds: `SimLoop` is just enough of an asyncio loop for the purgatory), the
network (a seeded one that delays, drops, duplicates and partitions; each message is a function
call at the other end, the Fetch a `FetchPosition` one way and the FetchResponse partition's
fields the other -- no wire encoding), the follower's fetch loop (half the seeds fetch on a timer
with replica.fetch.wait.max.ms=0; in the others the leader parks a fetch with nothing new as the
purgatory's DelayedFetch, and the follower fetches again at each answer), the AlterPartition
sender (one proposal in flight, resent with no answer, as `AlterPartitionManager`), the metadata
log (the controller sends each broker the partition's registration and the brokers' epochs and
fencing as a `MetadataImage`), the LogManager (one log, the high-watermark checkpoint kept in
memory) and the disk under a hard kill: the Log is closed, every byte above its recovery point is cut from
the segment files (segments starting above it deleted, sometimes a torn piece of the next batch
left), and the restart reopens it with `Log.open(clean_shutdown=False)` -- the real recovery.
Brokers are killed hard and restarted as new incarnations; a producer sends one-record batches
with acks=all to whoever it believes leads.

Checked after every event (each failure names its invariant):
- one leader per epoch: at most one broker leads a leader epoch;
- leader high watermark monotonic: within its epoch;
- high watermark <= log end offset on every replica;
- committed bytes identical: below its high watermark every replica holds, batch for batch, the
  same bytes (CRC recomputed, leader epoch and lengths included) as every other one did;
- acks=all acknowledged below the high watermark: at the moment of the answer the leader's
  high watermark is past the record, and the record is the one produced;
- leader elected from the ISR: every leader the controller names was in the ISR before (and is
  a live broker); the ISR is never empty;
- follower truncates on a diverging epoch: applying a diverging-epoch answer lowers the
  follower's (log end offset, latest epoch);
- ISR shrink removes only lagging followers: a leader proposes dropping a follower only if, by
  the fetches the simulation delivered to it (Kafka's lastCaughtUpTime rule recomputed: caught
  up at a fetch reaching the leader's log end, or at the previous fetch when this one reaches
  the log end that fetch saw), it has not caught up for replica.lag.time.max.ms;
- ISR stable without faults: once the network has healed, every broker runs, the ISR is whole and
  every follower has caught up with the leader since the healing, no leader proposes a shrink
  (followers fetch every few tens of ms, the lag allowed is 150 ms).
And at the end, once faults stop and the network heals: one leader, every replica in the ISR,
every log identical byte for byte, high watermark = log end everywhere, and every acknowledged
record present.

With `elections=True` the controller also runs preferred-leader elections: ElectLeaders PREFERRED
at random moments and often just after a broker returns (an operator's `kavka leader-election`,
while the returning broker may still be outside the ISR) and the automatic rebalance
(`ReplicationControlManager.balance_leaders`, leader.imbalance.per.broker.percentage=10) on a seeded
interval -- leadership moves while the old leader is alive and taking writes. Each election must
pick a live ISR member, and every check above must still hold.

The one loss Kafka's design allows (KIP-966 addresses it): a replica that is the last ISR member
loses unflushed records in a hard kill and leads again on return. When that replica registers,
the simulation records a *license* from its recovery point: committed records at or above it may
be replaced (copies of them on other replicas, until they truncate, are recognised), and an
acknowledged record may be missing at the end only if it lies at or above a license. Every other
check keeps running for the seed; `Sim.licensed_loss` is True only when an acknowledged record
was actually lost that way.

With `elr=True` the controller runs KIP-966's eligible leader replicas: the ISR may become
empty, a leader may be elected from the ELR (no ISR member alive) or, with ISR and ELR empty, be
the last leader again (balanced recovery: the license is then taken, if that replica lost data),
and a new incarnation leaves the ELR (`partition_change.on_broker_unclean_shutdown`). The ISR
check becomes "leader elected from the ISR, the ELR or the last-known leader"; the ISR may be
empty.

`BROKEN_VARIANTS` names deliberately broken versions of the production code (each a patch of a
production class or function); the tests assert the simulation catches each, naming the
invariant. A failing seed says what failed and replays exactly: `run_seed(seed)` (with
`elections=True` for the election runs). The tests are in
tests/simulation/test_replication_simulation.py. Used by tests only; single-threaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.common import TopicPartition
from kavka.config import build_config
from kavka.controller import partition_change as pc
from kavka.controller.replication_control import ReplicationControlManager
from kavka.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kavka.protocol.records import batch_crc_ok, build_batch, decode_batch, iter_batches
from kavka.replication.fetcher import (
    FetchApplied,
    FetchPosition,
    answer_is_current,
    apply_partition_response,
    fetch_position,
)
from kavka.replication.partition import Partition, PartitionError
from kavka.replication.replica_manager import (
    FetchParams,
    FetchPartitionData,
    PartitionResponse,
    ReplicaManager,
)
from kavka.replication.replica_state import NO_LEADER, DivergingEpoch, IsrProposal, LeaderState
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

CONTROLLER = -1
PRODUCER = 0
BROKERS = (1, 2, 3)
MIN_ISR = 2
SESSION_TIMEOUT_MS = 120
HEARTBEAT_MS = 20
LAG_TIME_MAX_MS = 150
FETCH_TIMEOUT_MS = 60
ALTER_TIMEOUT_MS = 100
ACKS_TIMEOUT_MS = 400
MAX_FETCH_BYTES = 2048  # replica.fetch.max.bytes: some 30 one-record batches
TP = TopicPartition("t", 0)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
SIM_ROOT = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class InvariantViolation(AssertionError):
    pass


# ------------------------------------------------------------------ the loop the purgatory sees


class _Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class SimLoop:
    """Just enough of an asyncio event loop for the purgatory's delayed operations (futures and
    timers) on simulated time. One per broker incarnation: a killed broker's timers never fire."""

    def __init__(self, sim: Sim, broker: Broker) -> None:
        self.sim = sim
        self.broker = broker
        self.incarnation = broker.incarnation

    def get_debug(self) -> bool:
        return False

    def time(self) -> float:
        return self.sim.now / 1000

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)  # type: ignore[arg-type]

    def call_soon(self, callback: Callable[..., object], *args: object, context: object = None) -> _Timer:
        return self.call_later(0, callback, *args)

    def call_later(self, delay: float, callback: Callable[..., object], *args: object, context: object = None) -> _Timer:
        timer = _Timer()
        b = self.broker

        def run() -> None:
            if not timer.cancelled and b.alive and b.incarnation == self.incarnation:
                callback(*args)

        self.sim.at(self.sim.now + max(0, math.ceil(delay * 1000)), run)
        return timer

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        asyncio._set_running_loop(self)  # type: ignore[arg-type]
        try:
            yield
        finally:
            asyncio._set_running_loop(None)


# ------------------------------------------------------------------ the disk under a hard kill


def crash_log_dir(dir: Path, recovery_point: int, rng: random.Random) -> None:
    """What a hard kill leaves of a closed Log's dir: every byte at or above the recovery point
    (the offset below which everything was fsynced) is gone -- segments starting at or above it
    deleted (the first one emptied), the segment holding it cut after its last batch below it,
    sometimes with a torn piece of the next batch left for recovery to find."""
    segments = sorted((int(f.stem), f) for f in dir.glob("*.log"))
    for i, (base, f) in enumerate(segments):
        if base >= recovery_point and i > 0:
            for suffix in (".log", ".index", ".timeindex"):
                f.with_suffix(suffix).unlink(missing_ok=True)
            continue
        data = f.read_bytes()
        keep = 0
        torn = b""
        for pos, h in iter_batches(data):
            if h.next_offset > recovery_point:
                torn = data[pos : pos + h.size_in_bytes]
                break
            keep = pos + h.size_in_bytes
        if keep == len(data):
            continue
        cut = data[:keep]
        if torn and rng.random() < 0.3:
            cut += torn[: rng.randint(1, len(torn) - 1)]
        f.write_bytes(cut)


# ------------------------------------------------------------------ the network


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    """A Fetch request's partition entry as ReplicaManager.fetch_messages reads it."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponsePartition:
    """A FetchResponse partition's fields as apply_partition_response reads them."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: DivergingEpoch | None
    records: bytes


@dataclass(slots=True)
class CatchUp:
    """The simulation's record of one follower's fetches to the current leader (the ISR oracle)."""

    caught_up_ms: int
    last_fetch_leader_leo: int = 0
    last_fetch_ms: int = 0
    fetched_caught_up_ms: int = -1  # the same, from fetches only (not from the leader's start)


class Sim:
    def __init__(self, seed: int, *, duration_ms: int, elections: bool = False, elr: bool = False, root: Path) -> None:
        self.seed = seed
        self.elr = elr  # KIP-966's eligible leader replicas on in the controller's rules
        self.elr_elections = 0  # leaders elected from the ELR (the ISR empty)
        self.recoveries = 0  # the last leader elected again with ISR and ELR empty (balanced recovery)
        self.rng = random.Random(seed)
        self.root = root
        self.elections = elections
        self.preferred_elections = 0  # leader changes made by ElectLeaders or the rebalance
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.now = 0
        self.duration_ms = duration_ms
        self._queue: list[tuple[int, int, Callable[[], object]]] = []  # (time, sequence, action)
        self._seq = 0
        self.drop_p = self.rng.choice([0.0, 0.02, 0.1])
        self.dup_p = self.rng.choice([0.0, 0.02])
        self.max_delay = self.rng.choice([2, 8, 20])
        self.segment_bytes = self.rng.choice([1 << 30, 1200])
        # replica.fetch.wait.max.ms: 0 fetches on a timer; otherwise the leader parks a fetch with
        # nothing new in the purgatory (DelayedFetch) and the follower fetches again at each answer.
        self.fetch_wait_ms = self.rng.choice([0, 25])
        self.cut: set[frozenset[int]] = set()  # pairs that cannot talk
        self.faults = True
        self.controller = Controller(self)
        self.brokers = {b: Broker(self, b) for b in BROKERS}
        self.producer = Producer(self)
        self.converged = False  # set once healed and settled: the run ends there
        self.healed_at: int | None = None
        # Healed, every broker up, the ISR whole and every follower caught up with the leader
        # since: from here on no shrink is right.
        self.settled = False
        # KIP-966 licenses: (time, broker, recovery point) of a last-ISR replica that lost data.
        self.licenses: list[tuple[int, int, int]] = []
        self.license_from: int | None = None
        self.lost_acked: list[int] = []  # offsets of acknowledged records lost under a license
        self.committed: dict[int, bytes] = {}
        self.superseded: dict[int, set[bytes]] = {}  # committed batches a license let go
        self.leader_of_epoch: dict[int, int] = {}
        self.events = 0

    @property
    def licensed_loss(self) -> bool:
        return bool(self.lost_acked)

    # scheduling
    def at(self, when: int, action) -> None:  # noqa: ANN001
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, action))

    def send(self, src: int, dst: int, handler, *args) -> None:  # noqa: ANN001
        """Deliver `handler(*args)` at `dst` after a random delay, unless dropped or cut off.
        A message outlives neither side's incarnation (a restart breaks the connection)."""
        if frozenset((src, dst)) in self.cut or self.rng.random() < self.drop_p:
            return
        src_inc = self.incarnation(src)
        dst_inc = self.incarnation(dst)
        if src_inc < 0 or dst_inc < 0:
            return  # a dead broker sends nothing and nothing reaches it
        copies = 2 if self.rng.random() < self.dup_p else 1
        for _ in range(copies):
            delay = self.rng.randint(1, self.max_delay)

            def deliver(handler=handler, args=args) -> None:  # noqa: ANN001
                if frozenset((src, dst)) in self.cut:
                    return
                if self.incarnation(src) != src_inc or self.incarnation(dst) != dst_inc:
                    return
                handler(*args)

            self.at(self.now + delay, deliver)

    def incarnation(self, node: int) -> int:
        if node in (CONTROLLER, PRODUCER):
            return 0
        b = self.brokers[node]
        return b.incarnation if b.alive else -1

    def run(self) -> None:
        for b in self.brokers.values():
            b.start()
        self.controller.start()
        self.producer.start()
        self.at(self.rng.randint(50, 150), self.fault)
        self.at(self.duration_ms, self.heal)
        end = self.duration_ms + 4000
        while self._queue and self._queue[0][0] <= end and not self.converged:
            self.now, _, action = heapq.heappop(self._queue)
            action()
            self.events += 1
            self.check()
        self.check_converged()

    # faults
    def fault(self) -> None:
        if not self.faults:
            return
        kinds = ["kill", "restart", "cut", "cut_controller", "heal_one", "flush"]
        if self.elections:
            kinds += ["elect_preferred", "elect_preferred"]
        kind = self.rng.choice(kinds)
        dead = [b for b in self.brokers.values() if not b.alive]
        alive = [b for b in self.brokers.values() if b.alive]
        if kind == "kill" and not dead:
            self.rng.choice(alive).kill()
        elif kind == "restart" and dead:
            self.rng.choice(dead).restart()
        elif kind == "cut":
            a, b = self.rng.sample(BROKERS, 2)
            self.cut.add(frozenset((a, b)))
        elif kind == "cut_controller":
            self.cut.add(frozenset((self.rng.choice(BROKERS), CONTROLLER)))
        elif kind == "heal_one" and self.cut:
            self.cut.discard(self.rng.choice(sorted(self.cut, key=sorted)))
        elif kind == "flush":
            for b in alive:
                b.log.flush()
        elif kind == "elect_preferred":
            self.controller.elect_preferred()
        self.at(self.now + self.rng.randint(30, 250), self.fault)

    def heal(self) -> None:
        self.healed_at = self.now
        self.faults = False
        self.cut.clear()
        self.drop_p = 0.0
        self.dup_p = 0.0
        for b in self.brokers.values():
            if not b.alive:
                b.restart()
        self.at(self.now + 400, self.producer.stop)
        self.at(self.now + 450, self.poll_converged)

    def poll_converged(self) -> None:
        reg = self.controller.reg
        leader = self.brokers.get(reg.leader)
        if (
            self.healed_at is not None
            and sorted(reg.isr) == sorted(BROKERS)
            and all(b.alive for b in self.brokers.values())
            and leader is not None
            and leader.oracle
            and all(st.fetched_caught_up_ms >= self.healed_at for st in leader.oracle.values())
        ):
            self.settled = True
        parts = [b.partition for b in self.brokers.values()]
        if (
            reg.leader != NO_LEADER
            and sorted(reg.isr) == sorted(BROKERS)
            and all(p is not None and p.registration == reg for p in parts)
            and len({(p.log_end_offset, p.high_watermark) for p in parts if p is not None}) == 1
            and all(p is not None and p.log_end_offset == p.high_watermark for p in parts)
        ):
            self.converged = True
        else:
            self.at(self.now + 50, self.poll_converged)

    # KIP-966
    def license(self, broker: int, recovery_point: int) -> None:
        """The last ISR member `broker` lost what lay above `recovery_point` and may lead again:
        committed records from there on may be replaced."""
        self.licenses.append((self.now, broker, recovery_point))
        self.license_from = recovery_point if self.license_from is None else min(self.license_from, recovery_point)
        for o in [o for o in self.committed if o >= recovery_point]:
            self.superseded.setdefault(o, set()).add(self.committed.pop(o))
        for b in self.brokers.values():
            b.checked_upto = min(b.checked_upto, recovery_point)

    def licensed(self, offset: int) -> bool:
        return self.license_from is not None and offset >= self.license_from

    # invariants
    def fail(self, invariant: str, what: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at {self.now} ms: {invariant}: {what}")

    def check(self) -> None:
        for b in self.brokers.values():
            if not b.alive:
                continue
            p = b.partition
            if p is None:
                continue
            ls = p.leader_state
            if ls is not None:
                owner = self.leader_of_epoch.setdefault(ls.leader_epoch, b.id)
                if owner != b.id:
                    self.fail("one leader per epoch", f"brokers {owner} and {b.id} both led epoch {ls.leader_epoch}")
                if ls.high_watermark < b.last_leader_hw.get(ls.leader_epoch, 0):
                    self.fail("leader high watermark monotonic", f"leader {b.id} went back in epoch {ls.leader_epoch}")
                b.last_leader_hw[ls.leader_epoch] = ls.high_watermark
                if b.oracle_state is not ls:
                    b.reset_oracle(ls)
            hw, leo = p.high_watermark, p.log_end_offset
            if hw > leo:
                self.fail("high watermark <= log end offset", f"broker {b.id} high watermark {hw} above its log end {leo}")
            b.checked_upto = min(b.checked_upto, hw)
            if hw > b.checked_upto:
                self.check_committed(b, p, hw)

    def check_committed(self, b: Broker, p: Partition, hw: int) -> None:
        """Every batch of `b` below its high watermark, byte for byte, against what the others held."""
        expect = b.checked_upto
        for offset, batch in read_batches(p.log, expect, hw):
            if offset != expect:
                self.fail("committed bytes identical", f"broker {b.id} has a batch at {offset}, expected one at {expect}")
            expect += 1
            seen = self.committed.get(offset)
            if seen is None:
                if self.licensed(offset) and batch in self.superseded.get(offset, ()):
                    continue  # a copy of what the license let go, not truncated yet
                self.committed[offset] = batch
            elif seen != batch:
                if self.licensed(offset) and batch in self.superseded.get(offset, ()):
                    continue
                self.fail(
                    "committed bytes identical",
                    f"broker {b.id} has {describe(batch)} at committed offset {offset}, others have {describe(seen)}",
                )
        if expect != hw:
            self.fail("committed bytes identical", f"broker {b.id} holds batches up to {expect}, its high watermark is {hw}")
        b.checked_upto = hw

    def check_converged(self) -> None:
        reg = self.controller.reg
        if reg.leader == NO_LEADER:
            self.fail("converges after healing", f"no leader: {reg}")
        if sorted(reg.isr) != sorted(BROKERS):
            self.fail("converges after healing", f"ISR {reg.isr} not whole")
        logs: dict[int, list[tuple[int, bytes]]] = {}
        for b in self.brokers.values():
            p = b.partition
            if p is None:
                self.fail("converges after healing", f"broker {b.id} hosts no partition")
            logs[b.id] = list(read_batches(p.log, 0, p.log_end_offset))
            if p.high_watermark != p.log_end_offset:
                self.fail("converges after healing", f"broker {b.id} high watermark {p.high_watermark} != {p.log_end_offset}")
        first = logs[reg.leader]
        for bid, batches in logs.items():
            if batches != first:
                self.fail("converges after healing", f"log of broker {bid} differs from the leader's")
        final = dict(first)
        for offset, (value, batch) in sorted(self.producer.acked.items()):
            if final.get(offset) != batch:
                if not self.licensed(offset):
                    self.fail("acknowledged records survive", f"acknowledged record {value} at offset {offset} lost")
                self.lost_acked.append(offset)


def read_batches(log: Log, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(base offset, bytes) of the batches of `log` in [start, end), each CRC-checked."""
    offset = start
    while offset < end:
        data = log.read(offset, max_bytes=1 << 20, max_offset=end, min_one_message=True).records
        view = memoryview(data)
        n = 0
        for pos, h in iter_batches(view):
            if h.base_offset < offset:
                continue
            if h.base_offset >= end:
                return
            if not batch_crc_ok(view, pos, h):
                raise InvariantViolation(f"batch at {h.base_offset} of {log.dir} fails its CRC")
            yield h.base_offset, bytes(view[pos : pos + h.size_in_bytes])
            offset = h.next_offset
            n += 1
        if n == 0:
            return


def batch_values(batch: bytes) -> list[str | None]:
    return [r.value.decode() if r.value is not None else None for r in decode_batch(batch)[1]]


def describe(batch: bytes) -> str:
    return f"{batch_values(batch)} (epoch {decode_batch(batch)[0].partition_leader_epoch})"


# ------------------------------------------------------------------ the controller


class Controller:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        # With elections, the partition may start led by a replica that is not the preferred one
        # (as after a broker's return), so most seeds move leadership back under faults.
        leader = sim.rng.choice(BROKERS) if sim.elections else BROKERS[0]
        self.reg = PartitionRegistration(
            partition_id=0, replicas=BROKERS, isr=BROKERS, leader=leader, leader_epoch=0, partition_epoch=0
        )
        self.last_heartbeat = {b: 0 for b in BROKERS}
        self.incarnation = {b: 0 for b in BROKERS}
        self.fenced: set[int] = set()
        self.unclean_shutdown: int | None = None  # the broker whose unclean shutdown is being applied
        self.version = 0  # the metadata offset: brokers apply only newer images
        self.elr_min_isr = MIN_ISR if sim.elr else None
        self.lost_from: dict[int, int] = {}  # what each broker's current incarnation lost in its kill

    @property
    def live(self) -> list[int]:
        return [b for b in BROKERS if b not in self.fenced]

    def elr_kw(self) -> dict[str, int]:
        """The ELR argument of the controller's rules: only with ELR on (the broken variants that
        replace a rule take the rule's arguments without ELR)."""
        return {} if self.elr_min_isr is None else {"elr_min_isr": self.elr_min_isr}

    def start(self) -> None:
        self.sim.at(10, self.tick)
        if self.sim.elections:
            self.balance_interval = self.sim.rng.choice([50, 150, 400])
            self.sim.at(self.balance_interval, self.balance)

    def tick(self) -> None:
        for b in BROKERS:
            if b not in self.fenced and self.sim.now - self.last_heartbeat[b] > SESSION_TIMEOUT_MS:
                self.fence(b)
        self.broadcast()
        self.sim.at(self.sim.now + 25, self.tick)

    def elect_preferred(self) -> None:
        """ElectLeaders PREFERRED for the partition (partition_change, as the controller runs it)."""
        old = self.reg
        err, reg = pc.elect_preferred(old, live=self.live, **self.elr_kw())
        if err == ErrorCode.none:
            self.check_election(old, reg)
        self.update(reg)

    def balance(self) -> None:
        """The automatic rebalance: ReplicationControlManager decides on an image of this cluster."""
        records, _ = REPLICATION.balance_leaders(self.image(), percentage=10)
        if records:
            old = self.reg
            err, reg = pc.elect_preferred(old, live=self.live)
            if err != ErrorCode.none or [reg.leader] != [r.leader for r in records]:
                self.sim.fail("preferred election", f"rebalance records {records} disagree with the election {err} {reg}")
            self.check_election(old, reg)
            self.update(reg)
        self.sim.at(self.sim.now + self.balance_interval, self.balance)

    def image(self) -> MetadataImage:
        topic = TopicImage("t", TOPIC_ID, {0: self.reg})
        return MetadataImage(
            topics_by_id={TOPIC_ID: topic},
            topics_by_name={"t": topic},
            brokers={
                b: BrokerRegistration(b, "i", (), None, (), epoch=self.incarnation[b], fenced=b in self.fenced)
                for b in BROKERS
            },
        )

    def check_election(self, old: PartitionRegistration, new: PartitionRegistration) -> None:
        if new.leader not in old.isr or new.leader not in self.live:
            self.sim.fail("preferred election", f"chose {new.leader}, not a live member of the ISR {old.isr}")
        if new.leader_epoch != old.leader_epoch + 1 or new.isr != old.isr:
            self.sim.fail("preferred election", f"changed {old} into {new}")
        self.sim.preferred_elections += 1

    def fence(self, b: int) -> None:
        self.fenced.add(b)
        self.version += 1
        self.update(pc.on_broker_fenced(self.reg, b, live=self.live, **self.elr_kw()))

    def update(self, reg: PartitionRegistration) -> None:
        if reg is self.reg:
            return
        old, self.reg = self.reg, reg
        if not reg.isr and not self.sim.elr:
            self.sim.fail("the ISR is never empty", f"{old} became {reg}")
        if reg.leader != NO_LEADER and (reg.leader != old.leader or reg.leader_epoch != old.leader_epoch):
            # From the ELR: no ISR member left alive (this change may be the one emptying the ISR).
            from_elr = self.sim.elr and reg.leader in old.elr and not any(r in self.live for r in old.isr)
            # Kafka's balanced recovery looks at the target ELR: an ELR member that registers after
            # an unclean shutdown leaves it in the same change that elects the last known leader.
            recovery = (self.sim.elr and not old.isr and old.last_known_elr == (reg.leader,)
                        and all(r == self.unclean_shutdown for r in old.elr))
            if (reg.leader not in old.isr and not from_elr and not recovery) or reg.leader not in self.live:
                self.sim.fail(
                    "leader elected from the ISR",
                    f"broker {reg.leader} leads epoch {reg.leader_epoch}; the ISR was {old.isr}, "
                    f"ELR {old.elr}, last known {old.last_known_elr}, live {self.live}",
                )
            self.sim.elr_elections += from_elr
            if recovery:
                # Kafka's balanced recovery: the last leader, which may have lost unflushed
                # records in its kill, leads again (KIP-966's remaining case: a license).
                self.sim.recoveries += 1
                if reg.leader in self.lost_from:
                    self.sim.license(reg.leader, self.lost_from[reg.leader])
        self.version += 1
        self.broadcast()

    def broadcast(self) -> None:
        image = self.image()
        for b in BROKERS:
            self.sim.send(CONTROLLER, b, self.sim.brokers[b].on_metadata, self.version, image)
        self.sim.send(CONTROLLER, PRODUCER, self.sim.producer.on_metadata, self.reg)

    def on_heartbeat(self, b: int, incarnation: int, lost_from: int | None) -> None:
        self.last_heartbeat[b] = self.sim.now
        if incarnation != self.incarnation[b]:
            # A new incarnation registers fenced: the old one leaves every ISR first.
            self.incarnation[b] = incarnation
            self.version += 1
            self.lost_from.pop(b, None)
            if lost_from is not None:
                self.lost_from[b] = lost_from
            if lost_from is not None and self.reg.isr == (b,) and not self.sim.elr:
                self.sim.license(b, lost_from)
            if self.sim.elr:
                # KIP-966: a new incarnation is an unclean shutdown; it leaves the ISR and the ELR.
                self.fenced.add(b)
                self.unclean_shutdown = b
                try:
                    self.update(pc.on_broker_unclean_shutdown(self.reg, b, live=self.live, **self.elr_kw()))
                finally:
                    self.unclean_shutdown = None
            elif b not in self.fenced:
                self.fence(b)
        if b in self.fenced:
            self.fenced.discard(b)
            self.version += 1
            self.update(pc.on_broker_unfenced(self.reg, live=self.live, **self.elr_kw()))
            if self.sim.elections and self.sim.faults and self.sim.rng.random() < 0.5:
                # An operator restores preferred leaders after a restart, often before the
                # returning broker is back in the ISR.
                self.sim.at(self.sim.now + self.sim.rng.randint(1, 100), self.elect_preferred)
        self.sim.send(
            CONTROLLER, b, self.sim.brokers[b].on_heartbeat_response, incarnation, self.version, self.image()
        )

    def on_alter_partition(self, b: int, proposal: IsrProposal) -> None:
        err, reg = pc.alter_partition(
            self.reg,
            leader_id=b,
            leader_epoch=proposal.leader_epoch,
            partition_epoch=proposal.partition_epoch,
            new_isr=proposal.new_isr,
            live=self.live,
            **self.elr_kw(),
        )
        self.update(reg)
        self.sim.send(
            CONTROLLER, b, self.sim.brokers[b].on_alter_partition_response, proposal, err, self.version, self.image()
        )


# ------------------------------------------------------------------ brokers


class SimLogManager:
    """The LogManager's part a ReplicaManager uses here: the broker's one Log, the high-watermark
    checkpoint in memory (it survives a kill: the real one is written atomically)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def read_high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(TP.topic, TP.partition): self.broker.hw_checkpoint}

    def checkpoint_high_watermarks(self, hws: dict[tuple[str, int], int]) -> None:
        self.broker.hw_checkpoint = hws.get((TP.topic, TP.partition), self.broker.hw_checkpoint)

    def get_or_create_log(self, topic: str, partition: int, *, topic_id: str, config: LogConfig) -> Log:
        return self.broker.log

    def future_log(self, key: tuple[str, int]) -> None:
        return None

    def batch_epoch_writes(self, log: Log) -> None:
        """No batches here: every leader epoch is written as it changes."""

    def handle_io_error(self, dir: Path, exc: OSError) -> None:
        raise InvariantViolation(f"seed {self.broker.sim.seed}: broker {self.broker.id}: I/O error on {dir}: {exc!r}")


class AlterPartitionSender:
    """The AlterPartitionManager's part (alter_partition.py): one proposal in flight, resent when
    no answer comes or the controller says retry, dropped when the leadership that made it ends.
    Also where the simulation checks every ISR shrink against the fetches it delivered."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.sent_at: int | None = None

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        b, sim = self.broker, self.broker.sim
        removed = [r for r in partition.isr if r not in proposal.new_isr]
        for r in removed:
            st = b.oracle.get(r)
            if st is not None and sim.now - st.caught_up_ms <= LAG_TIME_MAX_MS:
                sim.fail(
                    "ISR shrink removes only lagging followers",
                    f"leader {b.id} drops {r} from {partition.isr}, caught up {sim.now - st.caught_up_ms} ms ago",
                )
        if removed and sim.settled:
            sim.fail(
                "ISR stable without faults",
                f"leader {b.id} drops {removed} from {partition.isr} after the network healed and the ISR was whole",
            )
        sim.isr_shrinks += bool(removed)
        sim.isr_expands += len(proposal.new_isr) > len(partition.isr)
        self.send(proposal)

    def forget(self, tp: TopicPartition) -> None:
        self.sent_at = None

    def send(self, proposal: IsrProposal) -> None:
        b = self.broker
        self.sent_at = b.sim.now
        b.sim.send(b.id, CONTROLLER, b.sim.controller.on_alter_partition, b.id, proposal)

    def tick(self, ls: LeaderState) -> None:
        if self.sent_at is not None and ls.pending is not None and self.broker.sim.now - self.sent_at > ALTER_TIMEOUT_MS:
            self.send(ls.pending)  # no answer: the same proposal again

    def on_response(self, ls: LeaderState, proposal: IsrProposal, error: ErrorCode) -> None:
        if proposal != ls.pending:
            return  # settled meanwhile, or the answer to an earlier request
        self.sent_at = None
        if error != ErrorCode.none and ls.on_alter_partition_error(error):
            self.send(proposal)


class FollowerFetcher:
    """The ReplicaFetcherManager's part: which leader and epoch this broker fetches from."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.leader: int | None = None
        self.leader_epoch = -1

    def update(self, p: Partition) -> None:
        if p.is_leader or p.leader < 0 or p.leader == self.broker.id or p.offline:
            self.remove(p.tp)
            return
        if (self.leader, self.leader_epoch) != (p.leader, p.leader_epoch):
            self.leader, self.leader_epoch = p.leader, p.leader_epoch
            self.broker.fetch_sent_at = None

    def remove(self, tp: TopicPartition) -> None:
        self.leader = None


class Broker:
    def __init__(self, sim: Sim, broker_id: int) -> None:
        self.sim = sim
        self.id = broker_id
        self.alive = True
        self.incarnation = 0
        self.dir = sim.root / f"broker-{broker_id}" / "t-0"
        self.config = LogConfig(segment_bytes=sim.segment_bytes, segment_index_bytes=4096)
        self.log = Log.open(
            self.dir, self.config, topic_id=TOPIC_ID, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=0
        )
        self.hw_checkpoint = 0
        self.recovery_checkpoint = 0
        self.lost_from: int | None = None  # sticky until the controller hears of this incarnation
        self.last_leader_hw: dict[int, int] = {}
        self.checked_upto = 0
        self._new_incarnation()

    def _new_incarnation(self) -> None:
        self.rm = ReplicaManager(node_id=self.id, log_manager=SimLogManager(self), now_ms=lambda: self.sim.now)  # type: ignore[arg-type]
        self.alter = AlterPartitionSender(self)
        self.fetcher = FollowerFetcher(self)
        self.rm.alter_partition = self.alter  # type: ignore[assignment]
        self.rm.fetchers = self.fetcher
        self.image = MetadataImage()
        self.rm.metadata = lambda: self.image
        self.rm._read_all = self._observed_read_all(self.rm._read_all)  # type: ignore[method-assign]
        self.loop = SimLoop(self.sim, self)
        self.version = -1
        self.registered = False  # metadata is applied only once the controller has this incarnation
        self.fetch_sent_at: int | None = None
        self.oracle: dict[int, CatchUp] = {}
        self.oracle_state: LeaderState | None = None

    @property
    def partition(self) -> Partition | None:
        return self.rm.partitions.get(TP)

    def start(self) -> None:
        self.sim.at(self.sim.now + self.sim.rng.randint(1, 10), self.tick)

    def kill(self) -> None:
        self.alive = False
        if self.sim.rng.random() < 0.5:
            self.rm.checkpoint_high_watermarks()  # the periodic checkpoint had just run
        rp, leo = self.log.recovery_point, self.log.log_end_offset
        self.log.close()
        crash_log_dir(self.dir, rp, self.sim.rng)
        if rp < leo:
            self.lost_from = rp if self.lost_from is None else min(self.lost_from, rp)
        # The recovery-point checkpoint the LogManager wrote last: this one, or one long ago.
        self.recovery_checkpoint = rp if self.sim.rng.random() < 0.5 else 0

    def restart(self) -> None:
        self.alive = True
        self.incarnation += 1
        self.log = Log.open(
            self.dir,
            self.config,
            topic_id=TOPIC_ID,
            recovery_point=self.recovery_checkpoint,
            log_start_offset=0,
            clean_shutdown=False,
            now_ms=self.sim.now,
        )
        self._new_incarnation()
        self.checked_upto = min(self.checked_upto, self.log.log_end_offset)
        self.start()

    def tick(self) -> None:
        if not self.alive:
            return
        sim = self.sim
        sim.send(self.id, CONTROLLER, sim.controller.on_heartbeat, self.id, self.incarnation, self.lost_from)
        if sim.rng.random() < 0.3:
            self.log.flush()
        if sim.rng.random() < 0.5:
            self.rm.checkpoint_high_watermarks()
        if self.fetch_sent_at is not None and sim.now - self.fetch_sent_at > FETCH_TIMEOUT_MS + sim.fetch_wait_ms:
            self.fetch_sent_at = None
        p = self.partition
        if p is not None and p.leader_state is not None:
            self.alter.tick(p.leader_state)
            self.rm.shrink_isrs(replica_lag_time_max_ms=LAG_TIME_MAX_MS)
        else:
            self.maybe_fetch()
        sim.at(sim.now + HEARTBEAT_MS // 2 + sim.rng.randint(0, 5), self.tick)

    def maybe_fetch(self) -> None:
        p = self.partition
        if p is None or p.is_leader or self.fetcher.leader is None or self.fetch_sent_at is not None:
            return
        self.fetch_sent_at = self.sim.now
        leader = self.sim.brokers[self.fetcher.leader]
        self.sim.send(
            self.id, leader.id, leader.on_fetch, self.id, self.incarnation, self.fetcher.leader_epoch, fetch_position(p)
        )

    # metadata
    def on_heartbeat_response(self, incarnation: int, version: int, image: MetadataImage) -> None:
        if incarnation == self.incarnation:
            self.registered = True
            self.lost_from = None
            self.on_metadata(version, image)

    def on_metadata(self, version: int, image: MetadataImage) -> None:
        # Kafka's broker installs its metadata publishers only after its registration is
        # caught up, so the first state it acts on already fenced its previous incarnation.
        if not self.registered or version <= self.version:
            return
        self.version = version
        self.image = image
        reg = image.topics_by_name["t"].partitions[0]
        self.rm.apply_partition(
            TP, topic_id=TOPIC_ID, registration=reg, config=self.config, min_insync_replicas=MIN_ISR
        )

    def on_alter_partition_response(self, proposal: IsrProposal, error: ErrorCode, version: int, image: MetadataImage) -> None:
        self.on_metadata(version, image)
        p = self.partition
        if p is not None and p.leader_state is not None:
            self.alter.on_response(p.leader_state, proposal, error)

    # produce
    def on_produce(self, request_id: int, value: str) -> None:
        batch = build_batch([(self.sim.now, None, value.encode())])

        def respond(out: dict[TopicPartition, PartitionResponse]) -> None:
            r = out[TP]
            if r.error != ErrorCode.none:
                self.sim.send(self.id, PRODUCER, self.sim.producer.on_error, request_id)
            else:
                self.acknowledge(request_id, r.base_offset, value)

        with self.loop.running():
            self.rm.append_records(
                [(TP, batch)], required_acks=-1, timeout_s=ACKS_TIMEOUT_MS / 1000, respond=respond
            )

    def acknowledge(self, request_id: int, offset: int, value: str) -> None:
        """An acks=all answer leaves the leader: the record must be committed now."""
        p = self.partition
        if p is None or p.high_watermark <= offset:
            hw = None if p is None else p.high_watermark
            self.sim.fail(
                "acks=all acknowledged below the high watermark",
                f"leader {self.id} acknowledges {value} at {offset} with its high watermark at {hw}",
            )
        assert p is not None
        batches = list(read_batches(p.log, offset, offset + 1))
        if not batches or batch_values(batches[0][1]) != [value]:
            held = describe(batches[0][1]) if batches else "nothing"
            self.sim.fail("acks=all acknowledged below the high watermark", f"leader {self.id} acknowledges {value} at {offset} holding {held}")
        self.sim.send(self.id, PRODUCER, self.sim.producer.on_ack, request_id, offset, value, batches[0][1])

    # replication: the leader's side
    def on_fetch(self, follower: int, follower_incarnation: int, leader_epoch: int, pos: FetchPosition) -> None:
        fp = FetchRequestPartition(
            pos.fetch_offset, MAX_FETCH_BYTES, leader_epoch, pos.last_fetched_epoch, pos.log_start_offset
        )
        params = FetchParams(
            replica_id=follower, replica_epoch=follower_incarnation, max_wait_ms=self.sim.fetch_wait_ms
        )
        src = self.sim.brokers[follower]

        def respond(results: list[FetchPartitionData]) -> None:
            r = results[0]
            div = None if r.diverging_epoch is None else DivergingEpoch(*r.diverging_epoch)
            answer = FetchResponsePartition(r.error.value, r.high_watermark, r.log_start_offset, div, bytes(r.records))
            self.sim.send(self.id, follower, src.on_fetch_response, leader_epoch, pos, answer)

        with self.loop.running():
            self.rm.fetch_messages(params, [(TP, fp)], respond)

    def _observed_read_all(self, read_all: Callable[..., Any]) -> Callable[..., Any]:
        """ReplicaManager._read_all, watched: every read for a follower (the first, and each of a
        parked DelayedFetch) is a fetch the leader counts, so the ISR oracle sees each one."""

        def read(params: FetchParams, fetch_infos: Any, **kwargs: Any) -> Any:
            p = self.partition
            leo = None if p is None or p.leader_state is None else p.log_end_offset
            if p is not None and p.leader_state is not None and p.leader_state is not self.oracle_state:
                self.reset_oracle(p.leader_state)  # it began in this event
            out = read_all(params, fetch_infos, **kwargs)
            if leo is not None and params.is_from_follower and not kwargs.get("stale_replica"):
                r = out[0][0]
                if r.error == ErrorCode.none and r.diverging_epoch is None:
                    self.observe_follower_fetch(params.replica_id, fetch_infos[0][1].fetch_offset, leo)
            return out

        return read

    def reset_oracle(self, ls: LeaderState) -> None:
        """A new leadership: every ISR member counts as caught up now (Kafka's makeLeader)."""
        self.oracle_state = ls
        self.oracle = {r: CatchUp(self.sim.now if r in ls.registration.isr else 0) for r in BROKERS if r != self.id}

    def observe_follower_fetch(self, follower: int, fetch_offset: int, leader_leo: int) -> None:
        """Kafka's lastCaughtUpTime rule, from the fetches delivered: caught up now if the fetch
        reached the leader's log end, or at the previous fetch if it reached the log end then."""
        st = self.oracle.get(follower)
        if st is None:
            return
        now = self.sim.now
        if fetch_offset >= leader_leo:
            st.caught_up_ms = max(st.caught_up_ms, now)
            st.fetched_caught_up_ms = now
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.caught_up_ms = max(st.caught_up_ms, st.last_fetch_ms)
            st.fetched_caught_up_ms = max(st.fetched_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now

    # replication: the follower's side
    def on_fetch_response(self, leader_epoch: int, pos: FetchPosition, answer: FetchResponsePartition) -> None:
        self.fetch_sent_at = None
        p = self.partition
        if p is None or self.fetcher.leader is None:
            return
        if not answer_is_current(
            p, fetch_offset=pos.fetch_offset, sent_leader_epoch=leader_epoch, leader_epoch=self.fetcher.leader_epoch
        ):
            return  # a stale or duplicated answer
        before = (p.log_end_offset, p.last_fetched_epoch)
        try:
            applied = apply_partition_response(p, answer, pos.fetch_offset, now_ms=self.sim.now)
        except PartitionError:
            return  # fetched again at the next tick
        # Judged only when the answer is for the position the follower still has: a duplicated
        # answer may find the first copy's truncation done (an empty epoch entry gone).
        asked = (pos.fetch_offset, pos.last_fetched_epoch)
        if (
            applied is FetchApplied.TRUNCATED_ON_DIVERGENCE
            and before == asked
            and (p.log_end_offset, p.last_fetched_epoch) >= before
        ):
            self.sim.fail(
                "follower truncates on a diverging epoch",
                f"broker {self.id} told {answer.diverging_epoch} still ends at {before[0]} in epoch {before[1]}",
            )
        if self.sim.fetch_wait_ms and applied is not FetchApplied.NOT_APPLIED:
            self.maybe_fetch()  # the fetcher's loop: the next request at once, the leader long-polls it


# ------------------------------------------------------------------ the producer


class Producer:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.leader = BROKERS[0]
        self.next_id = 0
        self.inflight: dict[int, str] = {}
        self.acked: dict[int, tuple[str, bytes]] = {}
        self.running = True

    def start(self) -> None:
        self.sim.at(5, self.tick)

    def stop(self) -> None:
        self.running = False

    def on_metadata(self, reg: PartitionRegistration) -> None:
        if reg.leader != NO_LEADER:
            self.leader = reg.leader

    def tick(self) -> None:
        if not self.running:
            return
        self.next_id += 1
        value = f"r{self.next_id}"
        self.inflight[self.next_id] = value
        b = self.sim.brokers[self.leader]
        self.sim.send(PRODUCER, self.leader, b.on_produce, self.next_id, value)
        self.sim.at(self.sim.now + self.sim.rng.randint(2, 15), self.tick)

    def on_ack(self, request_id: int, offset: int, value: str, batch: bytes) -> None:
        self.inflight.pop(request_id, None)
        prior = self.acked.get(offset)
        if prior is not None and prior[0] != value:
            if not self.sim.licensed(offset):
                self.sim.fail("acknowledged records survive", f"offset {offset} acknowledged twice: {prior[0]} and {value}")
            self.sim.lost_acked.append(offset)  # the earlier one is gone: a new leader reused its offset
        self.acked[offset] = (value, batch)
        committed = self.sim.committed.get(offset)
        if committed is not None and committed != batch and not (
            self.sim.licensed(offset) and batch in self.sim.superseded.get(offset, ())
        ):
            self.sim.fail("committed bytes identical", f"acknowledged {describe(batch)} at {offset}, committed there is {describe(committed)}")

    def on_error(self, request_id: int) -> None:
        self.inflight.pop(request_id, None)


# ------------------------------------------------------------------ running a seed


REPLICATION = ReplicationControlManager(build_config({"node.id": "1"}), new_uuid=lambda: "t")


def run_seed(seed: int, duration_ms: int = 1500, *, elections: bool = False, elr: bool = False) -> Sim:
    root = Path(tempfile.mkdtemp(prefix="kavka-replsim-", dir=SIM_ROOT))
    try:
        sim = Sim(seed, duration_ms=duration_ms, elections=elections, elr=elr, root=root)
        try:
            sim.run()
        finally:
            for b in sim.brokers.values():
                if b.alive:
                    b.log.close()
        return sim
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ broken variants
#
# Each is a deliberately broken version of production code, patched in where the broker has it,
# and the invariant that must catch it. tests/simulation/test_replication_simulation.py asserts
# the simulation fails for each within a few seeds, naming that invariant.


def _shrink_on_any_lag(self: LeaderState, *, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
    """ISR flapping on offsets: a follower is out of sync as soon as its last fetch was behind the leader's
    log end (a lag in offsets, not replica.lag.time.max.ms), so the ISR shrinks and grows back."""
    if self.pending is not None:
        return None
    out_of_sync = [
        r
        for r in self.registration.isr
        if r != self.local_id and self.remotes[r].log_end_offset < self.remotes[r].last_fetch_leader_log_end_offset
    ]
    if not out_of_sync:
        return None
    return self._propose(tuple(r for r in self.registration.isr if r not in out_of_sync))


def _shrink_too_soon(self: LeaderState, *, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
    """ISR flapping: the lag condition uses a tenth of replica.lag.time.max.ms, so followers that
    are merely between fetches are dropped and added back (some nine times as many changes)."""
    if self.pending is not None:
        return None
    out_of_sync = [
        r
        for r in self.registration.isr
        if r != self.local_id and now_ms - self.remotes[r].last_caught_up_ms > replica_lag_time_max_ms // 10
    ]
    if not out_of_sync:
        return None
    return self._propose(tuple(r for r in self.registration.isr if r not in out_of_sync))


def _acks_at_log_end(self: Partition, required_offset: int) -> ErrorCode | None:
    """acks=all answered once the leader's log end (not its high watermark) passes the batch."""
    ls = self.leader_state
    if ls is None or self.offline:
        return ErrorCode.not_leader_or_follower
    if self.log.log_end_offset < required_offset:
        return None
    if len(ls.maximal_isr) < self.min_insync_replicas:
        return ErrorCode.not_enough_replicas_after_append
    return ErrorCode.none


def _follower_hw_uncapped(self: Partition, *, leader_high_watermark: int, leader_log_start_offset: int) -> None:
    """The follower takes the leader's high watermark without capping it by its own log end."""
    if self.leader_state is not None:
        return
    self._leader_hw_seen = True
    self._leader_hw = leader_high_watermark
    hw = max(leader_high_watermark, self.log.log_start_offset)
    if hw != self._follower_hw:
        self._follower_hw = hw
        self.on_change(self.tp)


def _never_truncate(self: Partition, diverging: DivergingEpoch, *, now_ms: int) -> int:
    """The follower ignores a diverging epoch and keeps its suffix."""
    return self.log.log_end_offset


def _elect_outside_isr(reg: PartitionRegistration, *, live: Any, unclean: bool = False) -> PartitionRegistration:
    """The controller elects any live replica, in the ISR or not (it joins the ISR)."""
    if reg.leader != NO_LEADER and reg.leader in live:
        return reg
    for r in reg.replicas:
        if r in live:
            return pc._change(reg, leader=r, isr=reg.isr if r in reg.isr else reg.isr + (r,))
    return pc._change(reg, leader=NO_LEADER, isr=reg.isr)


def _fence_empties_isr(reg: PartitionRegistration, broker: int, *, live: Any, unclean: bool = False) -> PartitionRegistration:
    """A fenced broker leaves the ISR even as its last member."""
    reg = pc._change(reg, leader=reg.leader, isr=tuple(r for r in reg.isr if r != broker))
    return pc.elect_leader(reg, live=[b for b in live if b != broker], unclean=unclean)


def _unclean_shutdown_stays_eligible(
    reg: PartitionRegistration, broker: int, *, live: Any, unclean: bool = False, elr_min_isr: int | None = None
) -> PartitionRegistration:
    """A new incarnation (an unclean shutdown) is handled as a fencing only: it stays in the ELR and
    may be elected with the records its kill lost missing."""
    return pc.on_broker_fenced(reg, broker, live=live, unclean=unclean, elr_min_isr=elr_min_isr)


def _hw_past_lagging_member(self: LeaderState, log_end_offset: int) -> bool:
    """The high watermark follows the furthest ISR follower instead of the one furthest behind."""
    positions = [
        self.remotes[r].log_end_offset
        for r in self.maximal_isr
        if r != self.local_id and r in self.remotes and self.remotes[r].log_end_offset >= 0
    ]
    if not positions:
        return False
    new_hw = min(log_end_offset, max(positions))
    if new_hw > self.high_watermark:
        self.high_watermark = new_hw
        return True
    return False


def _no_diverging_epoch(*args: object, **kwargs: object) -> None:
    """The leader skips the KIP-320 check: a diverging follower keeps its suffix."""
    return None


@dataclass(frozen=True, slots=True)
class BrokenVariant:
    """A named broken behaviour: `patches` are (owner, attribute, replacement) in production code;
    `invariant` is the check that must fire."""

    patches: tuple[tuple[object, str, object], ...]
    invariant: str
    elr: bool = False  # run with ELR on (KIP-966)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        saved = [(owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name))
                 for owner, name, _ in self.patches]
        try:
            for owner, name, replacement in self.patches:
                setattr(owner, name, replacement)
            yield
        finally:
            for owner, name, original in saved:
                setattr(owner, name, original)


def _broken_variants() -> dict[str, BrokenVariant]:
    import kavka.replication.partition as partition_module

    return {
        "isr flapping": BrokenVariant(
            ((LeaderState, "maybe_shrink_isr", _shrink_too_soon),), "ISR shrink removes only lagging followers"
        ),
        "isr flapping on offset lag": BrokenVariant(
            ((LeaderState, "maybe_shrink_isr", _shrink_on_any_lag),), "ISR shrink removes only lagging followers"
        ),
        "acks=all at the log end": BrokenVariant(
            ((Partition, "acks_all_state", _acks_at_log_end),), "acks=all acknowledged below the high watermark"
        ),
        "follower high watermark uncapped": BrokenVariant(
            ((Partition, "update_follower_state", _follower_hw_uncapped),), "high watermark <= log end offset"
        ),
        "follower never truncates": BrokenVariant(
            ((Partition, "truncate_on_divergence", _never_truncate),), "follower truncates on a diverging epoch"
        ),
        "elect outside the ISR": BrokenVariant(((pc, "elect_leader", _elect_outside_isr),), "leader elected from the ISR"),
        "fencing empties the ISR": BrokenVariant(
            ((pc, "on_broker_fenced", _fence_empties_isr),), "the ISR is never empty"
        ),
        "high watermark past a lagging ISR member": BrokenVariant(
            ((LeaderState, "maybe_increment_high_watermark", _hw_past_lagging_member),), "committed bytes identical"
        ),
        "unclean shutdown stays in the ELR": BrokenVariant(
            ((pc, "on_broker_unclean_shutdown", _unclean_shutdown_stays_eligible),), "committed bytes identical", elr=True
        ),
        "no diverging-epoch check": BrokenVariant(
            ((partition_module, "diverging_epoch", _no_diverging_epoch),), "committed bytes identical"
        ),
    }


BROKEN_VARIANTS = _broken_variants()
