"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with Kafka's two server-side token validators (KIP-768).

The exchange, as Kafka's OAuthBearerSaslServer. The client's initial response is

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01 ...]\\x01

(`OAuthBearerClientInitialResponse`'s grammar: a SASLNAME authzid, extension keys `[A-Za-z]+`,
values `[\\x21-\\x7E \\t\\r\\n]+`). A malformed message fails at once with Kafka's generic message.
A token the validator refuses is answered with a challenge, the JSON error
`{"status":"invalid_token"}` (RFC 7628 section 3.2.2; `insufficient_scope` with the scope when a
required scope is missing); the client acknowledges with a lone `\\x01` and the exchange fails with
that JSON as the message. A good token completes the exchange: the principal is `User:<name>`,
the name from the token's principal claim; an authzid, if sent, must equal it. Extensions are
accepted as Kafka's default validators accept them (all valid, none used).

The validators (chosen by `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`):

- `UnsecuredValidator` (unset, Kafka's OAuthBearerUnsecuredValidatorCallbackHandler): for
  development only. `alg: none` JWS, no signature; options from the JAAS entry
  (`unsecuredValidatorPrincipalClaimName`, `...ScopeClaimName`, `...RequiredScope`,
  `...AllowableClockSkewMs`); exp required, iat optional, both checked against the clock.
- `JwksValidator` (Kafka's OAuthBearerValidatorCallbackHandler): a signed JWT (RS*, PS*, ES*;
  never `none` or a symmetric algorithm) verified with a key from a JWKS (`JwksFile`: a `file:`
  URL read at startup; `RefreshingJwks`: an http(s) URL fetched at startup and refreshed every
  `sasl.oauthbearer.jwks.endpoint.refresh.ms` in a thread of its own, and soon after a token names
  an unknown kid -- that token still fails, as Kafka's RefreshingHttpsJwks does); exp, iat and
  the sub claim required; nbf, aud, iss checked with `sasl.oauthbearer.clock.skew.seconds`
  of leeway (jose4j's rules, which Kafka uses).

Validation reads only cached keys and the injected wall clock, so it runs on the event-loop
thread (per authentication); the refresh thread only swaps the cached key tuple. Messages never
hold the token (a secret); refusal reasons are logged at INFO on `kavka.oauthbearer`.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
import threading
import time
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kavka.sasl import JaasEntry, SaslAuthenticationError

log = logging.getLogger("kavka.oauthbearer")

OAUTHBEARER = "OAUTHBEARER"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
JWKS_VALIDATOR_CLASSES = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  # before Kafka 3.4
})
UNSECURED_VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
# Kafka's message for a malformed client message (SaslServerAuthenticator, for any SaslException).
INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
_CONTROL_A = b"\x01"

# OAuthBearerClientInitialResponse's grammar (RFC 7628 section 3.1).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
_SCOPE_ITEM = re.compile(r"[\x23-\x5B\x5D-\x7E\x21]+")


class OAuthBearerConfigError(ValueError):
    """A validator setting kavka cannot honour; `key` names the JAAS option or config key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class TokenInvalid(Exception):
    """A token the validator refuses: `str(e)` is the reason (for the log, never the token)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope  # set: a required scope is missing (insufficient_scope)


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal_name: str
    lifetime_ms: int  # exp, ms since the epoch
    start_ms: int | None  # iat, ms since the epoch
    scope: frozenset[str]


class TokenValidator(Protocol):
    def validate(self, token: str) -> ValidatedToken: ...


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    token: str
    authorization_id: str
    extensions: Mapping[str, str]


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """RFC 7628's client initial response (SaslAuthenticationError with Kafka's generic message)."""
    text = message.decode("utf-8", "replace")
    m = _CLIENT_FIRST.fullmatch(text)
    if m is None:
        raise SaslAuthenticationError(INVALID_CREDENTIALS)
    properties: dict[str, str] = {}
    for pair in m["kvpairs"].split("\x01"):
        if pair:
            k, _, v = pair.partition("=")
            properties[k] = v
    auth = properties.pop("auth", None)
    a = _AUTH.fullmatch(auth) if auth is not None else None
    if a is None or a["scheme"].lower() != "bearer":
        raise SaslAuthenticationError(INVALID_CREDENTIALS)
    authzid = (m["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return ClientInitialResponse(a["token"], authzid, properties)


class OAuthBearerServer:
    """One OAUTHBEARER exchange (a kavka.sasl.SaslServer)."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator, clock: Callable[[], float] = time.time) -> None:
        self.validator = validator
        self.clock = clock
        self.complete = False
        self.authorization_id = ""
        self.user = "?"
        self.credential_lifetime_ms: int | None = None  # ms left of the token when the exchange completed
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: the OAUTHBEARER exchange is already complete")
        if token == _CONTROL_A and self._error is not None:
            raise SaslAuthenticationError(self._error)  # the client acknowledged our error (RFC 7628 3.2.3)
        self._error = None
        response = parse_client_initial_response(token)
        try:
            validated = self.validator.validate(response.token)
        except TokenInvalid as e:
            log.info("OAUTHBEARER token refused: %s", e)
            self._error = _json_error(e.scope)
            return self._error.encode()
        if response.authorization_id and response.authorization_id != validated.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id "
                f"({response.authorization_id[:256]}) that is different from the token's principal name ({validated.principal_name})")
        self.user = self.authorization_id = validated.principal_name
        self.credential_lifetime_ms = validated.lifetime_ms - int(self.clock() * 1000)
        self.complete = True
        return b""


def _json_error(scope: str | None) -> str:
    # OAuthBearerSaslServer.jsonErrorResponse, byte for byte.
    if scope is None:
        return '{"status":"invalid_token"}'
    return '{"status":"insufficient_scope", "scope":"' + scope + '"}'


# ----------------------------------------------------------------- JWT pieces


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part.replace("+", "-").replace("/", "_") + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise TokenInvalid(f"malformed {what}: not Base64URL-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenInvalid(f"malformed {what}: not a JSON object")
    return value


def _is_number(v: Any) -> bool:
    # JSON allows NaN, Infinity and integers of any size; a NumericDate is a finite number.
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _scope_of(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset({value.strip()}) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(s).strip() for s in value if str(s).strip())
    return frozenset()


def _millis(seconds: float) -> int:
    return round(seconds * 1000)


# ----------------------------------------------------------------- the unsecured validator


@dataclass(frozen=True, slots=True)
class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (with OAuthBearerUnsecuredJws)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0
    clock: Callable[[], float] = time.time

    @staticmethod
    def from_jaas(entry: JaasEntry, clock: Callable[[], float] = time.time) -> UnsecuredValidator:
        opts = entry.options
        skew_text = opts.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise OAuthBearerConfigError("unsecuredValidatorAllowableClockSkewMs", "not an integer") from None
        if skew < 0:
            raise OAuthBearerConfigError("unsecuredValidatorAllowableClockSkewMs", f"must not be negative: {skew}")
        required: list[str] = []
        for item in opts.get("unsecuredValidatorRequiredScope", "").split(" "):
            if item and not _SCOPE_ITEM.fullmatch(item):
                raise OAuthBearerConfigError("unsecuredValidatorRequiredScope", f"invalid scope value: {item}")
            if item:
                required.append(item)
        return UnsecuredValidator(
            principal_claim=opts.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
            scope_claim=opts.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
            required_scope=tuple(required),
            clock_skew_ms=skew,
            clock=clock,
        )

    def validate(self, token: str) -> ValidatedToken:
        if ".." in token:
            raise TokenInvalid("Malformed compact serialization contains '..'")
        splits = token.split(".")
        if len(splits) != 3:
            raise TokenInvalid("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _b64url_json(splits[0], "header")
        claims = _b64url_json(splits[1], "claims")
        if header.get("alg") != "none":
            raise TokenInvalid("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenInvalid("Unsecured JWS must not contain a digital signature")
        exp, iat = claims.get("exp"), claims.get("iat")
        if exp is None:
            raise TokenInvalid("No expiration time in JWT")
        if not _is_number(exp):
            raise TokenInvalid("The 'exp' claim was not of type Number")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"No principal name in JWT claim: {self.principal_claim}")
        if iat is not None and not _is_number(iat):
            raise TokenInvalid("The 'iat' claim was not of type Number")
        now_ms = int(self.clock() * 1000)
        if iat is not None and 1000 * iat > now_ms + self.clock_skew_ms:
            raise TokenInvalid(f"The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) "
                               f"plus allowable clock skew ({self.clock_skew_ms} ms)")
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise TokenInvalid(f"The indicated time ({now_ms} ms) minus allowable clock skew ({self.clock_skew_ms} ms) "
                               f"was on or after the Expiration Time value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenInvalid(f"The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)")
        scope = _scope_of(claims.get(self.scope_claim))
        for needed in self.required_scope:
            if needed not in scope:
                raise TokenInvalid(f"The provided scope ({sorted(scope)}) was missing a required scope ({needed})",
                                   scope="[" + ", ".join(self.required_scope) + "]")
        return ValidatedToken(principal, _millis(exp), None if iat is None else _millis(iat), scope)


# ----------------------------------------------------------------- JWKS and the secured validator

# Asymmetric JWS algorithms (RFC 7518) and the JWK key type each needs. `none` and the HMAC
# algorithms are refused: a public key set cannot verify them.
_ALGORITHMS = {
    **{f"RS{n}": "RSA" for n in (256, 384, 512)},
    **{f"PS{n}": "RSA" for n in (256, 384, 512)},
    **{f"ES{n}": "EC" for n in (256, 384, 512)},
}
_MAX_KID = 1000  # RefreshingHttpsJwks.MISSING_KEY_ID_MAX_KEY_LENGTH


def parse_jwks(document: bytes | str, where: str) -> tuple[Any, ...]:
    """The usable verification keys of a JWKS document (ValueError naming `where`, never the keys)."""
    from joserfc import jwk

    try:
        data = json.loads(document)
    except (ValueError, RecursionError):
        raise ValueError(f"{where} is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError(f"{where} is not a JSON Web Key Set (no \"keys\" list)")
    keys = []
    for entry in data["keys"]:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC") or entry.get("use", "sig") != "sig":
            continue  # kinds kavka cannot verify with, and encryption keys: skipped, as jose4j's selector does
        try:
            keys.append(jwk.import_key(entry))
        except Exception:  # joserfc raises several kinds on a malformed key  # noqa: BLE001
            log.warning("%s: skipping a malformed %s key (kid %r)", where, entry.get("kty"), str(entry.get("kid"))[:64])
    if not keys:
        log.warning("%s holds no RSA or EC signature key: every OAUTHBEARER token will be refused", where)
    return tuple(keys)


class JwksSource(Protocol):
    location: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def keys(self) -> tuple[Any, ...]: ...
    def maybe_expedite_refresh(self, kid: str) -> None: ...


class JwksFile:
    """A JWKS in a local file, read once at startup (Kafka's JwksFileVerificationKeyResolver)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = f"file:{path}"
        self._keys: tuple[Any, ...] = ()

    def start(self) -> None:
        self._keys = parse_jwks(self.path.read_bytes(), self.location)

    def stop(self) -> None:
        pass

    def keys(self) -> tuple[Any, ...]:
        return self._keys

    def maybe_expedite_refresh(self, kid: str) -> None:
        pass  # a file is read once, as Kafka reads it


def http_get(url: str, timeout_s: float = 10.0) -> bytes:
    # https uses the system's CA certificates (Python's default context).
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 -- scheme checked at startup
        return resp.read(4 << 20)


class RefreshingJwks:
    """A JWKS at an http(s) URL (Kafka's RefreshingHttpsJwks): fetched by `start` (call it off
    the event loop: it blocks), then refreshed every `refresh_ms` on a daemon thread, and within
    moments when a token names a kid not in the set (at most once a minute per kid, 16 kids
    remembered). A refresh that fails is tried again after `retry_backoff_ms`, doubling, until
    `retry_backoff_max_ms` have passed (Kafka's Retry); then it keeps the keys it has and logs a
    WARNING. The fetch at startup is tried once, as Kafka's init is."""

    MISSING_KID_WAIT_S = 60.0  # MISSING_KEY_ID_CACHE_IN_FLIGHT_MS

    def __init__(self, url: str, refresh_ms: int, *, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10000,
                 fetch: Callable[[str], bytes] = http_get, clock: Callable[[], float] = time.monotonic) -> None:
        self.location = url
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._stopped = threading.Event()
        self.fetch = fetch
        self.clock = clock
        self._keys: tuple[Any, ...] = ()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self.refreshes = 0  # completed fetches, for tests and the log

    def _load(self) -> None:
        keys = parse_jwks(self.fetch(self.location), self.location)
        self._keys = keys  # one reference swap: readers see the old tuple or the new one
        self.refreshes += 1
        with self._lock:
            for k in keys:
                self._missing.pop(str(k.kid), None)

    def start(self) -> None:
        self._load()
        self._thread = threading.Thread(target=self._run, name="oauthbearer-jwks-refresh", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.refresh_ms / 1000)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._load_with_retry()
                log.debug("OAuth JWKS refresh of %s complete", self.location)
            except Exception as e:  # noqa: BLE001 -- a refresh must never end the thread
                log.warning("OAuth JWKS refresh of %s failed (%s: %s); keeping the previous keys",
                            self.location, type(e).__name__, str(e)[:200])

    def _load_with_retry(self) -> None:
        end = time.monotonic() + self.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                self._load()
                return
            except Exception as e:  # noqa: BLE001 -- any failure is retried until the deadline
                wait_s = min(self.retry_backoff_ms * 2 ** (attempt - 1) / 1000, end - time.monotonic())
                if wait_s <= 0 or self._stopping:
                    raise
                log.warning("OAuth JWKS refresh of %s: attempt %d failed (%s); retrying in %d ms",
                            self.location, attempt, type(e).__name__, wait_s * 1000)
                if self._stopped.wait(wait_s):
                    raise

    def stop(self) -> None:
        self._stopping = True
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)

    def keys(self) -> tuple[Any, ...]:
        return self._keys

    def maybe_expedite_refresh(self, kid: str) -> None:
        if len(kid) > _MAX_KID:
            return
        now = self.clock()
        with self._lock:
            due = self._missing.get(kid)
            if due is not None and due > now:
                return
            self._missing[kid] = now + self.MISSING_KID_WAIT_S
            self._missing.move_to_end(kid)
            while len(self._missing) > 16:
                self._missing.popitem(last=False)
        log.info("OAUTHBEARER: no key %r in %s; refreshing it now", kid[:64], self.location)
        self._wake.set()


@dataclass(frozen=True, slots=True)
class JwksValidatorConfig:
    """The sasl.oauthbearer.* keys of one listener (Kafka's names and defaults)."""

    jwks_url: str
    refresh_ms: int = 3600000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"


def jwks_source(config: JwksValidatorConfig) -> JwksSource:
    """The key source of a jwks.endpoint.url (OAuthBearerConfigError for a URL Kafka refuses)."""
    url = config.jwks_url
    key = "sasl.oauthbearer.jwks.endpoint.url"
    parsed = urllib.parse.urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        if not path.exists():
            raise OAuthBearerConfigError(key, f"contains a file ({path}) that doesn't exist")
        if path.is_dir():
            raise OAuthBearerConfigError(key, f"references a directory ({path}), not a file")
        return JwksFile(path)
    if scheme in ("http", "https"):
        if not parsed.hostname:
            raise OAuthBearerConfigError(key, f"contains a URL ({url}) without a host")
        return RefreshingJwks(url, config.refresh_ms, retry_backoff_ms=config.retry_backoff_ms,
                              retry_backoff_max_ms=config.retry_backoff_max_ms)
    if not scheme:
        raise OAuthBearerConfigError(key, f"contains a URL ({url}) that is missing the protocol")
    raise OAuthBearerConfigError(key, f"contains a URL ({url}) that contains an invalid protocol ({scheme}); "
                                      'only "http", "https", and "file" protocol are supported')


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (ValidatorAccessTokenValidator on jose4j)."""

    def __init__(self, config: JwksValidatorConfig, source: JwksSource, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.source = source
        self.clock = clock

    def validate(self, token: str) -> ValidatedToken:
        from joserfc import jws
        from joserfc.errors import JoseError

        token = token.strip()
        if not token:
            raise TokenInvalid("Empty JWT provided; expected three sections (header, payload, and signature)")
        splits = token.split(".")
        if len(splits) != 3 or not all(s.strip() for s in splits):
            raise TokenInvalid("Malformed JWT provided; expected three sections (header, payload, and signature)")
        header = _b64url_json(splits[0], "JWS header")
        alg = header.get("alg")
        if alg not in _ALGORITHMS:
            raise TokenInvalid(f"'{str(alg)[:32]}' is not a permitted algorithm (an asymmetric JWS algorithm "
                               f"is required: {', '.join(_ALGORITHMS)})")
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else None
        candidates = [k for k in self.source.keys()
                      if k.key_type == _ALGORITHMS[alg] and (kid is None or k.kid == kid) and k.get("alg", alg) == alg]
        if not candidates:
            self.source.maybe_expedite_refresh(kid or "")
            raise TokenInvalid(f"Unable to find a suitable verification key for JWS w/ kid {str(kid)[:64]!r} and alg {alg} "
                               f"from {self.source.location}")
        payload: bytes | None = None
        for key in candidates:
            try:
                payload = jws.deserialize_compact(token, key, algorithms=[alg]).payload
                break
            except (JoseError, ValueError, TypeError):
                continue
        if payload is None:
            raise TokenInvalid("JWS signature is invalid")
        try:
            claims = json.loads(payload)
        except (ValueError, RecursionError):
            raise TokenInvalid("the JWT payload is not JSON") from None
        if not isinstance(claims, dict):
            raise TokenInvalid("the JWT payload is not a JSON object")
        return self._check_claims(claims)

    def _check_claims(self, claims: dict[str, Any]) -> ValidatedToken:
        c = self.config
        now = self.clock()
        skew = c.clock_skew_s
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        for name, value in (("exp", exp), ("iat", iat), ("nbf", nbf)):
            if value is not None and not _is_number(value):
                raise TokenInvalid(f"the '{name}' claim is not a NumericDate")
        if exp is None:
            raise TokenInvalid("No Expiration Time (exp) claim present")
        if iat is None:
            raise TokenInvalid("No Issued At (iat) claim present")
        if now - skew >= exp:
            raise TokenInvalid(f"The JWT is no longer valid - the evaluation time {int(now)} is on or after the Expiration "
                               f"Time (exp={exp}) claim value (even when providing {skew} seconds of leeway to account for clock skew)")
        if nbf is not None and now + skew < nbf:
            raise TokenInvalid(f"The JWT is not yet valid as the evaluation time {int(now)} is before the NotBefore "
                               f"(nbf={nbf}) claim time (even when providing {skew} seconds of leeway to account for clock skew)")
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if aud is not None and (audiences is None or not all(isinstance(a, str) for a in audiences)):
            raise TokenInvalid("the 'aud' claim is neither a string nor an array of strings")
        if audiences is None:
            if c.expected_audience:
                raise TokenInvalid("No Audience (aud) claim present")
        elif not any(a in c.expected_audience for a in audiences):
            # jose4j: with no expected audience configured, a token that names one is refused too.
            raise TokenInvalid(f"Audience (aud) claim {audiences} " + (
                "doesn't contain an acceptable identifier" if c.expected_audience
                else "present in the JWT but no expected audience value(s) were provided (sasl.oauthbearer.expected.audience)"))
        if c.expected_issuer is not None:
            iss = claims.get("iss")
            if iss is None:
                raise TokenInvalid(f"No Issuer (iss) claim present but was expecting {c.expected_issuer}")
            if iss != c.expected_issuer:
                raise TokenInvalid(f"Issuer (iss) claim value ({str(iss)[:256]}) doesn't match expected value of {c.expected_issuer}")
        sub = claims.get(c.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise TokenInvalid(f"{c.sub_claim} value must be a non-empty string")
        raw_scope = claims.get(c.scope_claim)
        scopes: Sequence[Any] = [raw_scope] if isinstance(raw_scope, str) else raw_scope if isinstance(raw_scope, list) else []
        seen: set[str] = set()
        for s in scopes:
            if not isinstance(s, str) or not s.strip():
                raise TokenInvalid(f"{c.scope_claim} value must be non-empty strings")
            if s.strip() in seen:
                raise TokenInvalid(f"{c.scope_claim} value must not contain duplicates - {s.strip()[:64]} already present")
            seen.add(s.strip())
        if exp < 0 or iat < 0:
            raise TokenInvalid("exp and iat must be non-negative")
        return ValidatedToken(sub.strip(), _millis(exp), _millis(iat), frozenset(seen))
