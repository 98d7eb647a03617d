"""The Kafka side of `python -m bench` stays runnable: the `kafka` server kind (a real Apache Kafka
from the jars scripts/java-deps.sh fetches) driven by Kafka's own perf tools, the second load
client, for a tiny load; and the ratio table with three servers.

Only the sanity of the parsed figures is checked (the tools counted every record sent, the
percentiles are ordered, /proc gave CPU and RSS); speed is never asserted in tests.
"""

from __future__ import annotations

import bench.__main__ as bench_main
import pytest
from bench.__main__ import markdown, median_of
from bench.servers import start_kafka

from bench import java_perf


def test_kafka_server_under_kafkas_perf_tools():
    broker = start_kafka()
    try:
        assert broker.name == "kafka" and broker.rss() > 100e6  # a JVM with a 1 GiB heap
        produced = java_perf.produce(broker, record_size=100, count=2_000, acks="all", throughput=5_000, linger_ms=0)
        assert produced["records"] == 2_000, produced
        assert produced["records_per_s"] > 0 and produced["mb_per_s"] > 0, produced
        assert 0 <= produced["p50_ms"] <= produced["p95_ms"] <= produced["p99_ms"] <= produced["p999_ms"], produced
        assert produced["p99_ms"] <= produced["max_ms"] + 1 and produced["broker_cpu_s_per_mb"] > 0, produced
        consumed = java_perf.consume(broker, topic=produced["topic"], count=2_000, record_size=100)
        assert consumed["records"] == 2_000, consumed
        assert abs(consumed["mb"] - 2_000 * 100 / 2**20) < 1e-3 and consumed["mb_per_s"] > 0, consumed
    finally:
        broker.stop()
    assert broker.proc.poll() is not None and not broker.workdir.exists()


def _run(mb_per_s: float, p99: float, rss: float) -> dict:
    return {"produce 1024 B acks=1 p=1": {"mb_per_s": mb_per_s, "broker_cpu_s_per_mb": 0.01, "broker_cpu": 0.5,
                                          "client_cpu": 0.5, "topic": "t"},
            "latency 1000/s": {"p50_ms": 1.0, "p99_ms": p99, "p999_ms": 2 * p99},
            "rss": {"rss_mb": rss}}


def test_the_table_gives_kavka_over_each_peer():
    raw = {"kavka": [_run(100, 2, 70), _run(120, 4, 80), _run(90, 3, 75)],
           "kafka": [_run(200, 8, 400), _run(160, 6, 500), _run(180, 7, 450)],
           "tansu": [_run(50, 1, 1000)]}
    med = {name: median_of(runs) for name, runs in raw.items()}
    assert med["kavka"]["produce 1024 B acks=1 p=1"]["mb_per_s"] == 100 and "topic" not in med["kavka"]["produce 1024 B acks=1 p=1"]
    result = {"median": med, "started": "now", "runs": 3, "clients": ["confluent"], "client": "x", "kafka_version": "4.4.0",
              "load_before": "1.0 1.0 1.0", "load_after": "2.0 2.0 2.0",
              "machine": {"sendfile_gbps": 1, "tcp_gbps": 1, "fsync_1mib_gbps": 1, "crc32c_gbps": 1}}
    table = markdown(result)
    assert "| kavka | Kafka | Tansu | kavka / Kafka | kavka / Tansu | better |" in table
    # kavka 100 MB/s, Kafka 180, Tansu 50; p99 3 ms against 7 and 1; RSS 75 MB against 450 and 1,000.
    assert "| produce 1024 B acks=1 p=1 | MB/s | 100.00 | 180.00 | 50.00 | 0.56 | 2.00 | higher |" in table
    assert "| latency 1000/s | p99 ms | 3.00 | 7.00 | 1.00 | 0.43 | 3.00 | lower |" in table
    assert "| rss | RSS MB | 75.00 | 450.00 | 1,000.00 | 0.17 | 0.075 | lower |" in table


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kavka", "kafka"])
def test_three_node_rf3_run_and_every_process_stopped(name, monkeypatch):
    """The RF=3 acks=all comparison's cluster: three combined KRaft nodes that replicate a topic to
    all three (create_topic waits for the full ISR), every process gone after the run."""
    started = []
    real = bench_main.start_cluster
    monkeypatch.setattr(bench_main, "start_cluster", lambda *a, **kw: started.append(real(*a, **kw)) or started[-1])
    out = bench_main.run_cluster(name, {"counts": {1024: 500}, "latency_s": 0.2, "warmup": 100}, lambda _msg: None)
    assert out["RF=3 produce 1024 B acks=all p=1"]["mb_per_s"] > 0, out
    lat = out["RF=3 latency 1000/s acks=all"]
    assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["p999_ms"], lat
    assert out["RF=3 rss"]["rss_mb"] > 0
    (c,) = started
    assert len(c.procs) == 3 and all(proc.poll() is not None for proc in c.procs)
