"""StorageIoManager: the worker threads that do the broker's slow disk work, off the event loop.

Owns one bounded ``ThreadPoolExecutor`` (``background.threads``, Kafka's pool for the
same jobs). Storage passes are written as generators of steps (``storage.cleaner.Steps``):
the generator itself -- all bookkeeping on Log and LogManager objects -- runs on the event
loop; each callable it yields (fsyncs of duplicated descriptors, unlinks, checkpoint
writes, the log cleaner's reading and writing of segment files) runs on a worker, and its
result or exception is sent back into the generator on the loop. So the loop only hands
off and resumes, and a slow disk delays no heartbeat, produce or fetch of another
partition.

Ownership rule (what makes this safe without locks): a worker never calls a Log,
LogSegment or LogManager method; it gets paths, duplicated descriptors and plain values,
and anything it produces (a cleaned segment) is installed by the loop, which first checks
that the log did not change under it.

Started by BrokerNode before the background tasks, stopped after they are cancelled and
before the logs are closed: `stop` waits for the jobs in flight, so no worker touches a
file the shutdown closes. Event-loop thread only (the jobs themselves run anywhere).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kavka.storage.cleaner import Steps

log = logging.getLogger("kavka.broker")

T = TypeVar("T")
SWITCH_INTERVAL_S = 0.001


class StorageIoManager:
    def __init__(self, *, threads: int) -> None:
        self.threads = max(threads, 1)
        self._pool: ThreadPoolExecutor | None = None
        self.jobs_run = 0

    def start(self) -> None:
        # A worker busy in Python (the cleaner decoding records) holds the GIL until the loop
        # asks for it and the switch interval runs out: 5 ms by default, paid on every loop
        # wake-up. 1 ms bounds what the loop waits (process-wide; slightly more switching).
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="storage-io")

    async def run(self, fn: Callable[[], T]) -> T:
        """Run one callable on a worker; the loop awaits it."""
        if self._pool is None:
            raise RuntimeError("the storage I/O manager is not running")
        self.jobs_run += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def drive(self, steps: Steps[T]) -> T:
        """Run a steps generator: its code here, each yielded callable on a worker.

        If the awaiting task is cancelled while a step runs, the generator is closed only
        after that step has finished (so its ``finally`` never frees what a worker still uses).
        """
        if self._pool is None:
            raise RuntimeError("the storage I/O manager is not running")
        loop = asyncio.get_running_loop()
        send: Any = None
        error: BaseException | None = None
        while True:
            try:
                job = steps.throw(error) if error is not None else steps.send(send)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            self.jobs_run += 1
            fut = loop.run_in_executor(self._pool, job)
            try:
                send = await asyncio.shield(fut)
            except asyncio.CancelledError:
                fut.add_done_callback(lambda _f: steps.close())
                raise
            except Exception as e:
                send, error = None, e

    async def stop(self) -> None:
        """Refuse new jobs and wait for those in flight (on a thread: never block the loop)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)
