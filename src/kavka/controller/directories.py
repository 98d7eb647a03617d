"""Which log directory holds each replica (KIP-858, JBOD in KRaft): the controller's rules.

A PartitionRecord's `directories` runs parallel to `replicas`: entry i is the directory id (a Kafka
Uuid, base64url) of replica i on its broker. Besides real directory ids it holds Kafka's reserved
ids (common/DirectoryId.java):

- UNASSIGNED (Uuid 0): the controller does not know yet; the broker will tell it with
  AssignReplicasToDirs (API 73) once it has placed the replica.
- LOST (Uuid 1): the replica's directory is gone; it counts as offline (kavka honours it when
  read but never writes it: a dir that fails keeps its id in the record, see below).
- MIGRATING (Uuid 2): the broker registered no directories (a ZooKeeper-era broker); never acted on.

Invariants the controller keeps:
- A broker's registration lists its *online* directories only. A heartbeat naming offline ones
  (BrokerHeartbeat `OfflineLogDirs`) removes them from the registration (a
  BrokerRegistrationChangeRecord with the remaining `log_dirs`), and every replica of that broker in
  those dirs leaves its ISR (unless it is the last member) and loses its leadership, by the same
  rules as fencing (partition_change.on_broker_fenced) -- Kafka's
  ReplicationControlManager.handleDirectoriesOffline. The broker stays unfenced and keeps leading
  the partitions of its healthy dirs.
- A replica whose directory is a real id that its broker does not list online is offline: it is
  neither elected leader when its broker is unfenced nor counted as a live leader candidate.
- The broker is the authority on where a replica lives: AssignReplicasToDirs changes the entry to
  what it says (Kafka's handleAssignReplicasToDirs), after checking the broker's epoch and that it
  hosts the replica.

Pure: functions of a MetadataImage returning values; the callers (ReplicationControlManager, QuorumController)
turn them into records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kavka.common import DirectoryId
from kavka.metadata.image import BrokerRegistration, PartitionRegistration


def default_directory(broker: BrokerRegistration | None) -> str:
    """The directory a new replica on `broker` is recorded in before the broker reports one
    (Kafka's ClusterControlManager.defaultDir): its only dir if it has one, MIGRATING if it
    registered none, else UNASSIGNED."""
    if broker is None or not broker.log_dirs:
        return DirectoryId.MIGRATING
    if len(broker.log_dirs) == 1:
        return broker.log_dirs[0]
    return DirectoryId.UNASSIGNED


def default_directories(brokers: Mapping[int, BrokerRegistration], replicas: Sequence[int]) -> tuple[str, ...]:
    """The `directories` of a new partition: each replica's default_directory."""
    return tuple(default_directory(brokers.get(r)) for r in replicas)


def directory_of(reg: PartitionRegistration, broker_id: int) -> str:
    """The recorded directory of `broker_id`'s replica; UNASSIGNED when the record has none."""
    if broker_id not in reg.replicas:
        raise ValueError(f"broker {broker_id} is not a replica of partition {reg.partition_id}")
    i = reg.replicas.index(broker_id)
    return reg.directories[i] if i < len(reg.directories) else DirectoryId.UNASSIGNED


def replica_online(reg: PartitionRegistration, broker: BrokerRegistration | None) -> bool:
    """False when the replica's recorded directory is a real id its broker does not list online."""
    if broker is None:
        return False
    d = directory_of(reg, broker.broker_id)
    return d != DirectoryId.LOST and (d in DirectoryId.RESERVED or d in broker.log_dirs)


def with_directory(reg: PartitionRegistration, broker_id: int, directory: str) -> tuple[str, ...]:
    """`reg`'s directories with `broker_id`'s entry set to `directory` (padded with UNASSIGNED)."""
    dirs = list(reg.directories) + [DirectoryId.UNASSIGNED] * (len(reg.replicas) - len(reg.directories))
    dirs[reg.replicas.index(broker_id)] = directory
    return tuple(dirs[: len(reg.replicas)])


def new_offline_dirs(broker: BrokerRegistration, offline: Sequence[str]) -> tuple[str, ...]:
    """The dirs of a heartbeat's OfflineLogDirs the registration still lists online (what is new)."""
    return tuple(d for d in dict.fromkeys(offline) if d in broker.log_dirs)


__all__ = [
    "default_directories",
    "default_directory",
    "directory_of",
    "new_offline_dirs",
    "replica_online",
    "with_directory",
]
