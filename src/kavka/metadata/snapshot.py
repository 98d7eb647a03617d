"""A MetadataImage as the metadata records that rebuild it: the content of a metadata snapshot.

`image_records(image)` lists records that, replayed into an empty image by
MetadataDelta, give back an image equal to `image` (its offset aside): broker
registrations, then each topic followed by its partitions (with their leader
and partition epochs), then every config, then the producer-id high mark, then
every SCRAM credential (salt, StoredKey, ServerKey, iterations: never a password), then every
ACL with its id, then every client quota.
Deterministic (sorted) so two nodes with one image write the same snapshot.
The raft layer wraps them in a `.checkpoint` file (raft/snapshot.py).

Broker serialisation is one small function (`broker_records`): the broker
epoch, fencing and controlled-shutdown state are written out. Pure; any thread.
"""

from __future__ import annotations

import base64

from kavka.metadata.image import MetadataImage
from kavka.metadata.records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)


def broker_records(image: MetadataImage) -> list[MetadataRecord]:
    # The epoch is written out: replayed from a snapshot, the record sits at another offset.
    return [
        RegisterBrokerRecord(
            b.broker_id,
            b.incarnation_id,
            b.endpoints,
            b.rack,
            b.log_dirs,
            broker_epoch=b.epoch,
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
        )
        for _, b in sorted(image.brokers.items())
    ]


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    records = broker_records(image)
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        records.append(TopicRecord(topic.name, topic.topic_id))
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            records.append(
                PartitionRecord(
                    topic.topic_id,
                    pid,
                    p.replicas,
                    p.isr,
                    p.leader,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    directories=p.directories,
                    removing_replicas=p.removing_replicas,
                    adding_replicas=p.adding_replicas,
                    eligible_leader_replicas=p.elr,
                    last_known_elr=p.last_known_elr,
                )
            )
    for (resource_type, resource_name), values in sorted(image.configs.items()):
        for key in sorted(values):
            records.append(ConfigRecord(resource_type, resource_name, key, values[key]))
    if image.next_producer_id > 0:
        # The broker that took the last block is not part of the image; only the mark matters.
        records.append(ProducerIdsRecord(-1, image.next_producer_id))
    records.extend(scram_records(image))
    records.extend(acl_records(image))
    records.extend(client_quota_records(image))
    return records


def acl_records(image: MetadataImage) -> list[MetadataRecord]:
    return [
        AccessControlEntryRecord(
            acl_id, a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission_type
        )
        for acl_id, a in sorted(image.acls.items())
    ]


def scram_records(image: MetadataImage) -> list[MetadataRecord]:
    return [
        UserScramCredentialRecord(name, mechanism, _b64(c.salt), _b64(c.stored_key), _b64(c.server_key), c.iterations)
        for (mechanism, name), c in sorted(image.scram.items())
    ]


def client_quota_records(image: MetadataImage) -> list[MetadataRecord]:
    return [
        ClientQuotaRecord(entity, key, values[key])
        for entity, values in sorted(image.client_quotas.items(), key=lambda e: repr(e[0]))
        for key in sorted(values)
    ]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
