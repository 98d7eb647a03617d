"""Cluster operations over the admin client, shared by the `kavka` CLI and the web console.

What `kavka log-dirs balance`, `kavka reassign-partitions` and `kavka cluster rebalance` do and
the console's Disks and Reassignments pages do too: the disk balancer's plan (`plan_balance`,
pure), the KIP-73 replication throttles a reassignment sets and clears, the progress of adding
replicas and of log-dir moves (DescribeLogDirs), and the minimal-move rebalance plan
(`controller.rebalance.plan_rebalance` over the cluster's current assignment and sizes).

Every function takes a connected, blocking `AdminClient` (its caller owns it: one thread at a
time) and returns values; nothing prints. A refusal the user should read raises
`OperationError` with Kafka's wording where Kafka's tools have one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kavka.controller.rebalance import RebalanceError, plan_rebalance

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"
# KIP-73 replication throttles, as Kafka's tool sets and clears them.
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate", THROTTLE_KEY)
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

TopicPartition = tuple[str, int]
# With tiered storage kavka's DescribeLogDirs adds an entry `remote:<plugin>` with each tiered
# partition's remote bytes (broker.handlers.log_dirs): not a log dir, never a move's destination.
REMOTE_DIR_PREFIX = "remote:"


def is_remote_entry(path: str) -> bool:
    return path.startswith(REMOTE_DIR_PREFIX)


class OperationError(Exception):
    """An operation the cluster's state refuses (an unknown broker, a reassignment already running);
    ``missing`` when it names a broker or topic that does not exist."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


# ---------------------------------------------------------------------- the disk balancer


@dataclass(frozen=True, slots=True)
class PlannedMove:
    topic: str
    partition: int
    size: int
    source: str
    destination: str


def plan_balance(
    dirs: Mapping[str, Sequence[tuple[str, int, int]]], *, max_moves: int = 1000
) -> list[PlannedMove]:
    """Greedy plan: move a replica from the fullest to the emptiest dir while that narrows their gap.

    ``dirs``: dir -> replicas (topic, partition, size). Each move takes the
    replica whose size is closest to half the gap and strictly smaller than
    the gap, so every move lowers the spread and the loop ends.
    """
    load = {d: sum(s for _, _, s in reps) for d, reps in dirs.items()}
    where = {d: list(reps) for d, reps in dirs.items()}
    moves: list[PlannedMove] = []
    moved: set[tuple[str, int]] = set()
    for _ in range(max_moves):
        if len(load) < 2:
            break
        full = max(load, key=lambda d: (load[d], d))
        empty = min(load, key=lambda d: (load[d], d))
        gap = load[full] - load[empty]
        candidates = [r for r in where[full] if 0 < r[2] < gap and (r[0], r[1]) not in moved]
        if not candidates:
            break
        topic, partition, size = min(candidates, key=lambda r: (abs(gap - 2 * r[2]), r[0], r[1]))
        where[full].remove((topic, partition, size))
        where[empty].append((topic, partition, size))
        load[full] -= size
        load[empty] += size
        moved.add((topic, partition))
        moves.append(PlannedMove(topic, partition, size, full, empty))
    return moves


@dataclass(frozen=True, slots=True)
class BalancePlan:
    """The disk balancer's plan for one broker, with the bytes per online dir before and after."""

    broker: int
    moves: tuple[PlannedMove, ...]
    before: dict[str, int]
    after: dict[str, int]


def balance_plan(admin: Any, broker: int) -> BalancePlan:
    """Plan moves that even out bytes across ``broker``'s online log dirs (KIP-178 never shipped)."""
    dirs = admin.describe_log_dirs([broker])[broker]
    if any(r.is_future for d in dirs for r in d.replicas):
        raise OperationError(f"broker {broker} is already moving replicas between its log dirs; try again when they finish")
    online = {d.path: [(r.topic, r.partition, r.size) for r in d.replicas] for d in dirs
              if not d.error_code and not is_remote_entry(d.path)}
    before = {p: sum(s for _, _, s in reps) for p, reps in online.items()}
    moves = plan_balance(online)
    after = dict(before)
    for m in moves:
        after[m.source] -= m.size
        after[m.destination] += m.size
    return BalancePlan(broker, tuple(moves), before, after)


def execute_balance(admin: Any, plan: BalancePlan) -> dict[tuple[int, str, int], int]:
    """AlterReplicaLogDirs for every planned move; each replica's error code (0: the move started)."""
    if not plan.moves:
        return {}
    return dict(admin.alter_replica_log_dirs({(plan.broker, m.topic, m.partition): m.destination for m in plan.moves}))


# ---------------------------------------------------------------------- throttles


def set_replication_throttles(
    admin: Any, targets: Mapping[TopicPartition, Sequence[int]], current: Mapping[TopicPartition, Sequence[int]], rate: int
) -> None:
    """Kafka's modifyReassignmentThrottle + modifyTopicThrottles: the rate on every broker a moving
    partition has or gets; per topic, its moving partitions' current replicas as leader-throttled and
    the replicas they gain as follower-throttled."""
    moving = {k: t for k, t in targets.items() if sorted(t) != sorted(current[k])}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (t, p), target in sorted(moving.items()):
        cur = current[(t, p)]
        brokers |= set(cur) | set(target)
        leaders.setdefault(t, []).extend(f"{p}:{b}" for b in cur)
        followers.setdefault(t, []).extend(f"{p}:{b}" for b in target if b not in cur)
    for b in sorted(brokers):
        admin.incremental_alter_configs("broker", str(b), set={k: str(rate) for k in BROKER_THROTTLES[:2]})
    for t in sorted(leaders):
        admin.incremental_alter_configs("topic", t, set={
            TOPIC_THROTTLES[0]: ",".join(leaders[t]), TOPIC_THROTTLES[1]: ",".join(followers.get(t, []))})


def clear_throttles(admin: Any, topics: Sequence[str]) -> list[int]:
    """Kafka's clearAllThrottles: the broker-level throttles on every broker, the topic-level ones
    on the reassignment's topics. Returns the brokers cleared."""
    # Broker configs are sent to the broker itself: one that is down (fenced) keeps its throttle
    # until it is cleared again (a later --verify).
    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers if not b.fenced)
    for b in brokers:
        admin.incremental_alter_configs("broker", str(b), delete=list(BROKER_THROTTLES))
    for t in topics:
        admin.incremental_alter_configs("topic", t, delete=list(TOPIC_THROTTLES))
    return brokers


# ---------------------------------------------------------------------- progress


def log_dir_status(admin: Any, wanted: Mapping[tuple[int, str, int], str]) -> dict[tuple[int, str, int], str]:
    """Each wanted (broker, topic, partition) -> dir move: completed, in progress, elsewhere or missing."""
    brokers = sorted({b for b, _, _ in wanted})
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
    return status


def adding_progress(
    admin: Any, ongoing: Mapping[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
) -> dict[TopicPartition, list[dict[str, Any]]]:
    """Per moving partition, each adding replica's size and lag behind the leader (DescribeLogDirs)."""
    adding = sorted({b for _, add, _ in ongoing.values() for b in add})
    try:
        described = admin.describe_log_dirs(adding, sorted({t for t, _ in ongoing})) if adding else {}
    except Exception:  # a broker that is down: progress unknown, the verdict does not depend on it
        described = {}
    out: dict[TopicPartition, list[dict[str, Any]]] = {}
    for (t, p), (_, add, _) in ongoing.items():
        rows = []
        for b in add:
            size, lag = None, None
            for ld in described.get(b, []):
                for r in ld.replicas:
                    if (r.topic, r.partition) == (t, p) and not r.is_future:
                        size, lag = r.size, r.offset_lag
            rows.append({"broker": b, "size": size, "offset_lag": lag})
        out[(t, p)] = rows
    return out


# ---------------------------------------------------------------------- reassignment


@dataclass(frozen=True, slots=True)
class RebalanceProposal:
    """The minimal-move planner's proposal: the partitions that change, and what it costs."""

    brokers: list[int]
    current: dict[TopicPartition, list[int]]
    changed: dict[TopicPartition, list[int]]
    moved_replicas: int
    moved_bytes: int
    replicas: int
    reordered_partitions: int
    sizes: dict[TopicPartition, int]


def rebalance_proposal(
    admin: Any, added: Sequence[int], removed: Sequence[int], topics: Sequence[str] | None = None
) -> RebalanceProposal:
    """`plan_rebalance` over (brokers holding replicas + ``added``) - ``removed`` for every topic,
    internal ones included (``topics`` None), or over (live brokers + ``added``) - ``removed`` for
    ``topics``. Sizes come from DescribeLogDirs (the largest
    replica), so the smallest partitions move first."""
    live = {b.node_id: b for b in admin.describe_cluster().brokers if not b.fenced}
    unknown = [b for b in added if b not in live]
    if unknown:
        raise OperationError(f"Unknown broker id(s) {','.join(map(str, unknown))}", missing=True)
    names = [t.name for t in admin.list_topics(include_internal=True)]
    if topics is not None:
        missing = sorted(set(topics) - set(names))
        if missing:
            raise OperationError(f"Topic(s) {', '.join(missing)} not found.", missing=True)
        names = [n for n in names if n in set(topics)]
    described = admin.describe_topics(names) if names else []
    current = {(d.name, p.partition): list(p.replicas) for d in described for p in d.partitions}
    holding = {b for reps in current.values() for b in reps}
    not_there = [b for b in removed if b not in holding and b not in live]
    if not_there:
        raise OperationError(f"Unknown broker id(s) {','.join(map(str, not_there))}", missing=True)
    # The whole cluster balances over the brokers holding replicas (a broker joins by being
    # added); some topics balance over every live broker.
    pool = holding if topics is None else holding | set(live)
    brokers = sorted((pool | set(added)) - set(removed))
    sizes: dict[TopicPartition, int] = {}
    asked = sorted(holding & set(live))
    for ds in (admin.describe_log_dirs(asked, names if topics is not None else None) if asked else {}).values():
        for d in ds:
            for r in d.replicas:
                if not r.is_future:
                    key = (r.topic, r.partition)
                    sizes[key] = max(sizes.get(key, 0), r.size)
    try:
        plan = plan_rebalance(current, brokers, racks={b: live[b].rack for b in live}, sizes=sizes)
    except RebalanceError as e:
        raise OperationError(str(e)) from None
    changed = plan.changed(current)
    return RebalanceProposal(
        brokers=brokers, current=current, changed=changed, moved_replicas=plan.moved_replicas,
        moved_bytes=plan.moved_bytes, replicas=sum(len(r) for r in current.values()),
        reordered_partitions=sum(1 for p, r in changed.items() if sorted(r) == sorted(current[p])), sizes=sizes)


def start_reassignment(
    admin: Any,
    targets: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    *,
    throttle: int | None = None,
    additional: bool = False,
) -> None:
    """AlterPartitionReassignments for ``targets`` after Kafka's tool's checks (every broker
    exists; no reassignment running unless ``additional``), with the inter-broker throttle first."""
    check_reassignment(admin, targets, additional=additional)
    if throttle is not None:
        set_replication_throttles(admin, targets, current, throttle)
    send_reassignment(admin, targets)


def check_reassignment(admin: Any, targets: Mapping[TopicPartition, Sequence[int]], *, additional: bool) -> None:
    """Kafka's tool's checks before a reassignment: every broker exists, and no reassignment is
    running unless ``additional``."""
    live = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted({b for reps in targets.values() for b in reps} - live)
    if unknown:
        raise OperationError(f"Unknown broker id(s) {','.join(map(str, unknown))}", missing=True)
    if not additional and admin.list_partition_reassignments():
        raise OperationError(
            "Cannot execute because there is an existing partition assignment.  Use --additional to "
            "override this and create a new partition assignment in addition to the existing one."
        )


def send_reassignment(admin: Any, targets: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, tuple[int, str | None]]:
    """AlterPartitionReassignments; each partition's result, or OperationError naming the refused ones."""
    results = admin.alter_partition_reassignments({k: list(v) for k, v in targets.items()})
    errors = {k: v for k, v in results.items() if v[0] != 0}
    if errors:
        raise OperationError("Error reassigning partition(s):\n" + "\n".join(
            f"{t}-{p}: {msg or code}" for (t, p), (code, msg) in sorted(errors.items())))
    return dict(results)


def cancel_reassignments(admin: Any, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
    """Cancel the active reassignments among ``partitions`` (a null target: back to the original
    replicas); the ones cancelled."""
    active = sorted(set(admin.list_partition_reassignments(sorted(partitions))) & set(partitions))
    results = admin.alter_partition_reassignments({k: None for k in active}) if active else {}
    # NO_REASSIGNMENT_IN_PROGRESS: it completed between the list and the cancel.
    errors = {k: v for k, v in results.items() if v[0] not in (0, 85)}
    if errors:
        raise OperationError("Error cancelling partition reassignment(s) for:\n" + "\n".join(
            f"{t}-{p}: {msg or code}" for (t, p), (code, msg) in sorted(errors.items())))
    return [k for k in active if results.get(k, (0, None))[0] == 0]
