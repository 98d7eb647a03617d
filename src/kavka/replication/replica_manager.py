"""ReplicaManager: the partitions this broker hosts, and the waits on them.

It creates and removes Partition objects as the metadata image says (the
broker's metadata publisher calls `apply_partition` / `remove_partition`),
and owns the purgatory: Fetch requests that wait (max_wait / min_bytes
long-poll) register a future that is completed on the next append to any of
their partitions, or by their timeout. acks=all produce completes at once
while the ISR is this broker alone; with followers it will wait here too.

JBOD (KIP-112/113): partitions on a failed log dir are marked offline
(`mark_offline`, called by the broker's dir-failure listener);
`alter_replica_log_dir` starts a move between this broker's log dirs and
`swap_in_future` puts the caught-up copy in place between two requests.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from kio.schema.errors import ErrorCode

from kavka.replication.partition import Partition, TopicPartition
from kavka.storage.errors import KafkaStorageError, LogDirNotFoundError
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

log = logging.getLogger("kavka.replication")


class ReplicaManager:
    def __init__(self, *, node_id: int, log_manager: LogManager, now_ms: Callable[[], int]) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self._watchers: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        self._hw_checkpoint = log_manager.read_high_watermarks()

    # ------------------------------------------------------------ lifecycle

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, partition))

    def apply_partition(
        self,
        tp: TopicPartition,
        *,
        topic_id: str,
        leader: int,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        config: LogConfig,
        min_insync_replicas: int,
    ) -> Partition | None:
        p = self.partitions.get(tp)
        if p is None:
            try:
                plog = self.log_manager.get_or_create_log(tp.topic, tp.partition, topic_id=topic_id, config=config)
            except KafkaStorageError as e:
                log.error("cannot host %s: %s", tp, e)
                return None
            hw = self._hw_checkpoint.get((tp.topic, tp.partition), 0)
            p = Partition(
                tp,
                topic_id=topic_id,
                log=plog,
                local_broker_id=self.node_id,
                leader=leader,
                leader_epoch=leader_epoch,
                replicas=replicas,
                isr=isr,
                high_watermark=hw,
                min_insync_replicas=min_insync_replicas,
                on_storage_error=self.handle_storage_error,
            )
            if p.is_leader:
                # A new leader epoch starts at the current log end (Kafka's
                # Partition.makeLeader -> leaderEpochCache.assign).
                plog.leader_epoch_cache.assign(leader_epoch, plog.log_end_offset)
            self.partitions[tp] = p
        else:
            p.update_registration(leader=leader, leader_epoch=leader_epoch, replicas=replicas, isr=isr)
            p.min_insync_replicas = min_insync_replicas
            p.log.update_config(config)
            fut = self.log_manager.future_log((tp.topic, tp.partition))
            if fut is not None:
                fut.update_config(config)
        return p

    def update_config(self, tp: TopicPartition, config: LogConfig, min_insync_replicas: int) -> None:
        p = self.partitions.get(tp)
        if p is not None:
            p.log.update_config(config)
            p.min_insync_replicas = min_insync_replicas

    def remove_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        p = self.partitions.pop(tp, None)
        self._wake(tp)
        if p is not None and delete:
            self.log_manager.delete_log(tp.topic, tp.partition)

    # ------------------------------------------------------------ log dirs (KIP-112, KIP-113)

    def handle_storage_error(self, lg: Log, exc: OSError) -> None:
        self.log_manager.handle_io_error(lg.dir, exc)

    def mark_offline(self, tps: Iterable[tuple[str, int]]) -> None:
        """Replicas whose log dir failed: from now on they answer KAFKA_STORAGE_ERROR."""
        for topic, partition in tps:
            tp = TopicPartition(topic, partition)
            p = self.partitions.get(tp)
            if p is not None:
                p.offline = True
            self._wake(tp)

    def alter_replica_log_dir(self, tp: TopicPartition, path: str, *, now_ms: int) -> tuple[ErrorCode, bool]:
        """AlterReplicaLogDirs for one replica: (error, whether a mover must start)."""
        lm = self.log_manager
        key = (tp.topic, tp.partition)
        p = self.partitions.get(tp)
        try:
            if p is None:
                if lm.is_offline(*key):
                    return ErrorCode.kafka_storage_error, False
                # Kafka remembers the dir and uses it when the replica is created.
                lm.prefer_log_dir(key, Path(path))
                return ErrorCode.replica_not_available, False
            if p.offline:
                return ErrorCode.kafka_storage_error, False
            fut = lm.create_future_log(key, Path(path), now_ms=now_ms)
        except LogDirNotFoundError:
            return ErrorCode.log_dir_not_found, False
        except KafkaStorageError:
            return ErrorCode.kafka_storage_error, False
        return ErrorCode.none, fut is not None

    def swap_in_future(self, tp: TopicPartition, *, crash_point: Callable[[str], None]) -> Log:
        """The end of a move: the future log becomes the partition's log."""
        p = self.partitions[tp]
        new = self.log_manager.replace_current_with_future(
            (tp.topic, tp.partition), now_ms=self.now_ms(), crash_point=crash_point
        )
        p.log = new
        return new

    # ------------------------------------------------------------ purgatory

    def _wake(self, tp: TopicPartition) -> None:
        for fut in self._watchers.pop(tp, ()):
            if not fut.done():
                fut.set_result(None)

    def notify_append(self, tp: TopicPartition) -> None:
        if tp in self._watchers:
            self._wake(tp)

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return after an append to any of `tps`, or after `timeout_s` (a delayed fetch)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(tps)
        for tp in keys:
            self._watchers.setdefault(tp, []).append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            for tp in keys:
                lst = self._watchers.get(tp)
                if lst is not None:
                    try:
                        lst.remove(fut)
                    except ValueError:
                        pass
                    if not lst:
                        del self._watchers[tp]

    # ------------------------------------------------------------ checkpoints

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())
