"""The Kafka wire server: an asyncio Protocol per connection around the sans-I/O framing.

Theory of operation. `data_received` feeds bytes to a FrameDecoder (which
refuses an oversized frame from its 4-byte size prefix, before buffering it).
Each whole frame is dispatched at once -- requests are read ahead, as Kafka
clients pipeline them -- and gets a response slot in a FIFO. A handler answers
either with a response entity (most APIs) or an awaitable (a long-poll Fetch,
a Produce waiting for acks); the head of the FIFO is written as soon as it is
ready, so responses leave in request order (the protocol's guarantee), and a
slow Fetch holds back only the responses queued behind it on the same
connection. Produce with acks=0 has no slot: Kafka never answers it.

Remote misbehaviour (a malformed or oversized frame, an API or version that is
not supported) closes that one connection -- an unsupported version is logged
at WARNING once per client id and KIP-511 software name, as Kafka 3.9 closes
it too; ApiVersions alone answers UNSUPPORTED_VERSION. A decoded request is
wrapped by protocol.versions so fields its version lacks read as their
defaults. An exception inside a handler is
logged and also closes just that connection. Nothing a client sends can stop
the broker. Reading pauses while `queued.max.requests` responses are pending
or the transport's write buffer is full (uvicorn's flow_control pattern).

Bounded connections (Kafka's SocketServer). A connection that neither reads
nor writes for `connections.max.idle.ms` is closed (a connection with a
response still pending, e.g. a long-poll Fetch, is not idle); the reaper runs
every min(1 s, idle/4). `max.connections` caps open connections: at the limit
the accept loop stops accepting, as Kafka's Acceptor blocks in
waitForConnectionSlot, so a new client waits in the listen backlog (its own
connect timeout applies) until a connection closes -- it is not refused.
(Kafka also closes the least-recently-used connection to make room for its
inter-broker listener; a single broker has no inter-broker traffic.)

TLS (listeners whose protocol is SSL; the context is built by kavka.broker.tls, read per accept
from the listener's ListenerTls, so a reloaded keystore serves the next connection). The
accept loop hands each accepted socket to its own handshake task (`connect_accepted_socket` with
the listener's context and a handshake timeout), so a slow or silent client never holds up
accepting; a handshake in progress counts against `max.connections`. A failed handshake (a
plaintext client, an unknown or missing client certificate) closes that socket with one WARNING
line; a client that goes away mid-handshake, one INFO line. A connection's principal -- the
client certificate's DN mapped by `ssl.principal.mapping.rules`, else User:ANONYMOUS -- and its
listener name ride on every RequestContext; the principal is logged at DEBUG on connect. The
authorizer decides with it (broker.api_authorization declares what each API needs).

SASL (listeners whose protocol is SASL_PLAINTEXT or SASL_SSL; settings from
kavka.broker.sasl_authenticator, built at startup). Each frame first goes to the connection's
SaslServerAuthenticator, which says what to do: serve it as usual (ApiVersions before
authentication, every request after), answer it (SaslHandshake, SaslAuthenticate), write a raw
token (the SaslHandshake v0 flow), or close (any other request before authentication, a session
past connections.max.reauth.ms: one log line each). A failed authentication stops reading, waits
connection.failed.authentication.delay.ms (KIP-306), writes its answer and closes; it is logged at
INFO with the user name tried and the peer, a success at DEBUG -- never a password. The
authenticated principal, User:<name>, then rides on every RequestContext.

Client quotas (KIP-219). A response carrying throttle_time_ms > 0 (a client over its byte quota,
kavka.broker.client_quotas) is written at once, and then the connection reads nothing more for
that long, as Kafka mutes a throttled channel; a later throttle extends the mute, never shortens
it. A throttled request whose answer cannot carry the time -- Produce with acks=0 (no answer),
Fetch v0 (no field) -- mutes its connection at once through RequestContext.mute.

Request quota (KIP-124). With a `request_time` recorder (broker.client_quotas), the loop time a
request takes -- decoding and its handler's synchronous part -- is recorded when its response is
ready and may throttle it: the response's throttle_time_ms becomes the larger of its own and the
request quota's (a Fetch already encoded by fetch_wire keeps its field, but the mute applies), and
the connection is muted as above. The time spent encoding the response is recorded after, counted
against later requests (Kafka's network-thread time).

Connection creation rate (KIP-612). A connection accepted from an IP over its
`connection_creation_rate` quota is not served: it is closed once the throttle time has passed, as
Kafka's Acceptor delays the close, so a reconnecting client backs off.

Fault injection (tests only): with `cut_produce_every` = N > 0 every Nth
Produce is appended and then its connection is closed instead of answered --
the "broker wrote it, the producer never heard" case idempotent producers must
survive. The broker sets it from the KAVKA_FAULT_CUT_PRODUCE_EVERY environment
variable, and only when kavka.test.fault.injection.enable is set (kavka.faults).

Runs on the event-loop thread only.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import inspect
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.broker.sasl_authenticator import (
    Close,
    Failed,
    ListenerSasl,
    RawToken,
    Respond,
    SaslServerAuthenticator,
    Serve,
    Succeeded,
)
from kavka.broker.tls import HANDSHAKE_TIMEOUT_S, ListenerTls, peer_principal
from kavka.principal import ANONYMOUS, NoMatchingRule
from kavka.protocol import api, fetch_wire, legacy, metadata_wire, produce_wire, versions
from kavka.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    ProtocolError,
    decode_body,
    encode_entity,
    peek_request_header,
    read_request_header,
    response_prefix,
)
from kavka.protocol.messages import has_field
from kavka.protocol.splice import SplicedResponse, encode_spliced
from kavka.replication.purgatory import Delayed

log = logging.getLogger("kavka.server")


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # The listener the connection came in on (Metadata and FindCoordinator answer with its endpoints).
    listener: str = ""
    # Kafka's KafkaPrincipal: User:<name> authenticated by SASL on a SASL listener; User:<mapped
    # certificate DN> on an SSL listener with a client certificate; else User:ANONYMOUS. The
    # authorizer checks it (broker.api_authorization: what each API needs).
    principal: str = ANONYMOUS
    # The request's size in bytes (header and body): what Kafka counts against a producer's quota.
    size: int = 0
    # Mutes the connection for the given ms at once: for a throttled request that gets no response
    # to carry its throttle time (Produce acks=0), as Kafka still throttles its channel.
    mute: Callable[[int], None] | None = None


# A handler returns a response entity, an awaitable of one, or None (no response).
Handler = Callable[[RequestContext, Any], Any]
# Records the loop's seconds spent on a request against its request quota; returns the throttle ms
# (the last argument False: only record, the throttle time was already decided).
RequestTimeRecorder = Callable[[RequestContext, Any, float, bool], int]


def _throttle_ms(response: Any) -> int:
    """The throttle_time_ms a response carries (a client quota, broker.client_quotas); 0 if none."""
    if isinstance(response, SplicedResponse):
        response = response.entity
    if response is None or not has_field(response, "throttle_time"):
        return 0
    return int(response.throttle_time.total_seconds() * 1000)


def _with_throttle(response: Any, ms: int) -> Any:
    """The response carrying throttle_time_ms of at least `ms`, where its version has the field
    (a Fetch already encoded by fetch_wire is returned as it is)."""
    if isinstance(response, SplicedResponse):
        if response.buffers is None and _throttle_ms(response) < ms and has_field(response.entity, "throttle_time"):
            return replace(response, entity=replace(response.entity, throttle_time=timedelta(milliseconds=ms)))
        return response
    if response is not None and has_field(response, "throttle_time") and _throttle_ms(response) < ms:
        return replace(response, throttle_time=timedelta(milliseconds=ms))
    return response


class _Slot:
    __slots__ = ("correlation_id", "flexible", "data", "task", "encode", "throttle_ms", "quota")

    def __init__(self, correlation_id: int, flexible: bool, encode: Callable[[Any], Any] = encode_entity) -> None:
        self.correlation_id = correlation_id
        self.flexible = flexible
        self.data: bytes | list[bytes | memoryview] | None = None
        self.task: asyncio.Future[Any] | None = None
        self.encode = encode
        self.throttle_ms = 0  # once written, the connection stops reading this long (KIP-219)
        # (context, request, loop seconds so far) for the request quota, recorded when the response is ready.
        self.quota: tuple[RequestContext, Any, float] | None = None


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer, listener: str = "", tls: ListenerTls | None = None, sasl: ListenerSasl | None = None) -> None:
        self.server = server
        self.listener = listener
        self.tls = tls
        self.authenticator = SaslServerAuthenticator(sasl) if sasl is not None else None
        self._auth_failed = False
        self.principal = ANONYMOUS
        self.decoder = FrameDecoder(server.max_request_size)
        if sasl is not None:
            # Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make the broker
            # buffer a socket.request.max.bytes frame.
            self.decoder.set_max_size(min(sasl.max_receive_size, server.max_request_size))
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.slots: collections.deque[_Slot] = collections.deque()
        self._read_paused = False
        self._write_paused = False
        self._throttled: asyncio.TimerHandle | None = None  # a client quota's mute (KIP-219)
        # Requests read in the same batch as one that muted the connection: served when the mute ends.
        self._held: list[memoryview] = []
        self.closed = False
        self.last_active = asyncio.get_running_loop().time()
        # KIP-511 client software name/version from this connection's ApiVersions v3+.
        self.client_software: str | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        if self.tls is not None:
            # Called once the TLS handshake is done: the client certificate (if any) is known.
            try:
                self.principal = peer_principal(self.tls, transport.get_extra_info("ssl_object"))
            except NoMatchingRule as e:
                log.warning("closing TLS connection from %s on %s: %s", self.peer, self.listener, e)
                self.close()
                return
            log.debug("TLS connection from %s on %s: principal %s", self.peer, self.listener, self.principal)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._throttled is not None:
            self._throttled.cancel()
        self.server.connections.discard(self)
        self.server.slot_freed()
        for slot in self.slots:
            if slot.task is not None:
                slot.task.cancel()
        self.slots.clear()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        self.last_active = asyncio.get_running_loop().time()
        try:
            frames = self.decoder.feed(data)
        except FrameTooLargeError as e:
            limit = "socket.request.max.bytes" if self.authenticator is None or self.authenticator.authenticated else "sasl.server.max.receive.size"
            log.warning("closing connection from %s: %s (%s)", self.peer, e, limit)
            self.close()
            return
        except ProtocolError as e:
            self._protocol_error(e)
            return
        self._serve(frames)

    def _serve(self, frames: list[memoryview]) -> None:
        for i, frame in enumerate(frames):
            if self.closed or self._auth_failed:
                return
            if self._throttled is not None:
                # Muted by a request of this batch (a throttled acks=0 produce or Fetch v0): the
                # requests read with it wait for the mute to end, as Kafka's muted channel reads none.
                self._held.extend(frames[i:])
                break
            try:
                if self.authenticator is not None and not self._authenticate(frame):
                    continue
                self._dispatch(frame)
            except ProtocolError as e:
                self._protocol_error(e)
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing its connection", self.peer)
                self.close()
                return
        self._flush()
        self._update_reading()

    # -- internals
    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.abort()

    def _protocol_error(self, e: Exception) -> None:
        log.warning("closing connection from %s: %s", self.peer, e)
        self.close()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed or self._auth_failed:
            return
        should_pause = self._write_paused or self._throttled is not None or len(self.slots) >= self.server.queued_max_requests
        if should_pause and not self._read_paused:
            self.transport.pause_reading()
            self._read_paused = True
        elif not should_pause and self._read_paused:
            self.transport.resume_reading()
            self._read_paused = False

    def _authenticate(self, frame: memoryview) -> bool:
        """Give a frame to the SASL authenticator and do what it says; True: dispatch it as usual."""
        assert self.authenticator is not None
        loop = asyncio.get_running_loop()
        action = self.authenticator.on_frame(frame, int(loop.time() * 1000))
        if isinstance(action, Serve):
            return True
        if isinstance(action, Close):
            log.warning("closing connection from %s on %s: %s", self.peer, self.listener, action.reason)
            self.close()
            return False
        if isinstance(action, Failed):
            # KIP-306: hold the answer and the close back, so a password guesser gains nothing by reconnecting.
            log.info("failed SASL authentication from %s on %s (user %r): %s", self.peer, self.listener, action.user, action.reason)
            self._auth_failed = True
            if self.transport is not None:
                self.transport.pause_reading()
            delay_s = self.authenticator.settings.failed_delay_ms / 1000
            loop.call_later(delay_s, self._finish_failed_authentication, action.reply)
            return False
        reply = action
        if isinstance(action, Succeeded):
            self.principal = action.principal
            self.decoder.set_max_size(self.server.max_request_size)
            log.debug("%s from %s on %s: principal %s", "SASL re-authentication" if action.reauthenticated else "SASL authentication",
                      self.peer, self.listener, self.principal)
            reply = action.reply
        if isinstance(reply, RawToken):
            self._flush()  # what is queued before it (answers to ApiVersions, SaslHandshake) goes first
            if self.transport is not None and not self.closed:
                self.transport.write(len(reply.token).to_bytes(4, "big") + reply.token)
            return False
        assert isinstance(reply, Respond)
        slot = _Slot(reply.correlation_id, reply.flexible)
        slot.data = encode_entity(reply.response)
        self.slots.append(slot)
        return False

    def _finish_failed_authentication(self, reply: Respond | None) -> None:
        if self.closed or self.transport is None:
            return
        if reply is not None:
            slot = _Slot(reply.correlation_id, reply.flexible)
            slot.data = encode_entity(reply.response)
            self.slots.append(slot)
            self._flush()
        self.closed = True
        self.transport.close()  # not abort: the answer goes out first

    def _dispatch(self, frame: memoryview) -> None:
        started = time.perf_counter()
        api_key, api_version, correlation_id = peek_request_header(frame)
        if api_key == api.ApiKey.API_VERSIONS and not api.is_supported(api_key, api_version):
            # KIP-511: answer a too-new ApiVersions with a v0 response carrying
            # UNSUPPORTED_VERSION and our version table, so the client can retry.
            slot = _Slot(correlation_id, False)
            slot.data = encode_entity(self.server.api_versions_response(0, ErrorCode.unsupported_version))
            self.slots.append(slot)
            return
        handler = self.server.handlers.get(api_key)
        if handler is None or not api.is_supported(api_key, api_version):
            # Kafka 3.9 cannot parse such a request and closes the connection;
            # the client id (header v1 is readable for any version) and the
            # KIP-511 software name say who to upgrade. Logged once per
            # (client, software, key, version), not once per reconnect.
            client_id = read_request_header(frame, flexible=False).client_id
            self.server.warn_unsupported(self.peer, client_id, self.client_software, api_key, api_version)
            self.close()
            return
        flexible = api.is_flexible(api_key, api_version)
        header = read_request_header(frame, flexible=flexible)
        encode: Callable[[Any], Any] = encode_entity
        if api_key == api.ApiKey.FETCH:
            encode = encode_spliced  # record bytes go out as read (protocol.splice)
        ctx_version = api_version
        if api_key == api.ApiKey.FETCH and api_version >= fetch_wire.FIRST_FLEXIBLE:
            # The replication hot path, decoded by hand with every field (protocol.fetch_wire).
            request = fetch_wire.decode_request(frame, header.header_size, api_version)
        elif api_key == api.ApiKey.PRODUCE and api_version >= produce_wire.FIRST:
            # The produce hot path by hand both ways; records stay views into the frame (protocol.produce_wire).
            request = produce_wire.decode_request(frame, header.header_size, api_version)
            encode = partial(produce_wire.encode_response, api_version)
        else:
            request = decode_body(api.request_schema(api_key, api_version), frame, header.header_size)
            if api_key == api.ApiKey.PRODUCE and api_version in legacy.LEGACY_PRODUCE_VERSIONS:
                # Message sets become batch v2 and the request a v3 one (protocol.legacy).
                request = legacy.as_produce_v3(request, api.request_schema(api_key, 3))
                encode = partial(legacy.encode_legacy_produce_response, api_version)
                ctx_version = 3
            if api_key == api.ApiKey.METADATA:
                # Answered with plain tuples, written by hand (protocol.metadata_wire): an all-topics
                # answer is every partition of the cluster.
                encode = partial(metadata_wire.encode_response, api_version)
            if api_key == api.ApiKey.API_VERSIONS and request.__version__ >= 3:
                self.client_software = f"{request.client_software_name} {request.client_software_version}"
            # Fields this version lacks read as their defaults (protocol.versions).
            request = versions.with_defaults(api_key, request)
        ctx = RequestContext(api_key, ctx_version, correlation_id, header.client_id, self.peer, self.listener, self.principal, len(frame), self._throttle)
        result = handler(ctx, request)
        if api_key == api.ApiKey.PRODUCE and self.server.cut_after_this_produce():
            log.warning("fault injection: closing the connection from %s after a produce, before its answer", self.peer)
            if inspect.isawaitable(result):
                asyncio.ensure_future(result)  # let it finish on its own; nobody hears the answer
            self.close()
            return
        request_time = self.server.request_time
        if result is None:
            # Produce acks=0: no response, no slot; a request quota's throttle mutes at once.
            if request_time is not None and (ms := request_time(ctx, request, time.perf_counter() - started, True)) > 0:
                self._throttle(ms)
            return
        slot = _Slot(correlation_id, api.response_header_flexible(api_key, api_version), encode)
        if request_time is not None:
            slot.quota = (ctx, request, time.perf_counter() - started)
        if isinstance(result, Delayed):
            # Answered in the callback of the change that completes it (kavka.replication.purgatory): the
            # response is written there, not on a later turn of the loop.
            slot.task = result.future
            self.slots.append(slot)
            result.listen(partial(self._on_done, slot, result.future))
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            slot.task = task
            task.add_done_callback(lambda t, s=slot: self._on_done(s, t))
        else:
            self._complete(slot, result)
        self.slots.append(slot)

    def _complete(self, slot: _Slot, result: Any) -> None:
        """Encode a ready response into its slot, throttled by the request quota if over it."""
        quota_ms = 0
        request_time = self.server.request_time
        if slot.quota is not None and request_time is not None:
            ctx, request, spent = slot.quota
            quota_ms = request_time(ctx, request, spent, True)
            if quota_ms > 0:
                result = _with_throttle(result, quota_ms)
        started = time.perf_counter()
        slot.data = slot.encode(result)
        slot.throttle_ms = max(_throttle_ms(result), quota_ms)
        if slot.quota is not None and request_time is not None:
            request_time(slot.quota[0], slot.quota[1], time.perf_counter() - started, False)  # Kafka's network-thread time
            slot.quota = None

    def _on_done(self, slot: _Slot, task: asyncio.Future[Any]) -> None:
        if self.closed or task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("error in a %s handler for %s; closing its connection", type(exc).__name__, self.peer, exc_info=exc)
            self.close()
            return
        try:
            self._complete(slot, task.result())
        except Exception:  # a response that does not encode costs its connection, not the caller
            log.exception("cannot encode a response for %s; closing its connection", self.peer)
            self.close()
            return
        self._flush()
        self._update_reading()

    def _flush(self) -> None:
        if self.transport is None or self.closed:
            return
        out: list[bytes | memoryview] = []
        throttle_ms = 0
        while self.slots and self.slots[0].data is not None:
            slot = self.slots.popleft()
            throttle_ms = max(throttle_ms, slot.throttle_ms)
            data = slot.data
            assert data is not None
            # Prefix and body go out as separate buffers: a multi-MiB Fetch body
            # is not copied once more just to put 8 bytes in front of it.
            if isinstance(data, list):
                out.append(response_prefix(slot.correlation_id, sum(len(b) for b in data), flexible_header=slot.flexible))
                out.extend(data)
            else:
                out.append(response_prefix(slot.correlation_id, len(data), flexible_header=slot.flexible))
                out.append(data)
        if out:
            self.last_active = asyncio.get_running_loop().time()
            self.transport.writelines(out)
        if throttle_ms > 0:
            self._throttle(throttle_ms)

    def _throttle(self, ms: int) -> None:
        """KIP-219: the response (with its throttle_time_ms) is out; read nothing more from this
        client for `ms`, as Kafka mutes a throttled channel, so a client that ignores the throttle
        time cannot go on sending. Responses already in progress are still written."""
        loop = asyncio.get_running_loop()
        if self._throttled is not None:
            if self._throttled.when() >= loop.time() + ms / 1000:
                return  # already muted at least that long
            self._throttled.cancel()
        self._throttled = loop.call_later(ms / 1000, self._unthrottle)
        self._update_reading()

    def _unthrottle(self) -> None:
        self._throttled = None
        self.last_active = asyncio.get_running_loop().time()  # muted is not idle
        if self._held and not self.closed:
            held, self._held = self._held, []
            self._serve(held)  # flushes and updates reading
            return
        self._update_reading()


class KafkaServer:
    def __init__(
        self,
        *,
        handlers: dict[int, Handler],
        api_versions_response: Callable[[int, ErrorCode], Any],
        max_request_size: int,
        queued_max_requests: int = 500,
        cut_produce_every: int = 0,
        connections_max_idle_ms: int = 600000,
        max_connections: int = 2**31 - 1,
        connection_throttle: Callable[[str], int] | None = None,
        request_time: RequestTimeRecorder | None = None,
        accepting: bool = True,
    ) -> None:
        self.handlers = handlers
        # Bound and listening, but not accepting until enable_request_processing() (Kafka's
        # SocketServer.enableRequestProcessing, once the broker is unfenced): clients that come
        # earlier wait in the listen backlog rather than being told of a cluster without this broker.
        self._accepting = asyncio.Event()
        if accepting:
            self._accepting.set()
        # The request quota (KIP-124, broker.client_quotas.ClientQuotas.record_request_time).
        self.request_time = request_time
        # ip -> ms to hold a new connection from it before closing it unserved (0: serve it):
        # the per-IP connection_creation_rate quota (KIP-612, kavka.quota.ConnectionRateQuotaManager).
        self.connection_throttle = connection_throttle
        self._throttled_sockets: set[socket.socket] = set()
        self.cut_produce_every = cut_produce_every
        self._produces = 0
        self.api_versions_response = api_versions_response
        self.max_request_size = max_request_size
        self.queued_max_requests = queued_max_requests
        self.connections: set[KafkaConnection] = set()
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_connections = max_connections
        self._tasks: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Future[None]] = set()
        self._slot_free = asyncio.Event()
        self._slot_free.set()
        self._unsupported_seen: set[tuple[str | None, str | None, int, int]] = set()

    def warn_unsupported(self, peer: str, client_id: str | None, software: str | None, api_key: int, api_version: int) -> None:
        """Log a request kavka does not serve: WARNING the first time per client and version, DEBUG after."""
        key = (client_id, software, api_key, api_version)
        first = key not in self._unsupported_seen
        if first and len(self._unsupported_seen) < 10_000:
            self._unsupported_seen.add(key)
        rng = api.SUPPORTED.get(api_key) if api_key in self.handlers else None
        served = f"versions {rng[0]}-{rng[1]} are served" if rng else "this API is not served"
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "closing connection from %s: unsupported API key %d version %d (%s); client id %r, client software %s",
            peer, api_key, api_version, served, client_id, software or "unknown (no ApiVersions v3+)",
        )

    def cut_after_this_produce(self) -> bool:
        if self.cut_produce_every <= 0:
            return False
        self._produces += 1
        return self._produces % self.cut_produce_every == 0

    async def listen(
        self, host: str, port: int, *, listener: str = "", tls: ListenerTls | None = None, sasl: ListenerSasl | None = None
    ) -> int:
        """Bind `host:port` for the listener named `listener`, serving TLS with `tls` and
        authenticating with `sasl` if given; returns the bound port."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        bound: int | None = None
        socks: list[socket.socket] = []
        try:
            for family, type_, proto, _, addr in dict.fromkeys(infos):  # every address, as create_server does
                sock = socket.socket(family, type_, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if bound is not None:
                    addr = (addr[0], bound, *addr[2:])
                sock.bind(addr)
                sock.listen(1024)
                bound = sock.getsockname()[1]
        except OSError:
            for sock in socks:
                sock.close()
            raise
        for sock in socks:
            sock.setblocking(False)
            accept = asyncio.ensure_future(self._accept_loop(sock, listener, tls, sasl))
            accept.add_done_callback(partial(self._accept_done, sock))
            self._tasks.append(accept)
        if not any(t.get_name() == "kavka-idle-reaper" for t in self._tasks) and self.connections_max_idle_ms >= 0:
            self._tasks.append(asyncio.create_task(self._reap_idle(), name="kavka-idle-reaper"))
        assert bound is not None
        return int(bound)

    def enable_request_processing(self) -> None:
        """Start accepting connections on every listener (those queued in the backlog first)."""
        self._accepting.set()

    @staticmethod
    def _accept_done(sock: socket.socket, task: asyncio.Future[None]) -> None:
        sock.close()  # only now: no accept is pending on it any more
        if not task.cancelled() and task.exception() is not None:
            log.error("stopped accepting on %s", sock, exc_info=task.exception())

    def slot_freed(self) -> None:
        if self._open_count() < self.max_connections:
            self._slot_free.set()

    def _open_count(self) -> int:
        """Connections, counting TLS handshakes in progress (each holds a socket)."""
        return len(self.connections) + len(self._handshakes)

    def _handshake_done(self, task: asyncio.Future[None]) -> None:
        self._handshakes.discard(task)
        self.slot_freed()

    async def _accept_loop(self, sock: socket.socket, listener: str, tls: ListenerTls | None, sasl: ListenerSasl | None) -> None:
        loop = asyncio.get_running_loop()
        await self._accepting.wait()
        while True:
            if self._open_count() >= self.max_connections:
                # Kafka's Acceptor blocks here (waitForConnectionSlot); clients queue in the backlog.
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.error("accept failed (%s); retrying in 100 ms", e)
                    await asyncio.sleep(0.1)
                    continue
                raise
            conn.setblocking(False)
            if self.connection_throttle is not None and self._throttle_connection(conn, listener):
                continue
            factory = partial(KafkaConnection, self, listener, tls, sasl)
            if tls is None:
                try:
                    await loop.connect_accepted_socket(factory, conn)
                except OSError as e:  # the peer went away before we set it up
                    log.debug("connection setup failed: %s", e)
                    conn.close()
                continue
            # The handshake runs as its own task: a slow or silent client must not hold up accepting.
            handshake = asyncio.ensure_future(self._tls_handshake(factory, conn, listener, tls))
            self._handshakes.add(handshake)
            handshake.add_done_callback(self._handshake_done)

    async def _tls_handshake(self, factory: Callable[[], KafkaConnection], conn: socket.socket, listener: str, tls: ListenerTls) -> None:
        """Set up one TLS connection; a failed handshake (a plaintext client, an unknown client
        certificate, a timeout) costs that connection and one log line, never the listener."""
        try:
            peer = conn.getpeername()
            who = f"{peer[0]}:{peer[1]}"
        except OSError:
            who = "?"
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                factory, conn, ssl=tls.context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
            )
        except ssl.SSLError as e:  # Kafka logs "Failed authentication ... (SSL handshake failed)"
            reason = e.reason or str(e)
            hint = ": a plaintext client?" if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST") else ""
            log.warning("closing connection from %s on %s: TLS handshake failed (%s%s)", who, listener, reason, hint)
            conn.close()
        except (TimeoutError, OSError) as e:  # a port probe, or a client that went away or stayed silent
            log.info("closing connection from %s on %s: TLS handshake not completed (%s)", who, listener, str(e) or type(e).__name__)
            conn.close()

    def _throttle_connection(self, conn: socket.socket, listener: str) -> bool:
        """KIP-612: a new connection over its IP's connection_creation_rate is not served; as Kafka's
        Acceptor does, it is closed only once the throttle time has passed, so the client's
        reconnect backs off that long. True: throttled."""
        assert self.connection_throttle is not None
        try:
            ip = conn.getpeername()[0]
        except OSError:
            return False
        ms = self.connection_throttle(ip)
        if ms <= 0:
            return False
        log.debug("delaying the close of a connection from %s on %s for %d ms (connection_creation_rate)", ip, listener, ms)
        self._throttled_sockets.add(conn)
        asyncio.get_running_loop().call_later(ms / 1000, self._close_throttled, conn)
        return True

    def _close_throttled(self, conn: socket.socket) -> None:
        self._throttled_sockets.discard(conn)
        conn.close()

    async def _reap_idle(self) -> None:
        loop = asyncio.get_running_loop()
        idle_s = self.connections_max_idle_ms / 1000
        every = min(1.0, max(idle_s / 4, 0.01))
        while True:
            await asyncio.sleep(every)
            cutoff = loop.time() - idle_s
            for c in [c for c in self.connections if c.last_active <= cutoff and not c.slots]:
                log.info("closing connection from %s: idle for over %d ms (connections.max.idle.ms)",
                         c.peer, self.connections_max_idle_ms)
                c.close()

    def stop_accepting(self) -> None:
        for t in self._tasks:
            t.cancel()
        for h in self._handshakes:
            h.cancel()

    async def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, let in-flight responses drain (bounded), then close connections."""
        self.stop_accepting()
        deadline = asyncio.get_running_loop().time() + timeout
        while any(c.slots for c in self.connections) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for c in list(self.connections):
            c.close()
        for sock in list(self._throttled_sockets):
            self._close_throttled(sock)
        tasks, self._tasks = self._tasks, []
        await asyncio.gather(*tasks, return_exceptions=True)
