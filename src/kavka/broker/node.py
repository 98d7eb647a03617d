"""BrokerNode: the composition root. Builds every part, starts them, stops them in a fixed order.

Startup: check every log dir's meta.properties (formatted, one cluster, this
node) -> open the metadata quorum and replay it into the MetadataImage ->
load the partition logs (recovering after an unclean stop) -> apply the image
(create Partition objects for replicas hosted here) -> register this broker
(endpoints) in the metadata log -> listen. Shutdown is the reverse: stop
accepting, drain in-flight responses, stop background tasks, checkpoint high
watermarks, close logs cleanly (writing the clean-shutdown marker), close the
quorum.

Group coordination (coordinator.manager) is opened after the partitions, so
it can replay `__consumer_offsets`, and stopped before the logs close.

Background work owned here: retention (log.retention.check.interval.ms),
log compaction (log.cleaner.backoff.ms, storage.cleaner),
time-based flush (flush.ms), high-watermark checkpoints
(replica.high.watermark.checkpoint.interval.ms), recovery-point
checkpoints (log.flush.offset.checkpoint.interval.ms) and the movers of
replicas between log dirs (KIP-113), started last and stopped first. Their
disk work (fsyncs, unlinks, checkpoint writes, cleaning, the movers' fsyncs)
runs on the StorageIoManager's worker threads (broker.storage_io): started
before those tasks, stopped after them and before the logs close.

JBOD (KIP-112): a failed log dir takes only its own replicas offline; when
every log dir -- or the one holding the metadata log -- has failed, the broker
shuts down with exit code 1 (`fatal_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kavka.broker.config_resolver import ConfigResolver
from kavka.broker.storage_io import StorageIoManager
from kavka.config import BrokerConfig, ConfigError
from kavka.controller.controller import NewTopic
from kavka.controller.image import MetadataDelta, MetadataImage
from kavka.controller.quorum_controller import QuorumController
from kavka.coordinator.consumer_group import ConsumerGroupConfig
from kavka.coordinator.group import GroupConfig
from kavka.coordinator.manager import GroupCoordinatorManager
from kavka.coordinator.records import OFFSETS_TOPIC
from kavka.raft.quorum import SingleVoterQuorum
from kavka.replication.log_dir_mover import ReplicaAlterLogDirsManager
from kavka.replication.partition import TopicPartition
from kavka.replication.replica_manager import ReplicaManager
from kavka.storage.cleaner import CleanerConfig
from kavka.storage.faults import FAULTS
from kavka.storage.log_manager import LogManager
from kavka.storage.meta_properties import generate_uuid, read_meta_properties, write_meta_properties
from kavka.testing import FaultInjection

log = logging.getLogger("kavka.broker")


class StartupError(RuntimeError):
    """The broker cannot start; the message says why and names what to fix."""


def check_log_dirs(config: BrokerConfig) -> tuple[str, dict[Path, str], dict[Path, str]]:
    """Validate meta.properties of every dir (KIP-858).

    Returns the cluster id, the directory id of each dir, and the dirs that
    could not be read at all (an I/O error: KIP-112 starts without them,
    offline, unless it is the metadata log dir or every dir failed).
    """
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    cluster_ids: dict[str, Path] = {}
    dir_ids: dict[Path, str] = {}
    seen_ids: dict[str, Path] = {}
    failed: dict[Path, str] = {}
    for d in dirs:
        try:
            meta = read_meta_properties(d)
        except FileNotFoundError:
            raise StartupError(
                f"log dir {d} is not formatted (no meta.properties): run `kavka storage format --config <file>`"
            ) from None
        except ValueError as e:
            raise StartupError(f"log dir {d}: cannot read meta.properties: {e}") from None
        except OSError as e:
            if d == config.metadata_log_dir:
                raise StartupError(f"metadata log dir {d}: cannot read meta.properties: {e}") from None
            failed[d] = f"cannot read meta.properties: {e}"  # logged by the LogManager
            continue
        if meta.node_id != config.node_id:
            raise StartupError(
                f"log dir {d}: meta.properties has node.id={meta.node_id} but the config has node.id={config.node_id}"
            )
        cluster_ids.setdefault(meta.cluster_id, d)
        if not meta.directory_id and meta.version == 1:
            # KIP-858: a dir formatted before directory ids gets one now, persisted.
            meta = dataclasses.replace(meta, directory_id=generate_uuid())
            try:
                write_meta_properties(d, meta)
            except (OSError, ValueError) as e:
                raise StartupError(f"log dir {d}: cannot add a directory.id to meta.properties: {e}") from None
            log.info("log dir %s had no directory.id; assigned %s", d, meta.directory_id)
        if meta.directory_id:
            if meta.directory_id in seen_ids:
                raise StartupError(
                    f"log dirs {seen_ids[meta.directory_id]} and {d} share directory.id {meta.directory_id}"
                )
            seen_ids[meta.directory_id] = d
            dir_ids[d] = meta.directory_id
    if len(cluster_ids) > 1:
        detail = ", ".join(f"{p}: {c}" for c, p in cluster_ids.items())
        raise StartupError(f"log dirs belong to different clusters ({detail})")
    return next(iter(cluster_ids)), dir_ids, failed


class BrokerNode:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.resolver = ConfigResolver(config)
        self.faults = FaultInjection.from_environment(bool(config["kavka.test.fault.injection.enable"]))
        FAULTS.configure(self.faults.disk_fault_file)
        self.cluster_id, self.dir_ids, self.failed_dirs = check_log_dirs(config)
        self._tasks: list[asyncio.Task[None]] = []
        self.storage_io = StorageIoManager(threads=self.config["background.threads"])
        self.server = None  # set by start()
        self.metrics: Any = None  # a MetricsServer when metrics.prometheus.port >= 0
        self.bound_ports: list[int] = []
        self._stopping = False
        self.fatal_error: str | None = None
        self.request_shutdown: Callable[[], None] | None = None  # set by broker.main

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ start

    def open(self) -> None:
        """Synchronous part of startup: storage and metadata (no sockets)."""
        started = time.monotonic()
        # The clean-shutdown marker is per log dir; the metadata log shares it.
        self.log_manager = LogManager(
            [*self.config.log_dirs],
            default_config=self.resolver.log_config(MetadataImage(), "__default__"),
            now_ms=self.now_ms(),
            dir_ids=self.dir_ids,
            offline_at_start=self.failed_dirs,
            select_strategy=self.config["log.dir.select.strategy"],
            on_dir_failure=self._on_log_dir_failure,
            cleaner_config=CleanerConfig(
                dedupe_buffer_size=self.config["log.cleaner.dedupe.buffer.size"],
                io_buffer_size=self.config["log.cleaner.io.buffer.size"],
                io_buffer_load_factor=self.config["log.cleaner.io.buffer.load.factor"],
            ),
        )
        if self.config.metadata_log_dir in self.log_manager.offline_dirs:
            raise StartupError(
                f"metadata log dir {self.config.metadata_log_dir} is offline: "
                f"{self.log_manager.offline_dirs[self.config.metadata_log_dir]}"
            )
        self.quorum = SingleVoterQuorum(
            self.config.metadata_log_dir,
            node_id=self.node_id,
            now_ms=self.now_ms(),
            clean_shutdown=self.log_manager.had_clean_shutdown,
        )
        self.replica_manager = ReplicaManager(node_id=self.node_id, log_manager=self.log_manager, now_ms=self.now_ms)
        threads = self.config["num.replica.alter.log.dirs.threads"] or len(self.config.log_dirs)
        self.log_dir_movers = ReplicaAlterLogDirsManager(
            replica_manager=self.replica_manager,
            num_threads=threads,
            throttle_bytes_per_second=lambda: self.resolver.broker_value(
                self.image, "replica.alter.log.dirs.io.max.bytes.per.second"
            ),
            crash_point=self.faults.crash_point_hook(),
            offload=self.storage_io.run,
        )
        self.controller = QuorumController(self.config, self.quorum, clock=self.clock)
        self.controller.add_listener(self._on_metadata)
        self.controller.load()
        eps = [(e.name, e.host, e.port) for e in self.config.advertised_listeners]
        self._register(eps)
        for topic, partition in sorted(self.log_manager.future_logs()):
            self.log_dir_movers.add(TopicPartition(topic, partition))  # KIP-113: resume
        self.groups = self._open_group_coordinator()
        log.info(
            "kavka node %d of cluster %s opened %d partitions in %.2fs",
            self.node_id,
            self.cluster_id,
            len(self.replica_manager.partitions),
            time.monotonic() - started,
        )

    def _open_group_coordinator(self) -> GroupCoordinatorManager:
        """The group coordinator, its state replayed from the hosted `__consumer_offsets` partitions."""
        c = self.config
        groups = GroupCoordinatorManager(
            config=GroupConfig(
                min_session_timeout_ms=c["group.min.session.timeout.ms"],
                max_session_timeout_ms=c["group.max.session.timeout.ms"],
                initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
                max_size=c["group.max.size"],
            ),
            replica_manager=self.replica_manager,
            num_partitions=c["offsets.topic.num.partitions"],
            create_offsets_topic=self._create_offsets_topic,
            now_ms=self.now_ms,
            offset_metadata_max_bytes=c["offset.metadata.max.bytes"],
            offsets_retention_ms=c["offsets.retention.ms"],
            offsets_retention_check_interval_ms=c["offsets.retention.check.interval.ms"],
            consumer_config=ConsumerGroupConfig(
                session_timeout_ms=c["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=c["group.consumer.heartbeat.interval.ms"],
                max_size=c["group.consumer.max.size"],
            ),
            topic_partitions=self._topic_partition_count,
        )
        started = time.monotonic()
        n = groups.load()
        if n:
            log.info("loaded %d records of %s in %.2fs", n, OFFSETS_TOPIC, time.monotonic() - started)
        return groups

    def _topic_partition_count(self, name: str) -> int | None:
        t = self.image.topics_by_name.get(name)
        return len(t.partitions) if t is not None else None

    def _create_offsets_topic(self, partitions: int) -> None:
        if OFFSETS_TOPIC in self.image.topics_by_name:
            return
        rf = max(1, min(int(self.config["offsets.topic.replication.factor"]), len(self.image.brokers)))
        configs = {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}
        [created] = self.controller.create_topics([NewTopic(OFFSETS_TOPIC, partitions, rf, configs=configs)])
        if not created.result.ok:
            raise OSError(f"cannot create {OFFSETS_TOPIC}: {created.result.message}")

    def _register(self, endpoints: list[tuple[str, str, int]]) -> None:
        self.controller.register_broker(
            broker_id=self.node_id,
            endpoints=endpoints,
            rack=self.config["broker.rack"],
            log_dirs=sorted(self.dir_ids.values()),
        )

    def _on_log_dir_failure(self, d: Path, reason: str, lost: list[tuple[str, int]]) -> None:
        """KIP-112: the LogManager took ``d`` offline; its replicas go with it."""
        lm: LogManager | None = getattr(self, "log_manager", None)
        if lm is None:
            return  # still loading: the LogManager refuses to start without an online dir
        rm: ReplicaManager | None = getattr(self, "replica_manager", None)
        if rm is not None:
            rm.mark_offline(lost)
        if not lm.online_dirs:
            self._fatal(f"every log dir has failed (last: {d}: {reason})")
        elif d == self.config.metadata_log_dir:
            self._fatal(f"the metadata log dir {d} has failed: {reason}")

    def _fatal(self, message: str) -> None:
        if self.fatal_error is not None:
            return
        self.fatal_error = message
        log.error("shutting down: %s", message)
        if self.request_shutdown is not None:
            self.request_shutdown()

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def _on_metadata(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Metadata publisher: make local replicas match the new image."""
        rm = self.replica_manager
        for topic in delta.deleted_topics.values():
            for p in topic.partitions:
                rm.remove_partition(TopicPartition(topic.name, p), delete=True)
        touched_topics = {tid for tid, _ in delta.changed_partitions}
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
                if self.node_id in reg.replicas:
                    rm.apply_partition(
                        tp,
                        topic_id=tid,
                        leader=reg.leader,
                        leader_epoch=reg.leader_epoch,
                        replicas=reg.replicas,
                        isr=reg.isr,
                        config=cfg,
                        min_insync_replicas=min_isr,
                    )
                else:
                    rm.remove_partition(tp, delete=True)
        if delta.changed_configs:
            broker_changed = any(rt == 4 for rt, _ in delta.changed_configs)
            names = {name for rt, name in delta.changed_configs if rt == 2}
            for tp in list(rm.partitions):
                if broker_changed or tp.topic in names:
                    rm.update_config(
                        tp,
                        self.resolver.log_config(image, tp.topic),
                        self.resolver.topic(image, tp.topic, "min.insync.replicas").value,
                    )

    async def start(self) -> None:
        from kavka.broker.apis import KafkaApis
        from kavka.broker.server import KafkaServer

        self.open()
        from kavka.broker.handlers.producer_ids import ProducerIdManager

        self.producer_ids = ProducerIdManager(self)
        self.apis = KafkaApis(self)
        self.server = KafkaServer(
            handlers=self.apis.handlers(),
            api_versions_response=self.apis.api_versions_response,
            max_request_size=self.config["socket.request.max.bytes"],
            queued_max_requests=self.config["queued.max.requests"],
            cut_produce_every=self.faults.cut_produce_every,
            connections_max_idle_ms=self.config["connections.max.idle.ms"],
            max_connections=self.config["max.connections"],
        )
        listeners = self.config.listeners
        for ep in listeners:
            if ep.name in self.config["controller.listener.names"] and len(listeners) > 1:
                continue
            try:
                port = await self.server.listen(ep.host, ep.port)
            except OSError as e:
                raise StartupError(f"listeners: cannot listen on {ep}: {e.strerror}") from None
            self.bound_ports.append(port)
            log.info("listening on %s://%s:%d", ep.name, ep.host, port)
        # A listener on port 0 gets a real port: advertise that one.
        adv = []
        for ep, port in zip(self.config.advertised_listeners, self.bound_ports, strict=False):
            adv.append((ep.name, ep.host, port if ep.port == 0 else ep.port))
        if adv:
            self._register(adv)
        if self.config["metrics.prometheus.port"] >= 0:
            from kavka.broker.metrics import MetricsServer

            try:
                self.metrics = MetricsServer(self, self.config["metrics.prometheus.host"], self.config["metrics.prometheus.port"])
            except OSError as e:
                raise StartupError(f"metrics.prometheus.port: cannot listen: {e.strerror}") from None
        self._start_background()

    def _start_background(self) -> None:
        c = self.config
        self.storage_io.start()
        self.groups.start()
        self._every(c["log.retention.check.interval.ms"], self._retention, "retention")
        self._every(c["replica.high.watermark.checkpoint.interval.ms"], self._checkpoint_high_watermarks, "hw-checkpoint")
        self._every(c["log.flush.offset.checkpoint.interval.ms"], self._checkpoint_recovery, "recovery-checkpoint")
        self._every(min(c["log.flush.scheduler.interval.ms"], 1000), self._flush, "flush")
        self._every(c["producer.id.expiration.check.interval.ms"], self._expire_producer_ids, "producer-id-expiration")
        self.log_dir_movers.start()
        if c["log.cleaner.enable"]:
            self._every(c["log.cleaner.backoff.ms"], self._clean, "log-cleaner")

    def _every(self, interval_ms: int, fn: Callable[[], Any], name: str) -> None:
        async def loop() -> None:
            interval = max(interval_ms, 10) / 1000
            while True:
                await asyncio.sleep(interval)
                try:
                    result = fn()
                    if asyncio.iscoroutine(result):
                        await result  # storage passes: their disk work runs on storage_io's workers
                except Exception:
                    log.exception("background task %s failed", name)

        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def _retention(self) -> None:
        await self.storage_io.drive(self.log_manager.cleanup_logs_steps(self.now_ms(), self.replica_manager.high_watermarks()))

    async def _checkpoint_high_watermarks(self) -> None:
        await self.storage_io.drive(self.log_manager.checkpoint_high_watermarks_steps(self.replica_manager.high_watermarks()))

    def _expire_producer_ids(self) -> None:
        expiration_ms = self.resolver.broker_value(self.image, "producer.id.expiration.ms")
        now = self.now_ms()
        removed = sum(lg.remove_expired_producers(now, expiration_ms) for lg in self.log_manager.all_logs())
        if removed:
            log.info("removed %d expired producer ids (producer.id.expiration.ms=%d)", removed, expiration_ms)

    async def _clean(self) -> None:
        await self.storage_io.drive(self.log_manager.clean_logs_steps(self.now_ms(), self.replica_manager.high_watermarks()))

    async def _flush(self) -> None:
        await self.storage_io.drive(self.log_manager.flush_dirty_steps(self.now_ms()))

    async def _checkpoint_recovery(self) -> None:
        await self.storage_io.drive(self.log_manager.checkpoint_recovery_points_steps())
        await self.storage_io.drive(self.log_manager.checkpoint_log_start_offsets_steps())

    # ------------------------------------------------------------------ stop

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("shutting down")
        if self.server is not None:
            await self.server.close()
        if self.metrics is not None:
            self.metrics.close()
        if hasattr(self, "log_dir_movers"):
            await self.log_dir_movers.stop()
        if hasattr(self, "groups"):
            await self.groups.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await self.storage_io.stop()  # jobs in flight finish before the logs close
        self.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown()
        self.quorum.close()
        log.info("shut down cleanly")


__all__ = ["BrokerNode", "StartupError", "ConfigError"]
