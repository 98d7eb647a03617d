"""`kavka topics`: create, list, describe, alter and delete topics (like kafka-topics.sh).

Describe shows what kafka-topics.sh shows: per topic Topic, TopicId,
PartitionCount, ReplicationFactor and Configs (every config not at its default,
as ``ConfigEntry.isDefault()`` decides); per partition Leader, Replicas, Isr.
"""

from __future__ import annotations

from typing import Any

import click

from kavka.cli.common import (
    CliError,
    admin_client,
    bootstrap_option,
    emit,
    json_option,
    parse_key_values,
    table,
)


@click.group(name="topics")
def topics() -> None:
    """Create, list, describe, alter and delete topics (like kafka-topics.sh)."""


@topics.command(name="create")
@bootstrap_option
@click.option("--topic", required=True, help="Topic name.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="Partition count [default: the broker's num.partitions].",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    help="Replicas per partition [default: the broker's default.replication.factor].",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config override (repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
@click.option(
    "--validate-only",
    is_flag=True,
    help="Ask the broker to check the request without creating the topic.",
)
@json_option
def create(
    bootstrap: str,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    validate_only: bool,
    as_json: bool,
) -> None:
    """Create a topic."""
    from kavka.client.admin import NewTopic
    from kavka.client.errors import KafkaError

    cfg = parse_key_values(configs, option="--config")
    new = NewTopic(topic, partitions or -1, replication_factor or -1, cfg)
    with admin_client(bootstrap) as admin:
        try:
            created = admin.create_topics([new], validate_only=validate_only)[0]
        except KafkaError as e:
            if if_not_exists and e.name == "TOPIC_ALREADY_EXISTS":
                data = {
                    "topic": topic,
                    "created": False,
                    "already_exists": True,
                    "validate_only": validate_only,
                }
                emit(as_json, data, lambda con: con.print(f"Topic {topic} already exists."))
                return
            raise
    data = {
        "topic": created.name,
        "topic_id": created.topic_id,
        # < v5 answers do not carry the counts: report what was asked for
        "partitions": created.num_partitions if created.num_partitions >= 0 else partitions,
        "replication_factor": created.replication_factor
        if created.replication_factor >= 0
        else replication_factor,
        "configs": cfg,
        "created": not validate_only,
        "validate_only": validate_only,
    }
    verb = "Validated creation of" if validate_only else "Created"
    emit(as_json, data, lambda con: con.print(f"{verb} topic {created.name}."))


@topics.command(name="list")
@bootstrap_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@json_option
def list_(bootstrap: str, exclude_internal: bool, as_json: bool) -> None:
    """List topics."""
    with admin_client(bootstrap) as admin:
        listing = admin.list_topics(include_internal=not exclude_internal)
    data = [
        {
            "name": t.name,
            "topic_id": t.topic_id,
            "partitions": t.partition_count,
            "internal": t.is_internal,
        }
        for t in listing
    ]
    emit(
        as_json,
        data,
        lambda con: con.print(
            table(
                None,
                ["Topic", "Partitions", "TopicId"],
                [(t.name, t.partition_count, t.topic_id) for t in listing],
            )
        ),
    )


def describe_data(admin: Any, names: list[str] | None) -> list[dict[str, Any]]:
    """The JSON shape of `topics describe` (also what the table is drawn from)."""
    out = []
    for t in admin.describe_topics(names, include_internal=True):
        configs = {
            e.name: e.value for e in admin.describe_configs("topic", t.name) if not e.is_default
        }
        sizes = _tier_sizes(admin, t.name) if configs.get("remote.storage.enable") == "true" else {}
        out.append(
            {
                "topic": t.name,
                "topic_id": t.topic_id,
                "partition_count": len(t.partitions),
                "replication_factor": t.replication_factor,
                "internal": t.is_internal,
                "configs": configs,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                        **({"error": p.error} if p.error else {}),
                        **sizes.get(p.partition, {}),
                    }
                    for p in t.partitions
                ],
            }
        )
    return out


def _tier_sizes(admin: Any, topic: str) -> dict[int, dict[str, int]]:
    """Tiered topics: local and remote bytes per partition, from DescribeLogDirs (the broker lists
    remote bytes under a ``remote:`` entry)."""
    out: dict[int, dict[str, int]] = {}
    for dirs in admin.describe_log_dirs(topics=[topic]).values():
        for d in dirs:
            key = "remote_bytes" if d.path.startswith("remote:") else "local_bytes"
            for r in d.replicas:
                if r.topic == topic and not r.is_future:
                    sizes = out.setdefault(r.partition, {"local_bytes": 0, "remote_bytes": 0})
                    sizes[key] += r.size
    return out


def render_describe(con: Any, data: list[dict[str, Any]]) -> None:
    if not data:
        con.print("No topics.")
    for t in data:
        header = (
            f"[bold]Topic: {t['topic']}[/bold]\tTopicId: {t['topic_id'] or '-'}\t"
            f"PartitionCount: {t['partition_count']}\tReplicationFactor: {t['replication_factor']}\t"
            f"Configs: {','.join(f'{k}={v}' for k, v in t['configs'].items())}"
        )
        con.print(header)
        tiered = any("remote_bytes" in p for p in t["partitions"])
        rows = [
            (p["partition"], p["leader"] if p["leader"] >= 0 else "none", p["replicas"], p["isr"])
            + ((p.get("local_bytes", "-"), p.get("remote_bytes", "-")) if tiered else ())
            for p in t["partitions"]
        ]
        cols = ["Partition", "Leader", "Replicas", "Isr"] + (["LocalBytes", "RemoteBytes"] if tiered else [])
        con.print(table(None, cols, rows))
        con.print()


@topics.command(name="describe")
@bootstrap_option
@click.option(
    "--topic",
    "names",
    multiple=True,
    help="Topic to describe (repeatable); all topics when omitted.",
)
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="Only partitions whose ISR is smaller than their replica set (as kafka-topics.sh).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="Only partitions without a leader (as kafka-topics.sh).")
@json_option
def describe(bootstrap: str, names: tuple[str, ...], under_replicated: bool, unavailable: bool, as_json: bool) -> None:
    """Describe topics: id, partitions, leaders, replicas, ISR and config overrides."""
    with admin_client(bootstrap) as admin:
        data = describe_data(admin, list(names) or None)
    if under_replicated or unavailable:
        data = filter_partitions(data, under_replicated=under_replicated, unavailable=unavailable)
    emit(as_json, data, lambda con: render_describe(con, data))


def filter_partitions(data: list[dict[str, Any]], *, under_replicated: bool, unavailable: bool) -> list[dict[str, Any]]:
    """kafka-topics.sh --describe filters: keep the matching partitions and the topics that have any."""

    def keep(p: dict[str, Any]) -> bool:
        return (under_replicated and len(p["isr"]) < len(p["replicas"])) or (unavailable and p["leader"] < 0)

    out = []
    for t in data:
        parts = [p for p in t["partitions"] if keep(p)]
        if parts:
            out.append({**t, "partitions": parts})
    return out


@topics.command(name="alter")
@bootstrap_option
@click.option("--topic", required=True, help="Topic name.")
@click.option(
    "--partitions", type=click.IntRange(min=1), help="New total partition count (can only grow)."
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a topic config (repeatable).",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="KEY",
    help="Remove a topic config override (repeatable).",
)
@json_option
def alter(
    bootstrap: str,
    topic: str,
    partitions: int | None,
    configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Add partitions to a topic or change its configs."""
    if partitions is None and not configs and not delete_configs:
        raise click.UsageError("nothing to alter: give --partitions, --config or --delete-config")
    to_set = parse_key_values(configs, option="--config")
    to_delete = [k.strip() for k in delete_configs if k.strip()]
    messages = []
    with admin_client(bootstrap) as admin:
        if partitions is not None:
            admin.create_partitions({topic: partitions})
            messages.append(f"Topic {topic} now has {partitions} partitions.")
        if to_set or to_delete:
            admin.incremental_alter_configs("topic", topic, set=to_set, delete=to_delete)
            messages.append(f"Updated configs of topic {topic}.")
    data = {"topic": topic, "partitions": partitions, "set": to_set, "deleted": to_delete}
    emit(as_json, data, lambda con: [con.print(m) for m in messages])


@topics.command(name="delete")
@bootstrap_option
@click.option("--topic", required=True, help="Topic name.")
@click.option("--if-exists", is_flag=True, help="Succeed if the topic does not exist.")
@json_option
def delete(bootstrap: str, topic: str, if_exists: bool, as_json: bool) -> None:
    """Delete a topic."""
    from kavka.client.errors import KafkaError

    with admin_client(bootstrap) as admin:
        try:
            admin.delete_topics([topic])
        except KafkaError as e:
            if if_exists and e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                emit(
                    as_json,
                    {"topic": topic, "deleted": False},
                    lambda con: con.print(f"Topic {topic} does not exist."),
                )
                return
            if e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                raise CliError(f"topic {topic} does not exist") from None
            raise
    emit(
        as_json, {"topic": topic, "deleted": True}, lambda con: con.print(f"Deleted topic {topic}.")
    )
