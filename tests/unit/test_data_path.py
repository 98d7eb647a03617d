"""The data path without a broker: the Produce and Fetch handlers on a ReplicaManager alone.

The handlers decode, call `ReplicaManager.append_records` / `fetch_messages` and encode; so they
can be driven with nothing but a ReplicaManager over a real LogManager in a temp dir (and, for
Fetch, the metadata image for topic ids). Checked here end to end through the encoded responses:
a produce's offsets, a consumer fetch of what was produced, the long poll answered in the
callback of the append that completes it, acks=all waiting for a follower's fetch (a follower's
Fetch through the same handler), and an unknown partition. A transactional producer's pipelined
batches go through `handle_produce` itself, with a stand-in node whose transaction coordinator
answers when the test says: they are appended in the order they arrived.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kavka.broker.handlers.fetch import fetch
from kavka.broker.handlers.produce import handle_produce, produce
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


def test_an_out_of_order_batch_is_answered_and_logged(tmp_path: Path, caplog: Any) -> None:
    """OUT_OF_ORDER_SEQUENCE_NUMBER is rare and fatal to a transactional producer: each answer is
    logged at INFO with what tells the race apart -- partition, leader epoch, log end, producer,
    epoch, the sequence expected and the one received."""
    async def run() -> None:
        rm = _manager(tmp_path)
        cls = api.request_schema(0, 9)
        topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
        for seq, want in ((0, ErrorCode.none), (5, ErrorCode.out_of_order_sequence_number)):
            batch = build_batch([(NOW, None, b"i")], producer_id=3, producer_epoch=1, base_sequence=seq)
            req = make(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
                make(topic_cls, name=TP.topic, partition_data=(make(part_cls, index=TP.partition, records=batch),)),))
            assert produce(rm, _ctx(0, 9), req).responses[0].partition_responses[0].error_code == want

    with caplog.at_level("INFO", logger="kavka.replication"):
        asyncio.run(run())
    assert ("t-0 (leader epoch 0, log end 1): OUT_OF_ORDER_SEQUENCE_NUMBER: out of order sequence for producer 3 "
            "epoch 1: expected 1, got 5") in caplog.text


# ---- a transactional producer's pipelined batches (issue 30) ---------------------------------


class _Node:
    """What handle_produce uses of a BrokerNode: the replica manager, no quotas or authorizer, the
    partition verification on; the transaction coordinator's answers are given by the test."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.replica_manager = rm
        self.image = MetadataImage()
        self.txn_appends: dict[str, asyncio.Future[None]] = {}
        self.client_quotas = SimpleNamespace(record_produce=lambda *_: 0)
        self.resolver = SimpleNamespace(broker_value=lambda image, key: True)
        self.verifications: list[tuple[list[TopicPartition], asyncio.Future[dict[TopicPartition, ErrorCode]]]] = []

    def authorizer(self) -> None:
        return None

    async def verify_txn_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: list[TopicPartition], *, add: bool = False) -> dict[TopicPartition, ErrorCode]:
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()
        self.verifications.append((partitions, answer))
        return await answer

    def answer(self, i: int, error: ErrorCode = ErrorCode.none) -> None:
        tps, answer = self.verifications[i]
        answer.set_result(dict.fromkeys(tps, error))


def _send(node: _Node, seq: int) -> asyncio.Future[Any]:
    """A Produce v12 (transactions v2) of producer 7's batch at `seq`, dispatched as the server
    does: the handler is called on arrival, an awaitable answer runs as a task."""
    cls = api.request_schema(0, 12)
    topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    batch = build_batch([(NOW, None, b"s%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq,
                        is_transactional=True)
    req = make(cls, transactional_id="tx", acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(
        make(topic_cls, name=TP.topic, partition_data=(make(part_cls, index=TP.partition, records=batch),)),))
    answer = handle_produce(node, _ctx(0, 12), req)  # type: ignore[arg-type]
    if inspect.isawaitable(answer):
        return asyncio.ensure_future(answer)
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    done.set_result(answer)
    return done


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _part(resp: Any) -> tuple[ErrorCode, int]:
    [part] = resp.responses[0].partition_responses
    return ErrorCode(part.error_code), part.base_offset


def test_a_batch_sent_while_the_first_is_verified_is_appended_after_it(tmp_path: Path) -> None:
    """The Java client's fresh-topic failure: batches 0 and 1 arrive while the partition is not yet
    in the transaction, so batch 0 waits for the coordinator; batch 2 arrives once batch 0 is in
    (the transaction open). Batch 2 must not overtake batch 1 (it would be refused out of order,
    and the producer, by then acknowledged up to 1, would take that as fatal): the producer's
    requests append in the order they came."""
    async def run() -> None:
        node = _Node(_manager(tmp_path))
        first, second = _send(node, 0), _send(node, 1)
        await _settle()
        node.answer(0)
        assert _part(await first) == (ErrorCode.none, 0)
        third = _send(node, 2)
        await _settle()
        for i in range(1, len(node.verifications)):
            node.answer(i)
        assert [_part(await f) for f in (second, third)] == [(ErrorCode.none, 1), (ErrorCode.none, 2)]
        # batch 1 waited behind batch 0 and, the transaction open by then, needed no verification
        assert len(node.verifications) == 1 and node.txn_appends == {}

    asyncio.run(run())


def test_a_batch_behind_a_first_one_refused_retriably_is_refused_too(tmp_path: Path) -> None:
    """Batch 0's verification fails with a retriable error (the coordinator busy); batch 1, behind
    it, is then verified, but appending it first would leave batch 0 refused out of order for ever:
    it is refused OUT_OF_ORDER_SEQUENCE_NUMBER (not the producer's next batch: retried), and the
    retries append in order."""
    async def run() -> None:
        node = _Node(_manager(tmp_path))
        first, second = _send(node, 0), _send(node, 1)
        await _settle()
        node.answer(0, ErrorCode.not_enough_replicas)
        assert _part(await first)[0] == ErrorCode.not_enough_replicas
        await _settle()
        node.answer(1)
        assert _part(await second)[0] == ErrorCode.out_of_order_sequence_number
        first, second = _send(node, 0), _send(node, 1)
        await _settle()
        node.answer(2)
        assert [_part(await f) for f in (first, second)] == [(ErrorCode.none, 0), (ErrorCode.none, 1)]

    asyncio.run(run())


def test_a_closed_connection_does_not_hold_the_line(tmp_path: Path) -> None:
    """The first request's connection closes while it is verified (the server cancels its task):
    the one behind it goes on (refused as batch 0 never came, as above) and leaves no line behind."""
    async def run() -> None:
        node = _Node(_manager(tmp_path))
        first, second = _send(node, 0), _send(node, 1)
        await _settle()
        first.cancel()
        await _settle()
        assert len(node.verifications) == 2
        node.answer(1)
        assert _part(await second)[0] == ErrorCode.out_of_order_sequence_number
        assert node.txn_appends == {}

    asyncio.run(run())


def test_a_lapsed_leader_answers_not_leader_and_releases_waiting_acks_all(tmp_path: Path) -> None:
    """broker.session_watch: a broker that lost its controller session, leading a partition whose
    follower has not fetched from it (it may lead elsewhere), steps down: it takes no writes and
    answers the acks=all produces waiting for followers at once, so that the producer goes looking
    for the new leader instead of waiting out its request timeout; it leads again after."""

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


def test_a_lapsed_leader_serves_while_its_followers_fetch_and_steps_down_when_one_stops(tmp_path: Path) -> None:
    """The controller quorum is gone, not the followers: they keep fetching, so none of them was
    elected, and the lapsed leader keeps acknowledging acks=all writes. Once the follower is silent
    for replica.lag.time.max.ms the partition steps down (the waiting produce answered at once);
    when it fetches again at this leader epoch the partition leads again."""

    async def run() -> None:
        rm = _manager(tmp_path, replicas=(1, 2))
        clock = [NOW]
        rm.now_ms = lambda: clock[0]
        lag = rm.replica_lag_time_max_ms
        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, replica_id=2)))
        rm.set_leadership_lapsed(True)
        waiting = produce(rm, _ctx(0, 9), _produce_request([b"a"], acks=-1))
        assert isinstance(waiting, Delayed)
        clock[0] += lag
        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(1, replica_id=2)))
        [part] = waiting.future.result().responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)

        waiting = produce(rm, _ctx(0, 9), _produce_request([b"b"], acks=-1))
        clock[0] += lag
        rm.review_step_downs()
        assert not waiting.future.done() and rm.leading_while_lapsed  # fetched lag ms ago: still leads
        clock[0] += 1
        rm.review_step_downs()
        [part] = waiting.future.result().responses[0].partition_responses
        assert part.error_code == ErrorCode.not_leader_or_follower and not rm.leading_while_lapsed
        resp = produce(rm, _ctx(0, 9), _produce_request([b"c"], acks=1))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower

        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(2, replica_id=2)))
        rm.review_step_downs()
        resp = produce(rm, _ctx(0, 9), _produce_request([b"c"], acks=1))
        [part] = resp.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 2)

    asyncio.run(run())


def test_a_lapsed_single_replica_leader_keeps_serving(tmp_path: Path) -> None:
    """RF=1: nobody else can be elected, so the partition never steps down."""

    async def run() -> None:
        rm = _manager(tmp_path)
        rm.set_leadership_lapsed(True)
        rm.now_ms = lambda: NOW + 10 * rm.replica_lag_time_max_ms
        rm.review_step_downs()
        resp = produce(rm, _ctx(0, 9), _produce_request([b"a"], acks=-1))
        [part] = resp.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
        assert rm.leading_while_lapsed

    asyncio.run(run())
