"""aiokafka 0.14 against a real kavka broker process.

No pytest-asyncio in the dev dependencies: each test runs its coroutine with
asyncio.run and a global wait_for deadline. Topics come from aiokafka's own
AIOKafkaAdminClient; consumers assign() and never join a group.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import MessageSizeTooLargeError

from tests.integration.helpers import (
    CODEC_IDS,
    CODECS,
    Rec,
    Sample,
    assert_same_records,
    batch_codecs,
    recent_base_ts,
    sample_records,
    segment_files,
)
from tests.wait import wait_until_async

TIMEOUTS = {"request_timeout_ms": 15000}


def ak_samples(n: int) -> list[Sample]:
    # aiokafka refuses null header values and records with neither key nor value.
    return sample_records(n, base_ts=recent_base_ts(), null_header_values=False, both_null=False)


def run(coro, timeout: float = 60.0):  # noqa: ANN001, ANN201
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def ak_create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **TIMEOUTS)
    await admin.start()
    try:
        resp = await admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs=configs or {})], timeout_ms=10000
        )
        errs = [t[1] for t in resp.topic_errors]
        assert errs == [0], f"CreateTopics errors: {resp.topic_errors}"
        # Wait for the metadata to show every partition with a leader.
        async def led() -> bool:
            md = await admin.describe_topics([topic])
            parts = md[0]["partitions"] if md and md[0]["error_code"] == 0 else []
            return len(parts) == partitions and all(p["leader"] >= 0 for p in parts)

        await wait_until_async(led, timeout=10, interval=0.1, message=f"topic {topic} with {partitions} led partitions")
    finally:
        await admin.close()


async def ak_produce(
    bootstrap: str, topic: str, samples: list[Sample], *, partition: int | None = 0, **conf
) -> list[tuple[int, int]]:  # noqa: ANN003
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **TIMEOUTS, **conf})
    await producer.start()
    try:
        futs = [
            await producer.send(
                topic,
                key=s.key,
                value=s.value,
                partition=partition,
                timestamp_ms=s.timestamp,
                headers=list(s.headers),
            )
            for s in samples
        ]
        mds = await asyncio.gather(*futs)
        # acks=0: aiokafka resolves the futures with None (no response, no offset).
        return [(md.partition, md.offset) if md is not None else (-1, -1) for md in mds]
    finally:
        await producer.stop()


async def ak_read_to_end(
    bootstrap: str, topic: str, partitions=(0,), *, start: int | None = None, **conf
) -> list[Rec]:  # noqa: ANN001, ANN003
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        check_crcs=True,
        fetch_max_wait_ms=100,
        **TIMEOUTS,
        **conf,
    )
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        if start is None:
            await c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, start)
        end = await c.end_offsets(tps)
        got: list[Rec] = []
        while True:
            positions = {tp: await c.position(tp) for tp in tps}
            if all(positions[tp] >= end[tp] for tp in tps):
                return got
            batch = await c.getmany(timeout_ms=500)
            for recs in batch.values():
                for r in recs:
                    got.append(
                        Rec(
                            r.partition,
                            r.offset,
                            r.key,
                            r.value,
                            tuple(r.headers or ()),
                            r.timestamp,
                        )
                    )
    finally:
        await c.stop()


def test_roundtrip_keys_headers_timestamps_nulls(broker, topic_name):
    async def main() -> None:
        await ak_create_topic(broker.bootstrap, topic_name)
        sent = ak_samples(60)
        assert await ak_produce(broker.bootstrap, topic_name, sent, acks="all") == [
            (0, i) for i in range(60)
        ]
        assert_same_records(await ak_read_to_end(broker.bootstrap, topic_name), sent)

    run(main())


@pytest.mark.parametrize("codec", CODECS)
def test_compression_roundtrip(broker, topic_name, codec):
    async def main() -> None:
        await ak_create_topic(broker.bootstrap, topic_name)
        sent = ak_samples(150)
        reports = await ak_produce(
            broker.bootstrap, topic_name, sent, compression_type=codec, linger_ms=50
        )
        assert reports == [(0, i) for i in range(150)]
        assert_same_records(await ak_read_to_end(broker.bootstrap, topic_name), sent)

    run(main())
    codecs = [c for f in segment_files(broker.log_dirs[0], topic_name) for c in batch_codecs(f)]
    assert codecs and set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}"


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker, topic_name, acks):
    async def main() -> None:
        await ak_create_topic(broker.bootstrap, topic_name)
        sent = ak_samples(40)
        reports = await ak_produce(broker.bootstrap, topic_name, sent, acks=acks)
        if acks != 0:
            assert reports == [(0, i) for i in range(40)]
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, **TIMEOUTS
        )
        await c.start()
        try:
            tp = TopicPartition(topic_name, 0)
            async def ended() -> bool:  # acks=0 confirms nothing: wait for the log end
                return (await c.end_offsets([tp]))[tp] >= 40

            await wait_until_async(ended, timeout=15, interval=0.1, message="the log end at 40")
            assert (await c.end_offsets([tp]))[tp] == 40
        finally:
            await c.stop()
        assert_same_records(await ak_read_to_end(broker.bootstrap, topic_name), sent)

    run(main())


def test_record_just_under_and_over_max_message_bytes(broker, topic_name):
    limit = 20_000
    small = os.urandom(limit - 200)

    async def main() -> None:
        await ak_create_topic(
            broker.bootstrap, topic_name, configs={"max.message.bytes": str(limit)}
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0, **TIMEOUTS
        )
        await producer.start()
        try:
            md = await producer.send_and_wait(topic_name, key=b"small", value=small, partition=0)
            assert (md.partition, md.offset) == (0, 0)
            with pytest.raises(MessageSizeTooLargeError):
                await producer.send_and_wait(
                    topic_name, key=b"big", value=os.urandom(limit + 500), partition=0
                )
        finally:
            await producer.stop()
        got = await ak_read_to_end(broker.bootstrap, topic_name)
        assert [(r.offset, r.key, r.value) for r in got] == [(0, b"small", small)]

    run(main())


def test_many_partitions_keyed(broker, topic_name):
    n_parts = 24
    base = recent_base_ts()
    keys = [f"dev-{i % 70}".encode() for i in range(350)]

    async def main() -> None:
        await ak_create_topic(broker.bootstrap, topic_name, partitions=n_parts)
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5, **TIMEOUTS
        )
        await producer.start()
        try:
            futs = [
                await producer.send(topic_name, key=k, value=b"v%d" % i, timestamp_ms=base + i)
                for i, k in enumerate(keys)
            ]
            delivered = [(md.partition, md.offset) for md in await asyncio.gather(*futs)]
        finally:
            await producer.stop()
        by_key: dict[bytes, set[int]] = {}
        for (p, _), k in zip(delivered, keys, strict=True):
            by_key.setdefault(k, set()).add(p)
        assert all(len(s) == 1 for s in by_key.values())
        got = await ak_read_to_end(broker.bootstrap, topic_name, range(n_parts))
        assert len(got) == len(keys)
        by_pos = {(r.partition, r.offset): r for r in got}
        for i, k in enumerate(keys):
            r = by_pos[delivered[i]]
            assert (r.key, r.value, r.timestamp) == (k, b"v%d" % i, base + i)

    run(main(), timeout=90)


async def _produce_and_delete_first_five(bootstrap: str, topic: str) -> list[Sample]:
    await ak_create_topic(bootstrap, topic)
    sent = ak_samples(10)
    assert await ak_produce(bootstrap, topic, sent, acks="all") == [(0, i) for i in range(10)]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **TIMEOUTS)
    await admin.start()
    try:
        tp = TopicPartition(topic, 0)
        res = await admin.delete_records({tp: RecordsToDelete(before_offset=5)}, timeout_ms=10000)
        assert res[tp] == 5, f"DeleteRecords low watermark: {res}"
    finally:
        await admin.close()
    return sent


def test_offset_out_of_range_resets_to_earliest(broker, topic_name):
    async def main() -> None:
        sent = await _produce_and_delete_first_five(broker.bootstrap, topic_name)
        got = await ak_read_to_end(
            broker.bootstrap, topic_name, start=2, auto_offset_reset="earliest"
        )
        assert_same_records(got, sent[5:], first_offset=5)

    run(main())


def test_offset_out_of_range_resets_to_latest(broker, topic_name):
    async def main() -> None:
        await _produce_and_delete_first_five(broker.bootstrap, topic_name)
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            fetch_max_wait_ms=100,
            **TIMEOUTS,
        )
        await c.start()
        tp = TopicPartition(topic_name, 0)
        try:
            c.assign([tp])
            c.seek(tp, 2)
            got = []
            for attempt in range(20):  # until the reset has happened and a marker arrives
                await ak_produce(
                    broker.bootstrap,
                    topic_name,
                    [Sample(None, b"marker-%d" % attempt, (), recent_base_ts())],
                )
                batch = await c.getmany(tp, timeout_ms=1000)
                got += [(r.offset, r.value) for r in batch.get(tp, [])]
                if got:
                    break
            assert got, "nothing arrived after a reset to latest"
            assert got[0][0] >= 10 and got[0][1].startswith(b"marker-"), got
        finally:
            await c.stop()

    run(main())
