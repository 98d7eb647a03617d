"""Seeded simulation of the transaction coordinator core: random producers, timeouts, coordinator
moves (unload, then load from the records written) and failed appends and marker writes.

Invariants, checked after every event:
  - a transaction (transactional id, producer id, start time) gets markers of one kind only:
    committed or aborted, never both;
  - the markers of a transaction go to exactly the partitions of its Prepare record in the log,
    and include every partition the producer was told was added;
  - a fenced producer never commits: an EndTxn(commit) sent with a producer id/epoch older
    than the newest in the log is never answered NONE;
  - the state after a reload equals the state before the unload;
and at the end, with failures healed, no transaction is left in PrepareCommit/PrepareAbort
and no partition hangs: every transaction open in a partition leader's producer state
(storage.producer_state, fed the data batches and markers the simulation delivers) belongs to a
transaction the coordinator holds Ongoing with that partition.

The partition leaders do KIP-890 part 1: producers send transactional batches that arrive late
(possibly after their transaction ended) or to a partition never added; a leader whose producer
state has no transaction open for the producer takes a verification guard, asks the core
(`handle_add_partitions(verify_only=True)`) and appends only if the answer is NONE and the guard
survived. `Sim(seed, verification=False)` (the broken leader) must be caught by "no partition
hangs".

Half the producers use transactions v2 (KIP-890 part 2): their partitions are added as a
partition leader adds them for Produce v12 (`client_transaction_version=2`), they end with EndTxn
v5 (`tv2=True`) and take the producer id and epoch it answers for their next transaction, and
they may abort with nothing added. Two more invariants hold for them: EndTxn v5 answers NONE only
with a newer epoch (or a new producer id) than the transaction it ended, unless it is the retry
of one that completed; and a v2 transaction's markers carry an epoch above its data batches', so
a late batch of an ended transaction is fenced on every partition. Broken cores (`BROKEN`) must each be caught on some seed. A failing seed replays exactly:
`Sim(seed).run()`.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode as E

from kavka.common import TopicPartition
from kavka.coordinator.transaction import (
    NO_PRODUCER_ID,
    Action,
    AppendTxnRecord,
    TransactionCoordinator,
    TxnConfig,
    TxnReply,
    WriteMarkers,
    _Entry,
)
from kavka.coordinator.txn_records import TxnLogValue, read_key, read_value
from kavka.coordinator.txn_state import TxnState
from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.records import build_batch, iter_batches
from kavka.storage.producer_state import ProducerStateManager, VerificationGuard

CFG = TxnConfig(
    transaction_max_timeout_ms=5_000,
    transactional_id_expiration_ms=20_000,
    transaction_state_log_num_partitions=2,
    offsets_topic_num_partitions=4,
)
TOPIC_PARTITIONS = [TopicPartition("t", p) for p in range(4)]
TXN_IDS = ["a", "b", "c"]


class InvariantViolation(AssertionError):
    pass


def _header(buf: bytes):  # type: ignore[no-untyped-def]
    return next(h for _, h in iter_batches(memoryview(buf)))


DATA = _header(build_batch([(0, None, b"v")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True))
MARKER = _header(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=1, producer_epoch=0,
                                            coordinator_epoch=0, timestamp_ms=0))


@dataclass(frozen=True)
class Produce:
    """A transactional batch on its way to a partition leader."""

    tp: TopicPartition
    txn_id: str
    producer_id: int
    epoch: int


@dataclass
class Producer:
    txn_id: str
    producer_id: int = NO_PRODUCER_ID
    epoch: int = -1
    in_txn: bool = False
    acked: set[TopicPartition] = field(default_factory=set)
    tv2: bool = False  # transactions v2 (EndTxn v5)
    waiting: int | None = None  # request id in flight


class Sim:
    def __init__(self, seed: int, core: type[TransactionCoordinator] = TransactionCoordinator, *,
                 verification: bool = True):
        self.rng = random.Random(seed)
        self.verification = verification
        self.prng = random.Random(seed + 7_919)
        self.leaders = {tp: ProducerStateManager() for tp in TOPIC_PARTITIONS}
        self.offsets = itertools.count()
        self.in_flight: list[Produce] = []
        self.answers: list[TxnReply] = []  # the core's answers to verifications, not yet delivered
        self.verifies: dict[int, tuple[Produce, VerificationGuard]] = {}
        self.appended = self.refused = 0
        self.now = 0
        pids = itertools.count(1000)
        # odd seeds write TransactionLogValue v1 (flexible), even seeds v0
        config = dataclasses.replace(CFG, log_value_version=seed % 2)
        self.core = core(config, allocate_producer_id=lambda: next(pids))
        self.coordinator_epoch = {0: 0, 1: 0}
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {0: [], 1: []}
        for p in (0, 1):
            self.core.load(p, 0, [], 0)
        self.queue: list[Action] = []
        self.producers = [Producer(t, tv2=bool(i % 2)) for t in TXN_IDS for i in range(2)]
        self.requests: dict[int, tuple[Producer, str, object]] = {}
        self.rid = itertools.count(1)
        self.outcome: dict[tuple[str, int, int], bool] = {}
        self.fail_rate = self.rng.choice([0.0, 0.1, 0.3])
        self.commits = self.aborts = 0

    # ------------------------------------------------------------ producers

    def _send(self, p: Producer) -> None:
        rid = next(self.rid)
        p.waiting = rid
        c, now = self.core, self.now
        if p.producer_id == NO_PRODUCER_ID:
            self.requests[rid] = (p, "init", None)
            c.handle_init_producer_id(rid, p.txn_id, self.rng.choice([500, 2000, 4000]), now)
        elif self.rng.random() < 0.1:
            self.requests[rid] = (p, "init", None)
            c.handle_init_producer_id(
                rid,
                p.txn_id,
                2000,
                now,
                expected_producer_id=p.producer_id,
                expected_producer_epoch=p.epoch,
            )
        elif (not p.in_txn and not (p.tv2 and self.rng.random() < 0.1)) or self.rng.random() < 0.5:
            tps = frozenset(self.rng.sample(TOPIC_PARTITIONS, self.rng.randint(1, 2)))
            self.requests[rid] = (p, "add", tps)
            c.handle_add_partitions(rid, p.txn_id, p.producer_id, p.epoch, tps, now,
                                    client_transaction_version=2 if p.tv2 else 0)
        else:
            # a v2 producer not in a transaction may abort with nothing added
            commit = p.in_txn and self.rng.random() < 0.7
            # fenced: the log already holds a newer producer id or epoch for this id
            last = self._last_value(c.partition_of(p.txn_id), p.txn_id)
            fenced = last is None or (last.producer_id, last.producer_epoch) != (
                p.producer_id,
                p.epoch,
            )
            self.requests[rid] = (p, "end", (commit, fenced, p.producer_id, p.epoch))
            c.handle_end_txn(rid, p.txn_id, p.producer_id, p.epoch, commit, now, tv2=p.tv2)

    def _answer(self, r: TxnReply) -> None:
        p, kind, arg = self.requests.pop(r.request_id)
        p.waiting = None
        if r.error in (E.producer_fenced, E.invalid_producer_id_mapping, E.invalid_txn_state):
            p.producer_id, p.in_txn, p.acked = NO_PRODUCER_ID, False, set()
            return
        if r.error != E.none:
            return  # retriable: CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, a failed append
        if kind == "init":
            p.producer_id, p.epoch, p.in_txn, p.acked = (
                r.producer_id,
                r.producer_epoch,
                False,
                set(),
            )
        elif kind == "add":
            p.in_txn = True
            p.acked |= arg  # type: ignore[arg-type]
        else:
            commit, fenced, pid, epoch = arg  # type: ignore[misc]
            if commit and fenced:
                raise InvariantViolation(f"fenced producer {p} committed")
            if p.tv2:
                if r.producer_id == pid and r.producer_epoch <= epoch:
                    raise InvariantViolation(
                        f"EndTxn v5 of {p.txn_id} ({pid}, {epoch}) answered without a newer epoch: {r}")
                p.producer_id, p.epoch = r.producer_id, r.producer_epoch
            p.in_txn, p.acked = False, set()

    # ------------------------------------------------------------ the broker

    def _batches(self) -> None:
        """Producers in a transaction send batches (their own random stream, so the coordinator's
        traffic stays the same as without them), which reach the leaders in any order, late."""
        r = self.prng
        busy = [p for p in self.producers if p.in_txn and p.producer_id != NO_PRODUCER_ID]
        if busy and r.random() < 0.3:
            p = r.choice(busy)
            # mostly to a partition the producer was told was added, sometimes not
            tp = r.choice(sorted(p.acked) if p.acked and r.random() < 0.9 else TOPIC_PARTITIONS)
            self.in_flight.append(Produce(tp, p.txn_id, p.producer_id, p.epoch))
        if self.in_flight and r.random() < 0.3:
            self._arrive(self.in_flight.pop(r.randrange(len(self.in_flight))))
        if self.answers and r.random() < 0.5:
            self._verified(self.answers.pop(r.randrange(len(self.answers))))

    def _arrive(self, b: Produce) -> None:
        """A batch reaches its partition leader (Produce handler + ReplicaManager)."""
        ps = self.leaders[b.tp]
        if not self.verification or not ps.needs_verification(b.producer_id, b.epoch):
            self._append(b, None)
            return
        guard = ps.start_verification(b.producer_id, b.epoch, DATA.base_sequence)
        rid = next(self.rid)
        self.verifies[rid] = (b, guard)
        self.core.handle_add_partitions(rid, b.txn_id, b.producer_id, b.epoch, [b.tp], self.now, verify_only=True)
        # the answer travels on the leader's own channel (delivered from _batches, late or not)
        for a in self.core.poll(self.now):
            (self.answers if isinstance(a, TxnReply) and a.request_id in self.verifies else self.queue).append(a)

    def _verified(self, r: TxnReply) -> None:
        b, guard = self.verifies.pop(r.request_id)
        if r.error == E.none and dict(r.partition_errors).get(b.tp) == E.none:
            self._append(b, guard)
        else:
            self.refused += 1

    def _append(self, b: Produce, guard: VerificationGuard | None) -> None:
        ps = self.leaders[b.tp]
        entry = ps.producers.get(b.producer_id)
        if entry is not None and b.epoch < entry.producer_epoch:
            self.refused += 1  # fenced (the append's epoch check)
            return
        if self.verification and not ps.verified(b.producer_id, b.epoch, guard):
            self.refused += 1  # a marker or a newer epoch came in between
            return
        ps.update(dataclasses.replace(DATA, base_offset=next(self.offsets), producer_id=b.producer_id,
                                      producer_epoch=b.epoch))
        self.appended += 1

    def _write_markers(self, m: WriteMarkers) -> None:
        meta = self.core.metadata(m.transactional_id)
        tv2 = meta is not None and meta.client_transaction_version >= 2
        for tp in m.partitions:
            if tp not in self.leaders:
                continue  # __consumer_offsets
            ps = self.leaders[tp]
            entry = ps.producers.get(m.producer_id)
            if tv2 and entry is not None and entry.current_txn_first_offset is not None \
                    and m.producer_epoch <= entry.producer_epoch:
                raise InvariantViolation(f"v2 markers of {m.transactional_id} at epoch {m.producer_epoch} "
                                         f"do not fence its batches at epoch {entry.producer_epoch} on {tp}")
            h = dataclasses.replace(MARKER, base_offset=next(self.offsets), producer_id=m.producer_id,
                                    producer_epoch=m.producer_epoch)
            completed = ps.update_marker(h, coordinator_epoch=m.coordinator_epoch, is_abort=not m.commit)
            if completed is not None:
                ps.complete_txn(completed)

    def _check_no_hanging(self) -> None:
        for tp, ps in self.leaders.items():
            for pid in ps.ongoing_txns:
                owners = [m for part in (0, 1) for m in self.core.snapshot(part).values() if m.producer_id == pid]
                if not any(m.state == TxnState.ONGOING and tp in m.partitions for m in owners):
                    raise InvariantViolation(f"{tp} hangs: producer {pid} has a transaction open there, "
                                             f"unknown to the coordinator ({owners})")

    def _deliver(self, a: Action, *, healed: bool = False) -> None:
        fail = not healed and self.rng.random() < self.fail_rate
        if isinstance(a, TxnReply) and a.request_id in self.verifies:
            self._verified(a)
        elif isinstance(a, TxnReply):
            self._answer(a)
        elif isinstance(a, AppendTxnRecord):
            if fail:
                self.core.on_append(a.append_id, E.not_enough_replicas, self.now)
            else:
                self.log[a.partition.partition].append((a.key, a.value))
                self.core.on_append(a.append_id, E.none, self.now)
        else:
            if not fail:
                self._check_markers(a)
                part = self.core.partition_of(a.transactional_id)
                if a.coordinator_epoch == self.coordinator_epoch[part]:
                    self._write_markers(a)
            self.core.on_markers(
                a.markers_id, E.not_leader_or_follower if fail else E.none, self.now
            )

    def _check_markers(self, m: WriteMarkers) -> None:
        part = self.core.partition_of(m.transactional_id)
        if m.coordinator_epoch != self.coordinator_epoch[part]:
            return  # a stale coordinator's markers: the partition leaders would refuse them
        meta = self.core.metadata(m.transactional_id)
        assert meta is not None
        key = (m.transactional_id, m.producer_id, meta.start_ms)
        if self.outcome.setdefault(key, m.commit) != m.commit:
            raise InvariantViolation(f"transaction {key} both committed and aborted")
        prepare = self._last_value(part, m.transactional_id)
        if prepare is None or prepare.partitions != m.partitions:
            raise InvariantViolation(f"markers to {set(m.partitions)}, prepared {prepare}")
        for p in self.producers:
            # the producer whose transaction this is (a fenced abort carries a bumped epoch)
            mine = (p.txn_id, p.producer_id, p.epoch)
            if mine == (m.transactional_id, m.producer_id, m.producer_epoch) and p.in_txn:
                if not p.acked <= m.partitions:
                    raise InvariantViolation(f"acked {p.acked} not in markers {m.partitions}")
        if m.commit:
            self.commits += 1
        else:
            self.aborts += 1

    def _last_value(self, part: int, txn_id: str) -> TxnLogValue | None:
        for k, v in reversed(self.log[part]):
            if read_key(k) == txn_id:
                return read_value(v)
        return None

    def _move(self, part: int) -> None:
        before = {t: m.log_value() for t, m in self.core.snapshot(part).items()}
        self.core.unload(part)
        self.queue = [a for a in self.queue if not self._belongs(a, part)]
        self.queue += self.core.poll(self.now)  # NOT_COORDINATOR replies
        self.coordinator_epoch[part] += 1
        self.core.load(part, self.coordinator_epoch[part], list(self.log[part]), self.now)
        after = {t: m.log_value() for t, m in self.core.snapshot(part).items()}
        if after != before:
            raise InvariantViolation(f"reload changed partition {part}: {before} -> {after}")

    def _belongs(self, a: Action, part: int) -> bool:
        if isinstance(a, AppendTxnRecord):
            return a.partition.partition == part
        if isinstance(a, WriteMarkers):
            return self.core.partition_of(a.transactional_id) == part
        return False

    # ------------------------------------------------------------ the run

    def run(self, steps: int = 400) -> None:
        for _ in range(steps):
            self.now += self.rng.randint(0, 150)
            r = self.rng.random()
            if r < 0.35:
                idle = [p for p in self.producers if p.waiting is None]
                if idle:
                    self._send(self.rng.choice(idle))
            elif r < 0.97:
                self.queue += self.core.poll(self.now)
                if self.queue:
                    self._deliver(self.queue.pop(self.rng.randrange(len(self.queue))))
            else:
                self._move(self.rng.randrange(2))
            self._batches()
        # heal: no more failures, deliver everything (the late batches first)
        while self.in_flight or self.answers:
            if self.in_flight:
                self._arrive(self.in_flight.pop(0))
            else:
                self._verified(self.answers.pop(0))
        for _ in range(10_000):
            self.queue += self.core.poll(self.now)
            if not self.queue:
                break
            self._deliver(self.queue.pop(0), healed=True)
        for part in (0, 1):
            for t, m in self.core.snapshot(part).items():
                if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    raise InvariantViolation(f"{t} left in {m.state.name}")
        self._check_no_hanging()


# ------------------------------------------------------------ broken cores


class ForgetsPartitionsOnReload(TransactionCoordinator):
    def load(self, partition, coordinator_epoch, records, now_ms):  # type: ignore[no-untyped-def]
        super().load(partition, coordinator_epoch, records, now_ms)
        for e in self._txns.values():
            e.meta = e.meta.__class__(**{**_fields(e.meta), "partitions": frozenset()})


class IgnoresEpoch(TransactionCoordinator):
    def _check_producer(self, e: _Entry | None, producer_id: int, epoch: int) -> E:
        if e is not None and e.pending is None and e.meta.producer_id == producer_id:
            return E.none
        return super()._check_producer(e, producer_id, epoch)


class AbortsAfterCommitRetry(TransactionCoordinator):
    """An EndTxn(abort) arriving while PrepareCommit's markers are out sends abort markers too
    (instead of INVALID_TXN_STATE)."""

    def handle_end_txn(  # type: ignore[no-untyped-def]
        self, request_id, transactional_id, producer_id, producer_epoch, commit, now_ms, *, tv2=False
    ):
        e = self._txns.get(transactional_id)
        if e is not None and e.meta.state == TxnState.PREPARE_COMMIT and not commit:
            m = e.meta
            self._outbox.append(
                WriteMarkers(
                    markers_id=next(self._ids),
                    transactional_id=transactional_id,
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    coordinator_epoch=self._epochs[e.coordinator_partition],
                    commit=False,
                    partitions=m.partitions,
                )
            )
            self._reply(request_id, E.none)
            return
        super().handle_end_txn(
            request_id, transactional_id, producer_id, producer_epoch, commit, now_ms, tv2=tv2
        )


class MarkersMissAPartition(TransactionCoordinator):
    """Sends the markers of a transaction with two or more partitions to all but the last."""

    def _send_markers(self, txn_id: str, e: _Entry) -> None:
        super()._send_markers(txn_id, e)
        m = self._outbox[-1]
        assert isinstance(m, WriteMarkers)
        if len(m.partitions) > 1:
            short = m.partitions - {max(m.partitions)}
            self._outbox[-1] = dataclasses.replace(m, partitions=short)


class V2WithoutBump(TransactionCoordinator):
    """Transactions v2 that forgets the per-transaction epoch bump (answers the old epoch and
    writes the markers with it)."""

    def _prepare_v2(self, e, state, now_ms, request_id, *, no_partition_added, then=None):  # type: ignore[no-untyped-def]
        from kavka.coordinator.transaction import _Then

        target = dataclasses.replace(e.meta, state=state, start_ms=now_ms if no_partition_added else e.meta.start_ms,
                                     last_update_ms=now_ms, client_transaction_version=2)
        self._propose(e, target, then or _Then.REPLY_NEXT_IDS, request_id)


def _fields(m: object) -> dict[str, object]:
    return {f: getattr(m, f) for f in m.__slots__}  # type: ignore[attr-defined]


BROKEN = [ForgetsPartitionsOnReload, IgnoresEpoch, AbortsAfterCommitRetry, MarkersMissAPartition, V2WithoutBump]


@pytest.mark.parametrize("seed", range(60))
def test_simulation(seed: int) -> None:
    Sim(seed).run()


def test_simulation_does_something() -> None:
    sims = [Sim(seed) for seed in range(20)]
    for s in sims:
        s.run()
    assert sum(s.commits for s in sims) > 20 and sum(s.aborts for s in sims) > 20
    assert sum(s.appended for s in sims) > 30 and sum(s.refused for s in sims) > 10
    v2_commits = [m for s in sims for part in (0, 1) for m in s.core.snapshot(part).values()
                  if m.client_transaction_version == 2 and m.producer_epoch > 1]
    assert v2_commits, "no v2 producer got past its first transaction"


def test_leader_without_verification_is_caught() -> None:
    """The hanging transaction itself: with the leaders' verification off, a late batch opens a
    transaction no marker will close."""
    for seed in range(200):
        try:
            Sim(seed, verification=False).run()
        except InvariantViolation as e:
            assert "hangs" in str(e)
            return
    pytest.fail("a leader without verification was not caught in 200 seeds")


@pytest.mark.parametrize("core", BROKEN, ids=lambda c: c.__name__)
def test_broken_core_is_caught(core: type[TransactionCoordinator]) -> None:
    for seed in range(200):
        try:
            Sim(seed, core).run()
        except InvariantViolation:
            return
    pytest.fail(f"{core.__name__} was not caught in 200 seeds")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(10))
def test_simulation_many_seeds(chunk: int) -> None:
    for seed in range(1000 + chunk * 200, 1000 + (chunk + 1) * 200):
        Sim(seed).run(steps=1500)
