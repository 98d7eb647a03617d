"""SASL/OAUTHBEARER on client listeners: one real `kavka server` for the module.

Listeners: PLAINTEXT (inter-broker); UNSEC (SASL_PLAINTEXT, Kafka's unsecured-JWS validator);
JWKS (SASL_PLAINTEXT, OAuthBearerValidatorCallbackHandler with a JWKS served over HTTP by a
loopback server this module starts); SECURE (SASL_SSL, the same validator with the JWKS in a
file: URL). The RSA and EC keys are made here. confluent-kafka (librdkafka's unsecured tokens from
`sasl.oauthbearer.config`, and an `oauth_cb` returning signed tokens) and kafka-python (its
`sasl_oauth_token_provider`) produce and consume, as do kcat (unsecured) and aiokafka (signed);
they re-authenticate before short-lived tokens expire; expired tokens, tokens for another audience and
tokens signed by another key are refused with SASL_AUTHENTICATION_FAILED (raw client and
librdkafka) and the broker serves on; a key added to the JWKS is fetched when a token names it;
the session ends when the token does. No token reaches the log.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from joserfc import jwk, jwt
from kio.schema.errors import ErrorCode

from kavka.protocol.api import ApiKey
from tests import client_roundtrip as roundtrip
from tests.broker_harness import BrokerProcess, free_port
from tests.raw_client import RawClient, request_bytes
from tests.tls_certs import CA, write_pem_keystore
from tests.wait import wait_until

OB_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://idp.kavka.test"
RSA = jwk.RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
EC = jwk.ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
ROTATED = jwk.RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
STRANGER = jwk.RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})  # another key under a known kid
ISSUED: list[str] = []  # every token handed out, none of which may reach the log


def sign(key=RSA, alg: str = "RS256", **claims) -> str:
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 300, "aud": "kafka", "iss": ISSUER, **claims}
    token = jwt.encode({"alg": alg, "kid": key.kid}, body, key, algorithms=[alg])
    ISSUED.append(token)
    return token


def unsecured_token(sub: str = "bob", lifetime: int = 300) -> str:
    def b64(o: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()

    now = time.time()
    token = f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': now, 'exp': now + lifetime})}."
    ISSUED.append(token)
    return token


def message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


class JwksServer:
    """A loopback HTTP server answering GET /jwks with `keys` (public parts), counting fetches."""

    def __init__(self, *keys) -> None:
        self.keys = list(keys)
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.fetches += 1
                body = json.dumps({"keys": [k.as_dict(private=False) for k in outer.keys]}).encode()
                self.send_response(200 if self.path == "/jwks" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("oauth")
    ca = CA.create()
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"))
    (d / "jwks.json").write_text(json.dumps({"keys": [RSA.as_dict(private=False), EC.as_dict(private=False)]}))
    idp = JwksServer(RSA, EC)
    plain, unsec, jwks, secure = free_port(), free_port(), free_port(), free_port()
    b = BrokerProcess(
        d,
        port=plain,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},UNSEC://127.0.0.1:{unsec},JWKS://127.0.0.1:{jwks},SECURE://127.0.0.1:{secure}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSEC:SASL_PLAINTEXT,JWKS:SASL_PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.unsec.oauthbearer.sasl.jaas.config": f'{OB_MODULE} required unsecuredValidatorAllowableClockSkewMs="1000";',
            "listener.name.jwks.oauthbearer.sasl.jaas.config": f"{OB_MODULE} required;",
            "listener.name.jwks.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.jwks.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": idp.url,
            "listener.name.secure.oauthbearer.sasl.jaas.config": f"{OB_MODULE} required;",
            "listener.name.secure.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.secure.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (d / "jwks.json").as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(d / "server.pem"),
            "connection.failed.authentication.delay.ms": "50",
        },
    )
    try:
        b.start(env={"KAVKA_LOG_LEVELS": "kavka.server=DEBUG"})
        b.unsec_port, b.jwks_port, b.secure_port, b.ca, b.idp = unsec, jwks, secure, d / "ca.pem", idp
        yield b
        assert b.stop() == 0, b.log_text()
    finally:
        b.kill()
        idp.close()
    log = "".join(b.output)
    for token in ISSUED:
        assert token not in log
        assert not token.split(".")[2] or token.split(".")[2][:40] not in log  # a signature (unsecured tokens have none)


def topic() -> str:
    return f"oauth-{uuid.uuid4().hex[:8]}"


def roundtrip_confluent(conf: dict, n: int = 10) -> None:
    roundtrip.confluent(conf, n, what="confluent-kafka over OAUTHBEARER")


def roundtrip_kafka_python(conf: dict) -> None:
    roundtrip.kafka_python(conf, 5, admin=False)  # the producer auto-creates the topic


def token_provider(make):
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return make()

        def extensions(self) -> dict[str, str]:
            return {"traceId": "abc123"}  # RFC 7628 extensions pass through, as Kafka's default validators let them

    return Provider()


def test_confluent_kafka_with_librdkafkas_unsecured_tokens(broker):
    roundtrip_confluent({
        "bootstrap.servers": f"127.0.0.1:{broker.unsec_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=alice scope=kafka",
    })
    assert "principal User:alice" in "".join(broker.output)


def test_kafka_python_with_an_unsecured_token(broker):
    roundtrip_kafka_python({"bootstrap_servers": f"127.0.0.1:{broker.unsec_port}", "security_protocol": "SASL_PLAINTEXT",
                            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": token_provider(unsecured_token)})
    assert "principal User:bob" in "".join(broker.output)


def test_confluent_kafka_with_signed_tokens_against_the_http_jwks(broker):
    def oauth_cb(_config: str) -> tuple[str, float]:
        return sign(sub="carol"), time.time() + 300

    roundtrip_confluent({
        "bootstrap.servers": f"127.0.0.1:{broker.jwks_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    })
    log = "".join(broker.output)
    assert "principal User:carol" in log
    assert f"OAUTHBEARER: 2 verification keys from the JWKS at {broker.idp.url}" in log  # fetched at startup


def test_kafka_python_with_es256_tokens_over_sasl_ssl_against_the_jwks_file(broker):
    roundtrip_kafka_python({"bootstrap_servers": f"127.0.0.1:{broker.secure_port}", "security_protocol": "SASL_SSL",
                            "ssl_cafile": str(broker.ca), "sasl_mechanism": "OAUTHBEARER",
                            "sasl_oauth_token_provider": token_provider(lambda: sign(EC, "ES256", sub="dave"))})
    assert "principal User:dave" in "".join(broker.output)


@pytest.mark.skipif(not shutil.which("kcat"), reason="kcat is not installed")
def test_kcat_with_unsecured_tokens(broker):
    roundtrip.kcat(["-b", f"127.0.0.1:{broker.unsec_port}", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=OAUTHBEARER",
                    "-X", "enable.sasl.oauthbearer.unsecure.jwt=true", "-X", "sasl.oauthbearer.config=principal=erin"], ("one", "two"))
    assert "principal User:erin" in "".join(broker.output)


def test_aiokafka_with_signed_tokens(broker):
    from aiokafka.abc import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        async def token(self) -> str:
            return sign(sub="frank")

    roundtrip.aiokafka({"bootstrap_servers": f"127.0.0.1:{broker.jwks_port}", "security_protocol": "SASL_PLAINTEXT",
                        "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Tokens()}, 5, admin=False)
    assert "principal User:frank" in "".join(broker.output)


# ----------------------------------------------------------------- refusals, over raw sockets


def authenticate(port: int, token: str, tls_ca: Path | None = None) -> tuple[object, RawClient]:
    """SaslHandshake v1 + SaslAuthenticate v2 with `token` (inside TLS if `tls_ca`); on a challenge,
    the \\x01 acknowledgement."""
    c = RawClient(port)
    if tls_ca is not None:
        c.sock = ssl.create_default_context(cafile=str(tls_ca)).wrap_socket(c.sock, server_hostname="localhost")
    assert c.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER").error_code == ErrorCode.none
    r = c.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=message(token))
    if r.error_code == ErrorCode.none and bytes(r.auth_bytes):
        assert json.loads(bytes(r.auth_bytes))["status"] in ("invalid_token", "insufficient_scope")
        r = c.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x01")
    return r, c


def assert_serving(broker: BrokerProcess) -> None:
    assert broker.alive()
    r, c = authenticate(broker.jwks_port, sign())
    with c:
        assert r.error_code == ErrorCode.none
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 9))
        assert c.read_response(ApiKey.METADATA, 12)[1].brokers


@pytest.mark.parametrize(
    ("listener", "make", "reason"),
    [
        ("jwks", lambda: sign(exp=int(time.time()) - 60), "no longer valid"),
        ("jwks", lambda: sign(aud="payments"), "acceptable identifier"),
        ("jwks", lambda: sign(STRANGER), "signature is invalid"),
        ("jwks", lambda: sign(iss="https://evil.test"), "doesn't match expected value"),
        ("jwks", unsecured_token, "Malformed JWT"),  # alg none where a JWKS is the judge
        ("secure", lambda: sign(exp=int(time.time()) - 60), "no longer valid"),
        ("unsec", lambda: unsecured_token(lifetime=-10), "Expiration Time"),
        ("unsec", sign, "'none' for an algorithm"),
    ],
)
def test_bad_tokens_are_sasl_authentication_failed(broker, listener, make, reason):
    port = {"jwks": broker.jwks_port, "secure": broker.secure_port, "unsec": broker.unsec_port}[listener]
    r, c = authenticate(port, make(), tls_ca=broker.ca if listener == "secure" else None)
    with c:
        assert r.error_code == ErrorCode.sasl_authentication_failed
        assert r.error_message == '{"status":"invalid_token"}'
        assert c.closed_by_peer(5)
    wait_until(lambda: reason in "".join(broker.output), timeout=5, message=f"the reason {reason!r} logged")
    assert_serving(broker)


def test_librdkafka_reports_a_refused_token(broker):
    errors: list[KafkaError] = []

    def oauth_cb(_config: str) -> tuple[str, float]:
        return sign(aud="payments"), time.time() + 300

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.jwks_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb, "error_cb": errors.append})
    wait_until(lambda: admin.poll(0.2) is not None and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
               timeout=20, message="an authentication error from librdkafka")
    assert any("invalid_token" in e.str() for e in errors), [e.str() for e in errors]
    assert_serving(broker)


def test_a_new_key_in_the_jwks_is_fetched_when_a_token_names_it(broker):
    before = broker.idp.fetches
    broker.idp.keys.append(ROTATED)
    r, c = authenticate(broker.jwks_port, sign(ROTATED))  # refused (Kafka's rule), and the JWKS is fetched again
    c.close()
    assert r.error_code == ErrorCode.sasl_authentication_failed
    wait_until(lambda: broker.idp.fetches > before, timeout=10, message="the JWKS fetched again for the unknown kid")

    def accepted() -> bool:
        r, c = authenticate(broker.jwks_port, sign(ROTATED))
        c.close()
        return r.error_code == ErrorCode.none

    wait_until(accepted, timeout=10, message="a token signed by the new key accepted")


def test_the_session_ends_when_the_token_does(broker):
    r, c = authenticate(broker.jwks_port, sign(exp=int(time.time()) + 3))
    with c:
        assert r.error_code == ErrorCode.none
        assert 0 < r.session_lifetime.total_seconds() <= 3  # connections.max.reauth.ms is unset: the token's exp
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 5))
        c.read_response(ApiKey.METADATA, 12)
        time.sleep(r.session_lifetime.total_seconds() + 0.2)  # the point is to outlive the session
        c.send_bytes(request_bytes(ApiKey.METADATA, 12, 6))
        assert c.closed_by_peer(5)
    wait_until(lambda: "SASL session expired" in "".join(broker.output), timeout=5, message="one log line")


def test_clients_re_authenticate_before_their_tokens_expire(broker):
    """Tokens that live 5 s make sessions of at most 5 s (connections.max.reauth.ms is unset);
    librdkafka and kafka-python fetch new tokens and re-authenticate (KIP-368) on the same
    connections, so producers writing for 7 s lose nothing and no session expires."""
    from kafka import KafkaProducer

    def short_lived() -> str:
        return sign(exp=int(time.time()) + 5)

    def oauth_cb(_config: str) -> tuple[str, float]:
        exp = int(time.time()) + 5  # the expiry librdkafka schedules its refresh by is the token's own
        return sign(exp=exp), float(exp)

    start = len(broker.output)
    name = topic()
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.jwks_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb}
    # The topic through the PLAINTEXT listener: an idle AdminClient, never polled, would not refresh its token.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    p = Producer(conf)
    kp = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.jwks_port}", security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=token_provider(short_lived))
    futures = []
    for i in range(28):  # 7 s: past at least one whole session
        p.produce(name, f"c{i}".encode())
        p.poll(0)
        futures.append(kp.send(name, f"k{i}".encode()))
        time.sleep(0.25)
    assert p.flush(15) == 0
    for f in futures:
        f.get(15)
    kp.close()
    log = "".join(broker.output[start:])
    assert "SASL re-authentication from" in log
    assert "SASL session expired" not in log
    c = Consumer({**conf, "group.id": f"g-{name}"})
    try:
        assert c.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (0, 56)
    finally:
        c.close()


def test_the_jaas_entries_are_sensitive_in_describe_configs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(15)
    jaas = entries["listener.name.jwks.oauthbearer.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert entries["listener.name.jwks.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"].value == broker.idp.url
    assert entries["sasl.oauthbearer.expected.audience"].value == "kafka"


def test_startup_stops_when_the_jwks_cannot_be_fetched(tmp_path):
    dead = free_port()
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path, port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl.oauthbearer.sasl.jaas.config": f"{OB_MODULE} required;",
        "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": f"http://127.0.0.1:{dead}/jwks",
    })
    try:
        with pytest.raises(RuntimeError, match="exited"):
            b.start(timeout=30)
    finally:
        b.kill()
    assert "sasl.oauthbearer.jwks.endpoint.url: could not read the JWKS" in b.log_text()
