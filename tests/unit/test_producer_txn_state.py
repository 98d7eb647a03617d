"""The transactional producer's client-side state machine (`TxnState`) and how it treats the
coordinator's error codes (`txn_error_action`), as Kafka's TransactionManager does."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kavka.client.producer import TransactionStateError, TxnState, txn_error_action


def test_begin_add_commit_cycle() -> None:
    s = TxnState("t")
    with pytest.raises(TransactionStateError):
        s.begin()  # InitProducerId first
    s.initialized()
    s.begin()
    with pytest.raises(TransactionStateError):
        s.begin()
    assert s.needs_adding({("a", 0), ("a", 1)}) == {("a", 0), ("a", 1)}
    s.added({("a", 0), ("a", 1)})
    assert s.needs_adding({("a", 0), ("b", 0)}) == {("b", 0)}  # each partition added once
    assert s.end(commit=True) is True
    s.ended()
    assert s.state == "ready" and not s.partitions
    s.begin()
    assert s.needs_adding({("a", 0)}) == {("a", 0)}  # a new transaction adds it again


def test_empty_transaction_needs_no_end_txn() -> None:
    s = TxnState("t")
    s.initialized()
    s.begin()
    assert s.end(commit=True) is False
    assert s.state == "ready"
    assert s.end(commit=False) is False  # abort with nothing open: a no-op


def test_writes_and_commit_outside_a_transaction_are_refused() -> None:
    s = TxnState("t")
    s.initialized()
    with pytest.raises(TransactionStateError):
        s.needs_adding({("a", 0)})
    with pytest.raises(TransactionStateError):
        s.end(commit=True)


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (0, "ok"),
        (ErrorCode.coordinator_load_in_progress, "retry"),
        (ErrorCode.concurrent_transactions, "retry"),
        (ErrorCode.not_coordinator, "refind"),
        (ErrorCode.coordinator_not_available, "refind"),
        (ErrorCode.producer_fenced, "fenced"),
        (ErrorCode.invalid_producer_epoch, "fenced"),
        (ErrorCode.invalid_txn_state, "fatal"),
        (ErrorCode.transactional_id_authorization_failed, "fatal"),
    ],
)
def test_error_actions(code: int, action: str) -> None:
    assert txn_error_action(int(code)) == action


def test_sealed_transactional_batch_matches_build_batch() -> None:
    from kavka.client.producer import RecordsRegion, seal_batch
    from kavka.protocol.records import _encode_record, build_batch, parse_header

    records = [(1000 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    want = build_batch(records, producer_id=7, producer_epoch=2, base_sequence=5, is_transactional=True)
    data = bytearray()
    for i, (ts, k, v) in enumerate(records):
        _encode_record(data, offset_delta=i, timestamp_delta=ts - 1000, key=k, value=v, headers=())
    got = seal_batch(RecordsRegion(bytes(data), 3, 1000, 1002), producer_id=7, producer_epoch=2,
                     base_sequence=5, is_transactional=True)
    assert parse_header(got).is_transactional
    assert got == want
