"""SASL/SCRAM (RFC 5802, RFC 7677): the mechanisms, the credential form, and the server exchange.

Mechanisms (Kafka's ScramMechanism): `SCRAM-SHA-256` (type 1 in the admin APIs and the metadata
records) and `SCRAM-SHA-512` (type 2), each with at least 4096 iterations.

Credential (what the metadata log keeps, Kafka's UserScramCredentialRecord; never the password):

    salt        random bytes chosen by whoever set the password
    iterations  PBKDF2 rounds: SaltedPassword = Hi(UTF-8(password), salt, iterations)
    stored_key  H(HMAC(SaltedPassword, "Client Key"))
    server_key  HMAC(SaltedPassword, "Server Key")

Exchange (`ScramServer`, Kafka's ScramSaslServer), two client tokens:

    client-first  gs2-header [m=...,] n=<saslname>,r=<client nonce>[,<ext>=<value>...]
                  gs2-header is "n," or "n,a=<authzid>," (no channel binding: "y" and "p" fail)
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 gs2-header>,r=<nonce>[,<ext>...],p=<base64 proof>
    server-final  v=<base64 ServerSignature>

The message grammars are Kafka's (ScramMessages: ASCII only; a SASL name escapes ',' as =2C and
'=' as =3D). An authzid, if given, must equal the user name. The `tokenauth` extension (delegation
tokens) fails: kavka has none. The final nonce must end with the server-first nonce (Kafka's
check), the channel binding must be the client's own gs2 header (RFC 5802 section 5.1), and the
proof is checked by comparing H(ClientProof XOR ClientSignature) with StoredKey in constant time.
An unknown user is led through the first round with a made-up salt, as if it existed, and fails
in the second, so the answer neither comes sooner nor differs from a wrong password's. Every failure is
`SaslAuthenticationError` with Kafka's one message (`Authentication failed during authentication
due to invalid credentials with SASL mechanism SCRAM-SHA-256`), except the authzid mismatch,
which Kafka reports as such.

Pure: the credential lookup and the nonce source are passed in; no I/O, no clock. Called on the
event-loop thread (one exchange per connection) and by the CLI and controller (`credential`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from kavka.sasl import SaslAuthenticationError


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    type: int  # Kafka's ScramMechanism type byte (admin APIs, metadata records)
    hash_name: str
    min_iterations: int = 4096

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in MECHANISMS.values()}
# ScramControlManager.MAX_ITERATIONS: an admin request above it is UNACCEPTABLE_CREDENTIAL.
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh / kafka-storage.sh when `iterations=` is not given
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def _hmac(mechanism: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mechanism.hash_name).digest()


def _h(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC over the mechanism's hash."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """StoredKey and ServerKey from a SaltedPassword (what AlterUserScramCredentials sends)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _h(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def credential(mechanism: ScramMechanism, password: str, *, salt: bytes | None = None,
               iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def username_from_saslname(saslname: str) -> str:
    # =2C first: "=3D2C" is the name "=2C", not ",".
    return saslname.replace("=2C", ",").replace("=3D", "=")


def saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


# Kafka's ScramMessages patterns (Java's [\x01-\x7F&&[^,]] written as ranges).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[a-zA-Z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
TOKEN_AUTH = "tokenauth"
_AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"


def _default_nonce() -> str:
    return secrets.token_urlsafe(24)  # [A-Za-z0-9_-]: printable, no comma


class ScramServer:
    """One SCRAM exchange (the SaslServer protocol of kavka.sasl), as Kafka's ScramSaslServer."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: Callable[[], str] = _default_nonce,
        fake_salt_key: bytes | None = None,
    ) -> None:
        self.mechanism = mechanism.name
        self._mech = mechanism
        self._lookup = lookup
        self._nonce = nonce
        self._fake_salt_key = fake_salt_key if fake_salt_key is not None else _PROCESS_SALT_KEY
        self.complete = False
        self.authorization_id = ""
        self.user = "?"
        self.credential_lifetime_ms: int | None = None  # a SCRAM credential does not expire
        self._round = 0
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce_full = ""
        self._username = ""

    def _fail(self) -> SaslAuthenticationError:
        self._round = -1
        self._credential = None
        return SaslAuthenticationError(
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}")

    def evaluate(self, token: bytes) -> bytes:
        if self._round == 0:
            return self._client_first(token)
        if self._round == 1:
            return self._client_final(token)
        raise self._fail()  # after completion or failure: Kafka's IllegalSaslStateException

    def _client_first(self, token: bytes) -> bytes:
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            raise self._fail() from None
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise self._fail()
        username = username_from_saslname(m["saslname"])
        self.user = username[:256]
        extensions = dict(e.split("=", 1) for e in m["extensions"][1:].split(",")) if m["extensions"] else {}
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise self._fail()  # delegation tokens: kavka has none (Kafka: "Invalid tokenId")
        if m["authzid"] is not None and username_from_saslname(m["authzid"]) != username:
            self._round = -1
            raise SaslAuthenticationError(_AUTHZID_MISMATCH)
        cred = self._lookup(username)
        if cred is not None and cred.iterations < self._mech.min_iterations:
            raise self._fail()
        self._known = cred is not None
        self._username = username
        if cred is None:
            # As if the user existed: a salt derived from the name, so asking twice gives the same.
            salt = hmac.new(self._fake_salt_key, f"{self.mechanism}:{username}".encode(), "sha256").digest()
            cred = ScramCredential(salt, b"", b"", DEFAULT_ITERATIONS)
        self._credential = cred
        self._gs2 = m["gs2"]
        self._client_first_bare = m["bare"]
        self._nonce_full = m["nonce"] + self._nonce()
        self._server_first = f"r={self._nonce_full},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._round = 1
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            raise self._fail() from None
        m = _CLIENT_FINAL.fullmatch(text)
        cred = self._credential
        if m is None or cred is None or not m["nonce"].endswith(self._nonce_full):
            raise self._fail()
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise self._fail() from None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = _hmac(self._mech, cred.stored_key or b"\0" * self._mech.digest_size, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        ok = hmac.compare_digest(_h(self._mech, client_key), cred.stored_key or b"\0" * self._mech.digest_size)
        if not (ok and self._known and channel == self._gs2.encode()):
            raise self._fail()
        server_signature = _hmac(self._mech, cred.server_key, auth_message)
        self._credential = None
        self.authorization_id = self._username
        self.complete = True
        self._round = 2
        return b"v=" + base64.b64encode(server_signature)


class ScramArgumentError(ValueError):
    """A `MECHANISM=[name=...,password=...]` argument that does not parse; never shows a secret."""


def parse_credential_argument(text: str, *, default_name: str | None = None) -> tuple[ScramMechanism, str, ScramCredential]:
    """Kafka's kafka-storage.sh `--add-scram` syntax (ScramParser), also kafka-configs.sh's
    `--add-config` value: `SCRAM-SHA-256=[name=alice,password=secret,iterations=8192,salt=<base64>]`
    or `saltedpassword=<base64>` with `salt` instead of `password`; a value may be double-quoted.
    `default_name` stands in for a missing `name` (the configs command's --entity-name)."""
    mech_name, sep, rest = text.strip().partition("=")
    if not sep:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument for {mech_name[:40]!r}")
    mechanism = MECHANISMS.get(mech_name)
    if mechanism is None:
        raise ScramArgumentError(f"The SCRAM mechanism {mech_name[:40]} is not supported (SCRAM-SHA-256, SCRAM-SHA-512)")
    if not rest.startswith("[") or not rest.endswith("]"):
        raise ScramArgumentError("Expected the configuration string to be enclosed in [ and ]")
    options: dict[str, str] = {}
    for part in rest[1:-1].split(","):
        key, eq, value = part.partition("=")
        if not eq:
            raise ScramArgumentError(f"No equals sign found in SCRAM component {key.strip()[:40]!r}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        options[key.strip()] = value
    name = options.pop("name", default_name)
    if not name:
        raise ScramArgumentError("You must supply 'name'")
    salt_given = "salt" in options
    try:
        salt = base64.b64decode(options.pop("salt"), validate=True) if salt_given else secrets.token_bytes(32)
    except (binascii.Error, ValueError):
        raise ScramArgumentError("Failed to decode the given salt (base64)") from None
    try:
        iterations = int(options.pop("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ScramArgumentError("Failed to parse the iterations count") from None
    if iterations < mechanism.min_iterations:
        raise ScramArgumentError(f"The 'iterations' value must be >= {mechanism.min_iterations} for {mechanism.name}")
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for {mechanism.name}")
    password = options.pop("password", None)
    salted_b64 = options.pop("saltedpassword", None)
    if options:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(options))}")
    if password is not None:
        salted = salted_password(mechanism, password, salt, iterations)
    elif salted_b64 is not None:
        if not salt_given:
            raise ScramArgumentError("You must supply 'salt' with 'saltedpassword'")
        try:
            salted = base64.b64decode(salted_b64, validate=True)
        except (binascii.Error, ValueError):
            raise ScramArgumentError("Failed to decode the given saltedpassword (base64)") from None
    else:
        raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword'")
    return mechanism, name, credential_from_salted(mechanism, salt, salted, iterations)


# The key of the made-up salts of unknown users: per process, so they cannot be precomputed.
_PROCESS_SALT_KEY = secrets.token_bytes(32)
