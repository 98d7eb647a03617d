"""Fetching from the closest replica (KIP-392): which replica a consumer should read from.

A consumer that sends its rack (`client.rack`, the Fetch request's `rack_id`, v11+) to a
partition's leader may be told to read from another replica instead: the leader answers that
partition with `preferred_read_replica` and no records, and the client sends its next fetches to
that broker. The choice is the leader's, made per fetch by the broker's `replica.selector.class`:

- **Who may be chosen** (Kafka's ReplicaManager.findPreferredReadReplica): the leader itself, and
  every follower that is in the committed ISR, lives on a broker that is registered and usable
  (unfenced, not shutting down), and holds the fetch offset (its log start <= fetch offset <= its
  log end offset, as the leader saw them in its last fetch). Followers fetching as replicas are
  never redirected. Followers cannot read tiered storage yet and their local log start may lie
  above the leader's, so a partition with `remote.storage.enable` is always served by its leader.
- **Who is chosen** (Kafka's RackAwareReplicaSelector): with no client rack, or no candidate in
  the client's rack, or the leader in it, the leader; otherwise the most caught-up candidate of
  that rack (largest log end offset, then the shortest time since it was caught up, then the
  largest broker id, as Kafka's `ReplicaView.comparator` orders them).
- **What the client is told**: the chosen follower's broker id, or -1 (read here) when the choice
  is the leader.

`select` is pure: the caller gathers the views (`partition_view`) and passes the clock. Called on
the event-loop thread by the Fetch handler, on the leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from kavka.config import RACK_AWARE_REPLICA_SELECTOR
from kavka.metadata.image import BrokerRegistration
from kavka.replication.partition import Partition, TopicPartition

NO_PREFERRED_REPLICA = -1  # FetchResponse.preferred_read_replica: "read from the broker you asked"


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """What a consumer's Fetch says about it (Kafka's ClientMetadata)."""

    rack_id: str
    client_id: str
    client_address: str


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the leader sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class PartitionView:
    """The candidates of one partition, the leader among them (Kafka's PartitionView)."""

    replicas: tuple[ReplicaView, ...]
    leader: ReplicaView


class ReplicaSelector(Protocol):
    def select(self, tp: TopicPartition, client: ClientMetadata, partition: PartitionView) -> ReplicaView | None:
        """The replica the client should read from; None or the leader: the leader."""
        ...


class RackAwareReplicaSelector:
    """A replica in the client's rack, else the leader (org.apache.kafka.common.replica.RackAwareReplicaSelector)."""

    def select(self, tp: TopicPartition, client: ClientMetadata, partition: PartitionView) -> ReplicaView | None:
        if not client.rack_id:
            return partition.leader
        same_rack = [r for r in partition.replicas if r.rack == client.rack_id]
        if not same_rack or partition.leader in same_rack:
            return partition.leader
        return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms, r.broker_id))


@cache
def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector `replica.selector.class` names (config.py has refused any other value); None when unset."""
    if not class_name:
        return None
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector()
    raise ValueError(f"replica.selector.class: unsupported {class_name!r}")


def partition_view(
    partition: Partition, brokers: Mapping[int, BrokerRegistration], *, fetch_offset: int, now_ms: int
) -> PartitionView | None:
    """The candidates for a consumer fetch at `fetch_offset` of a partition this broker leads."""
    ls = partition.leader_state
    if ls is None:
        return None
    leader_reg = brokers.get(partition.local_broker_id)
    leader = ReplicaView(partition.local_broker_id, leader_reg.rack if leader_reg else None, partition.log_end_offset, 0)
    candidates = [leader]
    if not partition.log.config.remote_storage_enable:
        for r in partition.isr:
            remote = ls.remotes.get(r)
            reg = brokers.get(r)
            if r == partition.local_broker_id or remote is None or reg is None or not reg.usable:
                continue
            if not partition.follower_log_start_offset(r) <= fetch_offset <= remote.log_end_offset:
                continue
            candidates.append(ReplicaView(r, reg.rack, remote.log_end_offset, now_ms - remote.last_caught_up_ms))
    return PartitionView(tuple(candidates), leader)


def preferred_read_replica(
    selector: ReplicaSelector | None,
    partition: Partition,
    *,
    client: ClientMetadata,
    brokers: Mapping[int, BrokerRegistration],
    fetch_offset: int,
    now_ms: int,
) -> int:
    """The broker a consumer's fetch should go to instead of this leader, or NO_PREFERRED_REPLICA."""
    if selector is None:
        return NO_PREFERRED_REPLICA
    view = partition_view(partition, brokers, fetch_offset=fetch_offset, now_ms=now_ms)
    if view is None:
        return NO_PREFERRED_REPLICA
    chosen = selector.select(partition.tp, client, view)
    if chosen is None or chosen.broker_id == view.leader.broker_id:
        return NO_PREFERRED_REPLICA
    return chosen.broker_id
