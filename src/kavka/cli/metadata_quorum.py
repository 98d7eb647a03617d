"""`kavka metadata-quorum`: kafka-metadata-quorum.sh -- the KRaft controller quorum.

As Kafka's tool, the connection options come before the subcommand:
``kavka metadata-quorum --bootstrap-server H:P [--command-config F] describe --status``.

- ``describe --status``: Kafka's summary lines (ClusterId, LeaderId, LeaderEpoch, HighWatermark,
  MaxFollowerLag, MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers); ``describe
  --replication``: a table with Kafka's columns (NodeId, DirectoryId, LogEndOffset, Lag,
  LastFetchTimestamp, LastCaughtUpTimestamp, Status), timestamps as "N ms ago" with
  ``--human-readable``. Both from DescribeQuorum v2, which any node relays to the raft leader;
  ``--json`` prints the same as JSON.
- ``add-controller``: run for the controller being added (KIP-853), with its server config as
  ``--command-config`` (Kafka's way) or ``--config``: its node.id, process.roles (must name
  controller), the directory id in meta.properties of its metadata log dir (metadata.log.dir,
  else the first of log.dirs) and the endpoints of controller.listener.names (advertised.listeners
  over listeners) go into AddRaftVoter. When the server config doubles as ``--command-config``,
  only its client security keys (security.protocol, ssl.*, sasl.*) shape the connection.
- ``remove-controller --controller-id N --controller-directory-id UUID``: RemoveRaftVoter.
Both changes are answered once the new voter set commits; ``--dry-run`` only prints the change.

``--bootstrap-controller H:P`` instead of ``--bootstrap-server`` talks to the controllers on
their controller listener, as Kafka 3.7+ does (KIP-919): DescribeCluster there names the
controllers and the active one, which then answers DescribeQuorum, AddRaftVoter and
RemoveRaftVoter itself (Kafka's own tool does the same against kavka's controllers).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    CliError,
    connect_admin,
    emit,
    json_option,
)

_CTX = "kavka.metadata_quorum"
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@click.group(name="metadata-quorum")
@click.option("--bootstrap-server", "bootstrap", envvar=BOOTSTRAP_ENV, default=None, show_envvar=True,
              metavar="HOST:PORT[,HOST:PORT]", help=f"Brokers to connect to (default {DEFAULT_BOOTSTRAP}).")
@click.option("--bootstrap-controller", default=None, metavar="HOST:PORT[,HOST:PORT]",
              help="Controllers to connect to on their controller listener, instead of brokers (KIP-919).")
@click.option("--command-config", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Client properties (security.protocol, ssl.*, sasl.*); for add-controller, the added "
                   "controller's server config.")
@click.pass_context
def metadata_quorum(ctx: click.Context, bootstrap: str | None, bootstrap_controller: str | None,
                    command_config: Path | None) -> None:
    """Describe the KRaft metadata quorum, add or remove controllers (kafka-metadata-quorum.sh)."""
    if bootstrap_controller is not None and bootstrap is not None:
        raise click.UsageError("Only one of --bootstrap-server or --bootstrap-controller must be specified")  # Kafka's words
    if command_config is not None and not command_config.exists():
        raise CliError(f"Properties file {command_config} does not exists!")  # Kafka's words
    ctx.meta[_CTX] = (bootstrap or DEFAULT_BOOTSTRAP, command_config, bootstrap_controller)


def _admin(*, server_config: Path | None = None) -> Any:
    """The admin client of the group's options; `server_config` is a server.properties passed as
    --command-config, whose client security keys alone apply."""
    from kavka.cli.command_config import CommandConfigError, client_security, load_command_config
    from kavka.client.security import PLAINTEXT
    from kavka.client_properties import SECURITY_KEYS
    from kavka.config import ConfigError, read_properties

    bootstrap, path, controllers = click.get_current_context().meta[_CTX]
    try:
        if path is None:
            security = PLAINTEXT
        elif server_config is not None and path == server_config:
            try:
                props = read_properties(path)
            except ConfigError as e:
                raise CliError(f"--command-config {path}: {e}") from None
            security = client_security({k: v for k, v in props.items() if k in SECURITY_KEYS})
        else:
            security = load_command_config(path)
    except CommandConfigError as e:
        raise CliError(f"--command-config {path}: {e}") from None
    if controllers is None:
        return connect_admin(bootstrap, security)
    return _active_controller(controllers, security)


def _active_controller(controllers: str, security: Any) -> Any:
    """An admin client on the active controller's listener, found through --bootstrap-controller
    (DescribeCluster with the controller endpoint type, as Kafka's admin client with
    bootstrap.controllers; any controller answers it)."""
    from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError

    probe = connect_admin(controllers, security)
    try:
        cluster = probe.describe_cluster(controllers=True)
    except (KafkaError, KafkaConnectionError, KafkaProtocolError, OSError) as e:
        raise CliError(f"--bootstrap-controller {controllers}: {e}") from None
    finally:
        probe.close()
    active = next((b for b in cluster.brokers if b.node_id == cluster.controller_id), None)
    if active is None:
        raise CliError(f"--bootstrap-controller {controllers}: the controllers know no active controller yet; try again")
    host = f"[{active.host}]" if ":" in active.host else active.host
    return connect_admin(f"{host}:{active.port}", security)


def _cluster_id(admin: Any) -> str | None:
    controllers = click.get_current_context().meta[_CTX][2] is not None
    return admin.describe_cluster(controllers=controllers).cluster_id


# ---- describe ------------------------------------------------------------------------------------


@metadata_quorum.command(name="describe")
@click.option("--status", is_flag=True, help="A short summary of the quorum status.")
@click.option("--replication", is_flag=True, help="Detailed information about the status of replication.")
@click.option("--human-readable", is_flag=True, help="With --replication: timestamps as 'N ms ago'.")
@json_option
def describe(status: bool, replication: bool, human_readable: bool, as_json: bool) -> None:
    """The quorum's leader, epoch, high watermark and each voter's and observer's replication."""
    if status and replication:
        raise click.UsageError("Only one of --status or --replication should be specified with describe sub-command")
    if not (status or replication):
        raise click.UsageError("One of --status or --replication must be specified with describe sub-command")
    if status and human_readable:
        raise click.UsageError("The option --human-readable is only supported along with --replication")
    with _admin() as admin:
        quorum = admin.describe_quorum()
        cluster_id = _cluster_id(admin) if status else None
    if status:
        _status(cluster_id, quorum, as_json)
    else:
        _replication(quorum, human_readable, as_json)


def _leader_state(quorum: Any) -> Any:
    leader = next((v for v in quorum.voters if v.node_id == quorum.leader_id), None)
    if leader is None:
        raise CliError(f"the leader {quorum.leader_id} is not among the voters the quorum describes")
    return leader


def _replica(quorum: Any, v: Any) -> dict[str, Any]:
    return {
        "id": v.node_id,
        "directoryId": v.directory_id,
        "endpoints": [f"{name}://{_host(host)}:{port}" for name, host, port in quorum.endpoints.get(v.node_id, ())],
    }


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _status(cluster_id: str | None, quorum: Any, as_json: bool) -> None:
    leader = _leader_state(quorum)
    laggard = min(quorum.voters, key=lambda v: v.log_end_offset)
    if laggard is leader or laggard.log_end_offset == leader.log_end_offset:
        lag_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and laggard.last_caught_up_timestamp >= 0:
        lag_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        lag_ms = -1
    data = {
        "ClusterId": cluster_id,
        "LeaderId": quorum.leader_id,
        "LeaderEpoch": quorum.leader_epoch,
        "HighWatermark": quorum.high_watermark,
        "MaxFollowerLag": leader.log_end_offset - laggard.log_end_offset,
        "MaxFollowerLagTimeMs": lag_ms,
        "CurrentVoters": [_replica(quorum, v) for v in quorum.voters],
        "CurrentObservers": [_replica(quorum, v) for v in quorum.observers],
    }

    def replicas(items: list[dict[str, Any]]) -> str:
        def one(r: dict[str, Any]) -> str:
            text = f'{{"id": {r["id"]}, "directoryId": ' + (f'"{r["directoryId"]}"' if r["directoryId"] else "null")
            if r["endpoints"]:
                text += ", \"endpoints\": [" + ", ".join(f'"{e}"' for e in r["endpoints"]) + "]"
            return text + "}"

        return "[" + ", ".join(one(r) for r in items) + "]"

    def render(_console: Any) -> None:
        # Kafka's lines as they are (scripts grep them): plain text, no rich markup.
        for key, value in data.items():
            shown = replicas(value) if isinstance(value, list) else value
            click.echo(f"{key + ':':<24}{shown}")

    emit(as_json, data, render)


def _replication(quorum: Any, human_readable: bool, as_json: bool) -> None:
    leader = _leader_state(quorum)
    now = int(time.time() * 1000)

    def when(ts: int) -> Any:
        if ts < 0:
            return -1
        return f"{max(0, now - ts)} ms ago" if human_readable else ts

    rows = [(leader, "Leader")]
    rows += [(v, "Follower") for v in quorum.voters if v.node_id != quorum.leader_id]
    rows += [(v, "Observer") for v in quorum.observers]
    data = [
        {
            "NodeId": v.node_id,
            "DirectoryId": v.directory_id,
            "LogEndOffset": v.log_end_offset,
            "Lag": leader.log_end_offset - v.log_end_offset,
            "LastFetchTimestamp": when(v.last_fetch_timestamp),
            "LastCaughtUpTimestamp": when(v.last_caught_up_timestamp),
            "Status": status,
        }
        for v, status in rows
    ]

    def render(_console: Any) -> None:
        # Kafka's plain table (ToolsUtils.prettyPrintTable: padded columns, each followed by a tab),
        # never folded to the terminal's width; a replica without directory id shows Kafka's zero Uuid.
        columns = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
        cells = [columns] + [[str(r[c] if r[c] is not None else _ZERO_UUID) for c in columns] for r in data]
        widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
        for row in cells:
            click.echo("".join(f"{v:<{w}}\t" for v, w in zip(row, widths, strict=True)))

    emit(as_json, data, render)


# ---- add-controller / remove-controller ------------------------------------------------------------


def controller_to_add(config: Path) -> tuple[int, str, list[tuple[str, str, int]]]:
    """(node id, metadata log dir's directory id, controller endpoints) from a controller's server
    config, as Kafka's tool reads them; CliError saying what is missing."""
    from kavka.config import ConfigError, parse_listeners, read_properties
    from kavka.storage.meta_properties import read_meta_properties

    try:
        props = read_properties(config)
    except ConfigError as e:
        raise CliError(f"{config}: {e}") from None
    hint = "Is this a valid controller configuration file?"
    if "node.id" not in props:
        raise CliError(f"node.id not found in configuration file. {hint}")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise CliError(f"node.id is not a number in configuration file. {hint}") from None
    if node_id < 0:
        raise CliError(f"node.id was negative in configuration file. {hint}")
    if "controller" not in props.get("process.roles", ""):
        raise CliError(f"process.roles did not contain 'controller' in configuration file. {hint}")
    metadata_dir = props.get("metadata.log.dir") or next(
        (d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()), None
    )
    if metadata_dir is None:
        raise CliError(f"Neither metadata.log.dir nor log.dirs were found. {hint}")
    try:
        directory_id = read_meta_properties(metadata_dir).directory_id
    except (OSError, ValueError, RuntimeError) as e:
        raise CliError(f"Unable to read meta.properties from {metadata_dir}: {e}") from None
    if not directory_id:
        raise CliError(f"No directory id found in {metadata_dir}")
    if "controller.listener.names" not in props:
        raise CliError(f"controller.listener.names was not found. {hint}")
    listeners: dict[str, Any] = {}
    try:
        for key in ("listeners", "advertised.listeners"):  # advertised ones win, as in Kafka's tool
            values = [v.strip() for v in props.get(key, "").split(",") if v.strip()]
            listeners.update({e.name: e for e in parse_listeners(key, values)})
    except ConfigError as e:
        raise CliError(f"{config}: {e}") from None
    endpoints = []
    for name in (n.strip().upper() for n in props["controller.listener.names"].split(",") if n.strip()):
        e = listeners.get(name)
        if e is None:
            raise CliError(f"Cannot find information about controller listener name: {name}")
        endpoints.append((e.name, e.host or "localhost", e.port))
    return node_id, directory_id, endpoints


@metadata_quorum.command(name="add-controller")
@click.option("--config", "config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The added controller's server config (else --command-config, as in Kafka).")
@click.option("--dry-run", is_flag=True, help="Print what would be done, but do not do it.")
def add_controller(config: Path | None, dry_run: bool) -> None:
    """Add the controller of this server config to the quorum (AddRaftVoter)."""
    command_config = click.get_current_context().meta[_CTX][1]
    config = config or command_config
    if config is None:
        raise CliError("You must supply the configuration file of the controller you are adding when using add-controller.")
    node_id, directory_id, endpoints = controller_to_add(config)
    if not dry_run:
        with _admin(server_config=config) as admin:
            admin.add_raft_voter(node_id, directory_id, endpoints)
    shown = ", ".join(f"{name}://{_host(host)}:{port}" for name, host, port in endpoints)
    click.echo(f"{'DRY RUN of adding' if dry_run else 'Added'} controller {node_id} with directory id "
               f"{directory_id} and endpoints: {shown}")


@metadata_quorum.command(name="remove-controller")
@click.option("--controller-id", "-i", "controller_id", type=int, required=True, help="The id of the controller to remove.")
@click.option("--controller-directory-id", "-d", "directory_id", required=True,
              help="The directory ID of the controller to remove.")
@click.option("--dry-run", is_flag=True, help="Print what would be done, but do not do it.")
def remove_controller(controller_id: int, directory_id: str, dry_run: bool) -> None:
    """Remove a controller (its id and metadata log dir's directory id) from the quorum (RemoveRaftVoter)."""
    from kavka.storage.meta_properties import is_valid_uuid

    if controller_id < 0:
        raise CliError(f"Invalid negative --controller-id: {controller_id}")
    if not is_valid_uuid(directory_id):
        raise CliError(f"Failed to parse --controller-directory-id: {directory_id!r} is not a Kafka Uuid")
    if not dry_run:
        with _admin() as admin:
            admin.remove_raft_voter(controller_id, directory_id)
    click.echo(f"{'DRY RUN of removing' if dry_run else 'Removed'} KRaft controller {controller_id} "
               f"with directory id {directory_id}")
