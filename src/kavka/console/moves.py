"""What the console's operating pages show and do: disks (moves between log dirs, KIP-113; the
disk balancer; the move throttle; failed dirs, KIP-112/858), reassignments (KIP-455: the
minimal-move planner's proposal, executed with a KIP-73 throttle, watched, cancelled) and leader
elections (preferred and unclean, KIP-460).

The operations themselves are `kavka.operations`, which the `kavka` CLI runs too; this module
parses what the user typed (a readable `UserError`, never a traceback) and shapes the cluster's
answers for the templates. Every function takes a connected `AdminClient`; its caller holds
`Backend.lock`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kavka.client.admin import AdminClient
from kavka.client.errors import error_name
from kavka.common import ElectionType
from kavka.console.views import UserError, describe_topic, parse_int
from kavka.operations import (
    BROKER_THROTTLES,
    THROTTLE_KEY,
    TOPIC_THROTTLES,
    BalancePlan,
    OperationError,
    PlannedMove,
    adding_progress,
    balance_plan,
    cancel_reassignments,
    clear_throttles,
    execute_balance,
    is_remote_entry,
    rebalance_proposal,
    start_reassignment,
)

ELECTION_NOT_NEEDED = 84


def _refused(e: OperationError) -> UserError:
    return UserError(str(e), 409)


# ---------------------------------------------------------------------- disks


def _broker_throttles(admin: AdminClient, brokers: list[int]) -> dict[int, dict[str, str]]:
    """The dynamic throttles set on each broker (empty where none is)."""
    out: dict[int, dict[str, str]] = {}
    for b in brokers:
        entries = admin.describe_configs("broker", str(b), include_documentation=False, keys=list(BROKER_THROTTLES))
        out[b] = {e.name: e.value for e in entries if e.value and e.source == "DYNAMIC_BROKER_CONFIG"}
    return out


def disks(admin: AdminClient) -> dict[str, Any]:
    """Every log dir of every broker, the moves into each with their progress, each broker's move
    throttle, and the replicas a failed dir took offline with who leads their partitions now."""
    described = {b: [ld for ld in dirs if not is_remote_entry(ld.path)] for b, dirs in admin.describe_log_dirs().items()}
    rows = []
    for broker, dirs in sorted(described.items()):
        current = {(r.topic, r.partition): (ld.path, r.size) for ld in dirs for r in ld.replicas if not r.is_future}
        for ld in dirs:
            used = sum(r.size for r in ld.replicas if not r.is_future)
            moves = []
            for r in ld.replicas:
                if not r.is_future:
                    continue
                source, source_size = current.get((r.topic, r.partition), (None, 0))
                pct = min(100, round(100 * r.size / source_size)) if source_size > 0 else (100 if r.offset_lag == 0 else 0)
                moves.append({"replica": f"{r.topic}-{r.partition}", "topic": r.topic, "partition": r.partition,
                              "from": source, "size": r.size, "of": source_size, "lag": r.offset_lag, "pct": pct})
            rows.append({
                "broker": broker, "path": ld.path,
                "state": "online" if ld.error_code == 0 else "offline",
                "error": error_name(ld.error_code) if ld.error_code else None,
                "total": ld.total_bytes, "usable": ld.usable_bytes,
                "used_pct": round(100 * (ld.total_bytes - ld.usable_bytes) / ld.total_bytes) if ld.total_bytes > 0 else None,
                "replica_bytes": used,
                "replicas": sorted(f"{r.topic}-{r.partition}" for r in ld.replicas if not r.is_future),
                "moves": moves,
            })
    brokers = sorted(described)
    throttles = _broker_throttles(admin, brokers)
    # KIP-112/858: a failed dir's replicas are offline on their broker, and the controller moved
    # the leadership of their partitions to another in-sync replica (DescribeLogDirs lists no
    # replicas for an offline dir, so they come from Metadata's offline_replicas).
    offline: dict[int, list[dict[str, Any]]] = {}
    if any(r["error"] for r in rows):
        names = [t.name for t in admin.list_topics(include_internal=True)]
        for d in admin.describe_topics(names) if names else []:
            for p in d.partitions:
                for b in p.offline_replicas:
                    offline.setdefault(b, []).append({"replica": f"{d.name}-{p.partition}", "topic": d.name,
                                                      "partition": p.partition, "leader": p.leader})
    return {
        "dirs": rows,
        "brokers": brokers,
        "paths": {b: [ld.path for ld in described[b] if ld.error_code == 0] for b in brokers},
        "throttles": {b: throttles[b].get(THROTTLE_KEY) for b in brokers},
        "offline": offline,
        "moving": any(r["moves"] for r in rows),
    }


@dataclass(frozen=True)
class DirMove:
    broker: int
    topic: str
    partition: int
    source: str
    destination: str


def plan_dir_move(admin: AdminClient, form: Any) -> DirMove:
    """A move of one replica to another log dir of its broker, checked against DescribeLogDirs."""
    broker = parse_int(form.get("broker", ""), "broker", minimum=0)
    topic = str(form.get("topic", "")).strip()
    if not topic:
        raise UserError("Name the topic of the replica to move.")
    partition = parse_int(form.get("partition", ""), "partition", minimum=0)
    destination = str(form.get("dir", "")).strip()
    described = {b: [ld for ld in dirs if not is_remote_entry(ld.path)] for b, dirs in admin.describe_log_dirs().items()}
    if broker not in described:
        raise UserError(f"There is no broker {broker} (brokers: {', '.join(map(str, sorted(described)))}).", 404)
    describe_topic(admin, topic)
    dirs = described[broker]
    target = next((ld for ld in dirs if ld.path == destination), None)
    if target is None:
        raise UserError(f"Broker {broker} has no log dir {destination!r} (its dirs: {', '.join(ld.path for ld in dirs)}).")
    if target.error_code:
        raise UserError(f"Log dir {destination} of broker {broker} is offline ({error_name(target.error_code)}).", 409)
    source = next((ld.path for ld in dirs for r in ld.replicas
                   if (r.topic, r.partition) == (topic, partition) and not r.is_future), None)
    if source is None:
        raise UserError(f"Broker {broker} holds no replica of {topic}-{partition}.", 404)
    if destination == source:
        raise UserError(f"{topic}-{partition} is already in {destination} on broker {broker}.")
    return DirMove(broker, topic, partition, source, destination)


def execute_dir_move(admin: AdminClient, move: DirMove) -> None:
    key = (move.broker, move.topic, move.partition)
    code = admin.alter_replica_log_dirs({key: move.destination}).get(key, 0)
    if code:
        raise UserError(f"Broker {move.broker} refused to move {move.topic}-{move.partition}: {error_name(code)}.", 409)


def parse_throttle(form: Any) -> tuple[int, int | None]:
    """(broker, bytes per second or None to remove the throttle)."""
    broker = parse_int(form.get("broker", ""), "broker", minimum=0)
    text = str(form.get("rate", "")).strip()
    return broker, parse_int(text, "throttle (bytes per second)", minimum=1) if text else None


def set_move_throttle(admin: AdminClient, broker: int, rate: int | None) -> None:
    if rate is None:
        admin.incremental_alter_configs("broker", str(broker), delete=[THROTTLE_KEY])
    else:
        admin.incremental_alter_configs("broker", str(broker), set={THROTTLE_KEY: str(rate)})


def plan_disk_balance(admin: AdminClient, broker: int) -> BalancePlan:
    try:
        return balance_plan(admin, broker)
    except OperationError as e:
        raise _refused(e) from None


def reviewed_balance(broker: int, form: Any) -> BalancePlan:
    """The plan the user reviewed, from the confirm form's `move` fields (topic, partition, size,
    from, to), so exactly what was shown is executed."""
    moves = []
    for line in form.getlist("move"):
        try:
            topic, partition, size, source, destination = str(line).split("\t")
            moves.append(PlannedMove(topic, int(partition), int(size), source, destination))
        except ValueError:
            raise UserError(f"A planned move is malformed: {line!r}.") from None
    return BalancePlan(broker, tuple(moves), {}, {})


def execute_disk_balance(admin: AdminClient, plan: BalancePlan) -> None:
    codes = execute_balance(admin, plan)
    failed = {k: c for k, c in codes.items() if c}
    if failed:
        raise UserError("Moves refused: " + ", ".join(f"{t}-{p} ({error_name(c)})" for (_, t, p), c in sorted(failed.items())), 409)


# ---------------------------------------------------------------------- reassignments


def parse_ids(text: Any, what: str) -> list[int]:
    ids = []
    for part in str(text or "").replace(" ", ",").split(","):
        if part.strip():
            ids.append(parse_int(part, what, minimum=0))
    if len(set(ids)) != len(ids):
        raise UserError(f"The {what} lists a broker twice: {text!r}.")
    return ids


def reassignments(admin: AdminClient) -> dict[str, Any]:
    """The reassignments in progress, each adding replica's size against the leader's, and the
    throttles a reassignment left on brokers and topics."""
    ongoing = admin.list_partition_reassignments()
    progress = adding_progress(admin, ongoing)
    leader_size: dict[tuple[str, int], int] = {}
    if ongoing:
        topics = sorted({t for t, _ in ongoing})
        leaders = {(d.name, p.partition): p.leader for d in admin.describe_topics(topics) for p in d.partitions}
        for b, dirs in admin.describe_log_dirs(sorted({lb for lb in leaders.values() if lb >= 0}), topics).items():
            for ld in dirs:
                for r in ld.replicas:
                    if not r.is_future and leaders.get((r.topic, r.partition)) == b:
                        leader_size[(r.topic, r.partition)] = r.size
    rows = []
    for (t, p), (replicas, adding, removing) in sorted(ongoing.items()):
        of = leader_size.get((t, p), 0)
        rows.append({"topic": t, "partition": p, "replicas": list(replicas), "adding": list(adding),
                     "removing": list(removing),
                     "progress": [{**a, "of": of, "pct": min(100, round(100 * (a["size"] or 0) / of)) if of else 0}
                                  for a in progress.get((t, p), [])]})
    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers if not b.fenced)
    broker_throttles = {b: v for b, v in _broker_throttles(admin, brokers).items()
                        if any(k in v for k in BROKER_THROTTLES[:2])}
    return {"rows": rows, "throttled_brokers": broker_throttles}


@dataclass(frozen=True)
class ReassignmentPlan:
    """Targets to send, the replicas now, and what the review page shows."""

    targets: dict[tuple[str, int], list[int]]
    current: dict[tuple[str, int], list[int]]
    throttle: int | None
    moved_replicas: int = 0
    moved_bytes: int = 0
    replicas: int = 0
    brokers: tuple[int, ...] = ()


def _throttle(form: Any) -> int | None:
    text = str(form.get("throttle", "")).strip()
    return parse_int(text, "throttle (bytes per second)", minimum=1) if text else None


def plan_rebalance(admin: AdminClient, form: Any) -> ReassignmentPlan:
    """The minimal-move planner's proposal for the named topics (all when empty) over the brokers
    holding them plus the added minus the removed (`kavka cluster rebalance`)."""
    topics = [t.strip() for t in str(form.get("topics", "")).split(",") if t.strip()] or None
    added = parse_ids(form.get("add", ""), "brokers to add")
    removed = parse_ids(form.get("remove", ""), "brokers to remove")
    throttle = _throttle(form)
    try:
        p = rebalance_proposal(admin, added, removed, topics)
    except OperationError as e:
        raise UserError(str(e), 404 if e.missing else 409) from None
    return ReassignmentPlan(p.changed, {k: p.current[k] for k in p.changed}, throttle, p.moved_replicas,
                            p.moved_bytes, p.replicas, tuple(p.brokers))


def plan_partition_move(admin: AdminClient, form: Any) -> ReassignmentPlan:
    """One partition to the replicas the user typed (the first is the preferred leader)."""
    topic = str(form.get("topic", "")).strip()
    partition = parse_int(form.get("partition", ""), "partition", minimum=0)
    replicas = parse_ids(form.get("replicas", ""), "replicas")
    if not replicas:
        raise UserError("Name the replicas (broker ids, the preferred leader first).")
    d = describe_topic(admin, topic)
    now = {p.partition: list(p.replicas) for p in d.partitions}
    if partition not in now:
        raise UserError(f"Topic '{topic}' has no partition {partition} (it has {len(now)}).", 404)
    live = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted(set(replicas) - live)
    if unknown:
        raise UserError(f"Unknown broker id(s) {','.join(map(str, unknown))} (brokers: {', '.join(map(str, sorted(live)))}).", 404)
    return ReassignmentPlan({(topic, partition): replicas}, {(topic, partition): now[partition]}, _throttle(form))


def reviewed_targets(admin: AdminClient, form: Any) -> ReassignmentPlan:
    """The targets the user reviewed, from the confirm form's `target` fields (topic, partition,
    replicas), with the replicas they have now."""
    targets: dict[tuple[str, int], list[int]] = {}
    for line in form.getlist("target"):
        try:
            topic, partition, replicas = str(line).split("\t")
            targets[(topic, int(partition))] = [int(b) for b in replicas.split(",")]
        except ValueError:
            raise UserError(f"A planned partition is malformed: {line!r}.") from None
    if not targets:
        raise UserError("The plan moves nothing.")
    names = sorted({t for t, _ in targets})
    known = {t.name for t in admin.list_topics(include_internal=True)}
    missing = [n for n in names if n not in known]
    if missing:
        raise UserError(f"Topic '{missing[0]}' does not exist.", 404)
    current = {(d.name, p.partition): list(p.replicas) for d in admin.describe_topics(names) for p in d.partitions}
    gone = [k for k in targets if k not in current]
    if gone:
        raise UserError(f"Topic '{gone[0][0]}' has no partition {gone[0][1]}.", 404)
    return ReassignmentPlan(targets, {k: current[k] for k in targets}, _throttle(form))


def execute_reassignment(admin: AdminClient, plan: ReassignmentPlan, *, additional: bool) -> None:
    try:
        start_reassignment(admin, plan.targets, plan.current, throttle=plan.throttle, additional=additional)
    except OperationError as e:
        # Kafka's tool's words name its flag; here it is the form's box.
        raise UserError(str(e).replace("  Use --additional", ' Tick "while others run"'), 404 if e.missing else 409) from None


def cancel(admin: AdminClient, form: Any) -> list[tuple[str, int]]:
    """Cancel the listed reassignments (`topic-partition` fields `tp`; none: all in progress);
    the throttles are cleared too, as `kavka reassign-partitions --cancel` does."""
    wanted = []
    for item in form.getlist("tp"):
        topic, sep, partition = str(item).rpartition("-")
        if not sep:
            raise UserError(f"Not a topic-partition: {item!r}.")
        wanted.append((topic, parse_int(partition, "partition", minimum=0)))
    if not wanted:
        wanted = sorted(admin.list_partition_reassignments())
    try:
        cancelled = cancel_reassignments(admin, wanted)
    except OperationError as e:
        raise _refused(e) from None
    clear_throttles(admin, sorted({t for t, _ in wanted}))
    return cancelled


def clear_reassignment_throttles(admin: AdminClient) -> None:
    """Kafka's --verify clears the throttles once a reassignment is done: here on request, once
    nothing moves any more (on every topic that carries one)."""
    if admin.list_partition_reassignments():
        raise UserError("Reassignments are still in progress: their throttles stay until they finish.", 409)
    topics = []
    for t in admin.list_topics(include_internal=True):
        entries = admin.describe_configs("topic", t.name, include_documentation=False, keys=list(TOPIC_THROTTLES))
        if any(e.value and e.source == "DYNAMIC_TOPIC_CONFIG" for e in entries):
            topics.append(t.name)
    clear_throttles(admin, topics)


# ---------------------------------------------------------------------- elections

ELECTIONS = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}


def plan_election(admin: AdminClient, name: str, form: Any) -> tuple[str, list[tuple[str, int]]]:
    kind = str(form.get("type", ""))
    if kind not in ELECTIONS:
        raise UserError(f"Unknown election type {kind!r}: preferred or unclean.")
    d = describe_topic(admin, name)
    text = str(form.get("partition", "")).strip()
    if not text or text == "all":
        return kind, [(name, p.partition) for p in d.partitions]
    partition = parse_int(text, "partition", minimum=0)
    if partition not in {p.partition for p in d.partitions}:
        raise UserError(f"Topic '{name}' has no partition {partition} (it has {len(d.partitions)}).", 404)
    return kind, [(name, partition)]


def elect(admin: AdminClient, kind: str, partitions: list[tuple[str, int]]) -> str:
    """ElectLeaders; Kafka's three outcomes as one line for the page."""
    results = admin.elect_leaders(ELECTIONS[kind], partitions)
    done = [f"{t}-{p}" for (t, p), (c, _) in sorted(results.items()) if c == 0]
    noop = [f"{t}-{p}" for (t, p), (c, _) in sorted(results.items()) if c == ELECTION_NOT_NEEDED]
    failed = [f"{t}-{p}: {error_name(c)}" + (f" ({m})" if m else "")
              for (t, p), (c, m) in sorted(results.items()) if c not in (0, ELECTION_NOT_NEEDED)]
    parts = []
    if done:
        parts.append(f"{kind} leader elected for {', '.join(done)}")
    if noop:
        parts.append(f"valid leader already elected for {', '.join(noop)}")
    if failed:
        parts.append(f"failed for {'; '.join(failed)}")
    return "; ".join(parts) or "no partition needed an election"
