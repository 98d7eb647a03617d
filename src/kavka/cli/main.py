"""Entry point of the `kavka` command (console script ``kavka = kavka.cli.main:main``).

The command table is data: (module, attribute) pairs, imported at start-up.
"""

from __future__ import annotations

import importlib

import click

from kavka.cli.common import KavkaGroup

COMMANDS: tuple[tuple[str, str], ...] = (
    ("kavka.cli.storage", "storage"),
    ("kavka.cli.server", "server"),
    ("kavka.cli.cluster", "cluster"),
    ("kavka.cli.metadata_quorum", "metadata_quorum"),
    ("kavka.cli.topics", "topics"),
    ("kavka.cli.configs", "configs"),
    ("kavka.cli.acls", "acls"),
    ("kavka.cli.log_dirs", "log_dirs"),
    ("kavka.cli.reassign", "reassign_partitions"),
    ("kavka.cli.leader_election", "leader_election"),
    ("kavka.cli.placement", "replica_placement"),
    ("kavka.cli.groups", "groups"),
    ("kavka.cli.transactions", "transactions"),
    ("kavka.cli.demo", "demo"),
    ("kavka.cli.console", "console"),
    ("kavka.cli.dump_log", "dump_log"),
)


@click.group(cls=KavkaGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kavka", prog_name="kavka")
def cli() -> None:
    """kavka: a Kafka-wire-compatible commit log."""


def _register() -> None:
    for module, attr in COMMANDS:
        cli.add_command(getattr(importlib.import_module(module), attr))


_register()


def main() -> None:
    cli(prog_name="kavka")
