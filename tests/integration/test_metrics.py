"""The Prometheus endpoint (`metrics.prometheus.port`) of a real broker: Kafka's gauges, scraped over HTTP.

A disk failure is injected through the storage layer's fault file, and the
scrape must show it: OfflineLogDirectoryCount rises to 1, that dir's
LogDirectoryOffline gauge is 1, and its replica counts as offline.
"""

from __future__ import annotations

import re

from confluent_kafka import KafkaError as CkError

from kavka.client.connection import BlockingConnection
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, scrape
from tests.integration.test_jbod import placement
from tests.wait import wait_until


def test_metrics_endpoint_reports_a_failed_log_dir(broker_factory, topic_name, tmp_path):
    control = tmp_path / "failing-dirs"
    control.write_text("")
    b = broker_factory(log_dirs=2, overrides={"metrics.prometheus.port": "0", "kavka.test.fault.injection.enable": "true"})
    b.start(env={"KAVKA_FAULT_INJECTION_FILE": str(control)})
    m = wait_until(lambda: re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", b.log_text()), 10,
                   message="the metrics endpoint in the broker log")
    port = int(m.group(1))
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    where = placement(b, topic_name)
    failing = where[1][0]
    assert where[0][0] != failing

    before = scrape(port)
    assert before[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 0
    assert before[("kafka_server_replicamanager_partitioncount", ())] == 2
    assert before[("kafka_server_replicamanager_offlinereplicacount", ())] == 0
    assert before[("kafka_log_logmanager_logdirectoryoffline", (("logDirectory", failing),))] == 0
    connections = ("kafka_server_socketservermetrics_connection_count", ())
    with BlockingConnection("127.0.0.1", b.port):
        wait_until(lambda: scrape(port)[connections] >= 1, 10, message="an open connection counted")
    wait_until(lambda: scrape(port)[connections] == 0, 10, message="the closed connection uncounted")

    control.write_text(f"{failing}\n")
    p = ck_producer(b.bootstrap, {"acks": "all", "retries": 0, "message.timeout.ms": 5000})
    errors: list[int] = []

    def produce_to_failing() -> bool:
        errors.clear()
        p.produce(topic_name, value=b"x", partition=1, on_delivery=lambda err, _m: errors.append(err.code() if err else 0))
        p.flush(10)
        return errors == [CkError.KAFKA_STORAGE_ERROR]

    wait_until(produce_to_failing, 15, message="KAFKA_STORAGE_ERROR from the failed dir")
    after = scrape(port)
    assert after[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
    assert after[("kafka_log_logmanager_logdirectoryoffline", (("logDirectory", failing),))] == 1
    assert after[("kafka_log_logmanager_logdirectoryoffline", (("logDirectory", where[0][0]),))] == 0
    assert after[("kafka_server_replicamanager_offlinereplicacount", ())] == 1
    assert b.alive()


def test_metrics_are_off_by_default_and_a_taken_port_stops_startup(broker_factory):
    b = broker_factory().start()
    assert "prometheus metrics on" not in b.log_text()
    b.stop()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        bad = broker_factory(overrides={"metrics.prometheus.port": str(taken)})
        try:
            bad.start(timeout=30)
        except RuntimeError as e:
            assert "metrics.prometheus.port" in str(e)
        else:
            raise AssertionError("the broker started on a port that is taken")


def test_transaction_metrics(broker_factory, topic_name):
    """Kafka's transaction-coordinator-metrics partition-load-time-max/-avg once this broker loaded
    __transaction_state partitions, and the Partition gauge LastStableOffsetLag: the records of
    an open transaction, 0 once it commits."""
    from confluent_kafka import Producer

    from tests.integration.helpers import CK_COMMON, unique

    b = broker_factory(overrides={"metrics.prometheus.port": "0"}).start()
    m = wait_until(lambda: re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", b.log_text()), 10,
                   message="the metrics endpoint in the broker log")
    port = int(m.group(1))
    load_max = ("kafka_server_transactioncoordinatormetrics_partition_load_time_max", ())
    load_avg = ("kafka_server_transactioncoordinatormetrics_partition_load_time_avg", ())
    before = scrape(port)
    assert before[load_max] != before[load_max]  # NaN: nothing loaded yet, as Kafka's Max with no samples
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    lag = ("kafka_cluster_partition_laststableoffsetlag", (("partition", "0"), ("topic", topic_name)))
    wait_until(lambda: scrape(port).get(lag) == 0, 10, message="the new partition's LastStableOffsetLag")

    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("txid"), **CK_COMMON})
    p.init_transactions(30)
    after = scrape(port)
    assert 0 <= after[load_avg] <= after[load_max] < 60_000
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, value=b"v%d" % i)
    assert p.flush(10) == 0
    wait_until(lambda: scrape(port)[lag] == 5, 10, message="LastStableOffsetLag of the open transaction")
    p.commit_transaction(30)
    wait_until(lambda: scrape(port)[lag] == 0, 10, message="LastStableOffsetLag back to 0 after the commit")
