"""MetadataDelta: committed metadata records replayed over an image, yielding the next image.

Modelled on Kafka's metadata/.../image/MetadataDelta.java. `MetadataDelta(image).replay(record,
offset)` for each committed record, then `apply()` returns a new MetadataImage; the delta also
says what changed -- topics created and deleted, partitions changed, configs changed -- so each
publisher acts on exactly that. Each record type has one replay function, found by the record's
class in `_REPLAY` (a record type without one is refused: TypeError). Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kavka.authorizer import Acl
from kavka.common import (
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    DirectoryId,
    PatternType,
    ResourceType,
)
from kavka.metadata.image import (
    EMPTY,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredentialData,
    TopicImage,
)
from kavka.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)


def _directories_for(p: PartitionRegistration, replicas: tuple[int, ...]) -> tuple[str, ...]:
    """KIP-858: a new replica set without `directories` keeps each kept replica's dir; a new
    replica is UNASSIGNED (Uuid 0) until its broker reports where it placed it."""
    if not p.directories:
        return ()
    known = dict(zip(p.replicas, p.directories, strict=False))
    return tuple(known.get(r, DirectoryId.UNASSIGNED) for r in replicas)


@dataclass(slots=True)
class MetadataDelta:
    image: MetadataImage
    offset: int = -1
    topics: dict[str, TopicImage | None] = field(default_factory=dict)  # by id; None = removed
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    created_topics: set[str] = field(default_factory=set)  # ids
    deleted_topics: dict[str, TopicImage] = field(default_factory=dict)  # id -> last image
    changed_partitions: set[tuple[str, int]] = field(default_factory=set)  # (topic id, partition)
    changed_configs: set[tuple[int, str]] = field(default_factory=set)
    next_producer_id: int | None = None
    scram: dict[tuple[int, str], ScramCredentialData | None] = field(default_factory=dict)  # None = removed
    acls: dict[str, Acl | None] = field(default_factory=dict)  # by id; None = removed
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)  # {}: no quota left

    def topic(self, topic_id: str) -> TopicImage | None:
        """The topic as this delta leaves it (None: unknown or removed)."""
        if topic_id in self.topics:
            return self.topics[topic_id]
        return self.image.topics_by_id.get(topic_id)

    def replay(self, record: Any, offset: int) -> None:
        self.offset = offset
        fn = _REPLAY.get(type(record))
        if fn is None:
            raise TypeError(f"not a metadata record: {record!r}")
        fn(self, record, offset)

    def _set_partition(self, t: TopicImage, p: PartitionRegistration) -> None:
        parts = dict(t.partitions)
        parts[p.partition_id] = p
        self.topics[t.topic_id] = replace(t, partitions=MappingProxyType(parts))
        self.changed_partitions.add((t.topic_id, p.partition_id))

    def apply(self) -> MetadataImage:
        img = self.image
        by_id = dict(img.topics_by_id)
        for tid, t in self.topics.items():
            if t is None:
                by_id.pop(tid, None)
            else:
                by_id[tid] = t
        by_name = {t.name: t for t in by_id.values()}
        configs = dict(img.configs)
        for key, vals in self.configs.items():
            if vals:
                configs[key] = MappingProxyType(dict(vals))
            else:
                configs.pop(key, None)
        brokers = dict(img.brokers)
        brokers.update(self.brokers)
        scram = img.scram
        if self.scram:
            scram = dict(img.scram)
            for key, cred in self.scram.items():
                if cred is None:
                    scram.pop(key, None)
                else:
                    scram[key] = cred
            scram = MappingProxyType(scram)
        acls = img.acls
        if self.acls:
            acls = dict(img.acls)
            for acl_id, acl in self.acls.items():
                if acl is None:
                    acls.pop(acl_id, None)
                else:
                    acls[acl_id] = acl
            acls = MappingProxyType(acls)
        client_quotas = img.client_quotas
        if self.client_quotas:
            client_quotas = dict(img.client_quotas)
            for entity, values in self.client_quotas.items():
                if values:
                    client_quotas[entity] = MappingProxyType(dict(values))
                else:
                    client_quotas.pop(entity, None)
            client_quotas = MappingProxyType(client_quotas)
        return MetadataImage(
            offset=max(self.offset, img.offset),
            topics_by_id=MappingProxyType(by_id),
            topics_by_name=MappingProxyType(by_name),
            configs=MappingProxyType(configs),
            brokers=MappingProxyType(brokers),
            next_producer_id=max(img.next_producer_id, self.next_producer_id or 0),
            scram=scram,
            acls=acls,
            client_quotas=client_quotas,
        )


def _topic(d: MetadataDelta, r: TopicRecord, offset: int) -> None:
    d.topics[r.topic_id] = TopicImage(r.name, r.topic_id, EMPTY)
    d.created_topics.add(r.topic_id)


def _partition(d: MetadataDelta, r: PartitionRecord, offset: int) -> None:
    t = d.topic(r.topic_id)
    if t is None:
        return  # a partition of a removed topic: nothing to do
    d._set_partition(t, PartitionRegistration(
        r.partition_id,
        tuple(r.replicas),
        tuple(r.isr),
        r.leader,
        r.leader_epoch,
        r.partition_epoch,
        tuple(r.directories),
        removing_replicas=tuple(r.removing_replicas),
        adding_replicas=tuple(r.adding_replicas),
        elr=tuple(r.eligible_leader_replicas),
        last_known_elr=tuple(r.last_known_elr),
    ))


def _partition_change(d: MetadataDelta, r: PartitionChangeRecord, offset: int) -> None:
    t = d.topic(r.topic_id)
    if t is None or r.partition_id not in t.partitions:
        return
    p = t.partitions[r.partition_id]
    # Kafka's PartitionRegistration.merge bumps the leader epoch whenever the record names a
    # leader, the same one included: a reassignment that removes replicas does so to fence them.
    leader_changed = r.leader is not None
    d._set_partition(t, replace(
        p,
        leader=p.leader if r.leader is None else r.leader,
        isr=p.isr if r.isr is None else tuple(r.isr),
        replicas=p.replicas if r.replicas is None else tuple(r.replicas),
        directories=(
            tuple(r.directories) if r.directories is not None
            else _directories_for(p, r.replicas) if r.replicas is not None
            else p.directories
        ),
        removing_replicas=p.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas),
        adding_replicas=p.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas),
        elr=p.elr if r.eligible_leader_replicas is None else tuple(r.eligible_leader_replicas),
        last_known_elr=p.last_known_elr if r.last_known_elr is None else tuple(r.last_known_elr),
        leader_epoch=p.leader_epoch + (1 if leader_changed else 0),
        partition_epoch=p.partition_epoch + 1,
    ))


def _remove_topic(d: MetadataDelta, r: RemoveTopicRecord, offset: int) -> None:
    t = d.topic(r.topic_id)
    if t is None:
        return
    d.topics[r.topic_id] = None
    d.created_topics.discard(r.topic_id)
    d.deleted_topics[r.topic_id] = t
    key = (ConfigResourceType.TOPIC, t.name)
    d.configs[key] = {}
    d.changed_configs.add(key)


def _config(d: MetadataDelta, r: ConfigRecord, offset: int) -> None:
    key = (r.resource_type, r.resource_name)
    cur = d.configs.get(key)
    if cur is None:
        cur = dict(d.image.configs.get(key, EMPTY))
        d.configs[key] = cur
    if r.value is None:
        cur.pop(r.name, None)
    else:
        cur[r.name] = r.value
    d.changed_configs.add(key)


def _producer_ids(d: MetadataDelta, r: ProducerIdsRecord, offset: int) -> None:
    d.next_producer_id = max(r.next_producer_id, d.next_producer_id or 0)


def _user_scram_credential(d: MetadataDelta, r: UserScramCredentialRecord, offset: int) -> None:
    d.scram[(r.mechanism, r.name)] = ScramCredentialData(
        base64.b64decode(r.salt), base64.b64decode(r.stored_key), base64.b64decode(r.server_key), r.iterations
    )


def _remove_user_scram_credential(d: MetadataDelta, r: RemoveUserScramCredentialRecord, offset: int) -> None:
    d.scram[(r.mechanism, r.name)] = None


def _access_control_entry(d: MetadataDelta, r: AccessControlEntryRecord, offset: int) -> None:
    d.acls[r.id] = Acl(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )


def _remove_access_control_entry(d: MetadataDelta, r: RemoveAccessControlEntryRecord, offset: int) -> None:
    d.acls[r.id] = None  # an id never added is nothing to remove (Kafka's AclsDelta would throw)


def _client_quota(d: MetadataDelta, r: ClientQuotaRecord, offset: int) -> None:
    entity = tuple(sorted((t, n) for t, n in r.entity))
    cur = d.client_quotas.get(entity)
    if cur is None:
        cur = d.client_quotas[entity] = dict(d.image.client_quotas.get(entity, EMPTY))
    if r.remove:
        cur.pop(r.key, None)
    else:
        cur[r.key] = float(r.value)


def _register_broker(d: MetadataDelta, r: RegisterBrokerRecord, offset: int) -> None:
    d.brokers[r.broker_id] = BrokerRegistration(
        r.broker_id,
        r.incarnation_id,
        tuple((name, host, port) for name, host, port in r.endpoints),
        r.rack,
        tuple(r.log_dirs),
        epoch=r.broker_epoch if r.broker_epoch >= 0 else offset,
        fenced=r.fenced,
        in_controlled_shutdown=r.in_controlled_shutdown,
    )


def _broker_registration_change(d: MetadataDelta, r: BrokerRegistrationChangeRecord, offset: int) -> None:
    b = d.brokers.get(r.broker_id) or d.image.brokers.get(r.broker_id)
    if b is None or b.epoch != r.broker_epoch:
        return  # a change to an earlier incarnation's registration
    d.brokers[r.broker_id] = replace(
        b,
        fenced=b.fenced if r.fenced is None else r.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown if r.in_controlled_shutdown is None else r.in_controlled_shutdown,
        log_dirs=b.log_dirs if r.log_dirs is None else tuple(r.log_dirs),
    )


_REPLAY: dict[type, Callable[[MetadataDelta, Any, int], None]] = {
    TopicRecord: _topic,
    PartitionRecord: _partition,
    PartitionChangeRecord: _partition_change,
    RemoveTopicRecord: _remove_topic,
    ConfigRecord: _config,
    ProducerIdsRecord: _producer_ids,
    RegisterBrokerRecord: _register_broker,
    BrokerRegistrationChangeRecord: _broker_registration_change,
    UserScramCredentialRecord: _user_scram_credential,
    RemoveUserScramCredentialRecord: _remove_user_scram_credential,
    AccessControlEntryRecord: _access_control_entry,
    RemoveAccessControlEntryRecord: _remove_access_control_entry,
    ClientQuotaRecord: _client_quota,
}
