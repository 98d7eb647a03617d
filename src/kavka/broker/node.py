"""BrokerNode: the composition root. Builds every part, starts them, stops them in a fixed order.

A node's parts by role (Kafka's KafkaRaftServer with its SharedServer, BrokerServer and
ControllerServer):
- shared by every node (broker.shared_server.SharedServer): the metadata log and raft, the raft
  driver, the MetadataLoader (committed records -> the node's MetadataImage, `image`, published
  after each raft poll), and the ControllerClient (`controller`: every metadata change goes to the
  active controller through it, local there and an RPC elsewhere);
- the controller role (broker.shared_server.ControllerServer, where `process.roles` has
  `controller`): the QuorumController, the controller listener's APIs, broker sessions and the
  leader rebalance;
- the broker role, built here: the LogManager, the ReplicaManager and its collaborators (replica
  fetchers, throttles, AlterPartition), the log-dir movers, the BrokerMetadataPublisher
  (broker.metadata_publisher: local replicas, the group coordinator, tiered storage, throttles and
  configs follow each image), the group coordinator, the remote log manager, the client listeners,
  the broker lifecycle and the KIP-858 assignments. The parts a node may run without are declared
  None in `__init__`.

Startup: check every log dir's meta.properties (formatted, one cluster, this node) -> load the
partition logs (recovering after an unclean stop) -> open the metadata log and raft -> start the
raft driver and wait until the metadata log is caught up and published (the sole voter elects
itself at once; Partition objects for replicas hosted here) -> open the group coordinator -> listen
-> register this broker (endpoints, rack, log dir ids) through the controller, awaiting the commit.
Shutdown is the reverse: stop accepting, drain in-flight responses, stop background tasks, stop
the raft driver, checkpoint high watermarks, close logs cleanly (writing the clean-shutdown
marker), close the metadata log.

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
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME, Authorizer, parse_super_users
from kavka.broker.assignments import Assignment, AssignmentsManager
from kavka.broker.client_quotas import ClientQuotas
from kavka.broker.config_resolver import ConfigResolver
from kavka.broker.lifecycle import BrokerLifecycle
from kavka.broker.metadata_publisher import BrokerMetadataPublisher
from kavka.broker.shared_server import SharedServer, StartupError
from kavka.broker.storage_io import StorageIoManager
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.common import AclOperation, AlterConfigOpType, ConfigResourceType, ResourceType
from kavka.config import BrokerConfig, ConfigError
from kavka.controller.quorum_controller import QuorumController
from kavka.controller.results import ApiResult, NewTopic
from kavka.coordinator.consumer_group import ConsumerGroupConfig
from kavka.coordinator.group import GroupConfig
from kavka.coordinator.manager import GroupCoordinatorManager
from kavka.coordinator.records import OFFSETS_TOPIC
from kavka.coordinator.transaction import TxnConfig, WriteMarkers
from kavka.coordinator.txn_manager import TransactionCoordinatorManager
from kavka.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kavka.faults import FaultInjection
from kavka.metadata.image import MetadataImage
from kavka.oauthbearer import JwksSource
from kavka.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from kavka.replication.log_dir_mover import ReplicaAlterLogDirsManager
from kavka.replication.partition import TopicPartition
from kavka.replication.quota import ReplicationQuotas
from kavka.replication.replica_manager import ReplicaManager
from kavka.replication.replica_selector import replica_selector
from kavka.scram import MECHANISMS as SCRAM_MECHANISMS
from kavka.scram import ScramCredential
from kavka.storage.cleaner import CleanerConfig
from kavka.storage.faults import FAULTS
from kavka.storage.log_manager import LogManager
from kavka.storage.meta_properties import generate_uuid, read_meta_properties, write_meta_properties

log = logging.getLogger("kavka.broker")


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


def _unfenced_in(image: MetadataImage, broker_id: int, epoch: int) -> bool:
    b = image.brokers.get(broker_id)
    return b is not None and b.epoch == epoch and not b.fenced


def _no_other_live_broker(image: MetadataImage, broker_id: int) -> bool:
    return not any(b.usable for other, b in image.brokers.items() if other != broker_id)


def _swap(listener: str, tls: Any, new: Any) -> None:
    """Put `new`'s context into the listener's ListenerTls: the next accept serves it."""
    from kavka.broker.tls import rfc2253

    tls.context, tls.certificate, tls.keystore, tls.keystore_mtime = new.context, new.certificate, new.keystore, new.keystore_mtime
    subject = rfc2253(new.certificate.subject) if new.certificate is not None else "?"
    log.info("listener %s: keystore reloaded; new connections get the certificate %s", listener, subject)


class BrokerNode:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        # kavka.authorizer over the image's ACLs, rebuilt when they change (authorizer()).
        self._authorizer: Authorizer | None = None
        self._authorizer_acls: object = None
        self.clock = clock
        self.node_id = config.node_id
        roles = set(config["process.roles"])
        self.is_broker = "broker" in roles  # serves clients, hosts partitions, registers and heartbeats
        self.is_controller = "controller" in roles  # a voter of the metadata quorum
        self.resolver = ConfigResolver(config)
        self.faults = FaultInjection.from_environment(bool(config["kavka.test.fault.injection.enable"]))
        FAULTS.configure(self.faults.disk_fault_file)
        self.cluster_id, self.dir_ids, self.failed_dirs = check_log_dirs(config)
        self._tasks: list[asyncio.Task[None]] = []
        self.storage_io = StorageIoManager(threads=self.config["background.threads"])
        # The parts a node may run without, declared here: None until (or unless) built.
        self.server = None  # set by start() on a broker
        self.metrics: Any = None  # a MetricsServer when metrics.prometheus.port >= 0
        self.quorum_controller: QuorumController | None = None  # where process.roles has controller
        self.lifecycle: BrokerLifecycle | None = None  # a broker, once registered
        self.groups: GroupCoordinatorManager | None = None  # a broker, once the metadata log is replayed
        self.transactions: TransactionCoordinatorManager | None = None  # likewise
        self._marker_channels: dict[int, Any] = {}  # leader id -> AsyncChannel (WriteTxnMarkers)
        self._verify_channels: dict[int, Any] = {}  # coordinator id -> AsyncChannel (AddPartitionsToTxn v4)
        # transactional id -> resolved once the last of its Produce requests waiting to append has
        # appended: the ones read after it wait for it (broker.handlers.produce)
        self.txn_appends: dict[str, asyncio.Future[None]] = {}
        # leader id -> markers waiting for its next WriteTxnMarkers, and the task draining them
        self._marker_queues: dict[int, list[tuple[WriteMarkers, list[TopicPartition], asyncio.Future[Any]]]] = {}
        self._marker_drains: dict[int, asyncio.Task[None]] = {}
        self.txn_marker_requests = 0  # WriteTxnMarkers requests sent (a batch counts once)
        self.remote_log_manager: Any = None  # a broker with remote.log.storage.system.enable=true
        self.assignments: AssignmentsManager | None = None  # a broker, once registered
        self.bound_ports: list[int] = []
        # How this node's own connections reach other nodes (kavka.client.security), set by start():
        # to brokers through the inter-broker listener, to controllers through the controller listener.
        self.inter_broker_security: ClientSecurity = PLAINTEXT
        self.tls: dict[str, Any] = {}  # SSL listeners' ListenerTls (kavka.broker.tls), set by start()
        self.sasl: dict[str, Any] = {}  # SASL listeners' ListenerSasl (kavka.broker.sasl_authenticator), set by start()
        self.controller_security: ClientSecurity = PLAINTEXT
        self._stopping = False
        # Kafka's BrokerState gauge: STARTING (1), RUNNING (3) once start() is done,
        # PENDING_CONTROLLED_SHUTDOWN (6) while leaderships move away, SHUTTING_DOWN (7) after.
        self.broker_state = 1
        self.fatal_error: str | None = None
        self.request_shutdown: Callable[[], None] | None = None  # set by broker.main
        self.jwks_sources: list[JwksSource] = []  # OAUTHBEARER key sets, started by start()

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
        self.replica_manager = ReplicaManager(
            node_id=self.node_id,
            log_manager=self.log_manager,
            now_ms=self.now_ms,
            fetch_max_bytes=self.config["fetch.max.bytes"],
            replica_selector=replica_selector(self.config["replica.selector.class"]),
            replica_lag_time_max_ms=self.config["replica.lag.time.max.ms"],
        )
        self.replica_manager.metadata = lambda: self.image
        self.publisher = BrokerMetadataPublisher(
            node_id=self.node_id,
            replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            resolver=self.resolver,
            online_dir_ids=self._online_dir_ids,
        )
        self._open_replication()
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
        # The metadata log, raft, the metadata loader and the controller client; the controller
        # role where process.roles has it (broker.shared_server).
        self.shared = SharedServer(
            self.config, cluster_id=self.cluster_id, clock=self.clock,
            controller_security=self.controller_security, listener_tls=self.tls, listener_sasl=self.sasl,
            cluster_action=self._may_cluster_action if self.config["authorizer.class.name"] else None,
        )
        self.shared.open([self.publisher.publish])
        self.controller = self.shared.controller
        self.quorum_controller = self.shared.quorum_controller
        self._opened_at = started

    def _open_replication(self) -> None:
        """Replica fetchers and the AlterPartition path (the ReplicaManager's collaborators)."""
        c = self.config
        rm = self.replica_manager
        self.replica_fetchers = ReplicaFetcherManager(
            node_id=self.node_id,
            replica_manager=rm,
            endpoint=self._broker_endpoint,
            broker_epoch=self._broker_epoch,
            security=self.inter_broker_security,
            settings=FetcherSettings(
                max_bytes=c["replica.fetch.max.bytes"],
                response_max_bytes=c["replica.fetch.response.max.bytes"],
                wait_max_ms=c["replica.fetch.wait.max.ms"],
                min_bytes=c["replica.fetch.min.bytes"],
                backoff_ms=c["replica.fetch.backoff.ms"],
                socket_timeout_ms=c["replica.socket.timeout.ms"],
                num_fetchers=c["num.replica.fetchers"],
            ),
        )
        rm.fetchers = self.replica_fetchers
        # Replication throttles (KIP-73): bounds follow the dynamic broker configs (_on_metadata).
        self.replication_quotas = ReplicationQuotas(
            self.node_id, samples=c["replication.quota.window.num"], window_s=c["replication.quota.window.size.seconds"]
        )
        self.replica_fetchers.quotas = self.replication_quotas
        # Client byte quotas (KIP-13), from the quotas in the metadata image (broker.client_quotas).
        self.client_quotas = ClientQuotas(c["quota.window.num"], c["quota.window.size.seconds"], lambda: self.image)
        rm.replication_quotas = self.publisher.replication_quotas = self.replication_quotas
        self.replica_fetchers.image = lambda: self.image
        # Static values now; dynamic ones come with the metadata log (BrokerMetadataPublisher).
        self.publisher.apply_replication_throttles(MetadataImage())

        async def send(items: list[Any]) -> Any:
            return await self.controller.alter_partition(
                broker_id=self.node_id, broker_epoch=self._broker_epoch(), items=items, timeout_s=c["replica.lag.time.max.ms"] / 1000
            )

        rm.alter_partition.send = send
        rm.alter_partition.broker_epochs = lambda: {b: r.epoch for b, r in self.image.brokers.items()}

    def _broker_epoch(self) -> int:
        lifecycle = self.lifecycle
        return lifecycle.epoch if lifecycle is not None else -1

    @cached_property
    def _inter_broker_listener(self) -> str | None:
        """Read once: the replica fetchers ask for their leader's endpoint before every fetch, and
        working the name out parses `listeners` (8 % of a follower's CPU under RF=3 acks=all);
        the keys it reads are not dynamic."""
        return self.config.outgoing_inter_broker_listener()

    def _broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where this broker's connections reach `broker_id`: its endpoint of the inter-broker listener
        (BrokerConfig.outgoing_inter_broker_listener: Kafka's rule), reached through its security."""
        b = self.image.brokers.get(broker_id)
        if b is None or not b.endpoints:
            return None
        want = self._inter_broker_listener
        for name, host, port in b.endpoints:
            if name.upper() == want:
                return host, port
        return None

    async def _catch_up_metadata(self) -> None:
        """Start the raft driver; return when the metadata log is replayed (or raise StartupError)."""
        await self.shared.start(self._on_raft_stopped)
        ready = await self.shared.wait_caught_up(60.0)
        await self.publisher.published()
        if not ready:
            raise StartupError(
                f"the metadata quorum did not elect a leader in 60s (controller.quorum.voters): "
                f"this node is {self.shared.raft.state_name} in epoch {self.shared.raft.leader_and_epoch().epoch}"
            )
        log.info(
            "metadata log replayed up to offset %d (raft %s, epoch %d)",
            self.shared.metadata_loader.applied_offset,
            self.shared.raft.state_name,
            self.shared.raft.leader_and_epoch().epoch,
        )
        for topic, partition in sorted(self.log_manager.future_logs()):
            self.log_dir_movers.add(TopicPartition(topic, partition))  # KIP-113: resume
        if self.is_broker:
            self.groups = self._open_group_coordinator()
            self.remote_log_manager = self._open_remote_log_manager()
            self.replica_manager.remote_log_manager = self.publisher.remote_log_manager = self.remote_log_manager
            self.publisher.groups = self.groups
            self.transactions = self._open_transaction_coordinator()
            self.publisher.transactions = self.transactions
        log.info(
            "kavka node %d of cluster %s opened %d partitions in %.2fs",
            self.node_id,
            self.cluster_id,
            len(self.replica_manager.partitions),
            time.monotonic() - self._opened_at,
        )

    def _on_raft_stopped(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._fatal(f"the metadata quorum stopped: {task.exception()!r}")

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
        # Transaction markers written to __consumer_offsets complete TxnOffsetCommit's offsets.
        self.replica_manager.txn_marker_listeners.append(groups.complete_txn)
        started = time.monotonic()
        n = groups.load()
        if n:
            log.info("loaded %d records of %s in %.2fs", n, OFFSETS_TOPIC, time.monotonic() - started)
        return groups

    def _open_transaction_coordinator(self) -> TransactionCoordinatorManager:
        """The transaction coordinator (KIP-98), its state replayed from the led `__transaction_state` partitions."""
        c = self.config
        txns = TransactionCoordinatorManager(
            config=TxnConfig(
                transaction_max_timeout_ms=c["transaction.max.timeout.ms"],
                transactional_id_expiration_ms=c["transactional.id.expiration.ms"],
                # The topics as created, whatever the configs say now (as Kafka's partitionFor).
                transaction_state_log_num_partitions=self._topic_partition_count(TRANSACTION_STATE_TOPIC)
                or c["transaction.state.log.num.partitions"],
                offsets_topic_num_partitions=self._topic_partition_count(OFFSETS_TOPIC)
                or c["offsets.topic.num.partitions"],
            ),
            replica_manager=self.replica_manager,
            create_topic=self._create_transaction_state_topic,
            now_ms=self.now_ms,
            topic_partitions=self._topic_partition_count,
            cleanup_interval_ms=c["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remote_markers=self._send_txn_markers,
            crash_point=self.faults.crash_point_hook(),
        )
        return txns

    def _close_marker_channels(self) -> None:
        for channel in self._marker_channels.values():
            channel.close()
        self._marker_channels.clear()
        for channel in self._verify_channels.values():
            channel.close()
        self._verify_channels.clear()
        for task in list(self._marker_drains.values()):
            task.cancel()

    async def verify_txn_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: list[TopicPartition], *,
                                    add: bool = False) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1, the leader side (Kafka's AddPartitionsToTxnManager): ask the transaction
        coordinator of `transactional_id` whether `partitions` are in that producer's ongoing
        transaction. The coordinator is the leader of the id's __transaction_state partition
        (computed here, as the coordinator does: no FindCoordinator); this broker's own core is
        asked directly, another broker with AddPartitionsToTxn v4 verify_only over the
        inter-broker listener. The answer per partition is already the Produce error, as Kafka's
        ReplicaManager maps it: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE ->
        INVALID_TXN_STATE, a coordinator not reachable, moving or busy -> NOT_ENOUGH_REPLICAS
        (retriable, no metadata refresh), a refused ClusterAction -> INVALID_TXN_STATE.

        `add` (transactions v2, KIP-890 part 2: Produce v12, TxnOffsetCommit v5): the partitions
        are added to the transaction rather than checked (AddPartitionsToTxn v5 without
        verify_only); CONCURRENT_TRANSACTIONS (the previous transaction's markers still being
        written) is asked again every 20 ms for up to 100 ms, then passed through (Kafka's
        add.partitions.to.txn.retry.backoff.ms and .retry.backoff.max.ms; v2 clients retry it)."""
        if not add:
            return await self._verify_txn_partitions(transactional_id, producer_id, producer_epoch, partitions)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 0.100
        out: dict[TopicPartition, ErrorCode] = {}
        while True:
            got = await self._verify_txn_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                    add=True)
            out.update(got)
            partitions = [tp for tp, e in got.items() if e == ErrorCode.concurrent_transactions]
            if not partitions or loop.time() + 0.020 > deadline:
                return out
            await asyncio.sleep(0.020)

    async def _verify_txn_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     partitions: list[TopicPartition], *,
                                     add: bool = False) -> dict[TopicPartition, ErrorCode]:
        from kavka.client.async_channel import AsyncChannel
        from kavka.coordinator.records import partition_for
        from kavka.protocol import api
        from kavka.protocol.api import ApiKey
        from kavka.protocol.messages import make, nested

        def produce_error(e: ErrorCode) -> ErrorCode:
            if e == ErrorCode.producer_fenced:
                return ErrorCode.invalid_producer_epoch
            if e in (ErrorCode.transaction_abortable, ErrorCode.cluster_authorization_failed):
                return ErrorCode.invalid_txn_state
            if e == ErrorCode.concurrent_transactions and add:
                return e
            if e in (ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                     ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                     ErrorCode.not_coordinator):
                return ErrorCode.not_enough_replicas
            return e

        def everywhere(e: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(partitions, produce_error(e))

        n = self._topic_partition_count(TRANSACTION_STATE_TOPIC)
        if not n:
            return everywhere(ErrorCode.coordinator_not_available)
        t = self.image.topics_by_name[TRANSACTION_STATE_TOPIC]
        reg = t.partitions.get(partition_for(transactional_id, n))
        leader = reg.leader if reg is not None else -1
        if leader < 0:
            return everywhere(ErrorCode.coordinator_not_available)
        if leader == self.node_id:
            txns = self.transactions
            if txns is None:
                return everywhere(ErrorCode.coordinator_not_available)
            reply = await txns.call(lambda rid, now: txns.core.handle_add_partitions(
                rid, transactional_id, producer_id, producer_epoch, partitions, now, verify_only=not add,
                client_transaction_version=2 if add else 0))
            per = dict(reply.partition_errors)
            return {tp: produce_error(per.get(tp, reply.error)) for tp in partitions}
        addr = self._broker_endpoint(leader)
        if addr is None:
            return everywhere(ErrorCode.coordinator_not_available)
        version = 5 if add else 4
        req_cls = api.request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        resp_cls = api.response_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        req = make(req_cls, transactions=(make(
            nested(req_cls, "AddPartitionsToTxnTransaction"), transactional_id=transactional_id,
            producer_id=producer_id, producer_epoch=producer_epoch, verify_only=not add,
            topics=tuple(make(nested(req_cls, "AddPartitionsToTxnTopic"), name=name, partitions=tuple(ps))
                         for name, ps in topics.items())),))
        channel = self._verify_channels.get(leader)
        if channel is None:
            channel = self._verify_channels[leader] = AsyncChannel(
                f"kavka-txn-verify-{self.node_id}", security=self.inter_broker_security)
        try:
            resp = await channel.call(addr, req, resp_cls, 10.0)
        except (OSError, ConnectionError, TimeoutError) as e:
            log.warning("AddPartitionsToTxn (verify) to broker %d failed: %r", leader, e)
            return everywhere(ErrorCode.network_exception)
        if resp.error_code != ErrorCode.none:
            return everywhere(ErrorCode(resp.error_code))
        out = everywhere(ErrorCode.invalid_txn_state)  # a partition the answer leaves out is not verified
        for r in resp.results_by_transaction:
            for rt in r.topic_results:
                for p in rt.results_by_partition:
                    tp = TopicPartition(str(rt.name), int(p.partition_index))
                    if tp in out:
                        out[tp] = produce_error(ErrorCode(p.partition_error_code))
        return out

    async def _send_txn_markers(self, m: WriteMarkers, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """WriteTxnMarkers v1 to the leaders of `partitions` (the transaction coordinator's marker
        channel, Kafka's TransactionMarkerChannelManager), over the inter-broker listener; a
        partition with no leader answers NOT_LEADER_OR_FOLLOWER. Markers are queued per leader and
        each leader's queue is drained into one request: the markers of several transactions that
        became ready in the same poll of the core travel together (`_drain_txn_markers`)."""
        out: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            t = self.image.topics_by_name.get(tp.topic)
            reg = t.partitions.get(tp.partition) if t is not None else None
            if reg is None:
                out[tp] = ErrorCode.unknown_topic_or_partition
            elif reg.leader < 0 or reg.leader == self.node_id:
                out[tp] = ErrorCode.not_leader_or_follower
            else:
                by_leader.setdefault(reg.leader, []).append(tp)
        loop = asyncio.get_running_loop()
        waits = []
        for leader, tps in by_leader.items():
            fut: asyncio.Future[dict[TopicPartition, ErrorCode]] = loop.create_future()
            self._marker_queues.setdefault(leader, []).append((m, tps, fut))
            if leader not in self._marker_drains:
                # Starts after the tasks already scheduled (the other markers of this poll) queued theirs.
                task = self._marker_drains[leader] = loop.create_task(self._drain_txn_markers(leader))
                task.add_done_callback(partial(self._drain_not_started, leader))
            waits.append(fut)
        for fut in waits:
            out.update(await fut)
        return out

    def _drain_not_started(self, leader: int, task: asyncio.Task[None]) -> None:
        """A drain cancelled before it ran (shutdown) never reached its `finally`: answer its queue."""
        if self._marker_drains.get(leader) is task:
            del self._marker_drains[leader]
            for _, tps, fut in self._marker_queues.pop(leader, []):
                if not fut.done():
                    fut.set_result(dict.fromkeys(tps, ErrorCode.not_leader_or_follower))

    async def _drain_txn_markers(self, leader: int) -> None:
        batch: list[tuple[WriteMarkers, list[TopicPartition], asyncio.Future[Any]]] = []
        try:
            while queue := self._marker_queues.get(leader):
                # One marker per producer id per request: the answer is keyed by producer id.
                batch, rest, seen = [], [], set()
                for item in queue:
                    (rest if item[0].producer_id in seen else batch).append(item)
                    seen.add(item[0].producer_id)
                self._marker_queues[leader] = rest
                answers = await self._write_txn_markers_to(leader, batch)
                for m, tps, fut in batch:
                    if not fut.done():
                        fut.set_result({tp: answers.get((m.producer_id, tp), ErrorCode.not_leader_or_follower)
                                        for tp in tps})
                batch = []
        finally:
            self._marker_drains.pop(leader, None)
            for _, tps, fut in batch + self._marker_queues.pop(leader, []):  # cancelled: not sent
                if not fut.done():
                    fut.set_result(dict.fromkeys(tps, ErrorCode.not_leader_or_follower))

    async def _write_txn_markers_to(self, leader: int, batch: list[Any]) -> dict[tuple[int, TopicPartition], ErrorCode]:
        """One WriteTxnMarkers v1 with the markers of `batch`; the answer per (producer id,
        partition), empty when the leader could not be reached."""
        from kavka.client.async_channel import AsyncChannel
        from kavka.protocol import api
        from kavka.protocol.api import ApiKey
        from kavka.protocol.messages import make, nested

        req_cls = api.request_schema(ApiKey.WRITE_TXN_MARKERS, 1)
        resp_cls = api.response_schema(ApiKey.WRITE_TXN_MARKERS, 1)
        addr = self._broker_endpoint(leader)
        if addr is None:
            return {}
        markers = []
        for m, tps, _ in batch:
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            markers.append(make(
                nested(req_cls, "WritableTxnMarker"), producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                transaction_result=m.commit, coordinator_epoch=m.coordinator_epoch,
                topics=tuple(make(nested(req_cls, "WritableTxnMarkerTopic"), name=name, partition_indexes=tuple(ps))
                             for name, ps in topics.items())))
        channel = self._marker_channels.get(leader)
        if channel is None:
            channel = self._marker_channels[leader] = AsyncChannel(
                f"kavka-txn-markers-{self.node_id}", security=self.inter_broker_security)
        self.txn_marker_requests += 1
        try:
            resp = await channel.call(addr, make(req_cls, markers=tuple(markers)), resp_cls, 10.0)
        except (OSError, ConnectionError, TimeoutError) as e:
            log.warning("WriteTxnMarkers to broker %d failed: %r", leader, e)
            return {}
        return {(int(mr.producer_id), TopicPartition(str(t.name), int(p.partition_index))): ErrorCode(p.error_code)
                for mr in resp.markers for t in mr.topics for p in t.partitions}

    async def _create_transaction_state_topic(self, partitions: int) -> None:
        c = self.config
        # min.insync.replicas capped by the brokers there are, so one broker can run transactions
        # with the defaults (Kafka would refuse its acks=all appends with NOT_ENOUGH_REPLICAS).
        min_isr = max(1, min(c["transaction.state.log.min.isr"], c["transaction.state.log.replication.factor"],
                             len(self.image.usable_brokers())))
        configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_isr),
                   "segment.bytes": str(c["transaction.state.log.segment.bytes"])}
        await self._create_internal_topic(TRANSACTION_STATE_TOPIC, partitions,
                                          c["transaction.state.log.replication.factor"], configs)

    def _open_remote_log_manager(self) -> Any:
        """Tiered storage (KIP-405, kavka.tiered.remote_log_manager) when remote.log.storage.system.enable=true:
        the RemoteStorageManager plugin loaded, __remote_log_metadata replayed. None otherwise."""
        if not self.config["remote.log.storage.system.enable"]:
            return None
        from kavka.protocol.messages import uuid_to_str
        from kavka.tiered.backends import PluginLoadError, load_remote_storage_manager
        from kavka.tiered.metadata import REMOTE_LOG_METADATA_TOPIC
        from kavka.tiered.remote_log_manager import RemoteLogManager, rsm_settings
        from kavka.tiered.topic_metadata import TopicBasedRemoteLogMetadataManager

        c = self.config
        try:
            rsm = load_remote_storage_manager(c["remote.log.storage.manager.class.name"], rsm_settings(c.unknown))
        except Exception as e:  # the plugin's own configure() errors too
            if isinstance(e, PluginLoadError):
                raise StartupError(str(e)) from None
            raise StartupError(f"remote.log.storage.manager.class.name: the RemoteStorageManager refused its rsm.config.* keys: {e}") from None

        async def create_topic(partitions: int) -> None:
            configs = {"retention.ms": "-1", "cleanup.policy": "delete"}
            await self._create_internal_topic(REMOTE_LOG_METADATA_TOPIC, partitions,
                                              c["remote.log.metadata.topic.replication.factor"], configs)

        metadata = TopicBasedRemoteLogMetadataManager(
            broker_id=self.node_id,
            replica_manager=self.replica_manager,
            num_partitions=c["remote.log.metadata.topic.num.partitions"],
            create_topic=create_topic,
            topic_partitions=lambda: self._topic_partition_count(REMOTE_LOG_METADATA_TOPIC),
            now_ms=self.now_ms,
            leader_endpoint=lambda p: self._partition_leader_endpoint(REMOTE_LOG_METADATA_TOPIC, p),
            is_replica=lambda p: self._hosts_replica(REMOTE_LOG_METADATA_TOPIC, p),
            security=self.inter_broker_security,
        )
        rlm = RemoteLogManager(
            broker_id=self.node_id,
            rsm=rsm,
            metadata=metadata,
            replica_manager=self.replica_manager,
            run_io=self.storage_io.run,
            now_ms=self.now_ms,
            interval_ms=c["remote.log.manager.task.interval.ms"],
            copy_bytes_per_second=lambda: self.resolver.broker_value(self.image, "remote.log.manager.copy.max.bytes.per.second"),
            fetch_bytes_per_second=lambda: self.resolver.broker_value(self.image, "remote.log.manager.fetch.max.bytes.per.second"),
            fetch_quota_windows=(c["remote.log.manager.fetch.quota.window.num"],
                                 float(c["remote.log.manager.fetch.quota.window.size.seconds"])),
            reader_threads=c["remote.log.reader.threads"],
            crash_point=self.faults.crash_point_hook(),
            topic_exists=lambda tid: uuid_to_str(tid) in self.image.topics_by_id,
        )
        # KIP-405 follower fetch: a replica the leader sends to tiered storage rebuilds only the local tail.
        self.replica_fetchers.remote_log_aux_state = rlm.build_remote_log_aux_state
        n = rlm.load()
        log.info("tiered storage on (%s): %d remote log metadata events replayed", c["remote.log.storage.manager.class.name"], n)
        return rlm

    def _partition_leader_endpoint(self, topic: str, partition: int) -> tuple[str, int] | None:
        """The inter-broker endpoint of the leader of a partition (tiered storage's metadata writes)."""
        t = self.image.topics_by_name.get(topic)
        reg = t.partitions.get(partition) if t is not None else None
        return self._broker_endpoint(reg.leader) if reg is not None and reg.leader >= 0 else None

    def _hosts_replica(self, topic: str, partition: int) -> bool:
        t = self.image.topics_by_name.get(topic)
        reg = t.partitions.get(partition) if t is not None else None
        return reg is not None and self.node_id in reg.replicas

    def _topic_partition_count(self, name: str) -> int | None:
        t = self.image.topics_by_name.get(name)
        return len(t.partitions) if t is not None else None

    async def _create_offsets_topic(self, partitions: int) -> None:
        configs = {"cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}
        await self._create_internal_topic(OFFSETS_TOPIC, partitions, self.config["offsets.topic.replication.factor"], configs)

    async def _create_internal_topic(self, name: str, partitions: int, wanted_rf: int, configs: dict[str, str]) -> None:
        """Create an internal topic (`__consumer_offsets`, `__remote_log_metadata`) unless it exists.

        The replication factor is asked for as configured, the controller judging whether the
        brokers are there (this broker's view may lag behind brokers that just registered); only
        if it says there are too few is it capped by the brokers this broker sees, so a
        single-node cluster still gets the topic."""
        if name in self.image.topics_by_name:
            return
        [created] = await self.controller.create_topics([NewTopic(name, partitions, wanted_rf, configs=configs)])
        if created.result.error == ErrorCode.invalid_replication_factor:
            rf = max(1, min(wanted_rf, len(self.image.usable_brokers())))
            log.info("creating %s with replication factor %d: %s", name, rf, created.result.message)
            [created] = await self.controller.create_topics([NewTopic(name, partitions, rf, configs=configs)])
        if created.result.error == ErrorCode.topic_already_exists:
            return  # another broker created it first (both saw the need before the topic)
        if not created.result.ok:
            raise OSError(f"cannot create {name}: {created.result.message}")

    def _lifecycle(self, endpoints: list[tuple[str, str, int]]) -> BrokerLifecycle:
        async def register(incarnation_id: str) -> int:
            # KIP-966: the registration this one follows -- this process's own (its logs are
            # intact), else the one the last clean shutdown named -- or -1 (an unclean shutdown).
            previous = lifecycle.epoch if lifecycle.epoch >= 0 else self.log_manager.previous_broker_epoch
            return await self.controller.register_broker(
                broker_id=self.node_id,
                incarnation_id=incarnation_id,
                endpoints=endpoints,
                rack=self.config["broker.rack"],
                log_dirs=self._online_dir_ids(),
                previous_broker_epoch=previous,
            )

        lifecycle = BrokerLifecycle(
            self.controller,
            broker_id=self.node_id,
            heartbeat_interval_ms=self.config["broker.heartbeat.interval.ms"],
            metadata_offset=lambda: self.image.offset,
            register=register,
            dir_failure_timeout_ms=self.config["log.dir.failure.timeout.ms"],
            on_fatal=self._fatal,
            session_timeout_ms=self.config["broker.session.timeout.ms"],
            image_unfenced=self._image_unfenced,
            on_lapse=self.replica_manager.set_leadership_lapsed,
        )
        return lifecycle

    def _image_unfenced(self) -> bool:
        b = self.image.brokers.get(self.node_id)
        return b is not None and not b.fenced

    def _online_dir_ids(self) -> list[str]:
        """KIP-858: the directory ids this broker registers -- its online log dirs only."""
        lm = self.log_manager
        return sorted(self.dir_ids[d] for d in lm.online_dirs if d in self.dir_ids)

    def _replica_placements(self) -> list[tuple[str, int, str]]:
        """(topic, partition, directory id) of every replica hosted in an online dir."""
        out = []
        for d, logs in self.log_manager.logs_by_dir().items():
            dir_id = self.dir_ids.get(d)
            if dir_id is None or d in self.log_manager.offline_dirs:
                continue
            out.extend((lg.topic, lg.partition, dir_id) for lg in logs)
        return out

    def _replica_placement(self, topic: str, partition: int) -> str | None:
        """The directory id of the online dir holding this replica (None: not hosted in one)."""
        lg = self.log_manager.get_log(topic, partition)
        if lg is None:
            return None
        d = lg.dir.parent
        return None if d in self.log_manager.offline_dirs else self.dir_ids.get(d)

    def _assignments_manager(self) -> AssignmentsManager:
        async def send(batch: list[Assignment]) -> Any:
            return await self.controller.assign_replicas_to_dirs(
                broker_id=self.node_id, broker_epoch=self._broker_epoch(), assignments=batch, timeout_s=5.0
            )

        return AssignmentsManager(
            send,
            broker_id=self.node_id,
            image=lambda: self.image,
            placements=self._replica_placements,
            ready=lambda: self._broker_epoch() >= 0,
            placement_of=self._replica_placement,
        )

    def _on_log_dir_failure(self, d: Path, reason: str, lost: list[tuple[str, int]]) -> None:
        """KIP-112: the LogManager took ``d`` offline; its replicas go with it."""
        lm: LogManager | None = getattr(self, "log_manager", None)
        if lm is None:
            return  # still loading: the LogManager refuses to start without an online dir
        rm: ReplicaManager | None = getattr(self, "replica_manager", None)
        if rm is not None:
            rm.mark_offline(lost)
        lifecycle = self.lifecycle
        dir_id = self.dir_ids.get(d)
        if lifecycle is not None and dir_id is not None and d != self.config.metadata_log_dir:
            # KIP-858: the controller moves the leaderships of this dir's replicas away.
            try:
                asyncio.get_running_loop()
                lifecycle.propagate_dir_failure(dir_id)
            except RuntimeError:  # a storage worker thread
                self._loop.call_soon_threadsafe(lifecycle.propagate_dir_failure, dir_id)
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
        return self.shared.metadata_loader.image

    def authorizer(self) -> Authorizer | None:
        """The ACL authorizer (Kafka's StandardAuthorizer) over the current image's ACLs, rebuilt
        whenever a metadata change replaced them; None when authorizer.class.name is unset."""
        if not self.config["authorizer.class.name"]:
            return None
        acls = self.image.acls
        if self._authorizer is None or self._authorizer_acls is not acls:
            self._authorizer = Authorizer(
                acls.values(),
                super_users=parse_super_users(self.config["super.users"]),
                allow_everyone_if_no_acl_found=self.config["allow.everyone.if.no.acl.found"],
            )
            self._authorizer_acls = acls
        return self._authorizer

    def _may_cluster_action(self, principal: str, host: str) -> bool:
        """The controller listener's check (broker.raft_driver): ClusterAction on the Cluster."""
        auth = self.authorizer()
        return auth is None or auth.authorize(principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                              CLUSTER_NAME)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """`user`'s SCRAM credential for `mechanism` in the current metadata image (None: none)."""
        c = self.image.scram.get((SCRAM_MECHANISMS[mechanism].type, user))
        return None if c is None else ScramCredential(c.salt, c.stored_key, c.server_key, c.iterations)

    def reload_tls(self, image: MetadataImage) -> None:
        """Swap in a listener's new SSLContext when its dynamic keystore configs (this broker's own,
        from the image) changed: the next accept serves it, open connections keep theirs. A keystore
        that no longer loads (checked when it was altered) is logged and the old one kept."""
        from kavka.broker.tls import TlsConfigError, build_with_keystore, dynamic_keystore

        mine = image.broker_configs(self.config.node_id)
        for name, tls in getattr(self, "tls", {}).items():
            overrides = dynamic_keystore(mine, name)
            if overrides == (tls.keystore or {}):
                continue
            try:
                new = build_with_keystore(self.config, name, overrides)
            except TlsConfigError as e:
                log.error("listener %s: keystore not reloaded, still serving the previous one: %s", name, e)
                continue
            _swap(name, tls, new)
            self._reload_client_keystore(name, overrides)

    def _reload_client_keystore(self, listener: str, overrides: dict[str, Any]) -> None:
        """The reloaded keystore is also this node's client certificate on its own connections
        through that listener (Kafka's brokers share one SslFactory per listener): loaded into the
        client context in place, so the next connection presents it."""
        from kavka.broker.tls import TlsConfigError, reload_client_keystore

        for sec in (self.inter_broker_security, self.controller_security):
            if sec.listener == listener and sec.ssl_context is not None:
                try:
                    reload_client_keystore(sec.ssl_context, self.config, listener, overrides)
                except TlsConfigError as e:  # checked when altered; the client keeps its previous one
                    log.error("listener %s: client keystore not reloaded: %s", listener, e)

    def check_keystore_alter(
        self, resource_type: int, resource_name: str, ops: list[tuple[str, int, str | None]], *, validate_only: bool = False
    ) -> ApiResult | None:
        """Kafka's validation of a dynamic keystore before it is accepted (DynamicBrokerConfig ->
        SslFactory.validateReconfiguration): the new keystore loads, its key matches its certificate,
        and the certificate keeps the current subject DN and SANs. None: nothing to check or good.

        The same keystore values again change no config, but re-read the file if its modification
        time changed (Kafka's SslFactory rule): the new context is swapped in here, on this broker.
        A refusal is INVALID_REQUEST, as Kafka's ConfigAdminManager answers a failed broker config
        validation (KAFKA-13609 keeps it so for compatibility)."""
        from kavka.broker.tls import (
            TlsConfigError,
            build_with_keystore,
            check_reconfigurable,
            dynamic_keystore,
            dynamic_keystore_key,
        )

        touched = {k[0] for name, _, _ in ops if (k := dynamic_keystore_key(name)) is not None}
        if resource_type != ConfigResourceType.BROKER or not touched or resource_name == "":
            return None  # the controller answers a cluster-default keystore alteration
        if resource_name != str(self.config.node_id):
            return ApiResult(ErrorCode.invalid_request, f"A keystore of broker {resource_name} must be altered through that broker")
        configs = dict(self.image.broker_configs(self.config.node_id))
        for name, op, value in ops:
            if dynamic_keystore_key(name) is None:
                continue
            if op == AlterConfigOpType.SET and value is not None:
                configs[name] = value
            else:
                configs.pop(name, None)
        tls_by_name = {n.lower(): (n, t) for n, t in getattr(self, "tls", {}).items()}
        for listener in sorted(touched):
            if listener not in tls_by_name:
                return ApiResult(ErrorCode.invalid_request, f"listener.name.{listener}: not an SSL listener of broker {resource_name}")
            name, current = tls_by_name[listener]
            try:
                new = build_with_keystore(self.config, name, dynamic_keystore(configs, name))
                check_reconfigurable(current, new)
                if not validate_only and new.keystore == (current.keystore or {}) and new.keystore_mtime != current.keystore_mtime:
                    _swap(name, current, new)
                    self._reload_client_keystore(name, dynamic_keystore(configs, name))
            except TlsConfigError as e:
                return ApiResult(ErrorCode.invalid_request, f"Validation of dynamic config update of SSLFactory failed: {e}")
            except Exception as e:  # a value the parser refuses (the controller would say the same)
                return ApiResult(ErrorCode.invalid_request, str(e))
        return None

    async def start(self) -> None:
        from kavka.broker.apis import KafkaApis
        from kavka.broker.sasl_authenticator import build_listener_sasl
        from kavka.broker.server import KafkaServer
        from kavka.broker.tls import TlsConfigError, build_client_security, build_listener_tls

        try:  # before anything is opened: a bad keystore or truststore stops startup at once
            tls = self.tls = build_listener_tls(self.config)
            ibl, ctl_name = self.config.outgoing_inter_broker_listener(), self.config.outgoing_controller_listener()
            if ibl is not None:
                self.inter_broker_security = build_client_security(self.config, ibl)
            if ctl_name is not None:
                self.controller_security = build_client_security(self.config, ctl_name, "sasl.mechanism.controller.protocol")
        except TlsConfigError as e:
            raise StartupError(str(e)) from None
        # validated by kavka.config: the users parse. SCRAM users are looked up in the image at
        # each authentication, so a credential altered on any node counts from the next login.
        sasl = self.sasl = build_listener_sasl(self.config, self.scram_credential)
        for source in (s for ls in sasl.values() for s in ls.background):
            try:  # a JWKS fetched over HTTP: off the event loop, and before anything is served
                await asyncio.to_thread(source.start)
            except Exception as e:  # noqa: BLE001 -- any failure to read the JWKS stops startup (Kafka's init)
                await asyncio.to_thread(self._stop_jwks_sources)
                raise StartupError(f"sasl.oauthbearer.jwks.endpoint.url: could not read the JWKS at {source.location} "
                                   f"({type(e).__name__}: {str(e)[:200]})") from None
            self.jwks_sources.append(source)
            log.info("OAUTHBEARER: %d verification keys from the JWKS at %s", len(source.keys()), source.location)
        self.open()
        await self._catch_up_metadata()
        if tls:
            self.reload_tls(self.image)  # keystores altered dynamically before this start
            self.publisher.on_broker_configs = self.reload_tls
        if not self.is_broker:
            # process.roles=controller: a voter that serves only its controller listener.
            self._start_controller_tasks()
            log.info("controller-only node: serving the metadata quorum on %s", self.shared.controller_listener())
            return
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
            connection_throttle=lambda ip: self.client_quotas.record_connection(ip),
            request_time=self.client_quotas.record_request_time,
            accepting=False,  # until the end of start()
        )
        ctl = self.shared.controller_listener()
        bound: dict[str, int] = {}
        for ep in self.config.listeners:
            if ctl is not None and ep.name == ctl.name:
                continue  # the raft driver serves it
            try:
                port = await self.server.listen(ep.host, ep.port, listener=ep.name, tls=tls.get(ep.name), sasl=sasl.get(ep.name))
            except OSError as e:
                raise StartupError(f"listeners: cannot listen on {ep}: {e.strerror}") from None
            self.bound_ports.append(port)
            bound[ep.name] = port
            log.info("listening on %s://%s:%d (%s)", ep.name, ep.host, port, self.config.security_protocol(ep.name))
        # What other nodes and clients are told (a listener on port 0 gets a real port).
        adv = [
            (ep.name, ep.host, bound[ep.name] if ep.port == 0 else ep.port)
            for ep in self.config.advertised_listeners
            if ep.name in bound
        ]
        self._loop = asyncio.get_running_loop()
        self.lifecycle = self._lifecycle(adv)
        try:
            await self.lifecycle.register()
        except Exception as e:
            raise StartupError(f"cannot register this broker with the controller: {e}") from None
        for d in self.log_manager.offline_dirs:  # failed while loading: registered without them
            if d in self.dir_ids and d != self.config.metadata_log_dir:
                self.lifecycle.propagate_dir_failure(self.dir_ids[d])
        self.lifecycle.start()
        self.assignments = self.publisher.assignments = self._assignments_manager()
        self.assignments.start()
        # Kafka's broker waits the same way: clients are told about it only once it is unfenced.
        if not await self.lifecycle.wait_unfenced(60.0):
            raise StartupError("the controller did not unfence this broker in 60s (see the heartbeat warnings above)")
        # The controller's answer can come before this node's copy of the metadata log has the
        # record that unfences it (a broker-only node replicates it): until then this broker's
        # Metadata answers would list no brokers, and librdkafka, told of a controller it cannot
        # find, waits for a refresh that never comes. Its own image must show it unfenced first.
        epoch = self.lifecycle.epoch
        if not await self.publisher.wait_for(lambda image: _unfenced_in(image, self.node_id, epoch), 60.0):
            raise StartupError("this broker's metadata did not show it unfenced in 60s (is it replicating the metadata log?)")
        await self.publisher.published()
        if self.config["metrics.prometheus.port"] >= 0:
            from kavka.broker.metrics import MetricsServer

            try:
                self.metrics = MetricsServer(self, self.config["metrics.prometheus.host"], self.config["metrics.prometheus.port"])
            except OSError as e:
                raise StartupError(f"metrics.prometheus.port: cannot listen: {e.strerror}") from None
        self._start_background()
        self.server.enable_request_processing()
        self.broker_state = 3

    def _start_background(self) -> None:
        c = self.config
        self.storage_io.start()
        self.groups.start()
        if self.transactions is not None:
            self.transactions.start()
            self.transactions.sync_leadership()
        self._every(c["log.retention.check.interval.ms"], self._retention, "retention")
        self._every(c["replica.high.watermark.checkpoint.interval.ms"], self._checkpoint_high_watermarks, "hw-checkpoint")
        self._every(c["log.flush.offset.checkpoint.interval.ms"], self._checkpoint_recovery, "recovery-checkpoint")
        self._every(min(c["log.flush.scheduler.interval.ms"], 1000), self._flush, "flush")
        self._every(c["producer.id.expiration.check.interval.ms"], self._expire_producer_ids, "producer-id-expiration")
        self._start_controller_tasks()
        self.log_dir_movers.start()
        self.replica_fetchers.start()
        # Kafka's isr-expiration task: followers not caught up for replica.lag.time.max.ms leave the ISR.
        lag_ms = c["replica.lag.time.max.ms"]
        self._every(max(lag_ms // 2, 10), lambda: self.replica_manager.shrink_isrs(replica_lag_time_max_ms=lag_ms), "isr-expiration")
        # While the controller session has lapsed, a leader steps down once a follower stops fetching.
        self._every(min(lag_ms // 4, 250), self._review_step_downs, "lapsed-step-down")
        if self.remote_log_manager is not None:
            self.remote_log_manager.start()
        if c["log.cleaner.enable"]:
            self._every(c["log.cleaner.backoff.ms"], self._clean, "log-cleaner")

    def _start_controller_tasks(self) -> None:
        cs = self.shared.controller_server
        if cs is not None:
            for interval_ms, fn, name in cs.periodic_tasks():
                self._every(interval_ms, fn, name)
            self._every(self.shared.update_voter_period_ms(), self.shared.update_voter_endpoints, "update-voter")

    def _review_step_downs(self) -> None:
        if self.replica_manager.leadership_lapsed:
            self.replica_manager.review_step_downs()

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

    async def _stop_tasks(self) -> None:
        self.publisher.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def _stop_jwks_sources(self) -> None:
        for source in self.jwks_sources:
            source.stop()
        self.jwks_sources.clear()

    async def _controlled_shutdown(self, lifecycle: BrokerLifecycle, timeout_s: float) -> str:
        """Ask the controller to move this broker's leaderships away and wait for its grant -- or
        only until this broker's metadata shows no other live broker (fenced or shutting down
        too, as when a whole cluster stops): there is nowhere to move a leadership then, and a
        grant may never come (the last voters standing cannot commit it)."""
        ask = asyncio.ensure_future(lifecycle.controlled_shutdown(timeout_s))
        alone = asyncio.ensure_future(self.publisher.wait_for(lambda image: _no_other_live_broker(image, self.node_id), timeout_s))
        try:
            await asyncio.wait({ask, alone}, return_when=asyncio.FIRST_COMPLETED)
            if ask.done():
                return "completed" if ask.result() else "not confirmed by a controller"
            if alone.result():
                return "ended: no other live broker to move leaderships to"
            return "completed" if await ask else "not confirmed by a controller"
        finally:
            for t in (ask, alone):
                t.cancel()

    async def stop(self) -> None:
        """Stop a node whose start() returned (broker.main calls it only then: a start that
        fails ends the process, which closes what open() had opened)."""
        if self._stopping:
            return
        self._stopping = True
        log.info("shutting down")
        lifecycle = self.lifecycle
        if lifecycle is not None:
            if self.fatal_error is None:
                # Kafka's controlled shutdown: leaderships move away while clients can still ask.
                started = time.monotonic()
                self.broker_state = 6
                outcome = await self._controlled_shutdown(lifecycle, self.config["broker.session.timeout.ms"] / 1000)
                log.info("controlled shutdown %s in %.2fs", outcome, time.monotonic() - started)
            self.broker_state = 7
            await lifecycle.stop()
        steps: list[tuple[str, Callable[[], Any]]] = []
        if self.assignments is not None:
            steps.append(("assignments manager", self.assignments.stop))
        if self.server is not None:
            steps.append(("client connections", self.server.close))
        if self.metrics is not None:
            steps.append(("metrics", self.metrics.close))
        steps.append(("replica fetchers", self.replica_fetchers.stop))
        steps.append(("log dir movers", self.log_dir_movers.stop))
        if self.transactions is not None:
            steps.append(("transaction coordinator", self.transactions.stop))
            steps.append(("transaction marker channels", self._close_marker_channels))
        if self.groups is not None:
            steps.append(("group coordinator", self.groups.stop))
        if self.remote_log_manager is not None:
            steps.append(("remote log manager", self.remote_log_manager.stop))
        steps.append(("background tasks", self._stop_tasks))
        steps.append(("OAUTHBEARER JWKS refresh", lambda: asyncio.to_thread(self._stop_jwks_sources)))
        steps.append(("storage io", self.storage_io.stop))  # jobs in flight finish before the logs close
        steps.append(("metadata quorum", self.shared.stop))
        for name, step in steps:
            started = time.monotonic()
            result = step()
            if asyncio.iscoroutine(result):
                await result
            if time.monotonic() - started > 1.0:
                log.warning("shutdown: stopping the %s took %.1fs", name, time.monotonic() - started)
        self.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown(broker_epoch=self.lifecycle.epoch if self.lifecycle is not None else -1)
        self.shared.close()
        log.info("shut down cleanly")


__all__ = ["BrokerNode", "StartupError", "ConfigError", "check_log_dirs"]
