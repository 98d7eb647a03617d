"""`kavka storage`: format log directories, as Kafka's kafka-storage.sh does.

``format`` writes ``meta.properties`` (version=1, cluster.id, node.id and a
fresh directory.id per directory, KIP-858) into every ``log.dirs`` entry and
``metadata.log.dir``. It checks every directory before writing any, so a
refusal leaves nothing half-formatted: a directory that already has
``meta.properties`` is refused unless ``--ignore-formatted``, which skips it;
new directories then join the cluster.id of the formatted ones. ``--add-scram``
(repeatable) writes SCRAM users into ``<metadata.log.dir>/bootstrap.checkpoint``
(kavka.metadata.bootstrap), which the first active controller commits first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, emit, json_option
from kavka.raft.voters import VoterEndpoint, VoterNode, VoterSet
from kavka.scram import BY_TYPE

MECHANISM_NAMES = {t: m.name for t, m in BY_TYPE.items()}


@click.group(name="storage")
def storage() -> None:
    """Format log directories (like kafka-storage.sh)."""


@storage.command(name="random-uuid")
def random_uuid() -> None:
    """Print a new Kafka Uuid, for --cluster-id."""
    from kavka.storage.meta_properties import generate_uuid

    click.echo(generate_uuid())


@storage.command(name="format")
@click.option(
    "--config",
    "-c",
    "config_path",
    required=True,
    type=click.Path(path_type=Path),
    help="server.properties",
)
@click.option("--cluster-id", "-t", help="The cluster id (a Kafka Uuid); generated when omitted.")
@click.option(
    "--ignore-formatted", "-g", is_flag=True, help="Skip directories that are already formatted."
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config (repeatable).",
)
@click.option(
    "--add-scram",
    "-S",
    "add_scram",
    multiple=True,
    metavar="MECHANISM=[name=...,password=...]",
    help="A SCRAM credential the new cluster starts with (repeatable), as kafka-storage.sh: "
    "'SCRAM-SHA-256=[name=admin,password=admin-secret]', optionally iterations=, salt=<base64>.",
)
@click.option(
    "--standalone",
    "-s",
    is_flag=True,
    help="KIP-853: start a dynamic controller quorum with this node as its only voter.",
)
@click.option(
    "--initial-controllers",
    "-I",
    metavar="ID@HOST:PORT:DIRECTORY-ID,...",
    help="KIP-853: the initial voters of a dynamic quorum (this node's directory id is used for "
    "its metadata log dir).",
)
@click.option(
    "--no-initial-controllers",
    "-N",
    is_flag=True,
    help="KIP-853: a controller that will join a dynamic quorum through controller.quorum.bootstrap.servers.",
)
@click.option("--processes", type=click.IntRange(1, 256), default=None,
              help="Format the N brokers `kavka server start --processes N` runs from this config (one cluster id).")
@json_option
@click.pass_context
def format_storage(
    ctx: click.Context,
    config_path: Path,
    cluster_id: str | None,
    ignore_formatted: bool,
    overrides: tuple[str, ...],
    add_scram: tuple[str, ...],
    standalone: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
    processes: int | None,
    as_json: bool,
) -> None:
    """Write meta.properties into every log directory of a server.properties."""
    import kavka.controller.placement  # noqa: F401 -- registers broker.replica.placer's check before parsing
    from kavka.config import ConfigError, load_config
    from kavka.storage.meta_properties import (
        META_PROPERTIES,
        MetaProperties,
        generate_uuid,
        is_valid_uuid,
        write_meta_properties,
    )

    if processes is not None:
        # Each process's own config, as `kavka server start --processes` derives it (the host level of
        # broker.rack is not stored, so any host name serves), formatted with one cluster id.
        from kavka.cli.server import derive

        if standalone or initial_controllers is not None:
            raise CliError("--processes formats brokers of a static quorum or of controllers that run on their own; "
                           "--standalone and --initial-controllers make a dynamic quorum, which it does not derive")
        derived = derive(config_path, overrides, processes, "localhost")
        cluster_id = cluster_id or generate_uuid()
        for o in derived:
            ctx.invoke(format_storage, config_path=config_path, cluster_id=cluster_id, ignore_formatted=ignore_formatted,
                       overrides=(*overrides, *(f"{k}={v}" for k, v in o.items())), add_scram=add_scram,
                       standalone=False, initial_controllers=None, no_initial_controllers=no_initial_controllers,
                       processes=None, as_json=as_json)
        return

    try:
        config = load_config(config_path, list(overrides))
    except ConfigError as e:
        raise CliError(f"invalid config: {e}") from None
    dirs = _unique([*config.log_dirs, config.metadata_log_dir])
    formatted = [d for d in dirs if (d / META_PROPERTIES).exists()]
    if formatted and not ignore_formatted:
        raise CliError(
            f"log directory {formatted[0]} is already formatted; use --ignore-formatted to skip it and format the others"
        )
    if cluster_id is not None and not is_valid_uuid(cluster_id):
        raise CliError(
            f"cluster id {cluster_id!r} is not a Kafka Uuid (22 characters of base64url); try `kavka storage random-uuid`"
        )
    # Directories added next to formatted ones must join the same cluster.
    existing = _existing_cluster_ids(formatted)
    if cluster_id is not None and existing - {cluster_id}:
        raise CliError(
            f"--cluster-id {cluster_id} differs from the cluster.id {min(existing)} of an already formatted log directory"
        )
    if len(existing) > 1:
        raise CliError(
            f"the formatted log directories belong to different clusters: {', '.join(sorted(existing))}"
        )
    generated = cluster_id is None and not existing
    if cluster_id is None:
        cluster_id = min(existing) if existing else generate_uuid()

    quorum = _initial_voters(config, standalone, initial_controllers, no_initial_controllers)
    if quorum is not None and config.metadata_log_dir in formatted:
        raise CliError(f"the metadata log dir {config.metadata_log_dir} is already formatted: the initial "
                       "controllers can be set only when it is formatted")
    bootstrap = _scram_records(add_scram)
    if bootstrap and config.metadata_log_dir in formatted:
        raise CliError(f"--add-scram: the metadata log dir {config.metadata_log_dir} is already formatted, so the "
                       "credentials would have no effect; create users with `kavka configs alter --entity-type users`")
    written: list[dict[str, Any]] = []
    for d in dirs:
        if d in formatted:
            continue
        directory_id = generate_uuid()
        if quorum is not None and quorum[1] is not None and d == config.metadata_log_dir:
            own = quorum[1].get(config.node_id)
            if own is not None and own.directory_id is not None:
                directory_id = own.directory_id
            elif own is not None:  # --standalone: this node with the directory id made here
                quorum = (quorum[0], quorum[1].without(config.node_id).with_voter(
                    VoterNode(config.node_id, directory_id, own.endpoints)))
        try:
            write_meta_properties(
                d,
                MetaProperties(
                    cluster_id=cluster_id, node_id=config.node_id, directory_id=directory_id
                ),
            )
        except OSError as e:
            raise CliError(f"cannot format {d}: {e.strerror or e}") from None
        written.append({"dir": str(d), "directory_id": directory_id})
        if quorum is not None and d == config.metadata_log_dir:
            from kavka.raft.bootstrap import write_quorum_bootstrap

            try:
                write_quorum_bootstrap(d, quorum[1])
            except OSError as e:
                raise CliError(f"cannot write the bootstrap checkpoint in {d}: {e.strerror or e}") from None
        if bootstrap and d == config.metadata_log_dir:
            from kavka.metadata.bootstrap import write_bootstrap

            try:
                write_bootstrap(d, bootstrap)
            except OSError as e:
                raise CliError(f"cannot write the bootstrap metadata in {d}: {e.strerror or e}") from None

    result = {
        "cluster_id": cluster_id,
        "cluster_id_generated": generated,
        "node_id": config.node_id,
        "formatted": written,
        "skipped": [str(d) for d in formatted],
        "initial_controllers": (
            None if quorum is None or quorum[1] is None
            else [{"id": v.node_id, "directory_id": v.directory_id} for v in quorum[1].voters]
        ),
        "scram_users": [{"name": r.name, "mechanism": r.mechanism, "iterations": r.iterations} for r in bootstrap],
    }

    def render(con: Any) -> None:
        if generated:
            con.print(f"Generated cluster.id {cluster_id}")
        for w in written:
            con.print(
                f"Formatting {w['dir']} (cluster.id={cluster_id}, node.id={config.node_id}, directory.id={w['directory_id']})"
            )
        if quorum is not None:
            voters = "none (it joins an existing quorum)" if quorum[1] is None else ", ".join(
                f"{v.node_id} (directory.id {v.directory_id})" for v in quorum[1].voters)
            con.print(f"Bootstrap controller quorum (kraft.version 1, {quorum[0]}): initial voters {voters}")
        for r in bootstrap:
            con.print(f"Bootstrap SCRAM credential: user {r.name}, {MECHANISM_NAMES[r.mechanism]}, {r.iterations} iterations")
        for d in formatted:
            con.print(f"Skipping {d}: already formatted")
        if not written:
            con.print("All of the log directories are already formatted.")

    emit(as_json, result, render)


def _initial_voters(
    config: Any, standalone: bool, initial_controllers: str | None, no_initial_controllers: bool
) -> tuple[str, VoterSet | None] | None:
    """KIP-853: (the flag used, the initial voter set; None for --no-initial-controllers), or
    None for a static quorum. Kafka's rules: the three flags exclude each other, need the
    controller role, and a static quorum (controller.quorum.voters) takes none of them."""
    from kavka.raft.bootstrap import parse_initial_controllers

    chosen = [n for n, on in (("--standalone", standalone), ("--initial-controllers", initial_controllers is not None),
                              ("--no-initial-controllers", no_initial_controllers)) if on]
    if not chosen:
        return None
    if len(chosen) > 1:
        raise CliError(f"{' and '.join(chosen)} exclude each other: give one")
    if "controller" not in config.values["process.roles"]:
        raise CliError(f"{chosen[0]}: process.roles has no controller role, and only a controller is a voter")
    if config.values["controller.quorum.voters"]:
        raise CliError(f"{chosen[0]}: controller.quorum.voters is set, so the quorum is static; a dynamic "
                       "quorum (KIP-853) lists no voters in the config")
    names = [n.upper() for n in config.values["controller.listener.names"]]
    listener = next((e for e in config.listeners if e.name in names), None)
    if no_initial_controllers:
        return chosen[0], None
    if standalone:
        endpoints = () if listener is None else (VoterEndpoint(listener.name, listener.host or "localhost", listener.port),)
        return chosen[0], VoterSet.of([VoterNode(config.node_id, None, endpoints)])
    assert initial_controllers is not None
    try:
        voters = parse_initial_controllers(initial_controllers, listener.name if listener else (names or ["CONTROLLER"])[0])
    except ValueError as e:
        raise CliError(f"--initial-controllers: {e}") from None
    if voters.get(config.node_id) is None:
        raise CliError(f"--initial-controllers does not name this node (node.id {config.node_id})")
    return chosen[0], voters


def _scram_records(arguments: tuple[str, ...]) -> list[Any]:
    """--add-scram arguments as UserScramCredentialRecords (Kafka's ScramParser); CliError naming
    the problem, never the password."""
    import base64

    from kavka.metadata.records import UserScramCredentialRecord
    from kavka.scram import ScramArgumentError, parse_credential_argument

    records = []
    for argument in arguments:
        try:
            mechanism, name, c = parse_credential_argument(argument)
        except ScramArgumentError as e:
            raise CliError(f"--add-scram: {e}") from None
        b64 = [base64.b64encode(x).decode() for x in (c.salt, c.stored_key, c.server_key)]
        records.append(UserScramCredentialRecord(name, mechanism.type, *b64, iterations=c.iterations))
    return records


def _existing_cluster_ids(dirs: list[Path]) -> set[str]:
    from kavka.storage.meta_properties import InvalidMetaPropertiesError, read_meta_properties

    ids = set()
    for d in dirs:
        try:
            props = read_meta_properties(d)
        except (OSError, InvalidMetaPropertiesError) as e:
            raise CliError(f"cannot read {d / 'meta.properties'}: {e}") from None
        if props.cluster_id:
            ids.add(props.cluster_id)
    return ids


def _unique(dirs: list[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for d in dirs:
        seen.setdefault(str(Path(d).resolve()) if str(d) else str(d), Path(d))
    return list(seen.values())
