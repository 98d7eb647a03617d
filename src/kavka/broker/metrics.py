"""Prometheus metrics: Kafka's broker gauges over HTTP (`metrics.prometheus.port`).

Kafka exposes these as JMX MBeans; kavka serves them in Prometheus' text
format from a small HTTP server (prometheus-client's, on its own daemon
thread). Values are read from the node at scrape time -- nothing is updated
on the request path -- so a scrape costs the broker nothing between scrapes.
Each gauge's HELP names the Kafka MBean it stands for, so dashboards and
alerts written for Kafka carry over by name.

Client quota sensors (Kafka's `kafka.server:type={Produce,Fetch,Request,ControllerMutation},
user=...,client-id=...`): per quota type the measured value -- byte-rate (Produce, Fetch),
request-time (Request, percent of one loop), mutation-rate (ControllerMutation, partitions/s) -- and
throttle-time (the mean throttle time in ms handed out over the quota windows), labelled `user` and
`client_id` as Kafka tags its sensors (an empty label: the quota is not per user or not per client).
These are read from the quota managers, which measure them for enforcement anyway.
Only sensors used within the last `quota.window.num` windows are exported, so the label set stays
bounded by the clients active lately (kavka.quota's `active`); idle sensors expire after an hour.

Off unless `metrics.prometheus.port` is set (0 picks a free port); it binds
`metrics.prometheus.host` (loopback by default).

Thread safety: the scrape thread never touches the node's dicts and sets
(the event loop mutates them; iterating one from another thread can raise
"dictionary changed size during iteration"). It asks the loop to compute a
`BrokerSnapshot` (`call_soon_threadsafe`) and waits for it, so every value is
read on the loop thread; the snapshot is a frozen value the scrape thread
then renders. If the loop does not answer within `SNAPSHOT_TIMEOUT_S` (a
stalled loop), the scrape fails with an error rather than reading unsafely.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kavka.quota import SensorStats

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode

log = logging.getLogger("kavka.metrics")

SNAPSHOT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    offline_log_directory_count: int
    log_dir_offline: tuple[tuple[str, bool], ...]
    partition_count: int
    offline_replica_count: int
    connection_count: int
    leader_count: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    offline_partitions: int = -1  # -1: not the active controller (the gauge is the controller's)
    preferred_replica_imbalance: int = -1  # -1: not the active controller
    isr_shrinks: int = 0
    isr_expands: int = 0
    replica_max_lag: int = 0
    bytes_out: tuple[tuple[str, int], ...] = ()  # (topic, record bytes sent to consumers)
    bytes_in: tuple[tuple[str, int], ...] = ()  # (topic, record bytes appended as leader)
    broker_state: int = 3  # Kafka's BrokerState (3 RUNNING, 6 PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN)
    remote_fetch_rate: float | None = None  # bytes/s read from remote storage (KIP-956's quota measure); None: no tiering
    mismatching_dir_assignments: int = 0  # KIP-858: replicas the controller places in another dir
    quota_sensors: tuple[tuple[str, SensorStats], ...] = ()  # (quota type, sensor): Kafka's QuotaType
    # (max, avg) ms of the transaction coordinator's partition loads lately; None: no coordinator
    txn_partition_load_time: tuple[float, float] | None = None
    last_stable_offset_lag: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, HW - LSO)


def take_snapshot(node: BrokerNode) -> BrokerSnapshot:
    """Read the gauges' values. Event-loop thread only."""
    lm = node.log_manager
    partitions = node.replica_manager.partitions
    leaders = node.replica_manager.leader_partitions()
    fetchers = getattr(node, "replica_fetchers", None)
    server = node.server
    return BrokerSnapshot(
        offline_log_directory_count=lm.offline_log_directory_count,
        log_dir_offline=tuple((str(d), d in lm.offline_dirs) for d in lm.log_dirs),
        partition_count=len(partitions),
        offline_replica_count=sum(1 for tp in partitions if lm.is_offline(tp.topic, tp.partition)),
        connection_count=len(server.connections) if server is not None else 0,
        leader_count=sum(1 for p in leaders),
        under_replicated=sum(1 for p in leaders if len(p.isr) < len(p.replicas)),
        under_min_isr=sum(1 for p in leaders if len(p.isr) < p.min_insync_replicas),
        offline_partitions=_offline_partitions(node),
        preferred_replica_imbalance=_preferred_replica_imbalance(node),
        isr_shrinks=node.replica_manager.isr_shrinks,
        isr_expands=node.replica_manager.isr_expands,
        replica_max_lag=max(fetchers.lag().values(), default=0) if fetchers is not None else 0,
        bytes_out=tuple(sorted(node.replica_manager.bytes_out.items())),
        bytes_in=tuple(sorted(node.replica_manager.bytes_in.items())),
        broker_state=node.broker_state,
        remote_fetch_rate=node.remote_log_manager.fetch_rate.rate() if node.remote_log_manager is not None else None,
        mismatching_dir_assignments=_mismatching_dir_assignments(node),
        quota_sensors=_quota_sensors(node),
        txn_partition_load_time=(
            node.transactions.partition_load_time(node.transactions.now_ms()) if node.transactions is not None else None
        ),
        last_stable_offset_lag=_last_stable_offset_lags(node),
    )


def _last_stable_offset_lags(node: BrokerNode) -> tuple[tuple[str, int, int], ...]:
    """Kafka's Partition gauge LastStableOffsetLag (high watermark - last stable offset) of each
    hosted online partition: how far read_committed consumers are held back by open transactions."""
    out = []
    for tp, p in node.replica_manager.partitions.items():
        try:
            lag = p.high_watermark - p.last_stable_offset
        except Exception:  # noqa: BLE001 -- offline: Kafka has no log, no gauge value
            continue
        out.append((tp.topic, tp.partition, max(lag, 0)))
    return tuple(sorted(out))


# Kafka's QuotaType -> (metric name prefix, the sensor's value metric, its description)
QUOTA_TYPES = (
    ("Produce", "kafka_server_produce", "byte_rate", "byte-rate: bytes produced per second"),
    ("Fetch", "kafka_server_fetch", "byte_rate", "byte-rate: bytes fetched per second"),
    ("Request", "kafka_server_request", "request_time", "request-time: event-loop time, percent of one loop"),
    ("ControllerMutation", "kafka_server_controllermutation", "mutation_rate", "mutation-rate: partitions mutated per second"),
)


def _quota_sensors(node: BrokerNode) -> tuple[tuple[str, SensorStats], ...]:
    cq = node.client_quotas
    managers = {"Produce": cq.produce, "Fetch": cq.fetch, "Request": cq.request, "ControllerMutation": cq.controller_mutation}
    return tuple((kind, stats) for kind, m in managers.items() for stats in m.active())


def _mismatching_dir_assignments(node: BrokerNode) -> int:
    assignments = node.assignments
    return len(assignments.pending()) if assignments is not None else 0


def _preferred_replica_imbalance(node: BrokerNode) -> int:
    """Partitions not led by their preferred (first) replica, counted by the active controller only."""
    qc = node.quorum_controller
    if qc is None or not qc.is_active:
        return -1
    return sum(
        1 for t in qc.image.topics_by_id.values() for r in t.partitions.values() if r.replicas and r.leader != r.replicas[0]
    )


def _offline_partitions(node: BrokerNode) -> int:
    """Partitions without a leader, counted by the active controller only (-1 elsewhere)."""
    qc = node.quorum_controller
    if qc is None or not qc.is_active:
        return -1
    return sum(1 for t in qc.image.topics_by_id.values() for r in t.partitions.values() if r.leader < 0)


class BrokerCollector:
    """Renders a snapshot the event loop takes when Prometheus scrapes."""

    def __init__(self, node: BrokerNode, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop

    def snapshot(self) -> BrokerSnapshot:
        done: concurrent.futures.Future[BrokerSnapshot] = concurrent.futures.Future()

        def run() -> None:
            if not done.set_running_or_notify_cancel():
                return
            try:
                done.set_result(take_snapshot(self.node))
            except BaseException as e:  # noqa: BLE001 -- handed to the scrape thread
                done.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return done.result(SNAPSHOT_TIMEOUT_S)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        s = self.snapshot()
        yield GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "kafka.log:type=LogManager,name=OfflineLogDirectoryCount: log dirs taken offline by an I/O error",
            value=s.offline_log_directory_count,
        )
        online = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "kafka.log:type=LogManager,name=LogDirectoryOffline: 1 while the log dir is offline",
            labels=["logDirectory"],
        )
        for d, offline in s.log_dir_offline:
            online.add_metric([d], 1 if offline else 0)
        yield online
        yield GaugeMetricFamily(
            "kafka_server_kafkaserver_nummismatchingreplicatologdirassignments",
            "kafka.server:type=KafkaServer,name=NumMismatchingReplicaToLogDirAssignments: hosted replicas whose "
            "log dir in the cluster metadata is missing or not the one they are in (KIP-858)",
            value=s.mismatching_dir_assignments,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "kafka.server:type=ReplicaManager,name=PartitionCount: partitions on this broker",
            value=s.partition_count,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_offlinereplicacount",
            "kafka.server:type=ReplicaManager,name=OfflineReplicaCount: replicas on offline log dirs",
            value=s.offline_replica_count,
        )
        for name, help_, value in (
            ("kafka_server_replicamanager_leadercount", "LeaderCount: partitions this broker leads", s.leader_count),
            ("kafka_server_replicamanager_underreplicatedpartitions",
             "UnderReplicatedPartitions: led partitions whose ISR is smaller than their replica set", s.under_replicated),
            ("kafka_server_replicamanager_underminisrpartitioncount",
             "UnderMinIsrPartitionCount: led partitions whose ISR is below min.insync.replicas", s.under_min_isr),
            ("kafka_server_replicafetchermanager_maxlag",
             "ReplicaFetcherManager MaxLag (clientId=Replica): the most offsets a followed replica is behind", s.replica_max_lag),
        ):
            yield GaugeMetricFamily(name, f"kafka.server:type=ReplicaManager,name={help_}", value=value)
        if s.offline_partitions >= 0:
            yield GaugeMetricFamily(
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                "kafka.controller:type=KafkaController,name=OfflinePartitionsCount: partitions without a leader (active controller only)",
                value=s.offline_partitions,
            )
        if s.preferred_replica_imbalance >= 0:
            yield GaugeMetricFamily(
                "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                "kafka.controller:type=KafkaController,name=PreferredReplicaImbalanceCount: partitions not led by their preferred replica (active controller only)",
                value=s.preferred_replica_imbalance,
            )
        for name, help_, value in (
            ("kafka_server_replicamanager_isrshrinks", "IsrShrinksPerSec: ISR shrinks of partitions this broker leads", s.isr_shrinks),
            ("kafka_server_replicamanager_isrexpands", "IsrExpandsPerSec: ISR expansions of partitions this broker leads", s.isr_expands),
        ):
            c = CounterMetricFamily(name, f"kafka.server:type=ReplicaManager,name={help_}")
            c.add_metric([], value)
            yield c
        for name, help_, per_topic in (
            ("bytesout", "BytesOutPerSec: record bytes sent to consumers (not to followers)", s.bytes_out),
            ("bytesin", "BytesInPerSec: record bytes producers appended to the partitions this broker leads", s.bytes_in),
        ):
            c = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                    f"kafka.server:type=BrokerTopicMetrics,name={help_}", labels=["topic"])
            for topic, n in per_topic:
                c.add_metric([topic], n)
            yield c
        yield GaugeMetricFamily(
            "kafka_server_kafkaserver_brokerstate",
            "kafka.server:type=KafkaServer,name=BrokerState: 3 running, 6 pending controlled shutdown, 7 shutting down",
            value=s.broker_state,
        )
        if s.remote_fetch_rate is not None:
            yield GaugeMetricFamily(
                "kafka_server_rlmfetch_byte_rate",
                "kafka.server:type=RLMFetch,name=byte-rate: bytes per second read from remote storage, as the remote "
                "fetch quota (remote.log.manager.fetch.max.bytes.per.second) measures them",
                value=s.remote_fetch_rate,
            )
        yield from _quota_families(s.quota_sensors)
        if s.txn_partition_load_time is not None:
            for stat, value in zip(("max", "avg"), s.txn_partition_load_time, strict=True):
                yield GaugeMetricFamily(
                    f"kafka_server_transactioncoordinatormetrics_partition_load_time_{stat}",
                    f"kafka.server:type=transaction-coordinator-metrics,name=partition-load-time-{stat}: "
                    f"the {stat} time in ms to load a __transaction_state partition in the last sample windows",
                    value=value,
                )
        lso_lag = GaugeMetricFamily(
            "kafka_cluster_partition_laststableoffsetlag",
            "kafka.cluster:type=Partition,name=LastStableOffsetLag: high watermark - last stable offset",
            labels=["topic", "partition"],
        )
        for topic, partition, lag in s.last_stable_offset_lag:
            lso_lag.add_metric([topic, str(partition)], lag)
        yield lso_lag
        yield GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count",
            "kafka.server:type=socket-server-metrics,name=connection-count: open client connections",
            value=s.connection_count,
        )


def _quota_families(sensors: tuple[tuple[str, SensorStats], ...]) -> Iterator[GaugeMetricFamily]:
    for kind, prefix, value_name, help_ in QUOTA_TYPES:
        value = GaugeMetricFamily(f"{prefix}_{value_name}", f"kafka.server:type={kind},user,client-id {help_}", labels=["user", "client_id"])
        throttle = GaugeMetricFamily(
            f"{prefix}_throttle_time",
            f"kafka.server:type={kind},user,client-id throttle-time: mean throttle time in ms over the quota windows",
            labels=["user", "client_id"],
        )
        for k, stats in sensors:
            if k == kind:
                value.add_metric(list(stats.tags), stats.rate)
                throttle.add_metric(list(stats.tags), stats.throttle_time_ms)
        yield value
        yield throttle


class MetricsServer:
    """Call from the event loop thread (it captures the running loop)."""

    def __init__(self, node: BrokerNode, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(node, asyncio.get_running_loop()))  # type: ignore[arg-type]
        self._httpd: Any
        self._httpd, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port: int = self._httpd.server_port
        log.info("prometheus metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
