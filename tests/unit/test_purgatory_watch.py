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
