"""A held liveness probe: is a silent broker's process there, paused or busy, or gone?

The active controller's short fencing rules (controller.heartbeats) judge a broker that went
silent at a moment when a dead one must be fenced fast: its heartbeat connection closed, or
a new active controller has not heard from its node within a second. A process that is only
*paused* (SIGSTOP, a VM stall) or far behind on a loaded machine is silent then too. The
kernel tells them apart where the process cannot:

- a live process's listening socket takes a new connection even while the process is stopped
  or busy -- the kernel completes the handshake into its accept queue -- and keeps it: nothing
  is ever sent on it and it is never reset;
- a dead process's port refuses (nothing listens), and a process dying while the probe
  connects resets the probe when its listening socket closes (Linux resets the connections
  still in the accept queue of a listening socket that closes; one already accepted is
  closed with the process's other sockets) -- so a probe taken during a killed process's
  teardown does not pass for life: it is reset a moment later;
- a node cut off from the network answers nothing: the connect times out.

`hold_probe` connects and, once taken, holds the connection open while `still_needed()` says
the controller still waits on that broker, reporting each outcome through its callbacks: the
connection taken (`on_taken`), refused (`on_refused`), reset or closed by the peer
(`on_reset`), or not made within `connect_timeout_s` (`on_unreachable`). A taken connection
that stays open is what lets the controller leave a silent broker to its session timeout
instead of the short rules. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from kavka.client.running_timeout import running_timeout

POLL_S = 0.1  # how often a held probe asks whether it is still needed


async def hold_probe(
    host: str, port: int, *, connect_timeout_s: float, max_hold_s: float,
    still_needed: Callable[[], bool], on_taken: Callable[[], None], on_refused: Callable[[], None],
    on_reset: Callable[[], None], on_unreachable: Callable[[], None],
) -> None:
    try:
        async with running_timeout(connect_timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        on_refused()
        return
    except (OSError, TimeoutError):
        on_unreachable()
        return
    on_taken()
    loop = asyncio.get_running_loop()
    read = loop.create_task(reader.read(1))
    try:
        deadline = loop.time() + max_hold_s
        while still_needed() and loop.time() < deadline:
            done, _ = await asyncio.wait({read}, timeout=POLL_S)
            if done:
                # EOF, a reset, or bytes: a listener that only took the connection sends nothing
                # and keeps it; one that went away ends it.
                with contextlib.suppress(OSError):
                    read.result()
                on_reset()
                return
    finally:
        if not read.done():
            read.cancel()
        writer.close()
