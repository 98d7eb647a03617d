"""Security of kavka's own outgoing connections: TLS and a SASL client exchange, as Kafka's clients do.

`ClientSecurity` is what one connection needs to reach a listener: the listener's name (for error
messages), its protocol, the client `ssl.SSLContext` for SSL and SASL_SSL (built from the
listener's `ssl.*` keys by kavka.broker.tls.build_client_security: the truststore the peer's
certificate must chain to, the keystore presented when the peer asks for a client certificate,
`ssl.endpoint.identification.algorithm` as the context's host name check), and for SASL_PLAINTEXT
and SASL_SSL a factory of `SaslClient` exchanges of one mechanism.

The exchange (Kafka's SaslClientAuthenticator, after TLS if any):

    SaslHandshake v1 (mechanism)      -> error_code; UNSUPPORTED_SASL_MECHANISM lists the peer's
    SaslAuthenticate v2 (auth_bytes)  -> error_code, error_message, auth_bytes, session_lifetime_ms
    ... one SaslAuthenticate per token until the mechanism is complete

`SaslClient` is the pluggable mechanism (Java's javax.security.sasl.SaslClient): `evaluate` takes
the peer's last challenge (b"" first) and returns the next token, or None when nothing more is
sent. PLAIN (RFC 4616) sends one token; SCRAM-SHA-256/512 (RFC 5802, through `scramp`) sends the
client-first and client-final messages and verifies the server's signature.

A refused authentication raises `AuthenticationFailed` and a failed TLS handshake
`TlsHandshakeFailed`; both are ConnectionErrors naming the peer, the listener and the mechanism
(never a password), so callers that retry a lost connection retry these with their usual backoff.
`open_async` serves asyncio callers (AsyncChannel, the raft driver), `authenticate_blocking` the
blocking client (kavka.client.connection). Each call owns its connection; no shared state.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from kavka.client import negotiation
from kavka.client.errors import KafkaProtocolError
from kavka.protocol import api
from kavka.protocol.messages import make

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SASL_HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests (KIP-152)
SASL_AUTHENTICATE_VERSION = 2  # v2: flexible; v1+ carries session_lifetime_ms (KIP-368)
MAX_SASL_FRAME = 1024 * 1024  # a SASL answer is a few hundred bytes; anything this large is not one
_I32 = struct.Struct(">i")


class AuthenticationFailed(ConnectionError):
    """The peer refused this connection's SASL authentication; the message names the peer, the
    listener and the mechanism, and carries the peer's message -- never a password."""


class TlsHandshakeFailed(ConnectionError):
    """The TLS handshake with the peer failed (its certificate is not trusted, not for its host
    name, or it refused ours)."""


class SaslClient(Protocol):
    """One authentication exchange of one mechanism, the client side."""

    mechanism: str
    complete: bool

    def evaluate(self, challenge: bytes) -> bytes | None: ...


SaslClientFactory = Callable[[], SaslClient]


class PlainClient:
    """SASL/PLAIN (RFC 4616): one token `NUL username NUL password` (no authorization id, as
    Kafka's PlainSaslClient)."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def __repr__(self) -> str:  # never the password
        return "PlainClient()"

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self.complete:
            return None
        self.complete = True
        return self._token


class ScramClient:
    """SASL/SCRAM-SHA-256 or -512 (RFC 5802/7677, Kafka's ScramSaslClient): client-first, then
    client-final from the server-first, then the server-final's signature is verified."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in (SCRAM_SHA_256, SCRAM_SHA_512):
            raise ValueError(f"unknown SCRAM mechanism {mechanism}")
        import scramp  # only where SCRAM is used (the blocking client runs on Spark executors too)

        self.mechanism = mechanism
        self._client = scramp.ScramClient([mechanism], username, password)
        self._step = 0
        self.complete = False

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism})"

    def evaluate(self, challenge: bytes) -> bytes | None:
        import scramp

        try:
            if self._step == 0:
                self._step = 1
                return self._client.get_client_first().encode()
            if self._step == 1:
                self._step = 2
                self._client.set_server_first(challenge.decode("utf-8"))
                return self._client.get_client_final().encode()
            if self._step == 2:
                self._step = 3
                self._client.set_server_final(challenge.decode("utf-8"))
                self.complete = True
                return None
        except (scramp.ScramException, UnicodeDecodeError) as e:
            raise _ScramError(f"invalid SCRAM exchange from the server: {_scram_reason(e)}") from None
        return None


class _ScramError(Exception):
    pass


def _scram_reason(e: Exception) -> str:
    # scramp's messages describe the protocol step, never the password or the proof.
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How kavka's connections reach one listener of their peers."""

    listener: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None  # the SASL mechanism
    sasl: SaslClientFactory | None = field(default=None, repr=False)  # holds the credentials

    def server_hostname(self, host: str) -> str | None:
        return host if self.ssl_context is not None else None


PLAINTEXT = ClientSecurity("PLAINTEXT", "PLAINTEXT")


def plain(listener: str, protocol: str, username: str, password: str, ssl_context: ssl.SSLContext | None = None) -> ClientSecurity:
    return ClientSecurity(listener, protocol, ssl_context, PLAIN, lambda: PlainClient(username, password))


def scram(listener: str, protocol: str, mechanism: str, username: str, password: str,
          ssl_context: ssl.SSLContext | None = None) -> ClientSecurity:
    if mechanism not in (SCRAM_SHA_256, SCRAM_SHA_512):  # refused now, not at the first connection
        raise ValueError(f"unknown SCRAM mechanism {mechanism}")
    return ClientSecurity(listener, protocol, ssl_context, mechanism, lambda: ScramClient(mechanism, username, password))


# ---- the exchange, sans I/O ------------------------------------------------------------------


class SaslExchange:
    """Requests to send and responses to check, for one authentication. `next_request(response)`
    takes the previous request's decoded response (None at first) and returns the next request
    entity, or None when authenticated (then `session_lifetime_ms` is the peer's, 0 for none)."""

    def __init__(self, security: ClientSecurity, peer: str) -> None:
        assert security.sasl is not None and security.mechanism is not None
        self.security = security
        self.peer = peer
        self.client = security.sasl()
        self.session_lifetime_ms = 0
        self._handshaken = False

    def _failed(self, why: str) -> AuthenticationFailed:
        return AuthenticationFailed(
            f"SASL authentication to {self.peer} on listener {self.security.listener} with mechanism "
            f"{self.security.mechanism} failed: {why}"
        )

    def first_request(self) -> Any:
        return make(negotiation.request_class(api.ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION),
                    mechanism=self.security.mechanism)

    def next_request(self, response: Any) -> Any:
        if not self._handshaken:
            self._handshaken = True
            if response.error_code == ErrorCode.unsupported_sasl_mechanism:
                raise self._failed(f"the peer does not enable it (it enables {', '.join(response.mechanisms) or 'none'})")
            if response.error_code != ErrorCode.none:
                raise self._failed(f"SaslHandshake answered {ErrorCode(response.error_code).name}")
            return self._token(b"")
        if response.error_code != ErrorCode.none:
            message = response.error_message or ErrorCode(response.error_code).name
            raise self._failed(message)
        lifetime = response.session_lifetime
        self.session_lifetime_ms = int(lifetime.total_seconds() * 1000) if isinstance(lifetime, timedelta) else int(lifetime or 0)
        if self.client.complete:
            return None
        return self._token(bytes(response.auth_bytes or b""))

    def _token(self, challenge: bytes) -> Any:
        try:
            token = self.client.evaluate(challenge)
        except _ScramError as e:
            raise self._failed(str(e)) from None
        if token is None:
            return None
        return make(negotiation.request_class(api.ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION), auth_bytes=token)


# ---- asyncio ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Session:
    """What an authentication leaves: the peer's session lifetime (KIP-368; 0: no limit)."""

    lifetime_ms: int = 0


async def open_async(
    host: str, port: int, security: ClientSecurity, *, client_id: str | None, limit: int = 2**16,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Session]:
    """A connection to host:port through `security`: TLS handshake, then the SASL exchange."""
    try:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=security.ssl_context, server_hostname=security.server_hostname(host), limit=limit,
        )
    except ssl.SSLError as e:
        raise TlsHandshakeFailed(
            f"TLS handshake with {host}:{port} on listener {security.listener} failed: {e.reason or e}"
        ) from None
    if security.sasl is None:
        return reader, writer, Session()
    try:
        session = await _authenticate_async(reader, writer, security, f"{host}:{port}", client_id)
    except BaseException:
        writer.close()
        raise
    return reader, writer, session


async def _authenticate_async(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: ClientSecurity, peer: str, client_id: str | None,
) -> Session:
    exchange = SaslExchange(security, peer)
    request = exchange.first_request()
    correlation_id = 0
    while request is not None:
        writer.write(negotiation.encode(request, correlation_id=correlation_id, client_id=client_id))
        await writer.drain()
        (size,) = _I32.unpack(await reader.readexactly(4))
        if not 4 <= size <= MAX_SASL_FRAME:
            raise exchange._failed(f"the peer sent a frame of {size} bytes")
        frame = await reader.readexactly(size)
        request = exchange.next_request(_decode(exchange, frame, request, correlation_id))
        correlation_id += 1
    return Session(exchange.session_lifetime_ms)


def _decode(exchange: SaslExchange, frame: bytes | memoryview, request: Any, correlation_id: int) -> Any:
    try:
        return negotiation.decode(frame, int(request.__api_key__), int(request.__version__), correlation_id=correlation_id)
    except KafkaProtocolError as e:
        raise exchange._failed(f"unreadable answer: {e}") from None


# ---- blocking --------------------------------------------------------------------------------


def authenticate_blocking(
    write: Callable[[bytes], None], read_frame: Callable[[], bytes | memoryview], security: ClientSecurity,
    peer: str, client_id: str | None, next_correlation_id: Callable[[], int],
) -> Session:
    """The SASL exchange over a blocking connection's `write` and `read_frame` (kavka.client.connection)."""
    exchange = SaslExchange(security, peer)
    request = exchange.first_request()
    while request is not None:
        cid = next_correlation_id()
        write(negotiation.encode(request, correlation_id=cid, client_id=client_id))
        request = exchange.next_request(_decode(exchange, read_frame(), request, cid))
    return Session(exchange.session_lifetime_ms)
