"""`kavka console`: serve the web console (kavka.console) for a cluster."""

from __future__ import annotations

import click

from kavka.cli.common import CliError, bootstrap_option


@click.command(name="console")
@bootstrap_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Without a log-in (see --command-config) whoever reaches it acts with the "
                   "console's credentials: keep it on loopback unless a proxy guards it.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port to listen on (0: any free port).")
@click.option("--read-only", is_flag=True, help="Refuse every change (create, produce, reset, delete).")
@click.option("--metrics-url", "metrics_url", multiple=True, metavar="BROKER=URL",
              help="A broker's Prometheus endpoint, e.g. 1=http://10.0.0.1:9404/metrics (repeatable), for the Overview's "
                   "bytes per second. kavka brokers' own (metrics.prometheus.host/port) are found without it.")
def console(bootstrap: str, host: str, port: int, read_only: bool, metrics_url: tuple[str, ...]) -> None:
    """Serve the web console for the cluster at --bootstrap-server."""
    from pathlib import Path

    try:
        import uvicorn

        from kavka.console.app import create_app
    except ImportError as e:
        raise CliError(f"the console needs its extra: pip install 'kavka[console]' ({e})") from None
    from kavka.cli.command_config import CommandConfigError, load_command_config
    from kavka.client.security import PLAINTEXT

    path = click.get_current_context().meta.get("kavka.command_config")
    try:
        # A SASL config without sasl.jaas.config: the console asks each user to log in.
        security = load_command_config(Path(path), login=True) if path else PLAINTEXT
    except CommandConfigError as e:
        raise CliError(f"--command-config {path}: {e}") from None
    from kavka.console.views import parse_metrics_urls

    try:
        metrics_urls = parse_metrics_urls(metrics_url)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--metrics-url") from None
    try:
        app = create_app(bootstrap, security=security, read_only=read_only, metrics_urls=metrics_urls)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    # Say where it listens once bound (port 0 picks one): tests and users read this line.
    startup = server.startup

    async def announce(sockets: object = None) -> None:
        await startup(sockets=sockets)  # type: ignore[arg-type]
        for s in server.servers:
            for sock in s.sockets:
                h, p = sock.getsockname()[:2]
                mode = f" (log-in with SASL/{security.mechanism})" if app.state.sessions is not None else ""
                click.echo(f"kavka console on http://{h}:{p}/ for {bootstrap}{' (read-only)' if read_only else ''}{mode}",
                           err=False)
                click.get_text_stream("stdout").flush()

    server.startup = announce  # type: ignore[method-assign]
    server.run()
