"""The default RemoteLogMetadataManager: remote segment metadata kept in the internal topic
``__remote_log_metadata`` (Kafka's TopicBasedRemoteLogMetadataManager), replayed at startup.

Owns the broker's view of remote state: one ``RemoteLogMetadataCache`` (tiered.metadata) per
topic-partition, keyed by (topic id, partition). ``publish`` appends one event (tiered.metadata's
encoding; the record key is the topic id and partition) to the metadata partition the user
partition hashes to, as leader, then applies it to the cache: the log is written first, so a
state change that is in the cache is also in the log and survives a restart. ``load`` replays
every hosted metadata partition at startup, in offset order; an event that does not decode or
whose transition is not in Kafka's table is logged and skipped (never believed).

The topic is created through the controller on first use, as ``__consumer_offsets`` is
(``remote.log.metadata.topic.num.partitions`` partitions, ``cleanup.policy=delete`` with
unlimited retention, Kafka's defaults for it being ``retention.ms=-1``).

Threading: everything here runs on the broker's event loop; appends go to the local log (a
single broker leads every metadata partition; replication of the metadata topic waits for
issue 12). Callers: tiered.rlm.RemoteLogManager only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from kavka.protocol.records import build_batch
from kavka.replication.partition import TopicPartition
from kavka.tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from kavka.tiered.metadata import (
    REMOTE_LOG_METADATA_TOPIC,
    MetadataEvent,
    RemoteLogMetadataCache,
    RemoteMetadataError,
    decode_event,
    encode_event,
)

log = logging.getLogger("kavka.tiered")

_KEY = struct.Struct(">16si")


def metadata_partition_for(tp: TopicIdPartition, num_partitions: int) -> int:
    """The __remote_log_metadata partition that holds every event of ``tp`` (stable: CRC-32)."""
    return zlib.crc32(_KEY.pack(tp.topic_id.bytes, tp.partition)) % num_partitions


class TopicBasedRemoteLogMetadataManager:
    def __init__(
        self,
        *,
        broker_id: int,
        replica_manager: Any,
        num_partitions: int,
        create_topic: Callable[[int], Awaitable[None]],
        topic_partitions: Callable[[], int | None],
        now_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self._create_topic = create_topic
        self._topic_partitions = topic_partitions
        self.now_ms = now_ms
        self._caches: dict[tuple[uuid.UUID, int], RemoteLogMetadataCache] = {}
        self._names: dict[uuid.UUID, str] = {}
        self.events_loaded = 0

    # ------------------------------------------------------------------ reads

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache:
        key = (tp.topic_id, tp.partition)
        c = self._caches.get(key)
        if c is None:
            c = self._caches[key] = RemoteLogMetadataCache()
        return c

    def known(self) -> list[tuple[uuid.UUID, int]]:
        return list(self._caches)

    def forget_if_empty(self, topic_id: uuid.UUID, partition: int) -> None:
        """Drop the cache of a partition with no remote segment left (a deleted topic's)."""
        c = self._caches.get((topic_id, partition))
        if c is not None and not c.readable() and not any(True for _ in c.unfinished()):
            del self._caches[(topic_id, partition)]

    def _apply(self, event: MetadataEvent) -> None:
        tp = event.segment_id.topic_id_partition
        if isinstance(event, RemoteLogSegmentMetadata):
            self._names[tp.topic_id] = tp.topic
        self.cache(tp).apply(event)

    # ------------------------------------------------------------------ startup

    def _hosted(self) -> list[int]:
        return sorted(tp.partition for tp in self.replica_manager.partitions if tp.topic == REMOTE_LOG_METADATA_TOPIC)

    def load(self) -> int:
        """Replay every hosted metadata partition; returns events applied."""
        hosted = self._hosted()
        if hosted:
            self.num_partitions = self._topic_partitions() or max(hosted) + 1
        n = 0
        for p in hosted:
            part = self.replica_manager.get_partition(REMOTE_LOG_METADATA_TOPIC, p)
            if part is None:
                continue
            for r in part.log.replay_records():
                if r.value is None:
                    continue
                try:
                    self._apply(decode_event(bytes(r.value), self._names))
                    n += 1
                except RemoteMetadataError as e:
                    log.warning("skipping remote log metadata at %s-%d@%d: %s", REMOTE_LOG_METADATA_TOPIC, p, r.offset, e)
        self.events_loaded = n
        return n

    # ------------------------------------------------------------------ writes

    async def _partition(self, p: int) -> Any:
        part = self.replica_manager.get_partition(REMOTE_LOG_METADATA_TOPIC, p)
        if part is not None:
            return part
        if self._topic_partitions() is None:
            await self._create_topic(self.num_partitions)
        deadline = asyncio.get_running_loop().time() + 30.0
        while part is None:  # created: wait until the metadata change reaches the local replicas
            if asyncio.get_running_loop().time() > deadline:
                raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p} is not hosted by this broker")
            await asyncio.sleep(0.02)
            part = self.replica_manager.get_partition(REMOTE_LOG_METADATA_TOPIC, p)
        return part

    async def publish(self, event: MetadataEvent) -> None:
        """Append ``event`` to __remote_log_metadata, then apply it to the cache."""
        tp = event.segment_id.topic_id_partition
        # Checked before the write: an event the cache would refuse is never logged.
        probe = self.cache(tp)
        if not isinstance(event, RemoteLogSegmentMetadata):
            current = next((m for m in probe.unfinished() if m.segment_id == event.segment_id), None)
            if current is None:
                current = next((m for m in probe.readable() if m.segment_id == event.segment_id), None)
            if current is None:
                raise RemoteMetadataError(f"update for unknown remote segment {event.segment_id.id}")
            current.with_state(event.state, event.event_timestamp_ms)
        p = metadata_partition_for(tp, self.num_partitions)
        part = await self._partition(p)
        key = _KEY.pack(tp.topic_id.bytes, tp.partition)
        now = self.now_ms()
        part.append_records_to_leader(build_batch([(now, key, encode_event(event))]), required_acks=-1, now_ms=now)
        self.replica_manager.notify_append(TopicPartition(REMOTE_LOG_METADATA_TOPIC, p))
        self._apply(event)
