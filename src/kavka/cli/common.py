"""Shared CLI plumbing: error reporting, output (rich tables or JSON), option parsing.

Errors the user can act on (a Kafka error code, an unreachable broker, a bad
config value) become one line on stderr and exit code 1 -- never a traceback.
Output goes through `Output`: a rich table by default, JSON with ``--json``
(stable keys, for scripts and tests).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import click

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "KAVKA_BOOTSTRAP"

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A refusal with a message for the user: printed on stderr, exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types whose message is the whole story for the user."""
    from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError

    return (KafkaError, KafkaConnectionError, KafkaProtocolError)


class KavkaGroup(click.Group):
    """A click group that turns user-facing exceptions into `CliError`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except user_errors() as e:
            raise CliError(str(e)) from None


# ---------------------------------------------------------------------- options


_COMMAND_CONFIG = "kavka.command_config"


def _remember_command_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    ctx.meta[_COMMAND_CONFIG] = value


def bootstrap_option(f: F) -> F:
    """--bootstrap-server, and --command-config (Kafka's tools' option: a client properties file
    with the security of the connections, kavka.cli.command_config), read by `admin_client`."""
    f = click.option(
        "--command-config",
        type=click.Path(dir_okay=False),
        expose_value=False,
        callback=_remember_command_config,
        metavar="FILE",
        help="Client properties for a secured listener: security.protocol, ssl.truststore.*, ssl.keystore.*, "
             "sasl.mechanism, sasl.jaas.config (Kafka's keys).",
    )(f)
    return click.option(
        "--bootstrap-server",
        "bootstrap",
        envvar=BOOTSTRAP_ENV,
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="Brokers to connect to.",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def admin_client(bootstrap: str) -> Any:
    from pathlib import Path

    from kavka.cli.command_config import CommandConfigError, load_command_config
    from kavka.client.security import PLAINTEXT

    path = click.get_current_context().meta.get(_COMMAND_CONFIG)
    try:
        security = load_command_config(Path(path)) if path else PLAINTEXT
    except CommandConfigError as e:
        raise CliError(f"--command-config {path}: {e}") from None
    return connect_admin(bootstrap, security)


def connect_admin(bootstrap: str, security: Any) -> Any:
    """kavka's AdminClient for `bootstrap`; a malformed address is a usage error naming the option."""
    from kavka.client.admin import AdminClient

    try:
        return AdminClient(bootstrap, security=security)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None


def parse_key_values(items: Iterable[str], *, option: str) -> dict[str, str]:
    """``k=v`` items (each may itself be ``k=v,k2=[a,b]`` as kafka-configs.sh accepts)."""
    out: dict[str, str] = {}
    for item in items:
        for part in split_config_list(item):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise click.BadParameter(f"expected key=value, got {part!r}", param_hint=option)
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]  # kafka-configs.sh's list syntax: k=[a,b]
            out[key] = value
    return out


def split_config_list(text: str) -> list[str]:
    """Split at commas outside square brackets: ``a=1,b=[x,y]`` -> [``a=1``, ``b=[x,y]``]."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def split_names(items: Iterable[str]) -> list[str]:
    return [n for item in items for n in split_config_list(item)]


# ---------------------------------------------------------------------- output


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def console() -> Any:
    """A rich console on the current stdout (CliRunner swaps it), wide when not a terminal."""
    from rich.console import Console

    out = sys.stdout
    is_tty = hasattr(out, "isatty") and out.isatty()
    width = None if is_tty else int(os.environ.get("COLUMNS", "0") or 0) or 200
    return Console(file=out, width=width, highlight=False, soft_wrap=not is_tty)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*(fmt_cell(v) for v in row))
    return t


def fmt_cell(v: Any) -> str:
    from rich.markup import escape

    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v) if v else "-"
    if isinstance(v, Mapping):
        return ",".join(f"{k}={val}" for k, val in v.items())
    return escape(str(v))


def emit(as_json: bool, data: Any, render: Callable[[Any], None]) -> None:
    """JSON of `data`, or `render(console)` for humans."""
    if as_json:
        print_json(data)
    else:
        render(console())
