"""`kavka configs`: describe and alter topic and broker configs (like kafka-configs.sh).

Without ``--all``, describe shows only dynamic configs -- those set through
the admin API, source DYNAMIC_* -- as kafka-configs.sh does; ``--all`` shows
every config with its source. Alter uses IncrementalAlterConfigs (KIP-339):
``--add-config k=v,k2=[a,b]`` sets, ``--delete-config k`` reverts to the default.
``--entity-type users`` describes and alters SCRAM credentials (KIP-554) as kafka-configs.sh does.
Client quotas (KIP-546): ``--entity-type users|clients|ips`` with quota keys
(``producer_byte_rate=1048576``), an entity given as kafka-configs.sh does -- several
``--entity-type`` flags, each followed by its ``--entity-name X`` or ``--entity-default`` (paired in
order), e.g. ``--entity-type users --entity-name alice --entity-type clients --entity-default``. For
users, SCRAM mechanism keys go to the credentials and other keys to the quotas; describing users
shows both. kafka-configs.sh's ``--describe`` / ``--alter`` flags stand for the subcommands.
"""

from __future__ import annotations

import re
from typing import Any

import click

from kavka.cli.common import (
    admin_client,
    bootstrap_option,
    emit,
    json_option,
    parse_key_values,
    split_config_list,
    split_names,
    table,
)

ENTITY_TYPES = {
    "topics": "topic", "topic": "topic", "brokers": "broker", "broker": "broker", "users": "user", "user": "user",
    "clients": "client-id", "client": "client-id", "ips": "ip", "ip": "ip",
}
QUOTA_TYPES = frozenset({"user", "client-id", "ip"})
# --entity-default, rewritten into the ordered --entity-name list (parse_args) so that each
# --entity-type pairs with the name or default that follows it, as kafka-configs.sh pairs them.
_DEFAULT = "\x00<default>"
# kafka-configs.sh's SCRAM credential value (ConfigCommand): iterations first, the password is the rest.
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
DYNAMIC_SOURCES = frozenset(
    {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}
)


def _entity(entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool) -> tuple[str, str]:
    if len(entity_types) != 1 or len(entity_names) > 1:
        raise click.UsageError("only quota entities (users, clients, ips) take more than one --entity-type or --entity-name")
    rtype = ENTITY_TYPES[entity_types[0]]
    entity_name = entity_names[0] if entity_names else None
    if entity_name == _DEFAULT:
        entity_name, entity_default = None, True
    if rtype == "user" and entity_default:
        raise click.UsageError("The use of --entity-default is not allowed with User SCRAM Credentials")
    if entity_default:
        if rtype != "broker":
            raise click.UsageError("--entity-default applies to brokers only")
        return rtype, ""  # the cluster-wide broker default resource
    if not entity_name:
        raise click.UsageError("--entity-name is required (or --entity-default for brokers)")
    return rtype, entity_name


entity_type_option = click.option(
    "--entity-type",
    "entity_types",
    required=True,
    multiple=True,
    type=click.Choice(sorted(ENTITY_TYPES)),
    help="topics, brokers, users (SCRAM credentials and quotas), clients or ips (quotas); quotas take "
    "users and clients together, each type followed by its --entity-name or --entity-default",
)
entity_name_option = click.option(
    "--entity-name", "entity_names", multiple=True, help="Topic name, broker node id, user name, client id or IP."
)
entity_default_option = click.option(
    "--entity-default", is_flag=True, help="The cluster-wide broker default, or the default user, client id or IP."
)


class _KafkaStyleGroup(click.Group):
    """Also takes kafka-configs.sh's `--describe` / `--alter` flags in place of the subcommand
    (`kavka configs --alter --entity-type users ...`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = [a for arg in args for a in (("--entity-name", _DEFAULT) if arg == "--entity-default" else (arg,))]
        for flag in ("--describe", "--alter"):
            if flag in args and args[0] not in self.commands:
                args = [flag[2:], *(a for a in args if a != flag)]
                break
        return super().parse_args(ctx, args)


@click.group(name="configs", cls=_KafkaStyleGroup)
def configs() -> None:
    """Describe and alter topic and broker configs, and users' SCRAM credentials (like
    kafka-configs.sh; `--describe` / `--alter` as there, or the subcommands)."""


def entry_dict(e: Any) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "source": e.source,
        "is_default": e.is_default,
        "is_read_only": e.is_read_only,
        "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in e.synonyms],
    }


@configs.command(name="describe")
@bootstrap_option
@entity_type_option
@entity_name_option
@entity_default_option
@click.option("--all", "show_all", is_flag=True, help="Every config, not only dynamic ones.")
@json_option
def describe(
    bootstrap: str,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    show_all: bool,
    as_json: bool,
) -> None:
    """Show the configs of a topic or broker, users' SCRAM credentials and client quotas."""
    types = [ENTITY_TYPES[t] for t in entity_types]
    if types == ["user"] and not any(n == _DEFAULT for n in entity_names):
        _describe_users(bootstrap, entity_names[0] if entity_names else None, entity_default, as_json)
        return
    if set(types) <= QUOTA_TYPES:
        _describe_quotas(bootstrap, _quota_entity(types, entity_names, alter=False), as_json)
        return
    rtype, name = _entity(entity_types, entity_names, entity_default)
    with admin_client(bootstrap) as admin:
        entries = admin.describe_configs(
            rtype, name, include_synonyms=True, include_documentation=False
        )
    if not show_all:
        entries = [e for e in entries if e.source in DYNAMIC_SOURCES]
    data = [entry_dict(e) for e in entries]
    what = f"{rtype} {name}" if name else "the broker default"
    title = f"{'All' if show_all else 'Dynamic'} configs for {what}"

    def render(con: Any) -> None:
        if not entries:
            con.print(f"{title}: none")
            return
        rows = [
            (e.name, "[hidden]" if e.is_sensitive else e.value, e.source, e.is_read_only)
            for e in entries
        ]
        con.print(table(title, ["Name", "Value", "Source", "ReadOnly"], rows))

    emit(as_json, data, render)


@configs.command(name="alter")
@bootstrap_option
@entity_type_option
@entity_name_option
@entity_default_option
@click.option(
    "--add-config",
    "add",
    multiple=True,
    metavar="K=V[,K2=V2]",
    help="Configs to set; list values as k=[a,b].",
)
@click.option(
    "--delete-config", "delete", multiple=True, metavar="K[,K2]", help="Configs to remove."
)
@json_option
def alter(
    bootstrap: str,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    add: tuple[str, ...],
    delete: tuple[str, ...],
    as_json: bool,
) -> None:
    """Set or remove configs of a topic or broker, a user's SCRAM credentials, or client quotas."""
    types = [ENTITY_TYPES[t] for t in entity_types]
    if set(types) <= QUOTA_TYPES and not _is_scram_alter(types, add, delete):
        _alter_quotas(bootstrap, _quota_entity(types, entity_names, alter=True), add, delete, as_json)
        return
    rtype, name = _entity(entity_types, entity_names, entity_default)
    if rtype == "user":
        _alter_user(bootstrap, name, add, delete, as_json)
        return
    to_set = parse_key_values(add, option="--add-config")
    to_delete = split_names(delete)
    if not to_set and not to_delete:
        raise click.UsageError("nothing to alter: give --add-config or --delete-config")
    with admin_client(bootstrap) as admin:
        admin.incremental_alter_configs(rtype, name, set=to_set, delete=to_delete)
    what = f"{rtype} {name}" if name else "the broker default"
    data = {"entity_type": rtype, "entity_name": name, "set": to_set, "deleted": to_delete}
    emit(as_json, data, lambda con: con.print(f"Completed updating config for {what}."))


def _is_scram_alter(types: list[str], add: tuple[str, ...], delete: tuple[str, ...]) -> bool:
    """A users-only alter whose keys are all SCRAM mechanisms (the rest are quota keys; a mix is
    refused, as kafka-configs.sh refuses it)."""
    from kavka.scram import MECHANISMS

    if types != ["user"]:
        return False
    keys = [p.strip().partition("=")[0] for a in add for p in split_config_list(a)] + split_names(delete)
    scram = [k in MECHANISMS for k in keys]
    if any(scram) and not all(scram):
        raise click.UsageError("SCRAM credentials and quotas cannot be altered in one command")
    return bool(keys) and all(scram)


def _quota_entity(types: list[str], names: tuple[str, ...], *, alter: bool) -> list[tuple[str, str | None | bool]]:
    """(entity type, name, None for the default, or False: every name of that type) pairs, in
    kafka-configs.sh's pairing: the n-th --entity-name or --entity-default goes with the n-th
    --entity-type."""
    if len(set(types)) != len(types):
        raise click.UsageError("an --entity-type can be given only once")
    if len(names) > len(types):
        raise click.UsageError("more --entity-name/--entity-default than --entity-type")
    if "ip" in types and len(types) > 1:
        raise click.UsageError("ips cannot be combined with users or clients")
    if alter and len(names) < len(types):
        raise click.UsageError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    out: list[tuple[str, str | None | bool]] = []
    for i, t in enumerate(types):
        out.append((t, False if i >= len(names) else None if names[i] == _DEFAULT else names[i]))
    return out


def _entity_label(entity: Any) -> str:
    return ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in entity)


def _describe_quotas(bootstrap: str, entity: list[tuple[str, str | None | bool]], as_json: bool) -> None:
    """DescribeClientQuotas with kafka-configs.sh's strict filter: a name matches exactly, a default
    the default, a type without a name any name of that type."""
    components = [(t, 2, None) if n is False else (t, 1, None) if n is None else (t, 0, n) for t, n in entity]
    with admin_client(bootstrap) as admin:
        found = admin.describe_client_quotas(components, strict=True)
    data = [{"entity": dict(e), "quotas": values} for e, values in found]

    def render(con: Any) -> None:
        if not found:
            con.print("Quota configs: none")
            return
        rows = [(_entity_label(e), k, v) for e, values in found for k, v in sorted(values.items())]
        con.print(table("Quota configs", ["Entity", "Key", "Value"], rows))

    emit(as_json, data, render)


def _alter_quotas(
    bootstrap: str, entity: list[tuple[str, str | None | bool]], add: tuple[str, ...], delete: tuple[str, ...], as_json: bool
) -> None:
    """AlterClientQuotas: --add-config producer_byte_rate=1048576 sets, --delete-config removes."""
    ops: list[tuple[str, float | None]] = []
    for k, v in parse_key_values(add, option="--add-config").items():
        try:
            ops.append((k, float(v)))
        except ValueError:
            raise click.BadParameter(f"the value of {k} must be a number, not {v[:40]!r}", param_hint="--add-config") from None
    ops.extend((k, None) for k in split_names(delete))
    if not ops:
        raise click.UsageError("nothing to alter: give --add-config or --delete-config")
    pairs = [(t, n) for t, n in entity if n is not False]
    with admin_client(bootstrap) as admin:
        admin.alter_client_quotas([(pairs, ops)])
    data = {"entity": dict(pairs), "set": {k: v for k, v in ops if v is not None}, "deleted": [k for k, v in ops if v is None]}
    emit(as_json, data, lambda con: con.print(f"Completed updating config for {_entity_label(pairs)}."))


def _describe_users(bootstrap: str, name: str | None, entity_default: bool, as_json: bool) -> None:
    """DescribeUserScramCredentials (KIP-554) and the quotas of the user entities (KIP-546), as
    kafka-configs.sh shows both: one user, or every user with a credential or a quota."""
    from kavka.client.errors import KafkaError

    if entity_default:
        raise click.UsageError("The use of --entity-default is not allowed with User SCRAM Credentials")
    with admin_client(bootstrap) as admin:
        component = ("user", 0, name) if name else ("user", 2, None)
        quotas = {dict(e)["user"]: v for e, v in admin.describe_client_quotas([component], strict=True)}
        try:
            users = admin.describe_user_scram_credentials([name] if name else None)
        except KafkaError as e:
            if e.name != "RESOURCE_NOT_FOUND" or name not in quotas:
                raise
            users = {}
    names = sorted(users.keys() | quotas.keys())
    data = [
        {
            "user": u,
            "credentials": [{"mechanism": m, "iterations": i} for m, i in users.get(u, [])],
            "quotas": quotas.get(u, {}),
        }
        for u in names
    ]

    def render(con: Any) -> None:
        if not users:
            con.print("SCRAM credentials: none")
        else:
            rows = [(u, m, i) for u, creds in users.items() for m, i in creds]
            con.print(table("SCRAM credentials", ["User", "Mechanism", "Iterations"], rows))
        if quotas:
            rows = [(u, k, v) for u in sorted(quotas) for k, v in sorted(quotas[u].items())]
            con.print(table("Quota configs", ["User", "Key", "Value"], rows))

    emit(as_json, data, render)


def _alter_user(bootstrap: str, user: str, add: tuple[str, ...], delete: tuple[str, ...], as_json: bool) -> None:
    """AlterUserScramCredentials, as kafka-configs.sh does it: `--add-config
    'SCRAM-SHA-256=[iterations=8192,password=...]'` (a fresh random salt, salted here: the
    password never leaves this process), `--delete-config SCRAM-SHA-256`."""
    import secrets

    from kavka.scram import DEFAULT_ITERATIONS, MECHANISMS, salted_password

    upserts: list[tuple[str, str, int, bytes, bytes]] = []
    for item in add:
        for part in split_config_list(item):
            mechanism, sep, value = part.strip().partition("=")
            if mechanism not in MECHANISMS:
                raise click.BadParameter(f"only SCRAM credential configs (SCRAM-SHA-256, SCRAM-SHA-512) can be added "
                                         f"for users; unexpected config name {mechanism[:40]!r}", param_hint="--add-config")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            m = _SCRAM_VALUE.fullmatch(value) if sep else None
            if m is None:
                raise click.BadParameter(f"invalid credential for {mechanism}: expected "
                                         f"{mechanism}=[iterations=<n>,password=<password>]", param_hint="--add-config")
            iterations = int(m[1]) if m[1] and m[1] != "-1" else DEFAULT_ITERATIONS
            if iterations < MECHANISMS[mechanism].min_iterations:
                raise click.BadParameter(f"Iterations {iterations} is less than the minimum "
                                         f"{MECHANISMS[mechanism].min_iterations} required for {mechanism}", param_hint="--add-config")
            salt = secrets.token_bytes(32)
            upserts.append((user, mechanism, iterations, salt, salted_password(MECHANISMS[mechanism], m[2], salt, iterations)))
    deletions = [(user, n) for n in split_names(delete)]
    for _, n in deletions:
        if n not in MECHANISMS:
            raise click.BadParameter(f"only SCRAM credential configs (SCRAM-SHA-256, SCRAM-SHA-512) can be deleted "
                                     f"for users; unexpected config name {n[:40]!r}", param_hint="--delete-config")
    if not upserts and not deletions:
        raise click.UsageError("nothing to alter: give --add-config or --delete-config")
    with admin_client(bootstrap) as admin:
        admin.alter_user_scram_credentials(upserts, deletions)
    data = {"entity_type": "user", "entity_name": user, "set": [m for _, m, *_ in upserts], "deleted": [m for _, m in deletions]}
    emit(as_json, data, lambda con: con.print(f"Completed updating config for user {user}."))
