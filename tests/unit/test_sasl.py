"""SASL without sockets: the JAAS parser, PLAIN tokens, the config rules and the
authenticator's state machine (kavka.sasl, kavka.broker.sasl_authenticator), with a fuzzer that
throws malformed SaslHandshake/SaslAuthenticate frames and PLAIN tokens at it."""

from __future__ import annotations

import struct
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.broker.sasl_authenticator import (
    Close,
    Failed,
    ListenerSasl,
    RawToken,
    Respond,
    SaslServerAuthenticator,
    Serve,
    State,
    Succeeded,
    build_listener_sasl,
)
from kavka.config import ConfigError, build_config
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.sasl import (
    INVALID_CREDENTIALS,
    JaasError,
    PlainServer,
    PlainUsers,
    SaslAuthenticationError,
    parse_jaas_config,
    parse_plain_token,
)
from tests.raw_client import request_bytes, request_frame

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')
USERS = PlainUsers.from_jaas(parse_jaas_config(JAAS))


# ----------------------------------------------------------------- JAAS


def test_jaas_entry_in_kafkas_syntax():
    e = parse_jaas_config(JAAS)
    assert e.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert e.control_flag == "required"
    assert e.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"}
    assert "secret" not in repr(e)


def test_jaas_escapes_quotes_and_bare_words():
    e = parse_jaas_config('m.Mod  OPTIONAL\n a="x\\"y\\\\z\\n" b=\'it\\\'s\' c=word-1 d="";')
    assert e.control_flag == "optional"
    assert e.options == {"a": 'x"y\\z\n', "b": "it's", "c": "word-1", "d": ""}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "m.Mod required",  # no ;
        "m.Mod mandatory;",  # not a control flag
        "m.Mod required a=;",
        'm.Mod required a="open;',
        'm.Mod required a "x";',
        'm.Mod required a="x" a="y";',
        'm.Mod required a="\\q";',
        'm.Mod required; n.Mod required;',  # Kafka allows one module
        'm.Mod required a="x"; trailing',
        'required;',
        'm.Mod required a=="x";',
    ],
)
def test_malformed_jaas_is_refused_with_a_position_never_the_text(text):
    with pytest.raises(JaasError) as e:
        parse_jaas_config(text)
    assert '"x"' not in str(e.value) and "open" not in str(e.value)


def test_plain_users_need_the_plain_module_and_a_user():
    with pytest.raises(JaasError, match="PlainLoginModule"):
        PlainUsers.from_jaas(parse_jaas_config('org.apache.kafka.common.security.scram.ScramLoginModule required;'))
    with pytest.raises(JaasError, match="user_"):
        PlainUsers.from_jaas(parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'))


# ----------------------------------------------------------------- PLAIN tokens


def test_plain_token_rfc4616():
    assert parse_plain_token(b"\0alice\0pw").authcid == "alice"
    assert parse_plain_token(b"alice\0alice\0pw").authzid == "alice"
    assert USERS.authenticate(b"\0alice\0alice-secret") == "alice"
    assert USERS.authenticate(b"\0admin\0admin-secret") == "admin"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", INVALID_CREDENTIALS),
        (b"\0mallory\0alice-secret", INVALID_CREDENTIALS),
        (b"\0alice\0", "password not specified"),
        (b"\0\0alice-secret", "username not specified"),
        (b"bob\0alice\0alice-secret", "authorization id that is different"),
        (b"alice-secret", "expected 3 tokens, got 1"),
        (b"\0a\0b\0c", "expected 3 tokens, got 4"),
        (b"\0alice\0\xff", "not UTF-8"),
    ],
)
def test_plain_token_failures_use_kafkas_messages(token, message):
    with pytest.raises(SaslAuthenticationError, match=message) as e:
        USERS.authenticate(token)
    assert "alice-secret" not in str(e.value)


# ----------------------------------------------------------------- config


BASE = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
    "controller.listener.names": "CONTROLLER",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}


def test_a_sasl_listener_with_plain_builds():
    cfg = build_config(BASE)
    sasl = build_listener_sasl(cfg)
    assert list(sasl) == ["SASL_PLAINTEXT"]
    assert sasl["SASL_PLAINTEXT"].mechanisms == ("PLAIN",)
    assert sasl["SASL_PLAINTEXT"].failed_delay_ms == 100 and sasl["SASL_PLAINTEXT"].max_reauth_ms == 0


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"sasl.enabled.mechanisms": None}, "sasl.enabled.mechanisms", "GSSAPI (Kafka's default"),
        ({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-1"}, "sasl.enabled.mechanisms", "SCRAM-SHA-1"),
        ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI"}, "listener.name.sasl_plaintext.sasl.enabled.mechanisms", "GSSAPI"),
        ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER"},
         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "missing"),
        ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"},
         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "missing"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": None}, "listener.name.sasl_plaintext.plain.sasl.jaas.config", "missing"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x.Y required user_a="sekrit"'},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "position"),
        ({"sasl.jaas.config": JAAS}, "sasl.jaas.config", "listener.name.<listener>.<mechanism>.sasl.jaas.config"),
        ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS}, "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "does not enable SCRAM-SHA-256"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "sasl.mechanism.inter.broker.protocol", "no effect"),
        ({"sasl.mechanism.controller.protocol": "PLAIN"}, "sasl.mechanism.controller.protocol", "no effect"),
        ({"inter.broker.listener.name": "SASL_PLAINTEXT"}, "sasl.mechanism.inter.broker.protocol", "GSSAPI (Kafka's default"),
        # The broker's own login: PlainLoginModule's username/password options on the inter-broker listener.
        ({"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config":
              'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "username"),
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"},
         "sasl.mechanism.controller.protocol", "GSSAPI (Kafka's default"),
        ({"listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.plaintext.sasl.enabled.mechanisms", "no effect"),
    ],
)
def test_sasl_refusals_name_the_key_never_the_secret(change, key, words):
    props = {**BASE, **{k: v for k, v in change.items() if v is not None}}
    for k, v in change.items():
        if v is None:
            props.pop(k)
    with pytest.raises(ConfigError) as e:
        build_config(props)
    assert e.value.key == key
    assert words in str(e.value)
    assert "secret" not in str(e.value) and "sekrit" not in str(e.value)


def test_sasl_keys_without_a_sasl_listener_have_no_effect():
    plain = {"node.id": "1"}
    for k, v in (("sasl.enabled.mechanisms", "PLAIN"), ("connections.max.reauth.ms", "60000"), ("sasl.server.max.receive.size", "1024")):
        with pytest.raises(ConfigError, match="no effect") as e:
            build_config({**plain, k: v})
        assert e.value.key == k


# ----------------------------------------------------------------- the authenticator


def settings_(**kw) -> ListenerSasl:
    return ListenerSasl(**{"listener": "SASL", "mechanisms": ("PLAIN",), "servers": {"PLAIN": partial(PlainServer, USERS)}, "max_reauth_ms": 0, "failed_delay_ms": 0, **kw})


def frame(key: int, version: int, corr: int = 1, **fields) -> bytes:
    if not fields and key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        return request_bytes(key, version, corr)[4:]  # the fuzzer's minimal request
    return request_frame(key, version, correlation_id=corr, **fields)[4:]


def authenticate_v1(a: SaslServerAuthenticator, token: bytes, now: int = 0, version: int = 2):
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"), now), Respond)
    return a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token), now)


def test_handshake_v1_then_authenticate():
    a = SaslServerAuthenticator(settings_())
    assert isinstance(a.on_frame(frame(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"), 0), Serve)
    r = a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"), 0)
    assert isinstance(r, Respond) and r.response.error_code == ErrorCode.none and r.response.mechanisms == ("PLAIN",)
    s = a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"), 0)
    assert isinstance(s, Succeeded) and s.principal == "User:alice" and not s.reauthenticated
    assert isinstance(s.reply, Respond) and s.reply.response.error_code == ErrorCode.none and s.reply.flexible
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), 0), Serve)


def test_handshake_v0_then_a_raw_token():
    a = SaslServerAuthenticator(settings_())
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN"), 0), Respond)
    s = a.on_frame(b"\0alice\0alice-secret", 0)
    assert isinstance(s, Succeeded) and s.reply == RawToken(b"")
    b = SaslServerAuthenticator(settings_())
    b.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN"), 0)
    f = b.on_frame(b"\0alice\0nope", 0)
    assert isinstance(f, Failed) and f.reply is None and f.user == "alice"


def test_unknown_mechanism_is_answered_with_the_enabled_ones():
    a = SaslServerAuthenticator(settings_())
    f = a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512"), 0)
    assert isinstance(f, Failed) and f.reply is not None
    assert f.reply.response.error_code == ErrorCode.unsupported_sasl_mechanism and f.reply.response.mechanisms == ("PLAIN",)


def test_wrong_password_is_sasl_authentication_failed():
    f = authenticate_v1(SaslServerAuthenticator(settings_()), b"\0alice\0wrong", version=1)
    assert isinstance(f, Failed) and f.user == "alice" and "wrong" not in f.reason
    assert f.reply is not None and f.reply.response.error_code == ErrorCode.sasl_authentication_failed
    assert f.reply.response.error_message == INVALID_CREDENTIALS


@pytest.mark.parametrize("key", [ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.SASL_AUTHENTICATE])
def test_other_requests_before_authentication_close(key):
    a = SaslServerAuthenticator(settings_())
    assert isinstance(a.on_frame(frame(key, 0 if key != ApiKey.PRODUCE else 3) if key != ApiKey.SASL_AUTHENTICATE
                                 else frame(key, 0, auth_bytes=b""), 0), Close)
    assert a.state == State.FAILED


def test_session_lifetime_and_reauthentication():
    a = SaslServerAuthenticator(settings_(max_reauth_ms=1000))
    s = authenticate_v1(a, b"\0alice\0alice-secret", now=0, version=1)
    assert isinstance(s, Succeeded) and s.reply.response.session_lifetime.total_seconds() == 1.0
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), 999), Serve)
    r = authenticate_v1(a, b"\0alice\0alice-secret", now=999)  # re-authenticates: a new session
    assert isinstance(r, Succeeded) and r.reauthenticated
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), 1998), Serve)
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), 1999), Close)


def test_reauthentication_must_keep_the_principal():
    a = SaslServerAuthenticator(settings_(max_reauth_ms=1000))
    authenticate_v1(a, b"\0alice\0alice-secret")
    f = authenticate_v1(a, b"\0admin\0admin-secret")
    assert isinstance(f, Failed) and f.reason == "Cannot change principals during re-authentication from User.alice: User.admin"
    assert f.reply is not None and f.reply.response.error_code == ErrorCode.sasl_authentication_failed


def _header(key: int, version: int) -> bytes:
    flexible = api.is_flexible(key, version)
    return struct.pack(">hhi", key, version, 1) + struct.pack(">h", 1) + b"t" + (b"\0" if flexible else b"")


_KEYS = st.sampled_from([(ApiKey.SASL_HANDSHAKE, v) for v in (0, 1)] + [(ApiKey.SASL_AUTHENTICATE, v) for v in (0, 1, 2)])


@settings(max_examples=400, deadline=None)
@given(
    start=st.sampled_from(["fresh", "handshake0", "handshake1", "complete"]),
    key=_KEYS,
    body=st.binary(max_size=64),
    truncate=st.integers(0, 12),
    token=st.one_of(st.binary(max_size=40), st.lists(st.binary(max_size=8), max_size=5).map(b"\0".join)),
)
def test_malformed_frames_and_tokens_never_raise(start, key, body, truncate, token):
    a = SaslServerAuthenticator(settings_(max_reauth_ms=10))
    if start == "handshake0":
        a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN"), 0)
    elif start in ("handshake1", "complete"):
        a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"), 0)
        if start == "complete":
            a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret"), 0)
    raw = _header(*key) + body
    for f in (raw, raw[: max(0, len(raw) - truncate)], token, frame(ApiKey.SASL_AUTHENTICATE, key[1] if key[0] == ApiKey.SASL_AUTHENTICATE else 0, auth_bytes=token)):
        out = a.on_frame(f, 5)
        assert isinstance(out, Serve | Respond | RawToken | Succeeded | Failed | Close)
        if isinstance(out, Succeeded):
            assert out.principal in ("User:alice",)


class _TwoRounds:
    """A scripted two-round mechanism (as SCRAM is): a challenge, then success or failure."""

    mechanism = "PLAIN"

    def __init__(self) -> None:
        self.complete, self.authorization_id, self.user, self.round = False, "", "?", 0
        self.credential_lifetime_ms = None

    def evaluate(self, token: bytes) -> bytes:
        self.round += 1
        if self.round == 1:
            self.user = token.decode()
            return b"challenge-" + token
        if token != b"proof":
            raise SaslAuthenticationError("Authentication failed: bad proof")
        self.complete, self.authorization_id = True, self.user
        return b"final"


def test_a_multi_round_mechanism_gets_its_challenges_v1():
    a = SaslServerAuthenticator(settings_(servers={"PLAIN": _TwoRounds}))
    first = authenticate_v1(a, b"carol")
    assert isinstance(first, Respond) and first.response.error_code == ErrorCode.none
    assert bytes(first.response.auth_bytes) == b"challenge-carol" and a.state == State.AUTHENTICATE
    done = a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, corr=3, auth_bytes=b"proof"), 0)
    assert isinstance(done, Succeeded) and done.principal == "User:carol"
    assert bytes(done.reply.response.auth_bytes) == b"final"


def test_a_multi_round_mechanism_fails_on_a_bad_second_token_v0():
    a = SaslServerAuthenticator(settings_(servers={"PLAIN": _TwoRounds}))
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN"), 0), Respond)
    first = a.on_frame(b"dave", 0)
    assert first == RawToken(b"challenge-dave") and a.state == State.TOKEN_V0
    failed = a.on_frame(b"guess", 0)
    assert isinstance(failed, Failed) and failed.user == "dave" and failed.reply is None
    assert a.state == State.FAILED
