"""`kavka cluster rebalance`: grow or shrink the cluster with few replica moves (issue 13, item 4).

Reads the current assignment of every topic (internal ones included) and the brokers' racks, plans
with `controller.rebalance.plan_rebalance` over (brokers holding replicas + `--add-brokers`) -
`--remove-brokers`, and prints the moves: a table, or with `--json` Kafka's reassignment JSON of the
partitions that change (usable as `reassign-partitions --reassignment-json-file`) with a `kavka_plan`
summary. The summary compares the plan with a full re-placement of every partition by the cluster's
placer over the same brokers (CreateReplicaPlacement: what `reassign-partitions --generate` proposes).
`--execute` starts it (AlterPartitionReassignments, `--throttle` as reassign-partitions sets it);
follow it with `kavka reassign-partitions --verify` on the JSON. Partition sizes come from
DescribeLogDirs (the largest replica), so the smallest partitions move first.
"""

from __future__ import annotations

from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table


def _ids(text: str | None, option: str) -> list[int]:
    if not text:
        return []
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise click.BadParameter("a comma-separated list of broker ids", param_hint=option) from None


@click.command(name="rebalance")
@bootstrap_option
@click.option("--add-brokers", "add", default=None, metavar="4,5", help="Brokers to move replicas onto.")
@click.option("--remove-brokers", "remove", default=None, metavar="3", help="Brokers to move every replica off.")
@click.option("--execute", is_flag=True, help="Start the moves (else only print the plan).")
@click.option("--throttle", type=click.IntRange(min=1), default=None, help="Replication throttle in B/s while moving (with --execute).")
@json_option
def rebalance(bootstrap: str, add: str | None, remove: str | None, execute: bool, throttle: int | None, as_json: bool) -> None:
    """Plan (and start) the fewest replica moves that balance replicas and leaders over the brokers."""
    from kavka.cli.reassign import reassignment_json
    from kavka.operations import OperationError, rebalance_proposal, start_reassignment

    added, removed = _ids(add, "--add-brokers"), _ids(remove, "--remove-brokers")
    if throttle is not None and not execute:
        raise click.UsageError("--throttle needs --execute")
    with admin_client(bootstrap) as admin:
        try:
            proposal = rebalance_proposal(admin, added, removed)
        except OperationError as e:
            raise CliError(str(e)) from None
        brokers, current, changed = proposal.brokers, proposal.current, proposal.changed
        # What a full re-placement by the cluster's placer would move (kafka-reassign-partitions --generate).
        described = admin.describe_topics(sorted({t for t, _ in current})) if current else []
        reshuffle = 0
        for d in described:
            parts = sorted(d.partitions, key=lambda p: p.partition)
            if not parts:
                continue
            fresh = admin.create_replica_placement(len(parts), len(parts[0].replicas), node_ids=brokers)
            reshuffle += sum(len(set(f) - set(p.replicas)) for f, p in zip(fresh, parts, strict=True))
        summary = {
            "brokers": brokers,
            "partitions": len(current),
            "replicas": proposal.replicas,
            "moved_replicas": proposal.moved_replicas,
            "moved_bytes": proposal.moved_bytes,
            "reordered_partitions": proposal.reordered_partitions,
            "full_replacement_moved_replicas": reshuffle,
            "executed": False,
        }
        if execute and changed:
            try:
                start_reassignment(admin, changed, current, throttle=throttle)
            except OperationError as e:
                raise CliError(str(e)) from None
            summary["executed"] = True
    doc = reassignment_json(changed)
    doc["kavka_plan"] = summary

    def render(con: Any) -> None:
        con.print(table(f"Rebalance over brokers {','.join(map(str, brokers))}", ["Partition", "Current", "Proposed"],
                        [(f"{t}-{p}", ",".join(map(str, current[(t, p)])), ",".join(map(str, r)))
                         for (t, p), r in sorted(changed.items())]))
        con.print(f"Moves {proposal.moved_replicas} of {summary['replicas']} replicas ({proposal.moved_bytes} bytes); "
                  f"{summary['reordered_partitions']} partitions only change their preferred leader. "
                  f"A full re-placement by the cluster's placer would move {reshuffle} replicas.")
        if summary["executed"]:
            con.print(f"Successfully started partition reassignment{'' if len(changed) == 1 else 's'} for "
                      + ",".join(f"{t}-{p}" for t, p in sorted(changed)))
            con.print("Save the plan with --json and run kavka reassign-partitions --verify with it until it completes.")
        elif not changed:
            con.print("The cluster is balanced: nothing to move.")

    emit(as_json, doc, render)
