"""AsyncChannel against a loopback peer that answers well, with garbage, too big, or out of turn."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.describe_quorum.v2 import request as dq_req
from kio.schema.describe_quorum.v2 import response as dq_resp
from kio.schema.errors import ErrorCode

from kavka.client.async_channel import AsyncChannel
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
