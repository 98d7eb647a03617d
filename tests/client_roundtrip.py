"""One round trip per third-party client, shared by the security suites (TLS, SASL/PLAIN, SCRAM,
OAUTHBEARER): an admin call that creates a topic and lists it, a produce, and a group consume
with a commit, all over the connection settings the caller gives (each client's own keys). Each
returns nothing and fails the test on any difference."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

from tests.wait import wait_until


def topic(prefix: str = "sec") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent(conf: dict[str, object], n: int = 10, *, what: str = "confluent-kafka") -> str:
    """AdminClient create + list, Producer, group Consumer with a commit; returns the topic."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = topic()
    admin = AdminClient(conf)
    admin.poll(1)  # librdkafka calls an oauth_cb from poll
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    assert name in admin.list_topics(timeout=15).topics
    p = Producer(conf)
    for i in range(n):
        p.produce(name, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([name])
    got: list[bytes] = []
    try:
        wait_until(lambda: got.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(got) >= n,
                   timeout=30, message=f"{n} records through {what}")
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))
    return name


def kafka_python(conf: dict[str, object], n: int = 10, *, admin: bool = True) -> None:
    """KafkaAdminClient create + list (unless `admin` is False: the producer auto-creates),
    KafkaProducer, group KafkaConsumer with a commit."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    name = topic()
    if admin:
        a = KafkaAdminClient(**conf)
        try:
            a.create_topics([NewTopic(name, 1, 1)])
            assert name in a.list_topics()
        finally:
            a.close()
    p = KafkaProducer(**conf)
    for i in range(n):
        p.send(name, f"k{i}".encode()).get(15)
    p.close()
    c = KafkaConsumer(name, group_id=f"g-{name}", auto_offset_reset="earliest", consumer_timeout_ms=15000, **conf)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == n:
            break
    c.commit()
    c.close()
    assert got == [f"k{i}".encode() for i in range(n)]


def aiokafka(conf: dict[str, object], n: int = 10, *, admin: bool = True) -> None:
    """AIOKafkaAdminClient create + list (unless `admin` is False), AIOKafkaProducer, group
    AIOKafkaConsumer with a commit."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    name = topic()

    async def go() -> list[bytes]:
        if admin:
            a = AIOKafkaAdminClient(**conf)
            await a.start()
            try:
                await a.create_topics([AioNewTopic(name, 1, 1)])
                assert name in await a.list_topics()
            finally:
                await a.close()
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(n):
                await p.send_and_wait(name, f"a{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(name, group_id=f"g-{name}", auto_offset_reset="earliest", **conf)
        await c.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for m in c:
                    got.append(m.value)
                    if len(got) == n:
                        break
            await c.commit()
        finally:
            await c.stop()
        return got

    assert asyncio.run(go()) == [f"a{i}".encode() for i in range(n)]


def kcat(opts: list[str], lines: tuple[str, ...] = ("one", "two", "three")) -> None:
    """kcat -P then -C -e with `opts` (-b and -X settings) on a new topic (auto-created)."""
    name = topic()

    def run(*a: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kcat", *opts, *a], input=stdin, capture_output=True, text=True, timeout=30)

    res = run("-P", "-t", name, stdin="".join(f"{line}\n" for line in lines))
    assert res.returncode == 0, res.stderr
    res = run("-C", "-t", name, "-e", "-o", "beginning", "-f", "%s\n")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == list(lines)
