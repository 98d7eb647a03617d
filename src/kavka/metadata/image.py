"""MetadataImage: an immutable view of the cluster, as the committed metadata log says it is.

Modelled on Kafka's metadata/.../image/MetadataImage.java: topics (by id and by name) with each
partition's registration, broker registrations, configs per resource, the producer-id high mark,
the users' SCRAM credentials, the ACLs and the client quotas.
An image is never mutated: a MetadataDelta (delta.py) replays records over one and yields the next.
`PartitionRegistration` is the one form of a partition's replication state in kavka: the
controller decides on it, the broker's Partition applies it (replication.replica_state). Pure:
no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kavka.authorizer import Acl
from kavka.common import ConfigResourceType

EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """A partition's replication state as the controller committed it (Kafka's PartitionRegistration)."""

    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[str, ...] = ()
    # An ongoing reassignment (KIP-455): `replicas` is the target followed by `removing_replicas`;
    # `adding_replicas` are target members that are catching up. Both empty: none in progress.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # KIP-966: replicas that left the ISR while it was below min.insync.replicas with every
    # committed record (eligible to lead when the ISR is empty), and the last known such replicas
    # that no longer are (they shut down uncleanly), kept for an operator's recovery.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    endpoints: tuple[tuple[str, str, int], ...]
    rack: str | None
    log_dirs: tuple[str, ...]
    epoch: int = -1  # offset of its RegisterBrokerRecord (Kafka's broker epoch)
    fenced: bool = True  # fenced brokers are not in Metadata and lead nothing
    in_controlled_shutdown: bool = False

    @property
    def usable(self) -> bool:
        """May lead partitions and be shown to clients (unfenced, not shutting down)."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of this broker on `listener` (Kafka answers clients on the listener they
        came in on); "" means the first endpoint. None if it has no such listener."""
        for name, host, port in self.endpoints:
            if not listener or name.upper() == listener.upper():
                return host, port
        return None


@dataclass(frozen=True, slots=True)
class ScramCredentialData:
    """A user's SCRAM credential for one mechanism, as UserScramCredentialRecord carries it (Kafka's
    ScramCredentialData): never the password."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


# A client quota entity: (entity type, entity name) pairs sorted by type; a None name is the default.
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # offset of the last record applied
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY)
    # (resource_type, resource_name) -> {config name: value}
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY)
    next_producer_id: int = 0  # producer ids below this are allocated (ProducerIdsRecord)
    # (mechanism type, user name) -> credential (Kafka's ScramImage; kavka.scram for the types)
    scram: Mapping[tuple[int, str], ScramCredentialData] = field(default_factory=lambda: EMPTY)
    # ACL id (Kafka Uuid, base64url) -> ACL (Kafka's AclsImage); replaced, never mutated, on a change
    acls: Mapping[str, Acl] = field(default_factory=lambda: EMPTY)
    # quota entity ((type, name or None for the default), ... sorted by type) -> {quota key: value}
    # (Kafka's ClientQuotasImage; kavka.controller.quota_control for the keys)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: EMPTY)

    def usable_brokers(self) -> list[int]:
        """Ids of brokers that may lead partitions: unfenced and not in controlled shutdown."""
        return sorted(b.broker_id for b in self.brokers.values() if b.usable)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((ConfigResourceType.TOPIC, name), EMPTY)

    def broker_configs(self, broker_id: int | None) -> Mapping[str, str]:
        """Dynamic broker configs: per broker (id) or the cluster default (None)."""
        key = (ConfigResourceType.BROKER, "" if broker_id is None else str(broker_id))
        return self.configs.get(key, EMPTY)
