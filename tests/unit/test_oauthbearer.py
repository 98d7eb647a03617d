"""SASL/OAUTHBEARER without sockets (kavka.oauthbearer): RFC 7628's client message, the exchange
with its error round, Kafka's unsecured validator and the JWKS validator (every refusal), the
refreshing JWKS, the config rules, the session capped at the token's expiry, and a fuzzer that
throws malformed OAUTHBEARER messages through the authenticator."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import timedelta
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwk, jwt
from kio.schema.errors import ErrorCode

from kavka.broker.sasl_authenticator import (
    Close,
    Failed,
    ListenerSasl,
    RawToken,
    Respond,
    SaslServerAuthenticator,
    Serve,
    Succeeded,
    build_listener_sasl,
)
from kavka.config import ConfigError, build_config
from kavka.oauthbearer import (
    INVALID_CREDENTIALS,
    JwksFile,
    JwksValidator,
    JwksValidatorConfig,
    OAuthBearerConfigError,
    OAuthBearerServer,
    RefreshingJwks,
    TokenInvalid,
    UnsecuredValidator,
    jwks_source,
    parse_client_initial_response,
    parse_jwks,
)
from kavka.protocol.api import ApiKey
from kavka.sasl import SaslAuthenticationError, parse_jaas_config
from tests.raw_client import request_bytes, request_frame
from tests.wait import wait_until

NOW = 1_800_000_000.0  # the injected wall clock, seconds


def clock() -> float:
    return NOW


def b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}.{signature}"


def message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


GOOD = {"sub": "alice", "iat": NOW - 10, "exp": NOW + 3600}


# ----------------------------------------------------------------- RFC 7628 client message


def test_client_initial_response():
    r = parse_client_initial_response(message("a.b.c", authzid="alice=2Cx", extensions="traceId=abc 1\x01"))
    assert r.token == "a.b.c" and r.authorization_id == "alice,x" and r.extensions == {"traceId": "abc 1"}
    assert parse_client_initial_response(b"n,,\x01auth=bearer tok==\x01\x01").token == "tok=="


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"n,,\x01\x01",  # no auth
        b"y,,\x01auth=Bearer t\x01\x01",  # channel binding flag
        b"n,,\x01auth=Basic dXNlcg==\x01\x01",  # not Bearer
        b"n,,\x01auth=Bearer t\x01",  # unterminated
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"n,,\x01auth=Bearer t\x01bad-key=v\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=\x00\x01\x01",
        b"n,a=x,y,\x01auth=Bearer t\x01\x01",
        "n,,\x01auth=Bearer tök\x01\x01".encode(),
        b"\xff\xfe",
    ],
)
def test_malformed_client_messages_fail_with_kafkas_generic_message(raw):
    with pytest.raises(SaslAuthenticationError) as e:
        parse_client_initial_response(raw)
    assert str(e.value) == INVALID_CREDENTIALS


# ----------------------------------------------------------------- the exchange


def test_a_good_token_completes_with_the_principal_and_the_time_left():
    s = OAuthBearerServer(UnsecuredValidator(clock=clock), clock=clock)
    assert s.evaluate(message(unsecured(GOOD), extensions="k=v\x01")) == b""
    assert s.complete and s.authorization_id == "alice" and s.credential_lifetime_ms == 3600_000


def test_a_bad_token_gets_the_json_error_then_fails_on_the_acknowledgement():
    s = OAuthBearerServer(UnsecuredValidator(clock=clock), clock=clock)
    assert s.evaluate(message(unsecured({**GOOD, "exp": NOW - 1}))) == b'{"status":"invalid_token"}'
    assert not s.complete
    with pytest.raises(SaslAuthenticationError) as e:
        s.evaluate(b"\x01")
    assert str(e.value) == '{"status":"invalid_token"}'


def test_a_missing_required_scope_is_insufficient_scope():
    v = UnsecuredValidator(required_scope=("read", "write"), clock=clock)
    s = OAuthBearerServer(v, clock=clock)
    assert s.evaluate(message(unsecured({**GOOD, "scope": ["read"]}))) == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    assert OAuthBearerServer(v, clock=clock).evaluate(message(unsecured({**GOOD, "scope": ["write", "read"]}))) == b""


def test_an_authzid_must_be_the_principal():
    s = OAuthBearerServer(UnsecuredValidator(clock=clock), clock=clock)
    with pytest.raises(SaslAuthenticationError, match="different from the token's principal name"):
        s.evaluate(message(unsecured(GOOD), authzid="admin"))
    assert OAuthBearerServer(UnsecuredValidator(clock=clock), clock=clock).evaluate(message(unsecured(GOOD), authzid="alice")) == b""


# ----------------------------------------------------------------- the unsecured validator


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (unsecured(GOOD, header={"alg": "RS256"}), "'none' for an algorithm"),
        (unsecured(GOOD, signature="c2ln"), "must not contain a digital signature"),
        (unsecured({"sub": "alice"}), "No expiration time"),
        (unsecured({**GOOD, "exp": "soon"}), "not of type Number"),
        (unsecured({**GOOD, "exp": float("inf")}), "not of type Number"),
        (unsecured({**GOOD, "exp": float("nan")}), "not of type Number"),
        (unsecured({**GOOD, "iat": float("-inf")}), "not of type Number"),
        (unsecured({**GOOD, "exp": NOW}), "on or after the Expiration Time"),
        (unsecured({**GOOD, "iat": NOW + 5}), "Issued At value"),
        (unsecured({**GOOD, "iat": NOW - 1, "exp": NOW - 2}), "on or after the Expiration Time"),
        (unsecured({"iat": NOW, "exp": NOW + 60}), "No principal name in JWT claim: sub"),
        (unsecured({**GOOD, "sub": " "}), "No principal name"),
        ("a..b", "contains '..'"),
        ("a.b", "3 dot-separated"),
        ("!!!.e30.", "Base64URL"),
        (f"{b64({'alg': 'none'})}.W10.", "not a JSON object"),
    ],
)
def test_unsecured_refusals(token, reason):
    with pytest.raises(TokenInvalid, match=reason.replace("(", r"\(").replace(".", r"\.")):
        UnsecuredValidator(clock=clock).validate(token)


def test_unsecured_jaas_options():
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorScopeClaimName="scp" '
        'unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="5000";')
    v = UnsecuredValidator.from_jaas(entry, clock)
    t = v.validate(unsecured({"user": "bob", "scp": "kafka", "iat": NOW + 4, "exp": NOW + 5}))  # iat within 5 s of skew
    assert v.validate(unsecured({"user": "bob", "scp": "kafka", "exp": NOW - 4})).principal_name == "bob"  # exp too
    assert t.principal_name == "bob" and t.scope == {"kafka"}
    with pytest.raises(TokenInvalid):
        v.validate(unsecured({"user": "bob", "scp": "other", "exp": NOW + 60}))
    for opts, key in [('unsecuredValidatorAllowableClockSkewMs="-1"', "unsecuredValidatorAllowableClockSkewMs"),
                      ('unsecuredValidatorAllowableClockSkewMs="x"', "unsecuredValidatorAllowableClockSkewMs"),
                      ('unsecuredValidatorRequiredScope="a\\\\b"', "unsecuredValidatorRequiredScope")]:
        with pytest.raises(OAuthBearerConfigError) as e:
            UnsecuredValidator.from_jaas(parse_jaas_config(f"m.M required {opts};"))
        assert e.value.key == key


# ----------------------------------------------------------------- the JWKS validator


RSA = jwk.RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER = jwk.RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid, another key
EC = jwk.ECKey.generate_key("P-256", parameters={"kid": "e1"})


class StaticJwks:
    location = "test:jwks"

    def __init__(self, *keys) -> None:
        self._keys = parse_jwks(json.dumps({"keys": [k.as_dict(private=False) for k in keys]}), self.location)
        self.expedited: list[str] = []

    def start(self) -> None: ...
    def stop(self) -> None: ...

    def keys(self):
        return self._keys

    def maybe_expedite_refresh(self, kid: str) -> None:
        self.expedited.append(kid)


def signed(claims: dict, key=RSA, alg: str = "RS256", kid: str | None = "k1") -> str:
    header = {"alg": alg, **({"kid": kid} if kid else {})}
    return jwt.encode(header, claims, key, algorithms=[alg])


CLAIMS = {"sub": "alice", "iat": int(NOW) - 10, "exp": int(NOW) + 600, "aud": "kafka", "iss": "https://idp.example"}
CONFIG = JwksValidatorConfig(jwks_url="file:/x", expected_audience=("kafka", "other"), expected_issuer="https://idp.example")


def jwks_validator(config: JwksValidatorConfig = CONFIG, source=None) -> JwksValidator:
    return JwksValidator(config, source or StaticJwks(RSA, EC), clock)


def test_rs256_and_es256_tokens_validate():
    t = jwks_validator().validate(signed({**CLAIMS, "scope": "read write"}))
    assert t.principal_name == "alice" and t.lifetime_ms == (int(NOW) + 600) * 1000 and t.scope == {"read write"}
    assert jwks_validator().validate(signed(CLAIMS, EC, "ES256", "e1")).principal_name == "alice"
    assert jwks_validator().validate(signed(CLAIMS, kid=None)).principal_name == "alice"  # no kid: the key type decides
    custom = JwksValidatorConfig(jwks_url="file:/x", expected_audience=("kafka",), sub_claim="client_id", scope_claim="scp")
    t = jwks_validator(custom).validate(signed({**CLAIMS, "client_id": "svc", "scp": ["a", "b"]}))
    assert t.principal_name == "svc" and t.scope == {"a", "b"}


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (signed({**CLAIMS, "exp": int(NOW) - 31}), "no longer valid"),
        (signed({**CLAIMS, "nbf": int(NOW) + 31}), "not yet valid"),
        (signed({**CLAIMS, "aud": "payments"}), "acceptable identifier"),
        (signed({k: v for k, v in CLAIMS.items() if k != "aud"}), "No Audience"),
        (signed({**CLAIMS, "iss": "https://evil.example"}), "doesn't match expected value"),
        (signed({k: v for k, v in CLAIMS.items() if k != "iss"}), "No Issuer"),
        (signed({k: v for k, v in CLAIMS.items() if k != "exp"}), "No Expiration Time"),
        (signed({k: v for k, v in CLAIMS.items() if k != "iat"}), "No Issued At"),
        (signed({k: v for k, v in CLAIMS.items() if k != "sub"}), "sub value must be a non-empty string"),
        (signed({**CLAIMS, "scope": ["a", "a"]}), "duplicates"),
        (signed(CLAIMS, OTHER), "signature is invalid"),
        (signed(CLAIMS, kid="k2"), "suitable verification key"),
        (signed(CLAIMS, jwk.OctKey.generate_key(256), "HS256"), "not a permitted algorithm"),
        (unsecured(CLAIMS, signature="c2ln"), "not a permitted algorithm"),  # alg none under a JWKS
        (unsecured(CLAIMS), "Malformed JWT"),  # ... and without a signature
        (signed(CLAIMS, EC, "ES256", "k1"), "suitable verification key"),  # the kid names an RSA key
        ("", "Empty JWT"),
        ("a.b", "Malformed JWT"),
    ],
)
def test_jwks_refusals(token, reason):
    with pytest.raises(TokenInvalid, match=reason):
        jwks_validator().validate(token)


def test_clock_skew_is_leeway_for_exp_and_nbf():
    v = jwks_validator(JwksValidatorConfig(jwks_url="file:/x", expected_audience=("kafka",), clock_skew_s=0))
    with pytest.raises(TokenInvalid):
        v.validate(signed({**CLAIMS, "exp": int(NOW)}))
    assert jwks_validator().validate(signed({**CLAIMS, "exp": int(NOW) - 29, "nbf": int(NOW) + 29})).principal_name == "alice"


def test_a_token_with_an_audience_is_refused_when_none_is_expected():
    v = jwks_validator(JwksValidatorConfig(jwks_url="file:/x"))  # jose4j's rule, which Kafka inherits
    with pytest.raises(TokenInvalid, match="no expected audience"):
        v.validate(signed(CLAIMS))
    assert v.validate(signed({k: x for k, x in CLAIMS.items() if k not in ("aud", "iss")})).principal_name == "alice"


def test_an_unknown_kid_asks_for_a_refresh():
    source = StaticJwks(RSA)
    with pytest.raises(TokenInvalid):
        jwks_validator(source=source).validate(signed(CLAIMS, kid="rotated"))
    assert source.expedited == ["rotated"]


def test_parse_jwks_skips_what_it_cannot_use():
    doc = {"keys": [RSA.as_dict(private=False), {"kty": "oct", "k": "c2VjcmV0"}, {"kty": "RSA", "n": "!"},
                    {**EC.as_dict(private=False), "use": "enc"}]}
    assert [k.kid for k in parse_jwks(json.dumps(doc), "t")] == ["k1"]
    for bad in ("[]", "{", '{"keys": 1}'):
        with pytest.raises(ValueError, match="t"):
            parse_jwks(bad, "t")


def test_jwks_sources_by_url(tmp_path):
    f = tmp_path / "jwks.json"
    f.write_text(json.dumps({"keys": [RSA.as_dict(private=False)]}))
    src = jwks_source(JwksValidatorConfig(f.as_uri()))
    assert isinstance(src, JwksFile)
    src.start()
    assert [k.kid for k in src.keys()] == ["k1"]
    assert isinstance(jwks_source(JwksValidatorConfig("https://idp.example/jwks")), RefreshingJwks)
    for url, words in [("ftp://x/jwks", "invalid protocol"), ("/etc/jwks.json", "missing the protocol"),
                       ((tmp_path / "nope.json").as_uri(), "doesn't exist"), (tmp_path.as_uri(), "directory")]:
        with pytest.raises(OAuthBearerConfigError, match=words):
            jwks_source(JwksValidatorConfig(url))


def test_refreshing_jwks_fetches_at_start_on_schedule_and_on_an_unknown_kid():
    docs = [{"keys": [RSA.as_dict(private=False)]}]
    calls: list[str] = []
    fail = threading.Event()

    def fetch(url: str) -> bytes:
        calls.append(url)
        if fail.is_set():
            raise OSError("down")
        return json.dumps(docs[-1]).encode()

    now = [0.0]
    src = RefreshingJwks("http://idp/jwks", refresh_ms=3_600_000, fetch=fetch, clock=lambda: now[0])
    src.start()
    try:
        assert [k.kid for k in src.keys()] == ["k1"] and src.refreshes == 1
        docs.append({"keys": [RSA.as_dict(private=False), EC.as_dict(private=False)]})
        src.maybe_expedite_refresh("e1")
        wait_until(lambda: src.refreshes == 2, timeout=5, message="a refresh for the unknown kid")
        assert sorted(k.kid for k in src.keys()) == ["e1", "k1"]
        src.maybe_expedite_refresh("zz")
        wait_until(lambda: src.refreshes == 3, timeout=5, message="a refresh for another kid")
        src.maybe_expedite_refresh("zz")  # the same kid within a minute: no new fetch
        now[0] = 61.0
        fail.set()
        src.maybe_expedite_refresh("zz")  # after a minute: fetched again, fails, keeps the keys
        wait_until(lambda: len(calls) == 4, timeout=5, message="the fourth fetch")
        assert sorted(k.kid for k in src.keys()) == ["e1", "k1"]
        src.maybe_expedite_refresh("x" * 1001)  # too long to be a kid: ignored
    finally:
        src.stop()
    assert len(calls) == 4 and not src._thread.is_alive()
    fast = RefreshingJwks("http://idp/jwks", refresh_ms=20, fetch=lambda u: json.dumps(docs[0]).encode())
    fast.start()
    try:
        wait_until(lambda: fast.refreshes >= 3, timeout=5, message="scheduled refreshes")
    finally:
        fast.stop()


# ----------------------------------------------------------------- config

OB_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
BASE = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9094",
    "controller.listener.names": "CONTROLLER",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f'{OB_MODULE} required unsecuredLoginStringClaim_sub="admin";',
}


@pytest.fixture
def jwks_file(tmp_path):
    f = tmp_path / "jwks.json"
    f.write_text(json.dumps({"keys": [RSA.as_dict(private=False)]}))
    return f


def secured(jwks_file, **extra) -> dict[str, str]:
    return {**BASE, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(), **extra}


def test_an_unsecured_listener_builds():
    sasl = build_listener_sasl(build_config(BASE))["SASL_PLAINTEXT"]
    assert sasl.mechanisms == ("OAUTHBEARER",) and sasl.background == ()
    server = sasl.servers["OAUTHBEARER"]()
    assert isinstance(server.validator, UnsecuredValidator)


def test_plain_and_oauthbearer_on_one_listener():
    cfg = build_config({**BASE, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                        'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";'})
    sasl = build_listener_sasl(cfg)["SASL_PLAINTEXT"]
    assert sasl.mechanisms == ("PLAIN", "OAUTHBEARER") and set(sasl.servers) == {"PLAIN", "OAUTHBEARER"}
    a = SaslServerAuthenticator(sasl)
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER"), 0), Respond)
    s = a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=message(unsecured({**GOOD, "exp": 4e9, "iat": None}))), 0)
    assert isinstance(s, Succeeded) and s.principal == "User:alice"


def test_a_jwks_listener_builds_with_its_keys(jwks_file):
    cfg = build_config(secured(jwks_file, **{
        "sasl.oauthbearer.expected.audience": "kafka,other",
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "https://idp.example",
        "sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.sub.claim.name": "client_id",
    }))
    sasl = build_listener_sasl(cfg)["SASL_PLAINTEXT"]
    (source,) = sasl.background
    validator = sasl.servers["OAUTHBEARER"]().validator
    assert isinstance(validator, JwksValidator) and validator.source is source
    assert validator.config == JwksValidatorConfig(jwks_file.as_uri(), expected_audience=("kafka", "other"),
                                                   expected_issuer="https://idp.example", clock_skew_s=5, sub_claim="client_id")
    old = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
    cfg = build_config(secured(jwks_file, **{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": old}))
    assert build_listener_sasl(cfg)["SASL_PLAINTEXT"].background


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": None}, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "missing"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": 'x.Y required a="sekrit";'},
         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "OAuthBearerLoginModule"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f'{OB_MODULE} required unsecuredValidatorAllowableClockSkewMs="-5";'},
         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "unsecuredValidatorAllowableClockSkewMs"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.acme.Handler"},
         "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", "one of"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR},
         "sasl.oauthbearer.jwks.endpoint.url", "missing"),
        ({"sasl.oauthbearer.expected.audience": "kafka"}, "sasl.oauthbearer.expected.audience", "no effect"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "x"},
         "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer", "no effect"),
        ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config":
          'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="sekrit";'},
         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "does not enable OAUTHBEARER"),
        ({"sasl.oauthbearer.token.endpoint.url": "https://idp/token"}, "sasl.oauthbearer.token.endpoint.url", "not supported"),
        ({"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100"}, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "no effect"),
        ({"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms.x": "100"}, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms.x", "not supported"),
        ({"listener.name.sasl_plaintext.sasl.oauthbearer.expected.audience": "x"},
         "listener.name.sasl_plaintext.sasl.oauthbearer.expected.audience", "not supported"),
        ({"sasl.oauthbearer.clock.skew.seconds": "-1"}, "sasl.oauthbearer.clock.skew.seconds", "invalid value"),
    ],
)
def test_oauthbearer_refusals_name_the_key_never_the_secret(change, key, words):
    props = {**BASE, **{k: v for k, v in change.items() if v is not None}}
    for k, v in change.items():
        if v is None:
            props.pop(k)
    with pytest.raises(ConfigError) as e:
        build_config(props)
    assert e.value.key == key, str(e.value)
    assert words in str(e.value)
    assert "sekrit" not in str(e.value)


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}, "sasl.oauthbearer.jwks.endpoint.url", "invalid protocol"),
        ({"sasl.oauthbearer.jwks.endpoint.refresh.ms": "1000"}, "sasl.oauthbearer.jwks.endpoint.refresh.ms", "file: JWKS"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "1000"},
         "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms", "from a file"),
        ({"sasl.oauthbearer.sub.claim.name": " "}, "sasl.oauthbearer.sub.claim.name", "blank"),
        ({"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "1000"}, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "file: JWKS"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "500",
          "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "100"}, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "less than"),
        # the listener's own key wins, so the global one would have no effect
        ({"sasl.oauthbearer.expected.issuer": "a", "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "b"},
         "sasl.oauthbearer.expected.issuer", "no effect"),
    ],
)
def test_jwks_refusals_in_config(jwks_file, extra, key, words):
    with pytest.raises(ConfigError) as e:
        build_config(secured(jwks_file, **extra))
    assert e.value.key == key and words in str(e.value)


# ----------------------------------------------------------------- the authenticator


def settings_(validator=None, **kw) -> ListenerSasl:
    factory = partial(OAuthBearerServer, validator or UnsecuredValidator(clock=clock), clock)
    return ListenerSasl(**{"listener": "SASL", "mechanisms": ("OAUTHBEARER",), "servers": {"OAUTHBEARER": factory},
                           "max_reauth_ms": 0, "failed_delay_ms": 0, **kw})


def frame(key: int, version: int, **fields) -> bytes:
    if not fields:
        return request_bytes(key, version, 1)[4:]
    return request_frame(key, version, correlation_id=1, **fields)[4:]


def authenticate(a: SaslServerAuthenticator, token: bytes, version: int = 2):
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER"), 0), Respond)
    return a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token), 0)


@pytest.mark.parametrize(("max_reauth_ms", "lifetime_s"), [(0, 600), (60_000, 60), (3_600_000, 600)])
def test_the_session_ends_when_the_token_does(max_reauth_ms, lifetime_s):
    a = SaslServerAuthenticator(settings_(max_reauth_ms=max_reauth_ms))
    s = authenticate(a, message(unsecured({**GOOD, "exp": NOW + 600})))
    assert isinstance(s, Succeeded) and s.principal == "User:alice"
    assert s.reply.response.session_lifetime.total_seconds() == lifetime_s
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), lifetime_s * 1000 - 1), Serve)
    assert isinstance(a.on_frame(frame(ApiKey.METADATA, 12), lifetime_s * 1000), Close)


def test_a_token_that_never_expires_gets_the_longest_session():
    a = SaslServerAuthenticator(settings_())
    s = authenticate(a, message(unsecured({**GOOD, "exp": 10**300})))
    assert isinstance(s, Succeeded) and s.reply.response.session_lifetime == timedelta(milliseconds=2**53)
    b = SaslServerAuthenticator(settings_(max_reauth_ms=2**63 - 1))  # connections.max.reauth.ms at Long.MAX_VALUE
    s = authenticate(b, message(unsecured(GOOD)))
    assert isinstance(s, Succeeded) and s.reply.response.session_lifetime.total_seconds() == 3600


def test_a_refused_token_over_saslauthenticate_and_v0():
    a = SaslServerAuthenticator(settings_())
    challenge = authenticate(a, message(unsecured({**GOOD, "exp": NOW - 1})))
    assert isinstance(challenge, Respond) and challenge.response.error_code == ErrorCode.none
    assert bytes(challenge.response.auth_bytes) == b'{"status":"invalid_token"}'
    f = a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x01"), 0)
    assert isinstance(f, Failed) and f.reply.response.error_code == ErrorCode.sasl_authentication_failed
    assert f.reply.response.error_message == '{"status":"invalid_token"}'
    b = SaslServerAuthenticator(settings_())
    b.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="OAUTHBEARER"), 0)
    assert b.on_frame(message(unsecured({**GOOD, "exp": NOW - 1})), 0) == RawToken(b'{"status":"invalid_token"}')
    assert isinstance(b.on_frame(b"\x01", 0), Failed)
    c = SaslServerAuthenticator(settings_())
    f = authenticate(c, b"n,,\x01auth=Basic x\x01\x01")
    assert isinstance(f, Failed) and f.reply.response.error_message == INVALID_CREDENTIALS


_TOKENS = st.one_of(
    st.binary(max_size=80),
    st.builds(message, st.text(alphabet="abcXYZ019-_.~+/=", max_size=60),
              st.text(alphabet="ab=,", max_size=6), st.text(alphabet="ab= \x01", max_size=12)),
    st.builds(lambda c, h, s: message(unsecured(c, h, s)),
              st.dictionaries(st.sampled_from(["sub", "exp", "iat", "scope"]),
                              st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.none(), st.booleans(),
                                        st.lists(st.text(max_size=3), max_size=3)), max_size=4),
              st.dictionaries(st.sampled_from(["alg", "kid"]), st.one_of(st.just("none"), st.text(max_size=4), st.integers()), max_size=2),
              st.sampled_from(["", "x"])),
)


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(_TOKENS, min_size=1, max_size=3), v0=st.booleans(), jwks=st.booleans())
def test_fuzzed_oauthbearer_messages_never_raise(tokens, v0, jwks):
    validator = jwks_validator(source=StaticJwks(RSA)) if jwks else None
    server = OAuthBearerServer(validator or UnsecuredValidator(clock=clock), clock)
    for t in tokens:  # the mechanism alone raises nothing but SaslAuthenticationError
        try:
            server.evaluate(t)
        except SaslAuthenticationError:
            break
    a = SaslServerAuthenticator(settings_(validator, max_reauth_ms=10))
    a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 0 if v0 else 1, mechanism="OAUTHBEARER"), 0)
    for t in tokens:
        out = a.on_frame(t if v0 else frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=t), 0)
        assert isinstance(out, Serve | Respond | RawToken | Succeeded | Failed | Close)
        if isinstance(out, Failed | Close | Succeeded):
            break


def test_an_http_jwks_listener_refreshes_as_configured():
    cfg = build_config({**BASE, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
                        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
                        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000"})
    (source,) = build_listener_sasl(cfg)["SASL_PLAINTEXT"].background  # nothing fetched: the node starts it
    assert isinstance(source, RefreshingJwks) and source.refresh_ms == 60000 and source.refreshes == 0
    assert (source.retry_backoff_ms, source.retry_backoff_max_ms) == (100, 10000)  # Kafka's defaults


def test_a_failed_refresh_is_retried_with_backoff_until_the_deadline():
    outcomes = iter([b"ok", OSError("1"), OSError("2"), b"ok"] + [OSError("down")] * 100)
    calls: list[float] = []

    def fetch(url: str) -> bytes:
        calls.append(time.monotonic())
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return json.dumps({"keys": [RSA.as_dict(private=False)]}).encode()

    src = RefreshingJwks("http://idp/jwks", refresh_ms=3_600_000, retry_backoff_ms=20, retry_backoff_max_ms=300, fetch=fetch)
    src.start()
    try:
        src.maybe_expedite_refresh("a")
        wait_until(lambda: src.refreshes == 2, timeout=5, message="a refresh that succeeds on its third attempt")
        assert len(calls) == 4 and calls[3] - calls[2] >= 0.035  # waits of 20 ms, then 40 ms
        src.maybe_expedite_refresh("b")  # now every attempt fails: 20+40+80+160 ms, cut at 300 ms
        wait_until(lambda: len(calls) >= 9, timeout=5, message="retries up to the deadline")
    finally:
        src.stop()
    assert 8 <= len(calls) <= 10 and src.refreshes == 2 and [k.kid for k in src.keys()] == ["k1"]


def test_plain_with_connections_max_reauth_ms_at_long_max_value():
    """Before the cap, a session lifetime past timedelta's range closed every PLAIN connection."""
    from kavka.sasl import PlainServer, PlainUsers

    users = PlainUsers.from_jaas(parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";'))
    a = SaslServerAuthenticator(ListenerSasl(listener="SASL", mechanisms=("PLAIN",), servers={"PLAIN": partial(PlainServer, users)},
                                             max_reauth_ms=2**63 - 1, failed_delay_ms=0))
    assert isinstance(a.on_frame(frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"), 0), Respond)
    s = a.on_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0a\0pw"), 0)
    assert isinstance(s, Succeeded) and s.reply.response.session_lifetime == timedelta(milliseconds=2**53)
