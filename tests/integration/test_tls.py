"""TLS on client listeners: real `kavka server` processes, certificates made in the test.

Two brokers for the whole module. The PEM broker has four listeners: PLAINTEXT (inter-broker),
SSL (a PEM keystore file with an encrypted key, no client certificates), MTLS (mapped to SSL, its
own inline PEM keystore and truststore, ssl.client.auth=required and a principal mapping rule) and
OLD (an expired server certificate). The PKCS12 broker serves SSL from a PKCS12 keystore. Each of
confluent-kafka, kafka-python and aiokafka produces, consumes in a group and runs an admin call
over SSL and over MTLS with a certificate of its own, whose principal (User:<CN>, by the mapping
rule) the broker logs; kcat produces, consumes, consumes in a group (-G) and lists metadata over
both. Refusals are checked with Python's own ssl client and a raw plaintext socket.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests import client_roundtrip as roundtrip
from tests.broker_harness import BrokerProcess, Cluster, free_port
from tests.tls_certs import CA, write_pem_keystore, write_pkcs12
from tests.wait import wait_until

KEY_PASSWORD = "pem-key-s3cret-71"
STORE_PASSWORD = "p12-store-s3cret-72"
TRUST_PASSWORD = "p12-trust-s3cret-73"
SECRETS = (KEY_PASSWORD, STORE_PASSWORD, TRUST_PASSWORD)
RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT"


@dataclass
class Pki:
    dir: Path
    ca: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by another CA
    stranger_key: Path
    expired_cert: Path  # signed by the CA, out of date
    expired_key: Path
    # One client certificate per client library for the MTLS listener (CN=<name>,OU=eng): each
    # client's principal, mapped by RULES, shows it presented its own.
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)


@dataclass
class Ports:
    plaintext: int
    ssl: int
    mtls: int
    old: int


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = CA.create(), CA.create("another CA")
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"), key_password=KEY_PASSWORD)
    write_pem_keystore(d / "expired.pem", ca.issue("localhost", expired=True))
    mtls = ca.issue("localhost")
    (d / "mtls-chain.pem").write_bytes(mtls.cert_pem())
    (d / "mtls-key.pem").write_bytes(mtls.key_pem())
    write_pkcs12(d / "server.p12", ca.issue("localhost"), STORE_PASSWORD)
    write_pkcs12(d / "trust.p12", None, TRUST_PASSWORD, cas=[ca.identity.cert])
    alice = ca.issue("Alice", ou="eng", server=False)
    (d / "alice.pem").write_bytes(alice.cert_pem())
    (d / "alice.key").write_bytes(alice.key_pem())
    mallory = other.issue("Mallory", ou="eng", server=False)
    (d / "mallory.pem").write_bytes(mallory.cert_pem())
    (d / "mallory.key").write_bytes(mallory.key_pem())
    late = ca.issue("Trudy", ou="eng", server=False, expired=True)
    (d / "trudy.pem").write_bytes(late.cert_pem())
    (d / "trudy.key").write_bytes(late.key_pem())
    clients = {}
    for name in ("KafkaPython", "AioKafka", "Kcat"):
        ident = ca.issue(name, ou="eng", server=False)
        (d / f"{name}.pem").write_bytes(ident.cert_pem())
        (d / f"{name}.key").write_bytes(ident.key_pem())
        clients[name] = (d / f"{name}.pem", d / f"{name}.key")
    return Pki(d, d / "ca.pem", d / "alice.pem", d / "alice.key", d / "mallory.pem", d / "mallory.key",
               d / "trudy.pem", d / "trudy.key", clients)


def _inline(path: Path) -> str:
    """A PEM value as a properties file holds it: the lines joined by `\\` continuations."""
    return " \\\n".join(path.read_text().strip().splitlines())


@pytest.fixture(scope="module")
def pem_broker(tmp_path_factory, pki):
    ports = Ports(free_port(), free_port(), free_port(), free_port())
    b = BrokerProcess(
        tmp_path_factory.mktemp("tls-pem"),
        port=ports.plaintext,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{ports.plaintext},SSL://127.0.0.1:{ports.ssl},"
            f"MTLS://127.0.0.1:{ports.mtls},OLD://127.0.0.1:{ports.old}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,OLD:SSL,CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0",
            "ssl.keystore.type": "PEM",
            # Each listener its own keystore (listener.name.<name>.ssl.* wins over ssl.*).
            "listener.name.ssl.ssl.keystore.location": str(pki.dir / "server.pem"),
            "listener.name.ssl.ssl.key.password": KEY_PASSWORD,
            "listener.name.mtls.ssl.keystore.certificate.chain": _inline(pki.dir / "mtls-chain.pem"),
            "listener.name.mtls.ssl.keystore.key": _inline(pki.dir / "mtls-key.pem"),
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.certificates": _inline(pki.ca),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": RULES,
            "listener.name.old.ssl.keystore.location": str(pki.dir / "expired.pem"),
        },
    )
    b.start(env={"KAVKA_LOG_LEVELS": "kavka.server=DEBUG"})
    b.ports = ports
    yield b
    assert b.stop() == 0, b.log_text()


@pytest.fixture(scope="module")
def p12_broker(tmp_path_factory, pki):
    plain, tls = free_port(), free_port()
    b = BrokerProcess(
        tmp_path_factory.mktemp("tls-p12"),
        port=plain,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.dir / "server.p12"),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(pki.dir / "trust.p12"),
            "ssl.truststore.password": TRUST_PASSWORD,
            "ssl.client.auth": "requested",
        },
    )
    b.start()
    b.tls_port = tls
    yield b
    assert b.stop() == 0, b.log_text()


def full_log(b: BrokerProcess) -> str:
    return "".join(b.output)


def topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


# ----------------------------------------------------------------- the three clients


def ck_conf(pki: Pki, port: int, *, client_cert: bool = False) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
    }
    if client_cert:
        conf.update({"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)})
    return conf


def run_confluent(pki: Pki, port: int, *, client_cert: bool = False) -> None:
    conf = ck_conf(pki, port, client_cert=client_cert)
    name = topic()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    md = admin.list_topics(timeout=10)
    # Bootstrapped on the SSL port, the client is told each broker's SSL endpoint.
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", port)]
    p = Producer(conf)
    for i in range(20):
        p.produce(name, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([name])
    got = []
    try:
        wait_until(lambda: got.extend(m.value() for m in c.consume(20, 0.5) if not m.error()) or len(got) >= 20,
                   timeout=30, message="20 records through confluent-kafka over TLS")
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))


def test_confluent_kafka_over_pem(pki, pem_broker):
    run_confluent(pki, pem_broker.ports.ssl)
    # What is tested is production's loop: `kavka server start` runs on uvloop (broker/main.py).
    assert "uvloop" in Path(f"/proc/{pem_broker.proc.pid}/maps").read_text()


def test_confluent_kafka_over_pkcs12(pki, p12_broker):
    run_confluent(pki, p12_broker.tls_port)


def expect_principal(b: BrokerProcess, name: str) -> None:
    """The MTLS listener mapped the client's own certificate (CN=<name>,OU=eng) to User:<name>."""
    wait_until(lambda: f"on MTLS: principal User:{name.lower()}" in full_log(b), timeout=5,
               message=f"the principal User:{name.lower()} from the client certificate")


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_kafka_python_over_pem(pki, pem_broker, listener):
    conf = {"bootstrap_servers": f"127.0.0.1:{getattr(pem_broker.ports, listener)}", "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca)}
    if listener == "mtls":  # ssl.client.auth=required: its own certificate
        cert, key = pki.clients["KafkaPython"]
        conf.update(ssl_certfile=str(cert), ssl_keyfile=str(key))
    roundtrip.kafka_python(conf)
    if listener == "mtls":
        expect_principal(pem_broker, "KafkaPython")


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_aiokafka_over_pem(pki, pem_broker, listener):
    from aiokafka.helpers import create_ssl_context

    cert, key = pki.clients["AioKafka"] if listener == "mtls" else (None, None)
    ctx = create_ssl_context(cafile=str(pki.ca), certfile=cert and str(cert), keyfile=key and str(key))
    roundtrip.aiokafka({"bootstrap_servers": f"127.0.0.1:{getattr(pem_broker.ports, listener)}", "security_protocol": "SSL",
                        "ssl_context": ctx})
    if listener == "mtls":
        expect_principal(pem_broker, "AioKafka")


@pytest.mark.skipif(not shutil.which("kcat"), reason="kcat is not installed")
@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_kcat_over_pem(pki, pem_broker, listener):
    tls = ["-b", f"127.0.0.1:{getattr(pem_broker.ports, listener)}", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
    if listener == "mtls":
        cert, key = pki.clients["Kcat"]
        tls += ["-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
    roundtrip.kcat(tls, group=True)
    if listener == "mtls":
        expect_principal(pem_broker, "Kcat")


def test_a_cluster_tells_ssl_clients_every_brokers_ssl_endpoint(tmp_path, pki):
    """Two nodes, each PLAINTEXT (followers fetch there) + CONTROLLER + SSL: a client bootstrapped on
    one SSL port learns both brokers' SSL endpoints, and an acks=all write replicates over PLAINTEXT."""
    c = Cluster(tmp_path, 2, overrides={"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.dir / "server.pem"),
                                        "ssl.key.password": KEY_PASSWORD, "offsets.topic.replication.factor": "2"})
    ssl_ports = {}
    for i, n in c.nodes.items():
        ssl_ports[i] = free_port()
        lines = n.config_file.read_text().splitlines()
        lines = [f"{x},SSL://127.0.0.1:{ssl_ports[i]}" if x.startswith("listeners=") else x for x in lines]
        n.config_file.write_text("\n".join(lines) + "\n")
    c.start()
    try:
        conf = ck_conf(pki, ssl_ports[1])
        admin = AdminClient(conf)
        name = topic()
        admin.create_topics([NewTopic(name, 1, 2)])[name].result(15)
        md = admin.list_topics(timeout=10)
        assert sorted((b.id, b.port) for b in md.brokers.values()) == sorted(ssl_ports.items())
        p = Producer({**conf, "acks": "all"})
        for i in range(5):
            p.produce(name, f"r{i}".encode())
        assert p.flush(20) == 0
        consumer = Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
        consumer.subscribe([name])
        got: list[bytes] = []
        try:
            wait_until(lambda: got.extend(m.value() for m in consumer.consume(5, 0.5) if not m.error()) or len(got) >= 5,
                       timeout=30, message="5 records from a two-broker cluster over TLS")
        finally:
            consumer.close()
        assert got == [f"r{i}".encode() for i in range(5)]
    finally:
        c.stop()


# ----------------------------------------------------------------- mutual TLS and the principal


def test_mutual_tls_maps_the_principal_from_the_certificate(pki, pem_broker):
    run_confluent(pki, pem_broker.ports.mtls, client_cert=True)
    wait_until(lambda: "principal User:alice" in full_log(pem_broker), timeout=5,
               message="the principal mapped by RULE from CN=Alice,OU=eng,O=kavka-test")
    assert _tls_client(pki, pem_broker.ports.ssl, cert=(pki.client_cert, pki.client_key))
    # The SSL listener asks for no certificate (ssl.client.auth=none): the client is anonymous there.
    wait_until(lambda: "on SSL: principal User:ANONYMOUS" in full_log(pem_broker), timeout=5,
               message="an anonymous principal on the SSL listener")


def _tls_client(pki: Pki, port: int, *, cert: tuple[Path, Path] | None = None) -> bytes:
    """Handshake, send ApiVersions v0, return the answer (raises on a refused handshake)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(API_VERSIONS_V0)
        data = s.recv(4)
        if not data:
            raise ConnectionError("closed by the broker")
        return data


API_VERSIONS_V0 = (lambda body: struct.pack(">i", len(body)) + body)(struct.pack(">hhih", 18, 0, 7, 4) + b"test")


@pytest.mark.parametrize("who", ["no certificate", "a certificate from another CA", "an expired certificate"])
def test_required_client_auth_refuses(pki, pem_broker, who):
    cert = {"no certificate": None, "a certificate from another CA": (pki.stranger_cert, pki.stranger_key),
            "an expired certificate": (pki.expired_cert, pki.expired_key)}[who]
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _tls_client(pki, pem_broker.ports.mtls, cert=cert)
    assert _tls_client(pki, pem_broker.ports.mtls, cert=(pki.client_cert, pki.client_key))  # still serving
    assert pem_broker.alive()


def test_an_expired_server_certificate_is_rejected_by_the_client(pki, pem_broker):
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        _tls_client(pki, pem_broker.ports.old)


def test_a_plaintext_client_on_the_tls_port_is_closed_and_the_broker_stays_up(pki, pem_broker):
    with socket.create_connection(("127.0.0.1", pem_broker.ports.ssl), timeout=10) as s:
        s.sendall(API_VERSIONS_V0)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        # OpenSSL may answer with a TLS alert record (type 21) before closing; never a Kafka response.
        assert data == b"" or data[0] == 21
    wait_until(lambda: "TLS handshake failed" in full_log(pem_broker), timeout=5, message="the handshake warning")
    assert pem_broker.alive()
    with socket.create_connection(("127.0.0.1", pem_broker.ports.ssl), timeout=10):
        # A client that says nothing holds only its own handshake: the next one is served at once.
        assert _tls_client(pki, pem_broker.ports.ssl)
    assert "Traceback" not in full_log(pem_broker)


# ----------------------------------------------------------------- secrets


def test_secrets_are_hidden_from_describe_configs_and_the_log(pki, pem_broker, p12_broker):
    for b, port in ((pem_broker, pem_broker.ports.ssl), (p12_broker, p12_broker.tls_port)):
        admin = AdminClient(ck_conf(pki, port))
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([res])[res].result(15)
        for key in ("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key"):
            assert entries[key].is_sensitive, key
            assert entries[key].value is None, key
        location = "listener.name.ssl.ssl.keystore.location" if b is pem_broker else "ssl.keystore.location"
        assert entries[location].value.endswith((".pem", ".p12"))
        if b is pem_broker:  # the listener's own keys are described too, their secrets hidden
            for key in ("listener.name.ssl.ssl.key.password", "listener.name.mtls.ssl.keystore.key"):
                assert entries[key].is_sensitive and entries[key].value is None, key
            assert entries["listener.name.mtls.ssl.client.auth"].value == "required"
        text = full_log(b)
        assert not [s for s in SECRETS if s in text]
        assert "PRIVATE KEY" not in text
    admin = AdminClient(ck_conf(pki, pem_broker.ports.ssl))
    res = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("listener.name.ssl.ssl.truststore.location", "/elsewhere.pem", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="Cannot update these configs dynamically"):  # the truststore is read at startup only
        admin.incremental_alter_configs([res])[res].result(15)


def test_a_wrong_keystore_password_stops_startup_without_printing_it(tmp_path, pki):
    b = BrokerProcess(tmp_path, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki.dir / "server.p12"),
        "ssl.keystore.password": "wrong-" + STORE_PASSWORD,
    })
    with pytest.raises(RuntimeError) as e:
        b.start()
    assert "ssl.keystore.password" in str(e.value) and "wrong password" in str(e.value)
    assert STORE_PASSWORD not in str(e.value)
