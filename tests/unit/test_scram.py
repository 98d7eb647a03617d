"""SCRAM-SHA-256/512 (kavka.scram): RFC 7677's test vector, a client written from RFC 5802 against the
server for both hashes, Kafka's message grammar and failures, the config keys, and a fuzzer through
the SaslServerAuthenticator (anything a client sends ends as Failed or Close, never an exception)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.broker.sasl_authenticator import (
    Close,
    Failed,
    ListenerSasl,
    Respond,
    SaslServerAuthenticator,
    Succeeded,
    build_listener_sasl,
)
from kavka.config import ConfigError, build_config
from kavka.protocol.api import ApiKey
from kavka.sasl import SaslAuthenticationError
from kavka.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramServer,
    credential,
    saslname,
    username_from_saslname,
)
from tests.raw_client import request_frame

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def rfc_server(users: dict[str, ScramCredential] | None = None) -> ScramServer:
    users = users if users is not None else {"user": credential(SCRAM_SHA_256, "pencil", salt=RFC_SALT, iterations=4096)}
    return ScramServer(SCRAM_SHA_256, users.get, nonce=lambda: RFC_SERVER_NONCE)


def test_rfc7677_scram_sha_256_vector():
    s = rfc_server()
    assert s.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not s.complete and s.user == "user"
    assert s.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert s.complete and s.authorization_id == "user"
    with pytest.raises(SaslAuthenticationError):
        s.evaluate(RFC_CLIENT_FINAL)  # a third token: the exchange is over


def client_exchange(mechanism, server: ScramServer, user: str, password: str, *, gs2: str = "n,,",
                    tamper=lambda final: final) -> bytes:
    """RFC 5802 section 3's client (the SHA-1 example's structure, with the mechanism's hash)."""
    cnonce = "fyko+d2lbbFgONRv9qkxdawL"
    bare = f"n={saslname(user)},r={cnonce}"
    first = server.evaluate(f"{gs2}{bare}".encode()).decode()
    attrs = dict(kv.split("=", 1) for kv in first.split(","))
    assert attrs["r"].startswith(cnonce) and len(attrs["r"]) > len(cnonce)
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={attrs['r']}"
    auth = f"{bare},{first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = server.evaluate(tamper(f"{without_proof},p={base64.b64encode(proof).decode()}").encode())
    server_key = hmac.new(salted, b"Server Key", mechanism.hash_name).digest()
    assert final == b"v=" + base64.b64encode(hmac.new(server_key, auth, mechanism.hash_name).digest())
    return final


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_rfc5802_structure_with_each_hash(mechanism):
    users = {"a,b=c": credential(mechanism, "pencil", iterations=4096)}
    s = ScramServer(mechanism, users.get)
    client_exchange(mechanism, s, "a,b=c", "pencil")
    assert s.complete and s.authorization_id == "a,b=c"
    # An authzid equal to the user is accepted; the channel binding then carries it.
    s2 = ScramServer(mechanism, users.get)
    client_exchange(mechanism, s2, "a,b=c", "pencil", gs2="n,a=a=2Cb=3Dc,")
    assert s2.complete


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_wrong_password_and_unknown_user_fail_alike(mechanism):
    users = {"alice": credential(mechanism, "right", iterations=4096)}
    messages = []
    for user, password in (("alice", "wrong"), ("nobody", "whatever")):
        s = ScramServer(mechanism, users.get)
        with pytest.raises(SaslAuthenticationError) as e:
            client_exchange(mechanism, s, user, password)
        messages.append(str(e.value))
        assert not s.complete and s.user == user
    assert messages == [FAILED.format(mechanism.name)] * 2
    # The made-up salt of an unknown user is stable, as a real one is.
    firsts = {ScramServer(mechanism, users.get).evaluate(b"n,,n=nobody,r=abc").split(b",")[1] for _ in range(2)}
    assert len(firsts) == 1


def test_saslname_escaping():
    assert saslname("a,b=c") == "a=2Cb=3Dc"
    assert username_from_saslname("=3D2C") == "=2C"
    assert username_from_saslname(saslname("x=2C,=")) == "x=2C,="


@pytest.mark.parametrize(
    "first",
    [
        b"y,,n=user,r=abc",  # channel binding supported by the client: Kafka has none
        b"p=tls-unique,,n=user,r=abc",
        b"n,,n=us=er,r=abc",  # '=' not escaped
        b"n,,n=,r=abc",
        b"n,,n=user,r=a,b",
        b"n,,n=user",
        b"n,,n=\xc3\xa9,r=abc",  # not ASCII: Kafka's grammar
        b"n,,n=user,r=abc,tokenauth=true",  # delegation tokens: none
        b"n,,n=user,r=abc,tokenauth=TRUE",
    ],
)
def test_malformed_or_unsupported_client_first_fails(first):
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        rfc_server().evaluate(first)


def test_authzid_other_than_the_user_fails_with_kafkas_message():
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different from username"):
        rfc_server().evaluate(b"n,a=admin,n=user,r=abc")


def test_unknown_extensions_are_ignored_as_kafka_does():
    assert rfc_server().evaluate(b"n,,n=user,r=abc,foo=bar").startswith(b"r=abc")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda f: f.replace("c=biws", "c=eSws"),  # a channel binding other than the gs2 header
        lambda f: f.replace(",p=", "x,p=", 1),  # the nonce changed
        lambda f: f[:-4] + "AAA=",  # the proof
        lambda f: f.split(",p=")[0] + ",p=AAAA",  # a proof of the wrong length
        lambda f: f.split(",p=")[0],  # no proof
        lambda f: f + "\x00",
    ],
)
def test_tampered_client_final_fails(tamper):
    users = {"user": credential(SCRAM_SHA_256, "pencil", iterations=4096)}
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        client_exchange(SCRAM_SHA_256, ScramServer(SCRAM_SHA_256, users.get), "user", "pencil", tamper=tamper)


def test_a_credential_below_the_minimum_iterations_fails():
    users = {"user": credential(SCRAM_SHA_256, "pencil", iterations=1000)}
    with pytest.raises(SaslAuthenticationError):
        ScramServer(SCRAM_SHA_256, users.get).evaluate(b"n,,n=user,r=abc")


# ----------------------------------------------------------------- config

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";'
BASE = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
    "controller.listener.names": "CONTROLLER",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
}


def test_scram_only_listener_needs_no_jaas_and_keeps_the_broker_login():
    cfg = build_config(BASE)
    sasl = build_listener_sasl(cfg)["SASL_PLAINTEXT"]
    assert sasl.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512") and set(sasl.servers) == set(sasl.mechanisms)
    assert cfg.scram_login("SASL_PLAINTEXT", "SCRAM-SHA-256") is None
    cfg = build_config({**BASE, "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    assert cfg.scram_login("SASL_PLAINTEXT", "SCRAM-SHA-512") == ("admin", "admin-secret")
    assert "admin-secret" not in repr(cfg.listener_sasl.keys())


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS.replace("scram.ScramLoginModule", "plain.PlainLoginModule")},
         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "ScramLoginModule"),
        ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS.replace(' password="admin-secret"', "")},
         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "both username and password"),
        ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS.replace(";", " tokenauth=true;")},
         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "delegation tokens"),
        ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": 'x.Y required password="admin-secret"'},
         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "position"),
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS},
         "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config", "does not enable SCRAM-SHA-512"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
          'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="admin-secret";'},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "does not enable PLAIN"),
        ({"sasl.enabled.mechanisms": "SCRAM-SHA-1"}, "sasl.enabled.mechanisms", "SCRAM-SHA-1"),
        ({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config", "missing"),
    ],
)
def test_scram_config_refusals_name_the_key_never_the_secret(change, key, words):
    with pytest.raises(ConfigError) as e:
        build_config({**BASE, **change})
    assert e.value.key == key and words in str(e.value)
    assert "admin-secret" not in str(e.value)


# ----------------------------------------------------------------- through the authenticator

USERS = {"user": credential(SCRAM_SHA_256, "pencil", salt=RFC_SALT, iterations=4096)}


def scram_settings() -> ListenerSasl:
    server = partial(ScramServer, SCRAM_SHA_256, USERS.get, nonce=lambda: RFC_SERVER_NONCE)
    return ListenerSasl(listener="SASL", mechanisms=("SCRAM-SHA-256",), servers={"SCRAM-SHA-256": server},
                        max_reauth_ms=0, failed_delay_ms=0)


def authenticate(a: SaslServerAuthenticator, token: bytes, corr: int = 2):
    return a.on_frame(request_frame(ApiKey.SASL_AUTHENTICATE, 2, correlation_id=corr, auth_bytes=token)[4:], 0)


def test_the_rfc_exchange_through_the_authenticator():
    a = SaslServerAuthenticator(scram_settings())
    a.on_frame(request_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id=1, mechanism="SCRAM-SHA-256")[4:], 0)
    first = authenticate(a, RFC_CLIENT_FIRST)
    assert isinstance(first, Respond) and bytes(first.response.auth_bytes) == RFC_SERVER_FIRST
    done = authenticate(a, RFC_CLIENT_FINAL, 3)
    assert isinstance(done, Succeeded) and done.principal == "User:user"
    assert bytes(done.reply.response.auth_bytes) == RFC_SERVER_FINAL
    b = SaslServerAuthenticator(scram_settings())
    b.on_frame(request_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id=1, mechanism="SCRAM-SHA-256")[4:], 0)
    authenticate(b, RFC_CLIENT_FIRST)
    failed = authenticate(b, RFC_CLIENT_FINAL.replace(b"p=d", b"p=e"), 3)
    assert isinstance(failed, Failed) and failed.user == "user"
    assert failed.reply.response.error_code == ErrorCode.sasl_authentication_failed
    assert failed.reply.response.error_message == FAILED.format("SCRAM-SHA-256")


def _mutate(data: bytes, draw) -> bytes:
    ops = draw(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255), st.sampled_from(["set", "del", "ins"])), max_size=4))
    out = bytearray(data)
    for pos, byte, op in ops:
        if not out:
            break
        i = pos % len(out)
        if op == "set":
            out[i] = byte
        elif op == "del":
            del out[i]
        else:
            out.insert(i, byte)
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), v0=st.booleans())
def test_fuzzed_scram_tokens_end_in_failed_or_close_never_an_exception(data, v0):
    a = SaslServerAuthenticator(scram_settings())
    a.on_frame(request_frame(ApiKey.SASL_HANDSHAKE, 0 if v0 else 1, correlation_id=1, mechanism="SCRAM-SHA-256")[4:], 0)
    first = data.draw(st.one_of(st.binary(max_size=80), st.just(RFC_CLIENT_FIRST).map(lambda b: _mutate(b, data.draw))))
    final = data.draw(st.one_of(st.binary(max_size=120), st.just(RFC_CLIENT_FINAL).map(lambda b: _mutate(b, data.draw))))
    for i, token in enumerate((first, final)):
        out = a.on_frame(token, 0) if v0 else authenticate(a, token, i + 2)
        assert isinstance(out, Respond | Failed | Close | Succeeded) or type(out).__name__ == "RawToken"
        if isinstance(out, Succeeded):
            assert out.principal == "User:user" and token == RFC_CLIENT_FINAL
        if isinstance(out, Failed | Close | Succeeded):
            break


# ----------------------------------------------------------------- --add-scram arguments


def test_add_scram_arguments_in_kafkas_syntax():
    from kavka.scram import parse_credential_argument

    mech, name, c = parse_credential_argument('SCRAM-SHA-512=[name=alice,iterations=8192,password="pw"]')
    assert (mech, name, c.iterations) == (SCRAM_SHA_512, "alice", 8192)
    assert c == credential(SCRAM_SHA_512, "pw", salt=c.salt, iterations=8192) and len(c.salt) == 32
    salt = base64.b64encode(b"fixed-salt").decode()
    _, _, d = parse_credential_argument(f"SCRAM-SHA-256=[name=bob,salt={salt},password=pw]")
    assert d == credential(SCRAM_SHA_256, "pw", salt=b"fixed-salt")
    salted = base64.b64encode(hashlib.pbkdf2_hmac("sha256", b"pw", b"fixed-salt", 4096)).decode()
    _, _, e = parse_credential_argument(f"SCRAM-SHA-256=[name=bob,salt={salt},saltedpassword={salted}]")
    assert e == d


@pytest.mark.parametrize(
    ("argument", "words"),
    [
        ("SCRAM-SHA-1=[name=a,password=sekrit]", "not supported"),
        ("SCRAM-SHA-256", "equals sign"),
        ("SCRAM-SHA-256=name=a,password=sekrit", "enclosed"),
        ("SCRAM-SHA-256=[password=sekrit]", "'name'"),
        ("SCRAM-SHA-256=[name=a,iterations=4095,password=sekrit]", ">= 4096"),
        ("SCRAM-SHA-256=[name=a,iterations=16385,password=sekrit]", "<= 16384"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=c2Vrcml0]", "'salt'"),
        ("SCRAM-SHA-256=[name=a]", "'password' or 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,password=sekrit,colour=blue]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-256=[name=a,salt=!!,password=sekrit]", "salt"),
    ],
)
def test_bad_add_scram_arguments_never_show_the_password(argument, words):
    from kavka.scram import ScramArgumentError, parse_credential_argument

    with pytest.raises(ScramArgumentError) as e:
        parse_credential_argument(argument)
    assert words in str(e.value) and "sekrit" not in str(e.value)


def test_a_failed_re_authentication_says_so_as_kafka_does():
    a = SaslServerAuthenticator(scram_settings())
    a.on_frame(request_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id=1, mechanism="SCRAM-SHA-256")[4:], 0)
    authenticate(a, RFC_CLIENT_FIRST)
    assert isinstance(authenticate(a, RFC_CLIENT_FINAL, 3), Succeeded)
    a.on_frame(request_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id=4, mechanism="SCRAM-SHA-256")[4:], 0)
    authenticate(a, RFC_CLIENT_FIRST, 5)
    failed = authenticate(a, RFC_CLIENT_FINAL.replace(b"p=d", b"p=e"), 6)
    assert isinstance(failed, Failed)
    assert failed.reply.response.error_message == (
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
