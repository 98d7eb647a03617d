"""The coordinator's marker channel (BrokerNode._send_txn_markers): markers of several
transactions bound for the same leader in the same turn of the event loop go out as one
WriteTxnMarkers request (Kafka's TransactionMarkerChannelManager drains a queue per broker); two
markers of one producer id never share a request (the answer is keyed by producer id). The
request itself is replaced by a recorder: what goes over the wire is covered by
tests/integration/test_transactions.py (three brokers)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kavka.broker.node import BrokerNode
from kavka.common import ErrorCode, TopicPartition
from kavka.coordinator.transaction import WriteMarkers


def _node(sent: list[tuple[int, list[int]]], *, fail: bool = False) -> Any:
    parts = {0: SimpleNamespace(leader=2), 1: SimpleNamespace(leader=3), 2: SimpleNamespace(leader=1),
             3: SimpleNamespace(leader=2)}
    n = SimpleNamespace(image=SimpleNamespace(topics_by_name={"t": SimpleNamespace(partitions=parts)}), node_id=1,
                        _marker_queues={}, _marker_drains={})

    async def write(leader: int, batch: list[Any]) -> dict[tuple[int, TopicPartition], ErrorCode]:
        sent.append((leader, [m.producer_id for m, _, _ in batch]))
        await asyncio.sleep(0)
        if fail:
            return {}
        return {(m.producer_id, tp): ErrorCode.none for m, tps, _ in batch for tp in tps}

    n._write_txn_markers_to = write
    n._drain_txn_markers = lambda leader: BrokerNode._drain_txn_markers(n, leader)
    n._drain_not_started = lambda leader, task: BrokerNode._drain_not_started(n, leader, task)
    return n


def _marker(pid: int) -> WriteMarkers:
    return WriteMarkers(markers_id=pid, transactional_id=f"tx{pid}", producer_id=pid, producer_epoch=0,
                        coordinator_epoch=0, commit=True, partitions=frozenset())


def _send(n: Any, pid: int, parts: list[int]) -> Any:
    return BrokerNode._send_txn_markers(n, _marker(pid), [TopicPartition("t", p) for p in parts])


def test_markers_ready_together_share_one_request_per_leader() -> None:
    sent: list[tuple[int, list[int]]] = []

    async def main() -> list[dict[TopicPartition, ErrorCode]]:
        n = _node(sent)
        return await asyncio.gather(_send(n, 10, [0, 1, 2]), _send(n, 11, [0, 3]), _send(n, 12, [1]))

    a, b, c = asyncio.run(main())
    assert sorted(sent) == [(2, [10, 11]), (3, [10, 12])]
    assert a == {TopicPartition("t", 0): ErrorCode.none, TopicPartition("t", 1): ErrorCode.none,
                 TopicPartition("t", 2): ErrorCode.not_leader_or_follower}  # led here: not sent
    assert b == dict.fromkeys([TopicPartition("t", 0), TopicPartition("t", 3)], ErrorCode.none)
    assert c == {TopicPartition("t", 1): ErrorCode.none}


def test_one_producer_id_per_request_and_failures_answer_every_partition() -> None:
    sent: list[tuple[int, list[int]]] = []

    async def main() -> list[dict[TopicPartition, ErrorCode]]:
        n = _node(sent, fail=True)
        return await asyncio.gather(_send(n, 10, [0]), _send(n, 10, [3]), _send(n, 11, [0]))

    results = asyncio.run(main())
    assert sent == [(2, [10, 11]), (2, [10])]
    assert all(set(r.values()) == {ErrorCode.not_leader_or_follower} for r in results)  # unreachable leader


def test_a_cancelled_drain_answers_its_waiters() -> None:
    """Shutdown cancels the drains (before they ran, or with a request in flight): nobody waits forever."""
    async def main(turns: int) -> dict[TopicPartition, ErrorCode]:
        n = _node([])
        waiter = asyncio.ensure_future(_send(n, 10, [0]))
        for _ in range(turns):
            await asyncio.sleep(0)
        n._marker_drains[2].cancel()
        return await asyncio.wait_for(waiter, 5)

    for turns in (1, 2):  # 1: the drain has not started; 2: it is sending
        assert asyncio.run(main(turns)) == {TopicPartition("t", 0): ErrorCode.not_leader_or_follower}
