"""`kavka cluster up|status`: a local multi-node cluster in one command, and what it looks like.

`up` writes one server.properties per node under `--data-dir` (combined
broker,controller nodes, every node a voter, client ports from `--base-port`,
controller ports 100 above, Prometheus metrics ports 300 above), formats every node with one cluster id (kept in
`<data-dir>/cluster.id`, so a second `up` restarts the same cluster), starts
the nodes as `kavka server start` processes, waits until each is ready,
prints the bootstrap servers, and on Ctrl-C (or SIGTERM) stops them all at
once (each with its controlled shutdown) and waits for each (kavka.local_cluster). With
`--secure` every listener is secured (clients: SASL_SSL with PLAIN and a generated admin user;
between brokers: SASL_SSL with SCRAM-SHA-512; the controllers: mutual TLS) and `up` prints the
client config, password included, once, to the terminal, and the kavka command that uses it;
`--json` prints one line of JSON instead (the paths and the same config). `status` asks any node for the brokers (DescribeCluster)
and the quorum (DescribeQuorum), like `kafka-metadata-quorum.sh describe
--status --replication`.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table


@click.group(name="cluster")
def cluster() -> None:
    """Run and inspect a local multi-node cluster."""


@cluster.command(name="up")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 9), help="Number of nodes.")
@click.option("--controllers", type=click.IntRange(1, 9), default=None,
              help="Separate controller-only voters (then --nodes counts broker-only nodes); default: every node is a combined broker,controller voter.")
@click.option("--racks", default=None, help="Comma-separated racks, assigned to nodes round-robin.")
@click.option("--data-dir", required=True, type=click.Path(path_type=Path), help="Where the nodes keep their data.")
@click.option("--base-port", default=9092, show_default=True, type=int, help="Client port of node 1 (node i: +i-1).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="A config for every node (repeatable).")
@click.option("--secure", is_flag=True,
              help="Every listener secured (clients: SASL_SSL with PLAIN and a generated admin user; brokers: SASL_SSL with "
                   "SCRAM-SHA-512; controllers: mutual TLS); prints the client config.")
@click.option("--console-port", type=click.IntRange(1, 65535), default=None,
              help="Also serve the web console (kavka console) on 127.0.0.1 at this port.")
@json_option
def up(nodes: int, controllers: int | None, racks: str | None, data_dir: Path, base_port: int, overrides: tuple[str, ...],
       secure: bool, console_port: int | None, as_json: bool) -> None:
    """Start a local cluster; Ctrl-C stops every node (each with a controlled shutdown)."""
    from kavka.local_cluster import LocalCluster, LocalClusterError, start_console, stop_console

    props: dict[str, str] = {}
    for item in overrides:
        k, sep, v = item.partition("=")
        if not sep:
            raise CliError(f"--override {item!r}: expected key=value")
        props[k.strip()] = v.strip()
    local = LocalCluster(
        data_dir,
        nodes,
        base_port=base_port,
        controllers=controllers,
        racks=[r.strip() for r in racks.split(",")] if racks else None,
        overrides=props,
        on_event=lambda message: click.echo(message, err=True),
        secure=secure,
    )
    console = None
    try:
        bootstrap = local.start()
        if console_port is not None:
            console = start_console(bootstrap, console_port,
                                    command_config=local.security.client_properties if local.security else None)
        shape = f"{nodes} nodes" if controllers is None else f"{controllers} controllers + {nodes} brokers"
        if as_json:
            click.echo(json.dumps(_up_json(local, shape)))
        else:
            click.echo(f"cluster {local.cluster_id}: {shape}, logs in {local.data_dir}/node*/server.log")
            if local.security is not None:
                _print_security(local)
            click.echo(f"bootstrap servers: {bootstrap}")
        click.echo("Ctrl-C stops every node.", err=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        # Explicitly, not through KeyboardInterrupt: a process started in the background of a
        # script inherits SIGINT as ignored, and Python then never raises KeyboardInterrupt.
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        while not stop.is_set():
            dead = local.dead()
            if dead:
                click.echo(f"node {dead[0]} exited with {local.procs[dead[0]].returncode}; stopping the others", err=True)
                break
            if console is not None and console.poll() is not None:
                click.echo(f"the console exited with {console.returncode} (is port {console_port} taken?); the cluster runs on",
                           err=True)
                console = None
            stop.wait(0.5)
    except LocalClusterError as e:
        raise CliError(str(e)) from None
    except KeyboardInterrupt:
        pass
    finally:
        if console is not None:
            stop_console(console)
        local.stop()


def _up_json(local: Any, shape: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cluster_id": local.cluster_id,
        "shape": shape,
        "bootstrap_servers": local.bootstrap,
        "logs": [str(local.data_dir / f"node{i}" / "server.log") for i in sorted(local.procs)],
        "secure": None,
    }
    sec = local.security
    if sec is not None:
        data["secure"] = {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN",
            "ca_location": str(sec.ca),
            "client_properties": str(sec.client_properties),
            "librdkafka_properties": str(sec.librdkafka_properties),
            "librdkafka_config": sec.librdkafka_config(local.bootstrap),
            "kavka_command": local.cli_command(),
        }
    return data


def _print_security(local: Any) -> None:
    """The client config of a secure cluster, password included: shown here, once, and in the 0600
    files; the nodes' logs never carry it."""
    sec = local.security
    click.echo(f"security: clients SASL_SSL with PLAIN, brokers SASL_SSL with SCRAM-SHA-512, controllers mutual TLS; "
               f"CA, keys and client configs in {local.secure_dir} (keys 0600)")
    click.echo(f"client config for Java clients, kafka-*.sh and kavka --command-config: {sec.client_properties}")
    click.echo(f"client config for librdkafka (confluent-kafka, kcat -F): {sec.librdkafka_properties}")
    click.echo("confluent-kafka / librdkafka settings:")
    for k, v in sec.librdkafka_config(local.bootstrap).items():
        click.echo(f"  {k}={v}")
    click.echo(f"kavka's own commands: {local.cli_command()}")


@cluster.command(name="status")
@bootstrap_option
@json_option
def status(bootstrap: str, as_json: bool) -> None:
    """Nodes, racks, the quorum's leader and epoch, and each voter's lag."""
    with admin_client(bootstrap) as admin:
        desc = admin.describe_cluster()
        quorum = admin.describe_quorum()
    now = int(time.time() * 1000)

    def replica(v: Any, status: str) -> dict[str, Any]:
        return {
            "id": v.node_id,
            "log_end_offset": v.log_end_offset,
            "lag": max(0, quorum.high_watermark - v.log_end_offset) if v.log_end_offset >= 0 else None,
            "last_fetch_ms_ago": now - v.last_fetch_timestamp if v.last_fetch_timestamp >= 0 else None,
            "status": status,
        }

    data: dict[str, Any] = {
        "cluster_id": desc.cluster_id,
        "brokers": [
            {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": b.fenced} for b in desc.brokers
        ],
        "quorum": {
            "leader_id": quorum.leader_id,
            "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "voters": [replica(v, "Leader" if v.node_id == quorum.leader_id else "Follower") for v in quorum.voters],
            "observers": [replica(v, "Observer") for v in quorum.observers],
        },
    }

    def render(out: Any) -> None:
        q = data["quorum"]
        out.print(f"ClusterId: {data['cluster_id']}")
        out.print(f"LeaderId: {q['leader_id']}  LeaderEpoch: {q['leader_epoch']}  HighWatermark: {q['high_watermark']}")
        out.print(table("Brokers", ["Id", "Host", "Port", "Rack", "State"],
                        [(b["id"], b["host"], b["port"], b["rack"], "fenced" if b["fenced"] else "unfenced")
                         for b in data["brokers"]]))
        out.print(table("Quorum", ["NodeId", "LogEndOffset", "Lag", "LastFetch(ms ago)", "Status"],
                        [(v["id"], v["log_end_offset"], v["lag"], v["last_fetch_ms_ago"], v["status"]) for v in q["voters"] + q["observers"]]))

    emit(as_json, data, render)


def _add_rebalance() -> None:
    from kavka.cli.rebalance import rebalance

    cluster.add_command(rebalance)


_add_rebalance()
