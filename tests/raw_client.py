"""The one raw Kafka client for tests: requests as kio entities or bytes in, response frames out.

For what no real client sends the way a test needs (a version, a field, a malformed frame, a
pipeline of requests). A `RawClient` owns one blocking socket to one listener:

- `send(api_key, version, request)` frames a kio request entity (or the fields of one, built
  with kavka.protocol.messages.make) at that version; `send_bytes(data)` sends anything at all;
- `read_frame()` returns one response frame without its 4-byte size prefix (correlation id
  first) and raises ConnectionError if the peer closes first;
- `read_response(api_key, version)` decodes a frame as that version's response (header v0 for
  ApiVersions, KIP-511), returning (correlation id, response);
- `call(...)` is send + read_response, checking the correlation id;
- `closed_by_peer(timeout)` reads until the peer closes (True) or the timeout passes (False);
- `sasl_plain(user, password)` authenticates the connection on a SASL_PLAINTEXT listener with
  PLAIN: SaslHandshake v1, then SaslAuthenticate v2 (KIP-152), raising if either is refused.

`raw_call(broker, api_key, version, request)` is one call over a fresh connection. `minimal(cls)`
and `request_bytes(key, version, corr)` build the minimal requests of the conformance sweep and the
fuzzer: one element in every array (so per-entry fields are exercised), the field's default where
it has one, otherwise the type's zero; strings name the topic TOPIC.
"""

from __future__ import annotations

import socket
import struct
import uuid
from dataclasses import MISSING, fields, is_dataclass
from datetime import timedelta
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
)
from kio.static.primitive import Records

from kavka.protocol import api, legacy
from kavka.protocol.framing import encode_entity, encode_request, read_response
from kavka.protocol.messages import make
from tests.schema_bodies import nullable

_SIZE = struct.Struct(">i")


def request_frame(
    api_key: int,
    version: int,
    request: Any = None,
    *,
    correlation_id: int = 1,
    client_id: str | None = "raw",
    **values: Any,
) -> bytes:
    """A whole request frame (size prefix, header, body) for a kio entity or the fields of one."""
    if request is None:
        request = make(api.request_schema(api_key, version), **values)
    return encode_request(
        api_key=api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
        body=encode_entity(request),
        flexible=api.is_flexible(api_key, version),
    )


class RawClient:
    def __init__(self, port: int, *, host: str = "127.0.0.1", timeout: float = 10.0,
                 client_id: str | None = "raw") -> None:
        self.client_id = client_id
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, request: Any = None, *, correlation_id: int = 1,
             **values: Any) -> None:
        self.sock.sendall(request_frame(api_key, version, request, correlation_id=correlation_id,
                                        client_id=self.client_id, **values))

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return buf

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._exact(4))
        return self._exact(size)

    def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        return read_response(self.read_frame(), api.response_schema(api_key, version),
                             flexible_header=api.response_header_flexible(api_key, version))

    def call(self, api_key: int, version: int, request: Any = None, *, correlation_id: int = 7,
             **values: Any) -> Any:
        self.send(api_key, version, request, correlation_id=correlation_id, **values)
        corr, response = self.read_response(api_key, version)
        assert corr == correlation_id, f"correlation id {corr}, sent {correlation_id}"
        return response

    def sasl_plain(self, user: str, password: str) -> RawClient:
        hs = self.call(api.ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN", correlation_id=1)
        if hs.error_code != 0:
            raise ConnectionError(f"SaslHandshake refused: {hs.error_code!r}, mechanisms {hs.mechanisms}")
        auth = self.call(api.ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode(),
                         correlation_id=2)
        if auth.error_code != 0:
            raise ConnectionError(f"SaslAuthenticate refused: {auth.error_code!r} {auth.error_message}")
        return self

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


def raw_call(broker, api_key: int, version: int, request: Any) -> Any:  # noqa: ANN001
    """One request entity over a fresh connection to `broker` (anything with a `port`); the
    decoded response."""
    with RawClient(broker.port, timeout=15) as c:
        return c.call(api_key, version, request)


# ---------------------------------------------------------------- minimal requests

TOPIC = "conformance"
# Values that make a minimal request one a client could really send.
_OVERRIDES: dict[str, Any] = {
    "acks": 1,  # acks=0 is never answered
    "partition_max_bytes": 1024,
    "max_bytes": 1024,
    "partition_index": 0,
    "partition": 0,
}


def _zero(f: Any) -> Any:
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return (minimal(kind.type_),)
    if isinstance(kind, EntityField):
        return minimal(kind.type_)
    if nullable(f):
        return None
    if isinstance(kind, PrimitiveTupleField):
        return (_zero_primitive(kind.type_),)
    assert isinstance(kind, PrimitiveField)
    return _zero_primitive(kind.type_)


def _zero_primitive(t: Any) -> Any:
    if get_origin(t) is UnionType:  # an element that may be null (BrokerRegistration's LogDirs): the type's zero
        t = next(a for a in get_args(t) if a is not NoneType)
    if isinstance(t, type) and issubclass(t, Records):
        return None
    if t is uuid.UUID:
        return uuid.UUID(int=0)
    if isinstance(t, type) and issubclass(t, timedelta):
        return timedelta(0)
    if t is bool:
        return False
    if isinstance(t, type) and issubclass(t, str):
        return TOPIC
    if isinstance(t, type) and issubclass(t, bytes):
        return b""
    if isinstance(t, type) and issubclass(t, float):
        return 0.0
    return 0


def minimal(cls: type) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if f.name in _OVERRIDES:
            kwargs[f.name] = _OVERRIDES[f.name]
        elif isinstance(kind, PrimitiveTupleField | EntityTupleField) and not nullable(f):
            kwargs[f.name] = _zero(f)  # one element, so per-entry fields are exercised
        elif f.default is not MISSING and not is_dataclass(f.default):
            kwargs[f.name] = f.default
        else:
            kwargs[f.name] = _zero(f)
    return cls(**kwargs)


def request_bytes(key: int, version: int, corr: int) -> bytes:
    if key == api.ApiKey.PRODUCE and version in legacy.LEGACY_PRODUCE_VERSIONS:
        # v0-v2 share v3's layout without the leading transactional_id (null: 2 bytes).
        body = encode_entity(minimal(api.request_schema(key, 3)))[2:]
    else:
        body = encode_entity(minimal(api.request_schema(key, version)))
    return encode_request(api_key=key, api_version=version, correlation_id=corr, client_id="conformance", body=body,
                          flexible=api.is_flexible(key, version))
