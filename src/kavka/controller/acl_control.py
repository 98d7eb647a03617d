"""ACLs: CreateAcls and DeleteAcls decided (Kafka's AclControlManager), DescribeAcls answered.

`create_acls` validates each binding and returns an AccessControlEntryRecord (with a new id) for
each one not already in the image or earlier in the request, and one result per binding, in the
request's order; a binding equal to an existing ACL succeeds without a record; more than 10,000
new ACLs in one request fail as a whole (UNKNOWN_SERVER_ERROR, Kafka's MAX_RECORDS_PER_USER_OP).
Kafka's errors:

    INVALID_REQUEST   resource type UNKNOWN or ANY ("Invalid resourceType ANY"), pattern type other
                      than LITERAL or PREFIXED, operation UNKNOWN or ANY, permission other than
                      ALLOW or DENY, an empty resource name ("Resource name should not be empty");
                      and, checked first as Kafka's broker (AclApis) does: a CLUSTER resource not
                      named kafka-cluster, an empty name ("Invalid empty resource name")

`delete_acls` matches each filter (kavka.authorizer.AclFilter) against the image's ACLs and returns
one RemoveAccessControlEntryRecord per ACL matched by any filter, and per filter the ACLs it
matched; a filter with an UNKNOWN field fails alone (INVALID_REQUEST "Unknown patternFilter." /
"Unknown entryFilter."). The records of one request commit together.

Pure: image in, records and results out; ids come from the `new_id` passed in. Called on the
active controller's event loop under the QuorumController's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kavka.authorizer import CLUSTER_NAME, Acl, AclFilter
from kavka.common import AclOperation, AclPermissionType, ErrorCode, PatternType, ResourceType
from kavka.metadata.image import MetadataImage
from kavka.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord

MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP


@dataclass(frozen=True, slots=True)
class AclResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    acls: tuple[Acl, ...] = ()  # delete: the ACLs the filter matched


def _name(e: object) -> str:
    return getattr(e, "name", str(e))


def broker_check(acl: Acl) -> AclResult | None:
    """Kafka's AclApis.handleCreateAcls checks, made before the controller's."""
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return AclResult(ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.resource_name:
        return AclResult(ErrorCode.invalid_request, "Invalid empty resource name")
    return None


def validate_new_acl(acl: Acl) -> AclResult | None:
    """AclControlManager.validateNewAcl."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return AclResult(ErrorCode.invalid_request, f"Invalid resourceType {_name(acl.resource_type)}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return AclResult(ErrorCode.invalid_request, f"Invalid patternType {_name(acl.pattern_type)}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return AclResult(ErrorCode.invalid_request, f"Invalid operation {_name(acl.operation)}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return AclResult(ErrorCode.invalid_request, f"Invalid permissionType {_name(acl.permission_type)}")
    if not acl.resource_name:
        return AclResult(ErrorCode.invalid_request, "Resource name should not be empty")
    return None


def create_acls(
    image: MetadataImage, acls: Sequence[Acl], new_id: Callable[[], str]
) -> tuple[list[AccessControlEntryRecord], list[AclResult]]:
    existing = set(image.acls.values())
    records: list[AccessControlEntryRecord] = []
    results: list[AclResult] = []
    for acl in acls:
        error = broker_check(acl) or validate_new_acl(acl)
        if error is not None:
            results.append(error)
            continue
        if acl not in existing:
            existing.add(acl)
            acl_id = new_id()
            while acl_id in image.acls:
                acl_id = new_id()
            records.append(
                AccessControlEntryRecord(
                    acl_id, acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal, acl.host,
                    acl.operation, acl.permission_type,
                )
            )
        results.append(AclResult())
    if len(records) > MAX_RECORDS_PER_USER_OP:
        # Kafka's BoundedList refuses the whole operation (an unexpected error on the controller).
        message = f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single create operation."
        return [], [AclResult(ErrorCode.unknown_server_error, message)] * len(acls)
    return records, results


def delete_acls(
    image: MetadataImage, filters: Sequence[AclFilter]
) -> tuple[list[RemoveAccessControlEntryRecord], list[AclResult]]:
    removed: dict[str, None] = {}
    results: list[AclResult] = []
    for f in filters:
        if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
            results.append(AclResult(ErrorCode.invalid_request, "Unknown patternFilter."))
            continue
        if f.operation == AclOperation.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
            results.append(AclResult(ErrorCode.invalid_request, "Unknown entryFilter."))
            continue
        matched = [(i, a) for i, a in sorted(image.acls.items()) if f.matches(a)]
        if len(removed.keys() | {i for i, _ in matched}) > MAX_RECORDS_PER_USER_OP:
            results.append(AclResult(
                ErrorCode.unknown_server_error,
                f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.",
            ))
            continue
        removed.update((i, None) for i, _ in matched)
        results.append(AclResult(acls=tuple(a for _, a in matched)))
    return [RemoveAccessControlEntryRecord(i) for i in removed], results


def describe_acls(image: MetadataImage, f: AclFilter) -> AclResult:
    """DescribeAcls from an image: the ACLs the filter matches, sorted; UNKNOWN fields refused."""
    if f.is_unknown():
        return AclResult(ErrorCode.invalid_request, "DescribeAclsRequest contains UNKNOWN elements")
    return AclResult(acls=tuple(a for _, a in sorted(image.acls.items()) if f.matches(a)))
