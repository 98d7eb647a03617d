"""SASL on a client listener: one connection's authentication, as Kafka's SaslServerAuthenticator.

A sans-I/O state machine: the connection feeds it each frame (`on_frame(frame, now_ms)`) while it
is not authenticated, or at every request once it is, and does what the returned action says.
Nothing here raises on what a client sends: a malformed frame is a `Close`.

States and what each accepts (anything else is Kafka's IllegalSaslStateException: close):

    HANDSHAKE  ApiVersions (served as usual) | SaslHandshake v0 -> TOKEN_V0, v1 -> AUTHENTICATE
    AUTHENTICATE  SaslAuthenticate v0-v2 -> COMPLETE (or failure)
    TOKEN_V0   one raw size-prefixed SASL token with no request header (clients that sent
               SaslHandshake v0); the answer is a raw size-prefixed token -> COMPLETE (or failure)
    COMPLETE   every request (served as usual); SaslHandshake v1 starts re-authentication
               (KIP-368) -> AUTHENTICATE; past the session lifetime any other request closes
    FAILED     nothing

A SaslHandshake naming a mechanism not enabled is answered UNSUPPORTED_SASL_MECHANISM with the
enabled list, and the connection fails. A failed authentication is answered
SASL_AUTHENTICATION_FAILED (v0 token flow: no answer) and fails the connection: the server
delays the answer by `connection.failed.authentication.delay.ms` (KIP-306) and then closes.
A re-authentication must keep the principal. `connections.max.reauth.ms` > 0 sets the session
lifetime, told to SaslAuthenticate v1+ clients as session_lifetime_ms; a credential that expires
(an OAUTHBEARER token) caps it at its expiry, with or without that key (Kafka's
SaslServerAuthenticator.ReauthInfo).

Called from the event-loop thread only (per connection).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.config import SASL_MECHANISMS_KEY, BrokerConfig
from kavka.oauthbearer import OAUTHBEARER, JwksSource, OAuthBearerServer
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.framing import (
    ProtocolError,
    decode_body,
    peek_request_header,
    read_request_header,
)
from kavka.protocol.messages import make
from kavka.sasl import PLAIN, PlainServer, SaslAuthenticationError, SaslServer, SaslServerFactory
from kavka.scram import MECHANISMS as SCRAM_MECHANISMS
from kavka.scram import ScramCredential, ScramServer


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """A SASL listener's settings, read once at startup."""

    listener: str
    mechanisms: tuple[str, ...]
    servers: Mapping[str, SaslServerFactory]  # a new exchange of each enabled mechanism
    max_reauth_ms: int
    failed_delay_ms: int
    max_receive_size: int = 524288  # sasl.server.max.receive.size: frames before authentication
    # Key sources the node starts (off the event loop: they may fetch over HTTP) before serving,
    # and stops at shutdown (OAUTHBEARER's JWKS).
    background: tuple[JwksSource, ...] = ()


# (mechanism name, user name) -> the user's SCRAM credential now, or None (the broker's current
# metadata image: a credential altered on any node counts from the next authentication).
ScramLookup = Callable[[str, str], ScramCredential | None]


def _no_scram_users(_mechanism: str, _user: str) -> ScramCredential | None:
    return None


def build_listener_sasl(config: BrokerConfig, scram_credentials: ScramLookup = _no_scram_users) -> dict[str, ListenerSasl]:
    """Every SASL listener's settings by name (kavka.config validated them; ConfigError otherwise).
    Nothing is fetched here: the caller starts each `background` source."""
    out = {}
    for ep in config.sasl_listeners():
        factories, background = _server_factories(config, ep.name, scram_credentials)
        out[ep.name] = ListenerSasl(
            listener=ep.name,
            mechanisms=tuple(config.sasl_value(ep.name, SASL_MECHANISMS_KEY)),
            servers=factories,
            max_reauth_ms=config["connections.max.reauth.ms"],
            failed_delay_ms=config["connection.failed.authentication.delay.ms"],
            max_receive_size=config["sasl.server.max.receive.size"],
            background=background,
        )
    return out


def _server_factories(config: BrokerConfig, listener: str, scram_credentials: ScramLookup
                      ) -> tuple[dict[str, SaslServerFactory], tuple[JwksSource, ...]]:
    factories: dict[str, SaslServerFactory] = {}
    background: list[JwksSource] = []
    for mechanism in config.sasl_value(listener, SASL_MECHANISMS_KEY):
        if mechanism == PLAIN:
            factories[PLAIN] = partial(PlainServer, config.plain_users(listener))
        elif mechanism in SCRAM_MECHANISMS:
            lookup = partial(scram_credentials, mechanism)
            factories[mechanism] = partial(ScramServer, SCRAM_MECHANISMS[mechanism], lookup)
        elif mechanism == OAUTHBEARER:
            validator, source = config.oauthbearer_validator(listener)
            factories[OAUTHBEARER] = partial(OAuthBearerServer, validator)
            background += [source] if source is not None else []
    return factories, tuple(background)


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    TOKEN_V0 = "token_v0"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Serve:
    """Not SASL's business: dispatch the request as usual."""


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer the request with `response`."""

    correlation_id: int
    flexible: bool
    response: Any


@dataclass(frozen=True, slots=True)
class RawToken:
    """Write `token` as a size-prefixed frame with no response header (the v0 token flow)."""

    token: bytes


@dataclass(frozen=True, slots=True)
class Succeeded:
    """Authenticated as `principal`; write `reply` (a Respond or RawToken) at once."""

    principal: str
    reply: Respond | RawToken
    reauthenticated: bool


@dataclass(frozen=True, slots=True)
class Failed:
    """Authentication failed: after the delay, write `reply` (if any) and close. `reason` and
    `user` are for the log line (never a password)."""

    reply: Respond | None
    reason: str
    user: str


@dataclass(frozen=True, slots=True)
class Close:
    """Close at once (Kafka's illegal SASL state); `reason` for the log line."""

    reason: str


Action = Serve | Respond | RawToken | Succeeded | Failed | Close
_PRE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE})


class SaslServerAuthenticator:
    def __init__(self, settings: ListenerSasl) -> None:
        self.settings = settings
        self.state = State.HANDSHAKE
        self.principal: str | None = None
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self.session_expires_ms: int | None = None
        self._reauthenticating = False

    @property
    def authenticated(self) -> bool:
        return self.state == State.COMPLETE

    def on_frame(self, frame: memoryview | bytes, now_ms: int) -> Action:
        try:
            return self._on_frame(frame, now_ms)
        except (ProtocolError, ValueError, TypeError, IndexError, OverflowError, UnicodeDecodeError) as e:
            self.state = State.FAILED
            return Close(f"malformed SASL request ({type(e).__name__})")

    def _on_frame(self, frame: memoryview | bytes, now_ms: int) -> Action:
        if self.state == State.TOKEN_V0:
            return self._authenticate(bytes(frame), None, now_ms)
        if self.state == State.FAILED:
            return Close("request after a failed authentication")
        api_key, api_version, correlation_id = peek_request_header(frame)
        if self.state == State.COMPLETE:
            if api_key == ApiKey.SASL_HANDSHAKE and api_version >= 1 and api.is_supported(api_key, api_version):
                self._reauthenticating = True
                return self._handshake(frame, api_key, api_version, correlation_id)
            if self.session_expires_ms is not None and now_ms >= self.session_expires_ms:
                self.state = State.FAILED
                return Close("SASL session expired without re-authentication (connections.max.reauth.ms)")
            return Serve()
        if self.state == State.HANDSHAKE:
            if api_key not in _PRE_AUTH:
                self.state = State.FAILED
                return Close(f"unexpected request (API key {api_key}) before SASL authentication")
            if api_key == ApiKey.API_VERSIONS:
                return Serve()
            if not api.is_supported(api_key, api_version):
                self.state = State.FAILED
                return Close(f"unsupported SaslHandshake version {api_version}")
            return self._handshake(frame, api_key, api_version, correlation_id)
        # AUTHENTICATE
        if api_key != ApiKey.SASL_AUTHENTICATE or not api.is_supported(api_key, api_version):
            self.state = State.FAILED
            return Close(f"unexpected request (API key {api_key} version {api_version}) during SASL authentication")
        flexible = api.is_flexible(api_key, api_version)
        header = read_request_header(frame, flexible=flexible)
        request = decode_body(api.request_schema(api_key, api_version), frame, header.header_size)
        return self._authenticate(bytes(request.auth_bytes), (correlation_id, api_version), now_ms)

    def _handshake(self, frame: memoryview | bytes, api_key: int, api_version: int, correlation_id: int) -> Action:
        flexible = api.is_flexible(api_key, api_version)
        header = read_request_header(frame, flexible=flexible)
        request = decode_body(api.request_schema(api_key, api_version), frame, header.header_size)
        schema = api.response_schema(api_key, api_version)
        enabled = self.settings.mechanisms
        mechanism = str(request.mechanism)
        if mechanism not in enabled:
            self.state = State.FAILED
            reply = Respond(correlation_id, api.response_header_flexible(api_key, api_version),
                            make(schema, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled))
            return Failed(reply, f"unsupported SASL mechanism {mechanism[:64]!r} (enabled: {', '.join(enabled)})", "?")
        if self._reauthenticating and mechanism != self.mechanism:
            self.state = State.FAILED
            reply = Respond(correlation_id, api.response_header_flexible(api_key, api_version),
                            make(schema, error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled))
            return Failed(reply, f"re-authentication with mechanism {mechanism} after {self.mechanism}", "?")
        self.mechanism = mechanism
        self._server = self.settings.servers[mechanism]()
        self.state = State.AUTHENTICATE if api_version >= 1 else State.TOKEN_V0
        return Respond(correlation_id, api.response_header_flexible(api_key, api_version),
                       make(schema, error_code=ErrorCode.none, mechanisms=enabled))

    def _authenticate(self, token: bytes, request: tuple[int, int] | None, now_ms: int) -> Action:
        server = self._server
        assert server is not None  # set by the handshake that led here
        error: str | None = None
        principal = ""
        challenge = b""
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationError as e:
            error = str(e)
            if self._reauthenticating:
                # Kafka's SaslServerAuthenticator says which (reauthInfo.authenticationOrReauthenticationText).
                error = error.replace("failed during authentication", "failed during re-authentication", 1)
        if error is None and not server.complete:
            # A multi-round mechanism (SCRAM, a failed OAUTHBEARER): send the challenge, await the next token.
            if request is None:
                return RawToken(challenge)
            return self._authenticate_response(request, ErrorCode.none, None, 0, challenge)
        if error is None:
            principal = f"User:{server.authorization_id}"
        if error is None and self._reauthenticating and principal != self.principal:
            # Kafka's SaslServerAuthenticator: a re-authentication must keep the principal.
            # Kafka's message, which prints a principal as type.name.
            old, new = (str(p).replace(":", ".", 1) for p in (self.principal, principal))
            error = f"Cannot change principals during re-authentication from {old}: {new}"
        if error is not None:
            self.state = State.FAILED
            reply = None if request is None else self._authenticate_response(request, ErrorCode.sasl_authentication_failed, error, 0)
            return Failed(reply, error, server.user)
        lifetime = self.settings.max_reauth_ms
        credential = server.credential_lifetime_ms
        if credential is not None:  # Kafka: min(connections.max.reauth.ms, the credential's time left)
            credential = max(0, credential)
            lifetime = min(lifetime, credential) if lifetime > 0 else credential
        self.session_expires_ms = now_ms + lifetime if lifetime > 0 or credential is not None else None
        self.principal = principal
        self.state = State.COMPLETE
        self._server = None
        reauthenticated, self._reauthenticating = self._reauthenticating, False
        reply: Respond | RawToken = (
            RawToken(challenge) if request is None else self._authenticate_response(request, ErrorCode.none, None, lifetime, challenge)
        )
        return Succeeded(principal, reply, reauthenticated)

    @staticmethod
    def _authenticate_response(request: tuple[int, int], error: ErrorCode, message: str | None, lifetime: int,
                               challenge: bytes = b"") -> Respond:
        correlation_id, version = request
        schema = api.response_schema(ApiKey.SASL_AUTHENTICATE, version)
        # session_lifetime_ms (v1+; kio's session_lifetime): make() drops it for v0. Capped where a
        # timedelta ends (a token's exp or connections.max.reauth.ms can be any long; 2**53 ms is 285,000 years).
        response = make(schema, error_code=error, error_message=message, auth_bytes=challenge,
                        session_lifetime=timedelta(milliseconds=min(lifetime, 2**53)))
        return Respond(correlation_id, api.response_header_flexible(ApiKey.SASL_AUTHENTICATE, version), response)
