"""`kavka configs`: describe and alter topic and broker configs (like kafka-configs.sh).

Without ``--all``, describe shows only dynamic configs -- those set through
the admin API, source DYNAMIC_* -- as kafka-configs.sh does; ``--all`` shows
every config with its source. Alter uses IncrementalAlterConfigs (KIP-339):
``--add-config k=v,k2=[a,b]`` sets, ``--delete-config k`` reverts to the default.
``--entity-type users`` describes and alters SCRAM credentials (KIP-554) as kafka-configs.sh does.
kafka-configs.sh's ``--describe`` / ``--alter`` flags stand for the subcommands.
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

ENTITY_TYPES = {"topics": "topic", "topic": "topic", "brokers": "broker", "broker": "broker", "users": "user", "user": "user"}
# kafka-configs.sh's SCRAM credential value (ConfigCommand): iterations first, the password is the rest.
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
DYNAMIC_SOURCES = frozenset(
    {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}
)


def _entity(entity_type: str, entity_name: str | None, entity_default: bool) -> tuple[str, str]:
    rtype = ENTITY_TYPES[entity_type]
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
    required=True,
    type=click.Choice(sorted(ENTITY_TYPES)),
    help="topics, brokers or users (SCRAM credentials)",
)
entity_name_option = click.option("--entity-name", help="Topic name, broker node id or user name.")
entity_default_option = click.option(
    "--entity-default", is_flag=True, help="The cluster-wide broker default."
)


class _KafkaStyleGroup(click.Group):
    """Also takes kafka-configs.sh's `--describe` / `--alter` flags in place of the subcommand
    (`kavka configs --alter --entity-type users ...`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
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
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    show_all: bool,
    as_json: bool,
) -> None:
    """Show the configs of a topic or broker, or users' SCRAM credentials."""
    if ENTITY_TYPES[entity_type] == "user":
        _describe_users(bootstrap, entity_name, entity_default, as_json)
        return
    rtype, name = _entity(entity_type, entity_name, entity_default)
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
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add: tuple[str, ...],
    delete: tuple[str, ...],
    as_json: bool,
) -> None:
    """Set or remove configs of a topic or broker, or a user's SCRAM credentials."""
    rtype, name = _entity(entity_type, entity_name, entity_default)
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


def _describe_users(bootstrap: str, name: str | None, entity_default: bool, as_json: bool) -> None:
    """DescribeUserScramCredentials (KIP-554): one user, or every user with a credential."""
    if entity_default:
        raise click.UsageError("The use of --entity-default is not allowed with User SCRAM Credentials")
    with admin_client(bootstrap) as admin:
        users = admin.describe_user_scram_credentials([name] if name else None)
    data = [{"user": u, "credentials": [{"mechanism": m, "iterations": i} for m, i in creds]} for u, creds in users.items()]

    def render(con: Any) -> None:
        if not users:
            con.print("SCRAM credentials: none")
            return
        rows = [(u, m, i) for u, creds in users.items() for m, i in creds]
        con.print(table("SCRAM credentials", ["User", "Mechanism", "Iterations"], rows))

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
