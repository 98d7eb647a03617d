"""SASL/PLAIN credentials: Kafka's JAAS entry syntax and RFC 4616 PLAIN tokens. Pure functions, no I/O.

JAAS (Kafka's `sasl.jaas.config`, parsed by its JaasConfig with a StreamTokenizer): exactly one
login module entry,

    <module class> <control flag> [<key>=<value> ...] ;

where the flag is required, requisite, sufficient or optional and a value is a double- or
single-quoted string (backslash escapes `\\"`, `\\'`, `\\\\`, `\\n`, `\\t`, `\\r`) or a bare word. Anything
else is a `JaasError` carrying the character position -- never the text, which holds passwords.

PLAIN (RFC 4616): the client's one token is `authzid NUL authcid NUL password`, UTF-8. An authzid, if
given, must equal the authcid (Kafka's PlainSaslServer). The users are the `user_<name>="<password>"`
options of `org.apache.kafka.common.security.plain.PlainLoginModule` (Kafka's
PlainServerCallbackHandler); passwords are compared with `hmac.compare_digest`. Failures raise
`SaslAuthenticationError` with Kafka's messages, which name neither the password nor whether the
user exists.

Called from the event-loop thread (per authentication) and at startup (config validation).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

PLAIN = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
# Kafka's messages (PlainSaslServer), sent to the client in SaslAuthenticate's error_message.
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_WORD_EXTRA = frozenset("._-$/:@+")


class JaasError(ValueError):
    """A JAAS entry that does not parse; the message gives a position, never the text."""


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is Kafka's and safe to send to the client and log."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(repr=False)  # holds passwords


def _is_word(c: str) -> bool:
    return c.isalnum() or c in _WORD_EXTRA


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def word(self, what: str) -> str:
        self.skip_space()
        start = self.pos
        while self.pos < len(self.text) and _is_word(self.text[self.pos]):
            self.pos += 1
        if self.pos == start:
            raise JaasError(f"expected {what} at position {start}")
        return self.text[start : self.pos]

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise JaasError(f"expected {what} at position {self.pos}")
        self.pos += 1

    def value(self) -> str:
        quote = self.peek()
        if quote not in ('"', "'"):
            return self.word("a value")
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            self.pos += 1
            if c == quote:
                return "".join(out)
            if c == "\\":
                if self.pos >= len(self.text):
                    break
                e = self.text[self.pos]
                if e not in _ESCAPES:
                    raise JaasError(f"unknown escape at position {self.pos - 1}")
                out.append(_ESCAPES[e])
                self.pos += 1
            else:
                out.append(c)
        raise JaasError(f"unterminated quoted value starting at position {start}")


def parse_jaas_config(text: str) -> JaasEntry:
    """One login module entry (JaasError with a position on anything else)."""
    t = _Tokens(text)
    if t.at_end():
        raise JaasError("empty: expected a login module entry")
    module = t.word("a login module class name")
    flag_pos = t.pos
    flag = t.word("a control flag (required, requisite, sufficient or optional)")
    if flag.lower() not in CONTROL_FLAGS:
        raise JaasError(f"expected a control flag (required, requisite, sufficient or optional) at position {flag_pos + 1}")
    options: dict[str, str] = {}
    while t.peek() not in (";", ""):
        key_pos = t.pos
        key = t.word("an option name or ';'")
        t.expect("=", "'=' after an option name")
        if key in options:
            raise JaasError(f"option at position {key_pos + 1} is set twice")
        options[key] = t.value()
    t.expect(";", "';' ending the entry")
    if not t.at_end():
        raise JaasError(f"more than one login module entry (Kafka allows one) at position {t.pos}")
    return JaasEntry(module, flag.lower(), options)


@dataclass(frozen=True, slots=True)
class PlainToken:
    authzid: str
    authcid: str
    password: str = field(repr=False)


def parse_plain_token(token: bytes) -> PlainToken:
    """RFC 4616 `authzid NUL authcid NUL password` (SaslAuthenticationError with Kafka's messages)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, authcid, password = parts
    if not authcid:
        raise SaslAuthenticationError("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationError("Authentication failed: password not specified")
    if authzid and authzid != authcid:
        raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is different from username")
    return PlainToken(authzid, authcid, password)


@dataclass(frozen=True, slots=True)
class PlainUsers:
    """The users a PLAIN listener accepts (PlainLoginModule's `user_<name>` options)."""

    passwords: Mapping[str, bytes] = field(repr=False)

    @staticmethod
    def from_jaas(entry: JaasEntry) -> PlainUsers:
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise JaasError(f"the login module must be {PLAIN_LOGIN_MODULE} for PLAIN, not {entry.login_module}")
        users = {k[len("user_"):]: v.encode() for k, v in entry.options.items() if k.startswith("user_") and len(k) > len("user_")}
        if not users:
            raise JaasError("no user_<name>=\"<password>\" option: no client could authenticate")
        return PlainUsers(users)

    def authenticate(self, token: bytes) -> str:
        """The authenticated user name (the authcid), or SaslAuthenticationError."""
        parsed = parse_plain_token(token)
        expected = self.passwords.get(parsed.authcid)
        given = parsed.password.encode()
        # Compare against something even for an unknown user, so the answer takes alike.
        ok = hmac.compare_digest(given, expected if expected is not None else b"\0" + given)
        if not ok or expected is None:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        return parsed.authcid


class SaslServer(Protocol):
    """One authentication exchange of one mechanism, as Java's javax.security.sasl.SaslServer.

    `evaluate` takes each token the client sends and returns the challenge to send back (b"" for
    none), raising SaslAuthenticationError (a message safe to send and log) when it fails; once
    `complete`, `authorization_id` is the user name the principal is made of. `user` is the name
    the client claims, as soon as a token shows it ('?' before), for log lines only.
    `credential_lifetime_ms` is how long the credential had left when the exchange completed (an
    OAUTHBEARER token's exp), or None: the session never outlives it (Kafka's
    CREDENTIAL.LIFETIME.MS negotiated property).
    Called from the event-loop thread only.
    """

    mechanism: str
    complete: bool
    authorization_id: str
    user: str
    credential_lifetime_ms: int | None

    def evaluate(self, token: bytes) -> bytes: ...


SaslServerFactory = Callable[[], SaslServer]


class PlainServer:
    """SASL/PLAIN (RFC 4616): one token, no challenge."""

    mechanism = PLAIN

    def __init__(self, users: PlainUsers) -> None:
        self.users = users
        self.complete = False
        self.authorization_id = ""
        self.user = "?"
        self.credential_lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: the PLAIN exchange is already complete")
        self.user = attempted_user(token)
        self.authorization_id = self.users.authenticate(token)
        self.complete = True
        return b""


def attempted_user(token: bytes) -> str:
    """The authcid a token names, for a log line (never the password); '?' if unreadable."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return "?"
    return parts[1].decode("utf-8", "replace")[:256] or "?"
