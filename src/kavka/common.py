"""Kafka's vocabulary: the ids and enums every layer shares (Kafka's `org.apache.kafka.common`).

One definition of each, at the bottom of the import graph: this module imports nothing of kavka's,
so protocol, storage, raft, metadata, replication, the coordinators and the broker all name the
same things the same way. Values follow Kafka's wire protocol exactly (the enums are the numbers
that travel in requests, records and responses), so `ConfigResourceType.TOPIC` is what a
DescribeConfigs request carries, and `int(x)` is always the wire value.

- `TopicPartition` (topic name, partition) and `TopicIdPartition` (topic id, name, partition) are
  named tuples: hashable, cheap on the hot path, and equal to the plain tuples older code and the
  on-disk checkpoints use.
- `ErrorCode` is kio's (generated from Kafka's Errors.java); every layer, raft included, uses it.
- `DirectoryId` holds KIP-858's reserved directory ids.

Pure values: no I/O, no clock.
"""

from __future__ import annotations

import enum
import uuid
from typing import NamedTuple

from kio.schema.errors import ErrorCode

__all__ = [
    "AclOperation",
    "AclPermissionType",
    "AlterConfigOpType",
    "BrokerControlState",
    "BrokerState",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigType",
    "DirectoryId",
    "ElectionType",
    "ErrorCode",
    "IsolationLevel",
    "PatternType",
    "ResourceType",
    "TopicIdPartition",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    """A partition of a topic by name (Kafka's TopicPartition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class TopicIdPartition(NamedTuple):
    """A partition of a topic by id and name (Kafka's TopicIdPartition). Tiered storage keys its
    remote segments by it: a topic deleted and created again under the same name is another topic."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ConfigResourceType(enum.IntEnum):
    """ConfigResource.Type: the resource_type of DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
    and of a ConfigRecord."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterConfigOpType(enum.IntEnum):
    """IncrementalAlterConfigs config_operation (KIP-339; Kafka's AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config_source values (DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config_type values (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ResourceType(enum.IntEnum):
    """An ACL's resource type (org.apache.kafka.common.resource.ResourceType). Not the same
    numbers as ConfigResourceType: Kafka has two enums, and so does kavka."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """An ACL's resource pattern type (org.apache.kafka.common.resource.PatternType)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """org.apache.kafka.common.acl.AclOperation."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """org.apache.kafka.common.acl.AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class IsolationLevel(enum.IntEnum):
    """Fetch and ListOffsets isolation_level (KIP-98)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class ElectionType(enum.IntEnum):
    """ElectLeaders election_type (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


class BrokerState(enum.IntEnum):
    """A broker process's own state (org.apache.kafka.metadata.BrokerState), as Kafka reports it
    in the kafka.server:type=KafkaServer,name=BrokerState metric."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7
    UNKNOWN = 127


class BrokerControlState(enum.Enum):
    """What the controller makes of a registered broker (org.apache.kafka.controller.BrokerControlState)."""

    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"


class DirectoryId:
    """KIP-858's reserved directory ids (common/DirectoryId.java), as kavka writes Uuids: base64url
    without padding. A PartitionRecord's `directories` entry is a real log dir's id or one of these."""

    UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid(0, 0): the broker has not said where it put the replica
    LOST = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1): the replica's directory is gone
    MIGRATING = "AAAAAAAAAAAAAAAAAAAAAg"  # Uuid(0, 2): the broker registered no directories
    RESERVED = frozenset({UNASSIGNED, LOST, MIGRATING})
