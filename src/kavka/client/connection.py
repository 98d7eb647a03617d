"""A blocking connection to one broker: the transport of the CLI and of Spark executors.

Owns one TCP socket. On connect it runs the ApiVersions handshake (send v3;
on UNSUPPORTED_VERSION retry with the version the refusal allows, else v0) and
keeps the broker's version table. `send(entity)` writes one request and reads
its response -- one request in flight at a time, no pipelining -- so
correlation ids are checked strictly. Any socket failure or timeout closes the
connection and raises `KafkaConnectionError`; an unusable answer raises
`KafkaProtocolError`. Not thread-safe: one thread owns a connection.

With a `security` (kavka.client.security) the socket is wrapped in TLS and authenticated with SASL
before the ApiVersions handshake; a refused handshake or authentication is a
`KafkaConnectionError` naming the listener and mechanism (never the password).
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.client import negotiation
from kavka.client.errors import KafkaConnectionError, KafkaProtocolError
from kavka.client.security import (
    PLAINTEXT,
    AuthenticationFailed,
    ClientSecurity,
    authenticate_blocking,
)
from kavka.protocol.framing import FrameDecoder, ProtocolError

# Responses larger than this are refused (Kafka's client has no limit; a
# fetch response is bounded by fetch.max.bytes, 55 MiB by default).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def parse_host_port(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or bare ``host`` -> (host, port)."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    if not host:
        raise ValueError(f"invalid broker address {address!r}: no host")
    try:
        p = int(port) if port else default_port
    except ValueError:
        raise ValueError(f"invalid broker address {address!r}: port is not a number") from None
    if not 0 < p < 65536:
        raise ValueError(f"invalid broker address {address!r}: port out of range")
    return host, p


class BlockingConnection:
    """One socket to one broker, with the negotiated API versions."""

    def __init__(
        self, host: str, port: int, *, client_id: str | None = "kavka-cli", timeout_s: float = 30,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._next_correlation_id = 0
        self._decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        try:
            self._sock: socket.socket | None = socket.create_connection(
                (host, port), timeout=timeout_s
            )
        except OSError as e:
            raise KafkaConnectionError(
                f"cannot connect to {host}:{port}: {e.strerror or e}"
            ) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._secure(security)
            self.broker_versions = self._handshake()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ API

    def pick_version(self, api_key: int, wanted_max: int | None = None) -> int:
        """Highest version of `api_key` both sides speak (at most `wanted_max`)."""
        return negotiation.pick_version(self.broker_versions, int(api_key), wanted_max)

    @staticmethod
    def request_class(api_key: int, version: int) -> type:
        return negotiation.request_class(int(api_key), version)

    def send(self, request: Any) -> Any:
        """Send a kio request entity; return the response entity of the same version."""
        frame, correlation_id = self.exchange(request)
        return negotiation.decode(frame, int(request.__api_key__), int(request.__version__), correlation_id=correlation_id)

    def exchange(self, request: Any) -> tuple[memoryview, int]:
        """Send a kio request entity; return the response frame, not decoded, and the request's
        correlation id (`negotiation.decode` reads it; a benchmark times the two apart)."""
        correlation_id = self._correlation_id()
        self._write(negotiation.encode(request, correlation_id=correlation_id, client_id=self.client_id))
        return self._read_frame(), correlation_id

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    @property
    def closed(self) -> bool:
        return self._sock is None

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BlockingConnection({self.host}:{self.port}{', closed' if self.closed else ''})"

    # ------------------------------------------------------------------ internals

    def _handshake(self) -> dict[int, tuple[int, int]]:
        version = negotiation.HANDSHAKE_VERSION
        for _attempt in range(2):
            cid = self._correlation_id()
            request = negotiation.api_versions_request(version)
            self._write(negotiation.encode(request, correlation_id=cid, client_id=self.client_id))
            error, table = negotiation.decode_api_versions(
                self._read_frame(), version, correlation_id=cid
            )
            if error == 0:
                return table
            if error != ErrorCode.unsupported_version or version == 0:
                break
            version = negotiation.retry_api_versions_version(table)
        raise KafkaProtocolError(
            f"ApiVersions v{version} to {self.host}:{self.port} failed with error code {error}"
        )

    def _secure(self, security: ClientSecurity) -> None:
        sock = self._require_open()
        if security.ssl_context is not None:
            try:
                self._sock = security.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except (ssl.SSLError, ssl.CertificateError) as e:
                raise KafkaConnectionError(
                    f"TLS handshake with {self.host}:{self.port} on listener {security.listener} failed: "
                    f"{getattr(e, 'reason', None) or e}"
                ) from None
            except OSError as e:
                raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} failed: {_describe(e)}") from None
        if security.sasl is not None:
            try:
                authenticate_blocking(self._write, self._read_frame, security, f"{self.host}:{self.port}",
                                      self.client_id, self._correlation_id)
            except AuthenticationFailed as e:
                raise KafkaConnectionError(str(e)) from None

    def _correlation_id(self) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id = (cid + 1) & 0x7FFFFFFF
        return cid

    def _write(self, data: bytes) -> None:
        sock = self._require_open()
        try:
            sock.sendall(data)
        except OSError as e:
            self.close()
            raise KafkaConnectionError(
                f"send to {self.host}:{self.port} failed: {_describe(e)}"
            ) from None

    def _read_frame(self) -> memoryview:
        sock = self._require_open()
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError as e:
                self.close()
                raise KafkaConnectionError(
                    f"receive from {self.host}:{self.port} failed: {_describe(e)}"
                ) from None
            if not chunk:
                self.close()
                raise KafkaConnectionError(f"{self.host}:{self.port} closed the connection")
            try:
                frames = self._decoder.feed(chunk)
            except ProtocolError as e:
                self.close()
                raise KafkaProtocolError(str(e)) from None
            if frames:
                if len(frames) > 1:
                    self.close()
                    raise KafkaProtocolError("broker sent a response nobody asked for")
                return frames[0]

    def _require_open(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
        return self._sock


def _describe(e: OSError) -> str:
    if isinstance(e, TimeoutError | socket.timeout):
        return "timed out"
    return e.strerror or str(e)
