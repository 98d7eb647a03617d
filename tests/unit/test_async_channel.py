"""AsyncChannel against a loopback peer that answers well, with garbage, too big, or out of turn."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from unittest import mock

import pytest
from kio.schema.describe_quorum.v2 import request as dq_req
from kio.schema.describe_quorum.v2 import response as dq_resp
from kio.schema.errors import ErrorCode

from kavka.client.async_channel import AsyncChannel
from kavka.client.running_timeout import running_timeout
from kavka.protocol.framing import encode_entity

REQ = dq_req.DescribeQuorumRequest(topics=())
GOOD = dq_resp.DescribeQuorumResponse(error_code=ErrorCode.none, error_message=None, topics=(), nodes=())


async def _peer(answers: list[str]) -> tuple[asyncio.AbstractServer, int, list[int]]:
    """A server answering each request with the next kind in `answers`; records correlation ids."""
    seen: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while answers:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                corr = struct.unpack_from(">i", frame, 4)[0]  # api key, version, then the id
                seen.append(corr)
                kind = answers.pop(0)
                body = encode_entity(GOOD)
                if kind == "good":
                    out = struct.pack(">i", corr) + b"\x00" + body
                elif kind == "garbage":
                    out = struct.pack(">i", corr) + b"\x00" + b"\xff" * 3
                elif kind == "other-id":
                    out = struct.pack(">i", corr + 7) + b"\x00" + body
                else:  # "huge": a length prefix far beyond the limit, then nothing
                    writer.write(struct.pack(">i", 2**31 - 1))
                    await writer.drain()
                    continue
                writer.write(struct.pack(">i", len(out)) + out)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


@pytest.mark.parametrize("bad", ["garbage", "other-id", "huge"])
def test_a_bad_answer_is_a_connection_error_and_the_next_call_reconnects(bad: str) -> None:
    async def run() -> None:
        server, port, seen = await _peer(["good", bad, "good"])
        ch = AsyncChannel("test", max_response_bytes=1 << 20)
        try:
            first = await ch.call(("127.0.0.1", port), REQ, dq_resp.DescribeQuorumResponse, 5)
            assert first == GOOD
            with pytest.raises(ConnectionError):
                await ch.call(("127.0.0.1", port), REQ, dq_resp.DescribeQuorumResponse, 5)
            # The broken connection was closed: the next call opens a new one and succeeds.
            again = await ch.call(("127.0.0.1", port), REQ, dq_resp.DescribeQuorumResponse, 5)
            assert again == GOOD
            assert seen == [1, 2, 3]
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_a_silent_peer_times_out() -> None:
    async def run() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        ch = AsyncChannel("test")
        try:
            with pytest.raises(TimeoutError):
                await ch.call(("127.0.0.1", server.sockets[0].getsockname()[1]), REQ, dq_resp.DescribeQuorumResponse, 0.2)
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def _threaded_peer() -> tuple[socket.socket, threading.Thread]:
    """A peer on its own thread, so it answers while the test's event loop is blocked."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            f = conn.makefile("rb")
            try:
                while head := f.read(4):
                    frame = f.read(struct.unpack(">i", head)[0])
                    time.sleep(0.1)  # answers after the test's loop is blocked (50 ms into a call)
                    out = frame[4:8] + b"\x00" + encode_entity(GOOD)
                    conn.sendall(struct.pack(">i", len(out)) + out)
            except ConnectionResetError:
                pass  # the broken variant gave the connection up with part of an answer unread

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return listener, t


@pytest.mark.parametrize("timeout", [running_timeout, asyncio.timeout])
def test_an_answer_that_arrived_while_the_loop_was_stopped_is_read_not_timed_out(timeout: object) -> None:
    """The loop blocks past the call's deadline while the peer answers (a broker stopped by SIGSTOP,
    or stalled): on waking, the channel reads the answer and keeps its connection. With plain
    asyncio.timeout (the broken variant) the expired timer runs before the read, and the healthy
    connection is given up -- what made the controller fence a paused broker."""
    listener, t = _threaded_peer()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        ch = AsyncChannel("test")
        addr = listener.getsockname()
        try:
            assert await ch.call(addr, REQ, dq_resp.DescribeQuorumResponse, 5) == GOOD  # connected
            conn = ch._conn
            # Stop the loop 50 ms into the next call for 0.8 s, four times its 0.2 s timeout.
            loop.call_later(0.05, time.sleep, 0.8)
            with mock.patch("kavka.client.async_channel.running_timeout", timeout):
                answer = await ch.call(addr, REQ, dq_resp.DescribeQuorumResponse, 0.2)
            assert answer == GOOD
            assert ch._conn is conn  # the same connection: nothing for the peer to see closed
        finally:
            ch.close()

    if timeout is asyncio.timeout:
        with pytest.raises(TimeoutError):
            asyncio.run(run())
    else:
        asyncio.run(run())
    listener.close()


def test_a_silent_peer_times_out_after_a_stall_too() -> None:
    """A stall moves the deadline on once, by STALL_S: a peer that never answers still times out
    right after the loop woke."""
    async def run() -> None:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        ch = AsyncChannel("test")
        try:
            loop.call_later(0.05, time.sleep, 0.6)
            started = loop.time()
            with pytest.raises(TimeoutError):
                await ch.call(("127.0.0.1", server.sockets[0].getsockname()[1]), REQ, dq_resp.DescribeQuorumResponse, 0.2)
            # Woke at ~0.65 s, 0.45 s late: the deadline moved on by STALL_S (0.25 s), then expired.
            assert 0.85 <= loop.time() - started < 3.0
            assert ch._conn is None
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_running_timeout_without_a_stall_is_asyncio_timeout() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            async with running_timeout(0.1) as t:
                await asyncio.sleep(5)
        assert t.expired() and t.extended_s == 0.0
        assert 0.09 <= loop.time() - started < 1.0
        async with running_timeout(1.0) as t:
            await asyncio.sleep(0.01)
        assert not t.expired()

    asyncio.run(run())


def test_a_loop_that_is_late_over_and_over_does_not_stretch_a_timeout_without_end() -> None:
    """A loaded machine's loop runs its timers late again and again: the timeout moves on once,
    then expires, so a heartbeat to a controller that stopped answering is given up and tried
    again instead of waiting for ever (the broken variant extended on every late timer)."""
    async def run() -> None:
        loop = asyncio.get_running_loop()

        def lag() -> None:  # every 0.1 s, block 0.6 s: every timer fires 0.3 s late or more
            time.sleep(0.6)
            loop.call_later(0.1, lag)

        loop.call_later(0.0, lag)
        started = loop.time()
        with pytest.raises(TimeoutError):
            async with running_timeout(0.2) as t:
                await asyncio.sleep(30)
        assert t.extended_s == pytest.approx(0.25)
        assert loop.time() - started < 4.0

    asyncio.run(run())


def test_a_connection_the_peer_closed_between_calls_is_opened_again() -> None:
    """A peer that answers and then closes (an idle timeout, a restart): the next call opens a new
    connection instead of writing to the closed one."""
    async def run() -> None:
        async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            corr = struct.unpack_from(">i", await reader.readexactly(size), 4)[0]
            out = struct.pack(">i", corr) + b"\x00" + encode_entity(GOOD)
            writer.write(struct.pack(">i", len(out)) + out)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(once, "127.0.0.1", 0)
        addr = ("127.0.0.1", server.sockets[0].getsockname()[1])
        ch = AsyncChannel("test")
        try:
            assert await ch.call(addr, REQ, dq_resp.DescribeQuorumResponse, 5) == GOOD
            first = ch._conn
            assert first is not None
            while not first[0].lost:  # the peer's close arrives
                await asyncio.sleep(0.01)
            assert await ch.call(addr, REQ, dq_resp.DescribeQuorumResponse, 5) == GOOD
            assert ch._conn is not None and ch._conn is not first
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())
