"""The transaction coordinator core's read-only queries (KIP-664): describe and list_transactions,
as Kafka's TransactionStateManager answers DescribeTransactions and ListTransactions."""

from __future__ import annotations

import itertools

from kio.schema.errors import ErrorCode as E

from kavka.common import TopicPartition as TP
from kavka.coordinator.transaction import TransactionCoordinator, TxnConfig
from kavka.coordinator.txn_state import STATE_BY_NAME, STATE_NAMES, TxnState
from tests.unit.test_transaction_coordinator import Harness

A = TP("t", 0)


def _three() -> Harness:
    """tx-empty (Empty), tx-open (Ongoing since 100), tx-done (CompleteCommit)."""
    h = Harness()
    pids = {}
    for txn in ("tx-empty", "tx-open", "tx-done"):
        r = h.init(txn)
        assert r.error == E.none
        pids[txn] = (r.producer_id, r.producer_epoch)
    for txn in ("tx-open", "tx-done"):
        pid, epoch = pids[txn]
        assert h.call("handle_add_partitions", txn, pid, epoch, [A], now=100).error == E.none
    pid, epoch = pids["tx-done"]
    assert h.call("handle_end_txn", "tx-done", pid, epoch, True, now=200).error == E.none
    return h


def test_state_names_are_kafkas() -> None:
    assert set(STATE_NAMES) == set(TxnState)
    assert STATE_NAMES[TxnState.PREPARE_EPOCH_FENCE] == "PrepareEpochFence"
    assert STATE_BY_NAME["CompleteAbort"] == TxnState.COMPLETE_ABORT


def test_describe_an_ongoing_transaction() -> None:
    h = _three()
    meta = h.c.describe("tx-open")
    assert not isinstance(meta, E)
    assert meta.state == TxnState.ONGOING and meta.partitions == frozenset({A})
    assert meta.start_ms == 100 and meta.timeout_ms == 10_000


def test_describe_unknown_and_not_coordinated_ids() -> None:
    h = _three()
    assert h.c.describe("nobody") == E.transactional_id_not_found
    other = TransactionCoordinator(TxnConfig(transaction_state_log_num_partitions=1),
                                   allocate_producer_id=itertools.count().__next__)
    assert other.describe("tx-open") == E.not_coordinator  # partition 0 not loaded there


def test_list_without_filters_lists_every_id() -> None:
    h = _three()
    assert [m.transactional_id for m in h.c.list_transactions(300)] == ["tx-done", "tx-empty", "tx-open"]


def test_list_filters_by_state_producer_id_and_duration() -> None:
    h = _three()
    ongoing = h.c.list_transactions(300, states=frozenset({TxnState.ONGOING}))
    assert [m.transactional_id for m in ongoing] == ["tx-open"]
    pid = ongoing[0].producer_id
    assert [m.transactional_id for m in h.c.list_transactions(300, producer_ids=frozenset({pid}))] == ["tx-open"]
    assert h.c.list_transactions(300, producer_ids=frozenset({pid}), states=frozenset({TxnState.EMPTY})) == []
    # Started at 100: running 200 ms at 300, so a 150 ms filter keeps it and a 250 ms one does not.
    long_open = h.c.list_transactions(300, states=frozenset({TxnState.ONGOING}), min_duration_ms=150)
    assert [m.transactional_id for m in long_open] == ["tx-open"]
    assert h.c.list_transactions(300, states=frozenset({TxnState.ONGOING}), min_duration_ms=250) == []


def test_unloaded_ids_are_no_longer_listed_or_described() -> None:
    h = _three()
    h.c.unload(0)
    assert h.c.list_transactions(300) == []
    assert h.c.describe("tx-open") == E.not_coordinator


def test_describe_transactions_start_time_carries_kafkas_minus_one() -> None:
    """kio types TransactionStartTimeMs as a datetime and refuses -1 on read; kavka's schema
    (protocol.widened_schema) is an int64 with the same bytes, so an Empty id's -1 round-trips."""
    from datetime import UTC, datetime, timedelta

    from kio.schema.describe_transactions.v0 import response as kio_response
    from kio.serial import entity_reader

    from kavka.protocol import api
    from kavka.protocol.api import ApiKey
    from kavka.protocol.framing import encode_entity
    from kavka.protocol.messages import make, nested

    def encoded(cls: type, start: object) -> bytes:
        state = make(nested(cls, "TransactionState"), error_code=E.none, transactional_id="t",
                     transaction_state="Ongoing", transaction_timeout=timedelta(seconds=60),
                     transaction_start_time=start, producer_id=5, producer_epoch=0, topics=())
        return encode_entity(make(cls, throttle_time=timedelta(0), transaction_states=(state,)))

    cls = api.response_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    assert cls is not kio_response.DescribeTransactionsResponse
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ms = int(start.timestamp() * 1000)
    assert encoded(cls, ms) == encoded(kio_response.DescribeTransactionsResponse, start)
    decoded = entity_reader(cls)(memoryview(encoded(cls, -1)), 0)[0]
    assert decoded.transaction_states[0].transaction_start_time == -1
