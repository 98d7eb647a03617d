"""The default RemoteLogMetadataManager: remote segment metadata kept in the internal topic
``__remote_log_metadata`` (Kafka's TopicBasedRemoteLogMetadataManager), replicated like any topic.

Owns the broker's view of remote state: one ``RemoteLogMetadataCache`` (tiered.metadata) per
topic-partition, keyed by (topic id, partition). Every event of a user partition goes to the one
metadata partition its (topic id, partition) hashes to, so its events are totally ordered there.

The cache is fed only by the log, and only below the high watermark (what the ISR holds), on
every broker alike -- the leader that wrote an event, its followers, a broker that will lead the
partition next:

* ``publish`` appends one event (the record key is the topic id and partition) with acks=all:
  as the metadata partition's leader straight into the local log, otherwise a Produce to that
  partition's leader over the inter-broker listener. It returns once the event is committed and
  applied here. The publisher's cache is never ahead of the log, so two brokers racing on one
  segment (an old leader finishing a copy, a new one deleting it) both end with whatever the log
  says: the later, out-of-table transition is skipped on every broker the same way.
* ``poll`` applies what each hosted metadata partition committed since the last poll, in offset
  order (``load`` is the first poll, at startup). An event that does not decode or whose
  transition is not in Kafka's table is logged and skipped (never believed).
* ``poll_remote`` reads the metadata partitions this broker needs but hosts no replica of (more
  brokers than ``remote.log.metadata.topic.replication.factor``) from their leaders, as a consumer.
* ``ready(tp)``: this broker has applied its metadata partition up to the high watermark --
  its own as the partition's leader, or one heard from the current leader (a restarted
  follower's checkpointed one may be far behind) --, so a new leader starts copying only where
  the old one stopped (Kafka's ``isReady`` before the copy task runs).

The topic is created through the controller on first use, as ``__consumer_offsets`` is
(``remote.log.metadata.topic.num.partitions`` partitions, ``remote.log.metadata.topic.replication.factor``
replicas capped by the brokers there are, ``cleanup.policy=delete`` with unlimited retention).

Threading: everything here runs on the broker's event loop. Callers: tiered.remote_log_manager.RemoteLogManager.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
import uuid
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.client.async_channel import AsyncChannel
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.common import TopicPartition
from kavka.protocol import api
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch, iter_batches, iter_records
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
    PUBLISH_TIMEOUT_S = 30.0

    def __init__(
        self,
        *,
        broker_id: int,
        replica_manager: Any,
        num_partitions: int,
        create_topic: Callable[[int], Awaitable[None]],
        topic_partitions: Callable[[], int | None],
        now_ms: Callable[[], int],
        leader_endpoint: Callable[[int], tuple[str, int] | None] = lambda _p: None,
        is_replica: Callable[[int], bool] = lambda _p: True,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self._create_topic = create_topic
        self._topic_partitions = topic_partitions
        self.now_ms = now_ms
        self._leader_endpoint = leader_endpoint  # metadata partition -> its leader's endpoint
        self._is_replica = is_replica  # metadata partition -> this broker is one of its replicas
        self._caches: dict[tuple[uuid.UUID, int], RemoteLogMetadataCache] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._applied: dict[int, int] = {}  # metadata partition -> next offset to apply
        # metadata partition -> an offset below which this broker knows every event is committed
        # (its own acks=all writes): a follower replica learns the high watermark a fetch later.
        self._committed: dict[int, int] = {}
        # metadata partitions this broker hosts no replica of -> the high watermark their leader
        # last answered (read over the network: ``poll_remote``)
        self._remote_hw: dict[int, int] = {}
        self._channel = AsyncChannel(f"kavka-rlmm-{broker_id}", security=security)  # the inter-broker listener's
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

    def partition_for(self, tp: TopicIdPartition) -> int:
        self.num_partitions = self._topic_partitions() or self.num_partitions
        return metadata_partition_for(tp, self.num_partitions)

    def _local(self, p: int) -> Any:
        return self.replica_manager.get_partition(REMOTE_LOG_METADATA_TOPIC, p)

    def ready(self, tp: TopicIdPartition) -> bool:
        """Every committed event of ``tp`` this broker knows of is in its cache."""
        p = self.partition_for(tp)
        part = self._local(p)
        if part is None:
            if self._topic_partitions() is None:
                return True  # no metadata topic yet: nothing was copied
            return p in self._remote_hw and self._applied.get(p, 0) >= self._remote_hw[p]
        if not part.high_watermark_known:
            return False  # a restarted follower's checkpointed high watermark may be far behind
        self._poll_partition(p, part)
        return self._applied.get(p, 0) >= part.high_watermark

    def leads(self, tp: TopicIdPartition) -> bool:
        """This broker leads the metadata partition of ``tp`` (it cleans up deleted topics)."""
        part = self._local(self.partition_for(tp))
        return part is not None and part.is_leader

    def _apply(self, event: MetadataEvent) -> None:
        tp = event.segment_id.topic_id_partition
        if isinstance(event, RemoteLogSegmentMetadata):
            self._names[tp.topic_id] = tp.topic
        self.cache(tp).apply(event)

    # ------------------------------------------------------------------ tailing the log

    def _hosted(self) -> list[int]:
        return sorted(tp.partition for tp in self.replica_manager.partitions if tp.topic == REMOTE_LOG_METADATA_TOPIC)

    def _poll_partition(self, p: int, part: Any) -> int:
        """Apply the committed events of metadata partition ``p`` not applied yet."""
        lg = part.log
        offset = max(self._applied.get(p, 0), lg.log_start_offset)
        hw = max(part.high_watermark, min(self._committed.get(p, 0), lg.log_end_offset))
        n = 0
        while offset < hw:
            data = lg.read(offset, max_bytes=1 << 20, max_offset=hw, min_one_message=True).records
            if not data:
                break
            progressed = offset
            for _pos, header in iter_batches(data):
                if header.next_offset <= hw:  # a batch is committed whole or not at all
                    progressed = max(progressed, header.next_offset)
            for r in iter_records(data):
                if r.offset < offset or r.offset >= progressed or r.value is None:
                    continue
                try:
                    self._apply(decode_event(bytes(r.value), self._names))
                    n += 1
                except RemoteMetadataError as e:
                    log.warning("skipping remote log metadata at %s-%d@%d: %s", REMOTE_LOG_METADATA_TOPIC, p, r.offset, e)
            if progressed <= offset:
                break  # no progress: never loop forever on an odd log
            offset = progressed
        self._applied[p] = offset
        return n

    def poll(self) -> int:
        """Apply every hosted metadata partition's newly committed events; returns how many."""
        hosted = self._hosted()
        if hosted:
            self.num_partitions = self._topic_partitions() or max(max(hosted) + 1, self.num_partitions)
        n = 0
        for p in hosted:
            part = self._local(p)
            if part is not None and not part.offline:
                n += self._poll_partition(p, part)
        return n

    async def poll_remote(self, tps: list[TopicIdPartition]) -> int:
        """Read, from their leaders, the metadata partitions of ``tps`` this broker hosts no
        replica of (Kafka's manager consumes every metadata partition it needs over the network;
        kavka tails the local replicas and reads only the others this way): Fetch v12 as a
        consumer, committed events only. Returns how many events were applied."""
        if self._topic_partitions() is None:
            return 0
        n = 0
        for p in sorted({self.partition_for(tp) for tp in tps}):
            if self._local(p) is None:
                n += await self._fetch_remote(p)
        return n

    async def _fetch_remote(self, p: int) -> int:
        addr = self._leader_endpoint(p)
        if addr is None:
            return 0
        cls = api.request_schema(1, 12)
        n = 0
        for _ in range(1000):  # 1 MiB a round: bounded, the next pass goes on
            offset = self._applied.get(p, 0)
            req = make(
                cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                topics=(make(nested(cls, "FetchTopic"), topic=REMOTE_LOG_METADATA_TOPIC, partitions=(
                    make(nested(cls, "FetchPartition"), partition=p, current_leader_epoch=-1, fetch_offset=offset,
                         last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(), rack_id="",
            )
            resp = await self._channel.call(addr, req, api.response_schema(1, 12), self.PUBLISH_TIMEOUT_S)
            pd = resp.responses[0].partitions[0]
            if pd.error_code == ErrorCode.offset_out_of_range and pd.log_start_offset > offset:
                self._applied[p] = pd.log_start_offset
                continue
            if pd.error_code != ErrorCode.none:
                raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: fetch answered {ErrorCode(pd.error_code).name}")
            hw = int(pd.high_watermark)
            self._remote_hw[p] = hw
            data = bytes(pd.records or b"")
            progressed = offset
            for _pos, header in iter_batches(data):
                if header.next_offset <= hw:
                    progressed = max(progressed, header.next_offset)
            for r in iter_records(data):
                if r.offset < offset or r.offset >= progressed or r.value is None:
                    continue
                try:
                    self._apply(decode_event(bytes(r.value), self._names))
                    n += 1
                except RemoteMetadataError as e:
                    log.warning("skipping remote log metadata at %s-%d@%d: %s", REMOTE_LOG_METADATA_TOPIC, p, r.offset, e)
            self._applied[p] = progressed
            if progressed <= offset or progressed >= hw:
                break
        return n

    def load(self) -> int:
        """The startup replay of every hosted metadata partition; returns events applied."""
        self.events_loaded = self.poll()
        return self.events_loaded

    # ------------------------------------------------------------------ writes

    async def _ensure_topic(self) -> None:
        if self._topic_partitions() is not None:
            return
        await self._create_topic(self.num_partitions)
        deadline = asyncio.get_running_loop().time() + self.PUBLISH_TIMEOUT_S
        while self._topic_partitions() is None:  # wait until the metadata change reaches this broker
            if asyncio.get_running_loop().time() > deadline:
                raise OSError(f"{REMOTE_LOG_METADATA_TOPIC} was not created")
            await asyncio.sleep(0.02)

    async def publish(self, event: MetadataEvent) -> None:
        """Append ``event`` to __remote_log_metadata (acks=all), then apply what was committed."""
        tp = event.segment_id.topic_id_partition
        # Checked before the write: an event this cache would refuse is not logged.
        probe = self.cache(tp)
        if not isinstance(event, RemoteLogSegmentMetadata):
            current = next((m for m in probe.unfinished() if m.segment_id == event.segment_id), None)
            if current is None:
                current = next((m for m in probe.readable() if m.segment_id == event.segment_id), None)
            if current is None:
                raise RemoteMetadataError(f"update for unknown remote segment {event.segment_id.id}")
            current.with_state(event.state, event.event_timestamp_ms)
        await self._ensure_topic()
        p = self.partition_for(tp)
        key = _KEY.pack(tp.topic_id.bytes, tp.partition)
        now = self.now_ms()
        batch = build_batch([(now, key, encode_event(event))])
        part = self._local(p)
        if part is not None and part.is_leader:
            info = part.append_records_to_leader(batch, required_acks=-1, now_ms=now)
            mtp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, p)
            self.replica_manager.notify_append(mtp)
            acked = await self.replica_manager.wait_for_acks([(mtp, info.last_offset + 1)], self.PUBLISH_TIMEOUT_S)
            if acked[mtp] != ErrorCode.none:
                raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: the event was not replicated ({acked[mtp].name})")
            last = info.last_offset
        else:
            last = await self._produce_to_leader(p, batch)
        await self._caught_up(p, last + 1, event)

    async def _produce_to_leader(self, p: int, batch: bytes) -> int:
        """Produce (v9, acks=all) to the metadata partition's leader on another broker; the offset."""
        addr = self._leader_endpoint(p)
        if addr is None:
            raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p} has no reachable leader")
        cls = api.request_schema(0, 9)
        req = make(
            cls,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=self.PUBLISH_TIMEOUT_S),
            topic_data=(make(nested(cls, "TopicProduceData"), name=REMOTE_LOG_METADATA_TOPIC,
                             partition_data=(make(nested(cls, "PartitionProduceData"), index=p, records=batch),)),),
        )
        resp = await self._channel.call(addr, req, api.response_schema(0, 9), self.PUBLISH_TIMEOUT_S + 5)
        pr = resp.responses[0].partition_responses[0]
        if pr.error_code != ErrorCode.none:
            raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: produce answered {ErrorCode(pr.error_code).name}")
        return int(pr.base_offset)

    async def _caught_up(self, p: int, next_offset: int, event: MetadataEvent) -> None:
        """Wait until this broker has applied ``p`` up to ``next_offset``: from its replica, or
        read from the leader when it hosts none."""
        if self._local(p) is None and not self._is_replica(p):
            while self._applied.get(p, 0) < next_offset:  # read back from the leader
                before = self._applied.get(p, 0)
                await self._fetch_remote(p)
                if self._applied.get(p, 0) <= before:
                    raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: the event at {next_offset - 1} could not be read back")
            return
        self._committed[p] = max(self._committed.get(p, 0), next_offset)
        mtp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, p)
        deadline = asyncio.get_running_loop().time() + self.PUBLISH_TIMEOUT_S
        while True:
            part = self._local(p)
            if part is not None:
                self._poll_partition(p, part)
            if self._applied.get(p, 0) >= next_offset:
                return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise OSError(f"{REMOTE_LOG_METADATA_TOPIC}-{p}: the event at {next_offset - 1} did not reach this replica")
            await self.replica_manager.wait_for_data([mtp], min(left, 0.1))

    def close(self) -> None:
        self._channel.close()
