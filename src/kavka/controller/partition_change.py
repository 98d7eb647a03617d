"""The controller's rules for changing one partition's leader and ISR (Kafka's PartitionChangeBuilder
and the ISR parts of ReplicationControlManager), as pure functions of a PartitionRegistration.

- A leader is elected from the ISR members that are alive (unfenced and not shutting down), the
  first in replica order -- the preferred replica when it qualifies. With none, the partition is
  offline (leader -1) and the ISR keeps its last member, so that replica, which has every
  committed record, can lead again when it returns (KRaft's rule). Unclean election
  (`unclean.leader.election.enable`) may pick a live replica outside the ISR instead; the ISR
  then becomes that replica alone.
- A fenced or shut-down broker leaves every ISR it is in, unless it is the last member (KIP-841).
- Eligible leader replicas (KIP-966, when `elr_min_isr` is given: ELR on): the ISR may become
  empty. While it is below min ISR, the replicas that left it are its ELR -- they hold every
  committed record, the leader's high watermark waiting while the ISR is below min ISR -- and
  with the ISR empty the first live ELR member is elected, as the ISR alone. A broker that
  registers again after an unclean shutdown (its registration does not name the broker epoch a
  clean shutdown ended) leaves the ELR. With ISR and ELR empty,
  the last leader (the last-known ELR) leads again once live: Kafka's balanced recovery, unclean.
- Every leader change bumps the leader epoch; every change at all bumps the partition epoch
  (KIP-497), which AlterPartition requests must name.
- AlterPartition from the leader is accepted only for its current leader epoch and partition
  epoch, with the leader itself in the new ISR and no fenced broker added (KIP-841:
  INELIGIBLE_REPLICA).
- ElectLeaders (KIP-183, KIP-460), as Kafka's ReplicationControlManager.electLeader: PREFERRED
  moves leadership to the first replica (the preferred one) when it is a live ISR member,
  ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise; UNCLEAN
  elects only a leaderless partition -- a live ISR member if there is one, else any live replica,
  whatever `unclean.leader.election.enable` says (the operator asked) --, ELECTION_NOT_NEEDED when
  it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live.

Returns values only; the caller turns them into PartitionChangeRecords.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kavka.metadata.image import PartitionRegistration
from kavka.replication.replica_state import NO_LEADER


def _change(
    reg: PartitionRegistration,
    *,
    leader: int,
    isr: tuple[int, ...],
    elr: tuple[int, ...] | None = None,
    last_known_elr: tuple[int, ...] | None = None,
) -> PartitionRegistration:
    elr = reg.elr if elr is None else elr
    last_known_elr = reg.last_known_elr if last_known_elr is None else last_known_elr
    if leader == reg.leader and isr == reg.isr and elr == reg.elr and last_known_elr == reg.last_known_elr:
        return reg
    return dataclasses.replace(
        reg,
        leader=leader,
        isr=isr,
        elr=elr,
        last_known_elr=last_known_elr,
        leader_epoch=reg.leader_epoch + (1 if leader != reg.leader else 0),
        partition_epoch=reg.partition_epoch + 1,
    )


def target_elr(
    reg: PartitionRegistration,
    isr: Sequence[int],
    *,
    elr_min_isr: int | None,
    unclean_shutdown: Collection[int] = (),
) -> tuple[int, ...]:
    """The ELR once the ISR becomes `isr` (PartitionChangeBuilder's maybePopulateTargetElr).
    `elr_min_isr` is the topic's effective min.insync.replicas, None when ELR is off (no ELR
    then). While the ISR is below it, every replica that was in the ISR or the ELR and is not in
    the new ISR is eligible -- it holds every committed record, since the high watermark does
    not advance below min ISR -- unless it shut down uncleanly. At or above it, none is."""
    if elr_min_isr is None or len(isr) >= elr_min_isr:
        return ()
    candidates = set(reg.elr) | set(reg.isr)
    return tuple(r for r in reg.replicas if r in candidates and r not in isr and r not in unclean_shutdown)


def _build(
    reg: PartitionRegistration,
    *,
    isr: tuple[int, ...],
    live: Collection[int],
    unclean: bool = False,
    elr_min_isr: int | None = None,
    unclean_shutdown: Collection[int] = (),
) -> PartitionRegistration:
    """PartitionChangeBuilder.build (ONLINE election, or UNCLEAN when `unclean`) for a new target
    ISR. The ELR follows the ISR; the leader is kept if still valid, else the first live ISR
    member -- with the ISR empty, the first live ELR member, which becomes the ISR alone. With
    ISR and ELR both empty, the last known leader (the one that led when the ISR became empty,
    kept as the last-known ELR) is elected once it is live again -- what Kafka calls a balanced
    recovery: it may have lost unflushed records, so this is an unclean election --; then, with
    unclean election on, any live replica. An unclean election clears the ELR. Without ELR the
    ISR never becomes empty: it keeps its last member."""
    elr = target_elr(reg, isr, elr_min_isr=elr_min_isr, unclean_shutdown=unclean_shutdown)
    last_known = reg.last_known_elr if elr_min_isr is not None else ()

    def valid(r: int) -> bool:
        return r in live and (r in isr or (not isr and r in elr))

    if reg.leader != NO_LEADER and valid(reg.leader):
        leader = reg.leader
    else:
        leader = next((r for r in reg.replicas if valid(r)), NO_LEADER)
    if leader != NO_LEADER and leader != reg.leader and leader in elr:
        isr = (leader,)
        elr = tuple(r for r in elr if r != leader)
    elif leader == NO_LEADER:
        if not isr and not elr and len(last_known) == 1 and last_known[0] in live:
            leader = last_known[0]
        elif unclean:
            leader = next((r for r in reg.replicas if r in live), NO_LEADER)
        if leader != NO_LEADER:
            isr, elr = (leader,), ()
    if not isr and elr_min_isr is None:
        isr = reg.isr
    # PartitionChangeBuilder.maybeUpdateLastKnownLeader: the leader is remembered when the ISR
    # becomes empty, and forgotten once the partition has a leader.
    if elr_min_isr is not None and not isr and reg.isr and reg.leader != NO_LEADER:
        last_known = (reg.leader,)
    elif leader != NO_LEADER:
        last_known = ()
    return _change(reg, leader=leader, isr=isr, elr=elr, last_known_elr=last_known)


def elect_leader(
    reg: PartitionRegistration, *, live: Collection[int], unclean: bool = False, elr_min_isr: int | None = None
) -> PartitionRegistration:
    """Keep a live leader; otherwise elect the first live ISR member -- with the ISR empty, the
    first live ELR member -- or, unclean, any live replica."""
    return _build(reg, isr=reg.isr, live=live, unclean=unclean, elr_min_isr=elr_min_isr)


def on_broker_fenced(
    reg: PartitionRegistration,
    broker: int,
    *,
    live: Collection[int],
    unclean: bool = False,
    elr_min_isr: int | None = None,
) -> PartitionRegistration:
    """The broker was fenced, shut down, or re-registered after a clean shutdown (or with ELR
    off): it leaves the ISR (without ELR, unless it is the last member; with ELR, into the ELR
    when the ISR falls below min ISR) and leadership moves if it led."""
    live = [b for b in live if b != broker]
    if elr_min_isr is None:
        isr = reg.isr if reg.isr == (broker,) else tuple(r for r in reg.isr if r != broker)
        return elect_leader(_change(reg, leader=reg.leader, isr=isr, elr=(), last_known_elr=()), live=live, unclean=unclean)
    return _build(reg, isr=tuple(r for r in reg.isr if r != broker), live=live, unclean=unclean, elr_min_isr=elr_min_isr)


def on_broker_unclean_shutdown(
    reg: PartitionRegistration,
    broker: int,
    *,
    live: Collection[int],
    unclean: bool = False,
    elr_min_isr: int | None = None,
) -> PartitionRegistration:
    """The broker registered again after an unclean shutdown (KIP-966: it may have lost
    unflushed records): it leaves the ISR as when fenced, and the ELR too."""
    isr = tuple(r for r in reg.isr if r != broker)
    return _build(
        reg, isr=isr, live=[b for b in live if b != broker], unclean=unclean,
        elr_min_isr=elr_min_isr, unclean_shutdown=(broker,),
    )


def on_broker_unfenced(
    reg: PartitionRegistration, *, live: Collection[int], unclean: bool = False, elr_min_isr: int | None = None
) -> PartitionRegistration:
    """A broker came back: an offline partition may have a leader again."""
    if reg.leader != NO_LEADER:
        return reg
    if elr_min_isr is None:
        return elect_leader(reg, live=live, unclean=unclean)
    return elect_leader(reg, live=live, unclean=unclean, elr_min_isr=elr_min_isr)


def alter_partition(
    reg: PartitionRegistration,
    *,
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: tuple[int, ...],
    live: Collection[int],
    elr_min_isr: int | None = None,
) -> tuple[ErrorCode, PartitionRegistration]:
    """Validate and apply an AlterPartition from the leader (Kafka's error codes)."""
    if leader_id != reg.leader:
        return ErrorCode.not_leader_or_follower, reg
    if leader_epoch != reg.leader_epoch:
        return ErrorCode.fenced_leader_epoch, reg
    if partition_epoch != reg.partition_epoch:
        return ErrorCode.invalid_update_version, reg
    if (
        leader_id not in new_isr
        or any(r not in reg.replicas for r in new_isr)
        or len(set(new_isr)) != len(new_isr)
    ):
        return ErrorCode.invalid_request, reg
    if any(r not in reg.isr and r not in live for r in new_isr):
        return ErrorCode.ineligible_replica, reg
    elr = target_elr(reg, new_isr, elr_min_isr=elr_min_isr)
    return ErrorCode.none, _change(reg, leader=reg.leader, isr=new_isr, elr=elr)


def preferred_replica(reg: PartitionRegistration) -> int:
    """The first replica of the assignment (Kafka's PartitionRegistration.preferredReplica)."""
    return reg.replicas[0] if reg.replicas else NO_LEADER


def elect_preferred(
    reg: PartitionRegistration, *, live: Collection[int], elr_min_isr: int | None = None
) -> tuple[ErrorCode, PartitionRegistration]:
    """ElectLeaders PREFERRED for one partition (PartitionChangeBuilder's Election.PREFERRED):
    the preferred replica if it is a live ISR member; else the current leader stays if it is one
    (PREFERRED_LEADER_NOT_AVAILABLE); else the next live ISR member in replica order."""
    preferred = preferred_replica(reg)
    if reg.leader == preferred:
        return ErrorCode.election_not_needed, reg

    def valid(r: int) -> bool:
        return r in live and (r in reg.isr or (not reg.isr and r in reg.elr))

    def elect(r: int) -> PartitionRegistration:
        if r in reg.isr:
            return _change(reg, leader=r, isr=reg.isr)
        # An ELR member (the ISR is empty) leads as the ISR alone (PartitionChangeBuilder.tryElection).
        elr = tuple(x for x in reg.elr if x != r)
        return _change(reg, leader=r, isr=(r,), elr=elr if elr_min_isr is not None else ())

    if valid(preferred):
        return ErrorCode.none, elect(preferred)
    if valid(reg.leader):
        return ErrorCode.preferred_leader_not_available, reg
    leader = next((r for r in reg.replicas[1:] if valid(r)), NO_LEADER)
    if leader == reg.leader:
        return ErrorCode.preferred_leader_not_available, reg
    return ErrorCode.none, elect(leader)


def elect_unclean(
    reg: PartitionRegistration, *, live: Collection[int], elr_min_isr: int | None = None
) -> tuple[ErrorCode, PartitionRegistration]:
    """ElectLeaders UNCLEAN for one partition (Election.UNCLEAN): only a partition without a
    leader; a live ISR member if any (with the ISR empty, a live ELR member), else the first live
    replica, whose ISR becomes itself."""
    if reg.leader != NO_LEADER:
        return ErrorCode.election_not_needed, reg
    new = elect_leader(reg, live=live, unclean=True, elr_min_isr=elr_min_isr)
    if new.leader == NO_LEADER:
        return ErrorCode.eligible_leaders_not_available, reg
    return ErrorCode.none, new


# ---------------------------------------------------------------------------- reassignment (KIP-455)
#
# Kafka's PartitionReassignmentReplicas, PartitionReassignmentRevert and the reassignment steps of
# PartitionChangeBuilder.build(). A reassignment to `target` first widens the replica list to
# target + removing (adding_replicas catch up as followers); once every target replica is in the
# ISR (or, with nothing to add, once the ISR keeps one replica that stays) it completes: replicas
# become the target, the ISR loses the removed replicas, and a removed leader hands over to the
# first live target replica in the ISR. Cancelling goes back to the original replicas (the ones not
# being added) and drops the adding ones from the ISR.


@dataclass(frozen=True, slots=True)
class Assignment:
    """A partition's replica assignment, with any reassignment in progress (the record's fields)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()


def reassignment_target(current: Sequence[int], target: Sequence[int]) -> Assignment:
    """The replica list while moving from `current` to `target`: target + removing, sorted sets
    of removing and adding (PartitionReassignmentReplicas(current, target)). ISR/leader unset."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return Assignment(tuple(target) + removing, (), NO_LEADER, removing, adding)


def maybe_complete(a: Assignment) -> Assignment:
    """PartitionReassignmentReplicas.maybeCompleteReassignment: the finished assignment once the ISR
    holds every replica that stays, else `a` unchanged."""
    if not a.removing and not a.adding:
        return a
    isr = tuple(r for r in a.isr if r not in a.removing)
    replicas = tuple(r for r in a.replicas if r not in a.removing)
    if not isr or not replicas or any(r not in isr for r in replicas):
        return a
    return Assignment(replicas, isr, a.leader)


def elect_for(a: Assignment, *, live: Collection[int]) -> Assignment:
    """PartitionChangeBuilder's ONLINE election on a changed assignment: keep a leader that is a
    live ISR member of it, else the first live ISR member in replica order, else none."""
    if a.leader in a.isr and a.leader in live and a.leader in a.replicas:
        return a
    leader = next((r for r in a.replicas if r in a.isr and r in live), NO_LEADER)
    return dataclasses.replace(a, leader=leader)


def revert(a: Assignment) -> tuple[Assignment, bool]:
    """PartitionReassignmentRevert: the original replicas and the ISR without the adding ones;
    True when that ISR would be empty and its first replica must be elected uncleanly."""
    replicas = tuple(r for r in a.replicas if r not in a.adding)
    isr = tuple(r for r in a.isr if r not in a.adding)
    unclean = not isr
    if unclean:
        isr = replicas[:1]
    return Assignment(replicas, isr, a.leader), unclean
