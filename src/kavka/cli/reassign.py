"""`kavka reassign-partitions`: kafka-reassign-partitions.sh -- moves across brokers (KIP-455) and
between the log dirs of a broker (KIP-113).

Reads Kafka's reassignment JSON::

    {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "/data/d2"]}]}

``--execute`` checks the brokers exist and that no reassignment is already running (unless
``--additional``), prints the current assignment (Kafka's rollback JSON), sends
AlterPartitionReassignments for every partition, then AlterReplicaLogDirs for each replica whose
``log_dirs`` entry is a path -- retrying REPLICA_NOT_AVAILABLE every 100 ms until the replica
exists on its new broker, or ``--timeout`` ms pass (Kafka's executeMoves); with
``--replica-alter-log-dirs-throttle`` it first sets ``replica.alter.log.dirs.io.max.bytes.per.second``
on the brokers whose dirs change. ``--verify`` reports each partition (completed, in progress with
each adding replica's size and lag, or a different replica set) and each log-dir move, and once
everything is done removes the throttles, as Kafka's tool does. ``--cancel`` cancels the listed
partitions' reassignments that are active (a null target: back to the original replicas).

``--generate`` (with ``--topics-to-move-json-file`` ``{"version": 1, "topics": [{"topic": "t"}]}``
and ``--broker-list 1,2,3``) prints the current assignment and a proposed one in the same JSON, as
Kafka's tool does -- but the proposal comes from the cluster's own replica placer
(`broker.replica.placer`, asked through CreateReplicaPlacement, KIP-879) instead of a copy of the
placement code in the tool; ``--disable-rack-aware`` maps to ForceSimplePlacement.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table
from kavka.operations import (
    THROTTLE_KEY,
    OperationError,
    adding_progress,
    cancel_reassignments,
    check_reassignment,
    clear_throttles,
    log_dir_status,
    send_reassignment,
    set_replication_throttles,
)


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
              help="The reassignment (with --execute, --verify or --cancel).")
@click.option("--execute", is_flag=True, help="Start the reassignment.")
@click.option("--verify", is_flag=True, help="Report progress; removes the throttles once complete.")
@click.option("--cancel", is_flag=True, help="Cancel the active reassignments of the listed partitions.")
@click.option("--generate", is_flag=True, help="Propose an assignment of the topics over --broker-list (the cluster's placer).")
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(exists=True, path_type=Path), default=None,
              help='{"version": 1, "topics": [{"topic": "t"}]} (with --generate).')
@click.option("--broker-list", "broker_list", default=None, metavar="1,2,3", help="Brokers to place on (with --generate).")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore racks: ForceSimplePlacement (with --generate).")
@click.option("--replica-alter-log-dirs-throttle", "throttle", type=click.IntRange(min=1), default=None,
              help="Bytes per second for moves between log dirs of a broker (with --execute).")
@click.option("--throttle", "inter_broker_throttle", type=click.IntRange(min=1), default=None,
              help="Bytes per second for replication between brokers while the reassignment runs (with --execute).")
@click.option("--additional", is_flag=True, help="Execute even though other reassignments are in progress.")
@click.option("--preserve-throttles", is_flag=True, help="Leave the throttles in place (with --verify or --cancel).")
@click.option("--timeout", "timeout_ms", type=click.IntRange(min=0), default=10_000, show_default=True,
              help="Milliseconds to wait for a log-dir move to start on a replica's new broker (with --execute).")
@json_option
def reassign_partitions(
    bootstrap: str,
    json_file: Path | None,
    execute: bool,
    verify: bool,
    cancel: bool,
    generate: bool,
    topics_file: Path | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    throttle: int | None,
    inter_broker_throttle: int | None,
    additional: bool,
    preserve_throttles: bool,
    timeout_ms: int,
    as_json: bool,
) -> None:
    """Move replicas to other brokers and log dirs, or propose an assignment (kafka-reassign-partitions.sh)."""
    if execute + verify + cancel + generate != 1:
        raise click.UsageError("give exactly one of --generate, --execute, --verify and --cancel")
    if generate:
        if topics_file is None or not broker_list:
            raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        _generate(bootstrap, topics_file, broker_list, disable_rack_aware, as_json)
        return
    if json_file is None:
        raise click.UsageError("--execute, --verify and --cancel need --reassignment-json-file")
    try:
        entries = parse_reassignment(json_file.read_text())
    except ValueError as e:
        raise CliError(f"{json_file}: {e}") from None
    targets = {(t, p): reps for t, p, reps, _ in entries}
    wanted = {(b, t, p): d for t, p, reps, dirs in entries for b, d in zip(reps, dirs, strict=True) if d != "any"}
    with admin_client(bootstrap) as admin:
        current = _current(admin, targets)
        if execute:
            _execute(admin, targets, current, wanted, throttle=throttle, inter_broker_throttle=inter_broker_throttle,
                     additional=additional, timeout_ms=timeout_ms, as_json=as_json)
        elif verify:
            _verify(admin, targets, current, wanted, preserve_throttles=preserve_throttles, as_json=as_json)
        else:
            _cancel(admin, targets, preserve_throttles=preserve_throttles, as_json=as_json)


def _tp(t: str, p: int) -> str:
    return f"{t}-{p}"


def _current(admin: Any, targets: dict[tuple[str, int], list[int]]) -> dict[tuple[str, int], list[int]]:
    """Each listed partition's replicas now; a missing one is refused."""
    described = admin.describe_topics(sorted({t for t, _ in targets}))
    current = {(d.name, p.partition): list(p.replicas) for d in described for p in d.partitions}
    for t, p in sorted(targets):
        if (t, p) not in current:
            raise CliError(f"{_tp(t, p)} does not exist")
    return current


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


def _execute(
    admin: Any,
    targets: dict[tuple[str, int], list[int]],
    current: dict[tuple[str, int], list[int]],
    wanted: dict[tuple[int, str, int], str],
    *,
    throttle: int | None,
    inter_broker_throttle: int | None,
    additional: bool,
    timeout_ms: int,
    as_json: bool,
) -> None:
    try:
        check_reassignment(admin, targets, additional=additional)
    except OperationError as e:
        raise CliError(str(e)) from None
    rollback = reassignment_json({k: current[k] for k in targets})
    echo = (lambda line: None) if as_json else click.echo
    echo(f"Current partition replica assignment\n\n{json.dumps(rollback, separators=(',', ':'))}\n\n"
         "Save this to use as the --reassignment-json-file option during rollback")
    brokers = sorted({b for b, _, _ in wanted})
    if throttle is not None or inter_broker_throttle is not None:
        echo("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
             "throttle is removed.")
    if inter_broker_throttle is not None:
        set_replication_throttles(admin, targets, current, inter_broker_throttle)
        echo(f"The inter-broker throttle limit was set to {inter_broker_throttle} B/s")
    if throttle is not None:
        for b in brokers:
            admin.incremental_alter_configs("broker", str(b), set={THROTTLE_KEY: str(throttle)})
        echo(f"The replica-alter-dir throttle limit was set to {throttle} B/s")
    try:
        results = send_reassignment(admin, targets)
    except OperationError as e:
        raise CliError(str(e)) from None
    echo(f"Successfully started partition reassignment{'' if len(targets) == 1 else 's'} for "
         + ",".join(_tp(t, p) for t, p in sorted(targets)))
    codes = _execute_moves(admin, wanted, timeout_ms, echo) if wanted else {}
    emit(as_json, {
        "current": rollback,
        "throttle": throttle,
        "inter_broker_throttle": inter_broker_throttle,
        "partitions": [{"topic": t, "partition": p, "replicas": r, "error_code": results.get((t, p), (0, None))[0]}
                       for (t, p), r in sorted(targets.items())],
        "replicas": [{"broker": b, "topic": t, "partition": p, "log_dir": d, "error_code": codes.get((b, t, p))}
                     for (b, t, p), d in sorted(wanted.items())],
    }, lambda con: None)
    failed = {k: c for k, c in codes.items() if c != 0}
    if failed:
        raise CliError("log dir moves refused: " + ", ".join(
            f"{t}-{p} on broker {b} (error {c})" for (b, t, p), c in sorted(failed.items())))


def _clear_throttles(admin: Any, topics: list[str], echo: Any) -> None:
    brokers = clear_throttles(admin, topics)
    echo(f"Clearing broker-level throttles on broker{'s' if len(brokers) != 1 else ''} {','.join(map(str, brokers))}")
    echo(f"Clearing topic-level throttles on topic{'s' if len(topics) != 1 else ''} {','.join(topics)}")


def _execute_moves(
    admin: Any, wanted: dict[tuple[int, str, int], str], timeout_ms: int, echo: Any
) -> dict[tuple[int, str, int], int]:
    """AlterReplicaLogDirs for each replica, retried while REPLICA_NOT_AVAILABLE (9): a replica that
    moves to a new broker exists there only once the controller committed the reassignment and the
    broker applied it (Kafka's executeMoves). Returns each replica's last error code."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(wanted)
    codes: dict[tuple[int, str, int], int] = {}
    waiting_shown: set[tuple[int, str, int]] = set()
    while True:
        results = admin.alter_replica_log_dirs(pending)
        for key, code in sorted(results.items()):
            codes[key] = code
            b, t, p = key
            if code == 0:
                echo(f"Successfully started moving log directory to {pending[key]} for replica {t}-{p} with broker {b} ")
                del pending[key]
            elif code == 9 and key not in waiting_shown:
                echo(f"Waiting for replica {t}-{p}-{b} to exist on broker {b}...")
                waiting_shown.add(key)
            elif code != 9:
                del pending[key]  # refused for good (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, ...)
        if not pending:
            return codes
        if time.monotonic() >= deadline:
            raise CliError(
                f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be started for: "
                + ",".join(f"{t}-{p}-{b}" for b, t, p in sorted(pending))
            )
        time.sleep(0.1)


def _verify(
    admin: Any,
    targets: dict[tuple[str, int], list[int]],
    current: dict[tuple[str, int], list[int]],
    wanted: dict[tuple[int, str, int], str],
    *,
    preserve_throttles: bool,
    as_json: bool,
) -> None:
    ongoing = admin.list_partition_reassignments(sorted(targets))
    progress = adding_progress(admin, ongoing)
    parts: dict[tuple[str, int], str] = {}
    for key, target in sorted(targets.items()):
        if key in ongoing:
            parts[key] = "in progress"
        elif current[key] == target:
            parts[key] = "completed"
        else:
            parts[key] = "other replicas"
    moves = log_dir_status(admin, wanted)
    done = all(s != "in progress" for s in parts.values()) and all(s == "completed" for s in moves.values())
    removed = False
    cleared: list[str] = []
    if done and not preserve_throttles:
        _clear_throttles(admin, sorted({t for t, _ in targets}), cleared.append)
        removed = True
    data = {
        "complete": done,
        "throttle_removed": removed,
        "partitions": [
            {"topic": t, "partition": p, "target": targets[(t, p)], "replicas": current[(t, p)], "status": s,
             "adding": progress.get((t, p), [])}
            for (t, p), s in sorted(parts.items())
        ],
        "replicas": [{"broker": b, "topic": t, "partition": p, "log_dir": wanted[(b, t, p)], "status": s}
                     for (b, t, p), s in sorted(moves.items())],
    }

    def render(con: Any) -> None:
        # Kafka's lines, then a table of what is still moving.
        con.print("Status of partition reassignment:")
        for (t, p), s in sorted(parts.items()):
            if s == "completed":
                con.print(f"Reassignment of partition {_tp(t, p)} is completed.")
            elif s == "in progress":
                con.print(f"Reassignment of partition {_tp(t, p)} is still in progress.")
            else:
                con.print(f"There is no active reassignment of partition {_tp(t, p)}, but replica set is "
                          f"{','.join(map(str, current[(t, p)]))} rather than {','.join(map(str, targets[(t, p)]))}.")
        if progress:
            con.print(table("Adding replicas", ["Partition", "Broker", "Size", "OffsetLag"],
                            [(_tp(t, p), r["broker"], r["size"], r["offset_lag"])
                             for (t, p), rows in sorted(progress.items()) for r in rows]))
        if moves:
            con.print("\nStatus of log dir moves:")
            for (b, t, p), s in sorted(moves.items()):
                if s == "completed":
                    con.print(f"Reassignment of replica {t}-{p}-{b} completed successfully.")
                elif s == "in progress":
                    con.print(f"Reassignment of replica {t}-{p}-{b} is still in progress.")
                else:
                    con.print(f"Partition {t}-{p} on broker {b} is not being moved from log dir "
                              f"{s} to {wanted[(b, t, p)]}.")
        for line in cleared:
            con.print(line)

    emit(as_json, data, render)


def _cancel(admin: Any, targets: dict[tuple[str, int], list[int]], *, preserve_throttles: bool, as_json: bool) -> None:
    try:
        cancelled = cancel_reassignments(admin, sorted(targets))
    except OperationError as e:
        raise CliError(str(e)) from None
    cleared: list[str] = []
    if not preserve_throttles:
        _clear_throttles(admin, sorted({t for t, _ in targets}), cleared.append)

    def render(con: Any) -> None:
        if cancelled:
            con.print(f"Successfully cancelled partition reassignment{'' if len(cancelled) == 1 else 's'} for: "
                      + ",".join(_tp(t, p) for t, p in cancelled))
        else:
            con.print("None of the specified partition reassignments are active.")
        for line in cleared:
            con.print(line)

    emit(as_json, {"cancelled": [{"topic": t, "partition": p} for t, p in cancelled]}, render)
