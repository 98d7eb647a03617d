"""The classic group protocol as a pure state machine (Kafka's GroupCoordinator + GroupMetadata).

Theory of operation. A group moves through Kafka's five states:

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable | CompletingRebalance --join of a new member, a leave, a session expiry--> PreparingRebalance
    PreparingRebalance --rebalance completes with no member--> Empty
    Empty --DeleteGroups--> Dead

`TRANSITIONS` below is the table of legal moves; `_transition` refuses any
other (a bug, not a client error). JoinGroup and SyncGroup are *delayed*
operations: a request that must wait is parked under a token (`Parked`), and
when the group moves on the answer for that token is put in the outbox
(`drain()` hands completions to the caller, which owns the sockets). Time is
injected: every call takes `now_ms`, and `poll(now_ms)` fires the timers --
member session expiry, pending (MEMBER_ID_REQUIRED) member expiry, and the
rebalance deadline (the initial delay `group.initial.rebalance.delay.ms` for
a group that was Empty, else the largest member rebalance timeout). Member ids
come from an injected function, so a test can make them deterministic.

What must be durable -- committed offsets and each generation's metadata --
is emitted as `OffsetRecord` / `GroupRecord` values in the outbox; the
manager writes them to `__consumer_offsets` and replays them with `load_*`
on startup. Offsets are applied only after the manager has written them
(`apply_offsets`), so nothing is acknowledged that is not in the log.

Transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) are held per group and
producer id (`add_pending_txn_offsets`) until the transaction's marker reaches
the group's `__consumer_offsets` partition: `complete_txn` then makes them the
committed offsets (COMMIT) or drops them (ABORT), as Kafka's
GroupMetadata.completePendingTxnOffsetCommit. Until then OffsetFetch does not
show them, and one that asks for stable offsets is told UNSTABLE_OFFSET_COMMIT
(`has_pending_txn_offset`).

Single-threaded: called from the event-loop thread only.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# Kafka's GroupMetadata.validPreviousStates, turned around: state -> states it may move to.
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset(),
}

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class IllegalTransition(RuntimeError):
    """A coordinator bug: a state change the table does not allow."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata): only the leader gets these.
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class Parked:
    """The answer comes later, as a completion for `token` in the outbox."""

    token: int


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What Kafka's GroupMetadataValue stores about a generation."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberSnapshot, ...]


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    snapshot: GroupSnapshot | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: int | None = None  # parked JoinGroup
    sync_token: int | None = None  # parked SyncGroup
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry (ms)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # Kafka's pendingTransactionalOffsetCommits: producer id -> offsets written by TxnOffsetCommit
    # whose transaction has no marker yet; invisible to OffsetFetch until its COMMIT marker.
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # Where in `__consumer_offsets` each committed and each pending offset was written (absent:
    # unknown): a transaction's offset does not replace one committed after it in the log.
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    pending_txn_positions: dict[int, dict[tuple[str, int], int]] = field(default_factory=dict)
    rebalance_deadline_ms: int | None = None
    rebalance_started_ms: int = 0
    initial_delay: bool = False
    state_timestamp_ms: int = -1

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> list[str]:
        members = list(self.members.values())
        if not members:
            return []
        common = [name for name, _ in members[0].protocols]
        for m in members[1:]:
            names = {n for n, _ in m.protocols}
            common = [n for n in common if n in names]
        return common

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        # Kafka's GroupMetadata.supportsProtocols.
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {n for n, _ in protocols}
        return protocol_type == self.protocol_type and any(c in names for c in self.candidate_protocols())

    def select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            vote = next(n for n, _ in m.protocols if n in votes)
            votes[vote] += 1
        return max(candidates, key=lambda c: votes[c])  # first of the most voted, by the first member's order

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def snapshot(self) -> GroupSnapshot:
        return GroupSnapshot(
            protocol_type=self.protocol_type or "",
            generation_id=self.generation_id,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberSnapshot(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )


def _default_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


Completion = tuple[int, JoinResult | SyncResult]


class GroupCoordinator:
    """Every group this node coordinates, their members and committed offsets."""

    def __init__(self, config: GroupConfig | None = None, *, new_member_id: Callable[[str], str] = _default_member_id) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self._new_member_id = new_member_id
        self._next_token = 0
        self._completions: list[Completion] = []
        self._records: list[GroupRecord | OffsetRecord] = []

    # ------------------------------------------------------------ outbox

    def drain(self) -> tuple[list[Completion], list[GroupRecord | OffsetRecord]]:
        """Answers for parked requests, and records to write, since the last drain."""
        done, recs = self._completions, self._records
        self._completions, self._records = [], []
        return done, recs

    def _park(self) -> int:
        self._next_token += 1
        return self._next_token

    def _complete(self, token: int | None, result: JoinResult | SyncResult) -> None:
        if token is not None:
            self._completions.append((token, result))

    def _transition(self, group: Group, to: GroupState, now_ms: int) -> None:
        if to not in TRANSITIONS[group.state]:
            raise IllegalTransition(f"group {group.group_id}: {group.state.value} -> {to.value}")
        group.state = to
        group.state_timestamp_ms = now_ms

    def _store_group(self, group: Group) -> None:
        self._records.append(GroupRecord(group.group_id, group.snapshot()))

    # ------------------------------------------------------------ JoinGroup

    def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        require_known_member_id: bool,
        now_ms: int,
    ) -> JoinResult | Parked:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        if group.is_(GroupState.DEAD):
            # Deleted while this request was on its way: the client finds the coordinator again.
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        protocols = [(n, bytes(m)) for n, m in protocols]
        new = dict(
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
        )
        if member_id == UNKNOWN_MEMBER_ID:
            if group_instance_id is not None and group_instance_id in group.static_members:
                return self._static_member_rejoin(group, group_instance_id, new, now_ms)
            if len(group.members) + len(group.pending_members) >= cfg.max_size:
                return JoinResult(ErrorCode.group_max_size_reached)
            new_id = self._new_member_id(group_instance_id or client_id)
            if group_instance_id is None and require_known_member_id:
                # KIP-394: hand out the id first, so a client that loses the answer does not leak a member.
                group.pending_members[new_id] = now_ms + session_timeout_ms
                return JoinResult(ErrorCode.member_id_required, new_id)
            return self._add_member_and_rebalance(group, new_id, group_instance_id, new, now_ms)
        # A known member id.
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, group_instance_id, new, now_ms)
        if group.is_static_fenced(member_id, group_instance_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, new, now_ms)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # It lost the JoinGroup answer: send the same one again.
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, new, now_ms)
        # Stable
        if member_id == group.leader_id or not member.matches(protocols):
            return self._update_member_and_rebalance(group, member, new, now_ms)
        return self._join_result(group, member)

    def _join_result(self, group: Group, member: Member, *, skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if is_leader:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            skip_assignment,
            members,
        )

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, instance_id: str | None, new: dict, now_ms: int
    ) -> Parked:
        member = Member(member_id, instance_id, **new)
        member.is_new = True
        token = member.join_token = self._park()
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        # New members are kept alive while they wait for the join to complete.
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay:
            # Kafka's InitialDelayedJoin: each new member buys another delay, up to the rebalance timeout.
            cap = group.rebalance_started_ms + max(group.max_rebalance_timeout_ms(), self.config.initial_rebalance_delay_ms)
            group.rebalance_deadline_ms = min(now_ms + self.config.initial_rebalance_delay_ms, cap)
        self._maybe_prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)
        return Parked(token)

    def _update_member_and_rebalance(self, group: Group, member: Member, new: dict, now_ms: int) -> Parked:
        member.protocols = new["protocols"]
        member.session_timeout_ms = new["session_timeout_ms"]
        member.rebalance_timeout_ms = new["rebalance_timeout_ms"]
        member.client_id, member.client_host = new["client_id"], new["client_host"]
        if member.join_token is not None:
            # A second JoinGroup from the same member replaces the first (whose connection is likely gone).
            self._complete(member.join_token, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        token = member.join_token = self._park()
        self._maybe_prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)
        return Parked(token)

    def _static_member_rejoin(self, group: Group, instance_id: str, new: dict, now_ms: int) -> JoinResult | Parked:
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        new_id = self._new_member_id(instance_id)
        # KIP-345: the new incarnation takes over the old member id's place; the old one is fenced.
        self._complete(old.join_token, JoinResult(ErrorCode.fenced_instance_id, old_id))
        self._complete(old.sync_token, SyncResult(ErrorCode.fenced_instance_id))
        old.join_token = old.sync_token = None
        del group.members[old_id]
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        old.heartbeat_deadline_ms = now_ms + new["session_timeout_ms"]
        if group.is_(GroupState.STABLE):
            # Kafka's rule (GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin): the
            # new incarnation's protocols replace the old ones, and only a change of the group's
            # selected protocol rebalances. Its metadata may differ (a consumer's subscription
            # carries its owned partitions and generation, which a restarted consumer has lost):
            # that alone keeps the current assignment; the leader is told to skip it (KIP-814).
            old.protocols = new["protocols"]
            old.session_timeout_ms = new["session_timeout_ms"]
            old.rebalance_timeout_ms = new["rebalance_timeout_ms"]
            if group.select_protocol() == group.protocol_name:
                self._store_group(group)
                return self._join_result(group, old, skip_assignment=group.leader_id == new_id)
        return self._update_member_and_rebalance(group, old, new, now_ms)

    def _maybe_prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # The assignment being synced is void: waiting SyncGroups retry after rejoining.
            for m in group.members.values():
                self._complete(m.sync_token, SyncResult(ErrorCode.rebalance_in_progress))
                m.sync_token = None
        group.initial_delay = group.is_(GroupState.EMPTY) and self.config.initial_rebalance_delay_ms > 0
        group.rebalance_started_ms = now_ms
        if group.initial_delay:
            group.rebalance_deadline_ms = now_ms + self.config.initial_rebalance_delay_ms
        else:
            group.rebalance_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        self._transition(group, GroupState.PREPARING_REBALANCE, now_ms)

    def _maybe_complete_join(self, group: Group, now_ms: int) -> None:
        # Kafka's DelayedJoin.tryComplete; the initial delay always runs to its end.
        if group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_delay and group.all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            self._remove_member(group, m)
        group.rebalance_deadline_ms = None
        group.initial_delay = False
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            self._transition(group, GroupState.EMPTY, now_ms)
            self._store_group(group)
            return
        group.protocol_name = group.select_protocol()
        self._transition(group, GroupState.COMPLETING_REBALANCE, now_ms)
        for m in group.members.values():
            token, m.join_token = m.join_token, None
            m.is_new = False
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            self._complete(token, self._join_result(group, m))

    def _remove_member(self, group: Group, member: Member) -> None:
        self._complete(member.join_token, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        self._complete(member.sync_token, SyncResult(ErrorCode.unknown_member_id))
        del group.members[member.member_id]
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        if group.leader_id == member.member_id:
            joined = [m.member_id for m in group.members.values() if m.awaiting_join]
            group.leader_id = joined[0] if joined else next(iter(group.members), None)

    def _remove_member_and_update_group(self, group: Group, member: Member, now_ms: int) -> None:
        self._remove_member(group, member)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        # Kafka's DelayedJoin is tried at once: with every remaining member already waiting
        # (or none left) the generation completes now, and an emptied group goes Empty.
        self._maybe_complete_join(group, now_ms)

    # ------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
        now_ms: int,
    ) -> SyncResult | Parked:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.coordinator_not_available)
        if group.is_static_fenced(member_id, group_instance_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_(GroupState.STABLE):
            return self._sync_result(group, member)
        # CompletingRebalance: wait for the leader's assignment.
        if member.sync_token is not None:
            self._complete(member.sync_token, SyncResult(ErrorCode.rebalance_in_progress))
        token = member.sync_token = self._park()
        if member_id == group.leader_id:
            given = {mid: bytes(a) for mid, a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            self._transition(group, GroupState.STABLE, now_ms)
            self._store_group(group)
            for m in group.members.values():
                sync_token, m.sync_token = m.sync_token, None
                self._complete(sync_token, self._sync_result(group, m))
        return Parked(token)

    def _sync_result(self, group: Group, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment)

    # ------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, *, group_id: str, members: Sequence[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per leaving member) -- LeaveGroup v3+ batches members (KIP-345)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, [ErrorCode.coordinator_not_available] * len(members)
        errors = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")  # a static member leaving by instance id
                if not member_id:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
            elif group.is_static_fenced(member_id, instance_id):
                errors.append(ErrorCode.fenced_instance_id)
                continue
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                self._maybe_complete_join(group, now_ms)
                errors.append(ErrorCode.none)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            self._remove_member_and_update_group(group, member, now_ms)
            errors.append(ErrorCode.none)
        return ErrorCode.none, errors

    # ------------------------------------------------------------ timers

    def poll(self, now_ms: int) -> None:
        """Fire every timer due at `now_ms`: session expiry, pending members, rebalance deadlines."""
        for group in list(self.groups.values()):
            for mid, expiry in list(group.pending_members.items()):
                if expiry <= now_ms:
                    del group.pending_members[mid]
                    self._maybe_complete_join(group, now_ms)
            for member in list(group.members.values()):
                if member.member_id not in group.members:
                    continue
                # Kafka's shouldKeepAlive: a member parked in JoinGroup or SyncGroup is alive.
                if member.join_token is None and member.sync_token is None and member.heartbeat_deadline_ms <= now_ms:
                    self._remove_member_and_update_group(group, member, now_ms)
            if (
                group.is_(GroupState.PREPARING_REBALANCE)
                and group.rebalance_deadline_ms is not None
                and group.rebalance_deadline_ms <= now_ms
            ):
                self._complete_join(group, now_ms)

    def next_deadline(self) -> int | None:
        deadlines = []
        for g in self.groups.values():
            deadlines.extend(g.pending_members.values())
            deadlines.extend(
                m.heartbeat_deadline_ms for m in g.members.values() if m.join_token is None and m.sync_token is None
            )
            if g.is_(GroupState.PREPARING_REBALANCE) and g.rebalance_deadline_ms is not None:
                deadlines.append(g.rebalance_deadline_ms)
        return min(deadlines, default=None)

    # ------------------------------------------------------------ offsets

    def validate_offset_commit(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int,
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> ErrorCode:
        """Kafka's GroupCoordinator.handleCommitOffsets checks; a simple consumer's commit creates the group.
        A commit with a generation to a group that does not exist gets `unknown_group_error`
        (OffsetCommit v9+: GROUP_ID_NOT_FOUND; before: ILLEGAL_GENERATION)."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # Not using group management (assign()): the commit is accepted on its own.
                self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
                return ErrorCode.none
            return unknown_group_error
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_fenced(member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.none
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.none

    def validate_txn_offset_commit(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        """Kafka's GroupCoordinator.handleTxnCommitOffsets checks: an unknown group is created
        (a producer may commit for a group that has no members); the KIP-447 member and
        generation checks (Kafka's validateCurrentMember) apply once the request names a
        generation, a member or an instance (v3+; older versions send -1 and "")."""
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
            return ErrorCode.none
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.none
        if generation_id < 0 and not member_id and group_instance_id is None:
            return ErrorCode.none  # a producer that does not send the group's generation (v0-v2)
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def add_pending_txn_offsets(
        self, group_id: str, producer_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata], now_ms: int,
        positions: dict[tuple[str, int], int] | None = None,
    ) -> None:
        """Transactional offsets written to the log (or replayed from it) at `positions` whose
        marker has not been seen: held for `producer_id`, not visible."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        group.pending_txn_positions.setdefault(producer_id, {}).update(positions or {})

    def fail_pending_txn_offsets(self, group_id: str, producer_id: int, positions: dict[tuple[str, int], int]) -> None:
        """The append of these pending offsets did not replicate: forget them (those a later
        TxnOffsetCommit of the producer replaced stay)."""
        group = self.groups.get(group_id)
        if group is None or producer_id not in group.pending_txn_offsets:
            return
        pending, where = group.pending_txn_offsets[producer_id], group.pending_txn_positions.get(producer_id, {})
        for tp, pos in positions.items():
            if where.get(tp) == pos:
                pending.pop(tp, None)
                where.pop(tp, None)
        if not pending:
            del group.pending_txn_offsets[producer_id]
            group.pending_txn_positions.pop(producer_id, None)

    def complete_txn(self, producer_id: int, commit: bool, in_partition: Callable[[str], bool]) -> int:
        """The marker of `producer_id`'s transaction reached a `__consumer_offsets` partition:
        for each group of that partition (`in_partition`), its pending offsets of that producer
        become committed (commit) or are dropped. Returns the offsets made visible."""
        n = 0
        for group in self.groups.values():
            if producer_id not in group.pending_txn_offsets or not in_partition(group.group_id):
                continue
            offsets = group.pending_txn_offsets.pop(producer_id)
            positions = group.pending_txn_positions.pop(producer_id, {})
            if not commit:
                continue
            for tp, om in offsets.items():
                pos = positions.get(tp, -1)
                if tp in group.offsets and group.offset_positions.get(tp, -1) > pos:
                    continue  # a plain commit written after this transaction's record wins (Kafka's olderThan)
                group.offsets[tp] = om
                if pos >= 0:
                    group.offset_positions[tp] = pos
                else:
                    group.offset_positions.pop(tp, None)
                n += 1
        return n

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        group = self.groups.get(group_id)
        return group is not None and any(tp in o for o in group.pending_txn_offsets.values())

    def offset_records(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> list[OffsetRecord]:
        return [OffsetRecord(group_id, t, p, o) for (t, p), o in offsets.items()]

    def apply_offsets(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata],
                      positions: dict[tuple[str, int], int] | None = None) -> None:
        """After the manager wrote the commit to the log (at `positions`, when known)."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return
        group.offsets.update(offsets)
        for tp in offsets:
            group.offset_positions.pop(tp, None)
        group.offset_positions.update(positions or {})

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        group = self.groups.get(group_id)
        have = group.offsets if group is not None else {}
        if partitions is None:
            return dict(sorted(have.items()))
        return {tp: have.get(tp) for tp in partitions}

    # ------------------------------------------------------------ admin

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        wanted = {s.lower() for s in states}
        return [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        stable = group.is_(GroupState.STABLE)
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id, group.state.value, group.protocol_type or "", (group.protocol_name or "") if stable else "", members
        )

    def delete_group(self, group_id: str, now_ms: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.non_empty_group
        self._transition(group, GroupState.DEAD, now_ms)
        for topic, partition in sorted(group.offsets):
            self._records.append(OffsetRecord(group_id, topic, partition, None))
        self._records.append(GroupRecord(group_id, None))
        del self.groups[group_id]
        return ErrorCode.none

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]], subscribed_topics: Callable[[str, bytes], set[str] | None]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete (KIP-496): only offsets of topics the group is not subscribed to may go.

        `subscribed_topics(protocol_type, metadata)` parses a member's subscription (None if it cannot);
        an unparsed subscription holds every topic, as Kafka's isSubscribedToTopic (Option.forall).
        """
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        subscribed: set[str] = set()
        unknown = False  # a subscription that does not parse: Kafka counts every topic subscribed
        if not group.is_(GroupState.EMPTY):
            if group.protocol_type != "consumer":
                return ErrorCode.non_empty_group, {}
            for m in group.members.values():
                topics = subscribed_topics(group.protocol_type, m.metadata(group.protocol_name) or m.protocols[0][1])
                unknown |= topics is None
                subscribed |= topics or set()
        errors: dict[tuple[str, int], ErrorCode] = {}
        for tp in partitions:
            if unknown or tp[0] in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
                continue
            errors[tp] = ErrorCode.none
            if group.offsets.pop(tp, None) is not None:
                self._records.append(OffsetRecord(group_id, tp[0], tp[1], None))
        return ErrorCode.none, errors

    def expire_offsets(self, now_ms: int, retention_ms: int, *, keep: frozenset[str] = frozenset()) -> int:
        """offsets.retention.ms (KIP-211): the offsets of a group with no members expire
        `retention_ms` after it became empty -- for a group that never had members (assign()
        consumers), after each offset's commit. A group left with neither members nor offsets
        is removed (Kafka: -> Dead). Groups in `keep` (active KIP-848 groups, whose offsets are
        kept here) are skipped. Returns offsets expired."""
        expired = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY) or group.group_id in keep:
                continue
            for tp, om in list(group.offsets.items()):
                since = om.commit_timestamp_ms if group.protocol_type is None else group.state_timestamp_ms
                if since + retention_ms <= now_ms:
                    del group.offsets[tp]
                    self._records.append(OffsetRecord(group.group_id, tp[0], tp[1], None))
                    expired += 1
            if not group.offsets and not group.pending_members and not group.pending_txn_offsets:
                # A group whose only member is waiting to rejoin with its new id (KIP-394) stays:
                # deleting it would answer that rejoin UNKNOWN_MEMBER_ID.
                self._transition(group, GroupState.DEAD, now_ms)
                self._records.append(GroupRecord(group.group_id, None))
                del self.groups[group.group_id]
        return expired

    # ------------------------------------------------------------ loading (replay of __consumer_offsets)

    def load_offset(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None, now_ms: int,
                    position: int = -1) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                group.offsets.pop((topic, partition), None)
                group.offset_positions.pop((topic, partition), None)
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        group.offsets[(topic, partition)] = value
        if position >= 0:
            group.offset_positions[(topic, partition)] = position

    def load_group(self, group_id: str, snapshot: GroupSnapshot | None, now_ms: int) -> None:
        if snapshot is None:
            self.groups.pop(group_id, None)
            return
        old = self.groups.get(group_id)
        group = Group(group_id, state_timestamp_ms=snapshot.current_state_timestamp_ms)
        group.offsets = old.offsets if old is not None else {}
        if old is not None:
            group.pending_txn_offsets = old.pending_txn_offsets
            group.offset_positions = old.offset_positions
            group.pending_txn_positions = old.pending_txn_positions
        group.generation_id = snapshot.generation_id
        group.protocol_type = snapshot.protocol_type or None
        group.protocol_name = snapshot.protocol_name
        group.leader_id = snapshot.leader
        for ms in snapshot.members:
            m = Member(
                ms.member_id,
                ms.group_instance_id,
                ms.client_id,
                ms.client_host,
                ms.session_timeout_ms,
                ms.rebalance_timeout_ms,
                snapshot.protocol_type,
                [(snapshot.protocol_name or "", ms.subscription)],
                ms.assignment,
            )
            m.heartbeat_deadline_ms = now_ms + ms.session_timeout_ms
            group.members[m.member_id] = m
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        # Kafka loads a group with members as Stable; members that do not come back expire.
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        self.groups[group_id] = group
