"""`kavka groups`: list, describe, delete and reset-offsets of consumer groups (like kafka-consumer-groups.sh).

describe shows, per partition the group has committed or is assigned,
CURRENT-OFFSET (committed), LOG-END-OFFSET (the high watermark), LAG and the
owning member (CONSUMER-ID, HOST, CLIENT-ID), as kafka-consumer-groups.sh
--describe does; `--members` lists the members instead. reset-offsets is a
dry run unless `--execute` is given, and, as in Kafka, only resets a group
with no active members (Empty or Dead): an active member would overwrite the
reset with its next commit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from kavka.cli.common import CliError, admin_client, bootstrap_option, emit, json_option, table

INACTIVE_STATES = ("Empty", "Dead")


@click.group(name="groups")
def groups() -> None:
    """List, describe, delete and reset consumer groups (like kafka-consumer-groups.sh)."""


@groups.command(name="list")
@bootstrap_option
@click.option("--state", "states", multiple=True, help="Only groups in this state (repeatable), e.g. Stable, Empty.")
@json_option
def list_(bootstrap: str, states: tuple[str, ...], as_json: bool) -> None:
    """List consumer groups."""
    with admin_client(bootstrap) as admin:
        listing = admin.list_groups(states)
    data = [{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in listing]
    emit(
        as_json,
        data,
        lambda con: con.print(table(None, ["GROUP", "STATE", "PROTOCOL-TYPE"], [(g.group_id, g.state, g.protocol_type) for g in listing])),
    )


def describe_data(admin: Any, group: str) -> dict[str, Any]:
    desc = admin.describe_group(group)
    committed = admin.list_group_offsets(group)
    from kavka.coordinator.records import partition_owners

    owner = partition_owners(desc.protocol_type, desc.members)
    tps = sorted(set(committed) | set(owner))
    ends = admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends[tp].offset if tp in ends else None
        m = owner.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": cur,
                "log_end_offset": end,
                "lag": end - cur if cur is not None and end is not None else None,
                "consumer_id": m.member_id if m else None,
                "host": m.client_host if m else None,
                "client_id": m.client_id if m else None,
            }
        )
    return {
        "group": desc.group_id,
        "state": desc.state,
        "protocol_type": desc.protocol_type,
        "protocol": desc.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "partitions": [f"{t}-{p}" for t, p in sorted(tp for tp, o in owner.items() if o is m)],
            }
            for m in desc.members
        ],
        "offsets": rows,
    }


@groups.command(name="describe")
@bootstrap_option
@click.option("--group", "names", multiple=True, required=True, help="Group id (repeatable).")
@click.option("--members", "show_members", is_flag=True, help="Show the members rather than per-partition offsets.")
@json_option
def describe(bootstrap: str, names: tuple[str, ...], show_members: bool, as_json: bool) -> None:
    """Committed offsets, lag and owners per partition; or the members (--members)."""
    with admin_client(bootstrap) as admin:
        data = [describe_data(admin, g) for g in names]

    def render(con: Any) -> None:
        for d in data:
            title = f"Group {d['group']} ({d['state']}, {d['protocol'] or '-'})"
            if show_members:
                con.print(table(title, ["CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                                [(m["member_id"], m["group_instance_id"], m["host"], m["client_id"], len(m["partitions"]),
                                  m["partitions"]) for m in d["members"]]))
            else:
                con.print(table(title, ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
                                [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
                                  r["consumer_id"], r["host"], r["client_id"]) for r in d["offsets"]]))

    emit(as_json, data, render)


@groups.command(name="delete")
@bootstrap_option
@click.option("--group", "names", multiple=True, required=True, help="Group id (repeatable).")
@json_option
def delete(bootstrap: str, names: tuple[str, ...], as_json: bool) -> None:
    """Delete groups that have no members (their committed offsets go too)."""
    from kavka.client.errors import error_name

    with admin_client(bootstrap) as admin:
        results = admin.delete_groups(list(names))
    data = [{"group": g, "deleted": code == 0, "error": None if code == 0 else error_name(code)} for g, code in results.items()]
    emit(as_json, data, lambda con: [con.print(f"Deleted group {d['group']}." if d["deleted"] else f"Group {d['group']}: {d['error']}") for d in data])
    failed = [d for d in data if not d["deleted"]]
    if failed:
        raise CliError(", ".join(f"{d['group']}: {d['error']}" for d in failed))


def _parse_topics(items: tuple[str, ...]) -> list[tuple[str, list[int] | None]]:
    out = []
    for item in items:
        topic, _, parts = item.partition(":")
        if not topic:
            raise click.BadParameter(f"expected TOPIC or TOPIC:P,P..., got {item!r}", param_hint="--topic")
        try:
            out.append((topic, [int(p) for p in parts.split(",")] if parts else None))
        except ValueError:
            raise click.BadParameter(f"partitions must be numbers: {item!r}", param_hint="--topic") from None
    return out


def _timestamp_ms(text: str) -> int:
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"not an ISO-8601 date-time: {text!r}", param_hint="--to-datetime") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


@groups.command(name="reset-offsets")
@bootstrap_option
@click.option("--group", required=True, help="Group id.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]", help="Topic, optionally with partitions (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to the log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), help="Reset to this offset (clamped to the log's range).")
@click.option("--to-datetime", metavar="ISO-8601", help="Reset to the first offset at or after this time (UTC if no zone).")
@click.option("--execute", is_flag=True, help="Commit the new offsets (without it: a dry run).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@json_option
def reset_offsets(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    execute: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Reset a group's committed offsets (dry run unless --execute)."""
    specs = [s for s, on in (("earliest", to_earliest), ("latest", to_latest), ("offset", to_offset is not None), ("datetime", to_datetime)) if on]
    if len(specs) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    with admin_client(bootstrap) as admin:
        desc = admin.describe_group(group)
        if execute and desc.state not in INACTIVE_STATES:
            raise CliError(
                f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {desc.state}."
            )
        committed = admin.list_group_offsets(group)
        if all_topics:
            tps = sorted(committed)
        else:
            tps = []
            described = {t.name: t for t in admin.describe_topics(sorted({t for t, _ in _parse_topics(topics)}))}
            for topic, parts in _parse_topics(topics):
                have = [p.partition for p in described[topic].partitions]
                tps.extend((topic, p) for p in (parts if parts is not None else have))
        if not tps:
            raise CliError(f"group {group} has no partitions to reset")
        earliest = admin.list_offsets(dict.fromkeys(tps, "earliest"))
        latest = admin.list_offsets(dict.fromkeys(tps, "latest"))
        if to_datetime is not None:
            ts = _timestamp_ms(to_datetime)
            by_time = admin.list_offsets(dict.fromkeys(tps, ts))
        new: dict[tuple[str, int], int] = {}
        for tp in tps:
            lo, hi = earliest[tp].offset, latest[tp].offset
            if to_earliest:
                new[tp] = lo
            elif to_latest:
                new[tp] = hi
            elif to_offset is not None:
                new[tp] = min(max(to_offset, lo), hi)
            else:
                found = by_time[tp].offset
                new[tp] = hi if found < 0 else found
        if execute:
            admin.alter_group_offsets(group, new)
    data = {
        "group": group,
        "executed": execute,
        "offsets": [
            {"topic": t, "partition": p, "current_offset": committed.get((t, p)), "new_offset": o}
            for (t, p), o in sorted(new.items())
        ],
    }

    def render(con: Any) -> None:
        con.print(table(None, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                        [(group, r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in data["offsets"]]))
        if not execute:
            con.print("Dry run: nothing committed (use --execute to reset).")

    emit(as_json, data, render)
