"""`kavka server start`: load server.properties and run a broker until SIGTERM/SIGINT.

With `--processes N` one command runs N brokers from the one config, each its own process (kavka is
one event loop per process, so a host uses its cores by running several brokers): node ids, ports,
log dirs and the host level of `broker.rack` are derived per process (kavka.config.process_overrides),
each child is `kavka server start` with those as `--override`s, its output goes to this process's
stdout prefixed `[node <id>]`, and once every child is ready this process prints one KAVKA_READY line
with all their ports. This process supervises: SIGTERM or SIGINT stops every child with its
controlled shutdown (broker-only processes first, then those with the controller role) and exits 0
if they all did; a child that exits on its own stops the others and this process exits 1 -- the host
is the unit a service manager restarts, and placement already keeps replicas of a partition on
different hosts. A SIGKILL of this process sends SIGTERM to every child (Linux PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from pathlib import Path

import click

from kavka.cli.common import CliError


@click.group(name="server")
def server() -> None:
    """Run a broker."""


@server.command(name="start")
@click.option(
    "--config",
    "-c",
    "config_path",
    required=True,
    type=click.Path(path_type=Path),
    help="server.properties",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config (repeatable).",
)
@click.option("--processes", type=click.IntRange(1, 256), default=None,
              help="Run N brokers from this config, one process each: node.id + i, every port + i, log dirs "
                   "<dir>/node-<id>, broker.rack <rack>/<host> (docs/cluster.md).")
@click.option("--host-id", default=None, help="With --processes: the host level of broker.rack (default: the host name).")
@click.pass_context
def start(ctx: click.Context, config_path: Path, overrides: tuple[str, ...], processes: int | None,
          host_id: str | None) -> None:
    """Start a broker (and controller, as configured); stops cleanly on SIGTERM or SIGINT."""
    import kavka.controller.placement  # noqa: F401 -- registers broker.replica.placer's check before parsing
    from kavka.config import ConfigError, load_config

    if processes is None:
        if host_id is not None:
            raise CliError("--host-id is the host level of broker.rack for --processes; give --processes too")
        try:
            config = load_config(config_path, list(overrides))
        except ConfigError as e:
            raise CliError(f"invalid config: {e}") from None
        from kavka.broker.main import run_server

        ctx.exit(run_server(config))
    derived = derive(config_path, overrides, processes, host_id or socket.gethostname().split(".")[0])
    ctx.exit(run_processes(config_path, overrides, derived))


def derive(config_path: Path, overrides: tuple[str, ...], processes: int, host: str) -> list[dict[str, str]]:
    """Each process's derived keys, or CliError naming the key that stops it."""
    from kavka.config import ConfigError, process_overrides, read_properties

    try:
        props = read_properties(config_path)
        for item in overrides:
            k, sep, v = item.partition("=")
            if not sep:
                raise ConfigError("--override", f"expected key=value, got {item!r}")
            props[k.strip()] = v.strip()
        return process_overrides(props, processes, host)
    except ConfigError as e:
        raise CliError(f"invalid config: {e}") from None


def run_processes(config_path: Path, overrides: tuple[str, ...], derived: list[dict[str, str]]) -> int:
    """Start, supervise and stop the processes (see the module doc); the exit code."""
    from kavka.local_cluster import LocalClusterError, NodeProcesses

    out_lock = threading.Lock()

    def echo(node: int, line: str) -> None:
        with out_lock:
            sys.stdout.write(f"[node {node}] {line}")
            sys.stdout.flush()

    def say(message: str) -> None:
        click.echo(message, err=True)

    nodes = NodeProcesses(on_line=echo)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Explicitly, not through KeyboardInterrupt: a process started in the background of a script
    # inherits SIGINT as ignored.
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ids = [int(o["node.id"]) for o in derived]
    # Broker-only processes stop first: their controlled shutdown needs a controller to grant it.
    order = [[n for n, o in zip(ids, derived, strict=True) if o.get("process.roles") == role]
             for role in (None, "broker", "broker,controller")]
    base = [sys.executable, "-m", "kavka", "server", "start", "--config", str(config_path)]
    code = 0
    try:
        for node, o in zip(ids, derived, strict=True):
            args = [a for item in overrides for a in ("--override", item)]
            args += [a for k, v in o.items() for a in ("--override", f"{k}={v}")]
            nodes.spawn(node, base + args, die_with_parent=True)
        deadline = time.monotonic() + 120.0
        ports = []
        for node in ids:
            if stop.is_set():
                return 0
            nodes.wait_ready(node, deadline)
            line = nodes.ready_line(node) or ""
            ports.append(line.partition("ports=")[2])
            say(f"node {node} ready (pid {nodes.procs[node].pid}, ports {ports[-1]}, "
                f"broker.rack {derived[ids.index(node)]['broker.rack']})")
        with out_lock:
            print(f"KAVKA_READY ports={','.join(ports)}", flush=True)
        while not stop.wait(0.2):
            dead = nodes.dead()
            if dead:
                say(f"node {dead[0]} exited with {nodes.procs[dead[0]].returncode}; stopping the others")
                code = 1
                break
    except LocalClusterError as e:
        say(f"cannot start: {e}")
        code = 1
    finally:
        codes = nodes.stop(order, on_event=say)
    return code or (0 if all(c == 0 for c in codes.values()) else 1)
