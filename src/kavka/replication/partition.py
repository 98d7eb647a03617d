"""Partition: one topic-partition replica on this broker, with Kafka's replication state.

Owns the Log and the state replication is built on: leader id and
leader_epoch (from the metadata image), replicas and isr, and the
high_watermark -- the offset below which records are committed and visible to
consumers. With a single broker the ISR is just this replica, so the high
watermark follows the log end offset after each append (Kafka's
maybeIncrementLeaderHW with one in-sync replica); followers and ISR changes
come with the cluster work without changing this interface.

KIP-112: an OSError from the log (a failing disk) is reported through
``on_storage_error`` -- the LogManager takes the whole dir offline -- and
answered KAFKA_STORAGE_ERROR; once ``offline`` is set every append and read
is answered so without touching the disk. During a move between log dirs
(KIP-113) ``log`` is replaced by the ReplicaManager between two requests,
which is what "under the partition lock" means on one event-loop thread.

Called on the event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kavka.storage.log import FetchDataInfo, Log


class PartitionError(Exception):
    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        *,
        topic_id: str,
        log: Log,
        local_broker_id: int,
        leader: int,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        high_watermark: int,
        min_insync_replicas: int = 1,
        on_storage_error: Callable[[Log, OSError], None] | None = None,
    ) -> None:
        self.tp = tp
        self.offline = False
        self.on_storage_error = on_storage_error
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.min_insync_replicas = min_insync_replicas
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._maybe_increment_leader_hw()

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def update_registration(self, *, leader: int, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> None:
        if leader == self.local_broker_id and leader_epoch > self.leader_epoch:
            # Becoming leader in a new epoch (Kafka's Partition.makeLeader): it starts at the log end.
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self._maybe_increment_leader_hw()

    def _maybe_increment_leader_hw(self) -> None:
        if self.is_leader and tuple(self.isr) == (self.local_broker_id,):
            self.high_watermark = self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: fence clients whose view of the leader epoch is off."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.unknown_leader_epoch)
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.fenced_leader_epoch)

    def check_online(self) -> None:
        if self.offline:
            raise PartitionError(
                ErrorCode.kafka_storage_error, f"{self.tp} is on an offline log dir"
            )

    def _storage_error(self, exc: OSError) -> PartitionError:
        if self.on_storage_error is not None:
            self.on_storage_error(self.log, exc)
        self.offline = True
        return PartitionError(ErrorCode.kafka_storage_error, f"{self.tp}: {exc}")

    def read_records(
        self, fetch_offset: int, *, max_bytes: int, max_offset: int | None, min_one_message: bool
    ) -> FetchDataInfo:
        self.check_online()
        try:
            return self.log.read(
                fetch_offset, max_bytes=max_bytes, max_offset=max_offset, min_one_message=min_one_message
            )
        except OSError as e:
            raise self._storage_error(e) from e

    def append_records_to_leader(self, records: memoryview | bytes, *, required_acks: int, now_ms: int):  # noqa: ANN201
        self.check_online()
        if not self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the min.isr requirement of {self.min_insync_replicas} for partition {self.tp}",
            )
        try:
            info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        except OSError as e:
            raise self._storage_error(e) from e
        self._maybe_increment_leader_hw()
        return info
