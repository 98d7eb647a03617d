"""TLS on client listeners: one `ssl.SSLContext` per SSL listener, built at startup and rebuilt
when the broker's dynamic keystore keys change (`build_with_keystore`, `check_reconfigurable`:
Kafka's SslFactory.reconfigure / validateReconfiguration; applied by kavka.broker.node).

Kafka's keys (DefaultSslEngineFactory), each read for the listener as `listener.name.<name>.<key>`
if set, else `<key>` (BrokerConfig.ssl_value):

- keystore: `ssl.keystore.type` PEM -- a file (`ssl.keystore.location`, certificate chain and
  private key, the key decrypted with `ssl.key.password`) or inline (`ssl.keystore.certificate.chain`
  + `ssl.keystore.key`); PKCS12 -- a file opened with `ssl.keystore.password` (cryptography's
  loader; `ssl.key.password`, if set, must be the same). JKS was refused by kavka.config.
- truststore (the CAs that sign client certificates): PEM file or inline
  `ssl.truststore.certificates`, or PKCS12 with `ssl.truststore.password`.
- `ssl.client.auth` none / requested / required -> CERT_NONE / CERT_OPTIONAL / CERT_REQUIRED.
- `ssl.enabled.protocols` and `ssl.protocol` -> minimum and maximum TLS versions;
  `ssl.cipher.suites` -> `set_ciphers` (TLS 1.2; OpenSSL keeps its own TLS 1.3 suites).

The `ssl` module loads a certificate chain and key only from a path, so inline PEM and PKCS12 keys
are written to a private (0600) temporary file that is removed as soon as the context has read it;
the key in that file is encrypted with a one-time random password. Any failure is a `TlsConfigError`
naming the key and never showing a password or key material.

`peer_principal` gives a connection's principal from its client certificate
(`ssl.principal.mapping.rules`, kavka.principal). Called from the event-loop thread at startup and
per connection.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import re
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from kavka.client import security
from kavka.client.security import ClientSecurity
from kavka.config import KEYSTORE_KEYS, SSL_CONFIGS, BrokerConfig
from kavka.principal import ANONYMOUS, Rule, map_dn, parse_rules

log = logging.getLogger("kavka.tls")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# TLS 1.3 suite names (the same in IANA and OpenSSL spelling): Python cannot choose among them.
_TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
)
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
HANDSHAKE_TIMEOUT_S = 10.0


class TlsConfigError(Exception):
    """An SSL listener cannot be set up; names the key, never a secret."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(slots=True)
class ListenerTls:
    """What an SSL listener needs per connection: its context and its principal rules.

    `context` is replaced when the keystore is reloaded (`reload_keystore`): each accept reads it,
    so new connections get the new certificate and open ones keep the context they were made with."""

    listener: str
    context: ssl.SSLContext
    rules: tuple[Rule, ...]
    certificate: x509.Certificate | None = None  # the served leaf certificate
    keystore: dict[str, Any] | None = None  # the dynamic keystore overrides the context was built with
    keystore_mtime: int | None = None  # the keystore file's modification time (ns) when it was read


def dynamic_keystore_key(name: str) -> tuple[str, str] | None:
    """`listener.name.<l>.ssl.keystore.location` -> (l, "ssl.keystore.location"); None for other keys."""
    if not name.startswith("listener.name."):
        return None
    parts = name.split(".", 3)
    if len(parts) < 4 or parts[3] not in KEYSTORE_KEYS:
        return None
    return parts[2], parts[3]


def dynamic_keystore(configs: dict[str, str], listener: str) -> dict[str, Any]:
    """The listener's dynamic keystore overrides among a broker's dynamic configs, parsed."""
    out = {}
    for name, raw in configs.items():
        k = dynamic_keystore_key(name)
        if k is not None and k[0] == listener.lower():
            out[name] = SSL_CONFIGS[k[1]].parse(raw)
    return out


def build_listener_tls(config: BrokerConfig) -> dict[str, ListenerTls]:
    """Every SSL listener's context, by listener name (TlsConfigError naming the key)."""
    return {ep.name: _build(config, ep.name) for ep in config.ssl_listeners()}


def build_with_keystore(config: BrokerConfig, listener: str, overrides: dict[str, Any]) -> ListenerTls:
    """The listener's TLS with dynamic keystore overrides (TlsConfigError naming the key)."""
    return _build(config, listener, overrides)


def check_reconfigurable(old: ListenerTls, new: ListenerTls) -> None:
    """Kafka's SslFactory.validateReconfiguration: the new certificate keeps the old one's subject
    DN and subject alternative names (kavka has no ssl.allow.dn.changes / ssl.allow.san.changes)."""
    if old.certificate is None or new.certificate is None:
        return
    key = f"listener.name.{old.listener.lower()}.ssl.keystore.location"
    if old.certificate.subject != new.certificate.subject:
        raise TlsConfigError(
            key, f"the new certificate's subject {rfc2253(new.certificate.subject)} differs from the current "
                 f"{rfc2253(old.certificate.subject)} (kavka does not support ssl.allow.dn.changes)")
    if _sans(old.certificate) != _sans(new.certificate):
        raise TlsConfigError(key, "the new certificate's subject alternative names differ from the current ones "
                                  "(kavka does not support ssl.allow.san.changes)")


def _sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {str(n.value) for n in ext.value}


def peer_principal(tls: ListenerTls, ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str:
    """`User:<mapped DN>` of the client certificate, `User:ANONYMOUS` without one
    (kavka.principal.NoMatchingRule if no rule maps its DN)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    dn = rfc2253(x509.load_der_x509_certificate(der).subject)
    return f"User:{map_dn(tls.rules, dn)}"


# The attribute keywords of Java's X500Principal.getName() (RFC 2253), the DN Kafka maps.
_RFC2253_KEYWORDS = frozenset(
    {NameOID.COMMON_NAME, NameOID.COUNTRY_NAME, NameOID.LOCALITY_NAME, NameOID.STATE_OR_PROVINCE_NAME,
     NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME, NameOID.STREET_ADDRESS,
     NameOID.DOMAIN_COMPONENT, NameOID.USER_ID}
)


def rfc2253(name: x509.Name) -> str:
    """A DN as Java prints it for Kafka (RFC 2253): last RDN first, keywords for the attributes it
    knows, and any other attribute (emailAddress, serialNumber...) as its OID with the value's DER
    encoding in hex: `CN=alice,1.2.840.113549.1.9.1=#1609616c69636540782e79,O=acme`."""
    rdns = []
    for rdn in reversed(name.rdns):
        parts = []
        for attr in rdn:
            if attr.oid in _RFC2253_KEYWORDS:
                parts.append(attr.rfc4514_string())
            else:
                parts.append(f"{attr.oid.dotted_string}=#{_der_value(attr).hex()}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _der_value(attr: x509.NameAttribute) -> bytes:
    """The DER TLV of a string attribute's value (tag from its ASN.1 string type)."""
    value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
    tag = attr._type.value  # the ASN.1 string type the certificate used (no public accessor)
    data = value.encode({30: "utf-16-be", 28: "utf-32-be"}.get(tag, "utf-8"))
    n = len(data)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + data


@dataclass(frozen=True, slots=True)
class _Keys:
    """One listener's view of the ssl.* keys: its value and the key that set it (for messages)."""

    config: BrokerConfig
    listener: str
    overrides: dict[str, Any]  # dynamic per-broker listener.name.<l>.ssl.keystore* values

    def _own(self, key: str) -> str:
        return f"listener.name.{self.listener.lower()}.{key}"

    def value(self, key: str) -> Any:
        if self._own(key) in self.overrides:
            return self.overrides[self._own(key)]
        return self.config.ssl_value(self.listener, key)

    def name(self, key: str) -> str:
        return self._own(key) if self._own(key) in self.overrides else self.config.ssl_key(self.listener, key)


def _build(config: BrokerConfig, listener: str, overrides: dict[str, Any] | None = None) -> ListenerTls:
    keys = _Keys(config, listener, dict(overrides or {}))
    value, name = keys.value, keys.name
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [_VERSIONS[p] for p in value("ssl.enabled.protocols")]
    ctx.minimum_version = min(enabled)
    highest = max(enabled)
    if value("ssl.protocol") == "TLSv1.2":
        highest = ssl.TLSVersion.TLSv1_2
        if ctx.minimum_version > highest:
            raise TlsConfigError(name("ssl.protocol"), "TLSv1.2 is below every protocol in ssl.enabled.protocols")
    ctx.maximum_version = highest
    _set_ciphers(ctx, name("ssl.cipher.suites"), list(value("ssl.cipher.suites")))
    certificate = _load_keystore(ctx, keys)
    client_auth = str(value("ssl.client.auth"))
    has_truststore = _load_truststore(ctx, keys)
    if client_auth != "none" and not has_truststore:
        raise TlsConfigError(
            name("ssl.client.auth"),
            f"{client_auth} needs the CAs of client certificates: set ssl.truststore.location or ssl.truststore.certificates",
        )
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    location = value("ssl.keystore.location")
    try:
        mtime = os.stat(str(location)).st_mtime_ns if location else None
    except OSError:
        mtime = None
    return ListenerTls(listener, ctx, parse_rules(str(value("ssl.principal.mapping.rules"))), certificate, dict(keys.overrides), mtime)


def build_client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The client side of `listener`, for kavka's own connections to it (Kafka's brokers read the
    same listener.name.<l>.ssl.* / ssl.* keys for their outgoing connections): the peer's
    certificate must chain to the truststore (the system's CAs without one), its host name is checked
    when ssl.endpoint.identification.algorithm=https, and the keystore, if set, is presented when
    the peer asks for a client certificate. TlsConfigError naming the key."""
    return _client_context(_Keys(config, listener, {}))


@dataclass(frozen=True, slots=True)
class _PropertyKeys:
    """A client's properties (`--command-config`) seen as _Keys: typed ssl.* values by their own names."""

    values: dict[str, Any]

    def value(self, key: str) -> Any:
        return self.values[key] if key in self.values else SSL_CONFIGS[key].default

    def name(self, key: str) -> str:
        return key


def build_client_context_from_properties(values: dict[str, Any]) -> ssl.SSLContext:
    """A Kafka client's ssl.* properties (typed by SSL_CONFIGS) -> its SSLContext, as
    `build_client_context` (TlsConfigError naming the key)."""
    return _client_context(_PropertyKeys(values))


def _client_context(keys: Any) -> ssl.SSLContext:
    value, name = keys.value, keys.name
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    enabled = [_VERSIONS[p] for p in value("ssl.enabled.protocols")]
    ctx.minimum_version = min(enabled)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2 if value("ssl.protocol") == "TLSv1.2" else max(enabled)
    if ctx.minimum_version > ctx.maximum_version:
        raise TlsConfigError(name("ssl.protocol"), "TLSv1.2 is below every protocol in ssl.enabled.protocols")
    _set_ciphers(ctx, name("ssl.cipher.suites"), list(value("ssl.cipher.suites")))
    if value("ssl.keystore.location") or value("ssl.keystore.certificate.chain") or value("ssl.keystore.key"):
        _load_keystore(ctx, keys)
    if not _load_truststore(ctx, keys):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = value("ssl.endpoint.identification.algorithm") == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def reload_client_keystore(ctx: ssl.SSLContext, config: BrokerConfig, listener: str, overrides: dict[str, Any]) -> None:
    """Load the listener's (dynamically altered) keystore into a client context in place: the
    next connection made with it presents the new certificate; open ones keep theirs."""
    _load_keystore(ctx, _Keys(config, listener, dict(overrides)))


def build_client_security(
    config: BrokerConfig, listener: str, mechanism_key: str = "sasl.mechanism.inter.broker.protocol",
) -> ClientSecurity:
    """How this node's connections reach `listener` on its peers: TLS for SSL and SASL_SSL, the
    node's own login for SASL with the mechanism `mechanism_key` names (sasl.mechanism.inter.broker.protocol
    or sasl.mechanism.controller.protocol; kavka.config validated both)."""
    protocol = config.security_protocol(listener)
    ctx = build_client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(listener, protocol, ctx)
    mechanism = config[mechanism_key]
    username, password = config.broker_login(listener, mechanism)
    if mechanism == security.PLAIN:
        return security.plain(listener, protocol, username, password, ctx)
    return security.scram(listener, protocol, mechanism, username, password, ctx)


def _set_ciphers(ctx: ssl.SSLContext, key: str, suites: list[str]) -> None:
    """Kafka's list names the suites of every enabled version. Python's ssl sets TLS 1.2 suites
    only, and TLS 1.3 always offers OpenSSL's own; so a list must leave nothing unsaid: no TLS 1.2
    suites with TLSv1.2 enabled, or a TLS 1.3 set other than OpenSSL's, stops startup."""
    if not suites:
        return  # OpenSSL's defaults for every version
    tls12 = [s for s in suites if s not in _TLS13_SUITES]
    tls13 = {s for s in suites if s in _TLS13_SUITES}
    for suite in tls12:  # each one, so an unknown name is refused rather than silently dropped
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(suite)
        except ssl.SSLError:
            raise TlsConfigError(key, f"unknown cipher suite {suite!r} (OpenSSL names, e.g. ECDHE-RSA-AES256-GCM-SHA384)") from None
    offered13 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"}
    serves12 = ctx.minimum_version <= ssl.TLSVersion.TLSv1_2
    serves13 = ctx.maximum_version >= ssl.TLSVersion.TLSv1_3
    if serves12 and not tls12:
        raise TlsConfigError(key, "names no TLS 1.2 suite but TLSv1.2 is enabled: add TLS 1.2 suites or set ssl.enabled.protocols=TLSv1.3")
    if not serves12 and tls12:
        raise TlsConfigError(key, f"names TLS 1.2 suites {tls12} but TLSv1.2 is not enabled")
    if serves13 and tls13 != offered13:
        raise TlsConfigError(
            key,
            f"TLS 1.3 always offers OpenSSL's suites {sorted(offered13)} (Python cannot narrow them): "
            "list exactly those, or disable TLSv1.3 in ssl.enabled.protocols",
        )
    if not serves13 and tls13:
        raise TlsConfigError(key, f"names TLS 1.3 suites {sorted(tls13)} but TLSv1.3 is not enabled")
    if tls12:
        ctx.set_ciphers(":".join(tls12))


def _read(key: str, location: object) -> bytes:
    try:
        return Path(str(location)).read_bytes()
    except OSError as e:
        raise TlsConfigError(key, f"cannot read {location}: {e.strerror}") from None


def _secret(v: object) -> bytes | None:
    return None if v is None or v == "" else str(v).encode()


def _pem_blocks(key: str, text: str, *, kinds: tuple[str, ...]) -> list[str]:
    """PEM blocks of `text` re-wrapped: inline values from a properties file lose their line breaks
    (a `\\` continuation joins lines), as Kafka's PemParser accepts."""
    out = []
    for kind, body in _PEM_BLOCK.findall(text):
        if not any(kind.endswith(k) for k in kinds):
            continue
        b64 = re.sub(r"\s+", "", body)
        try:
            base64.b64decode(b64, validate=True)
        except ValueError:
            raise TlsConfigError(key, f"a {kind} block is not valid base64") from None
        lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
        out.append(f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----\n")
    if not out:
        raise TlsConfigError(key, f"no PEM {' or '.join(kinds)} block found")
    return out


def _load_chain_from_memory(ctx: ssl.SSLContext, key: str, pem: bytes, password: bytes | None) -> None:
    """load_cert_chain needs a path: a 0600 temporary file, removed once read."""
    fd, path = tempfile.mkstemp(prefix="kavka-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password or b"")
    except ssl.SSLError as e:
        raise TlsConfigError(key, f"the certificate chain and private key do not load: {e.reason or e}") from None
    finally:
        os.unlink(path)


def _load_keystore(ctx: ssl.SSLContext, keys: _Keys) -> x509.Certificate:
    value, name = keys.value, keys.name
    kind = value("ssl.keystore.type")
    location = value("ssl.keystore.location")
    chain, key = value("ssl.keystore.certificate.chain"), value("ssl.keystore.key")
    if chain or key:
        if kind != "PEM":
            raise TlsConfigError(name("ssl.keystore.type"), "must be PEM with ssl.keystore.certificate.chain / ssl.keystore.key")
        if value("ssl.keystore.password"):
            raise TlsConfigError(name("ssl.keystore.password"), "cannot be used with a PEM keystore; only ssl.key.password encrypts its key")
        if location:
            raise TlsConfigError(name("ssl.keystore.location"), "set either it or ssl.keystore.certificate.chain and ssl.keystore.key, not both")
        if not chain or not key:
            missing = "ssl.keystore.certificate.chain" if not chain else "ssl.keystore.key"
            raise TlsConfigError(name(missing), "missing: an inline PEM keystore needs both the chain and the key")
        certs = _pem_blocks(name("ssl.keystore.certificate.chain"), str(chain), kinds=("CERTIFICATE",))
        pem_keys = _pem_blocks(name("ssl.keystore.key"), str(key), kinds=("PRIVATE KEY",))
        return _load_pem_key_and_chain(ctx, keys, pem_keys[0].encode(), "".join(certs).encode())
    if not location:
        raise TlsConfigError(
            name("ssl.keystore.location"),
            "missing: an SSL listener needs a keystore (or ssl.keystore.certificate.chain and ssl.keystore.key)",
        )
    data = _read(name("ssl.keystore.location"), location)
    if kind == "PEM":
        if value("ssl.keystore.password"):
            raise TlsConfigError(name("ssl.keystore.password"), "cannot be used with a PEM keystore; only ssl.key.password encrypts its key")
        text = data.decode("ascii", "replace")
        certs = _pem_blocks(name("ssl.keystore.location"), text, kinds=("CERTIFICATE",))
        pem_keys = _pem_blocks(name("ssl.keystore.location"), text, kinds=("PRIVATE KEY",))
        return _load_pem_key_and_chain(ctx, keys, pem_keys[0].encode(), "".join(certs).encode())
    key_password = value("ssl.key.password")
    if key_password not in (None, "") and key_password != value("ssl.keystore.password"):
        # cryptography opens a PKCS12 file with one password; Kafka's default of equal passwords works.
        raise TlsConfigError(
            name("ssl.key.password"),
            "differs from ssl.keystore.password: kavka opens a PKCS12 keystore and its key with one password "
            "(re-export the key entry with the store's password, or leave ssl.key.password unset)",
        )
    try:
        store = pkcs12.load_pkcs12(data, _secret(value("ssl.keystore.password")))
    except ValueError:
        raise TlsConfigError(
            name("ssl.keystore.password"),
            f"cannot open the PKCS12 keystore {location}: wrong password or not a PKCS12 file",
        ) from None
    if store.key is None or store.cert is None:
        raise TlsConfigError(name("ssl.keystore.location"), f"{location} holds no private key with its certificate")
    certs = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    _load_key_object(ctx, name("ssl.keystore.location"), store.key, certs)
    return certs[0]


def _load_pem_key_and_chain(ctx: ssl.SSLContext, keys: _Keys, key_pem: bytes, chain_pem: bytes) -> x509.Certificate:
    name = keys.name
    try:
        key = serialization.load_pem_private_key(key_pem, _secret(keys.value("ssl.key.password")))
    except (ValueError, TypeError):
        raise TlsConfigError(name("ssl.key.password"), "the private key does not decrypt with it (wrong, missing or not needed)") from None
    try:
        certs = x509.load_pem_x509_certificates(chain_pem)
    except ValueError:
        raise TlsConfigError(name("ssl.keystore.location"), "the certificate chain does not parse") from None
    _load_key_object(ctx, name("ssl.keystore.location"), key, certs)
    return certs[0]


def _load_key_object(ctx: ssl.SSLContext, key_name: str, key: PrivateKeyTypes, certs: list[x509.Certificate]) -> None:
    now = datetime.datetime.now(datetime.UTC)
    if not certs[0].not_valid_before_utc <= now <= certs[0].not_valid_after_utc:
        # Kafka serves it too; clients will refuse the handshake, so say so once, at startup.
        log.warning("%s: the server certificate %s is not valid now (valid from %s to %s); clients will refuse it",
                    key_name, rfc2253(certs[0].subject), certs[0].not_valid_before_utc, certs[0].not_valid_after_utc)
    one_time = secrets.token_hex(16).encode()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time),
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    _load_chain_from_memory(ctx, key_name, pem, one_time)


def _load_truststore(ctx: ssl.SSLContext, keys: _Keys) -> bool:
    value, name = keys.value, keys.name
    kind = value("ssl.truststore.type")
    location = value("ssl.truststore.location")
    inline = value("ssl.truststore.certificates")
    if inline:
        if kind != "PEM":
            raise TlsConfigError(name("ssl.truststore.type"), "must be PEM with ssl.truststore.certificates")
        if location:
            raise TlsConfigError(name("ssl.truststore.location"), "set either it or ssl.truststore.certificates, not both")
        pem = "".join(_pem_blocks(name("ssl.truststore.certificates"), str(inline), kinds=("CERTIFICATE",)))
        _verify_locations(ctx, name("ssl.truststore.certificates"), pem)
        return True
    if not location:
        return False
    data = _read(name("ssl.truststore.location"), location)
    if kind == "PEM":
        if value("ssl.truststore.password"):
            raise TlsConfigError(name("ssl.truststore.password"), "cannot be used with a PEM truststore")
        pem = "".join(_pem_blocks(name("ssl.truststore.location"), data.decode("ascii", "replace"), kinds=("CERTIFICATE",)))
    else:
        try:
            store = pkcs12.load_pkcs12(data, _secret(value("ssl.truststore.password")))
        except ValueError:
            raise TlsConfigError(
                name("ssl.truststore.password"),
                f"cannot open the PKCS12 truststore {location}: wrong password or not a PKCS12 file",
            ) from None
        certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
        if not certs:
            raise TlsConfigError(name("ssl.truststore.location"), f"{location} holds no certificate")
        pem = "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    _verify_locations(ctx, name("ssl.truststore.location"), pem)
    return True


def _verify_locations(ctx: ssl.SSLContext, key: str, pem: str) -> None:
    try:
        ctx.load_verify_locations(cadata=pem)
    except ssl.SSLError as e:
        raise TlsConfigError(key, f"the CA certificates do not load: {e.reason or e}") from None
