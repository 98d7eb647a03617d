"""TLS settings: which ssl.* keys kavka honours, which still stop startup naming the key, the SSL
context built from them (kavka.broker.tls), and Kafka's principal mapping rules (kavka.principal)."""

from __future__ import annotations

import ssl
import tempfile

import pytest

import kavka.controller.placement  # noqa: F401 -- registers broker.replica.placer's check
from kavka.broker.tls import TlsConfigError, build_listener_tls, rfc2253
from kavka.config import BROKER_CONFIGS, ConfigError, build_config
from kavka.principal import NoMatchingRule, map_dn, parse_rules
from tests.tls_certs import CA, write_pem_keystore, write_pkcs12

TWO_LISTENERS = {"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}


@pytest.fixture(scope="module")
def ca():
    return CA.create()


@pytest.fixture(scope="module")
def server(ca):
    return ca.issue("localhost")


def cfg(**props: str):
    return build_config({**TWO_LISTENERS, **{k.replace("_", "."): v for k, v in props.items()}})


def refused(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        build_config({**TWO_LISTENERS, **props})
    return e.value


# ----------------------------------------------------------------- config refusals


def test_jks_is_refused_with_the_conversion_command():
    e = refused({"ssl.keystore.location": "/etc/kafka/broker.jks"})  # JKS: Kafka's default type
    assert e.key == "ssl.keystore.type"
    assert "keytool -importkeystore -srckeystore X.jks -destkeystore X.p12 -deststoretype PKCS12" in str(e)
    e = refused({"listener.name.ssl.ssl.truststore.location": "/t.jks", "listener.name.ssl.ssl.truststore.type": "JKS",
                 "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"})
    assert e.key == "listener.name.ssl.ssl.truststore.type"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"}, "sasl.enabled.mechanisms"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.jaas.config": "x"}, "sasl.jaas.config"),
        ({"listener.name.ssl.plain.sasl.jaas.config": "x"}, "listener.name.ssl.plain.sasl.jaas.config"),
        ({"sasl.mechanism.controller.protocol": "PLAIN"}, "sasl.mechanism.controller.protocol"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
          "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:SASL_SSL"}, "sasl.mechanism.controller.protocol"),
        # JVM-only and dynamic-reload keys.
        ({"ssl.keymanager.algorithm": "SunX509"}, "ssl.keymanager.algorithm"),
        ({"ssl.engine.factory.class": "x.Y"}, "ssl.engine.factory.class"),
        ({"listener.name.ssl.ssl.provider": "SUN"}, "listener.name.ssl.ssl.provider"),
        # Quota settings beyond the client quotas.
        ({"client.quota.callback.class": "x.Y"}, "client.quota.callback.class"),
        ({"max.connection.creation.rate": "10"}, "max.connection.creation.rate"),
        ({"listener.name.ssl.max.connection.creation.rate": "10"}, "listener.name.ssl.max.connection.creation.rate"),
    ],
)
def test_what_is_not_in_the_slice_still_stops_startup(props, key):
    e = refused(props)
    assert e.key == key
    assert "not supported" in str(e) or "no effect" in str(e)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"ssl.enabled.protocols": "TLSv1.2,TLSv1.1"}, "ssl.enabled.protocols"),
        ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
        ({"listener.name.ssl.ssl.enabled.protocols": "TLSv9"}, "listener.name.ssl.ssl.enabled.protocols"),
        ({"ssl.client.auth": "always"}, "ssl.client.auth"),
        ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"}, "ssl.principal.mapping.rules"),
        ({"ssl.principal.mapping.rules": "NOPE"}, "ssl.principal.mapping.rules"),
        ({"ssl.endpoint.identification.algorithm": "ldaps"}, "ssl.endpoint.identification.algorithm"),
        ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ],
)
def test_bad_values_name_the_key(props, key):
    assert refused(props).key == key


def test_an_ssl_key_without_an_ssl_listener_is_refused_as_without_effect():
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", "ssl.keystore.location": "/k.p12"})
    assert e.value.key == "ssl.keystore.location" and "no effect" in str(e.value)
    e2 = refused({"listener.name.external.ssl.keystore.location": "/k.p12"})
    assert e2.key == "listener.name.external.ssl.keystore.location" and "no effect" in str(e2)


def test_a_secret_never_appears_in_a_config_error():
    # A password is a string, so nothing parses it; the check is the message format of sensitive keys.
    d = BROKER_CONFIGS["ssl.keystore.password"]
    assert d.sensitive and d._shown("hunter2") == "[hidden]"
    for key in ("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
                "ssl.keystore.certificate.chain", "ssl.truststore.certificates"):
        assert BROKER_CONFIGS[key].sensitive, key


def test_kafkas_default_protocol_map_has_ssl_and_an_explicit_map_names_others():
    c = cfg()
    assert [e.name for e in c.ssl_listeners()] == ["SSL"]
    c = build_config({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL",
                      "listener.name.external.ssl.client.auth": "required", "ssl.client.auth": "none"})
    assert [e.name for e in c.ssl_listeners()] == ["EXTERNAL"]
    assert c.ssl_value("EXTERNAL", "ssl.client.auth") == "required"
    assert c.ssl_key("EXTERNAL", "ssl.client.auth") == "listener.name.external.ssl.client.auth"
    assert c.ssl_value("EXTERNAL", "ssl.protocol") == "TLSv1.3"


# ----------------------------------------------------------------- the SSL context


def tls_of(**props: str):
    return build_listener_tls(build_config({**TWO_LISTENERS, **props}))["SSL"]


def test_pem_file_keystore_with_an_encrypted_key(tmp_path, server):
    ks = write_pem_keystore(tmp_path / "server.pem", server, key_password="k3y-secret")
    t = tls_of(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(ks), "ssl.key.password": "k3y-secret"})
    assert t.context.verify_mode == ssl.CERT_NONE
    assert t.context.minimum_version == ssl.TLSVersion.TLSv1_2 and t.context.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(TlsConfigError) as e:
        tls_of(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(ks), "ssl.key.password": "wrong-one"})
    assert e.value.key == "ssl.key.password" and "wrong-one" not in str(e.value)


def test_inline_pem_keystore_and_truststore_joined_by_properties_continuations(tmp_path, ca, server, monkeypatch):
    # A properties file's `\` continuations join the PEM's lines: kavka re-wraps them, as Kafka does.
    # The key's temporary file goes to a directory of this test's own: /tmp is shared with the other
    # xdist worker's brokers, whose inline PEM keys pass through kavka-tls-* files there too.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    flat = lambda b: b.decode().replace("\n", "")  # noqa: E731
    t = tls_of(**{
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": flat(server.cert_pem()),
        "ssl.keystore.key": flat(server.key_pem()),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": flat(ca.pem()),
        "ssl.client.auth": "required",
    })
    assert t.context.verify_mode == ssl.CERT_REQUIRED
    assert not list(private_tmp.glob("kavka-tls-*"))  # the key's temporary file is gone


def test_pkcs12_keystore_and_truststore(tmp_path, ca, server):
    ks = write_pkcs12(tmp_path / "server.p12", server, "st0re-pw")
    ts = write_pkcs12(tmp_path / "trust.p12", None, "trust-pw", cas=[ca.identity.cert])
    base = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(ks), "ssl.keystore.password": "st0re-pw",
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(ts), "ssl.truststore.password": "trust-pw",
            "listener.name.ssl.ssl.client.auth": "requested", "ssl.enabled.protocols": "TLSv1.3"}
    t = tls_of(**base)
    assert t.context.verify_mode == ssl.CERT_OPTIONAL
    assert t.context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert tls_of(**{**base, "ssl.key.password": "st0re-pw"})  # Kafka's usual: the same password twice
    for key, bad in (("ssl.keystore.password", "not-it"), ("ssl.truststore.password", "nor-this"), ("ssl.key.password", "other")):
        with pytest.raises(TlsConfigError) as e:
            tls_of(**{**base, key: bad})
        assert e.value.key == key and bad not in str(e.value) and "st0re-pw" not in str(e.value)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"ssl.keystore.type": "PEM"}, "ssl.keystore.location"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/no/such/file.pem"}, "ssl.keystore.location"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/no/such/file.p12"}, "ssl.keystore.location"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ks}", "ssl.cipher.suites": "NOT-A-CIPHER"}, "ssl.cipher.suites"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ks}", "ssl.client.auth": "required"}, "ssl.client.auth"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ks}", "ssl.keystore.password": "x"}, "ssl.keystore.password"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "{chain}", "ssl.keystore.key": "{key}",
          "ssl.keystore.password": "x"}, "ssl.keystore.password"),
        ({"ssl.keystore.type": "PEM", "listener.name.ssl.ssl.keystore.location": "/nope"}, "listener.name.ssl.ssl.keystore.location"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ks}", "ssl.protocol": "TLSv1.2",
          "ssl.enabled.protocols": "TLSv1.3"}, "ssl.protocol"),
    ],
)
def test_a_listener_that_cannot_be_set_up_names_the_key(tmp_path, server, props, key):
    ks = write_pem_keystore(tmp_path / "server.pem", server)
    with pytest.raises(TlsConfigError) as e:
        pem_chain, pem_key = server.cert_pem().decode(), server.key_pem().decode()
        tls_of(**{k: v.format(ks=ks, chain=pem_chain, key=pem_key) for k, v in props.items()})
    assert e.value.key == key


def test_a_key_that_is_not_the_certificates_and_an_expired_certificate(tmp_path, ca, server, caplog):
    other = ca.issue("localhost")
    (tmp_path / "mixed.pem").write_bytes(other.key_pem() + server.cert_pem())
    with pytest.raises(TlsConfigError) as e:
        tls_of(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "mixed.pem")})
    assert e.value.key == "ssl.keystore.location" and "do not load" in str(e.value)
    old = write_pem_keystore(tmp_path / "old.pem", ca.issue("localhost", expired=True))
    assert tls_of(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(old)})  # served, as Kafka does
    assert "is not valid now" in caplog.text and "clients will refuse it" in caplog.text


TLS13 = "TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,TLS_AES_128_GCM_SHA256"


def test_cipher_suites_are_set_and_must_cover_every_enabled_version(tmp_path, server):
    ks = write_pem_keystore(tmp_path / "server.pem", server)
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(ks)}
    t = tls_of(**base, **{"ssl.cipher.suites": f"ECDHE-ECDSA-AES256-GCM-SHA384,{TLS13}"})
    tls12 = [c["name"] for c in t.context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES256-GCM-SHA384"]
    assert tls_of(**base, **{"ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384", "ssl.enabled.protocols": "TLSv1.2"})
    assert tls_of(**base, **{"ssl.cipher.suites": TLS13, "ssl.enabled.protocols": "TLSv1.3"})
    for props in (
        {"ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384"},  # TLS 1.3 would offer suites not listed
        {"ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384,TLS_AES_256_GCM_SHA384"},  # nor can it narrow them
        {"ssl.cipher.suites": TLS13},  # TLS 1.2 enabled without a suite
        {"ssl.cipher.suites": f"ECDHE-ECDSA-AES256-GCM-SHA384,{TLS13}", "ssl.enabled.protocols": "TLSv1.2"},
        {"ssl.cipher.suites": f"ECDHE-ECDSA-AES256-GCM-SHA384,{TLS13}", "ssl.enabled.protocols": "TLSv1.3"},
    ):
        with pytest.raises(TlsConfigError) as e:
            tls_of(**base, **props)
        assert e.value.key == "ssl.cipher.suites", props


# ----------------------------------------------------------------- principal mapping (Kafka's SslPrincipalMapperTest)


def test_principal_mapping_rules():
    rules = parse_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT"
    )
    assert map_dn(rules, "CN=kafka-broker,OU=ServiceUsers,O=Org,C=US") == "kafka-broker"
    assert map_dn(rules, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US") == "duke@javasoft"
    assert map_dn(rules, "OU=JavaSoft,cn=duke,O=Sun") == "DUKE"
    assert map_dn(rules, "OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert map_dn(parse_rules("DEFAULT"), "CN=x") == "CN=x"
    with pytest.raises(NoMatchingRule):
        map_dn(parse_rules("RULE:^CN=(.*),O=a$/$1/"), "CN=x,O=b")
    for bad in ("RULE:a", "RULE:^CN=(.*)/$1", "DEFAULT,foo", "RULE:[/x/", "default", "DEFAUL", "DEFAULT/L",
                "rule:^CN=(.*?)$/$1/", "RULE:^CN=(.*?)$/$1/L/U", "RULE:^CN=(.*?)$/L", "RULE:^CN=(.*?)$/LU"):
        with pytest.raises(ValueError):
            parse_rules(bad)


@pytest.mark.parametrize(
    ("rules", "count"),
    [("", 0), ("DEFAULT", 1), ("RULE://", 1), ("  RULE:// ,  DEFAULT  ", 2), (",   , , ,  ", 0),
     (",,RULE://,,,DEFAULT,,", 2), ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,DEFAULT", 3),
     ("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", 1)],
)
def test_rule_splitting_as_kafka(rules, count):
    assert len(parse_rules(rules)) == count


def test_replacement_follows_java():
    # An escaped comma inside a CN; a backslash in the replacement makes the next character literal.
    rules = parse_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert map_dn(rules, r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"
    assert map_dn(parse_rules(r"RULE:^CN=(\w+),O=(\w+)$/$2\$$1-$3-$12/"), "CN=bob,O=acme") == "acme$bob-$3-bob2"
    with pytest.raises(NoMatchingRule):
        map_dn(parse_rules(""), "CN=anyone")  # no rules: every certificate fails, as in Kafka


def test_the_dn_is_printed_as_java_prints_it_for_kafka():
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "alice@x.y"),
        x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
    ])
    # Last RDN first; an attribute without an RFC 2253 keyword is its OID and its value's DER in hex.
    assert rfc2253(name) == "CN=alice,1.2.840.113549.1.9.1=#1609616c69636540782e79,O=Acme\\, Inc,C=US"


# ----------------------------------------------------------------- the dynamic keystore


def test_dynamic_keystore_overrides_and_the_dn_rule(ca, server, tmp_path):
    from kavka.broker.tls import (
        build_with_keystore,
        check_reconfigurable,
        dynamic_keystore,
        dynamic_keystore_key,
    )

    assert dynamic_keystore_key("listener.name.ssl.ssl.keystore.location") == ("ssl", "ssl.keystore.location")
    assert dynamic_keystore_key("listener.name.ssl.ssl.truststore.location") is None
    assert dynamic_keystore_key("ssl.keystore.location") is None
    a = write_pem_keystore(tmp_path / "a.pem", server)
    b = write_pem_keystore(tmp_path / "b.pem", ca.issue("localhost"), key_password="pw")
    other = write_pem_keystore(tmp_path / "other.pem", ca.issue("elsewhere"))
    config = cfg(ssl_keystore_type="PEM", ssl_keystore_location=str(a))
    old = build_listener_tls(config)["SSL"]
    image_configs = {"listener.name.ssl.ssl.keystore.location": str(b), "listener.name.ssl.ssl.key.password": "pw",
                     "listener.name.other.ssl.keystore.location": "/x", "log.retention.ms": "1"}
    overrides = dynamic_keystore(image_configs, "SSL")
    assert set(overrides) == {"listener.name.ssl.ssl.keystore.location", "listener.name.ssl.ssl.key.password"}
    new = build_with_keystore(config, "SSL", overrides)
    assert new.certificate is not None and new.certificate.serial_number != old.certificate.serial_number
    check_reconfigurable(old, new)  # same DN and SANs
    with pytest.raises(TlsConfigError, match="subject"):
        check_reconfigurable(old, build_with_keystore(config, "SSL", {"listener.name.ssl.ssl.keystore.location": str(other)}))
    with pytest.raises(TlsConfigError) as e:  # the dynamic key is named, the password is not shown
        build_with_keystore(config, "SSL", {**overrides, "listener.name.ssl.ssl.key.password": "wrong-pw"})
    assert e.value.key == "listener.name.ssl.ssl.key.password" and "wrong-pw" not in str(e.value)
