"""AsyncChannel: one asyncio connection to one Kafka-protocol endpoint, one request at a time.

What brokers use to talk to each other: forwarding and broker RPCs to the active
controller (`broker.controller_client`) and followers' Fetch to a leader
(`replication.fetcher`). Requests are flexible versions (request header v2,
response header v1: correlation id plus empty tagged fields). A response whose
correlation id is not the request's, or whose frame is larger than
`max_response_bytes`, or that does not decode, is a ConnectionError; any failure or timeout closes the
connection, and the next call opens a new one -- to the address it is given,
so a peer that moved is followed. A timeout that fires late because this event loop did not
run (`running_timeout`) first reads what arrived meanwhile: a broker that was stopped or
stalled takes an answer already in its socket instead of closing a healthy connection. Event-loop thread only; concurrent calls
queue on a lock.

A channel reaches its peers through one listener's `security` (kavka.client.security: TLS,
then SASL, before the first request); a peer that gave the session a lifetime (KIP-368) gets a
new connection, authenticated afresh, once 90% of it has passed, rather than one it would close.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kavka.client.running_timeout import running_timeout
from kavka.client.security import PLAINTEXT, ClientSecurity, open_async
from kavka.protocol.framing import ProtocolError, decode_body, encode_entity, encode_request

_I32 = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # as the blocking client (client.connection)


class AsyncChannel:
    def __init__(
        self, client_id: str, *, max_response_bytes: int = MAX_RESPONSE_BYTES, security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self.security = security
        self._renew_at: float | None = None  # loop time to re-authenticate by (KIP-368)
        self._lock = asyncio.Lock()
        self._addr: tuple[str, int] | None = None
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0

    async def call(self, addr: tuple[str, int], request: Any, resp_cls: type, timeout_s: float) -> Any:
        """Send `request` to `addr` and decode the answer as `resp_cls`, within `timeout_s`."""
        if not request.__flexible__:
            raise ValueError(f"{type(request).__name__} v{request.__version__} is not a flexible version")
        async with self._lock:
            try:
                async with running_timeout(timeout_s):
                    return await self._call(addr, request, resp_cls)
            except BaseException:
                self.close()
                raise

    async def call_raw(
        self, addr: tuple[str, int], api_key: int, api_version: int, body: bytes,
        decode: Callable[[bytes, int], Any], timeout_s: float,
    ) -> Any:
        """`call` for a body already encoded (a flexible version), answered through
        `decode(frame, body position)`: the replica fetchers' hand-written Fetch (protocol.fetch_wire)."""
        async with self._lock:
            try:
                async with running_timeout(timeout_s):
                    return await self._exchange(addr, api_key, api_version, body, decode, f"API {api_key} v{api_version}")
            except BaseException:
                self.close()
                raise

    async def _call(self, addr: tuple[str, int], request: Any, resp_cls: type) -> Any:
        return await self._exchange(
            addr, request.__api_key__, request.__version__, encode_entity(request),
            lambda frame, pos: decode_body(resp_cls, frame, pos), resp_cls.__name__,
        )

    async def _exchange(
        self, addr: tuple[str, int], api_key: int, api_version: int, body: bytes,
        decode: Callable[[bytes, int], Any], what: object,
    ) -> Any:
        loop = asyncio.get_running_loop()
        if self._conn is not None and (self._addr != addr or (self._renew_at is not None and loop.time() >= self._renew_at)):
            self.close()
        if self._conn is None:
            reader, writer, session = await open_async(addr[0], addr[1], self.security, client_id=self.client_id)
            self._conn = reader, writer
            self._addr = addr
            self._renew_at = loop.time() + 0.9 * session.lifetime_ms / 1000 if session.lifetime_ms > 0 else None
        reader, writer = self._conn
        self._correlation += 1
        writer.write(
            encode_request(
                api_key=api_key,
                api_version=api_version,
                correlation_id=self._correlation,
                client_id=self.client_id,
                body=body,
                flexible=True,
            )
        )
        await writer.drain()
        (size,) = _I32.unpack(await reader.readexactly(4))
        if not 5 <= size <= self.max_response_bytes:
            raise ConnectionError(f"response frame of {size} bytes from {addr[0]}:{addr[1]}")
        frame = await reader.readexactly(size)
        (corr,) = _I32.unpack_from(frame, 0)
        if corr != self._correlation:
            raise ConnectionError(f"response {corr} to request {self._correlation}")
        try:
            return decode(frame, 5)
        except ProtocolError as e:  # the peer sent bytes that are not this response
            raise ConnectionError(f"undecodable response ({what}) from {addr[0]}:{addr[1]}: {e}") from e

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None
