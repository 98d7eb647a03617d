"""The held liveness probe against real sockets: what the kernel says of a paused, a dying and a
missing process (controller.liveness_probe)."""

from __future__ import annotations

import asyncio
import socket

from kavka.controller.liveness_probe import hold_probe


def _probe(port: int, *, needed_for_s: float, while_held=None, connect_timeout_s: float = 1.0) -> list[str]:  # noqa: ANN001
    """Run hold_probe against 127.0.0.1:port; the outcomes it reported, in order. `while_held`
    runs once the connection is taken."""
    events: list[str] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + needed_for_s

        def taken() -> None:
            events.append("taken")
            if while_held is not None:
                loop.call_later(0.05, while_held)

        await hold_probe(
            "127.0.0.1", port, connect_timeout_s=connect_timeout_s, max_hold_s=10,
            still_needed=lambda: loop.time() < until, on_taken=taken,
            on_refused=lambda: events.append("refused"), on_reset=lambda: events.append("reset"),
            on_unreachable=lambda: events.append("unreachable"),
        )

    asyncio.run(asyncio.wait_for(run(), 10))
    return events


def test_a_listener_that_never_accepts_keeps_the_probe_as_a_paused_process_does() -> None:
    """A stopped process cannot accept, but its kernel completes the handshake into the accept
    queue and keeps the connection: taken, never reset, held until no longer needed."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=8)
    try:
        assert _probe(listener.getsockname()[1], needed_for_s=0.5) == ["taken"]
    finally:
        listener.close()


def test_a_listener_that_closes_resets_a_probe_it_had_taken_as_a_dying_process_does() -> None:
    """The race of a kill -9: the probe is taken while the dying process's listening socket is
    still open; when it closes, the kernel resets what was queued, and the probe reports it."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=8)
    port = listener.getsockname()[1]
    assert _probe(port, needed_for_s=5, while_held=listener.close) == ["taken", "reset"]


def test_an_accepted_probe_closed_by_its_process_is_reset_too() -> None:
    listener = socket.create_server(("127.0.0.1", 0), backlog=8)
    accepted: list[socket.socket] = []

    def accept_and_die() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)
        conn.close()  # a process that exits closes its sockets
        listener.close()

    assert _probe(listener.getsockname()[1], needed_for_s=5, while_held=accept_and_die) == ["taken", "reset"]


def test_a_port_nothing_listens_on_refuses() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert _probe(port, needed_for_s=1) == ["refused"]


def test_a_listener_whose_queue_is_full_is_unreachable_within_the_timeout() -> None:
    """SYNs to a full accept queue are dropped, as a node cut off from the network drops them:
    the probe is not taken within its connect timeout, and says so (the grace then decides)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the queue (backlog 0 still queues one or two on Linux)
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        assert _probe(port, needed_for_s=1, connect_timeout_s=0.3) == ["unreachable"]
    finally:
        for c in fillers:
            c.close()
        listener.close()
