"""Hypothesis fuzzing of CreateAcls, DeleteAcls and AlterClientQuotas with well-framed but
semantically malformed bodies, against a real `kavka server` with `authorizer.class.name=kavka`.

The frames are valid (the wire fuzzers of test_protocol_robustness cover broken frames); what is
drawn is meaning: resource types, pattern types, operations and permissions from every int8 (the
ANY and MATCH filter values in a creation, codes Kafka does not know), empty and odd names,
principals without `User:`, hosts that are not addresses; quota entities of unknown or repeated
types, names that are empty or not IPs, keys unknown or given twice, values negative, zero, NaN,
infinite, fractional or too large, removals that carry a value.

The test keeps a model of what the broker must hold (Kafka's rules, written here independently of
kavka's code: AclApis.handleCreateAcls and AclControlManager.validateNewAcl for a creation,
ClientQuotaControlManager for the errors a quota alteration must get) and checks after every
request that

- each binding, filter and entry is answered NONE or INVALID_REQUEST exactly as Kafka decides (a
  request carrying a code Kafka does not know may instead close that connection, as Kafka's
  request parser does; then nothing changed);
- DescribeAcls lists exactly the model's ACLs: refused creations add nothing, a deletion removes
  exactly the ACLs it reports, nothing else; DescribeClientQuotas lists exactly the model's quotas;
- at the end the broker is alive, logged nothing at ERROR, and a SASL user's Metadata goes through
  the authorizer holding every odd ACL the fuzzer got accepted.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import nested
from tests.broker_harness import BrokerProcess, free_port
from tests.raw_client import RawClient

PASSWORD = "fuzz-user-pw-93"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_fuzz="{PASSWORD}";'

# Kafka's codes (org.apache.kafka.common.{resource,acl}): what a creation may name.
RESOURCE_TYPES = range(2, 8)  # TOPIC .. USER (0 UNKNOWN, 1 ANY)
PATTERN_TYPES = (3, 4)  # LITERAL, PREFIXED (1 ANY, 2 MATCH: filters only)
OPERATIONS = range(2, 15)  # ALL .. DESCRIBE_TOKENS (1 ANY)
PERMISSIONS = (2, 3)  # DENY, ALLOW (1 ANY)
CLUSTER = 4

CREATE_V, DELETE_V, DESCRIBE_V, ALTER_Q_V, DESCRIBE_Q_V = 3, 3, 3, 1, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("aclfuzz"), port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS",  # the raw requests come in on PLAINTEXT
    })
    b.format()
    b.start()
    b.sasl_port = sasl
    yield b
    assert b.stop() == 0, b.log_text()


# ------------------------------------------------------------------ strategies

int8 = st.integers(-128, 127)


def codes(valid: Any) -> st.SearchStrategy[int]:
    """A valid code four times in five; else one of Kafka's other codes (ANY, UNKNOWN, MATCH) or
    any int8, so most bindings are valid but for one or two fields."""
    valid = sorted(valid)
    odd = st.sampled_from(sorted({0, 1, 2, 3, 4} - set(valid))) | int8
    return st.integers(0, 4).flatmap(lambda i: odd if i == 0 else st.sampled_from(valid))


def often(common: list[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of `common` three times in four, else `odd`."""
    return st.integers(0, 3).flatmap(lambda i: odd if i == 0 else st.sampled_from(common))


names = often(["payments.orders", "payments.", "fz", "*", "kafka-cluster"], st.sampled_from(["", " "]) | st.text(max_size=12))
principals = often(["User:alice", "User:*", "User:bob"],
                   st.sampled_from(["alice", "", ":", "User:", "Group:ops", "User:a:b"]) | st.text(max_size=10))
hosts = often(["*", "127.0.0.1", "::1"], st.sampled_from(["", "not-a-host", "999.1.1.1", "10.0.0.0/8"]) | st.text(max_size=10))
creations = st.tuples(codes(RESOURCE_TYPES), names, codes(PATTERN_TYPES), principals, hosts, codes(OPERATIONS),
                      codes(PERMISSIONS))
# A filter may also say ANY (1), and MATCH (2) for the pattern type.
filters = st.tuples(codes(range(1, 8)), st.none() | names, codes(range(1, 5)), st.none() | principals,
                    st.none() | hosts, codes(range(1, 15)), codes(range(1, 4)))

ENTITY_TYPES = ("user", "client-id", "ip")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate")
entity_types = often(list(ENTITY_TYPES), st.sampled_from(["", "User", "users", "group"]) | st.text(max_size=6))
entity_names = often([None, "alice", "bob", "10.0.0.1", "::1"], st.sampled_from(["", "not-an-ip", "999.1.1.1"]))
quota_values = often([1024.0, 1048576.0, 1e12, 2.0**63, 3.0],
                     st.sampled_from([0.0, -0.0, -1.0, 1.5, math.nan, math.inf, -math.inf, 1e30, 2.0**64])
                     | st.floats(allow_nan=True, allow_infinity=True))
quota_keys = often(["producer_byte_rate", "consumer_byte_rate"],
                   st.sampled_from([*QUOTA_KEYS, "", "bogus_rate"]) | st.text(max_size=6))
ops = st.tuples(quota_keys, quota_values, st.integers(0, 4).map(lambda i: i == 0))  # a removal one time in five
entities = often([[("user", "alice")], [("client-id", "bob")], [("user", "bob"), ("client-id", "app")], [("user", None)],
                  [("client-id", None), ("user", "alice")]],
                 st.lists(st.tuples(entity_types, entity_names), max_size=3))
ip_entry = st.tuples(often([[("ip", "10.0.0.1")], [("ip", None)], [("ip", "::1")]], entities),
                     st.lists(st.tuples(often(["connection_creation_rate"], quota_keys), quota_values,
                                        st.integers(0, 4).map(lambda i: i == 0)), min_size=1, max_size=2))
entries = st.tuples(entities, st.lists(ops, min_size=1, max_size=2)) | ip_entry


# ------------------------------------------------------------------ Kafka's rules (the oracle)


def kafka_knows(rt: int, pt: int, op: int, perm: int) -> bool:
    """CreateAclsRequest.validate / DeleteAclsRequest.validate: no field decodes to UNKNOWN."""
    return 1 <= rt <= 7 and 1 <= pt <= 4 and 1 <= op <= 14 and 1 <= perm <= 3


def creation_error(rt: int, name: str, pt: int, op: int, perm: int) -> ErrorCode:
    """AclApis.handleCreateAcls, then AclControlManager.validateNewAcl."""
    if rt == CLUSTER and name != "kafka-cluster":
        return ErrorCode.invalid_request
    if (not name or rt not in RESOURCE_TYPES or pt not in PATTERN_TYPES or op not in OPERATIONS
            or perm not in PERMISSIONS):
        return ErrorCode.invalid_request
    return ErrorCode.none


def filter_error(rt: int, pt: int, op: int, perm: int) -> ErrorCode:
    """AclControlManager.deleteAcls: a filter with an UNKNOWN field is refused alone."""
    return ErrorCode.none if kafka_knows(rt, pt, op, perm) else ErrorCode.invalid_request


def _ip(name: str | None) -> bool:
    import ipaddress

    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def quota_error(entity: list[tuple[str, str | None]], ops_: list[tuple[str, float, bool]]) -> ErrorCode:
    """ClientQuotaControlManager.alterClientQuotas for one entry of a request with no repeated
    entity, with kavka's two documented refusals where Kafka lets a value through: NaN (Kafka's `value <= 0.0`
    is false for NaN, so Kafka stores a quota that never bites); an entity type given twice (Kafka
    reads the entity into a HashMap, so the last name silently wins; its own validateEntity means
    to refuse it)."""
    keys = [k for k, _, _ in ops_]
    if len(set(keys)) != len(keys):
        return ErrorCode.invalid_request  # "Duplicate quota key ..."
    types = [t for t, _ in entity]
    if not entity or len(set(types)) != len(types) or any(t not in ENTITY_TYPES for t in types):
        return ErrorCode.invalid_request
    if any(n == "" for _, n in entity):
        return ErrorCode.invalid_request
    as_map = dict(entity)
    if "ip" in as_map and (len(as_map) > 1 or not _ip(as_map["ip"])):
        return ErrorCode.invalid_request
    # The integral keys' limits (None: a DOUBLE, any value > 0).
    allowed: dict[str, int | None] = {"connection_creation_rate": 2**31 - 1} if "ip" in as_map else {
        "producer_byte_rate": 2**63 - 1, "consumer_byte_rate": 2**63 - 1,
        "request_percentage": None, "controller_mutation_rate": None}
    for k, v, remove in ops_:
        if remove:
            continue  # a removal's value is ignored; removing an unset or unknown key does nothing
        if k not in allowed or not v > 0:
            return ErrorCode.invalid_request
        limit = allowed[k]
        # Kafka compares with the limit as a double: 2^63 passes for a LONG.
        if limit is not None and (v > float(limit) or abs(math.fmod(v, 1.0)) > 1e-6):
            return ErrorCode.invalid_request
    return ErrorCode.none


# ------------------------------------------------------------------ the broker's view


def describe_acls(port: int) -> set[tuple]:
    cls = api.request_schema(ApiKey.DESCRIBE_ACLS, DESCRIBE_V)
    with RawClient(port) as c:
        r = c.call(ApiKey.DESCRIBE_ACLS, DESCRIBE_V, cls(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
    assert r.error_code == ErrorCode.none, r
    return {(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation,
             a.permission_type) for res in r.resources for a in res.acls}


def describe_quotas(port: int) -> dict[frozenset, dict[str, float]]:
    cls = api.request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, DESCRIBE_Q_V)
    with RawClient(port) as c:
        r = c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, DESCRIBE_Q_V, cls(components=(), strict=False))
    assert r.error_code == ErrorCode.none, r
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in r.entries}


def call_or_closed(port: int, key: ApiKey, version: int, request: Any) -> Any | None:
    """The response, or None when the broker closed the connection instead of answering."""
    with RawClient(port) as c:
        c.send(key, version, request, correlation_id=11)
        try:
            corr, resp = c.read_response(key, version)
        except ConnectionError:
            return None
    assert corr == 11
    return resp


# ------------------------------------------------------------------ the fuzzers (DescribeAcls too: its filter is DeleteAcls')


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(creations, min_size=1, max_size=4))
def _fuzz_create(broker, model: set[tuple], batch: list[tuple]) -> None:
    cls = api.request_schema(ApiKey.CREATE_ACLS, CREATE_V)
    creation = nested(cls, "AclCreation")
    req = cls(creations=tuple(creation(resource_type=rt, resource_name=n, resource_pattern_type=pt, principal=p,
                                       host=h, operation=op, permission_type=perm)
                              for rt, n, pt, p, h, op, perm in batch))
    resp = call_or_closed(broker.port, ApiKey.CREATE_ACLS, CREATE_V, req)
    if resp is None:
        assert not all(kafka_knows(rt, pt, op, perm) for rt, _, pt, _, _, op, perm in batch), batch
    else:
        got = [r.error_code for r in resp.results]
        want = [creation_error(rt, n, pt, op, perm) for rt, n, pt, _, _, op, perm in batch]
        assert got == want, (batch, [(r.error_code, r.error_message) for r in resp.results])
        model |= {c for c, e in zip(batch, got, strict=True) if e == ErrorCode.none}
    assert describe_acls(broker.port) == model, batch


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(filters, min_size=1, max_size=3))
def _fuzz_delete(broker, model: set[tuple], batch: list[tuple]) -> None:
    cls = api.request_schema(ApiKey.DELETE_ACLS, DELETE_V)
    flt = nested(cls, "DeleteAclsFilter")
    req = cls(filters=tuple(flt(resource_type_filter=rt, resource_name_filter=n, pattern_type_filter=pt,
                                principal_filter=p, host_filter=h, operation=op, permission_type=perm)
                            for rt, n, pt, p, h, op, perm in batch))
    resp = call_or_closed(broker.port, ApiKey.DELETE_ACLS, DELETE_V, req)
    if resp is None:
        assert not all(kafka_knows(rt, pt, op, perm) for rt, _, pt, _, _, op, perm in batch), batch
    else:
        got = [r.error_code for r in resp.filter_results]
        assert got == [filter_error(rt, pt, op, perm) for rt, _, pt, _, _, op, perm in batch], batch
        removed = {(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                    m.permission_type) for r in resp.filter_results for m in r.matching_acls}
        assert removed <= model, (batch, removed - model)  # it reports only ACLs that existed
        model -= removed
    assert describe_acls(broker.port) == model, batch


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(f=filters)
def _fuzz_describe(broker, model: set[tuple], f: tuple) -> None:
    rt, n, pt, p, h, op, perm = f
    cls = api.request_schema(ApiKey.DESCRIBE_ACLS, DESCRIBE_V)
    resp = call_or_closed(broker.port, ApiKey.DESCRIBE_ACLS, DESCRIBE_V, cls(
        resource_type_filter=rt, resource_name_filter=n, pattern_type_filter=pt, principal_filter=p, host_filter=h,
        operation=op, permission_type=perm))
    if resp is None:
        assert not kafka_knows(rt, pt, op, perm), f
        return
    # DescribeAclsRequest.validate / AclControlManager: a filter with an UNKNOWN field is INVALID_REQUEST.
    assert resp.error_code == filter_error(rt, pt, op, perm), (f, resp.error_code, resp.error_message)
    found = {(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation,
              a.permission_type) for res in resp.resources for a in res.acls}
    assert found <= model, (f, found - model)  # never an ACL that does not exist (ANY: describe_acls)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(entries, min_size=1, max_size=3), validate_only=st.booleans())
def _fuzz_quotas(broker, model: dict[frozenset, dict[str, float]], batch: list[tuple], validate_only: bool) -> None:
    cls = api.request_schema(ApiKey.ALTER_CLIENT_QUOTAS, ALTER_Q_V)
    entry_cls, entity_cls, op_cls = nested(cls, "EntryData"), nested(cls, "EntityData"), nested(cls, "OpData")
    req = cls(validate_only=validate_only, entries=tuple(
        entry_cls(entity=tuple(entity_cls(entity_type=t, entity_name=n) for t, n in entity),
                  ops=tuple(op_cls(key=k, value=v, remove=rm) for k, v, rm in ops_))
        for entity, ops_ in batch))
    resp = call_or_closed(broker.port, ApiKey.ALTER_CLIENT_QUOTAS, ALTER_Q_V, req)
    assert resp is not None, batch  # every field is well-formed: Kafka answers every one
    results = {tuple((e.entity_type, e.entity_name) for e in r.entity): r.error_code for r in resp.entries}
    assert set(results.values()) <= {ErrorCode.none, ErrorCode.invalid_request}, resp
    as_sets = [frozenset(entity) for entity, _ in batch]
    if len(set(as_sets)) < len(as_sets):
        # A repeated entity: Kafka applies the first and answers INVALID_REQUEST "Ignoring duplicate
        # entity" for it, so the response does not say what changed; take the broker's word.
        model.clear()
        model.update(describe_quotas(broker.port))
        return
    for entity, ops_ in batch:
        got = results[tuple(entity)]
        assert got == quota_error(entity, ops_), (entity, ops_, resp)
        if got == ErrorCode.none and not validate_only:
            quotas = model.setdefault(frozenset(entity), {})
            for k, v, remove in ops_:
                if remove:
                    quotas.pop(k, None)
                else:
                    quotas[k] = v
            if not quotas:
                del model[frozenset(entity)]
    assert describe_quotas(broker.port) == model, batch


def _problems(lines: list[str]) -> list[str]:
    return [line for line in lines if " ERROR " in line or "CRITICAL" in line or "Traceback" in line]


def test_malformed_acl_bindings_and_filters_get_kafkas_answers_and_change_only_what_they_report(broker):
    mark = len(broker.output)
    model = describe_acls(broker.port)
    _fuzz_create(broker, model)
    _fuzz_delete(broker, model)
    _fuzz_create(broker, model)  # again, after deletions: duplicates of survivors add nothing
    _fuzz_describe(broker, model)
    assert broker.alive() and _problems(broker.output[mark:]) == [], broker.log_text()
    # The authorizer, built from every odd ACL the fuzzer got accepted, still answers a real client.
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "fuzz", "sasl.password": PASSWORD})
    assert admin.list_topics(timeout=15).brokers
    assert broker.alive() and _problems(broker.output[mark:]) == [], broker.log_text()


def test_malformed_quota_alterations_get_kafkas_answers_and_change_only_what_they_report(broker):
    mark = len(broker.output)
    model = describe_quotas(broker.port)
    _fuzz_quotas(broker, model)
    assert broker.alive() and _problems(broker.output[mark:]) == [], broker.log_text()
