"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat) as a pure state machine.

Theory of operation. The broker owns the assignment. Every change to a group
-- a member joining or leaving, a changed subscription, a subscribed topic
growing partitions -- bumps the *group epoch*; the server-side assignor then
computes a *target assignment* for that epoch. Each member is reconciled
towards its target one heartbeat at a time (Kafka's CurrentAssignmentBuilder):

    UNREVOKED_PARTITIONS  the member still owns partitions its target lacks: it is
                          sent its assignment minus those, keeps its epoch, and
                          moves on once a heartbeat shows it has let them go;
    UNRELEASED_PARTITIONS it has reached the target epoch, but some target
                          partitions are still owned by another member: it gets
                          the free ones now, the rest on a later heartbeat;
    STABLE                it owns exactly its target, at the target epoch.

A partition is therefore never owned by two members at once. The member
epoch fences zombies: a heartbeat with an epoch the coordinator has not given
out gets FENCED_MEMBER_EPOCH, and a commit with an old one STALE_MEMBER_EPOCH.
Member sessions (group.consumer.session.timeout.ms) are the broker's, not the
client's; a member that does not revoke within its rebalance timeout is
removed.

Scope (documented in the README): membership lives in memory (committed
offsets are durable, as for classic groups; after a broker restart members
rejoin with epoch 0, which KIP-848 clients do on UNKNOWN_MEMBER_ID); the
assignors are "uniform" (default) and "range"; static members (instance id)
are accepted but treated as dynamic; subscriptions by regex are refused.

Time is injected (`now_ms`); topic metadata comes from an injected function.
Event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

TopicPartitions = frozenset[tuple[str, int]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"
ASSIGNORS = ("uniform", "range")


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged, not sent


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...] = ()
    assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: TopicPartitions = frozenset()
    pending_revocation: TopicPartitions = frozenset()
    revocation_deadline_ms: int | None = None
    session_deadline_ms: int = 0
    last_sent: TopicPartitions | None = None


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    topic_partitions_seen: dict[str, int] = field(default_factory=dict)  # the metadata the target was built on

    @property
    def state(self) -> str:
        """KIP-848 group states, as ListGroups/DescribeGroups show them."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def owner_of(self) -> dict[tuple[str, int], str]:
        owners = {}
        for m in self.members.values():
            for tp in m.assigned | m.pending_revocation:
                owners[tp] = m.member_id
        return owners


def assign(
    assignor: str, members: Mapping[str, tuple[str, ...]], partitions: Mapping[str, int], current: Mapping[str, TopicPartitions]
) -> dict[str, TopicPartitions]:
    """Server-side assignors. "range": per topic, contiguous ranges in member-id order (Kafka's
    RangeAssignor). "uniform": every subscribed partition spread evenly, keeping a member's
    current partitions where the balance allows (a simple sticky uniform assignor)."""
    out: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    if assignor == "range":
        for topic in sorted(partitions):
            subs = sorted(m for m, topics in members.items() if topic in topics)
            if not subs:
                continue
            n = partitions[topic]
            per, extra = divmod(n, len(subs))
            start = 0
            for i, m in enumerate(subs):
                count = per + (1 if i < extra else 0)
                out[m].update((topic, p) for p in range(start, start + count))
                start += count
        return {m: frozenset(tps) for m, tps in out.items()}
    # uniform
    all_tps = sorted((t, p) for t, n in partitions.items() for p in range(n))
    eligible = {tp: sorted(m for m, topics in members.items() if tp[0] in topics) for tp in all_tps}
    wanted = [tp for tp in all_tps if eligible[tp]]
    if not members or not wanted:
        return {m: frozenset(tps) for m, tps in out.items()}
    quota = {m: 0 for m in members}
    order = sorted(members)
    for i in range(len(wanted)):
        quota[order[i % len(order)]] += 1
    free = []
    for tp in wanted:
        keeper = next((m for m in sorted(members) if tp in current.get(m, frozenset()) and m in eligible[tp]), None)
        if keeper is not None and len(out[keeper]) < quota[keeper]:
            out[keeper].add(tp)
        else:
            free.append(tp)
    for tp in free:
        candidates = [m for m in eligible[tp] if len(out[m]) < quota[m]] or eligible[tp]
        m = min(candidates, key=lambda c: (len(out[c]), c))
        out[m].add(tp)
    return {m: frozenset(tps) for m, tps in out.items()}


class ConsumerGroupCoordinator:
    """Every KIP-848 consumer group on this node."""

    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        *,
        topic_partitions: Callable[[str], int | None],
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config or ConsumerGroupConfig()
        self.groups: dict[str, ConsumerGroup] = {}
        self._topic_partitions = topic_partitions
        self._new_member_id = new_member_id

    # ------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        *,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: Iterable[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: TopicPartitions | None,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(ErrorCode.invalid_request, "GroupId can't be empty.")
        if subscribed_topic_regex:
            return HeartbeatResult(ErrorCode.invalid_request, "SubscribedTopicRegex is not supported by kavka yet.")
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            return HeartbeatResult(ErrorCode.unsupported_assignor, f"ServerAssignor {server_assignor} is not supported.")
        group = self.groups.get(group_id)
        bump = False  # one new group epoch per heartbeat, whatever changed (Kafka does the same)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group is None or member_id not in group.members:
                return HeartbeatResult(ErrorCode.unknown_member_id, member_id=member_id, member_epoch=member_epoch)
            self._remove(group, member_id)
            return HeartbeatResult(ErrorCode.none, member_id=member_id, member_epoch=member_epoch)
        if member_epoch == JOIN_EPOCH:
            if group is None:
                group = self.groups[group_id] = ConsumerGroup(group_id)
            member = group.members.get(member_id) if member_id else None
            if member is None:
                if subscribed_topic_names is None:
                    return HeartbeatResult(ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
                if len(group.members) >= self.config.max_size:
                    return HeartbeatResult(ErrorCode.group_max_size_reached)
                member = ConsumerMember(
                    member_id or self._new_member_id(), instance_id, rack_id, client_id, client_host, rebalance_timeout_ms
                )
                group.members[member.member_id] = member
                bump = True
            else:
                # Rejoining with epoch 0 (it lost its state): start over from nothing owned.
                member.assigned = member.pending_revocation = frozenset()
                member.member_epoch, member.state, member.last_sent = 0, STABLE, None
                bump = True
        else:
            if group is None or member_id not in group.members:
                return HeartbeatResult(ErrorCode.unknown_member_id, member_id=member_id)
            member = group.members[member_id]
            if member_epoch != member.member_epoch and not (
                member_epoch == member.previous_member_epoch and owned is not None and owned <= member.assigned
            ):
                return HeartbeatResult(
                    ErrorCode.fenced_member_epoch,
                    f"The consumer group member has a greater member epoch ({member_epoch}) than the one known by the group coordinator ({member.member_epoch})."
                    if member_epoch > member.member_epoch
                    else "The consumer group member has a smaller member epoch than the one known by the group coordinator.",
                    member_id=member_id,
                )
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else member.rebalance_timeout_ms
        if subscribed_topic_names is not None:
            subscribed = tuple(sorted(set(subscribed_topic_names)))
            if subscribed != member.subscribed:
                member.subscribed = subscribed
                bump = True
        if server_assignor is not None and server_assignor != member.assignor:
            member.assignor = server_assignor
            bump = True
        if self._metadata_changed(group) or bump:
            group.group_epoch += 1
        self._maybe_compute_target(group)
        full = owned is not None or member_epoch == JOIN_EPOCH
        self._reconcile(group, member, owned, now_ms)
        send = member.assigned if (full or member.assigned != member.last_sent) else None
        if send is not None:
            member.last_sent = member.assigned
        return HeartbeatResult(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=send,
        )

    def _metadata_changed(self, group: ConsumerGroup) -> bool:
        """Refresh the partition counts of the subscribed topics; True if they changed."""
        topics = sorted({t for m in group.members.values() for t in m.subscribed})
        seen = {}
        for t in topics:
            n = self._topic_partitions(t)
            if n:
                seen[t] = n
        if seen == group.topic_partitions_seen:
            return False
        group.topic_partitions_seen = seen
        return True

    def _maybe_compute_target(self, group: ConsumerGroup) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        assignors = [m.assignor for m in group.members.values() if m.assignor]
        assignor = max(set(assignors), key=assignors.count) if assignors else "uniform"
        group.target = assign(
            assignor,
            {mid: m.subscribed for mid, m in group.members.items()},
            group.topic_partitions_seen,
            {mid: m.assigned for mid, m in group.members.items()},
        )
        group.assignment_epoch = group.group_epoch

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: TopicPartitions | None, now_ms: int) -> None:
        target = group.target.get(member.member_id, frozenset())
        if member.state == UNREVOKED:
            if owned is None or owned & member.pending_revocation:
                return  # still waiting for the member to let go
            member.pending_revocation = frozenset()
            member.revocation_deadline_ms = None
            member.state = STABLE
        if member.member_epoch == group.assignment_epoch and member.state == STABLE and member.assigned == target:
            return
        to_revoke = member.assigned - target
        if to_revoke:
            member.assigned = member.assigned & target
            member.pending_revocation = to_revoke
            member.state = UNREVOKED
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        owners = group.owner_of()
        missing = target - member.assigned
        unreleased = {tp for tp in missing if owners.get(tp, member.member_id) != member.member_id}
        member.assigned = member.assigned | (missing - unreleased)
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = UNRELEASED if unreleased else STABLE

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.group_epoch += 1

    # ------------------------------------------------------------ timers

    def poll(self, now_ms: int) -> int:
        """Session expiry and revocation timeouts; returns members removed."""
        removed = 0
        for group in self.groups.values():
            for m in list(group.members.values()):
                late = m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms
                if m.session_deadline_ms <= now_ms or late:
                    self._remove(group, m.member_id)
                    removed += 1
            if removed:
                self._maybe_compute_target(group)
        return removed

    def next_deadline(self) -> int | None:
        ds = []
        for g in self.groups.values():
            for m in g.members.values():
                ds.append(m.session_deadline_ms)
                if m.revocation_deadline_ms is not None:
                    ds.append(m.revocation_deadline_ms)
        return min(ds, default=None)

    # ------------------------------------------------------------ offsets

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        """KIP-848 commit checks: the member must exist and commit with its current epoch."""
        group = self.groups[group_id]
        if not member_id and member_epoch < 0:
            return ErrorCode.none if not group.members else ErrorCode.unknown_member_id  # an admin commit
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none
