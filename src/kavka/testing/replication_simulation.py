"""Seeded simulation of partition replication: leader, followers and the controller's election rules.

Three brokers host one partition (RF=3, min.insync.replicas=2) and run the pure replication core
(`replication.replica_state`) with the controller's rules (`controller.partition_change`): the
controller fences a broker whose heartbeats stop, elects leaders from the ISR and commits
AlterPartition proposals; followers fetch with their last fetched epoch and truncate on a
diverging epoch; a producer sends acks=all records to whoever it believes leads. Messages go
through a seeded network that delays, drops, duplicates and partitions; brokers are killed hard,
losing whatever they had not flushed, and restarted as new incarnations.

Checked after every event:
- at most one leader per leader epoch;
- a leader's high watermark never goes backwards within its epoch;
- below its high watermark every broker holds the same record at the same offset (one global
  map of committed offsets, filled and checked as each broker's high watermark moves);
- every acknowledged record is at its offset in that map.
And at the end, once faults stop and the network heals: one leader, every replica in the ISR,
every log identical, and every acknowledged record present.

With `elections=True` the controller also runs preferred-leader elections: ElectLeaders PREFERRED
at random moments (an operator's `kavka leader-election`) and the automatic rebalance
(`ReplicationControlManager.balance_leaders`, leader.imbalance.per.broker.percentage=10) on a seeded
interval -- leadership moves while the old leader is alive and taking writes. Each election must
pick a live ISR member, and every check above must still hold: no committed record is lost.

The one loss Kafka's design allows -- a replica that was the last ISR member loses unflushed
records in a hard kill and leads again on return (what KIP-966 addresses) -- is detected when it
happens; the safety checks stop for that seed and the run is counted. A failing seed says what failed
and replays exactly: `run_seed(seed)` (with `elections=True` for the election runs). The tests are
in tests/simulation/test_replication_simulation.py. Used by tests only.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kavka.config import build_config
from kavka.controller import partition_change as pc
from kavka.controller.replication_control import ReplicationControlManager
from kavka.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    TopicImage,
)
from kavka.metadata.image import (
    PartitionRegistration as ImagePartition,
)
from kavka.replication.replica_state import (
    NO_LEADER,
    DivergingEpoch,
    LeaderState,
    PartitionRegistration,
    diverging_epoch,
    truncation_offset,
)
from kavka.storage.leader_epoch import UNDEFINED_EPOCH, LeaderEpochFileCache

CONTROLLER = -1
BROKERS = (1, 2, 3)
MIN_ISR = 2
SESSION_TIMEOUT_MS = 120
HEARTBEAT_MS = 20
LAG_TIME_MAX_MS = 150
FETCH_TIMEOUT_MS = 60
ALTER_TIMEOUT_MS = 100
MAX_FETCH_RECORDS = 32


class InvariantViolation(AssertionError):
    pass


# ------------------------------------------------------------------ the log


class MemoryLog:
    """A log of (epoch, value) records whose unflushed tail a hard kill loses."""

    def __init__(self) -> None:
        self.records: list[tuple[int, str]] = []
        self.flushed = 0
        self.cache = LeaderEpochFileCache(None)

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    @property
    def latest_epoch(self) -> int:
        epoch = self.cache.latest_epoch
        return UNDEFINED_EPOCH if epoch is None else epoch

    def append(self, records: list[tuple[int, str]]) -> None:
        for epoch, value in records:
            self.cache.assign(epoch, len(self.records))
            self.records.append((epoch, value))

    def truncate_to(self, offset: int) -> None:
        del self.records[offset:]
        # Always, as Kafka's UnifiedLog.truncateTo: a leader that took an epoch and appended
        # nothing in it leaves an entry at the log end that must go when it follows.
        self.cache.truncate_from_end(offset)
        self.flushed = min(self.flushed, len(self.records))

    def flush(self) -> None:
        self.flushed = len(self.records)

    def crash(self) -> bool:
        """Lose the unflushed tail; True when something was lost."""
        lost = self.flushed < len(self.records)
        self.truncate_to(self.flushed)
        return lost


# ------------------------------------------------------------------ the network


@dataclass(order=True)
class Event:
    at: int
    seq: int
    action: object = field(compare=False)


class Sim:
    def __init__(self, seed: int, *, duration_ms: int, elections: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.elections = elections
        self.preferred_elections = 0  # leader changes made by ElectLeaders or the rebalance
        self.now = 0
        self.duration_ms = duration_ms
        self._queue: list[Event] = []
        self._seq = 0
        self.drop_p = self.rng.choice([0.0, 0.02, 0.1])
        self.dup_p = self.rng.choice([0.0, 0.02])
        self.max_delay = self.rng.choice([2, 8, 20])
        self.cut: set[frozenset[int]] = set()  # pairs that cannot talk
        self.faults = True
        self.controller = Controller(self)
        self.brokers = {b: Broker(self, b) for b in BROKERS}
        self.producer = Producer(self)
        self.converged = False  # set once healed and settled: the run ends there
        self.licensed_loss = False  # the KIP-966 case happened: safety checks end for this seed
        self.committed: dict[int, tuple[int, str]] = {}
        self.leader_of_epoch: dict[int, int] = {}
        self.events = 0

    # scheduling
    def at(self, when: int, action) -> None:  # noqa: ANN001
        self._seq += 1
        heapq.heappush(self._queue, Event(when, self._seq, action))

    def send(self, src: int, dst: int, handler, *args) -> None:  # noqa: ANN001
        """Deliver `handler(*args)` at `dst` after a random delay, unless dropped or cut off.
        A message outlives neither side's incarnation (a restart breaks the connection)."""
        if frozenset((src, dst)) in self.cut or self.rng.random() < self.drop_p:
            return
        src_inc = self.incarnation(src)
        dst_inc = self.incarnation(dst)
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
        if node == CONTROLLER or node == 0:
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
        while self._queue and self._queue[0].at <= end and not self.converged:
            ev = heapq.heappop(self._queue)
            self.now = ev.at
            ev.action()  # type: ignore[operator]
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
        if (
            reg.leader != NO_LEADER
            and sorted(reg.isr) == sorted(BROKERS)
            and all(b.reg == reg for b in self.brokers.values())
            and len({(b.log.log_end_offset, b.high_watermark) for b in self.brokers.values()}) == 1
            and all(b.log.log_end_offset == b.high_watermark for b in self.brokers.values())
        ):
            self.converged = True
        else:
            self.at(self.now + 50, self.poll_converged)

    # invariants
    def fail(self, what: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at {self.now} ms: {what}")

    def check(self) -> None:
        for b in self.brokers.values():
            if not b.alive:
                continue
            ls = b.leader_state
            if ls is not None:
                owner = self.leader_of_epoch.setdefault(ls.leader_epoch, b.id)
                if owner != b.id:
                    self.fail(f"brokers {owner} and {b.id} both led epoch {ls.leader_epoch}")
                if ls.high_watermark < b.last_leader_hw.get(ls.leader_epoch, 0):
                    self.fail(f"leader {b.id} high watermark went back in epoch {ls.leader_epoch}")
                b.last_leader_hw[ls.leader_epoch] = ls.high_watermark
            if self.licensed_loss:
                continue
            hw = b.high_watermark
            if hw > b.log.log_end_offset:
                self.fail(
                    f"broker {b.id} high watermark {hw} above its log end {b.log.log_end_offset}"
                )
            for o in range(b.checked_upto, hw):
                rec = b.log.records[o]
                seen = self.committed.setdefault(o, rec)
                if seen != rec:
                    self.fail(
                        f"broker {b.id} has {rec} at committed offset {o}, others have {seen}"
                    )
            b.checked_upto = max(b.checked_upto, hw)

    def check_converged(self) -> None:
        regs = self.controller.reg
        if regs.leader == NO_LEADER:
            self.fail(f"no leader after healing: {regs}")
        if sorted(regs.isr) != sorted(BROKERS):
            self.fail(f"ISR {regs.isr} not whole after healing")
        logs = {b.id: b.log.records for b in self.brokers.values()}
        first = logs[regs.leader]
        for bid, recs in logs.items():
            if recs != first:
                self.fail(f"log of broker {bid} differs from the leader's after healing")
            if self.brokers[bid].high_watermark != len(first):
                self.fail(
                    f"broker {bid} high watermark {self.brokers[bid].high_watermark} != {len(first)}"
                )
        if self.licensed_loss:
            return
        for offset, value in self.producer.acked.items():
            if offset >= len(first) or first[offset][1] != value:
                self.fail(f"acknowledged record {value} at offset {offset} lost")


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

    @property
    def live(self) -> list[int]:
        return [b for b in BROKERS if b not in self.fenced]

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
        err, reg = pc.elect_preferred(old, live=self.live)
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
                self.sim.fail(f"rebalance records {records} disagree with the election {err} {reg}")
            self.check_election(old, reg)
            self.update(reg)
        self.sim.at(self.sim.now + self.balance_interval, self.balance)

    def image(self) -> MetadataImage:
        reg = self.reg
        part = ImagePartition(0, reg.replicas, reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch)
        return MetadataImage(
            topics_by_id={"t": TopicImage("t", "t", {0: part})},
            topics_by_name={"t": TopicImage("t", "t", {0: part})},
            brokers={
                b: BrokerRegistration(b, "i", (), None, (), epoch=0, fenced=b in self.fenced) for b in BROKERS
            },
        )

    def check_election(self, old: PartitionRegistration, new: PartitionRegistration) -> None:
        if new.leader not in old.isr or new.leader not in self.live:
            self.sim.fail(f"preferred election chose {new.leader}, not a live member of the ISR {old.isr}")
        if new.leader_epoch != old.leader_epoch + 1 or new.isr != old.isr:
            self.sim.fail(f"preferred election changed {old} into {new}")
        self.sim.preferred_elections += 1

    def fence(self, b: int) -> None:
        self.fenced.add(b)
        self.update(pc.on_broker_fenced(self.reg, b, live=self.live))

    def update(self, reg: PartitionRegistration) -> None:
        if reg is not self.reg:
            self.reg = reg
            self.broadcast()

    def broadcast(self) -> None:
        for b in BROKERS:
            self.sim.send(CONTROLLER, b, self.sim.brokers[b].on_metadata, self.reg)
        self.sim.send(CONTROLLER, 0, self.sim.producer.on_metadata, self.reg)

    def on_heartbeat(self, b: int, incarnation: int, lost_data: bool) -> None:
        self.last_heartbeat[b] = self.sim.now
        if incarnation != self.incarnation[b]:
            # A new incarnation registers fenced: the old one leaves every ISR first.
            self.incarnation[b] = incarnation
            if lost_data and self.reg.isr == (b,):
                self.sim.licensed_loss = True
            if b not in self.fenced:
                self.fence(b)
        if b in self.fenced:
            self.fenced.discard(b)
            self.update(pc.on_broker_unfenced(self.reg, live=self.live))
        self.sim.send(
            CONTROLLER, b, self.sim.brokers[b].on_heartbeat_response, incarnation, self.reg
        )

    def on_alter_partition(self, b: int, proposal) -> None:  # noqa: ANN001
        err, reg = pc.alter_partition(
            self.reg,
            leader_id=b,
            leader_epoch=proposal.leader_epoch,
            partition_epoch=proposal.partition_epoch,
            new_isr=proposal.new_isr,
            live=self.live,
        )
        self.update(reg)
        self.sim.send(
            CONTROLLER, b, self.sim.brokers[b].on_alter_partition_response, proposal, err.value, reg
        )


# ------------------------------------------------------------------ brokers


class Broker:
    def __init__(self, sim: Sim, broker_id: int) -> None:
        self.sim = sim
        self.id = broker_id
        self.alive = True
        self.incarnation = 0
        self.lost_data = False
        self.log = MemoryLog()
        self.hw_checkpoint = 0
        self.follower_hw = 0
        self.reg: PartitionRegistration | None = None
        self.registered = False  # metadata is applied only once the controller has this incarnation
        self.leader_state: LeaderState | None = None
        self.fetch_sent_at: int | None = None
        self.alter_sent_at: int | None = None
        self.pending_acks: list[tuple[int, str, int]] = []  # (offset, value, request id)
        self.last_leader_hw: dict[int, int] = {}
        self.checked_upto = 0

    @property
    def high_watermark(self) -> int:
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        return self.follower_hw

    def start(self) -> None:
        self.sim.at(self.sim.now + self.sim.rng.randint(1, 10), self.tick)

    def kill(self) -> None:
        self.alive = False
        self.hw_checkpoint = (
            self.high_watermark if self.sim.rng.random() < 0.5 else self.hw_checkpoint
        )
        # Sticky until the controller hears of this incarnation: a second kill before it
        # registered loses nothing more, but the first loss still counts.
        self.lost_data = self.log.crash() or self.lost_data
        self.leader_state = None
        self.reg = None
        self.registered = False
        self.pending_acks = []
        self.fetch_sent_at = self.alter_sent_at = None

    def restart(self) -> None:
        self.alive = True
        self.incarnation += 1
        self.follower_hw = min(self.hw_checkpoint, self.log.log_end_offset)
        self.checked_upto = min(self.checked_upto, self.follower_hw)
        self.start()

    def tick(self) -> None:
        if not self.alive:
            return
        sim = self.sim
        sim.send(
            self.id,
            CONTROLLER,
            sim.controller.on_heartbeat,
            self.id,
            self.incarnation,
            self.lost_data,
        )
        if sim.rng.random() < 0.3:
            self.log.flush()
        if self.fetch_sent_at is not None and sim.now - self.fetch_sent_at > FETCH_TIMEOUT_MS:
            self.fetch_sent_at = None
        ls = self.leader_state
        if ls is not None:
            if self.alter_sent_at is not None and sim.now - self.alter_sent_at > ALTER_TIMEOUT_MS:
                self.maybe_send_alter(ls.pending)  # no answer: the same proposal again
            self.maybe_send_alter(
                ls.maybe_shrink_isr(now_ms=sim.now, replica_lag_time_max_ms=LAG_TIME_MAX_MS)
            )
            self.hw_checkpoint = ls.high_watermark
        elif (
            self.reg is not None
            and self.reg.leader not in (NO_LEADER, self.id)
            and self.fetch_sent_at is None
        ):
            self.fetch_sent_at = sim.now
            leader = sim.brokers[self.reg.leader]
            sim.send(
                self.id,
                leader.id,
                leader.on_fetch,
                self.id,
                self.reg.leader_epoch,
                self.log.log_end_offset,
                self.log.latest_epoch,
            )
        sim.at(sim.now + HEARTBEAT_MS // 2 + sim.rng.randint(0, 5), self.tick)

    def maybe_send_alter(self, proposal) -> None:  # noqa: ANN001
        if proposal is not None:
            self.alter_sent_at = self.sim.now
            self.sim.send(
                self.id, CONTROLLER, self.sim.controller.on_alter_partition, self.id, proposal
            )

    # metadata
    def on_heartbeat_response(self, incarnation: int, reg: PartitionRegistration) -> None:
        if incarnation == self.incarnation:
            self.registered = True
            self.lost_data = False
            self.on_metadata(reg)

    def on_metadata(self, reg: PartitionRegistration) -> None:
        # Kafka's broker installs its metadata publishers only after its registration is
        # caught up, so the first state it acts on already fenced its previous incarnation.
        if not self.registered:
            return
        if self.reg is not None and reg.partition_epoch <= self.reg.partition_epoch:
            return
        self.reg = reg
        ls = self.leader_state
        if ls is not None and ls.on_registration(reg, log_end_offset=self.log.log_end_offset):
            self.complete_acks()
            return
        if ls is not None or reg.leader != self.id:
            # Leadership ends: waiting acks=all requests fail (NOT_LEADER_OR_FOLLOWER).
            if ls is not None:
                self.follower_hw = ls.high_watermark
            self.leader_state = None
            self.fail_acks()
        if reg.leader == self.id:
            self.log.cache.assign(reg.leader_epoch, self.log.log_end_offset)
            self.leader_state = LeaderState.become_leader(
                self.id,
                reg,
                high_watermark=self.follower_hw,
                log_end_offset=self.log.log_end_offset,
                now_ms=self.sim.now,
            )
            self.leader_state.maybe_increment_high_watermark(self.log.log_end_offset)
            self.alter_sent_at = None

    def on_alter_partition_response(self, proposal, error: int, reg: PartitionRegistration) -> None:  # noqa: ANN001
        ls = self.leader_state
        if ls is None:
            return
        if proposal is not ls.pending:
            # The answer to an earlier request (late or duplicated): only its metadata counts.
            self.on_metadata(reg)
            return
        self.alter_sent_at = None
        if error and ls.on_alter_partition_error(ErrorCode(error)):
            self.maybe_send_alter(ls.pending)
        self.on_metadata(reg)

    # produce
    def on_produce(self, request_id: int, value: str) -> None:
        ls = self.leader_state
        if ls is None:
            self.sim.send(self.id, 0, self.sim.producer.on_error, request_id)
            return
        if len(ls.registration.isr) < MIN_ISR:
            self.sim.send(self.id, 0, self.sim.producer.on_error, request_id)  # NOT_ENOUGH_REPLICAS
            return
        offset = self.log.log_end_offset
        self.log.append([(ls.leader_epoch, value)])
        self.pending_acks.append((offset, value, request_id))
        ls.maybe_increment_high_watermark(self.log.log_end_offset)
        self.complete_acks()

    def complete_acks(self) -> None:
        ls = self.leader_state
        if ls is None:
            return
        done = [a for a in self.pending_acks if a[0] < ls.high_watermark]
        if not done:
            return
        self.pending_acks = [a for a in self.pending_acks if a[0] >= ls.high_watermark]
        for offset, value, request_id in done:
            if self.log.records[offset] != (ls.leader_epoch, value):
                self.sim.fail(
                    f"leader {self.id} would ack {value} at {offset} holding {self.log.records[offset]}"
                )
            self.sim.send(self.id, 0, self.sim.producer.on_ack, request_id, offset, value)

    def fail_acks(self) -> None:
        for _, _, request_id in self.pending_acks:
            self.sim.send(self.id, 0, self.sim.producer.on_error, request_id)
        self.pending_acks = []

    # replication
    def on_fetch(
        self, follower: int, leader_epoch: int, fetch_offset: int, last_fetched_epoch: int
    ) -> None:
        ls = self.leader_state
        src = self.sim.brokers[follower]
        if ls is None or leader_epoch != ls.leader_epoch:
            self.sim.send(
                self.id, follower, src.on_fetch_response, leader_epoch, fetch_offset, None, [], 0
            )
            return
        div = diverging_epoch(
            self.log.cache,
            fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch,
            log_end_offset=self.log.log_end_offset,
            log_start_offset=0,
        )
        if div is None and fetch_offset > self.log.log_end_offset:
            div = DivergingEpoch(
                *self.log.cache.end_offset_for(self.log.latest_epoch, self.log.log_end_offset)
            )
        if div is not None:
            self.sim.send(
                self.id,
                follower,
                src.on_fetch_response,
                leader_epoch,
                fetch_offset,
                div,
                [],
                ls.high_watermark,
            )
            return
        self.maybe_send_alter(
            ls.on_follower_fetch(
                follower,
                fetch_offset=fetch_offset,
                now_ms=self.sim.now,
                log_end_offset=self.log.log_end_offset,
            )
        )
        if ls.maybe_increment_high_watermark(self.log.log_end_offset):
            self.complete_acks()
        records = self.log.records[fetch_offset : fetch_offset + MAX_FETCH_RECORDS]
        self.sim.send(
            self.id,
            follower,
            src.on_fetch_response,
            leader_epoch,
            fetch_offset,
            None,
            records,
            ls.high_watermark,
        )

    def on_fetch_response(
        self,
        leader_epoch: int,
        fetch_offset: int,
        div: DivergingEpoch | None,
        records: list,
        leader_hw: int,
    ) -> None:
        self.fetch_sent_at = None
        if (
            self.leader_state is not None
            or self.reg is None
            or self.reg.leader_epoch != leader_epoch
        ):
            return
        if div is not None:
            offset, _ = truncation_offset(
                self.log.cache, div, log_end_offset=self.log.log_end_offset, log_start_offset=0
            )
            self.log.truncate_to(offset)
            self.follower_hw = min(self.follower_hw, self.log.log_end_offset)
            self.checked_upto = min(self.checked_upto, self.follower_hw)
            return
        if fetch_offset != self.log.log_end_offset:
            return  # a stale or duplicated answer
        self.log.append(records)
        new_hw = min(leader_hw, self.log.log_end_offset)
        self.follower_hw = max(self.follower_hw, new_hw)
        if self.sim.rng.random() < 0.5:
            self.hw_checkpoint = self.follower_hw


# ------------------------------------------------------------------ the producer


class Producer:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.leader = BROKERS[0]
        self.next_id = 0
        self.inflight: dict[int, str] = {}
        self.acked: dict[int, str] = {}
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
        self.sim.send(0, self.leader, b.on_produce, self.next_id, value)
        self.sim.at(self.sim.now + self.sim.rng.randint(2, 15), self.tick)

    def on_ack(self, request_id: int, offset: int, value: str) -> None:
        self.inflight.pop(request_id, None)
        prior = self.acked.setdefault(offset, value)
        if prior != value and not self.sim.licensed_loss:
            self.sim.fail(f"offset {offset} acknowledged twice: {prior} and {value}")
        if not self.sim.licensed_loss:
            committed = self.sim.committed.get(offset)
            if committed is not None and committed[1] != value:
                self.sim.fail(f"acknowledged {value} at {offset}, committed there is {committed}")

    def on_error(self, request_id: int) -> None:
        self.inflight.pop(request_id, None)


# ------------------------------------------------------------------ running a seed


REPLICATION = ReplicationControlManager(build_config({"node.id": "1"}), new_uuid=lambda: "t")


def run_seed(seed: int, duration_ms: int = 1500, *, elections: bool = False) -> Sim:
    sim = Sim(seed, duration_ms=duration_ms, elections=elections)
    sim.run()
    return sim
