"""The one way tests wait for a condition: `wait_until`, with a deadline and a useful failure.

Every wait in the tests has a deadline. A hand-written polling loop (`while time.monotonic() <
deadline: ... sleep`) is this helper; a loop that does more than poll (sends, produces, counts
between sleeps) stays a loop, with its own deadline. `wait_until_async` is the same for a condition
that must be awaited (an asyncio client), sleeping without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

_NOTHING = object()


def wait_until(condition: Callable[[], T], timeout: float = 20.0, interval: float = 0.05,
               message: str = "condition") -> T:
    """Call `condition` every `interval` seconds until it returns something truthy, and return that.

    An exception from `condition` counts as "not yet" (a broker still starting refuses
    connections). At the deadline raise AssertionError naming `message`, the last value
    `condition` returned and the last exception it raised.
    """
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
            last = value
        except Exception as e:  # keep polling; reported at the deadline
            last_exc = e
        time.sleep(interval)
    seen = "never returned" if last is _NOTHING else f"last returned {last!r}"
    raise AssertionError(
        f"timed out after {timeout}s waiting for {message} ({seen})"
        + (f"; last error: {last_exc!r}" if last_exc else "")
    )


async def wait_until_async(condition: Callable[[], Awaitable[T]], timeout: float = 20.0, interval: float = 0.05,
                           message: str = "condition") -> T:
    """`wait_until` for a condition that must be awaited (an asyncio client's call): it sleeps with
    `asyncio.sleep`, so the event loop keeps running the client meanwhile."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = _NOTHING
    last_exc: Exception | None = None
    while loop.time() < deadline:
        try:
            value = await condition()
            if value:
                return value
            last = value
        except Exception as e:  # keep polling; reported at the deadline
            last_exc = e
        await asyncio.sleep(interval)
    seen = "never returned" if last is _NOTHING else f"last returned {last!r}"
    raise AssertionError(
        f"timed out after {timeout}s waiting for {message} ({seen})"
        + (f"; last error: {last_exc!r}" if last_exc else "")
    )
