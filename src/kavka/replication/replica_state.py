"""The replication protocol of one partition as pure state: a leader's view of its followers, and a
follower's truncation rule (Kafka's replication design, KIP-101, KIP-279, KIP-320, KIP-497, KIP-841).

Theory of operation. The controller names a leader, a leader epoch, the in-sync replica set (ISR)
and a partition epoch (`PartitionRegistration`). Followers pull: each fetch carries the follower's
log end offset (`fetch_offset`) and the epoch of its last record (`last_fetched_epoch`). The
leader first checks the two agree with its own leader-epoch cache (KIP-320): if the follower's
log diverges, the answer is a *diverging epoch* -- the largest epoch the leader knows that is
<= `last_fetched_epoch` and where it ends in the leader's log -- and the follower truncates to
that point (`truncation_offset`) before fetching again. Only a fetch that passed that check moves
the follower's log end offset in the leader's view, so every offset the leader counts a follower
as having is a prefix of the leader's own log.

The high watermark is the smallest log end offset over the *maximal* ISR (the committed ISR
plus any member a pending AlterPartition adds, KIP-497), and it only moves up. A record below it
is on every ISR member, which is what "committed" means; acks=all waits for it. A follower is
caught up when it fetched the leader's log end offset as it was (Kafka's lastCaughtUpTimeMs
rule); one that has not been caught up for `replica.lag.time.max.ms` is proposed for removal,
and one that reached the high watermark and the start of the current leader epoch is proposed
for addition. Proposals are AlterPartition requests: at most one in flight, and the ISR changes
only when the controller commits it (`on_registration`). A proposal whose fate is unknown (no
answer, or an answer that does not say it was refused) stays pending and is resent: the
simulation found that forgetting one lets the high watermark pass a member the controller did add.

Nothing here reads a clock, touches a log, or sends a message: callers pass `now_ms`, the
leader's log end offset and its epoch cache, and act on what comes back. The seeded
simulation in tests/simulation/test_replication_simulation.py drives it with the controller's rules
in `controller.partition_change`. Single-threaded: one partition's state is used by one owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kavka.common import ErrorCode
from kavka.metadata.image import PartitionRegistration
from kavka.storage.leader_epoch import UNDEFINED_EPOCH, LeaderEpochFileCache

NO_LEADER = -1

# AlterPartition errors after which the leader waits for newer metadata instead of retrying.
_WAIT_FOR_METADATA = frozenset(
    {
        ErrorCode.fenced_leader_epoch,
        ErrorCode.invalid_update_version,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.invalid_request,
    }
)


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """FetchResponse.DivergingEpoch (KIP-320): where the leader's log for `epoch` ends."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition the leader wants sent: the whole new ISR, stamped with what it was based on."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


@dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower (Kafka's Replica: log end offset and catch-up times)."""

    log_end_offset: int = -1  # unknown until its first fetch in this leader epoch
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_ms: int = 0


def diverging_epoch(
    cache: LeaderEpochFileCache,
    *,
    fetch_offset: int,
    last_fetched_epoch: int,
    log_end_offset: int,
    log_start_offset: int,
) -> DivergingEpoch | None:
    """The leader's KIP-320 check of a follower's fetch position; None when the logs agree up to it.

    A follower that has nothing yet (last_fetched_epoch -1) never diverges.
    """
    if last_fetched_epoch == UNDEFINED_EPOCH:
        return None
    epoch, end = cache.end_offset_for(last_fetched_epoch, log_end_offset)
    if epoch == UNDEFINED_EPOCH:
        # The leader knows no epoch that old (or that new): the follower keeps nothing above
        # the leader's log start.
        return DivergingEpoch(UNDEFINED_EPOCH, log_start_offset)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return DivergingEpoch(epoch, end)
    return None


def truncation_offset(
    cache: LeaderEpochFileCache,
    diverging: DivergingEpoch,
    *,
    log_end_offset: int,
    log_start_offset: int,
) -> tuple[int, bool]:
    """Where a follower truncates on a diverging epoch, and whether that settles it.

    Kafka's AbstractFetcherThread: when the follower has the leader's epoch, truncate to the
    smaller of the two end offsets (done); when it does not, truncate to the end of the largest
    epoch it has below it and fetch again, which asks about an older epoch next time.
    """
    if diverging.epoch == UNDEFINED_EPOCH:
        return max(log_start_offset, min(diverging.end_offset, log_end_offset)), True
    epoch, end = cache.end_offset_for(diverging.epoch, log_end_offset)
    if epoch == UNDEFINED_EPOCH:
        return max(log_start_offset, min(diverging.end_offset, log_end_offset)), True
    if epoch == diverging.epoch:
        return max(log_start_offset, min(diverging.end_offset, end, log_end_offset)), True
    return max(log_start_offset, min(end, log_end_offset)), False


@dataclass(slots=True)
class LeaderState:
    """What a partition leader tracks for one leader epoch.

    Created when this broker becomes leader (`become_leader`): every follower's position is
    unknown again and every ISR member counts as caught up now, as Kafka's makeLeader resets
    them, so nobody is dropped from the ISR for having been behind the previous leader.
    """

    local_id: int
    registration: PartitionRegistration
    high_watermark: int
    leader_epoch_start_offset: int
    remotes: dict[int, RemoteReplica] = field(default_factory=dict)
    pending: IsrProposal | None = None
    min_isr: int = 1  # the topic's min.insync.replicas: below it the high watermark stays

    @classmethod
    def become_leader(
        cls,
        local_id: int,
        registration: PartitionRegistration,
        *,
        high_watermark: int,
        log_end_offset: int,
        now_ms: int,
    ) -> LeaderState:
        if registration.leader != local_id:
            raise ValueError(f"broker {local_id} is not the leader in {registration}")
        remotes = {
            r: RemoteReplica(last_caught_up_ms=now_ms if r in registration.isr else 0)
            for r in registration.replicas
            if r != local_id
        }
        return cls(
            local_id=local_id,
            registration=registration,
            high_watermark=min(high_watermark, log_end_offset),
            leader_epoch_start_offset=log_end_offset,
            remotes=remotes,
        )

    @property
    def leader_epoch(self) -> int:
        return self.registration.leader_epoch

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: committed members plus pending additions (KIP-497)."""
        isr = self.registration.isr
        if self.pending is None:
            return isr
        return isr + tuple(r for r in self.pending.new_isr if r not in isr)

    # ---------------------------------------------------------------- events

    def on_registration(self, registration: PartitionRegistration, *, log_end_offset: int) -> bool:
        """A newer registration for the same leader epoch (an ISR change committed). Returns
        False when it ends this leadership (another leader or epoch): the caller drops the state."""
        if registration.leader != self.local_id or registration.leader_epoch != self.leader_epoch:
            return False
        if registration.partition_epoch < self.registration.partition_epoch:
            return True  # stale
        self.registration = registration
        if self.pending is not None and registration.partition_epoch > self.pending.partition_epoch:
            self.pending = None  # our proposal (or a newer change) was committed
        for r in registration.replicas:
            if r != self.local_id and r not in self.remotes:
                self.remotes[r] = RemoteReplica()
        self.maybe_increment_high_watermark(log_end_offset)
        return True

    def on_alter_partition_error(self, error: ErrorCode) -> bool:
        """An AlterPartition answered with an error; True when the same proposal should be resent.

        The pending proposal is dropped only when the controller says it was *not* applied
        (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED). On any other answer -- or none at all --
        it may have been committed, so the maximal ISR keeps it until metadata says otherwise:
        forgetting an expansion that the controller did commit would let the high watermark
        pass records the new member lacks (Kafka's Partition.handleAlterPartitionError).
        """
        if error in (ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted):
            self.pending = None
            return False
        return error not in _WAIT_FOR_METADATA

    def on_follower_fetch(
        self,
        replica_id: int,
        *,
        fetch_offset: int,
        now_ms: int,
        log_end_offset: int,
        isr_eligible: bool = True,
    ) -> IsrProposal | None:
        """Record a follower fetch that passed `diverging_epoch`; may propose adding it to the ISR.

        `isr_eligible`: the leader's metadata shows the follower unfenced, not shutting down, and
        with the broker epoch its fetch carries (Kafka's isReplicaIsrEligible, KIP-903); an
        ineligible follower is not proposed, since the controller would answer INELIGIBLE_REPLICA
        and the next fetch would propose it again. The high watermark is recomputed by the caller
        with `maybe_increment_high_watermark`.
        """
        remote = self.remotes.get(replica_id)
        if remote is None:
            return None
        if fetch_offset >= log_end_offset:
            remote.last_caught_up_ms = max(remote.last_caught_up_ms, now_ms)
        elif fetch_offset >= remote.last_fetch_leader_log_end_offset:
            remote.last_caught_up_ms = max(remote.last_caught_up_ms, remote.last_fetch_ms)
        remote.last_fetch_leader_log_end_offset = log_end_offset
        remote.last_fetch_ms = now_ms
        remote.log_end_offset = fetch_offset
        if not isr_eligible:
            return None
        return self._maybe_expand_isr(replica_id, remote)

    def _maybe_expand_isr(self, replica_id: int, remote: RemoteReplica) -> IsrProposal | None:
        if self.pending is not None or replica_id in self.registration.isr:
            return None
        if (
            remote.log_end_offset < self.high_watermark
            or remote.log_end_offset < self.leader_epoch_start_offset
        ):
            return None
        return self._propose(self.registration.isr + (replica_id,))

    def maybe_shrink_isr(self, *, now_ms: int, replica_lag_time_max_ms: int) -> IsrProposal | None:
        """Propose dropping followers not caught up for replica.lag.time.max.ms."""
        if self.pending is not None:
            return None
        out_of_sync = [
            r
            for r in self.registration.isr
            if r != self.local_id
            and now_ms - self.remotes[r].last_caught_up_ms > replica_lag_time_max_ms
        ]
        if not out_of_sync:
            return None
        return self._propose(tuple(r for r in self.registration.isr if r not in out_of_sync))

    def may_lead_while_lapsed(self, *, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """Whether this leadership may go on while this broker's controller session has lapsed
        (broker.session_watch): the controller may have fenced it, but it can have elected another
        leader only where one exists to elect. Every other member of the maximal ISR (one that a
        pending AlterPartition adds too: it may be committed) fetched in this leader epoch within
        replica.lag.time.max.ms: a follower that became leader stops fetching from the old one,
        so none of them leads, and acks=all still waits for all of them, so nothing committed can
        diverge. Where one of them is silent, or this replica is the committed ISR alone but the
        partition has others (an ELR member, KIP-966, or an unclean election may lead), the
        partition steps down. A single replica has nobody to hand over to and never steps down."""
        if self.registration.isr == (self.local_id,):  # a pending expansion may not be committed
            return len(self.registration.replicas) <= 1
        for r in self.maximal_isr:
            if r == self.local_id:
                continue
            remote = self.remotes.get(r)
            if remote is None or remote.log_end_offset < 0 or now_ms - remote.last_fetch_ms > replica_lag_time_max_ms:
                return False
        return True

    def _propose(self, new_isr: tuple[int, ...]) -> IsrProposal:
        self.pending = IsrProposal(new_isr, self.leader_epoch, self.registration.partition_epoch)
        return self.pending

    def maybe_increment_high_watermark(self, log_end_offset: int) -> bool:
        """Move the high watermark up to the smallest log end offset over the maximal ISR -- not
        while the committed ISR is below min ISR (capped by the replicas; Kafka's isUnderMinIsr,
        KIP-966): the replicas that left the ISR then are eligible leaders (ELR) only because
        they hold every committed record."""
        if len(self.registration.isr) < min(self.min_isr, len(self.registration.replicas)):
            return False
        new_hw = log_end_offset
        for r in self.maximal_isr:
            if r == self.local_id:
                continue
            remote = self.remotes.get(r)
            if remote is None or remote.log_end_offset < 0:
                return False  # a member not heard from in this epoch holds the high watermark
            new_hw = min(new_hw, remote.log_end_offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def lagging_replicas(self, log_end_offset: int) -> dict[int, int]:
        """Follower id -> how many offsets it is behind the leader (unknown: the whole log)."""
        return {r: log_end_offset - max(rem.log_end_offset, 0) for r, rem in self.remotes.items()}
