"""`kavka reassign-partitions`: kafka-reassign-partitions.sh for moves between log dirs (KIP-113).

Reads Kafka's reassignment JSON::

    {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data/d2"]}]}

``log_dirs`` (optional) gives, per replica, an absolute log dir or ``"any"``.
``--execute`` sends AlterReplicaLogDirs to each broker named (and with
``--replica-alter-log-dirs-throttle`` first sets the dynamic broker config
``replica.alter.log.dirs.io.max.bytes.per.second`` there); ``--verify``
reports each replica as completed or in progress and, once all are done,
removes that throttle, as Kafka's tool does. Replica lists that differ from the
current assignment (moves across brokers) come with the cluster work and are
refused here.

``--generate`` (with ``--topics-to-move-json-file`` ``{"version": 1, "topics": [{"topic": "t"}]}``
and ``--broker-list 1,2,3``) prints the current assignment and a proposed one in the same JSON, as
Kafka's tool does -- but the proposal comes from the cluster's own replica placer
(`broker.replica.placer`, asked through CreateReplicaPlacement, KIP-879) instead of a copy of the
placement code in the tool; ``--disable-rack-aware`` maps to ForceSimplePlacement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


def parse_reassignment(text: str) -> list[tuple[str, int, list[int], list[str]]]:
    """(topic, partition, replicas, log_dirs) per entry; ValueError says what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ValueError('expected {"version": 1, "partitions": [...]}')
    out = []
    for i, p in enumerate(doc["partitions"]):
        try:
            topic, partition, replicas = str(p["topic"]), int(p["partition"]), [int(r) for r in p["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"partitions[{i}] needs topic, partition and replicas") from None
        dirs = p.get("log_dirs", ["any"] * len(replicas))
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise ValueError(f"partitions[{i}] ({topic}-{partition}): log_dirs must list one entry per replica")
        for d in dirs:
            if d != "any" and not (isinstance(d, str) and d.startswith("/")):
                raise ValueError(f"partitions[{i}] ({topic}-{partition}): log dir {d!r} is neither \"any\" nor an absolute path")
        out.append((topic, partition, replicas, [str(d) for d in dirs]))
    return out


def parse_topics_to_move(text: str) -> list[str]:
    """Topic names of Kafka's topics-to-move JSON; ValueError says what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise ValueError('expected {"version": 1, "topics": [{"topic": "..."}]}')
    names = []
    for i, t in enumerate(doc["topics"]):
        if not isinstance(t, dict) or not isinstance(t.get("topic"), str) or not t["topic"]:
            raise ValueError(f"topics[{i}] needs a topic name")
        names.append(t["topic"])
    if len(set(names)) != len(names):
        raise ValueError("a topic is listed twice")
    return names


def reassignment_json(assignment: dict[tuple[str, int], list[int]]) -> dict[str, Any]:
    """Kafka's reassignment JSON (formatAsReassignmentJson): sorted partitions, log_dirs "any"."""
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for (t, p), r in sorted(assignment.items())
        ],
    }


@click.command(name="reassign-partitions")
@bootstrap_option
@click.option("--reassignment-json-file", "json_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="The reassignment (with --execute or --verify).")
@click.option("--execute", is_flag=True, help="Start the reassignment.")
@click.option("--verify", is_flag=True, help="Report progress; removes the throttle once complete.")
@click.option("--generate", is_flag=True, help="Propose an assignment of the topics over --broker-list (the cluster's placer).")
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(exists=True, path_type=Path), default=None,
              help='{"version": 1, "topics": [{"topic": "t"}]} (with --generate).')
@click.option("--broker-list", "broker_list", default=None, metavar="1,2,3", help="Brokers to place on (with --generate).")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore racks: ForceSimplePlacement (with --generate).")
@click.option("--replica-alter-log-dirs-throttle", "throttle", type=click.IntRange(min=1), default=None,
              help="Bytes per second for moves between log dirs of a broker (with --execute).")
@json_option
def reassign_partitions(
    bootstrap: str,
    json_file: Path | None,
    execute: bool,
    verify: bool,
    generate: bool,
    topics_file: Path | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    throttle: int | None,
    as_json: bool,
) -> None:
    """Move replicas between the log dirs of their brokers, or propose an assignment (kafka-reassign-partitions.sh)."""
    if execute + verify + generate != 1:
        raise click.UsageError("give exactly one of --generate, --execute and --verify")
    if generate:
        if topics_file is None or not broker_list:
            raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        _generate(bootstrap, topics_file, broker_list, disable_rack_aware, as_json)
        return
    if json_file is None:
        raise click.UsageError("--execute and --verify need --reassignment-json-file")
    try:
        entries = parse_reassignment(json_file.read_text())
    except ValueError as e:
        raise CliError(f"{json_file}: {e}") from None
    with admin_client(bootstrap) as admin:
        current = {(d.name, p.partition): list(p.replicas) for d in admin.describe_topics(sorted({e[0] for e in entries})) for p in d.partitions}
        for topic, partition, replicas, _ in entries:
            have = current.get((topic, partition))
            if have is None:
                raise CliError(f"{topic}-{partition} does not exist")
            if sorted(have) != sorted(replicas):
                raise CliError(
                    f"{topic}-{partition}: replicas {replicas} differ from the current {have}; moving replicas "
                    "between brokers is not supported yet (only log_dirs moves within a broker)"
                )
        wanted = {(b, t, p): d for t, p, reps, dirs in entries for b, d in zip(reps, dirs, strict=True) if d != "any"}
        brokers = sorted({b for b, _, _ in wanted})
        if execute:
            _execute(admin, wanted, brokers, throttle, as_json)
        else:
            _verify(admin, wanted, brokers, as_json)


def _generate(bootstrap: str, topics_file: Path, broker_list: str, disable_rack_aware: bool, as_json: bool) -> None:
    from kavka.cli.placement import parse_broker_list

    brokers = parse_broker_list(broker_list, option="--broker-list")
    try:
        names = parse_topics_to_move(topics_file.read_text())
    except ValueError as e:
        raise CliError(f"{topics_file}: {e}") from None
    with admin_client(bootstrap) as admin:
        described = {d.name: d for d in admin.describe_topics(names)}
        current: dict[tuple[str, int], list[int]] = {}
        proposed: dict[tuple[str, int], list[int]] = {}
        for name in names:
            d = described.get(name)
            if d is None or not d.partitions:
                raise CliError(f"Topic {name} not found.")
            parts = sorted(d.partitions, key=lambda p: p.partition)
            for p in parts:
                current[(name, p.partition)] = list(p.replicas)
            # Kafka's tool places each topic afresh with its first partition's replication factor.
            placed = admin.create_replica_placement(
                len(parts), len(parts[0].replicas), force_simple=disable_rack_aware, node_ids=brokers
            )
            for p, reps in zip(parts, placed, strict=True):
                proposed[(name, p.partition)] = reps
    cur, prop = reassignment_json(current), reassignment_json(proposed)
    if as_json:
        emit(True, {"current": cur, "proposed": prop}, lambda con: None)
        return
    # Kafka's own text, so scripts that cut the proposal out of it keep working.
    click.echo(f"Current partition replica assignment\n{json.dumps(cur, separators=(',', ':'))}\n")
    click.echo(f"Proposed partition reassignment configuration\n{json.dumps(prop, separators=(',', ':'))}")


def _execute(admin: Any, wanted: dict[tuple[int, str, int], str], brokers: list[int], throttle: int | None, as_json: bool) -> None:
    if throttle is not None:
        for b in brokers:
            admin.incremental_alter_configs("broker", str(b), set={THROTTLE_KEY: str(throttle)})
    results = admin.alter_replica_log_dirs(wanted) if wanted else {}
    # REPLICA_NOT_AVAILABLE (9): the broker remembers the dir for when the replica is created.
    failed = {k: c for k, c in results.items() if c not in (0, 9)}
    data = {
        "throttle": throttle,
        "replicas": [
            {"broker": b, "topic": t, "partition": p, "log_dir": d, "error_code": results.get((b, t, p))}
            for (b, t, p), d in sorted(wanted.items())
        ],
    }

    def render(con: Any) -> None:
        if throttle is not None:
            con.print(f"The inter-log-dir throttle is set to {throttle} B/s on brokers {brokers}.")
        for (b, t, p), d in sorted(wanted.items()):
            code = results.get((b, t, p))
            state = "started" if code == 0 else ("remembered until the replica exists" if code == 9 else f"refused (error {code})")
            con.print(f"Move of replica {t}-{p}-{b} to {d}: {state}")
        if not failed:
            con.print("Successfully started partition reassignment.")

    emit(as_json, data, render)
    if failed:
        raise CliError("moves refused: " + ", ".join(f"{t}-{p} on broker {b} (error {c})" for (b, t, p), c in sorted(failed.items())))


def _verify(admin: Any, wanted: dict[tuple[int, str, int], str], brokers: list[int], as_json: bool) -> None:
    described = admin.describe_log_dirs(brokers) if brokers else {}
    status: dict[tuple[int, str, int], str] = {}
    for (b, t, p), d in wanted.items():
        state = "missing"
        for ld in described.get(b, []):
            for r in ld.replicas:
                if (r.topic, r.partition) != (t, p):
                    continue
                if ld.path == d and not r.is_future:
                    state = "completed"
                elif ld.path == d and r.is_future and state != "completed":
                    state = "in progress"
                elif state == "missing":
                    state = "elsewhere"
        status[(b, t, p)] = state
    done = all(s == "completed" for s in status.values())
    if done:
        for b in brokers:
            admin.incremental_alter_configs("broker", str(b), delete=[THROTTLE_KEY])
    data = {
        "complete": done,
        "throttle_removed": done and bool(brokers),
        "replicas": [{"broker": b, "topic": t, "partition": p, "log_dir": wanted[(b, t, p)], "status": s}
                     for (b, t, p), s in sorted(status.items())],
    }

    def render(con: Any) -> None:
        con.print(table("Status of moves between log dirs", ["Replica", "LogDir", "Status"],
                        [(f"{t}-{p}-{b}", wanted[(b, t, p)], s) for (b, t, p), s in sorted(status.items())]))
        if done and brokers:
            con.print("Reassignment complete. Throttle was removed.")
        elif not done:
            con.print("Reassignment is still in progress.")

    emit(as_json, data, render)
