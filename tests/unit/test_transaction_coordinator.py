"""The transaction coordinator core: Kafka's transitions, errors and outbox, one call at a time."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode as E

from kavka.common import TopicPartition as TP
from kavka.coordinator.records import OFFSETS_TOPIC, partition_for
from kavka.coordinator.transaction import (
    MAX_EPOCH,
    AppendTxnRecord,
    TransactionCoordinator,
    TxnConfig,
    TxnReply,
    WriteMarkers,
)
from kavka.coordinator.txn_records import read_key, read_value
from kavka.coordinator.txn_state import (
    VALID_PREVIOUS,
    IllegalTransition,
    TxnState,
    check_transition,
)

CFG = TxnConfig(
    transaction_max_timeout_ms=60_000,
    transactional_id_expiration_ms=1_000_000,
    transaction_state_log_num_partitions=1,
    offsets_topic_num_partitions=50,
)
A, B = TP("t", 0), TP("t", 1)


class Harness:
    """Drives a coordinator; appends and markers succeed unless told otherwise."""

    def __init__(self) -> None:
        pids = itertools.count(1000)
        self.c = TransactionCoordinator(CFG, allocate_producer_id=lambda: next(pids))
        self.c.load(0, coordinator_epoch=7, records=[], now_ms=0)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.markers: list[WriteMarkers] = []
        self.replies: dict[int, TxnReply] = {}
        self.rid = itertools.count(1)

    def run(self, now: int = 0, *, fail_appends: bool = False, fail_markers: bool = False) -> None:
        for round_ in itertools.count():
            if (fail_markers or fail_appends) and round_ == 2:
                return  # a failure is retried for ever: stop after it has been answered
            out = self.c.poll(now)
            if not out:
                return
            for a in out:
                if isinstance(a, AppendTxnRecord):
                    if fail_appends:
                        self.c.on_append(a.append_id, E.not_enough_replicas, now)
                    else:
                        self.log.append((a.key, a.value))
                        self.c.on_append(a.append_id, E.none, now)
                elif isinstance(a, WriteMarkers):
                    self.markers.append(a)
                    self.c.on_markers(
                        a.markers_id, E.not_leader_or_follower if fail_markers else E.none, now
                    )
                else:
                    self.replies[a.request_id] = a

    def call(self, method: str, *args: object, now: int = 0, **kw: object) -> TxnReply:
        rid = next(self.rid)
        getattr(self.c, method)(rid, *args, now, **kw)
        self.run(now)
        return self.replies[rid]

    def init(self, txn: str = "tx", timeout: int = 10_000, now: int = 0, **kw: object) -> TxnReply:
        return self.call("handle_init_producer_id", txn, timeout, now=now, **kw)

    def state(self, txn: str = "tx") -> TxnState:
        m = self.c.metadata(txn)
        assert m is not None
        return m.state


def test_transition_table_is_kafkas() -> None:
    S = TxnState
    check_transition(S.ONGOING, S.PREPARE_COMMIT)
    check_transition(S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT)
    check_transition(S.COMPLETE_COMMIT, S.PREPARE_ABORT)  # Kafka 4.x: a v2 abort with nothing added
    for bad in [
        (S.EMPTY, S.PREPARE_COMMIT),
        (S.PREPARE_COMMIT, S.COMPLETE_ABORT),
        (S.DEAD, S.EMPTY),
        (S.COMPLETE_COMMIT, S.PREPARE_COMMIT),
        (S.ONGOING, S.COMPLETE_COMMIT),
    ]:
        with pytest.raises(IllegalTransition):
            check_transition(*bad)
    assert sum(len(v) for v in VALID_PREVIOUS.values()) == 3 + 4 + 1 + 5 + 1 + 1 + 3 + 1


def test_init_then_commit_writes_prepare_markers_complete() -> None:
    h = Harness()
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 0)
    assert h.call("handle_add_partitions", "tx", 1000, 0, [A, B]).error == E.none
    assert h.state() == TxnState.ONGOING
    assert h.call("handle_end_txn", "tx", 1000, 0, True).error == E.none
    (m,) = h.markers
    assert (m.commit, m.partitions, m.coordinator_epoch, m.producer_epoch) == (True, {A, B}, 7, 0)
    assert h.state() == TxnState.COMPLETE_COMMIT
    statuses = [read_value(v).transaction_status for _, v in h.log]  # type: ignore[union-attr]
    assert statuses == [0, 1, 2, 4]
    assert {read_key(k) for k, _ in h.log} == {"tx"}
    # a retry of the same EndTxn is answered NONE; the other outcome is INVALID_TXN_STATE
    assert h.call("handle_end_txn", "tx", 1000, 0, True).error == E.none
    assert h.call("handle_end_txn", "tx", 1000, 0, False).error == E.invalid_txn_state


def test_end_txn_errors() -> None:
    h = Harness()
    h.init()
    assert h.call("handle_end_txn", "tx", 1000, 0, True).error == E.invalid_txn_state  # Empty
    assert h.call("handle_end_txn", "tx", 999, 0, True).error == E.invalid_producer_id_mapping
    assert h.call("handle_end_txn", "nope", 1000, 0, True).error == E.invalid_producer_id_mapping
    h.call("handle_add_partitions", "tx", 1000, 0, [A])
    assert h.call("handle_end_txn", "tx", 1000, 1, True).error == E.producer_fenced
    # markers failing: PrepareAbort stays, retries get CONCURRENT_TRANSACTIONS / INVALID_TXN_STATE
    rid = next(h.rid)
    h.c.handle_end_txn(rid, "tx", 1000, 0, False, 0)
    h.run(fail_markers=True)
    assert h.replies[rid].error == E.none and h.state() == TxnState.PREPARE_ABORT
    # answered straight away, while the markers are still unwritten
    h.c.handle_end_txn(201, "tx", 1000, 0, False, 0)
    h.c.handle_end_txn(202, "tx", 1000, 0, True, 0)
    h.c.handle_init_producer_id(203, "tx", 10_000, 0)
    out = h.c.poll(0)
    assert TxnReply(201, E.concurrent_transactions) in out
    assert TxnReply(202, E.invalid_txn_state) in out
    assert TxnReply(203, E.concurrent_transactions) in out
    (resent,) = [a for a in out if isinstance(a, WriteMarkers)]
    h.c.on_markers(resent.markers_id, E.none, 0)
    h.run()
    assert h.state() == TxnState.COMPLETE_ABORT and resent.partitions == {A}


def test_add_partitions_errors_and_verify_only() -> None:
    h = Harness()
    h.init()
    assert h.call("handle_add_partitions", "tx", 1, 0, [A]).error == E.invalid_producer_id_mapping
    assert h.call("handle_add_partitions", "tx", 1000, 5, [A]).error == E.producer_fenced
    r = h.call("handle_add_partitions", "tx", 1000, 0, [A], verify_only=True)
    assert r.partition_errors == ((A, E.transaction_abortable),)
    n = len(h.log)
    h.call("handle_add_partitions", "tx", 1000, 0, [A])
    assert len(h.log) == n + 1
    h.call("handle_add_partitions", "tx", 1000, 0, [A])  # already in: nothing written
    assert len(h.log) == n + 1
    r = h.call("handle_add_partitions", "tx", 1000, 0, [A, B], verify_only=True)
    assert r.partition_errors == ((A, E.none), (B, E.transaction_abortable))
    # while an append is in flight: CONCURRENT_TRANSACTIONS; verify-only answers from the
    # committed state without waiting
    h.c.handle_add_partitions(100, "tx", 1000, 0, [B], 0)
    h.c.handle_add_partitions(101, "tx", 1000, 0, [B], 0)
    h.c.handle_add_partitions(102, "tx", 1000, 0, [A], 0, verify_only=True)
    h.c.handle_add_partitions(103, "tx", 1000, 1, [A], 0, verify_only=True)
    out = h.c.poll(0)
    assert TxnReply(101, E.concurrent_transactions) in out
    assert TxnReply(102, E.none, partition_errors=((A, E.none),)) in out
    assert TxnReply(103, E.producer_fenced) in out
    (append,) = [a for a in out if isinstance(a, AppendTxnRecord)]
    h.c.on_append(append.append_id, E.none, 0)
    h.run()
    assert h.replies[100].error == E.none
    assert h.call("handle_end_txn", "tx", 1000, 0, True).error == E.none
    r = h.call("handle_add_partitions", "tx", 1000, 0, [A], verify_only=True)
    assert r.partition_errors == ((A, E.transaction_abortable),)  # markers removed it


def test_add_offsets_adds_the_groups_partition() -> None:
    h = Harness()
    h.init()
    h.call("handle_add_offsets", "tx", 1000, 0, "g1")
    m = h.c.metadata("tx")
    assert m is not None and m.partitions == {TP(OFFSETS_TOPIC, partition_for("g1", 50))}


def test_invalid_timeout_and_not_coordinator() -> None:
    h = Harness()
    idempotent = h.call("handle_init_producer_id", None, 10_000)
    assert (idempotent.error, idempotent.producer_id, idempotent.producer_epoch) == (
        E.none,
        1000,
        0,
    )
    assert h.init(txn="").error == E.invalid_request
    assert h.init(timeout=60_001).error == E.invalid_transaction_timeout
    h.c.unload(0)
    assert h.init().error == E.not_coordinator


def test_init_bumps_epoch_and_fences_ongoing() -> None:
    h = Harness()
    h.init()
    assert h.init().producer_epoch == 1  # a second instance: epoch bump, same id
    h.call("handle_add_partitions", "tx", 1000, 1, [A])
    # a third instance while a transaction runs: abort it under epoch 2, retry
    assert h.init().error == E.concurrent_transactions
    assert h.markers[-1].commit is False and h.markers[-1].producer_epoch == 2
    assert h.state() == TxnState.COMPLETE_ABORT
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 3)
    # the fenced instance cannot commit
    assert h.call("handle_end_txn", "tx", 1000, 1, True).error == E.producer_fenced


def test_kip360_expected_producer() -> None:
    h = Harness()
    h.init()
    r = h.init(expected_producer_id=1000, expected_producer_epoch=0)
    assert r.producer_epoch == 1
    # a retry of that call (the answer was lost): the same epoch, no bump
    r = h.init(expected_producer_id=1000, expected_producer_epoch=0)
    assert (r.error, r.producer_epoch) == (E.none, 1)
    assert h.init(expected_producer_id=55, expected_producer_epoch=1).error == E.producer_fenced
    h.init()  # another instance: epoch 2, last epoch forgotten
    assert h.init(expected_producer_id=1000, expected_producer_epoch=1).error == E.producer_fenced


def test_epoch_exhaustion_rotates_producer_id() -> None:
    h = Harness()
    h.init()
    for _ in range(MAX_EPOCH - 1):
        r = h.init()
    assert r.producer_epoch == MAX_EPOCH - 1
    r = h.init()
    assert (r.producer_id, r.producer_epoch) == (1001, 0)
    m = h.c.metadata("tx")
    assert m is not None and m.previous_producer_id == 1000


def test_timeout_aborts_and_fences() -> None:
    h = Harness()
    h.init(timeout=1000)
    h.call("handle_add_partitions", "tx", 1000, 0, [A], now=10)
    h.run(now=1010)  # start + timeout: not yet (Kafka's test is strict)
    assert h.state() == TxnState.ONGOING
    h.run(now=1011)
    assert h.state() == TxnState.COMPLETE_ABORT
    assert h.markers[-1].producer_epoch == 1 and not h.markers[-1].commit
    assert h.call("handle_end_txn", "tx", 1000, 0, True, now=1012).error == E.producer_fenced


def test_expiry_writes_tombstone() -> None:
    h = Harness()
    h.init(now=5)
    h.run(now=5 + 1_000_000 - 1)
    assert h.c.metadata("tx") is not None
    h.run(now=5 + 1_000_000)
    assert h.c.metadata("tx") is None and h.log[-1] == (h.log[0][0], None)


def test_failed_append_answers_the_error_and_changes_nothing() -> None:
    h = Harness()
    h.init()
    h.c.handle_add_partitions(50, "tx", 1000, 0, [A], 0)
    h.run(fail_appends=True)
    assert h.replies[50].error == E.coordinator_not_available  # Kafka's mapping
    assert h.state() == TxnState.EMPTY


def test_reload_equals_and_resends_markers_with_new_epoch() -> None:
    h = Harness()
    h.init()
    h.call("handle_add_partitions", "tx", 1000, 0, [A, B])
    rid = next(h.rid)
    h.c.handle_end_txn(rid, "tx", 1000, 0, True, 0)
    h.run(fail_markers=True)
    before = h.c.snapshot(0)
    h.c.unload(0)
    assert h.c.metadata("tx") is None
    h.c.load(0, coordinator_epoch=8, records=h.log, now_ms=1)
    after = h.c.snapshot(0)
    assert {t: m.log_value() for t, m in after.items()} == {
        t: m.log_value() for t, m in before.items()
    }
    h.run(now=1)
    assert h.markers[-1].coordinator_epoch == 8 and h.markers[-1].partitions == {A, B}
    assert h.state() == TxnState.COMPLETE_COMMIT


def test_outcome_after_unload_is_ignored() -> None:
    h = Harness()
    h.init()
    h.c.handle_add_partitions(9, "tx", 1000, 0, [A], 0)
    (append,) = h.c.poll(0)
    h.c.unload(0)
    assert h.c.poll(0) == [TxnReply(9, E.not_coordinator)]
    assert isinstance(append, AppendTxnRecord)
    h.c.on_append(append.append_id, E.none, 0)  # no error


# ------------------------------------------------------------ transactions v2 (KIP-890 part 2)


def _end_v2(h: Harness, pid: int, epoch: int, commit: bool) -> TxnReply:
    return h.call("handle_end_txn", "tx", pid, epoch, commit, tv2=True)


def _add_v2(h: Harness, pid: int, epoch: int, tps: list[TP]) -> TxnReply:
    return h.call("handle_add_partitions", "tx", pid, epoch, tps, client_transaction_version=2)


def test_v2_every_end_txn_bumps_the_epoch_and_markers_carry_it() -> None:
    h = Harness()
    h.init()
    assert _add_v2(h, 1000, 0, [A, B]).error == E.none
    r = _end_v2(h, 1000, 0, True)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 1)
    (m,) = h.markers
    assert (m.commit, m.producer_id, m.producer_epoch, m.partitions) == (True, 1000, 1, {A, B})
    meta = h.c.metadata("tx")
    assert meta is not None
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (TxnState.COMPLETE_COMMIT, 1, 0)
    assert meta.client_transaction_version == 2
    # the retry of that EndTxn (the epoch before the bump) is answered with the new ids
    r = _end_v2(h, 1000, 0, True)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 1)
    assert _end_v2(h, 1000, 0, False).error == E.invalid_txn_state  # the other outcome
    # the next transaction, with the epoch EndTxn answered; the old epoch is fenced
    assert _add_v2(h, 1000, 0, [A]).error == E.producer_fenced
    assert _add_v2(h, 1000, 1, [A]).error == E.none
    r = _end_v2(h, 1000, 1, False)
    assert (r.error, r.producer_epoch) == (E.none, 2)
    assert h.markers[-1].producer_epoch == 2 and not h.markers[-1].commit
    # an epoch from the future is fenced, not taken for a retry
    assert _end_v2(h, 1000, 5, True).error == E.producer_fenced
    # the log keeps what a reload needs (TransactionLogValue v1 with the tagged fields)
    assert all(read_value(v).client_transaction_version in (0, 2) for _, v in h.log)  # type: ignore[union-attr]
    before = {t: m.log_value() for t, m in h.c.snapshot(0).items()}
    h.c.unload(0)
    h.c.load(0, 8, h.log, 0)
    assert {t: m.log_value() for t, m in h.c.snapshot(0).items()} == before


def test_v2_abort_with_nothing_added_bumps_the_epoch_without_markers() -> None:
    h = Harness()
    h.init()
    r = _end_v2(h, 1000, 0, False)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 1)
    assert h.markers == []
    assert h.state() == TxnState.COMPLETE_ABORT
    # a commit with nothing added is still refused
    assert _end_v2(h, 1000, 1, True).error == E.invalid_txn_state


def test_v2_end_txn_while_markers_are_out() -> None:
    h = Harness()
    h.init()
    _add_v2(h, 1000, 0, [A])
    rid = next(h.rid)
    h.c.handle_end_txn(rid, "tx", 1000, 0, True, 0, tv2=True)
    out = h.c.poll(0)
    (append,) = [a for a in out if isinstance(a, AppendTxnRecord)]
    h.c.on_append(append.append_id, E.none, 0)
    out = h.c.poll(0)
    assert any(isinstance(a, WriteMarkers) for a in out)  # markers out, not yet written
    (reply,) = [a for a in out if isinstance(a, TxnReply)]
    assert (reply.producer_id, reply.producer_epoch) == (1000, 1)
    # the client starts its next transaction at once: the leader's add must wait, not fail
    rid2 = next(h.rid)
    h.c.handle_add_partitions(rid2, "tx", 1000, 1, [A], 0, client_transaction_version=2)
    (r2,) = [a for a in h.c.poll(0) if isinstance(a, TxnReply)]
    assert r2.error == E.concurrent_transactions
    # the EndTxn retried meanwhile (the old epoch) is told to retry too
    rid3 = next(h.rid)
    h.c.handle_end_txn(rid3, "tx", 1000, 0, True, 0, tv2=True)
    (r3,) = [a for a in h.c.poll(0) if isinstance(a, TxnReply)]
    assert r3.error == E.concurrent_transactions


def test_v2_epoch_exhaustion_rotates_the_producer_id_at_end_txn() -> None:
    h = Harness()
    h.init()
    for _ in range(MAX_EPOCH - 1):
        h.init()
    m = h.c.metadata("tx")
    assert m is not None and m.producer_epoch == MAX_EPOCH - 1  # exhausted: the last usable epoch
    assert _add_v2(h, 1000, MAX_EPOCH - 1, [A]).error == E.none
    r = _end_v2(h, 1000, MAX_EPOCH - 1, True)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1001, 0)
    (mk,) = h.markers  # the old producer's transaction is closed at the reserved last epoch
    assert (mk.producer_id, mk.producer_epoch) == (1000, MAX_EPOCH)
    m = h.c.metadata("tx")
    assert m is not None
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id, m.next_producer_id) == (1001, 0, 1000, -1)
    # the retry across the rotation: the old id at the last epoch gets the new ids
    r = _end_v2(h, 1000, MAX_EPOCH - 1, True)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1001, 0)
    assert _add_v2(h, 1000, MAX_EPOCH - 1, [A]).error == E.invalid_producer_id_mapping
    assert _add_v2(h, 1001, 0, [A]).error == E.none


def test_v2_timeout_fences_with_one_bump() -> None:
    h = Harness()
    h.init(timeout=1_000)
    assert _add_v2(h, 1000, 0, [A]).error == E.none
    h.run(now=5_000)
    (mk,) = h.markers
    assert (mk.commit, mk.producer_epoch) == (False, 1)
    m = h.c.metadata("tx")
    assert m is not None and (m.state, m.producer_epoch) == (TxnState.COMPLETE_ABORT, 1)
    assert _end_v2(h, 1000, 0, True).error == E.invalid_txn_state  # the retry rule: an abort happened
