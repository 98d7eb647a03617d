"""Reading from followers (KIP-392) on real processes: three brokers in racks a, b and c.

Every broker sets `replica.selector.class` to Kafka's RackAwareReplicaSelector; topics have three
replicas, so each rack holds one. Who served a consumer's records is read from the brokers
themselves: each broker's BytesOutPerSec counter for the topic (record bytes sent to consumers,
never to followers), scraped from its Prometheus endpoint. The consumers are unmodified
confluent-kafka (librdkafka, `client.rack`), aiokafka 0.14 and kafka-python 3.0 (`client_rack`)
consumers: all three follow preferred_read_replica.

Raw Fetch requests pin down the answers Kafka gives: the leader's preferred_read_replica with no
records, a follower's reads bounded by its high watermark, OFFSET_OUT_OF_RANGE above its log
end, fencing by leader epoch, leader-only consumers before v11 and for ListOffsets.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from kavka.config import RACK_AWARE_REPLICA_SELECTOR
from kavka.protocol.messages import uuid_from_str
from tests.broker_harness import Cluster
from tests.integration.helpers import ck_admin, ck_consumer, scrape, unique
from tests.raw_client import raw_call
from tests.wait import wait_until

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    "default.replication.factor": "3",
    "metrics.prometheus.port": "0",
}
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


def _cluster(root, *, selector: bool = True) -> Cluster:  # noqa: ANN001
    overrides = dict(OVERRIDES)
    if selector:
        overrides["replica.selector.class"] = RACK_AWARE_REPLICA_SELECTOR
    return Cluster(root, 3, overrides=overrides, node_overrides={i: {"broker.rack": r} for i, r in RACKS.items()})


def _running(c: Cluster) -> Iterator[Cluster]:
    c.start()
    try:
        yield c
    finally:
        try:
            c.stop()
        except Exception:
            for i, n in c.nodes.items():
                print(f"---- node {i}\n" + "".join(n.output[-80:]))
            raise


@pytest.fixture(scope="module")
def racks(tmp_path_factory) -> Iterator[Cluster]:  # noqa: ANN001
    """Shared by the tests that kill nothing: each uses its own topic."""
    yield from _running(_cluster(tmp_path_factory.mktemp("racks")))


@pytest.fixture
def own_racks(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    yield from _running(_cluster(tmp_path))


def _metrics_port(c: Cluster, node: int) -> int:
    m = wait_until(lambda: re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", "".join(c.nodes[node].output)),
                   10, message=f"node {node}'s metrics endpoint")
    return int(m.group(1))


def _bytes_out(c: Cluster, topic: str) -> dict[int, float]:
    """Record bytes each live broker has sent to consumers for `topic`."""
    return {i: scrape(_metrics_port(c, i)).get((BYTES_OUT, (("topic", topic),)), 0.0)
            for i, n in c.nodes.items() if n.alive()}


def _create(c: Cluster, topic: str) -> tuple[int, list[int]]:
    """A one-partition RF=3 topic with its whole ISR; (leader, followers)."""
    admin = ck_admin(c.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(20)

    def ready():  # noqa: ANN202
        p = admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0]
        return p if p.leader >= 0 and len(p.isrs) == 3 else None

    p = wait_until(ready, 30, message="leader and a full ISR")
    return p.leader, [r for r in p.replicas if r != p.leader]


def _produce(c: Cluster, topic: str, start: int, n: int) -> None:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                  "topic.metadata.refresh.interval.ms": 1000})
    for i in range(start, start + n):
        p.produce(topic, b"value-%06d-" % i + b"x" * 200, key=b"k%d" % i, partition=0,
                  on_delivery=lambda e, m: errors.append(e))
    assert p.flush(90) == 0
    assert errors == [None] * n


def _consumer(c: Cluster, topic: str, rack: str | None, **conf: object):  # noqa: ANN202
    extra: dict[str, object] = {"max.partition.fetch.bytes": 4096, "fetch.max.bytes": 4096, "message.max.bytes": 4096, **conf}
    if rack is not None:
        extra["client.rack"] = rack
    cons = ck_consumer(c.bootstrap, extra)
    cons.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)])
    return cons


def _read(cons, end: int, *, start: int = 0, timeout: float = 60.0) -> list[tuple[int, bytes]]:  # noqa: ANN001
    """Read from `start` until the partition reported its end at offset `end`; the records read
    (the caller compares them with what was sent: an extra record or a gap fails). A consumer
    error fails."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == KafkaError._PARTITION_EOF:
                if len(got) >= end - start and m.offset() == end:
                    break
                continue
            raise AssertionError(f"consumer error: {m.error()}")
        got.append((m.offset(), m.value()))
    else:
        raise AssertionError(f"read {len(got)} of {end - start} records in {timeout}s")
    return got


def _expected(n: int) -> list[tuple[int, bytes]]:
    return [(i, b"value-%06d-" % i + b"x" * 200) for i in range(n)]


# ---------------------------------------------------------------- real consumers


def test_a_consumer_reads_from_the_follower_in_its_rack(racks: Cluster) -> None:
    topic = unique("kip392")
    leader, followers = _create(racks, topic)
    near = followers[0]
    _produce(racks, topic, 0, 300)

    cons = _consumer(racks, topic, RACKS[near])
    try:
        assert _read(cons, 300) == _expected(300)
    finally:
        cons.close()
    served = _bytes_out(racks, topic)
    assert served[near] >= 300 * 200, served  # every record's bytes came from the follower in the rack
    assert served[leader] == 0 and served[followers[1]] == 0, served

    # Without client.rack everything is read from the leader.
    cons = _consumer(racks, topic, None)
    try:
        assert _read(cons, 300) == _expected(300)
    finally:
        cons.close()
    after = _bytes_out(racks, topic)
    assert after[leader] >= 300 * 200 and after[near] == served[near] and after[followers[1]] == 0, after

    # A rack no replica is in, or the leader's own rack: the leader serves.
    for rack in ("rack-z", RACKS[leader]):
        cons = _consumer(racks, topic, rack)
        try:
            assert _read(cons, 300) == _expected(300)
        finally:
            cons.close()
    final = _bytes_out(racks, topic)
    assert final[leader] >= 3 * 300 * 200 and final[near] == served[near] and final[followers[1]] == 0, final


def test_a_consumer_follows_new_records_on_its_follower(racks: Cluster) -> None:
    """The follower's high watermark moves as the leader's does: a tailing consumer sees every record."""
    topic = unique("kip392-tail")
    leader, followers = _create(racks, topic)
    near = followers[1]
    cons = _consumer(racks, topic, RACKS[near])
    try:
        _produce(racks, topic, 0, 50)
        first = _read(cons, 50)
        _produce(racks, topic, 50, 150)
        rest = _read(cons, 200, start=50)
    finally:
        cons.close()
    assert first + rest == _expected(200)
    served = _bytes_out(racks, topic)
    assert served[near] >= 200 * 200 and served[leader] == 0, served


def test_the_consumer_goes_back_to_the_leader_when_its_follower_dies(own_racks: Cluster) -> None:
    c = own_racks
    topic = unique("kip392-kill")
    leader, followers = _create(c, topic)
    near = followers[0]
    _produce(c, topic, 0, 200)
    cons = _consumer(c, topic, RACKS[near])
    try:
        first = _read(cons, 200)
        served = _bytes_out(c, topic)
        assert served[near] >= 200 * 200 and served[leader] == 0, served

        c.nodes[near].kill()  # kill -9 mid-read: the next records exist only on the leader and the other follower
        _produce(c, topic, 200, 200)
        rest = _read(cons, 400, start=200, timeout=90)
    finally:
        cons.close()
    assert first + rest == _expected(400)  # every record exactly once, in order
    after = _bytes_out(c, topic)
    assert after[leader] >= 200 * 200, after  # the rest came from the leader


def _aiokafka_read(c: Cluster, topic: str, rack: str, n: int) -> list[tuple[int, bytes]]:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AkTopicPartition

    async def read() -> list[tuple[int, bytes]]:
        cons = AIOKafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False,
                                client_rack=rack, max_partition_fetch_bytes=4096, request_timeout_ms=15000)
        await cons.start()
        try:
            tp = AkTopicPartition(topic, 0)
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            got: list[tuple[int, bytes]] = []
            while len(got) < n:
                batch = await cons.getmany(tp, timeout_ms=500)
                got += [(m.offset, m.value) for m in batch.get(tp, [])]
            return got
        finally:
            await cons.stop()

    return asyncio.run(asyncio.wait_for(read(), 60))


def test_aiokafka_reads_from_the_follower_in_its_rack(racks: Cluster) -> None:
    """aiokafka 0.14 sends client_rack and follows preferred_read_replica too."""
    topic = unique("kip392-ak")
    leader, followers = _create(racks, topic)
    near = followers[1]
    _produce(racks, topic, 0, 100)
    assert _aiokafka_read(racks, topic, RACKS[near], 100) == _expected(100)
    served = _bytes_out(racks, topic)
    assert served[near] >= 100 * 200 and served[leader] == 0 and served[followers[0]] == 0, served


def _kafka_python_read(c: Cluster, topic: str, rack: str, n: int) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    cons = KafkaConsumer(bootstrap_servers=c.bootstrap.split(","), group_id=None, enable_auto_commit=False,
                         client_rack=rack, max_partition_fetch_bytes=4096, request_timeout_ms=15000)
    try:
        tp = KpTopicPartition(topic, 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            got += [(m.offset, m.value) for m in cons.poll(timeout_ms=500).get(tp, [])]
        return got
    finally:
        cons.close()


def test_kafka_python_reads_from_the_follower_in_its_rack(racks: Cluster) -> None:
    """kafka-python 3.0 sends client_rack and follows preferred_read_replica too."""
    topic = unique("kip392-kp")
    leader, followers = _create(racks, topic)
    near = followers[0]
    _produce(racks, topic, 0, 100)
    assert _kafka_python_read(racks, topic, RACKS[near], 100) == _expected(100)
    served = _bytes_out(racks, topic)
    assert served[near] >= 100 * 200 and served[leader] == 0 and served[followers[1]] == 0, served


def test_kcat_reads_from_the_follower_in_its_rack(racks: Cluster) -> None:
    """kcat (Debian's, librdkafka 2.0) with `-X client.rack`: what the README shows."""
    import subprocess

    topic = unique("kip392-kcat")
    leader, followers = _create(racks, topic)
    near = followers[0]
    _produce(racks, topic, 0, 50)
    # kcat -e stops at the end its replica reports: wait until the follower knows the high watermark.
    wait_until(lambda: _fetch(racks, near, topic, offset=0).high_watermark == 50, 20, message="the follower's high watermark")
    out = subprocess.run(["kcat", "-C", "-b", racks.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
                          "-X", f"client.rack={RACKS[near]}", "-f", "%o %s\n"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == [f"{o} {v.decode()}" for o, v in _expected(50)]
    served = _bytes_out(racks, topic)
    assert served[near] >= 50 * 200 and served[leader] == 0 and served[followers[1]] == 0, served


# ---------------------------------------------------------------- raw requests: Kafka's answers


def _topic_id(c: Cluster, topic: str) -> str:
    from kavka.client.admin import AdminClient

    admin = AdminClient(c.bootstrap)
    try:
        [t] = admin.describe_topics([topic])
    finally:
        admin.close()
    return t.topic_id


def _fetch(c: Cluster, node: int, topic: str, *, offset: int, version: int = 15, rack: str = "", epoch: int = -1,
           replica: int = -1, partition: int = 0):  # noqa: ANN202
    """One Fetch of `topic`-`partition`; the response's partition entry."""
    from kavka.protocol import api
    from kavka.protocol.messages import make, nested

    req_cls = api.request_schema(1, version)
    part = nested(req_cls, "FetchPartition")
    topic_cls = nested(req_cls, "FetchTopic")
    pfields = dict(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)
    if version >= 9:
        pfields["current_leader_epoch"] = epoch
    tfields = {"topic_id": uuid_from_str(_topic_id(c, topic))} if version >= 13 else {"topic": topic}
    fields: dict[str, object] = dict(
        max_wait=datetime.timedelta(0), min_bytes=1, topics=(make(topic_cls, **tfields, partitions=(make(part, **pfields),)),),
    )
    if version >= 15:
        fields["replica_state"] = make(nested(req_cls, "ReplicaState"), replica_id=replica, replica_epoch=-1)
    else:
        fields["replica_id"] = replica
    if version >= 11:
        fields["rack_id"] = rack
    if version >= 7:
        fields["forgotten_topics_data"] = ()
    resp = raw_call(c.nodes[node], 1, version, make(req_cls, **fields))
    return resp.responses[0].partitions[0]


def _records(pd) -> bytes:  # noqa: ANN001
    return bytes(pd.records or b"")


def _leader_epoch(c: Cluster, topic: str) -> int:
    from kavka.client.admin import AdminClient

    admin = AdminClient(c.bootstrap)
    try:
        [t] = admin.describe_topics([topic])
    finally:
        admin.close()
    return t.partitions[0].leader_epoch


def _leader(c: Cluster, topic: str) -> int:
    return ck_admin(c.bootstrap).list_topics(topic=topic, timeout=5).topics[topic].partitions[0].leader


def test_kafkas_answers_to_raw_fetches(racks: Cluster) -> None:
    c = racks
    topic = unique("kip392-raw")
    leader, followers = _create(c, topic)
    near, far = followers
    _produce(c, topic, 0, 20)
    # The followers learn the high watermark 20 on their next fetch from the leader.
    wait_until(lambda: all(_fetch(c, f, topic, offset=0).high_watermark == 20 for f in followers), 20,
               message="the followers' high watermarks")
    epoch = _leader_epoch(c, topic)

    # The leader names the follower in the client's rack and sends no records (v11+).
    pd = _fetch(c, leader, topic, offset=0, rack=RACKS[near], epoch=epoch)
    assert (pd.error_code, pd.preferred_read_replica, _records(pd)) == (ErrorCode.none, near, b"")
    assert pd.high_watermark == 20
    pd = _fetch(c, leader, topic, offset=5, version=11, rack=RACKS[far])
    assert (pd.preferred_read_replica, _records(pd)) == (far, b"")
    # No redirect: no rack, an unknown rack, the leader's rack, a follower's own fetch.
    for rack in ("", "rack-z", RACKS[leader]):
        pd = _fetch(c, leader, topic, offset=0, rack=rack)
        assert pd.preferred_read_replica == -1 and _records(pd), rack
    # An offset beyond every follower's log end: nobody but the leader holds it.
    pd = _fetch(c, leader, topic, offset=21, rack=RACKS[near])
    assert (pd.error_code, pd.preferred_read_replica) == (ErrorCode.offset_out_of_range, -1)

    # The follower serves consumers (v11+) up to its high watermark.
    pd = _fetch(c, near, topic, offset=0, rack=RACKS[near], epoch=epoch)
    assert (pd.error_code, pd.preferred_read_replica, pd.high_watermark) == (ErrorCode.none, -1, 20)
    assert len(_records(pd)) > 20 * 200
    assert _records(_fetch(c, near, topic, offset=20)) == b""  # at its high watermark: nothing yet
    pd = _fetch(c, near, topic, offset=21)
    assert (pd.error_code, pd.high_watermark) == (ErrorCode.offset_out_of_range, 20)  # the client asks the leader
    assert _fetch(c, near, topic, offset=0, epoch=epoch + 1).error_code == ErrorCode.unknown_leader_epoch
    # Before v11 a consumer reads from the leader only.
    assert _fetch(c, near, topic, offset=0, version=10).error_code == ErrorCode.not_leader_or_follower
    assert _fetch(c, leader, topic, offset=0, version=10).error_code == ErrorCode.none

    # A partition the broker does not host: NOT_LEADER_OR_FOLLOWER when the cluster has it.
    other = unique("kip392-one")
    admin = ck_admin(c.bootstrap)
    admin.create_topics([NewTopic(other, 1, 1)])[other].result(20)
    owner = wait_until(lambda: admin.list_topics(topic=other, timeout=5).topics[other].partitions[0].leader, 20,
                       message="a leader")
    stranger = next(i for i in RACKS if i != owner)
    assert _fetch(c, stranger, other, offset=0).error_code == ErrorCode.not_leader_or_follower
    assert _fetch(c, stranger, topic, offset=0, partition=7).error_code == ErrorCode.unknown_topic_or_partition

    # ListOffsets stays leader-only, as Kafka's.
    from kavka.protocol import api
    from kavka.protocol.messages import make, nested

    lo_cls = api.request_schema(2, 7)
    lo = make(lo_cls, replica_id=-1, isolation_level=0, topics=(make(
        nested(lo_cls, "ListOffsetsTopic"), name=topic,
        partitions=(make(nested(lo_cls, "ListOffsetsPartition"), partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    assert raw_call(c.nodes[near], 2, 7, lo).topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
    assert raw_call(c.nodes[leader], 2, 7, lo).topics[0].partitions[0].offset == 20

    # A new leader epoch (the leader stops cleanly and leadership moves): a follower fences the old one.
    c.nodes[leader].stop()
    try:
        wait_until(lambda: _leader_epoch(c, topic) > epoch, 30, message="a new leader epoch")
        new_epoch = _leader_epoch(c, topic)
        new_leader = wait_until(lambda: next((f for f in followers if f == _leader(c, topic)), None), 20,
                                message="a leader among the followers")
        follower = next(f for f in followers if f != new_leader)
        wait_until(lambda: _fetch(c, follower, topic, offset=0, epoch=new_epoch).error_code == ErrorCode.none, 20,
                   message="the follower on the new epoch")
        assert _fetch(c, follower, topic, offset=0, epoch=epoch).error_code == ErrorCode.fenced_leader_epoch
        assert _fetch(c, follower, topic, offset=0, epoch=new_epoch + 1).error_code == ErrorCode.unknown_leader_epoch
    finally:
        c.nodes[leader].start()


@pytest.fixture
def racks_without_selector(tmp_path) -> Iterator[Cluster]:  # noqa: ANN001
    yield from _running(_cluster(tmp_path, selector=False))


def test_without_a_selector_the_leader_serves_every_consumer(racks_without_selector: Cluster) -> None:
    c = racks_without_selector
    topic = unique("kip392-off")
    leader, followers = _create(c, topic)
    _produce(c, topic, 0, 10)
    pd = _fetch(c, leader, topic, offset=0, rack=RACKS[followers[0]])
    assert pd.preferred_read_replica == -1 and _records(pd)
    cons = _consumer(c, topic, RACKS[followers[0]])
    try:
        assert _read(cons, 10) == _expected(10)
    finally:
        cons.close()
    served = _bytes_out(c, topic)
    assert served[leader] >= 10 * 200 and served[followers[0]] == 0, served
