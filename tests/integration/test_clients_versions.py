"""Which API versions each real client negotiates with kavka.

kavka logs nothing about versions, so they are captured client-side, from
the requests the clients actually sent:
- confluent-kafka and kcat: librdkafka's `debug=protocol` lines
  ("Sent ProduceRequest (v9, ...)");
- kafka-python: a wrapper around KafkaConnection._send_request that records
  each request's (API_KEY, API_VERSION) once it is resolved;
- aiokafka: a wrapper around AIOKafkaConnection.send that records the
  request struct the connection picks from the broker's ApiVersions.

Each test runs a small workload (admin create, produce, list offsets, fetch),
prints the table (pytest -s), and checks that the key APIs were used, at
versions inside kavka's advertised range and at least the ones that carry
record batch v2.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

from tests.integration.helpers import (
    ck_admin,
    ck_create_topic,
    recent_base_ts,
)

# Lowest acceptable versions: Produce v3 / Fetch v4 are the first with record
# batch v2 (KIP-98); ListOffsets v1 is the first with timestamps (KIP-79).
MINIMUM = {"Produce": 3, "Fetch": 4, "ListOffsets": 1, "Metadata": 1, "ApiVersions": 0}
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    10: "FindCoordinator",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    37: "CreatePartitions",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
}
# librdkafka's request names that differ from Kafka's.
API_NAMES_LIBRDKAFKA = {"ApiVersion": "ApiVersions", "Offset": "ListOffsets"}
LIBRDKAFKA_SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")

observed: dict[str, dict[str, set[int]]] = {}


@pytest.fixture(scope="module")
def advertised(broker) -> dict[str, tuple[int, int]]:
    """kavka's own ApiVersions answer, as kafka-python decodes it."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        return {API_NAMES.get(int(k), str(k)): tuple(v) for k, v in admin.api_versions().items()}
    finally:
        admin.close()


def _record(client: str, api: str, version: int) -> None:
    observed.setdefault(client, {}).setdefault(api, set()).add(version)


def _check(client: str, advertised: dict[str, tuple[int, int]]) -> None:
    table = observed.get(client, {})
    print(
        f"\n{client}: "
        + ", ".join(f"{api} v{'/'.join(map(str, sorted(vs)))}" for api, vs in sorted(table.items()))
    )
    for api, lowest in MINIMUM.items():
        assert api in table, f"{client} never sent {api}; saw {sorted(table)}"
        assert min(table[api]) >= lowest, f"{client} used {api} v{min(table[api])} (< v{lowest})"
    for api, versions in table.items():
        if (
            api in advertised and api != "ApiVersions"
        ):  # ApiVersions may be probed above the range (KIP-511)
            lo, hi = advertised[api]
            assert all(lo <= v <= hi for v in versions), (
                f"{client} used {api} {versions} outside kavka's [{lo}, {hi}]"
            )


# The confluent-kafka workload runs in a child process with debug=protocol and
# no Python logger, so librdkafka writes its debug lines straight to stderr.
CONFLUENT_WORKLOAD = r"""
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType
bootstrap, topic = sys.argv[1], sys.argv[2]
common = {"bootstrap.servers": bootstrap, "debug": "protocol", "socket.timeout.ms": 10000}
admin = AdminClient(common)
admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(timeout=20)
res = ConfigResource(ResourceType.TOPIC, topic)
admin.describe_configs([res], request_timeout=15)[res].result(timeout=20)
base = int(time.time() * 1000) - 60_000
p = Producer({**common, "acks": "all", "compression.type": "zstd"})
for i in range(10):
    p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp=base + i)
assert p.flush(20) == 0
c = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
got = []
deadline = time.monotonic() + 20
while len(got) < 10 and time.monotonic() < deadline:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        got.append(m.value())
assert got == [b"v%d" % i for i in range(10)], got
assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
assert c.offsets_for_times([TopicPartition(topic, 0, base + 3)], timeout=10)[0].offset == 3
c.close()
tp = TopicPartition(topic, 0)
assert admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=15)[tp].result(timeout=20).offset == 10
print("WORKLOAD-OK")
"""


def test_confluent_kafka_versions(broker, advertised, topic_name):
    res = subprocess.run(
        [sys.executable, "-c", CONFLUENT_WORKLOAD, broker.bootstrap, topic_name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "WORKLOAD-OK" in res.stdout, res.stderr[-3000:]
    for name, v in LIBRDKAFKA_SENT.findall(res.stderr):
        _record("confluent-kafka", API_NAMES_LIBRDKAFKA.get(name, name), int(v))
    _check("confluent-kafka", advertised)


def test_kcat_versions(broker, advertised, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name)
    base = ["kcat", "-b", broker.bootstrap, "-d", "protocol", "-X", "socket.timeout.ms=10000"]
    runs = [
        (base + ["-L"], None),
        (base + ["-P", "-t", topic_name, "-p", "0", "-K:"], "a:1\nb:2\nc:3\n"),
        (base + ["-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e"], None),
        (base + ["-Q", "-t", f"{topic_name}:0:{recent_base_ts()}"], None),
    ]
    for cmd, stdin in runs:
        res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, f"{' '.join(cmd[3:])}: {res.stderr[-2000:]}"
        for name, v in LIBRDKAFKA_SENT.findall(res.stderr):
            _record("kcat (librdkafka 2.0.2)", API_NAMES_LIBRDKAFKA.get(name, name), int(v))
    _check("kcat (librdkafka 2.0.2)", advertised)


def test_kafka_python_versions(broker, advertised, topic_name, monkeypatch):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.net.connection import KafkaConnection

    original = KafkaConnection._send_request

    def spy(self, request, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        fut = original(self, request, *args, **kwargs)
        if request.API_VERSION is not None:
            _record(
                "kafka-python",
                API_NAMES.get(request.API_KEY, str(request.API_KEY)),
                request.API_VERSION,
            )
        return fut

    monkeypatch.setattr(KafkaConnection, "_send_request", spy)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics(
            {topic_name: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True
        )
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=15000
    )
    try:
        for i in range(5):
            producer.send(topic_name, value=b"v%d" % i, partition=0).get(timeout=20)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=15000,
    )
    try:
        tp = KpTopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        for _ in range(40):
            got += [r.value for recs in consumer.poll(timeout_ms=250).values() for r in recs]
            if len(got) >= 5:
                break
        assert got == [b"v%d" % i for i in range(5)]
        assert consumer.end_offsets([tp])[tp] == 5
    finally:
        consumer.close()
    _check("kafka-python", advertised)


def test_aiokafka_versions(broker, advertised, topic_name, monkeypatch):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AkTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.conn import AIOKafkaConnection

    original = AIOKafkaConnection.send

    def spy(self, request, expect_response=True):  # noqa: ANN001, ANN202
        try:
            struct = request.prepare(self._versions)
            _record(
                "aiokafka", API_NAMES.get(struct.API_KEY, str(struct.API_KEY)), struct.API_VERSION
            )
        except Exception:  # noqa: BLE001 - the real send reports it
            pass
        return original(self, request, expect_response)

    monkeypatch.setattr(AIOKafkaConnection, "send", spy)

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=15000
        )
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic_name, value=b"v%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=15000,
        )
        await consumer.start()
        try:
            tp = AkTopicPartition(topic_name, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            for _ in range(40):
                batch = await consumer.getmany(tp, timeout_ms=250)
                got += [r.value for r in batch.get(tp, [])]
                if len(got) >= 5:
                    break
            assert got == [b"v%d" % i for i in range(5)]
            assert (await consumer.end_offsets([tp]))[tp] == 5
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
    _check("aiokafka", advertised)


def test_print_version_table(advertised):
    """Runs last in this module: the whole table, one row per API."""
    clients = [
        c
        for c in ("confluent-kafka", "kcat (librdkafka 2.0.2)", "kafka-python", "aiokafka")
        if c in observed
    ]
    apis = sorted({a for c in clients for a in observed[c]} | set(MINIMUM))
    width = max(len(a) for a in apis) + 2
    print("\n" + "API".ljust(width) + "kavka".ljust(8) + "".join(c.ljust(26) for c in clients))
    for api in apis:
        lo_hi = advertised.get(api)
        row = api.ljust(width) + (f"{lo_hi[0]}-{lo_hi[1]}" if lo_hi else "-").ljust(8)
        row += "".join(
            ("/".join(f"v{v}" for v in sorted(observed[c].get(api, ()))) or "-").ljust(26)
            for c in clients
        )
        print(row)
    assert clients, "no client versions were recorded"
