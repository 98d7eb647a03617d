"""ACLs in the metadata log: AccessControlEntryRecord / RemoveAccessControlEntryRecord through
MetadataDelta (via their on-disk form) and snapshots, and CreateAcls / DeleteAcls / DescribeAcls
decided on an image (controller.acl_control) with Kafka's AclControlManager rules and errors."""

from __future__ import annotations

import itertools

import pytest

from kavka.authorizer import Acl, AclFilter
from kavka.common import AclOperation as Op
from kavka.common import AclPermissionType as Perm
from kavka.common import ErrorCode
from kavka.common import PatternType as Pt
from kavka.common import ResourceType as Rt
from kavka.controller.acl_control import create_acls, delete_acls, describe_acls
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records


def ids():
    counter = itertools.count(1)
    return lambda: f"id{next(counter):04d}"


def replay(image: MetadataImage, records) -> MetadataImage:
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(mr.decode(*mr.encode(r)), image.offset + 1 + i)
    return d.apply()


def acl(name="t", rt=Rt.TOPIC, pt=Pt.LITERAL, principal="User:alice", host="*", op=Op.READ, perm=Perm.ALLOW) -> Acl:
    return Acl(rt, name, pt, principal, host, op, perm)


def test_create_replay_snapshot_and_delete():
    new_id = ids()
    a, b = acl("t"), acl("p-", pt=Pt.PREFIXED, op=Op.WRITE, perm=Perm.DENY)
    records, results = create_acls(MetadataImage(), [a, b, a], new_id)
    assert [r.error for r in results] == [ErrorCode.none] * 3
    assert len(records) == 2  # the duplicate in the request adds nothing
    image = replay(MetadataImage(), records)
    assert set(image.acls.values()) == {a, b}
    assert isinstance(next(iter(image.acls.values())).operation, Op)
    # creating an existing ACL succeeds without a record
    again, results = create_acls(image, [a], new_id)
    assert again == [] and results[0].error == ErrorCode.none
    # a snapshot rebuilds the same ACLs with the same ids
    assert replay(MetadataImage(), image_records(image)).acls == image.acls
    # delete: each filter reports what it matched; an ACL matched twice is removed once
    removals, results = delete_acls(image, [AclFilter(resource_name="t"), AclFilter(), AclFilter(resource_name="x")])
    assert [set(r.acls) for r in results] == [{a}, {a, b}, set()]
    assert len(removals) == 2
    assert replay(image, removals).acls == {}


@pytest.mark.parametrize(("bad", "message"), [
    (acl(rt=Rt.ANY), "Invalid resourceType ANY"),
    (acl(rt=Rt.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pt=Pt.MATCH), "Invalid patternType MATCH"),
    (acl(pt=Pt.ANY), "Invalid patternType ANY"),
    (acl(op=Op.ANY), "Invalid operation ANY"),
    (acl(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl(perm=Perm.ANY), "Invalid permissionType ANY"),
    (acl(""), "Invalid empty resource name"),
    (acl("my-cluster", rt=Rt.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
])
def test_invalid_creations_fail_alone(bad: Acl, message: str):
    records, results = create_acls(MetadataImage(), [bad, acl()], ids())
    assert [(r.error, r.message) for r in results] == [(ErrorCode.invalid_request, message), (ErrorCode.none, None)]
    assert len(records) == 1


def test_unknown_filters_fail_alone_and_describe():
    image = replay(MetadataImage(), create_acls(MetadataImage(), [acl(), acl("kafka-cluster", rt=Rt.CLUSTER)], ids())[0])
    assert len(image.acls) == 2
    _, results = delete_acls(image, [AclFilter(pattern_type=Pt.UNKNOWN), AclFilter(operation=Op.UNKNOWN)])
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.invalid_request, "Unknown patternFilter."), (ErrorCode.invalid_request, "Unknown entryFilter.")]
    assert describe_acls(image, AclFilter(resource_type=Rt.TOPIC)).acls == (acl(),)
    assert describe_acls(image, AclFilter(permission_type=Perm.UNKNOWN)).error == ErrorCode.invalid_request


def test_removing_an_unknown_id_is_nothing():
    assert replay(MetadataImage(), [mr.RemoveAccessControlEntryRecord("nope")]).acls == {}


def test_more_than_ten_thousand_new_acls_fail_as_a_whole():
    many = [acl(f"t{i}") for i in range(10_001)]
    records, results = create_acls(MetadataImage(), many, ids())
    assert records == [] and {r.error for r in results} == {ErrorCode.unknown_server_error}
    records, results = create_acls(MetadataImage(), many[:10_000], ids())
    assert len(records) == 10_000 and {r.error for r in results} == {ErrorCode.none}
