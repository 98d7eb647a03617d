"""A Java Kafka client's security properties -> `ClientSecurity`: how kavka's clients reach a
secured listener with the keys Kafka's clients and tools take. Two callers: the CLI's
`--command-config <client.properties>` (kavka.cli.command_config) and the Spark connector's
`kafka.`-prefixed options (kavka.spark.options; built on the driver and again on each executor,
since an SSLContext does not pickle).

Honoured keys (anything else is refused, naming the key, rather than ignored):

    security.protocol        PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
    ssl.truststore.type/location/password, ssl.truststore.certificates
                             the CAs the broker's certificate must chain to (none: the system's)
    ssl.keystore.type/location/password, ssl.key.password, ssl.keystore.certificate.chain/key
                             a client certificate, for listeners with ssl.client.auth
    ssl.endpoint.identification.algorithm, ssl.enabled.protocols, ssl.protocol, ssl.cipher.suites
    sasl.mechanism           PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is refused)
    sasl.jaas.config         PlainLoginModule / ScramLoginModule with username and password

The keystore and truststore types are PEM or PKCS12 (JKS is refused with the conversion command,
as for the broker). ssl.* keys without SSL, and sasl.* keys without SASL, would have no effect and
are refused. Errors name the key and never show a password. Pure parsing and file reads; any
thread.

Layering debt: the parsing of the ssl.* values and the SSLContext builder are the broker's
(kavka.config's SSL_CONFIGS, kavka.broker.tls) and the JAAS parser is kavka.sasl's, so this module
sits above the broker layer (scripts/check_layers.py), not in kavka.client; they are imported only
when properties are parsed, so a PLAINTEXT client (the Spark connector's default) loads none of
them; a secured one loads those modules (no sockets, no event loop) on Spark's executors too.
Moving the client-side TLS builder and the ssl.* key definitions under kavka.client would end it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kavka.client import security
from kavka.client.security import ClientSecurity

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CLIENT_SSL_KEYS = frozenset(
    {"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
     "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
     "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.endpoint.identification.algorithm",
     "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites"}
)
SASL_KEYS = frozenset({"sasl.mechanism", "sasl.jaas.config"})
SECURITY_KEYS = CLIENT_SSL_KEYS | SASL_KEYS | {"security.protocol"}
SECRET_KEYS = frozenset({"ssl.truststore.password", "ssl.truststore.certificates", "ssl.keystore.password",
                         "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "sasl.jaas.config"})
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {security.PLAIN: PLAIN_LOGIN_MODULE, security.SCRAM_SHA_256: SCRAM_LOGIN_MODULE,
                  security.SCRAM_SHA_512: SCRAM_LOGIN_MODULE}


class CommandConfigError(ValueError):
    """Client properties kavka cannot honour; names the key, never a secret."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def load_command_config(path: Path, *, login: bool = False) -> ClientSecurity:
    """The security of the CLI's connections from a client properties file (CommandConfigError);
    ``login`` as `client_security`."""
    from kavka.config import ConfigError, read_properties

    try:
        props = read_properties(path)
    except ConfigError as e:  # the file cannot be read
        raise CommandConfigError("--command-config", str(e).split(": ", 1)[-1]) from None
    return client_security(props, login=login)


def client_security(props: dict[str, str], *, who: str = "kavka's CLI", login: bool = False) -> ClientSecurity:
    """The security these properties describe (CommandConfigError naming the key). With ``login``
    (the web console's log-in page) a SASL protocol may come without ``sasl.jaas.config``: the
    result then names the mechanism and carries no credentials (``sasl`` None); each user brings
    their own."""
    from kavka.sasl import JaasError, parse_jaas_config

    for key in sorted(props):
        if key not in SECURITY_KEYS:
            raise CommandConfigError(key, f"not supported by {who} (it honours security.protocol, the ssl.* "
                                     "truststore, keystore and protocol keys, sasl.mechanism and sasl.jaas.config); remove it")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError("security.protocol", f"{protocol!r} is not one of {', '.join(PROTOCOLS)}")
    tls, sasl = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
    for key in sorted(props):
        if (key in CLIENT_SSL_KEYS and not tls) or (key in SASL_KEYS and not sasl):
            raise CommandConfigError(key, f"security.protocol is {protocol}, so this key would have no effect")
    ctx = _ssl_context(props) if tls else None
    if not sasl:
        return ClientSecurity(protocol, protocol, ctx)
    mechanism = props.get("sasl.mechanism", "").strip()
    if mechanism not in _LOGIN_MODULES:
        shown = mechanism or "GSSAPI (Kafka's default, which needs Kerberos)"
        raise CommandConfigError("sasl.mechanism", f"{shown} is not supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    text = props.get("sasl.jaas.config")
    if not text and login:
        return ClientSecurity(protocol, protocol, ctx, mechanism)
    if not text:
        raise CommandConfigError("sasl.jaas.config", f'missing: {_LOGIN_MODULES[mechanism]} required username="..." password="...";')
    try:
        entry = parse_jaas_config(text)
    except JaasError as e:
        raise CommandConfigError("sasl.jaas.config", f"invalid JAAS entry: {e}") from None
    if entry.login_module != _LOGIN_MODULES[mechanism]:
        raise CommandConfigError("sasl.jaas.config", f"{mechanism} needs the login module {_LOGIN_MODULES[mechanism]}, "
                                 f"not {entry.login_module}")
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or not password:
        raise CommandConfigError("sasl.jaas.config", "the entry needs the username and password options")
    if mechanism == security.PLAIN:
        return security.plain(protocol, protocol, username, password, ctx)
    return security.scram(protocol, protocol, mechanism, username, password, ctx)


def _ssl_context(props: dict[str, str]) -> Any:
    from kavka.broker.tls import TlsConfigError, build_client_context_from_properties
    from kavka.config import JKS_CONVERSION, SSL_CONFIGS, ConfigError

    values: dict[str, Any] = {}
    for key in sorted(CLIENT_SSL_KEYS & props.keys()):
        try:
            values[key] = SSL_CONFIGS[key].parse(props[key])
        except ConfigError as e:
            raise CommandConfigError(key, str(e).split(": ", 1)[-1]) from None
    for store in ("keystore", "truststore"):
        if values.get(f"ssl.{store}.location") and values.get(f"ssl.{store}.type", SSL_CONFIGS[f"ssl.{store}.type"].default) == "JKS":
            raise CommandConfigError(f"ssl.{store}.type", f"JKS (Kafka's default when unset): {JKS_CONVERSION}")
    try:
        return build_client_context_from_properties(values)
    except TlsConfigError as e:
        raise CommandConfigError(e.key, str(e).split(": ", 1)[-1]) from None
