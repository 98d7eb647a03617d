"""`kavka replica-placement`: ask the cluster's replica placer where a topic's replicas would go.

Sends kavka's CreateReplicaPlacement (api key 1000, KIP-879) to any broker, which forwards it to the
active controller; the configured `broker.replica.placer` answers and nothing is created. Prints a
table (partition, replicas with the preferred leader first) or, with --json,
``{"partitions": [{"partition": 0, "replicas": [1, 2]}, ...]}``.
"""

from __future__ import annotations

from typing import Any

import click

from kavka.cli.common import admin_client, bootstrap_option, emit, json_option, table


def parse_broker_list(text: str | None, *, option: str) -> list[int]:
    """`1,2,3` -> [1, 2, 3]; a clear error naming the option for anything else."""
    if not text:
        return []
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated broker ids, got {text!r}", param_hint=option) from None
    if len(set(ids)) != len(ids):
        raise click.BadParameter(f"duplicate broker id in {text!r}", param_hint=option)
    return ids


@click.command(name="replica-placement")
@bootstrap_option
@click.option("--partitions", "num_partitions", required=True, type=click.IntRange(min=1), help="Partitions to place.")
@click.option("--replication-factor", required=True, type=click.IntRange(min=1, max=32767), help="Replicas per partition.")
@click.option("--force-simple", is_flag=True, help="Use the rack-unaware simple placer instead of the configured one.")
@click.option("--brokers", "brokers", default=None, metavar="1,2,3", help="Place on these brokers only (default: every unfenced broker).")
@json_option
def replica_placement(
    bootstrap: str, num_partitions: int, replication_factor: int, force_simple: bool, brokers: str | None, as_json: bool
) -> None:
    """Where the cluster's replica placer would put a new topic's replicas (creates nothing)."""
    node_ids = parse_broker_list(brokers, option="--brokers")
    with admin_client(bootstrap) as admin:
        out = admin.create_replica_placement(num_partitions, replication_factor, force_simple=force_simple, node_ids=node_ids)
    data = {"partitions": [{"partition": p, "replicas": r} for p, r in enumerate(out)]}

    def render(con: Any) -> None:
        con.print(table(None, ["Partition", "Leader", "Replicas"], [(p, r[0], ",".join(map(str, r))) for p, r in enumerate(out)]))

    emit(as_json, data, render)
