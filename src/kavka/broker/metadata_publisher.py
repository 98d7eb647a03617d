"""BrokerMetadataPublisher: the broker's parts follow each published MetadataImage.

Kafka's BrokerMetadataPublisher. The node's MetadataLoader (kavka.metadata.loader) hands every
published delta to `publish`, which turns what changed into work, in this order:
- deleted topics: their local replicas are removed and their logs deleted;
- changed partitions: a replica hosted here is created or updated (`ReplicaManager.apply_partition`:
  leader or follower, ISR, epochs), one no longer hosted here is removed -- except a replica the
  controller records in a log dir this broker does not have online (KIP-858, see
  `_assigned_to_missing_dir`), which stays offline;
- the group coordinator follows the leadership of `__consumer_offsets` partitions, the remote log
  manager that of tiered partitions;
- dynamic configs: the replication throttles (KIP-73) and the log configs of the partitions whose
  topic (or the broker defaults) changed;
- the assignments manager reports where new replicas were placed (AssignReplicasToDirs).

A delta is applied in slices of at most `SLICE_S` seconds, the event loop turning between them:
creating thousands of logs at once would stall the raft driver past
controller.quorum.fetch.timeout.ms and cost the quorum its leader, and a slice counted in
partitions rather than time held the loop for seconds when creations were slow. Between two slices
the publisher yields `YIELDS` times: a raft exchange takes several turns of the loop (the frame
read, the raft driver's poll, its answer), and with one yield each turn waited for the next slice,
so the fetches that commit the next CreateTopics crawled while a large delta applied. A delta that fits in
one slice is applied before `publish` returns; `published()` waits for the rest. The new logs of a
delta are placed in one `LogManager.placement_batch` (the log dirs' stats are taken once).

The parts it drives are attributes, None until the node has built them (the group coordinator and
the remote log manager exist only once the metadata log has been replayed at start). Event-loop
thread only.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kavka.common import ConfigResourceType, DirectoryId, TopicPartition
from kavka.controller import directories
from kavka.coordinator.records import OFFSETS_TOPIC
from kavka.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage, PartitionRegistration

if TYPE_CHECKING:
    from kavka.broker.assignments import AssignmentsManager
    from kavka.broker.config_resolver import ConfigResolver
    from kavka.coordinator.manager import GroupCoordinatorManager
    from kavka.coordinator.txn_manager import TransactionCoordinatorManager
    from kavka.replication.quota import ReplicationQuotas
    from kavka.replication.replica_manager import ReplicaManager
    from kavka.storage.log_manager import LogManager

log = logging.getLogger("kavka.broker")


class BrokerMetadataPublisher:
    SLICE_S = 0.05
    YIELDS = 4

    def __init__(
        self,
        *,
        node_id: int,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        resolver: ConfigResolver,
        online_dir_ids: Callable[[], list[str]],
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.resolver = resolver
        self.online_dir_ids = online_dir_ids
        self.image = MetadataImage()
        # The parts built later than this publisher (None until then).
        self.groups: GroupCoordinatorManager | None = None
        self.transactions: TransactionCoordinatorManager | None = None
        self.remote_log_manager: Any = None
        self.replication_quotas: ReplicationQuotas | None = None
        self.assignments: AssignmentsManager | None = None
        self.on_broker_configs: Callable[[MetadataImage], None] | None = None  # the TLS keystore reload
        self._queue: collections.deque[Callable[[], None]] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Future[None]]] = []

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Make the broker's parts match the new image (in order, sliced when large)."""
        self.image = image
        for predicate, waiter in self._waiters:
            if not waiter.done() and predicate(image):
                waiter.set_result(None)
        rm = self.replica_manager
        work: list[Callable[[], None]] = []
        for topic in delta.deleted_topics.values():
            for p in topic.partitions:
                work.append(functools.partial(rm.remove_partition, TopicPartition(topic.name, p), delete=True))
        touched_topics = {tid for tid, _ in delta.changed_partitions}
        hosted: list[tuple[str, int]] = []  # the replicas created or updated here
        for tid in touched_topics:
            t = image.topics_by_id.get(tid)
            if t is None:
                continue
            cfg = self.resolver.log_config(image, t.name)
            min_isr = self.resolver.topic(image, t.name, "min.insync.replicas").value
            for pid, reg in t.partitions.items():
                if (tid, pid) not in delta.changed_partitions:
                    continue
                tp = TopicPartition(t.name, pid)
                if self.node_id not in reg.replicas:
                    work.append(functools.partial(rm.remove_partition, tp, delete=True))
                elif not self._assigned_to_missing_dir(tp, reg):
                    hosted.append((t.name, pid))
                    work.append(functools.partial(
                        rm.apply_partition, tp, topic_id=tid, registration=reg, config=cfg, min_insync_replicas=min_isr,
                    ))
        if self.groups is not None and any(
            (t := image.topics_by_id.get(tid)) is not None and t.name == OFFSETS_TOPIC for tid in touched_topics
        ):
            work.append(self.groups.sync_leadership)
        if self.transactions is not None and any(
            (t := image.topics_by_id.get(tid)) is not None and t.name == TRANSACTION_STATE_TOPIC for tid in touched_topics
        ):
            work.append(self.transactions.sync_leadership)
        if touched_topics and self.remote_log_manager is not None:
            work.append(self.remote_log_manager.sync_leadership)
        if delta.changed_configs:
            broker_changed = any(rt == ConfigResourceType.BROKER for rt, _ in delta.changed_configs)
            if broker_changed:
                self.apply_replication_throttles(image)
                if self.on_broker_configs is not None:
                    work.append(functools.partial(self.on_broker_configs, image))
            names = {name for rt, name in delta.changed_configs if rt == ConfigResourceType.TOPIC}
            work.append(functools.partial(self._update_configs, broker_changed, names))
        if hosted and self.assignments is not None:
            work.append(functools.partial(self.assignments.maybe_kick, hosted))  # after the replicas are created
        self._queue.extend(work)
        if self._task is None or self._task.done():
            self._run_slice()  # small deltas are applied before this call returns
            if self._queue:
                self._task = asyncio.get_running_loop().create_task(self._publish_rest(), name="publisher")

    def _update_configs(self, broker_changed: bool, names: set[str]) -> None:
        rm = self.replica_manager
        for tp in list(rm.partitions):
            if broker_changed or tp.topic in names:
                rm.update_config(
                    tp,
                    self.resolver.log_config(self.image, tp.topic),
                    self.resolver.topic(self.image, tp.topic, "min.insync.replicas").value,
                )

    def apply_replication_throttles(self, image: MetadataImage) -> None:
        """The replication throttles' bounds from the dynamic broker configs (KIP-73)."""
        quotas = self.replication_quotas
        if quotas is None:
            return
        quotas.leader.set_bound(self.resolver.broker_value(image, "leader.replication.throttled.rate"))
        quotas.follower.set_bound(self.resolver.broker_value(image, "follower.replication.throttled.rate"))

    def _assigned_to_missing_dir(self, tp: TopicPartition, reg: PartitionRegistration) -> bool:
        """KIP-858: the controller records this replica in a dir this broker does not have online
        (it failed, or was unreadable at start) and the replica is nowhere else here. It stays
        offline rather than being created empty in another dir: an empty copy that the controller
        still counts as the last ISR member could be elected and lose every record."""
        if self.log_manager.get_log(tp.topic, tp.partition) is not None:
            return False  # the broker is the authority: AssignReplicasToDirs corrects the record
        recorded = directories.directory_of(reg, self.node_id)
        if recorded in DirectoryId.RESERVED or recorded in self.online_dir_ids():
            return False
        log.warning(
            "%s is assigned to log dir %s, which is not online on this broker: it stays offline "
            "until that dir returns or the partition is reassigned",
            tp, recorded,
        )
        return True

    def _run_slice(self, *, background: bool = False) -> float:
        """Apply queued work for up to `SLICE_S`; the seconds the batch's end took on this thread
        (its file writes, or with `background` handing them to the writer thread)."""
        deadline = time.monotonic() + self.SLICE_S
        with self.log_manager.placement_batch(background=background):
            while self._queue:
                fn = self._queue.popleft()
                try:
                    fn()
                except Exception:
                    log.exception("applying a metadata change failed")
                if time.monotonic() >= deadline:
                    break
            worked = time.monotonic()
        return time.monotonic() - worked

    async def _publish_rest(self) -> None:
        started, total = time.monotonic(), len(self._queue)
        slices, longest, longest_write = 0, 0.0, 0.0
        with self.log_manager.placement_batch():
            while self._queue:
                for _ in range(self.YIELDS):
                    await asyncio.sleep(0)
                t0 = time.monotonic()
                # The slice's files are written while the next slices apply (in order: one
                # writer thread, a file's next write after its last).
                write = self._run_slice(background=True)
                slices, longest = slices + 1, max(longest, time.monotonic() - t0)
                longest_write = max(longest_write, write)
        log.info(
            "applied a large metadata change (%d+ partition changes) in %.1fs (%d slices, the longest %.0f ms; "
            "the longest batch end %.0f ms)",
            total, time.monotonic() - started, slices, longest * 1000, longest_write * 1000,
        )

    async def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until the image satisfies `predicate` (checked now and at each publish); False at the timeout."""
        if predicate(self.image):
            return True
        entry = (predicate, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout_s):
                await entry[1]
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.remove(entry)

    async def published(self) -> None:
        """Return when every published metadata change is applied to the broker's parts."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def stop(self) -> None:
        """The rest is applied again from the log at the next start."""
        if self._task is not None:
            self._task.cancel()
