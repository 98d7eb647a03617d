"""`kavka server start`: load server.properties and run a broker until SIGTERM/SIGINT."""

from __future__ import annotations

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
@click.pass_context
def start(ctx: click.Context, config_path: Path, overrides: tuple[str, ...]) -> None:
    """Start a combined broker+controller; stops cleanly on SIGTERM or SIGINT."""
    import kavka.controller.placement  # noqa: F401 -- registers broker.replica.placer's check before parsing
    from kavka.config import ConfigError, load_config

    try:
        config = load_config(config_path, list(overrides))
    except ConfigError as e:
        raise CliError(f"invalid config: {e}") from None
    from kavka.broker.main import run_server

    ctx.exit(run_server(config))
