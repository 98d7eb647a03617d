"""`kavka cluster up|status`: a local multi-node cluster in one command, and what it looks like.

`up` writes one server.properties per node under `--data-dir` (combined
broker,controller nodes, every node a voter, client ports from `--base-port`,
controller ports 100 above), formats every node with one cluster id (kept in
`<data-dir>/cluster.id`, so a second `up` restarts the same cluster), starts
the nodes as `kavka server start` processes, waits until each is ready,
prints the bootstrap servers, and on Ctrl-C (or SIGTERM) stops them one by
one, waiting for each. `status` asks any node for the brokers (DescribeCluster)
and the quorum (DescribeQuorum), like `kafka-metadata-quorum.sh describe
--status --replication`.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table


@click.group(name="cluster")
def cluster() -> None:
    """Run and inspect a local multi-node cluster."""


def _node_props(i: int, n: int, data_dir: Path, base_port: int, rack: str | None) -> dict[str, str]:
    voters = ",".join(f"{j}@127.0.0.1:{base_port + 100 + j - 1}" for j in range(1, n + 1))
    props = {
        "node.id": str(i),
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{base_port + i - 1},CONTROLLER://127.0.0.1:{base_port + 100 + i - 1}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters,
        "log.dirs": str(data_dir / f"node{i}" / "data"),
    }
    if rack:
        props["broker.rack"] = rack
    return props


@cluster.command(name="up")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 9), help="Number of nodes.")
@click.option("--controllers", type=int, default=None, help="Voters among them (all nodes: combined roles).")
@click.option("--racks", default=None, help="Comma-separated racks, assigned to nodes round-robin.")
@click.option("--data-dir", required=True, type=click.Path(path_type=Path), help="Where the nodes keep their data.")
@click.option("--base-port", default=9092, show_default=True, type=int, help="Client port of node 1 (node i: +i-1).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="A config for every node (repeatable).")
def up(nodes: int, controllers: int | None, racks: str | None, data_dir: Path, base_port: int, overrides: tuple[str, ...]) -> None:
    """Start a local cluster; Ctrl-C stops every node in order."""
    if controllers is not None and controllers != nodes:
        raise CliError(
            f"--controllers {controllers}: separate controller and broker roles are not supported yet "
            "(every node is a combined broker,controller voter)"
        )
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    id_file = data_dir / "cluster.id"
    if not id_file.exists():
        id_file.write_text(base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode() + "\n")
    cluster_id = id_file.read_text().strip()
    rack_list = [r.strip() for r in racks.split(",")] if racks else []
    kavka = [sys.executable, "-m", "kavka"]
    procs: dict[int, subprocess.Popen[str]] = {}
    ready: dict[int, threading.Event] = {}
    logs: dict[int, list[str]] = {}

    def pump(i: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(data_dir / f"node{i}" / "server.log", "a") as log_file:
            for line in proc.stdout:
                log_file.write(line)
                log_file.flush()
                logs[i].append(line)
                del logs[i][:-50]
                if line.startswith("KAVKA_READY"):
                    ready[i].set()
        ready[i].set()

    def stop_all() -> None:
        for i, proc in procs.items():
            if proc.poll() is None:
                click.echo(f"stopping node {i} ...", err=True)
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)

    try:
        for i in range(1, nodes + 1):
            node_dir = data_dir / f"node{i}"
            node_dir.mkdir(exist_ok=True)
            props = _node_props(i, nodes, data_dir, base_port, rack_list[(i - 1) % len(rack_list)] if rack_list else None)
            for item in overrides:
                k, sep, v = item.partition("=")
                if not sep:
                    raise CliError(f"--override {item!r}: expected key=value")
                props[k.strip()] = v.strip()
            config = node_dir / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            if not (node_dir / "data" / "meta.properties").exists():
                res = subprocess.run(
                    [*kavka, "storage", "format", "--config", str(config), "--cluster-id", cluster_id],
                    capture_output=True, text=True, timeout=60,
                )
                if res.returncode != 0:
                    raise CliError(f"formatting node {i} failed: {res.stdout}{res.stderr}")
            proc = subprocess.Popen(
                [*kavka, "server", "start", "--config", str(config)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
            procs[i], ready[i], logs[i] = proc, threading.Event(), []
            threading.Thread(target=pump, args=(i, proc), daemon=True).start()
        deadline = time.monotonic() + 120
        for i in procs:
            while not ready[i].wait(0.2):
                if time.monotonic() > deadline:
                    raise CliError(f"node {i} did not start in 120s:\n{''.join(logs[i][-20:])}")
            if not any(line.startswith("KAVKA_READY") for line in logs[i]):
                raise CliError(f"node {i} exited with {procs[i].wait(10)}:\n{''.join(logs[i][-20:])}")
            click.echo(f"node {i} ready on 127.0.0.1:{base_port + i - 1}", err=True)
        bootstrap = ",".join(f"127.0.0.1:{base_port + i - 1}" for i in procs)
        click.echo(f"cluster {cluster_id}: {nodes} nodes, logs in {data_dir}/node*/server.log")
        click.echo(f"bootstrap servers: {bootstrap}")
        click.echo("Ctrl-C stops every node.", err=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while not stop.is_set():
            dead = [i for i, p in procs.items() if p.poll() is not None]
            if dead:
                click.echo(f"node {dead[0]} exited with {procs[dead[0]].returncode}; stopping the others", err=True)
                break
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop_all()


@cluster.command(name="status")
@bootstrap_option
@json_option
def status(bootstrap: str, as_json: bool) -> None:
    """Nodes, racks, the quorum's leader and epoch, and each voter's lag."""
    with admin_client(bootstrap) as admin:
        desc = admin.describe_cluster()
        quorum = admin.describe_quorum()
    now = int(time.time() * 1000)
    data: dict[str, Any] = {
        "cluster_id": desc.cluster_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in desc.brokers],
        "quorum": {
            "leader_id": quorum.leader_id,
            "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "voters": [
                {
                    "id": v.node_id,
                    "log_end_offset": v.log_end_offset,
                    "lag": max(0, quorum.high_watermark - v.log_end_offset) if v.log_end_offset >= 0 else None,
                    "last_fetch_ms_ago": now - v.last_fetch_timestamp if v.last_fetch_timestamp >= 0 else None,
                    "status": "Leader" if v.node_id == quorum.leader_id else "Follower",
                }
                for v in quorum.voters
            ],
        },
    }

    def render(out: Any) -> None:
        q = data["quorum"]
        out.print(f"ClusterId: {data['cluster_id']}")
        out.print(f"LeaderId: {q['leader_id']}  LeaderEpoch: {q['leader_epoch']}  HighWatermark: {q['high_watermark']}")
        out.print(table("Brokers", ["Id", "Host", "Port", "Rack"],
                        [(b["id"], b["host"], b["port"], b["rack"]) for b in data["brokers"]]))
        out.print(table("Quorum", ["NodeId", "LogEndOffset", "Lag", "LastFetch(ms ago)", "Status"],
                        [(v["id"], v["log_end_offset"], v["lag"], v["last_fetch_ms_ago"], v["status"]) for v in q["voters"]]))

    emit(as_json, data, render)
