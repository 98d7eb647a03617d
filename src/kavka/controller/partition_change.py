"""The controller's rules for changing one partition's leader and ISR (Kafka's PartitionChangeBuilder
and the ISR parts of ReplicationControlManager), as pure functions of a PartitionRegistration.

- A leader is elected from the ISR members that are alive (unfenced and not shutting down), the
  first in replica order -- the preferred replica when it qualifies. With none, the partition is
  offline (leader -1) and the ISR keeps its last member, so that replica, which has every
  committed record, can lead again when it returns (KRaft's rule). Unclean election
  (`unclean.leader.election.enable`) may pick a live replica outside the ISR instead; the ISR
  then becomes that replica alone.
- A fenced or shut-down broker leaves every ISR it is in, unless it is the last member (KIP-841).
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
    reg: PartitionRegistration, *, leader: int, isr: tuple[int, ...]
) -> PartitionRegistration:
    if leader == reg.leader and isr == reg.isr:
        return reg
    return dataclasses.replace(
        reg,
        leader=leader,
        isr=isr,
        leader_epoch=reg.leader_epoch + (1 if leader != reg.leader else 0),
        partition_epoch=reg.partition_epoch + 1,
    )


def elect_leader(
    reg: PartitionRegistration, *, live: Collection[int], unclean: bool = False
) -> PartitionRegistration:
    """Keep a live leader; otherwise elect the first live ISR member (or, unclean, any live replica)."""
    if reg.leader != NO_LEADER and reg.leader in live:
        return reg
    for r in reg.replicas:
        if r in reg.isr and r in live:
            return _change(reg, leader=r, isr=reg.isr)
    if unclean:
        for r in reg.replicas:
            if r in live:
                return _change(reg, leader=r, isr=(r,))
    return _change(reg, leader=NO_LEADER, isr=reg.isr)


def on_broker_fenced(
    reg: PartitionRegistration, broker: int, *, live: Collection[int], unclean: bool = False
) -> PartitionRegistration:
    """The broker was fenced, shut down or re-registered as a new incarnation: it leaves the ISR
    (unless it is the last member) and leadership moves if it led."""
    isr = reg.isr
    if broker in isr and len(isr) > 1:
        isr = tuple(r for r in isr if r != broker)
    reg = _change(reg, leader=reg.leader, isr=isr)
    return elect_leader(reg, live=[b for b in live if b != broker], unclean=unclean)


def on_broker_unfenced(
    reg: PartitionRegistration, *, live: Collection[int], unclean: bool = False
) -> PartitionRegistration:
    """A broker came back: an offline partition may have a leader again."""
    if reg.leader != NO_LEADER:
        return reg
    return elect_leader(reg, live=live, unclean=unclean)


def alter_partition(
    reg: PartitionRegistration,
    *,
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: tuple[int, ...],
    live: Collection[int],
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
    return ErrorCode.none, _change(reg, leader=reg.leader, isr=new_isr)


def preferred_replica(reg: PartitionRegistration) -> int:
    """The first replica of the assignment (Kafka's PartitionRegistration.preferredReplica)."""
    return reg.replicas[0] if reg.replicas else NO_LEADER


def elect_preferred(
    reg: PartitionRegistration, *, live: Collection[int]
) -> tuple[ErrorCode, PartitionRegistration]:
    """ElectLeaders PREFERRED for one partition (PartitionChangeBuilder's Election.PREFERRED):
    the preferred replica if it is a live ISR member; else the current leader stays if it is one
    (PREFERRED_LEADER_NOT_AVAILABLE); else the next live ISR member in replica order."""
    preferred = preferred_replica(reg)
    if reg.leader == preferred:
        return ErrorCode.election_not_needed, reg

    def valid(r: int) -> bool:
        return r in reg.isr and r in live

    if valid(preferred):
        return ErrorCode.none, _change(reg, leader=preferred, isr=reg.isr)
    if valid(reg.leader):
        return ErrorCode.preferred_leader_not_available, reg
    leader = next((r for r in reg.replicas[1:] if valid(r)), NO_LEADER)
    if leader == reg.leader:
        return ErrorCode.preferred_leader_not_available, reg
    return ErrorCode.none, _change(reg, leader=leader, isr=reg.isr)


def elect_unclean(
    reg: PartitionRegistration, *, live: Collection[int]
) -> tuple[ErrorCode, PartitionRegistration]:
    """ElectLeaders UNCLEAN for one partition (Election.UNCLEAN): only a partition without a
    leader; a live ISR member if any, else the first live replica, whose ISR becomes itself."""
    if reg.leader != NO_LEADER:
        return ErrorCode.election_not_needed, reg
    new = elect_leader(reg, live=live, unclean=True)
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
