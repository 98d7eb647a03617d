"""The data path without a broker: the Produce and Fetch handlers on a ReplicaManager alone.

The handlers decode, call `ReplicaManager.append_records` / `fetch_messages` and encode; so they
can be driven with nothing but a ReplicaManager over a real LogManager in a temp dir (and, for
Fetch, the metadata image for topic ids). Checked here end to end through the encoded responses:
a produce's offsets, a consumer fetch of what was produced, the long poll answered in the
callback of the append that completes it, acks=all waiting for a follower's fetch (a follower's
Fetch through the same handler), and an unknown partition.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

from kavka.broker.handlers.fetch import fetch
from kavka.broker.handlers.produce import produce
from kavka.broker.server import RequestContext
from kavka.common import ErrorCode, TopicPartition
from kavka.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration
from kavka.protocol import api
from kavka.protocol.framing import decode_body
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch, iter_batches
from kavka.protocol.splice import SplicedResponse, encode_spliced
from kavka.replication.purgatory import Delayed
from kavka.replication.replica_manager import ReplicaManager
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

NOW = 1_700_000_000_000
TP = TopicPartition("t", 0)


def _manager(tmp_path: Path, replicas: tuple[int, ...] = (1,)) -> ReplicaManager:
    lm = LogManager([tmp_path], default_config=LogConfig(), now_ms=NOW)
    rm = ReplicaManager(node_id=1, log_manager=lm, now_ms=lambda: NOW)
    brokers = {b: BrokerRegistration(b, f"inc{b}", (("PLAINTEXT", "h", 9000 + b),), None, (), epoch=10, fenced=False)
               for b in replicas}
    rm.metadata = lambda: MetadataImage(brokers=brokers)
    reg = PartitionRegistration(0, replicas, replicas, 1, 0, 0)
    assert rm.apply_partition(TP, topic_id="AAAAAAAAAAAAAAAAAAAAAw", registration=reg, config=LogConfig(),
                              min_insync_replicas=1) is not None
    return rm


def _produce_request(values: list[bytes], acks: int = 1, version: int = 9) -> Any:
    cls = api.request_schema(0, version)
    topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    batch = build_batch([(NOW, None, v) for v in values])
    return make(cls, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5), topic_data=(
        make(topic_cls, name=TP.topic, partition_data=(make(part_cls, index=TP.partition, records=batch),)),
    ))


def _fetch_request(offset: int, *, replica_id: int = -1, max_wait_ms: int = 0, version: int = 12) -> Any:
    cls = api.request_schema(1, version)
    topic_cls, part_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    return make(cls, replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, rack_id="", topics=(
                    make(topic_cls, topic=TP.topic, partitions=(make(
                        part_cls, partition=TP.partition, current_leader_epoch=-1, fetch_offset=offset,
                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=())


def _ctx(key: int, version: int) -> RequestContext:
    return RequestContext(key, version, 1, "test", "127.0.0.1:1")


def _fetched(resp: SplicedResponse, version: int = 12) -> Any:
    """The decoded partition of a one-partition Fetch response."""
    data = encode_spliced(resp)
    body = b"".join(bytes(b) for b in data) if isinstance(data, list) else data
    decoded = decode_body(api.response_schema(1, version), body, 0)
    [topic] = decoded.responses
    [part] = topic.partitions
    return part


def _values(records: bytes | None) -> list[int]:
    """Base offsets of the batches in a partition's records."""
    return [h.base_offset for _, h in iter_batches(records or b"")]


def test_produce_then_fetch_through_the_handlers(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path)
        resp = produce(rm, _ctx(0, 9), _produce_request([b"a", b"b"]))
        [part] = resp.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
        resp = produce(rm, _ctx(0, 9), _produce_request([b"c"]))
        assert resp.responses[0].partition_responses[0].base_offset == 2

        got = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0)))
        assert got.error_code == ErrorCode.none and got.high_watermark == 3
        assert _values(got.records) == [0, 2]
        assert rm.bytes_out == {"t": len(got.records)}  # a consumer's bytes are counted

    asyncio.run(run())


def test_a_parked_fetch_is_answered_by_the_append(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path)
        parked = fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, max_wait_ms=30_000))
        assert isinstance(parked, Delayed) and not parked.future.done()
        heard: list[Any] = []
        parked.listen(lambda: heard.append(parked.future.result()))
        produce(rm, _ctx(0, 9), _produce_request([b"x"]))
        assert len(heard) == 1  # in the append's callback, not after 30 s or a later turn
        assert _values(_fetched(heard[0]).records) == [0]

    asyncio.run(run())


def test_acks_all_waits_for_the_followers_fetch(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path, replicas=(1, 2))
        waiting = produce(rm, _ctx(0, 9), _produce_request([b"y"], acks=-1))
        assert isinstance(waiting, Delayed) and not waiting.future.done()
        # The follower fetches the batch (offset 0): not yet past it.
        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, replica_id=2)))
        assert not waiting.future.done()
        # Its next fetch at offset 1 says it holds the batch: the high watermark passes it.
        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(1, replica_id=2)))
        [part] = waiting.future.result().responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)

    asyncio.run(run())


def test_an_unknown_partition_is_answered_per_partition(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path)
        rm.remove_partition(TP, delete=False)
        resp = produce(rm, _ctx(0, 9), _produce_request([b"z"]))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
        got = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0)))
        assert got.error_code == ErrorCode.unknown_topic_or_partition

    asyncio.run(run())


def test_a_lapsed_leader_answers_not_leader_and_releases_waiting_acks_all(tmp_path: Path) -> None:
    """broker.session_watch: a broker that lost its controller session takes no writes as a leader
    and answers the acks=all produces waiting for followers at once, so that the producer goes
    looking for the new leader instead of waiting out its request timeout; it leads again after."""

    async def run() -> None:
        rm = _manager(tmp_path, replicas=(1, 2))
        waiting = produce(rm, _ctx(0, 9), _produce_request([b"y"], acks=-1))
        assert isinstance(waiting, Delayed) and not waiting.future.done()
        rm.set_leadership_lapsed(True)
        [part] = waiting.future.result().responses[0].partition_responses
        assert part.error_code == ErrorCode.not_leader_or_follower
        for acks in (1, -1):
            resp = produce(rm, _ctx(0, 9), _produce_request([b"z"], acks=acks))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
        rm.set_leadership_lapsed(False)
        resp = produce(rm, _ctx(0, 9), _produce_request([b"z"], acks=1))
        [part] = resp.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 1)

    asyncio.run(run())
