"""ACLs and the authorizer: Kafka's StandardAuthorizer semantics as a pure function.

An ACL (Kafka's StandardAcl / AclBinding) is a resource pattern -- resource type, name and pattern
type (LITERAL, the name `*` meaning every resource of the type, or PREFIXED) -- with an entry:
principal (`User:alice`, or `User:*` for every principal), host (an IP address, or `*`),
operation and permission (ALLOW or DENY).

`Authorizer.authorize(principal, host, operation, resource_type, name)` decides one action on one
literal resource, with StandardAuthorizerData's rules, in this order:

1. a principal named in `super.users` is allowed everything;
2. the ACLs whose pattern matches the resource (the LITERAL one of that name, the LITERAL `*`, every
   PREFIXED one the name starts with) are the resource's ACLs; of those, an ACL applies when its
   principal is the requester's or `User:*`, its host is the requester's or `*`, and its operation
   is the action's, or ALL, or -- for ALLOW only -- implies it (READ, WRITE, DELETE and ALTER imply
   DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). A DENY ACL never implies: DENY READ does not
   deny DESCRIBE;
3. an applying DENY wins; else an applying ALLOW allows;
4. else: denied if the resource has any ACL at all, else `allow.everyone.if.no.acl.found`
   (default false).

Index: ACLs by (resource type, literal name) in a dict, and the PREFIXED ones by (resource type,
prefix) with the set of prefix lengths present, so a check costs one dict lookup per distinct
prefix length rather than a scan (Kafka walks a sorted set for the same result). Within each
pattern the ACLs are grouped by principal, so a check reads only the requester's and `User:*`'s
(an ACL naming anyone else never applies; that the pattern has ACLs at all is what rule 4 needs):
with 10,000 ACLs, 43 of them on a topic's patterns, a check went from ~20-35 us to a few
(`python -m bench.authorization`). An Authorizer is immutable; the node builds a new one when the
metadata image's ACLs change.

`AclFilter` is Kafka's AclBindingFilter, used by DescribeAcls and DeleteAcls: ANY (and None for
name, principal and host) matches everything; pattern type ANY matches either pattern type with
the exact name; MATCH matches every pattern that would apply to a resource of that name (the
LITERAL one, the LITERAL `*`, the PREFIXED ones the name starts with).

Pure values and functions: no I/O, no clock; any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kavka.common import AclOperation, AclPermissionType, PatternType, ResourceType

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource (Kafka's Resource.CLUSTER_NAME)

# ALLOW ACLs that imply the action (StandardAuthorizerData.IMPLIES_DESCRIBE / _DESCRIBE_CONFIGS).
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL binding (Kafka's StandardAcl): the pattern and the entry, flat."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def result_for(self, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
        """ALLOW or DENY if this ACL applies to the action, else None (StandardAuthorizerData.findResult)."""
        if self.principal != principal and self.principal != WILDCARD_PRINCIPAL:
            return None
        if self.host != WILDCARD and self.host != host:
            return None
        if self.operation != AclOperation.ALL:
            if self.permission_type == AclPermissionType.ALLOW:
                implied = IMPLIED_BY.get(operation)
                if implied is not None:
                    if self.operation not in implied:
                        return None
                elif self.operation != operation:
                    return None
            elif self.operation != operation:
                return None
        return self.permission_type


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None (name, principal, host) and ANY match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        """A field is UNKNOWN (Kafka's filter.isUnknown): such a filter is refused, INVALID_REQUEST."""
        return (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        )

    def matches(self, acl: Acl) -> bool:
        """ResourcePatternFilter.matches and AccessControlEntryFilter.matches, together."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if acl.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif acl.pattern_type == PatternType.PREFIXED:
                if not self.resource_name.startswith(acl.resource_name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons, each trimmed; empty entries ignored."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class Authorizer:
    """An immutable index over a set of ACLs that answers authorize() (see the module doc)."""

    __slots__ = ("_literal", "_prefixed", "_prefix_lengths", "acls", "allow_everyone_if_no_acl_found", "super_users")

    def __init__(
        self,
        acls: Iterable[Acl] = (),
        *,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.acls: tuple[Acl, ...] = tuple(acls)
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # pattern -> principal -> that principal's ACLs on the pattern, in this authorizer's order
        literal: dict[tuple[ResourceType, str], dict[str, list[Acl]]] = {}
        prefixed: dict[tuple[ResourceType, str], dict[str, list[Acl]]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for acl in self.acls:
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type == PatternType.LITERAL:
                literal.setdefault(key, {}).setdefault(acl.principal, []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(key, {}).setdefault(acl.principal, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
        self._literal = literal
        self._prefixed = prefixed
        self._prefix_lengths = {rt: tuple(sorted(ls)) for rt, ls in lengths.items()}

    def _patterns(self, resource_type: ResourceType, name: str) -> list[dict[str, list[Acl]]]:
        """The ACLs of each pattern covering the literal resource (resource_type, name), by principal."""
        out = []
        if (acls := self._literal.get((resource_type, name))) is not None:
            out.append(acls)
        if name != WILDCARD and (acls := self._literal.get((resource_type, WILDCARD))) is not None:
            out.append(acls)
        for n in self._prefix_lengths.get(resource_type, ()):
            if n > len(name):
                break
            if (acls := self._prefixed.get((resource_type, name[:n]))) is not None:
                out.append(acls)
        return out

    def resource_acls(self, resource_type: ResourceType, name: str) -> list[Acl]:
        """Every ACL whose pattern covers the literal resource (resource_type, name)."""
        return [acl for by_principal in self._patterns(resource_type, name) for acls in by_principal.values()
                for acl in acls]

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        patterns = self._patterns(resource_type, name)
        if not patterns:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        # Only ACLs naming the requester or User:* can apply (Acl.result_for checks that too).
        principals = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        for by_principal in patterns:
            for p in principals:
                for acl in by_principal.get(p, ()):
                    result = acl.result_for(principal, host, operation)
                    if result == AclPermissionType.DENY:
                        return False
                    if result == AclPermissionType.ALLOW:
                        allowed = True
        # The resource has ACLs (some pattern covers it): denied unless one allowed.
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal perform the operation on SOME resource of the type (Kafka's default
        Authorizer.authorizeByResourceType, which InitProducerId uses for "Write on any topic"):
        a super user (or an allowed hard-coded name) may; else an ALLOW pattern for the principal or
        User:*, host and operation (or All) that no DENY literal of the same name, DENY `*`, or DENY
        prefix of it dominates."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self.acls:
            if acl.resource_type != resource_type or acl.pattern_type not in allow:
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            (allow if acl.permission_type == AclPermissionType.ALLOW else deny)[acl.pattern_type].add(acl.resource_name)
        if WILDCARD in deny[PatternType.LITERAL]:
            return False

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(p) for p in deny[PatternType.PREFIXED])

        for name in allow[PatternType.LITERAL]:
            if name == WILDCARD or (name not in deny[PatternType.LITERAL] and not denied_by_prefix(name)):
                return True
        return any(not denied_by_prefix(name) for name in allow[PatternType.PREFIXED])

    def describe(self, acl_filter: AclFilter) -> list[Acl]:
        """The ACLs the filter matches (StandardAuthorizer.acls), in this authorizer's order."""
        return [a for a in self.acls if acl_filter.matches(a)]
