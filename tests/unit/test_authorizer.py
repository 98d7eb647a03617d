"""kavka.authorizer: StandardAuthorizer's rules, case by case, and hypothesis properties against a
naive reference that scans every ACL with Kafka's definitions (no index)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.authorizer import Acl, AclFilter, Authorizer, parse_super_users
from kavka.common import AclOperation as Op
from kavka.common import AclPermissionType as Perm
from kavka.common import PatternType as Pt
from kavka.common import ResourceType as Rt

ALICE = "User:alice"
HOST = "10.0.0.1"


def acl(name: str = "t", *, rt: Rt = Rt.TOPIC, pt: Pt = Pt.LITERAL, principal: str = ALICE, host: str = "*",
        op: Op = Op.READ, perm: Perm = Perm.ALLOW) -> Acl:
    return Acl(rt, name, pt, principal, host, op, perm)


def allowed(acls: list[Acl], op: Op = Op.READ, name: str = "t", *, principal: str = ALICE, host: str = HOST,
            rt: Rt = Rt.TOPIC, **kw: object) -> bool:
    return Authorizer(acls, **kw).authorize(principal, host, op, rt, name)  # type: ignore[arg-type]


def test_no_acl_denies_by_default_and_allow_everyone_allows() -> None:
    assert not allowed([])
    assert allowed([], allow_everyone_if_no_acl_found=True)
    # an ACL on another resource or another type leaves this one without ACLs
    assert allowed([acl("u"), acl("t", rt=Rt.GROUP)], allow_everyone_if_no_acl_found=True)


def test_any_acl_on_the_resource_denies_the_others_even_with_allow_everyone() -> None:
    acls = [acl(principal="User:bob")]
    assert not allowed(acls, allow_everyone_if_no_acl_found=True)
    assert allowed(acls, principal="User:bob", allow_everyone_if_no_acl_found=True)


def test_deny_wins_over_allow() -> None:
    assert allowed([acl()])
    assert not allowed([acl(), acl(perm=Perm.DENY)])
    assert not allowed([acl(op=Op.ALL), acl("*", perm=Perm.DENY, principal="User:*")])
    assert not allowed([acl("t"), acl("t", pt=Pt.PREFIXED, perm=Perm.DENY)])


def test_implied_operations_are_allow_only() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        assert allowed([acl(op=op)], Op.DESCRIBE)
    for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE):
        assert not allowed([acl(op=op)], Op.DESCRIBE)
    assert allowed([acl(op=Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)
    assert not allowed([acl(op=Op.DESCRIBE)], Op.READ)
    # a DENY READ does not deny DESCRIBE; a DENY DESCRIBE does not deny READ
    assert allowed([acl(op=Op.ALL), acl(op=Op.READ, perm=Perm.DENY)], Op.DESCRIBE)
    assert allowed([acl(op=Op.READ), acl(op=Op.DESCRIBE, perm=Perm.DENY)], Op.READ)
    # ALL implies everything, for DENY too
    for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION):
        assert allowed([acl(op=Op.ALL)], op)
        assert not allowed([acl(op=Op.ALL), acl(op=Op.ALL, perm=Perm.DENY)], op)


def test_principals_hosts_and_wildcards() -> None:
    assert allowed([acl(principal="User:*")], principal="User:ANONYMOUS")
    assert not allowed([acl(principal="User:bob")])
    assert not allowed([acl(principal="Group:*")])  # only User:* is the wildcard principal
    assert allowed([acl(host=HOST)])
    assert not allowed([acl(host="10.0.0.2")])
    assert allowed([acl("*")], name="anything")
    assert not allowed([acl("*", rt=Rt.GROUP)], name="anything")


def test_literal_and_prefixed_patterns() -> None:
    assert not allowed([acl("tes")], name="test")  # a literal name is not a prefix
    assert allowed([acl("tes", pt=Pt.PREFIXED)], name="test")
    assert allowed([acl("test", pt=Pt.PREFIXED)], name="test")
    assert not allowed([acl("test1", pt=Pt.PREFIXED)], name="test")
    assert not allowed([acl("*", pt=Pt.PREFIXED)], name="test")  # a prefixed "*" is a literal prefix
    assert allowed([acl("*", pt=Pt.PREFIXED)], name="*x")
    assert not allowed([acl("f", pt=Pt.PREFIXED), acl("foo", pt=Pt.PREFIXED, perm=Perm.DENY)], name="foobar")


def test_super_users() -> None:
    assert parse_super_users(" User:admin ; User:ops;;") == frozenset({"User:admin", "User:ops"})
    assert parse_super_users(None) == frozenset()
    su = parse_super_users("User:admin;User:ops")
    assert allowed([acl(principal="User:admin", perm=Perm.DENY, op=Op.ALL)], principal="User:admin", super_users=su)
    assert allowed([], Op.CLUSTER_ACTION, "kafka-cluster", rt=Rt.CLUSTER, principal="User:ops", super_users=su)
    assert not allowed([], principal="User:adm", super_users=su)


def test_filters() -> None:
    lit = acl("foo")
    star = acl("*")
    pre = acl("fo", pt=Pt.PREFIXED)
    other = acl("bar", rt=Rt.GROUP, principal="User:bob", host="1.2.3.4", op=Op.WRITE, perm=Perm.DENY)
    every = [lit, star, pre, other]

    def names(f: AclFilter) -> list[Acl]:
        return Authorizer(every).describe(f)

    assert names(AclFilter()) == every
    assert names(AclFilter(resource_name="foo")) == [lit]  # ANY: exact name, either pattern type
    assert names(AclFilter(resource_name="fo")) == [pre]
    assert names(AclFilter(resource_name="foo", pattern_type=Pt.MATCH)) == [lit, star, pre]
    assert names(AclFilter(resource_name="fox", pattern_type=Pt.MATCH)) == [star, pre]
    assert names(AclFilter(pattern_type=Pt.MATCH)) == every
    assert names(AclFilter(pattern_type=Pt.PREFIXED)) == [pre]
    assert names(AclFilter(resource_name="foo", pattern_type=Pt.LITERAL)) == [lit]
    assert names(AclFilter(resource_type=Rt.GROUP)) == [other]
    assert names(AclFilter(principal="User:bob")) == [other]
    assert names(AclFilter(host="1.2.3.4")) == [other]
    assert names(AclFilter(operation=Op.WRITE)) == [other]
    assert names(AclFilter(permission_type=Perm.DENY)) == [other]
    assert names(AclFilter(operation=Op.ALL)) == []  # ALL in a filter is the operation ALL, not ANY
    assert AclFilter(operation=Op.UNKNOWN).is_unknown() and not AclFilter().is_unknown()


# -- properties against a naive reference -------------------------------------------------------

def reference(acls: list[Acl], principal: str, host: str, op: Op, rt: Rt, name: str, *, everyone: bool) -> bool:
    """Kafka's rules read straight off StandardAuthorizerData, over every ACL."""
    on_resource = [a for a in acls if a.resource_type == rt and (
        (a.pattern_type == Pt.LITERAL and a.resource_name in (name, "*"))
        or (a.pattern_type == Pt.PREFIXED and name.startswith(a.resource_name)))]
    results = []
    for a in on_resource:
        if a.principal not in (principal, "User:*") or a.host not in (host, "*"):
            continue
        if a.operation == Op.ALL or a.operation == op:
            results.append(a.permission_type)
        elif a.permission_type == Perm.ALLOW and (
            (op == Op.DESCRIBE and a.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
            or (op == Op.DESCRIBE_CONFIGS and a.operation == Op.ALTER_CONFIGS)):
            results.append(Perm.ALLOW)
    if Perm.DENY in results:
        return False
    if Perm.ALLOW in results:
        return True
    return everyone and not on_resource


names = st.text(alphabet="ab*", min_size=1, max_size=4)
principals = st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from([o for o in Op if o not in (Op.UNKNOWN, Op.ANY)])
rts = st.sampled_from([Rt.TOPIC, Rt.GROUP])
acls_st = st.builds(Acl, rts, names, st.sampled_from([Pt.LITERAL, Pt.PREFIXED]), principals, hosts, ops,
                    st.sampled_from([Perm.ALLOW, Perm.DENY]))


@settings(max_examples=400, deadline=None)
@given(st.lists(acls_st, max_size=12), st.sampled_from(["User:alice", "User:bob"]), hosts.filter(lambda h: h != "*"),
       ops, rts, names, st.booleans())
def test_authorize_equals_the_reference(acls: list[Acl], principal: str, host: str, op: Op, rt: Rt, name: str,
                                        everyone: bool) -> None:
    got = Authorizer(acls, allow_everyone_if_no_acl_found=everyone).authorize(principal, host, op, rt, name)
    assert got == reference(acls, principal, host, op, rt, name, everyone=everyone)


def reference_filter(f: AclFilter, a: Acl) -> bool:
    if f.resource_type not in (Rt.ANY, a.resource_type):
        return False
    if f.pattern_type not in (Pt.ANY, Pt.MATCH, a.pattern_type):
        return False
    if f.resource_name is not None:
        if f.pattern_type == Pt.MATCH:
            ok = (a.pattern_type == Pt.LITERAL and a.resource_name in (f.resource_name, "*")) or (
                a.pattern_type == Pt.PREFIXED and f.resource_name.startswith(a.resource_name))
        else:
            ok = f.resource_name == a.resource_name
        if not ok:
            return False
    return (f.principal in (None, a.principal) and f.host in (None, a.host)
            and f.operation in (Op.ANY, a.operation) and f.permission_type in (Perm.ANY, a.permission_type))


filters = st.builds(
    AclFilter, st.sampled_from([Rt.ANY, Rt.TOPIC, Rt.GROUP]), st.none() | names,
    st.sampled_from([Pt.ANY, Pt.MATCH, Pt.LITERAL, Pt.PREFIXED]), st.none() | principals, st.none() | hosts,
    st.sampled_from([Op.ANY, Op.READ, Op.ALL]), st.sampled_from([Perm.ANY, Perm.ALLOW, Perm.DENY]))


@settings(max_examples=400, deadline=None)
@given(filters, acls_st)
def test_filter_equals_the_reference(f: AclFilter, a: Acl) -> None:
    assert f.matches(a) == reference_filter(f, a)


@settings(max_examples=200, deadline=None)
@given(st.lists(acls_st, max_size=8), rts, names)
def test_a_match_filter_finds_exactly_the_acls_on_the_resource(acls: list[Acl], rt: Rt, name: str) -> None:
    """DescribeAcls with MATCH answers the ACLs authorize() consults."""
    auth = Authorizer(acls)
    assert sorted(map(repr, auth.describe(AclFilter(rt, name, Pt.MATCH)))) == sorted(map(repr, auth.resource_acls(rt, name)))


def test_ten_thousand_acls_check_fast() -> None:
    acls = [acl(f"topic-{i}", principal=f"User:u{i % 50}") for i in range(5000)]
    acls += [acl(f"pre-{i}-", pt=Pt.PREFIXED, principal=f"User:u{i % 50}", op=Op.WRITE) for i in range(5000)]
    auth = Authorizer(acls)
    start = time.perf_counter()
    for i in range(2000):
        assert auth.authorize(f"User:u{i % 50}", HOST, Op.READ, Rt.TOPIC, f"topic-{i}")
        assert auth.authorize(f"User:u{i % 50}", HOST, Op.WRITE, Rt.TOPIC, f"pre-{i}-x")
        assert not auth.authorize("User:nobody", HOST, Op.READ, Rt.TOPIC, f"topic-{i}")
    per_check = (time.perf_counter() - start) / 6000
    assert per_check < 200e-6, f"{per_check * 1e6:.0f} us per check"


@pytest.mark.parametrize("value", ["", ";", " ; "])
def test_empty_super_users(value: str) -> None:
    assert parse_super_users(value) == frozenset()


def test_authorize_by_resource_type_is_kafkas_write_on_any_topic() -> None:
    def acl(name: str, perm: Perm = Perm.ALLOW, pt: Pt = Pt.LITERAL, op: Op = Op.WRITE) -> Acl:
        return Acl(Rt.TOPIC, name, pt, "User:alice", "*", op, perm)

    def may(*acls: Acl, **kw: object) -> bool:
        return Authorizer(acls, **kw).authorize_by_resource_type("User:alice", "1.2.3.4", Op.WRITE, Rt.TOPIC)  # type: ignore[arg-type]

    assert not may()
    assert may(allow_everyone_if_no_acl_found=True)
    assert may(super_users=frozenset({"User:alice"}))
    assert may(acl("orders"))
    assert may(acl("team-", pt=Pt.PREFIXED))
    assert may(acl("orders", op=Op.ALL))
    assert not may(acl("orders", op=Op.READ))  # only Write (or All) counts, not what implies Describe
    assert not may(acl("orders"), acl("orders", Perm.DENY))
    assert not may(acl("orders"), acl("ord", Perm.DENY, Pt.PREFIXED))
    assert not may(acl("orders"), acl("*", Perm.DENY))
    assert may(acl("orders"), acl("payments", Perm.DENY))
    assert not may(acl("team-", pt=Pt.PREFIXED), acl("te", Perm.DENY, Pt.PREFIXED))
