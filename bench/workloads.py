"""Benchmark workloads, driven by confluent-kafka (librdkafka) as the load client.

Each function takes a running Broker and returns a flat dict of figures:
throughput (records/s, MB/s), latency percentiles (ms), and the CPU seconds
the client (this process, librdkafka's threads included) and the broker
spent, so a ratio can say who was the bottleneck. Counts are bounded, and
every wait has a deadline. Every client also takes the Broker's `extra` keys
(security.protocol, ssl.ca.location...), so a workload runs over a TLS or SASL listener too.
"""

from __future__ import annotations

import os
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.servers import Broker

QUIET = {"log_level": 3}


def _client_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _throughput(broker: Broker, records: int, record_size: int, elapsed: float, broker_cpu0: float, client_cpu0: float) -> dict:
    """Rates of a finished run, and the cores client and broker kept busy meanwhile."""
    return {
        "records_per_s": records / elapsed,
        "mb_per_s": records * record_size / elapsed / 1e6,
        "seconds": elapsed,
        "client_cpu": (_client_cpu() - client_cpu0) / elapsed,
        "broker_cpu": (broker.cpu() - broker_cpu0) / elapsed,
        "broker_cpu_s_per_mb": (broker.cpu() - broker_cpu0) / (records * record_size / 1e6),
    }


def ratio(num: float, den: float) -> str:
    """`num / den` for a table, "n/a" when `den` is 0 (a smoke run's CPU can be under one clock tick)."""
    return f"{num / den:.2f}" if den else "n/a"


def create_topic(broker: Broker, partitions: int, replication_factor: int = 1) -> str:
    """A new topic, returned once every partition has a leader and, replicated, a full ISR."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **broker.extra, **QUIET})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 and (replication_factor == 1 or len(p.isrs) == replication_factor) for p in t.partitions.values()
        ):
            return topic
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} not ready")


def producer_config(bootstrap: str, extra: dict[str, str], acks: str) -> dict:
    """The throughput workloads' producer: linger.ms=5, batches and queue up to 1 MiB / 1M records."""
    return {
        "bootstrap.servers": bootstrap,
        **extra,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1 << 20,
        "queue.buffering.max.kbytes": 1 << 20,
        "queue.buffering.max.messages": 1_000_000,
        "message.timeout.ms": 60_000,
        **QUIET,
    }


def produce(broker: Broker, *, record_size: int, count: int, acks: str, partitions: int, topic: str | None = None,
            replication_factor: int = 1) -> dict:
    topic = topic or create_topic(broker, partitions, replication_factor)
    p = Producer(producer_config(broker.bootstrap, broker.extra, acks))
    value = os.urandom(record_size)
    failed = 0

    def on_delivery(err, _msg) -> None:  # noqa: ANN001
        nonlocal failed
        if err is not None:
            failed += 1

    p.list_topics(topic, timeout=10)  # connect before the clock starts
    b0, c0, t0 = broker.cpu(), _client_cpu(), time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"produce to {broker.name}: {left} unflushed, {failed} failed")
    return {**_throughput(broker, count, record_size, elapsed, b0, c0), "topic": topic}


def consume(broker: Broker, *, topic: str, partitions: int, count: int, record_size: int, config: dict | None = None) -> dict:
    """Read `count` records from offset 0 of every partition (`config`: more consumer settings).

    librdkafka stops fetching a partition whose local queue holds queued.max.messages.kbytes (64 MiB)
    or queued.min.messages, and looks again only after fetch.queue.backoff.ms -- 1 s by default. A
    broker that answers faster than this process drains the queue filled it and then sat idle for a
    whole second of a run that lasts one (27 Nov: 135 against 600 MB/s, the same broker, by chance
    of the scheduler); 10 ms keeps the client fetching as soon as it has room, for every server alike.
    """
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            **broker.extra,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "fetch.queue.backoff.ms": 10,
            **QUIET,
            **(config or {}),
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    b0, c0, t0 = broker.cpu(), _client_cpu(), time.perf_counter()
    deadline = time.monotonic() + 120
    while got < count and time.monotonic() < deadline:
        for m in c.consume(10000, timeout=0.1):
            err = m.error()
            if err is None:
                got += 1
            elif err.code() != -191:  # -191 _PARTITION_EOF: that partition is read to its end
                raise KafkaException(err)
    elapsed = time.perf_counter() - t0
    c.close()
    if got < count:
        raise RuntimeError(f"consume from {broker.name}: {got}/{count} records before the deadline")
    return _throughput(broker, got, record_size, elapsed, b0, c0)


def latency(broker: Broker, *, rate: int, seconds: float, record_size: int = 100, acks: str = "1",
            replication_factor: int = 1) -> dict:
    """Produce at a fixed rate with linger.ms=0 (acks=1 unless said); latency = send -> delivery report."""
    topic = create_topic(broker, 1, replication_factor)
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            **broker.extra,
            "acks": acks,
            "linger.ms": 0,
            "message.timeout.ms": 30_000,
            "max.in.flight.requests.per.connection": 1_000_000,
            **QUIET,
        }
    )
    p.list_topics(topic, timeout=10)
    value = os.urandom(record_size)
    failed = 0

    n = int(rate * seconds)
    sent_at: list[float] = []
    done: list[float] = []

    def make_cb(i: int):  # noqa: ANN202
        def cb(err, _msg) -> None:  # noqa: ANN001
            nonlocal failed
            if err is not None:
                failed += 1
            else:
                done.append(time.perf_counter() - sent_at[i])

        return cb

    b0, t0 = broker.cpu(), time.perf_counter()
    for i in range(n):
        due = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(due - now, 0.0005))
        sent_at.append(time.perf_counter())
        p.produce(topic, value, partition=0, on_delivery=make_cb(i))
        p.poll(0)
    p.flush(60)
    elapsed = time.perf_counter() - t0
    if failed or len(done) != n:
        raise RuntimeError(f"latency run on {broker.name}: {failed} failed, {len(done)}/{n} delivered")
    done.sort()

    def pct(q: float) -> float:
        return done[min(len(done) - 1, int(q * len(done)))] * 1000

    return {
        "rate": rate,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "broker_cpu": (broker.cpu() - b0) / elapsed,
    }
