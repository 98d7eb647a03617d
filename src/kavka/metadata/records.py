"""Metadata records: every cluster change is one of these, appended to `__cluster_metadata`.

They mirror KRaft's metadata record types (metadata/src/main/resources/common/
metadata/*.json in Apache Kafka) field for field where kavka uses them. On disk
each is one Kafka record inside an ordinary record batch: the key is the record
type name, the value is its JSON -- readable with any Kafka tool, and versioned
by the `v` field so the format can evolve.

Pure values: no I/O, no clock.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    TYPE: ClassVar[str] = "RegisterBroker"
    broker_id: int
    incarnation_id: str
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)
    rack: str | None = None
    log_dirs: tuple[str, ...] = ()  # directory ids (KIP-858)
    # Kafka's BrokerEpoch is the offset of this record; -1 (what the controller writes) means
    # "this record's offset". A snapshot writes the epoch out, since it replays at another offset.
    broker_epoch: int = -1
    fenced: bool = True  # a registered broker is fenced until its heartbeat shows it caught up
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Fencing and controlled shutdown of a registration (Kafka's BrokerRegistrationChangeRecord).

    Applies only to the registration whose epoch is `broker_epoch`; None leaves a field as it is.
    """

    TYPE: ClassVar[str] = "BrokerRegistrationChange"
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None
    # KIP-858: the broker's online directory ids after a heartbeat reported some offline.
    log_dirs: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE: ClassVar[str] = "Topic"
    name: str
    topic_id: str  # Kafka Uuid, base64url


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    TYPE: ClassVar[str] = "Partition"
    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    directories: tuple[str, ...] = ()
    # An ongoing reassignment (Kafka's PartitionRecord RemovingReplicas/AddingReplicas): `replicas`
    # is the target followed by the replicas being removed.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # KIP-966 (Kafka's PartitionRecord v2 EligibleLeaderReplicas, LastKnownElr).
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    TYPE: ClassVar[str] = "PartitionChange"
    topic_id: str
    partition_id: int
    leader: int | None = None  # None: unchanged
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    directories: tuple[str, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    eligible_leader_replicas: tuple[int, ...] | None = None  # KIP-966
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "RemoveTopic"
    topic_id: str


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    TYPE: ClassVar[str] = "Config"
    resource_type: int
    resource_name: str  # "" for the cluster-wide broker default
    name: str
    value: str | None  # None removes the override


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to a broker; ids below next_producer_id are taken."""

    TYPE: ClassVar[str] = "ProducerIds"
    broker_id: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord, apiKey 11).

    `mechanism` is Kafka's type byte (1 SCRAM-SHA-256, 2 SCRAM-SHA-512; kavka.scram). salt,
    stored_key and server_key are the bytes base64-encoded (the JSON value has no bytes type);
    the password itself is never written. A later record for the same (name, mechanism) replaces it.
    """

    TYPE: ClassVar[str] = "UserScramCredential"
    name: str
    mechanism: int
    salt: str = field(repr=False)
    stored_key: str = field(repr=False)
    server_key: str = field(repr=False)
    iterations: int = 4096


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    """Deletes a user's credential for one mechanism (Kafka's RemoveUserScramCredentialRecord, apiKey 22)."""

    TYPE: ClassVar[str] = "RemoveUserScramCredential"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL (Kafka's AccessControlEntryRecord, apiKey 6): `id` is a Kafka Uuid (base64url) that
    RemoveAccessControlEntryRecord names; the enums are Kafka's codes (kavka.common's ResourceType,
    PatternType, AclOperation, AclPermissionType). The controller never writes two records with
    the same ACL (controller.acl_control)."""

    TYPE: ClassVar[str] = "AccessControlEntry"
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """Deletes the ACL with this id (Kafka's RemoveAccessControlEntryRecord, apiKey 7)."""

    TYPE: ClassVar[str] = "RemoveAccessControlEntry"
    id: str


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """A client quota set or removed (Kafka's ClientQuotaRecord, apiKey 14; KIP-546).

    `entity` is the quota entity as (entity type, entity name) pairs, sorted by type: types are
    "user", "client-id" and "ip"; a name of None is that type's default. `key` is a quota key
    (controller.quota_control.QUOTA_KEYS); `remove` deletes the key for the entity, otherwise
    `value` replaces it.
    """

    TYPE: ClassVar[str] = "ClientQuota"
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ProducerIdsRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
)

_TYPES: dict[str, type] = {
    t.TYPE: t
    for t in (
        RegisterBrokerRecord,
        BrokerRegistrationChangeRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        ProducerIdsRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
    )
}
_VERSION = 0


class MetadataRecordError(ValueError):
    pass


def encode(record: Any) -> tuple[bytes, bytes]:
    """(key, value) of the Kafka record that carries `record`."""
    body = asdict(record)
    body["v"] = _VERSION
    return record.TYPE.encode(), json.dumps(body, separators=(",", ":")).encode()


def decode(key: bytes | None, value: bytes | None) -> MetadataRecord:
    if key is None or value is None:
        raise MetadataRecordError("metadata record without key or value")
    cls = _TYPES.get(key.decode("utf-8", "replace"))
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {key!r}")
    body = json.loads(value)
    body.pop("v", None)
    for k, v in list(body.items()):
        if isinstance(v, list):
            body[k] = tuple(tuple(x) if isinstance(x, list) else x for x in v)
    return cls(**body)


@dataclass(frozen=True, slots=True)
class RecordsAndResult:
    """What a controller operation yields: records to commit, and the answer."""

    records: tuple[Any, ...] = ()
    result: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
