"""The fetch purgatory's watch (ReplicaManager.watch): registered when made, not when awaited.

A Fetch handler that parks returns a coroutine the server runs as a task on a later turn of the
loop; an append or a high-watermark move in between must still wake it (it once sat out the
whole max_wait: replica.fetch.wait.max.ms for a follower, so acks=all produces waited 500 ms).
"""

from __future__ import annotations

import asyncio

from kavka.replication.partition import TopicPartition
from kavka.replication.replica_manager import DataWatch, ReplicaManager


def test_a_change_between_watch_and_wait_is_not_missed() -> None:
    async def run() -> None:
        watchers: dict = {}
        tp, other = TopicPartition("t", 0), TopicPartition("t", 1)
        watch = DataWatch(watchers, [tp, other])
        ReplicaManager._wake(watchers, tp)  # the append lands before the parked task first runs
        await asyncio.wait_for(watch.wait(30), 5)  # returns at once, not after 30 s
        assert watchers.get(other, []) == []  # the watch is gone from every partition it watched

        idle = DataWatch(watchers, [tp])
        await idle.wait(0.01)  # nothing happens: it times out quietly and unregisters
        assert tp not in watchers

    asyncio.run(run())


class _Partition:
    """What acks_future reads of a partition: where an acks=all produce stands."""

    def __init__(self) -> None:
        self.high_watermark = 0
        self.leader = True

    def acks_all_state(self, required: int):  # noqa: ANN201
        from kio.schema.errors import ErrorCode

        if not self.leader:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none if self.high_watermark >= required else None


class _Logs:
    def read_high_watermarks(self) -> dict:
        return {}


def _manager() -> tuple[ReplicaManager, TopicPartition, TopicPartition, _Partition, _Partition]:
    rm = ReplicaManager(node_id=1, log_manager=_Logs(), now_ms=lambda: 0)  # type: ignore[arg-type]
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    pa, pb = _Partition(), _Partition()
    rm.partitions[a], rm.partitions[b] = pa, pb  # type: ignore[assignment]
    return rm, a, b, pa, pb


def test_acks_future_answers_at_the_change_that_completes_it() -> None:
    from kio.schema.errors import ErrorCode

    async def run() -> None:
        rm, a, b, pa, pb = _manager()
        fut = rm.acks_future([(a, 5), (b, 3)], 30, lambda out: sorted((tp.partition, e) for tp, e in out.items()))
        pa.high_watermark = 5
        rm._on_partition_change(a)
        assert not fut.done()  # b still waits
        pb.high_watermark = 2
        rm._on_partition_change(b)
        assert not fut.done()  # not far enough: registered again
        pb.high_watermark = 3
        rm._on_partition_change(b)
        assert fut.done() and fut.result() == [(0, ErrorCode.none), (1, ErrorCode.none)]
        assert not rm._hw_watchers  # nothing left registered

        lost = rm.acks_future([(a, 9)], 30, dict)
        pa.leader = False
        rm._on_partition_change(a)
        assert (await lost) == {a: ErrorCode.not_leader_or_follower}

    asyncio.run(run())


def test_acks_future_times_out_and_a_cancel_unregisters() -> None:
    from kio.schema.errors import ErrorCode

    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        assert (await rm.wait_for_acks([(a, 1), (b, 1)], 0.05)) == {a: ErrorCode.request_timed_out, b: ErrorCode.request_timed_out}
        assert not rm._hw_watchers
        fut = rm.acks_future([(a, 1)], 30, dict)
        assert a in rm._hw_watchers
        fut.cancel()  # the producer's connection closed
        await asyncio.sleep(0)
        assert not rm._hw_watchers

    asyncio.run(run())


def test_on_change_runs_once_and_leaves_the_other_partitions() -> None:
    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        calls: list[int] = []
        rm.on_change([a, b], lambda: calls.append(1), follower=True)
        rm.notify_append(a)
        rm.notify_append(b)
        assert calls == [1] and not rm._append_watchers

    asyncio.run(run())
