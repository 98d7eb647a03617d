"""A timeout that does not count the time this event loop itself did not run.

`asyncio.timeout(s)` measures wall time. When the process was stopped (SIGSTOP, a VM
pause, a page-in storm) or its loop blocked past the deadline, a peer's answer can already
be in the socket when the loop wakes, yet the timer runs first: asyncio's loop moves
expired timers to the ready queue after the I/O callbacks, and the reader callback only
*schedules* the waiting task, so the task is cancelled before it reads the answer. For a
broker's heartbeat that is a false failure: the broker closes a healthy connection to
the active controller, and the controller, seeing its heartbeat connection close, fences
it unless it heartbeats again within a second (controller.heartbeats) -- which a broker
that just woke with four seconds of work queued may not do (`python -m bench.fences
--pause-s 4` saw it once in nine pauses).

`running_timeout(s)` is `asyncio.timeout(s)` except when its timer fires more than
`STALL_S` late -- the loop did not run meanwhile -- it gives what arrived meanwhile one more
moment (`STALL_S`) before it expires: the reads already due run first, and an answer that is
in the socket is taken. Only once: a loop that is merely slow on a loaded machine (its timers
a few hundred ms late over and over) must not stretch a timeout without end -- a heartbeat
that waits on a controller that stopped answering must still give up and try again.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

# A timer that fires this much later than its deadline means the loop did not run meanwhile
# (its iterations take milliseconds; on a machine at load 20 a few hundred at worst).
STALL_S = 0.25


class running_timeout:  # noqa: N801 (used as `async with running_timeout(s):`, like asyncio.timeout)
    def __init__(self, timeout_s: float, *, stall_s: float = STALL_S) -> None:
        self.timeout_s = timeout_s
        self.stall_s = stall_s
        self.extended_s = 0.0  # how much a stall moved the deadline (at most once, STALL_S)
        self._inner = asyncio.timeout(None)
        self._handle: asyncio.TimerHandle | None = None
        self._deadline = 0.0

    async def __aenter__(self) -> running_timeout:
        loop = asyncio.get_running_loop()
        await self._inner.__aenter__()
        self._deadline = loop.time() + self.timeout_s
        self._handle = loop.call_at(self._deadline, self._check)
        return self

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = now - self._deadline
        if late > self.stall_s and self.extended_s == 0.0:
            self.extended_s = self.stall_s
            self._deadline = now + self.stall_s
            self._handle = loop.call_at(self._deadline, self._check)
        else:
            self._handle = None
            self._inner.reschedule(now)  # expire: the task is cancelled, and TimeoutError raised

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> bool | None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        return await self._inner.__aexit__(exc_type, exc, tb)

    def expired(self) -> bool:
        return self._inner.expired()
