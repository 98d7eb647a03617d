"""MetadataImage: an immutable view of the cluster, and MetadataDelta that yields the next one.

Modelled on Kafka's metadata/.../image/MetadataImage.java and MetadataDelta.java.
An image is never mutated: `MetadataDelta(image).replay(r)...apply()` returns a
new image, and `delta` tells listeners what changed (topics created and
deleted, partitions changed, configs changed) so a broker can act on exactly
that. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kavka.common import DirectoryId
from kavka.controller.records import (
    BROKER_RESOURCE,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
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

    @property
    def reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)


def _directories_for(p: PartitionRegistration, replicas: tuple[int, ...]) -> tuple[str, ...]:
    """KIP-858: a new replica set without `directories` keeps each kept replica's dir; a new
    replica is UNASSIGNED (Uuid 0) until its broker reports where it placed it."""
    if not p.directories:
        return ()
    known = dict(zip(p.replicas, p.directories, strict=False))
    return tuple(known.get(r, DirectoryId.UNASSIGNED) for r in replicas)


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


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # offset of the last record applied
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    # (resource_type, resource_name) -> {config name: value}
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0  # producer ids below this are allocated (ProducerIdsRecord)

    def usable_brokers(self) -> list[int]:
        """Ids of brokers that may lead partitions: unfenced and not in controlled shutdown."""
        return sorted(b.broker_id for b in self.brokers.values() if b.usable)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((2, name), _EMPTY)

    def broker_configs(self, broker_id: int | None) -> Mapping[str, str]:
        """Dynamic broker configs: per broker (id) or the cluster default (None)."""
        key = (BROKER_RESOURCE, "" if broker_id is None else str(broker_id))
        return self.configs.get(key, _EMPTY)


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

    def _topic(self, topic_id: str) -> TopicImage | None:
        if topic_id in self.topics:
            return self.topics[topic_id]
        return self.image.topics_by_id.get(topic_id)

    def replay(self, record: Any, offset: int) -> None:
        self.offset = offset
        if isinstance(record, TopicRecord):
            self.topics[record.topic_id] = TopicImage(record.name, record.topic_id, _EMPTY)
            self.created_topics.add(record.topic_id)
        elif isinstance(record, PartitionRecord):
            t = self._topic(record.topic_id)
            if t is None:
                return  # a partition of a removed topic: nothing to do
            parts = dict(t.partitions)
            parts[record.partition_id] = PartitionRegistration(
                record.partition_id,
                tuple(record.replicas),
                tuple(record.isr),
                record.leader,
                record.leader_epoch,
                record.partition_epoch,
                tuple(record.directories),
                removing_replicas=tuple(record.removing_replicas),
                adding_replicas=tuple(record.adding_replicas),
            )
            self.topics[record.topic_id] = replace(t, partitions=MappingProxyType(parts))
            self.changed_partitions.add((record.topic_id, record.partition_id))
        elif isinstance(record, PartitionChangeRecord):
            t = self._topic(record.topic_id)
            if t is None or record.partition_id not in t.partitions:
                return
            p = t.partitions[record.partition_id]
            # Kafka's PartitionRegistration.merge bumps the leader epoch whenever the record names a
            # leader, the same one included: a reassignment that removes replicas does so to fence them.
            leader_changed = record.leader is not None
            p = replace(
                p,
                leader=p.leader if record.leader is None else record.leader,
                isr=p.isr if record.isr is None else tuple(record.isr),
                replicas=p.replicas if record.replicas is None else tuple(record.replicas),
                directories=(
                    tuple(record.directories) if record.directories is not None
                    else _directories_for(p, record.replicas) if record.replicas is not None
                    else p.directories
                ),
                removing_replicas=(
                    p.removing_replicas if record.removing_replicas is None else tuple(record.removing_replicas)
                ),
                adding_replicas=p.adding_replicas if record.adding_replicas is None else tuple(record.adding_replicas),
                leader_epoch=p.leader_epoch + (1 if leader_changed else 0),
                partition_epoch=p.partition_epoch + 1,
            )
            parts = dict(t.partitions)
            parts[record.partition_id] = p
            self.topics[record.topic_id] = replace(t, partitions=MappingProxyType(parts))
            self.changed_partitions.add((record.topic_id, record.partition_id))
        elif isinstance(record, RemoveTopicRecord):
            t = self._topic(record.topic_id)
            if t is None:
                return
            self.topics[record.topic_id] = None
            self.created_topics.discard(record.topic_id)
            self.deleted_topics[record.topic_id] = t
            key = (2, t.name)
            self.configs[key] = {}
            self.changed_configs.add(key)
        elif isinstance(record, ConfigRecord):
            key = (record.resource_type, record.resource_name)
            cur = self.configs.get(key)
            if cur is None:
                cur = dict(self.image.configs.get(key, _EMPTY))
                self.configs[key] = cur
            if record.value is None:
                cur.pop(record.name, None)
            else:
                cur[record.name] = record.value
            self.changed_configs.add(key)
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = max(record.next_producer_id, self.next_producer_id or 0)
        elif isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerRegistration(
                record.broker_id,
                record.incarnation_id,
                tuple(tuple(e) for e in record.endpoints),  # type: ignore[misc]
                record.rack,
                tuple(record.log_dirs),
                epoch=record.broker_epoch if record.broker_epoch >= 0 else offset,
                fenced=record.fenced,
                in_controlled_shutdown=record.in_controlled_shutdown,
            )
        elif isinstance(record, BrokerRegistrationChangeRecord):
            b = self.brokers.get(record.broker_id) or self.image.brokers.get(record.broker_id)
            if b is None or b.epoch != record.broker_epoch:
                return  # a change to an earlier incarnation's registration
            self.brokers[record.broker_id] = replace(
                b,
                fenced=b.fenced if record.fenced is None else record.fenced,
                in_controlled_shutdown=(
                    b.in_controlled_shutdown if record.in_controlled_shutdown is None else record.in_controlled_shutdown
                ),
                log_dirs=b.log_dirs if record.log_dirs is None else tuple(record.log_dirs),
            )
        else:
            raise TypeError(f"not a metadata record: {record!r}")

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
        return MetadataImage(
            offset=max(self.offset, img.offset),
            topics_by_id=MappingProxyType(by_id),
            topics_by_name=MappingProxyType(by_name),
            configs=MappingProxyType(configs),
            brokers=MappingProxyType(brokers),
            next_producer_id=max(img.next_producer_id, self.next_producer_id or 0),
        )
