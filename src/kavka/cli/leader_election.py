"""`kavka leader-election`: kafka-leader-election.sh -- preferred and unclean leader elections.

Exactly one of ``--topic T --partition P``, ``--all-topic-partitions`` and
``--path-to-json-file F`` (Kafka's ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``,
duplicates refused) names the partitions; ``--election-type preferred|unclean`` says what to
do. The request is ElectLeaders (API 43) to any broker, which forwards it to the active
controller. The result is what Kafka's tool prints -- partitions elected, partitions whose valid
leader was already there (ELECTION_NOT_NEEDED), failures with their error -- as a table, or JSON
with ``--json``; any failure makes the exit code 1 (``N replica(s) could not be elected``).
With ``--all-topic-partitions`` the controller leaves out the partitions that needed nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table
from kavka.common import ElectionType

ELECTION_TYPES = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}
_ELECTION_NOT_NEEDED = 84


def parse_election_json(text: str) -> list[tuple[str, int]]:
    """The partitions of Kafka's replica election JSON; ValueError says what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("Replica election data is empty")
    if not isinstance(doc.get("partitions"), list):
        raise ValueError('Replica election data is missing "partitions" field')
    out: list[tuple[str, int]] = []
    for i, p in enumerate(doc["partitions"]):
        if not isinstance(p, dict) or not isinstance(p.get("topic"), str) or type(p.get("partition")) is not int:
            raise ValueError(f'partitions[{i}] needs "topic" (a string) and "partition" (an integer)')
        out.append((p["topic"], p["partition"]))
    dupes = sorted({tp for tp in out if out.count(tp) > 1})
    if dupes:
        raise ValueError(
            "Replica election data contains duplicate partitions: " + ",".join(f"{t}-{p}" for t, p in dupes)
        )
    return out


@click.command(name="leader-election")
@bootstrap_option
@click.option("--election-type", "election_type", required=True, type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
              help="preferred: elect the preferred replica where it does not lead; unclean: elect a leader where there is none.")
@click.option("--topic", default=None, help="Topic of the partition to elect (with --partition).")
@click.option("--partition", type=int, default=None, help="Partition to elect (with --topic).")
@click.option("--all-topic-partitions", "all_partitions", is_flag=True, help="Elect on every partition where the election type applies.")
@click.option("--path-to-json-file", "json_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help='Partitions to elect: {"partitions": [{"topic": "foo", "partition": 1}, ...]}.')
@json_option
def leader_election(
    bootstrap: str,
    election_type: str,
    topic: str | None,
    partition: int | None,
    all_partitions: bool,
    json_file: Path | None,
    as_json: bool,
) -> None:
    """Elect preferred or unclean leaders (kafka-leader-election.sh)."""
    chosen = sum([topic is not None, all_partitions, json_file is not None])
    if chosen != 1:
        raise click.UsageError(
            "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"
        )
    if topic is not None and partition is None:
        raise click.UsageError("Missing required option(s): --partition")
    if topic is None and partition is not None:
        raise click.UsageError("Option --partition is only allowed if --topic is used")
    partitions: list[tuple[str, int]] | None
    if json_file is not None:
        try:
            partitions = parse_election_json(json_file.read_text())
        except ValueError as e:
            raise CliError(f"{json_file}: {e}") from None
    elif topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        partitions = None
    kind = election_type.lower()
    with admin_client(bootstrap) as admin:
        results = admin.elect_leaders(ELECTION_TYPES[kind], partitions)
    report(kind.upper(), results, as_json)


def report(kind: str, results: dict[tuple[str, int], tuple[int, str | None]], as_json: bool) -> None:
    """Print Kafka's three outcomes; exit 1 when any partition could not be elected."""
    from kavka.client.errors import error_name

    ordered = sorted(results.items())
    succeeded = [tp for tp, (code, _) in ordered if code == 0]
    noop = [tp for tp, (code, _) in ordered if code == _ELECTION_NOT_NEEDED]
    failed = [(tp, code, msg) for tp, (code, msg) in ordered if code not in (0, _ELECTION_NOT_NEEDED)]
    data = {
        "election_type": kind,
        "succeeded": [{"topic": t, "partition": p} for t, p in succeeded],
        "not_needed": [{"topic": t, "partition": p} for t, p in noop],
        "failed": [
            {"topic": t, "partition": p, "error": error_name(code), "error_code": code, "message": msg}
            for (t, p), code, msg in failed
        ],
    }

    def names(tps: list[tuple[str, int]]) -> str:
        return ", ".join(f"{t}-{p}" for t, p in tps)

    def render(con: Any) -> None:
        rows = [(f"{t}-{p}", "elected", "-") for t, p in succeeded]
        rows += [(f"{t}-{p}", "valid replica already elected", "-") for t, p in noop]
        rows += [(f"{t}-{p}", "failed", f"{error_name(code)}: {msg}" if msg else error_name(code)) for (t, p), code, msg in failed]
        if rows:
            con.print(table(f"Leader election ({kind})", ["Partition", "Result", "Error"], rows))
        if succeeded:
            con.print(f"Successfully completed leader election ({kind}) for partitions {names(succeeded)}")
        if noop:
            con.print(f"Valid replica already elected for partitions {names(noop)}")
        if not rows:
            con.print(f"No partition needed a leader election ({kind})")

    emit(as_json, data, render)
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected")
