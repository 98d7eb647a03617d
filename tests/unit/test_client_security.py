"""kavka's own connections' security (kavka.client.security, kavka.broker.tls.build_client_*): the
config rules of the inter-broker and controller listeners, the SASL client mechanisms against real
servers (kavka's PLAIN, scramp's SCRAM), the exchange's refusals, and the client SSLContext's host
name check over a real TLS connection on loopback."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import scramp
from kio.schema.errors import ErrorCode

import kavka.controller.placement  # noqa: F401 -- registers broker.replica.placer's check
from kavka.broker.tls import build_client_security, build_listener_tls
from kavka.client import negotiation
from kavka.client.security import (
    PLAIN,
    AuthenticationFailed,
    PlainClient,
    SaslExchange,
    ScramClient,
    TlsHandshakeFailed,
    open_async,
    plain,
    scram,
)
from kavka.config import ConfigError, build_config
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make
from kavka.sasl import PlainServer, PlainUsers, SaslAuthenticationError, parse_jaas_config
from tests.tls_certs import CA, write_pem_keystore

SECRET = "broker-s3cret-77"
LOGIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         f'username="broker" password="{SECRET}" user_broker="{SECRET}";')
VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9193"
SECURED = {
    "node.id": "1",
    "listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SSL",
    "inter.broker.listener.name": "INTERNAL",
    "controller.quorum.voters": VOTERS,
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.client.plain.sasl.jaas.config": LOGIN,
    "listener.name.internal.plain.sasl.jaas.config": LOGIN,
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "/k.pem",
}


def with_(base: dict[str, str], **changes: str | None) -> dict[str, str]:
    out = dict(base)
    for k, v in changes.items():
        key = k.replace("__", "-").replace("_", ".")
        if v is None:
            out.pop(key, None)
        else:
            out[key] = v
    return out


# ------------------------------------------------------------------ config rules


def test_a_fully_secured_node_names_its_outgoing_listeners() -> None:
    cfg = build_config(SECURED)
    assert cfg.outgoing_inter_broker_listener() == "INTERNAL"
    assert cfg.outgoing_controller_listener() == "CONTROLLER"
    assert cfg.broker_login("INTERNAL") == ("broker", SECRET)


def test_scram_between_brokers_logs_in_with_the_listeners_scram_login() -> None:
    scram_login = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{SECRET}";'
    cfg = build_config({**SECURED, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "listener.name.internal.scram-sha-512.sasl.jaas.config": scram_login})
    assert cfg.broker_login("INTERNAL", "SCRAM-SHA-512") == ("broker", SECRET)


def test_security_inter_broker_protocol_picks_the_listener_named_so() -> None:
    cfg = build_config(with_(SECURED, listeners="CLIENT://127.0.0.1:9092,SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
                             listener_security_protocol_map="CLIENT:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
                             inter_broker_listener_name=None, security_inter_broker_protocol="SSL",
                             listener_name_internal_plain_sasl_jaas_config=None,
                             sasl_mechanism_inter_broker_protocol=None))
    assert cfg.outgoing_inter_broker_listener() == "SSL"


def test_a_broker_only_node_takes_its_controller_listener_keys_for_its_outgoing_connections() -> None:
    props = with_(SECURED, node_id="3", process_roles="broker", listeners="CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
                  **{"listener.name.controller.ssl.truststore.type": "PEM",
                     "listener.name.controller.ssl.truststore.location": "/ca.pem"})
    cfg = build_config(props)
    assert cfg.outgoing_controller_listener() == "CONTROLLER"
    assert cfg.ssl_value("CONTROLLER", "ssl.truststore.location") == "/ca.pem"
    # ... and refuses them where the controller listener is PLAINTEXT: they would have no effect.
    with pytest.raises(ConfigError) as e:
        build_config({**props, "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"})
    assert e.value.key == "listener.name.controller.ssl.truststore.location" and "no effect" in str(e.value)


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"sasl.mechanism.inter.broker.protocol": None}, "sasl.mechanism.inter.broker.protocol", "GSSAPI (Kafka's default"),
        ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "sasl.mechanism.inter.broker.protocol",
         "SCRAM-SHA-256 must be included in sasl.enabled.mechanisms"),
        ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "sasl.mechanism.inter.broker.protocol", "not supported"),
        ({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
         "listener.name.internal.scram-sha-256.sasl.jaas.config", "missing"),
        ({"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
          "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.controller.protocol": "SCRAM-SHA-256"},
         "sasl.mechanism.controller.protocol", "metadata log"),
        ({"listener.name.internal.sasl.enabled.mechanisms": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol",
         "PLAIN must be included in listener.name.internal.sasl.enabled.mechanisms"),
        ({"listener.name.internal.plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="{SECRET}";'},
         "listener.name.internal.plain.sasl.jaas.config", "username"),
        ({"security.inter.broker.protocol": "SASL_SSL"}, "security.inter.broker.protocol", "Only one of"),
        ({"inter.broker.listener.name": None, "security.inter.broker.protocol": "SASL_SSL"}, "security.inter.broker.protocol", "no listener is named"),
        ({"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL"},
         "sasl.mechanism.controller.protocol", "GSSAPI (Kafka's default"),
        ({"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
          "sasl.mechanism.controller.protocol": "PLAIN"}, "listener.name.controller.plain.sasl.jaas.config", "missing"),
        ({"sasl.mechanism.controller.protocol": "PLAIN"}, "sasl.mechanism.controller.protocol", "no effect"),
        ({"listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL",
          "listener.name.internal.plain.sasl.jaas.config": None}, "sasl.mechanism.inter.broker.protocol", "no effect"),
    ],
)
def test_what_has_no_effect_or_no_implementation_stops_startup_naming_the_key(change, key, words) -> None:  # noqa: ANN001
    props = dict(SECURED)
    for k, v in change.items():
        if v is None:
            props.pop(k, None)
        else:
            props[k] = v
    with pytest.raises(ConfigError) as e:
        build_config(props)
    assert e.value.key == key
    assert words in str(e.value)
    assert SECRET not in str(e.value)


def test_a_sasl_controller_listener_needs_its_mechanism_and_the_nodes_login() -> None:
    base = with_(SECURED, listener_security_protocol_map="CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
                 sasl_mechanism_controller_protocol="PLAIN", **{"listener.name.controller.plain.sasl.jaas.config": LOGIN})
    cfg = build_config(base)
    assert cfg.outgoing_controller_listener() == "CONTROLLER" and cfg.broker_login("CONTROLLER") == ("broker", SECRET)
    # A broker-only node: it does not serve CONTROLLER, it only logs in there (no user_ entries needed).
    broker = with_(base, node_id="3", process_roles="broker", listeners="CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
                   **{"listener.name.controller.plain.sasl.jaas.config":
                      f'org.apache.kafka.common.security.plain.PlainLoginModule required username="b3" password="{SECRET}";'})
    assert build_config(broker).broker_login("CONTROLLER") == ("b3", SECRET)
    with pytest.raises(ConfigError) as e:
        build_config(with_(broker, **{"listener.name.controller.plain.sasl.jaas.config": None}))
    assert e.value.key == "listener.name.controller.plain.sasl.jaas.config" and "missing" in str(e.value)
    # A second controller listener is not served by the raft driver: SASL on it would have no effect.
    with pytest.raises(ConfigError) as e:
        build_config(with_(base, listeners=base["listeners"] + ",CTL2://127.0.0.1:9095", controller_listener_names="CONTROLLER,CTL2",
                           listener_security_protocol_map="CLIENT:SASL_SSL,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL,CTL2:SASL_SSL",
                           **{"listener.name.ctl2.plain.sasl.jaas.config": LOGIN}))
    assert e.value.key == "controller.listener.names" and "CTL2" in str(e.value)


# ------------------------------------------------------------------ mechanisms


def test_plain_client_token_is_what_kavkas_plain_server_accepts() -> None:
    users = PlainUsers.from_jaas(parse_jaas_config(LOGIN))
    client = PlainClient("broker", SECRET)
    server = PlainServer(users)
    assert server.evaluate(client.evaluate(b"")) == b"" and server.authorization_id == "broker"
    assert client.complete and client.evaluate(b"") is None
    with pytest.raises(SaslAuthenticationError):
        PlainServer(users).evaluate(PlainClient("broker", "wrong").evaluate(b""))
    assert SECRET not in repr(client) and SECRET not in repr(plain("INTERNAL", "SASL_SSL", "broker", SECRET))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_scramps_server(mechanism: str) -> None:
    m = scramp.ScramMechanism(mechanism)
    salt, stored_key, server_key, iterations = m.make_auth_info(SECRET, iteration_count=4096)
    auth = {"broker": (salt, stored_key, server_key, iterations)}
    server = m.make_server(lambda user: auth[user])
    client = ScramClient(mechanism, "broker", SECRET)
    server.set_client_first(client.evaluate(b"").decode())
    server.set_client_final(client.evaluate(server.get_server_first().encode()).decode())
    assert client.evaluate(server.get_server_final().encode()) is None
    assert client.complete

    # A wrong password: the server refuses the client's proof.
    server = m.make_server(lambda user: auth[user])
    bad = ScramClient(mechanism, "broker", "wrong")
    server.set_client_first(bad.evaluate(b"").decode())
    with pytest.raises(scramp.ScramException):
        server.set_client_final(bad.evaluate(server.get_server_first().encode()).decode())

    # Through the exchange: a server-final whose signature does not verify (a server that does
    # not know the password) fails the authentication.
    server = m.make_server(lambda user: auth[user])
    ex = SaslExchange(scram("INTERNAL", "SASL_SSL", mechanism, "broker", SECRET), "127.0.0.1:9094")
    ex.first_request()
    client_first = ex.next_request(_handshake_response(ErrorCode.none, (mechanism,)))
    server.set_client_first(client_first.auth_bytes.decode())
    client_final = ex.next_request(_authenticate_response(ErrorCode.none, auth=server.get_server_first().encode()))
    server.set_client_final(client_final.auth_bytes.decode())
    good_final = server.get_server_final()
    forged = "v=" + ("A" * (len(good_final) - 3)) + "="
    with pytest.raises(AuthenticationFailed) as e:
        ex.next_request(_authenticate_response(ErrorCode.none, auth=forged.encode()))
    assert f"mechanism {mechanism}" in str(e.value) and SECRET not in str(e.value)


def _handshake_response(code: int, mechanisms: tuple[str, ...] = (PLAIN,)) -> object:
    return make(negotiation.response_class(ApiKey.SASL_HANDSHAKE, 1), error_code=code, mechanisms=mechanisms)


def _authenticate_response(code: int, message: str | None = None, lifetime_ms: int = 0, auth: bytes = b"") -> object:
    return make(negotiation.response_class(ApiKey.SASL_AUTHENTICATE, 2), error_code=code, error_message=message,
                auth_bytes=auth, session_lifetime=timedelta(milliseconds=lifetime_ms))


def test_the_exchange_sends_handshake_then_token_and_keeps_the_session_lifetime() -> None:
    ex = SaslExchange(plain("INTERNAL", "SASL_SSL", "broker", SECRET), "127.0.0.1:9094")
    first = ex.first_request()
    assert first.__api_key__ == ApiKey.SASL_HANDSHAKE and first.__version__ == 1 and first.mechanism == PLAIN
    token = ex.next_request(_handshake_response(ErrorCode.none))
    assert token.__api_key__ == ApiKey.SASL_AUTHENTICATE and token.__version__ == 2
    assert token.auth_bytes == b"\0broker\0" + SECRET.encode()
    assert ex.next_request(_authenticate_response(ErrorCode.none, lifetime_ms=60000)) is None
    assert ex.session_lifetime_ms == 60000


@pytest.mark.parametrize(
    ("responses", "words"),
    [
        ([_handshake_response(ErrorCode.unsupported_sasl_mechanism, ("SCRAM-SHA-512",))], "it enables SCRAM-SHA-512"),
        ([_handshake_response(ErrorCode.none),
          _authenticate_response(ErrorCode.sasl_authentication_failed, "Authentication failed: Invalid username or password")],
         "Invalid username or password"),
    ],
)
def test_a_refused_authentication_names_peer_listener_and_mechanism_never_the_password(responses, words) -> None:  # noqa: ANN001
    ex = SaslExchange(plain("INTERNAL", "SASL_SSL", "broker", SECRET), "127.0.0.1:9094")
    ex.first_request()
    with pytest.raises(AuthenticationFailed) as e:
        for r in responses:
            ex.next_request(r)
    text = str(e.value)
    assert "127.0.0.1:9094" in text and "listener INTERNAL" in text and "mechanism PLAIN" in text and words in text
    assert SECRET not in text
    assert isinstance(e.value, ConnectionError)  # callers retry it as a lost connection


# ------------------------------------------------------------------ TLS: host name check and client certificates


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA.create()


@pytest.fixture(scope="module")
def pki(tmp_path_factory, ca):  # noqa: ANN001, ANN201
    d = tmp_path_factory.mktemp("pki")
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "node.pem", ca.issue("localhost", client_too=True))  # SANs localhost, 127.0.0.1
    return d


def _tls_config(d, **extra: str):  # noqa: ANN001, ANN202
    return build_config({
        "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "node.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem"),
        **extra,
    })


async def _connect(server_cfg, client_cfg, host: str) -> bool:  # noqa: ANN001
    """Serve `server_cfg`'s SSL listener on `host`, connect with `client_cfg`'s client side, and
    say whether the server completed the handshake (its callback ran)."""
    tls = build_listener_tls(server_cfg)["SSL"]
    accepted = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.write(b"x")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(on_conn, host, 0, ssl=tls.context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer, _session = await open_async(host, port, build_client_security(client_cfg, "SSL"), client_id="t")
        try:
            got = await asyncio.wait_for(reader.read(1), 5)
        except (ConnectionError, OSError):
            got = b""
        writer.close()
        return got == b"x" and accepted.is_set()
    finally:
        server.close()


def test_the_peer_host_name_is_checked_unless_endpoint_identification_is_empty(pki) -> None:  # noqa: ANN001
    server_cfg = _tls_config(pki, **{"ssl.client.auth": "required"})
    # The certificate names 127.0.0.1: mutual TLS, this listener's keystore presented as the client's.
    assert asyncio.run(_connect(server_cfg, _tls_config(pki), "127.0.0.1"))
    # Reached as 127.0.0.2, which the certificate does not name: refused, naming the peer and listener.
    with pytest.raises(TlsHandshakeFailed) as e:
        asyncio.run(_connect(server_cfg, _tls_config(pki), "127.0.0.2"))
    assert "listener SSL" in str(e.value) and "127.0.0.2" in str(e.value)
    # ssl.endpoint.identification.algorithm= (empty): the chain is checked, the name is not.
    assert asyncio.run(_connect(server_cfg, _tls_config(pki, **{"ssl.endpoint.identification.algorithm": ""}), "127.0.0.2"))


def test_a_client_without_a_keystore_is_refused_where_client_certificates_are_required(pki) -> None:  # noqa: ANN001
    server_cfg = _tls_config(pki, **{"ssl.client.auth": "required"})
    truststore_only = build_config({
        "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki / "ca.pem"),
    })
    assert not asyncio.run(_connect(server_cfg, truststore_only, "127.0.0.1"))
    assert asyncio.run(_connect(_tls_config(pki), truststore_only, "127.0.0.1"))  # none asked: none needed


def test_a_peer_signed_by_another_ca_is_refused(pki, tmp_path) -> None:  # noqa: ANN001
    rogue = CA.create("rogue")
    write_pem_keystore(tmp_path / "node.pem", rogue.issue("localhost", client_too=True))
    (tmp_path / "ca.pem").write_bytes(rogue.pem())
    with pytest.raises(TlsHandshakeFailed) as e:
        asyncio.run(_connect(_tls_config(tmp_path), _tls_config(pki), "127.0.0.1"))
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value) or "certificate verify failed" in str(e.value)


def test_a_reloaded_keystore_is_the_client_certificate_of_the_next_connection(pki, ca, tmp_path) -> None:  # noqa: ANN001
    from kavka.broker.tls import reload_client_keystore

    server_cfg = _tls_config(pki, **{"ssl.client.auth": "required"})
    client_cfg = _tls_config(pki)
    renewed = write_pem_keystore(tmp_path / "renewed.pem", ca.issue("renewed", client_too=True))
    seen: list[str] = []

    async def run() -> None:
        tls = build_listener_tls(server_cfg)["SSL"]

        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            cert = writer.get_extra_info("peercert")
            seen.append(dict(x[0] for x in cert["subject"])["commonName"])
            writer.close()

        server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=tls.context)
        port = server.sockets[0].getsockname()[1]
        sec = build_client_security(client_cfg, "SSL")
        try:
            for _ in range(2):
                _r, w, _s = await open_async("127.0.0.1", port, sec, client_id="t")
                await _r.read()
                w.close()
                reload_client_keystore(sec.ssl_context, client_cfg, "SSL",
                                       {"listener.name.ssl.ssl.keystore.location": str(renewed)})
        finally:
            server.close()

    asyncio.run(run())
    assert seen == ["localhost", "renewed"]


# ------------------------------------------------------------------ the CLI's --command-config


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        ({"bootstrap.servers": "x:1"}, "bootstrap.servers", "not supported"),
        ({"security.protocol": "SASL_SSLX"}, "security.protocol", "is not one of"),
        ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism", "no effect"),
        ({"security.protocol": "SASL_PLAINTEXT", "ssl.truststore.location": "/ca.pem"}, "ssl.truststore.location", "no effect"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "x"}, "sasl.mechanism", "GSSAPI (Kafka's default"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config", "missing"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config":
          f'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="{SECRET}";'},
         "sasl.jaas.config", "ScramLoginModule"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config":
          f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";'}, "sasl.jaas.config", "username"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": f'x required password="{SECRET}"'},
         "sasl.jaas.config", "position"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/etc/ca.jks"}, "ssl.truststore.type", "keytool"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent/ca.pem"},
         "ssl.truststore.location", "cannot read"),
    ],
)
def test_command_config_refusals_name_the_key(props, key, words) -> None:  # noqa: ANN001
    from kavka.cli.command_config import CommandConfigError, client_security

    with pytest.raises(CommandConfigError) as e:
        client_security(props)
    assert e.value.key == key and words in str(e.value)
    assert SECRET not in str(e.value)


def test_command_config_builds_plain_and_scram_clients(pki) -> None:  # noqa: ANN001
    from kavka.cli.command_config import client_security

    sec = client_security({"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
                           "ssl.truststore.location": str(pki / "ca.pem"), "sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                               f'username="alice" password="{SECRET}";'})
    assert sec.ssl_context is not None and sec.mechanism == PLAIN
    assert sec.sasl().evaluate(b"") == b"\0alice\0" + SECRET.encode()
    sec = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                           "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                               f'username="alice" password="{SECRET}";'})
    assert sec.ssl_context is None and isinstance(sec.sasl(), ScramClient)


def test_async_channel_authenticates_and_renews_before_the_session_lifetime() -> None:
    """AsyncChannel against a loopback peer running kavka's SASL state machine (PLAIN, a session
    lifetime of 10 s): it authenticates before its first request, and once 90% of the session has
    passed the next call opens a new, freshly authenticated connection."""
    from kio.schema.describe_quorum.v2 import request as dq_req
    from kio.schema.describe_quorum.v2 import response as dq_resp

    from kavka.broker.sasl_authenticator import (
        ListenerSasl,
        SaslServerAuthenticator,
        Serve,
        Succeeded,
    )
    from kavka.client.async_channel import AsyncChannel
    from kavka.protocol.framing import encode_entity, encode_response

    users = PlainUsers.from_jaas(parse_jaas_config(LOGIN))
    settings = ListenerSasl("INTERNAL", (PLAIN,), {PLAIN: lambda: PlainServer(users)}, max_reauth_ms=10000, failed_delay_ms=0)
    logins: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        auth = SaslServerAuthenticator(settings)
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                action = auth.on_frame(frame, 0)
                if isinstance(action, Serve):
                    assert auth.authenticated
                    corr = int.from_bytes(frame[4:8], "big")
                    body = encode_entity(dq_resp.DescribeQuorumResponse(error_code=ErrorCode.none, error_message=None, topics=(), nodes=()))
                    writer.write(encode_response(corr, body, flexible_header=True))
                    continue
                if isinstance(action, Succeeded):
                    logins.append(action.principal)
                    action = action.reply
                writer.write(encode_response(action.correlation_id, encode_entity(action.response), flexible_header=action.flexible))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

        finally:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        addr = ("127.0.0.1", server.sockets[0].getsockname()[1])
        ch = AsyncChannel("t", security=plain("INTERNAL", "SASL_PLAINTEXT", "broker", SECRET))
        loop = asyncio.get_running_loop()
        try:
            req = dq_req.DescribeQuorumRequest(topics=())
            await ch.call(addr, req, dq_resp.DescribeQuorumResponse, 5)
            await ch.call(addr, req, dq_resp.DescribeQuorumResponse, 5)
            assert logins == ["User:broker"]  # one connection, authenticated once
            assert ch._renew_at is not None and 8.0 < ch._renew_at - loop.time() <= 9.0  # 90% of 10 s
            ch._renew_at = loop.time()  # as if 9 s had passed
            await ch.call(addr, req, dq_resp.DescribeQuorumResponse, 5)
            assert logins == ["User:broker", "User:broker"]
        finally:
            ch.close()
            server.close()

    asyncio.run(run())
