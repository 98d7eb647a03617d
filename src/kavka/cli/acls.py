"""`kavka acls`: add, remove and list ACLs (like kafka-acls.sh, Kafka's AclCommand).

Exactly one of ``--add``, ``--remove``, ``--list``. Resources: ``--topic``, ``--group``,
``--transactional-id`` (each repeatable; ``*`` is every resource of the type) and ``--cluster``
(the resource kafka-cluster, LITERAL only); ``--resource-pattern-type`` is literal (default) or
prefixed, and for --list / --remove also any or match. Entries: ``--allow-principal`` /
``--deny-principal`` (repeatable, `User:alice`, `User:*`), ``--allow-host`` / ``--deny-host``
(default `*` when a principal of that kind is given), ``--operation`` (repeatable, default All).
AclCommand's conveniences: ``--producer`` is Write, Describe and Create on each topic, Write and
Describe on each transactional id, IdempotentWrite on the cluster with ``--idempotent``;
``--consumer`` is Read and Describe on each topic and Read on each group. An operation a resource
type does not support is refused as AclCommand refuses it. ``--remove`` without principals removes
every ACL of the resource pattern(s); it asks first unless ``--force``. Output: a table, or
``--json``; ``--list --principal P`` shows only P's ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

from kavka.authorizer import CLUSTER_NAME, Acl, AclFilter
from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table
from kavka.common import AclOperation, AclPermissionType, PatternType, ResourceType

# AclEntry.supportedOperations (ALL is allowed everywhere).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
}


def operation_name(op: AclOperation) -> str:
    """Kafka's SecurityUtils.operationName: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(w.capitalize() for w in op.name.split("_"))


def parse_operation(text: str) -> AclOperation:
    key = text.strip().replace("_", "").lower()
    for op in AclOperation:
        if op not in (AclOperation.UNKNOWN, AclOperation.ANY) and op.name.replace("_", "").lower() == key:
            return op
    names = ", ".join(operation_name(o) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
    raise click.BadParameter(f"unknown operation {text!r}; valid operation names are: {names}", param_hint="--operation")


def parse_principal(text: str, option: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise click.BadParameter(f"principal must be in principalType:name format, e.g. User:alice, not {text!r}",
                                 param_hint=option)
    return f"{kind}:{name}"


def _resources(topics: Iterable[str], groups: Iterable[str], txn_ids: Iterable[str], cluster: bool,
               pattern: PatternType) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t.strip()) for t in topics]
    if cluster and pattern == PatternType.LITERAL:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    out += [(ResourceType.GROUP, g.strip()) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids]
    return out


def _entries(allow: list[str], deny: list[str], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
             operations: Iterable[AclOperation]) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    """AclCommand.getAcl: every (principal, host, operation) of each permission."""
    out = []
    for principals, hosts, perm in ((allow, allow_hosts, AclPermissionType.ALLOW), (deny, deny_hosts, AclPermissionType.DENY)):
        hosts = tuple(h.strip() for h in hosts) or ("*",)
        out += [(p, h, op, perm) for p in principals for op in operations for h in hosts]
    return list(dict.fromkeys(out))


def _row(a: Acl) -> list[str]:
    return [a.resource_type.name, a.resource_name, a.pattern_type.name, a.principal, a.host,
            operation_name(a.operation), a.permission_type.name]


def _json(a: Acl) -> dict[str, str]:
    return dict(zip(["resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                     "permission_type"], _row(a), strict=True))


COLUMNS = ["Resource type", "Name", "Pattern type", "Principal", "Host", "Operation", "Permission"]


@click.command(name="acls")
@bootstrap_option
@click.option("--add", "add", is_flag=True, help="Add ACLs.")
@click.option("--remove", "remove", is_flag=True, help="Remove ACLs.")
@click.option("--list", "list_", is_flag=True, help="List ACLs.")
@click.option("--topic", "topics", multiple=True, help="A topic ('*': every topic).")
@click.option("--group", "groups", multiple=True, help="A consumer group ('*': every group).")
@click.option("--transactional-id", "txn_ids", multiple=True, help="A transactional id ('*': every one).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
              help="literal or prefixed; for --list and --remove also any or match.")
@click.option("--allow-principal", "allow", multiple=True, help="principalType:name, e.g. User:alice or User:*.")
@click.option("--deny-principal", "deny", multiple=True, help="principalType:name.")
@click.option("--allow-host", "allow_hosts", multiple=True, help="Host of --allow-principal (default *).")
@click.option("--deny-host", "deny_hosts", multiple=True, help="Host of --deny-principal (default *).")
@click.option("--operation", "operations", multiple=True, help="Read, Write, Create, Delete, Alter, Describe, "
              "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All).")
@click.option("--producer", is_flag=True, help="Write, Describe, Create on topics; Write, Describe on transactional ids.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
@click.option("--consumer", is_flag=True, help="Read, Describe on topics; Read on groups.")
@click.option("--principal", "list_principals", multiple=True, help="With --list: only this principal's ACLs.")
@click.option("--force", is_flag=True, help="Remove without asking.")
@json_option
def acls(bootstrap: str, add: bool, remove: bool, list_: bool, topics: tuple[str, ...], groups: tuple[str, ...],
         txn_ids: tuple[str, ...], cluster: bool, pattern: str, allow: tuple[str, ...], deny: tuple[str, ...],
         allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], operations: tuple[str, ...], producer: bool,
         idempotent: bool, consumer: bool, list_principals: tuple[str, ...], force: bool, as_json: bool) -> None:
    """Add, remove or list ACLs (kafka-acls.sh)."""
    if sum((add, remove, list_)) != 1:
        raise click.UsageError("Command must include exactly one action: --list, --add, --remove.")
    pattern_type = PatternType[pattern.upper()]
    allow_p = [parse_principal(p, "--allow-principal") for p in allow]
    deny_p = [parse_principal(p, "--deny-principal") for p in deny]
    ops = [parse_operation(o) for o in operations] or [AclOperation.ALL]
    principals = [parse_principal(p, "--principal") for p in list_principals]
    if list_:
        if producer or consumer or allow or deny or operations:
            raise click.UsageError("--list takes only resources, --resource-pattern-type and --principal")
        _list(bootstrap, _resources(topics, groups, txn_ids, cluster, pattern_type), pattern_type, principals, as_json)
        return
    if principals:
        raise click.UsageError("--principal is only valid with --list")
    if (producer or consumer) and operations:
        raise click.UsageError("--operation cannot be combined with --producer or --consumer")
    if consumer and not (topics and groups):
        raise click.UsageError("With --consumer you must specify a --topic and a --group")
    if producer and not (topics or txn_ids):
        raise click.UsageError("With --producer you must specify a --topic or a --transactional-id")
    if idempotent and not producer:
        raise click.UsageError("--idempotent is only valid with --producer")
    plan: dict[tuple[ResourceType, str], list[AclOperation]] = {}
    if producer or consumer:
        for rt, name in _resources(topics, groups, txn_ids, False, pattern_type):
            wanted = []
            if producer:
                wanted += {ResourceType.TOPIC: [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE],
                           ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE]}.get(rt, [])
            if consumer:
                wanted += {ResourceType.TOPIC: [AclOperation.READ, AclOperation.DESCRIBE],
                           ResourceType.GROUP: [AclOperation.READ]}.get(rt, [])
            if wanted:
                plan[(rt, name)] = list(dict.fromkeys(wanted))
        if idempotent and pattern_type == PatternType.LITERAL:
            plan[(ResourceType.CLUSTER, CLUSTER_NAME)] = [AclOperation.IDEMPOTENT_WRITE]
    else:
        plan = {r: ops for r in _resources(topics, groups, txn_ids, cluster, pattern_type)}
    if not plan:
        raise click.UsageError("You must provide at least one resource: --topic <topic> or --cluster or "
                               "--group <group> or --transactional-id <id>")
    for (rt, _name), wanted in plan.items():
        valid = SUPPORTED_OPERATIONS[rt] | {AclOperation.ALL}
        if set(wanted) - valid:
            raise click.UsageError(f"ResourceType {rt.name} only supports operations "
                                   f"{', '.join(sorted(operation_name(o) for o in valid))}")
    if add:
        _add(bootstrap, plan, pattern_type, allow_p, deny_p, allow_hosts, deny_hosts, as_json)
    else:
        _remove(bootstrap, plan, pattern_type, allow_p, deny_p, allow_hosts, deny_hosts, force, as_json)


def _add(bootstrap: str, plan: dict[tuple[ResourceType, str], list[AclOperation]], pattern_type: PatternType,
         allow: list[str], deny: list[str], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], as_json: bool) -> None:
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise click.UsageError(f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when adding acls.")
    if not allow and not deny:
        raise click.UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    bindings = [Acl(rt, name, pattern_type, p, h, op, perm)
                for (rt, name), ops in plan.items()
                for p, h, op, perm in _entries(allow, deny, allow_hosts, deny_hosts, ops)]
    with admin_client(bootstrap) as admin:
        results = admin.create_acls(bindings)
    failed = [(a, code, msg) for a, (code, msg) in zip(bindings, results, strict=True) if code]
    if failed:
        a, code, msg = failed[0]
        raise CliError(f"could not add {_describe(a)}: error {code}: {msg}")
    emit(as_json, [_json(a) for a in bindings],
         lambda con: con.print(table("Added ACLs", COLUMNS, [_row(a) for a in bindings])))


def _remove(bootstrap: str, plan: dict[tuple[ResourceType, str], list[AclOperation]], pattern_type: PatternType,
            allow: list[str], deny: list[str], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], force: bool,
            as_json: bool) -> None:
    filters: list[AclFilter] = []
    for (rt, name), ops in plan.items():
        entries = _entries(allow, deny, allow_hosts, deny_hosts, ops)
        if not entries:
            filters.append(AclFilter(rt, name, pattern_type))
        else:
            filters += [AclFilter(rt, name, pattern_type, p, h, op, perm) for p, h, op, perm in entries]
    if not force and not click.confirm(f"Are you sure you want to remove ACLs matching {len(filters)} filter(s)?"):
        return
    with admin_client(bootstrap) as admin:
        deleted = [a for acls_ in admin.delete_acls(filters) for a in acls_]
    deleted = list(dict.fromkeys(deleted))
    emit(as_json, [_json(a) for a in deleted],
         lambda con: con.print(table("Removed ACLs", COLUMNS, [_row(a) for a in deleted])))


def _list(bootstrap: str, resources: list[tuple[ResourceType, str]], pattern_type: PatternType, principals: list[str],
          as_json: bool) -> None:
    with admin_client(bootstrap) as admin:
        if not resources:
            found = admin.describe_acls(AclFilter())
        else:
            found = [a for rt, name in resources for a in admin.describe_acls(AclFilter(rt, name, pattern_type))]
    found = [a for a in dict.fromkeys(found) if not principals or a.principal in principals]
    emit(as_json, [_json(a) for a in found], lambda con: con.print(table("Current ACLs", COLUMNS, [_row(a) for a in found])))


def _describe(a: Acl) -> str:
    return (f"(principal={a.principal}, host={a.host}, operation={a.operation.name}, "
            f"permissionType={a.permission_type.name}) on {a.resource_type.name}:{a.pattern_type.name}:{a.resource_name}")
