"""`kavka log-dirs`: describe a broker's log dirs (like kafka-log-dirs.sh) and balance bytes across them.

``describe --json`` prints kafka-log-dirs.sh's JSON
(``{"version":1,"brokers":[{"broker":N,"logDirs":[{"logDir","error","partitions":[{"partition":"t-0",
"size","offsetLag","isFuture"}]}]}]}``) plus ``totalBytes`` / ``usableBytes`` per dir
(DescribeLogDirs v4). ``balance`` plans moves that even out bytes across one
broker's online dirs (Kafka has no disk balancer; KIP-178 never shipped), shows
the plan and the bytes per dir before and after, and sends it as
AlterReplicaLogDirs only with ``--execute``; the plan is `kavka.operations.plan_balance`
(pure), which the console's Disks page shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from kavka.cli.common import (
    CliError,
    admin_client,
    bootstrap_option,
    emit,
    json_option,
    split_names,
    table,
)
from kavka.operations import OperationError, balance_plan, execute_balance

# DescribeLogDirs error code -> the exception class kafka-log-dirs.sh prints.
ERROR_CLASSES = {
    56: "org.apache.kafka.common.errors.KafkaStorageException",
    57: "org.apache.kafka.common.errors.LogDirNotFoundException",
}


@click.group(name="log-dirs")
def log_dirs() -> None:
    """Describe log dirs and balance bytes across them (JBOD)."""


def describe_json(described: Mapping[int, Sequence[Any]]) -> dict[str, Any]:
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": d.path,
                        "error": ERROR_CLASSES.get(d.error_code, f"error {d.error_code}") if d.error_code else None,
                        "partitions": [
                            {
                                "partition": f"{r.topic}-{r.partition}",
                                "size": r.size,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            }
                            for r in d.replicas
                        ],
                        "totalBytes": d.total_bytes,
                        "usableBytes": d.usable_bytes,
                    }
                    for d in dirs
                ],
            }
            for broker, dirs in sorted(described.items())
        ],
    }


def _broker_ids(items: Sequence[str]) -> list[int] | None:
    names = split_names(items)
    if not names:
        return None
    try:
        return [int(n) for n in names]
    except ValueError:
        raise click.BadParameter("broker ids are integers", param_hint="--broker-list") from None


@log_dirs.command(name="describe")
@bootstrap_option
@click.option("--broker-list", "brokers", multiple=True, metavar="1,2", help="Brokers to ask (default: all).")
@click.option("--topic-list", "topics", multiple=True, metavar="T1,T2", help="Only these topics.")
@json_option
def describe(bootstrap: str, brokers: tuple[str, ...], topics: tuple[str, ...], as_json: bool) -> None:
    """Every log dir of each broker: error, size, free space and replicas."""
    with admin_client(bootstrap) as admin:
        described = admin.describe_log_dirs(_broker_ids(brokers), split_names(topics) or None)
    data = describe_json(described)

    def render(con: Any) -> None:
        for b in data["brokers"]:
            rows = [
                (d["logDir"], d["error"] or "online", d["totalBytes"], d["usableBytes"], len(d["partitions"]),
                 sum(p["size"] for p in d["partitions"]))
                for d in b["logDirs"]
            ]
            con.print(table(f"Broker {b['broker']} log dirs", ["LogDir", "State", "TotalBytes", "UsableBytes", "Replicas", "ReplicaBytes"], rows))
            reps = [
                (p["partition"], d["logDir"], p["size"], p["offsetLag"], p["isFuture"])
                for d in b["logDirs"]
                for p in d["partitions"]
            ]
            if reps:
                con.print(table(None, ["Partition", "LogDir", "Size", "OffsetLag", "IsFuture"], reps))

    emit(as_json, data, render)


@log_dirs.command(name="balance")
@bootstrap_option
@click.option("--broker", "broker_id", required=True, type=int, help="The broker whose dirs to balance.")
@click.option("--execute", is_flag=True, help="Start the moves (default: only show the plan).")
@json_option
def balance(bootstrap: str, broker_id: int, execute: bool, as_json: bool) -> None:
    """Plan (and with --execute start) moves that even out bytes across a broker's log dirs."""
    with admin_client(bootstrap) as admin:
        try:
            plan = balance_plan(admin, broker_id)
        except OperationError as e:
            raise CliError(str(e)) from None
        moves, before, after = list(plan.moves), plan.before, plan.after
        results = execute_balance(admin, plan) if execute else {}
    data = {
        "broker": broker_id,
        "executed": execute,
        "moves": [
            {
                "partition": f"{m.topic}-{m.partition}",
                "size": m.size,
                "from": m.source,
                "to": m.destination,
                **({"error_code": results.get((broker_id, m.topic, m.partition))} if execute else {}),
            }
            for m in moves
        ],
        "bytes_before": before,
        "bytes_after": after,
    }
    failed = [m for m in data["moves"] if m.get("error_code")]

    def render(con: Any) -> None:
        if not moves:
            con.print(f"Broker {broker_id}: the log dirs are as even as single moves can make them; nothing to do.")
        else:
            con.print(table(f"Planned moves on broker {broker_id}", ["Partition", "Size", "From", "To"],
                            [(m.topic + f"-{m.partition}", m.size, m.source, m.destination) for m in moves]))
        con.print(table("Bytes per log dir", ["LogDir", "Before", "After"], [(p, before[p], after[p]) for p in before]))
        if moves and not execute:
            con.print("Nothing moved: run again with --execute to start these moves.")
        elif moves:
            con.print(f"Started {len(moves) - len(failed)} moves; follow them with `kavka log-dirs describe`.")

    emit(as_json, data, render)
    if failed:
        raise CliError(f"{len(failed)} moves were refused: " + ", ".join(f"{m['partition']} (error {m['error_code']})" for m in failed))
