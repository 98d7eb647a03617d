"""SASL/PLAIN on client listeners: one real `kavka server` for the module.

Listeners: PLAINTEXT (inter-broker), SASL (SASL_PLAINTEXT, PLAIN, users admin and alice) and
SECURE (SASL_SSL: TLS from tests/tls_certs.py, then PLAIN), with connections.max.reauth.ms set so
that SaslAuthenticate answers a session lifetime. confluent-kafka, kafka-python and aiokafka each
produce, consume in a group and make an admin call over SASL_PLAINTEXT; confluent-kafka and kcat
also over SASL_SSL. Refusals go through tests/raw_client.py: a wrong password, an unknown user, an
unknown mechanism, a request before authentication (closed, nothing written), the SaslHandshake v0
flow with a raw token; the broker serves after each. The passwords never reach the log or
DescribeConfigs.
"""

from __future__ import annotations

import shutil
import struct
import time
import uuid
import zlib

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kio.schema.errors import ErrorCode

from kavka.protocol.api import ApiKey
from kavka.protocol.framing import encode_request
from tests import client_roundtrip as roundtrip
from tests.broker_harness import BrokerProcess, free_port
from tests.raw_client import RawClient, request_bytes
from tests.tls_certs import CA, write_pem_keystore
from tests.wait import wait_until

ADMIN_PW = "admin-pw-s3cret-81"
ALICE_PW = "alice-pw-s3cret-82"
WRONG_PW = "wrong-pw-s3cret-83"
SECRETS = (ADMIN_PW, ALICE_PW, WRONG_PW)
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PW}" user_admin="{ADMIN_PW}" user_alice="{ALICE_PW}";')
DELAY_MS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl")
    ca = CA.create()
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"))
    plain, sasl, secure = free_port(), free_port(), free_port()
    b = BrokerProcess(
        d,
        port=plain,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl},SECURE://127.0.0.1:{secure}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
            "listener.name.secure.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(d / "server.pem"),
            "connections.max.reauth.ms": "600000",
            "connection.failed.authentication.delay.ms": str(DELAY_MS),
        },
    )
    b.start(env={"KAVKA_LOG_LEVELS": "kavka.server=DEBUG"})
    b.sasl_port, b.secure_port, b.ca = sasl, secure, d / "ca.pem"
    yield b
    assert b.stop() == 0, b.log_text()
    log = "".join(b.output)
    for s in SECRETS:
        assert s not in log


def topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


def ck_conf(broker: BrokerProcess, *, tls: bool = False, user: str = "alice", password: str = ALICE_PW) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": f"127.0.0.1:{broker.secure_port if tls else broker.sasl_port}",
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }
    if tls:
        conf["ssl.ca.location"] = str(broker.ca)
    return conf


def test_confluent_kafka_over_sasl_plaintext(broker):
    roundtrip.confluent(ck_conf(broker, tls=False), what="confluent-kafka over SASL/PLAIN")
    assert "SASL authentication from" in "".join(broker.output)
    assert "principal User:alice" in "".join(broker.output)


def test_confluent_kafka_over_sasl_ssl(broker):
    roundtrip.confluent(ck_conf(broker, tls=True), what="confluent-kafka over SASL_SSL/PLAIN")


def test_kafka_python_over_sasl_plaintext(broker):
    roundtrip.kafka_python({"bootstrap_servers": f"127.0.0.1:{broker.sasl_port}", "security_protocol": "SASL_PLAINTEXT",
                            "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": ALICE_PW})


def test_aiokafka_over_sasl_plaintext(broker):
    roundtrip.aiokafka({"bootstrap_servers": f"127.0.0.1:{broker.sasl_port}", "security_protocol": "SASL_PLAINTEXT",
                        "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": ALICE_PW})


@pytest.mark.skipif(not shutil.which("kcat"), reason="kcat is not installed")
def test_kcat_over_sasl_ssl(broker):
    roundtrip.kcat(["-b", f"127.0.0.1:{broker.secure_port}", "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={broker.ca}",
                    "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_PW}"])


# ----------------------------------------------------------------- refusals, over raw sockets


def handshake(c: RawClient, version: int = 1, mechanism: str = "PLAIN"):
    return c.call(ApiKey.SASL_HANDSHAKE, version, mechanism=mechanism)


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def assert_serving(broker: BrokerProcess) -> None:
    """The broker is up and authenticates on its SASL listener."""
    assert broker.alive()
    with RawClient(broker.sasl_port) as c:
        assert handshake(c).error_code == ErrorCode.none
        r = c.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=plain("admin", ADMIN_PW))
        assert r.error_code == ErrorCode.none
        assert r.session_lifetime.total_seconds() == 600  # connections.max.reauth.ms
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 9))
        assert c.read_response(ApiKey.METADATA, 12)[1].brokers


@pytest.mark.parametrize(("user", "password"), [("alice", WRONG_PW), ("mallory", ALICE_PW)])
def test_a_wrong_password_or_unknown_user_fails_after_the_delay(broker, user, password):
    with RawClient(broker.sasl_port) as c:
        assert handshake(c).error_code == ErrorCode.none
        start = time.monotonic()
        r = c.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=plain(user, password))
        assert time.monotonic() - start >= DELAY_MS / 1000 * 0.9  # connection.failed.authentication.delay.ms
        assert r.error_code == ErrorCode.sasl_authentication_failed
        assert r.error_message == "Authentication failed: Invalid username or password"
        assert c.closed_by_peer(5)
    wait_until(lambda: f"(user {user!r})" in "".join(broker.output), timeout=5, message="the failure is logged")
    assert_serving(broker)


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones(broker):
    with RawClient(broker.sasl_port) as c:
        r = handshake(c, mechanism="SCRAM-SHA-256")
        assert r.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(r.mechanisms) == ["PLAIN"]
        assert c.closed_by_peer(5)
    assert_serving(broker)


@pytest.mark.parametrize("key", [ApiKey.METADATA, ApiKey.PRODUCE])
def test_a_request_before_authentication_closes_and_writes_nothing(broker, key):
    name = topic()
    admin = AdminClient(ck_conf(broker))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    with RawClient(broker.sasl_port) as c:
        if key == ApiKey.PRODUCE:
            c.send_bytes(produce_frame(name))
        else:
            c.send_bytes(request_bytes(key, 12, 3))
        assert c.closed_by_peer(5)
    wait_until(lambda: "before SASL authentication" in "".join(broker.output), timeout=5, message="one log line")
    # Nothing was appended: a consumer from the beginning finds the topic empty.
    c = Consumer({**ck_conf(broker), "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
    finally:
        c.close()
    assert (lo, hi) == (0, 0)
    if key == ApiKey.PRODUCE:  # the same frame on the PLAINTEXT listener is a valid write
        with RawClient(broker.port) as raw:
            raw.send_bytes(produce_frame(name))
            raw.read_frame()
        c = Consumer({**ck_conf(broker), "group.id": f"g2-{name}"})
        try:
            assert c.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (0, 1)
        finally:
            c.close()
    assert_serving(broker)


def produce_frame(name: str) -> bytes:
    """A valid Produce v2 of one magic-1 message to partition 0 of `name` (acks=1), written by hand."""
    msg = struct.pack(">bbq", 1, 0, int(time.time() * 1000)) + struct.pack(">i", -1) + struct.pack(">i", 10) + b"sneaked in"
    message = struct.pack(">I", zlib.crc32(msg)) + msg
    message_set = struct.pack(">qi", 0, len(message)) + message
    topic_name = name.encode()
    body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(topic_name)) + topic_name
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(message_set)) + message_set
    return encode_request(api_key=0, api_version=2, correlation_id=3, client_id="raw", body=body, flexible=False)


def test_a_large_frame_before_authentication_is_refused_from_its_size(broker):
    """sasl.server.max.receive.size (512 KiB): the broker does not buffer a 1 MiB frame from a stranger."""
    with RawClient(broker.sasl_port) as c:
        c.send_bytes((1 << 20).to_bytes(4, "big") + b"\0" * 1024)
        assert c.closed_by_peer(5)
    wait_until(lambda: "sasl.server.max.receive.size" in "".join(broker.output), timeout=5, message="one log line")
    assert_serving(broker)


def test_the_v0_flow_with_a_raw_token(broker):
    with RawClient(broker.sasl_port) as c:
        assert handshake(c, version=0).error_code == ErrorCode.none
        c.send_bytes(len(plain("alice", ALICE_PW)).to_bytes(4, "big") + plain("alice", ALICE_PW))
        assert c.read_frame() == b""  # PLAIN's empty server token, size-prefixed, no header
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 5))
        _, md = c.read_response(ApiKey.METADATA, 12)
        assert md.brokers
    with RawClient(broker.sasl_port) as c:
        assert handshake(c, version=0).error_code == ErrorCode.none
        c.send_bytes(len(plain("alice", WRONG_PW)).to_bytes(4, "big") + plain("alice", WRONG_PW))
        assert c.closed_by_peer(5)  # the v0 flow has no error response: the connection closes
    assert_serving(broker)


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(broker):
    with RawClient(broker.port) as c:
        assert handshake(c).error_code == ErrorCode.illegal_sasl_state


def test_the_jaas_config_is_sensitive_in_describe_configs(broker):
    admin = AdminClient(ck_conf(broker, user="admin", password=ADMIN_PW))
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(15)
    jaas = entries["listener.name.sasl.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert entries["sasl.enabled.mechanisms"].value == "PLAIN"
    assert not any(s in str(e.value) for e in entries.values() for s in SECRETS)


# ----------------------------------------------------------------- KIP-368 re-authentication


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(
        tmp_path_factory.mktemp("sasl-reauth"),
        port=plain,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": "1500",
        },
    )
    b.start(env={"KAVKA_LOG_LEVELS": "kavka.server=DEBUG"})
    b.sasl_port = sasl
    yield b
    assert b.stop() == 0, b.log_text()


def test_clients_re_authenticate_within_the_session_lifetime(reauth_broker):
    """librdkafka and kafka-python re-authenticate (KIP-368) before the 1.5 s session ends; a
    producer writing for 4 s loses nothing."""
    from kafka import KafkaProducer

    b = reauth_broker
    name = topic()
    admin = AdminClient(ck_conf(b))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    p = Producer(ck_conf(b))
    kp = KafkaProducer(bootstrap_servers=f"127.0.0.1:{b.sasl_port}", security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password=ALICE_PW)
    futures = []
    for i in range(16):
        p.produce(name, f"c{i}".encode())
        p.poll(0)
        futures.append(kp.send(name, f"k{i}".encode()))
        time.sleep(0.25)
    assert p.flush(15) == 0
    for f in futures:
        f.get(15)
    kp.close()
    log = "".join(b.output)
    assert "SASL re-authentication from" in log
    assert "SASL session expired" not in log  # both re-authenticated rather than being cut off
    c = Consumer({**ck_conf(b), "group.id": f"g-{name}"})
    try:
        assert c.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (0, 32)
    finally:
        c.close()


def test_a_connection_past_its_session_is_closed_at_its_next_request(reauth_broker):
    with RawClient(reauth_broker.sasl_port) as c:
        assert handshake(c).error_code == ErrorCode.none
        r = c.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=plain("alice", ALICE_PW))
        assert r.session_lifetime.total_seconds() == 1.5
        time.sleep(1.6)
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 5))
        assert c.closed_by_peer(5)
    wait_until(lambda: "SASL session expired" in "".join(reauth_broker.output), timeout=5, message="one log line")
