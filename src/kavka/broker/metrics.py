"""Prometheus metrics: Kafka's broker gauges over HTTP (`metrics.prometheus.port`).

Kafka exposes these as JMX MBeans; kavka serves them in Prometheus' text
format from a small HTTP server (prometheus-client's, on its own daemon
thread). Values are read from the node at scrape time -- nothing is updated
on the request path -- so a scrape costs the broker nothing between scrapes.
Each gauge's HELP names the Kafka MBean it stands for, so dashboards and
alerts written for Kafka carry over by name.

Off unless `metrics.prometheus.port` is set (0 picks a free port); it binds
`metrics.prometheus.host` (loopback by default). The scrape thread only reads
sizes of dicts and sets the event loop owns, which is safe under the GIL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode

log = logging.getLogger("kavka.metrics")


class BrokerCollector:
    """Reads the node's state when Prometheus scrapes."""

    def __init__(self, node: BrokerNode) -> None:
        self.node = node

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self.node
        lm = node.log_manager
        yield GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "kafka.log:type=LogManager,name=OfflineLogDirectoryCount: log dirs taken offline by an I/O error",
            value=lm.offline_log_directory_count,
        )
        online = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "kafka.log:type=LogManager,name=LogDirectoryOffline: 1 while the log dir is offline",
            labels=["logDirectory"],
        )
        for d in lm.log_dirs:
            online.add_metric([str(d)], 1 if d in lm.offline_dirs else 0)
        yield online
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "kafka.server:type=ReplicaManager,name=PartitionCount: partitions on this broker",
            value=len(node.replica_manager.partitions),
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_offlinereplicacount",
            "kafka.server:type=ReplicaManager,name=OfflineReplicaCount: replicas on offline log dirs",
            value=sum(1 for tp in node.replica_manager.partitions if lm.is_offline(tp.topic, tp.partition)),
        )
        server = node.server
        yield GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count",
            "kafka.server:type=socket-server-metrics,name=connection-count: open client connections",
            value=len(server.connections) if server is not None else 0,
        )


class MetricsServer:
    def __init__(self, node: BrokerNode, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(node))  # type: ignore[arg-type]
        self._httpd: Any
        self._httpd, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port: int = self._httpd.server_port
        log.info("prometheus metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
