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
from collections import deque
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
        self._conn: tuple[ResponseFrames, asyncio.StreamWriter] | None = None
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
        decode: Callable[[memoryview, int], Any], timeout_s: float,
    ) -> Any:
        """`call` for a body already encoded (a flexible version), answered through
        `decode(frame, body position)`: the replica fetchers' hand-written Fetch (protocol.fetch_wire).
        The frame is a view of a buffer of its own, which the answer may keep parts of."""
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
            lambda frame, pos: decode_body(resp_cls, bytes(frame), pos), resp_cls.__name__,
        )

    async def _exchange(
        self, addr: tuple[str, int], api_key: int, api_version: int, body: bytes,
        decode: Callable[[memoryview, int], Any], what: object,
    ) -> Any:
        loop = asyncio.get_running_loop()
        if self._conn is not None and (self._addr != addr or (self._renew_at is not None and loop.time() >= self._renew_at)
                                       or self._conn[0].lost):
            self.close()  # (a connection the peer closed between calls is opened again, not written to)
        if self._conn is None:
            _reader, writer, session = await open_async(addr[0], addr[1], self.security, client_id=self.client_id)
            # Set up (TLS, SASL): from here the connection is read frame by frame (`ResponseFrames`). The
            # writer is kept: it closes the transport when it is collected.
            frames = ResponseFrames(writer.transport, self.max_response_bytes)
            writer.transport.set_protocol(frames)
            self._conn = frames, writer
            self._addr = addr
            self._renew_at = loop.time() + 0.9 * session.lifetime_ms / 1000 if session.lifetime_ms > 0 else None
        frames, writer = self._conn
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
        await frames.drain()
        frame = await frames.read()
        (corr,) = _I32.unpack_from(frame, 0)
        if corr != self._correlation:
            raise ConnectionError(f"response {corr} to request {self._correlation}")
        try:
            return decode(memoryview(frame), 5)
        except ProtocolError as e:  # the peer sent bytes that are not this response
            raise ConnectionError(f"undecodable response ({what}) from {addr[0]}:{addr[1]}: {e}") from e

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None


class ResponseFrames(asyncio.BufferedProtocol):
    """A connection's protocol once TLS and SASL are done: the transport reads each response
    frame straight into a buffer of the frame's size -- first its 4-byte size, then the frame --
    so a frame's bytes are copied once, by the read itself. (A StreamReader copied each into its
    buffer and again out of it, and past twice its limit stopped and restarted the socket's
    reading every 128 KiB of a large response: per replicated MB, about a millisecond of CPU on
    the follower and the leader together, measured over loopback.) Also the writes' flow control
    (`drain`). One request is out at a time, so at most one frame is waited for."""

    def __init__(self, transport: asyncio.BaseTransport, max_size: int) -> None:
        self._transport = transport
        self._max_size = max_size
        self._head = bytearray(4)
        self._frame: bytearray | None = None  # the frame being read, once its size is known
        self._view = memoryview(self._head)  # what the next read fills
        self._got = 0
        self._ready: deque[bytearray] = deque()
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    @property
    def lost(self) -> bool:
        """The connection failed or was closed since the last call."""
        return self._error is not None or self._transport.is_closing()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._got:]

    def buffer_updated(self, nbytes: int) -> None:
        self._got += nbytes
        if self._got < len(self._view):
            return
        if self._frame is None:
            (size,) = _I32.unpack(self._head)
            if not 5 <= size <= self._max_size:
                self._fail(ConnectionError(f"response frame of {size} bytes"))
                self._transport.close()
                return
            self._frame = bytearray(size)
            self._view = memoryview(self._frame)
        else:
            self._ready.append(self._frame)
            self._frame = None
            self._view = memoryview(self._head)
            self._wake()
        self._got = 0

    def eof_received(self) -> None:
        self._fail(ConnectionError("the peer closed the connection"))  # and the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else ConnectionError("connection closed"))
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def drain(self) -> None:
        if self._error is not None:
            raise self._error
        if self._write_paused:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    async def read(self) -> bytearray:
        """The next whole frame (without its size prefix)."""
        while not self._ready:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._ready.popleft()
