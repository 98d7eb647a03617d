"""Delayed: an answer that comes later, at an event or a deadline (Kafka's DelayedOperation).

The purgatory's waits -- acks=all produces (replication.replica_manager.DelayedProduce) and parked
fetches (broker.handlers.fetch) -- complete in the callback of the change that completes them.
`future` is for code that awaits the answer; `listen` gives the network server a callback run at
once, in that same callback, so the response is written without another turn of the event loop
(an asyncio future's done-callbacks are scheduled, and on a busy loop that turn waits behind
everything already queued: ~0.4 ms of an acks=all round trip at 1k records/s).

A subclass says what happens at the deadline (`_expire`) and what it lets go of when it is over
(`_release`: its registrations, its request); it answers with `_resolve` / `_fail`. Whichever ends
it -- an answer, the deadline, a cancel of `future` (the connection closed) -- the timer is
cancelled and `_release` runs, so nothing of a request is left in a reference cycle: at 1k
requests/s, waits whose parts referred to each other left every request to the cyclic garbage
collector, whose full collections paused the loop for 45-120 ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Delayed(Generic[T]):
    __slots__ = ("future", "_listener", "_timer")

    def __init__(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[T] = loop.create_future()
        self._listener: Callable[[], None] | None = None
        self._timer: asyncio.TimerHandle | None = loop.call_later(max(timeout_s, 0.0), self._deadline)
        self.future.add_done_callback(self._cancelled)

    def listen(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the answer is set: now if it already is."""
        if self.future.done():
            callback()
        else:
            self._listener = callback

    def _expire(self) -> None:
        """The deadline passed: answer (subclasses)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Drop what the wait holds (subclasses)."""

    def _deadline(self) -> None:
        self._timer = None
        self._expire()

    def _cancelled(self, f: asyncio.Future[T]) -> None:
        if f.cancelled():
            self._listener = None
            self._end()

    def _end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release()

    def _resolve(self, value: T) -> None:
        self._end()
        self.future.set_result(value)
        self._notify()

    def _fail(self, exc: BaseException) -> None:
        self._end()
        self.future.set_exception(exc)
        self._notify()

    def _notify(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener()
