"""Kafka's TransactionsTest scenarios on three real brokers (RF=3, min ISR 2) with the three
transactional clients users run from Python: kafka-python, aiokafka and confluent-kafka
(librdkafka). Each client commits and aborts; read_committed and read_uncommitted consumers see
what Kafka's would; undecided data is invisible to read_committed fetches, to ListOffsets
"latest" and by timestamp; a second producer with the same transactional.id fences the first
on commit and on send; many transactions' markers go to one leader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.broker_harness import Cluster
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_read_to_end, unique

pytestmark = pytest.mark.timeout(180)

PARTS = (0, 1, 2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("txn3"), 3, overrides={
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    }).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def topic(cluster: Cluster) -> str:
    name = unique("txc")
    ck_create_topic(ck_admin(cluster.bootstrap), name, partitions=len(PARTS), replication_factor=3)
    return name


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    recs = ck_read_to_end(bootstrap, topic, PARTS, conf={"isolation.level": isolation})
    return sorted(r.value for r in recs if r.value is not None)


def _wait_values(bootstrap: str, topic: str, isolation: str, want: list[bytes], timeout: float = 20.0) -> list[bytes]:
    """Markers of an abort done by the coordinator (fencing) land shortly after the call returns."""
    deadline = time.monotonic() + timeout
    while True:
        got = _values(bootstrap, topic, isolation)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _end_offsets(bootstrap: str, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    admin = ck_admin(bootstrap)
    futs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in PARTS},
                              isolation_level=isolation, request_timeout=20)
    return {tp.partition: f.result(20).offset for tp, f in futs.items()}


def _offsets_for_time(bootstrap: str, topic: str, ts: int, isolation: IsolationLevel) -> dict[int, int]:
    admin = ck_admin(bootstrap)
    futs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.for_timestamp(ts) for p in PARTS},
                              isolation_level=isolation, request_timeout=20)
    return {tp.partition: f.result(20).offset for tp, f in futs.items()}


# ---- kafka-python ---------------------------------------------------------------------------


def _kp_producer(bootstrap: str, txn_id: str):  # noqa: ANN202
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=txn_id,
                         transaction_timeout_ms=60000, request_timeout_ms=30000, max_block_ms=30000)


def test_kafka_python_commit_and_abort(cluster: Cluster, topic: str) -> None:
    p = _kp_producer(cluster.bootstrap, unique("kp"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, value=b"c%d" % i, partition=i % 3)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, value=b"a%d" % i, partition=i % 3)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, value=b"z", partition=1)
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    committed = sorted([b"c%d" % i for i in range(6)] + [b"z"])
    assert _values(cluster.bootstrap, topic, "read_committed") == committed
    assert _values(cluster.bootstrap, topic, "read_uncommitted") == sorted(committed + [b"a%d" % i for i in range(6)])


def test_kafka_python_fenced_on_send_and_on_commit(cluster: Cluster, topic: str) -> None:
    """Kafka's testFencingOnSend / testFencingOnCommit: the zombie's send to a partition already
    in its transaction is refused by the leader (stale epoch), or at the latest its commit is."""
    from kafka.errors import KafkaError as KPError

    txn_id = unique("kpf")
    first = _kp_producer(cluster.bootstrap, txn_id)
    second = _kp_producer(cluster.bootstrap, txn_id)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic, value=b"zombie", partition=0).get(timeout=30)

        second.init_transactions()  # bumps the epoch: the first's transaction is aborted
        # Fenced on send: the partition leader refuses the old epoch.
        with pytest.raises(KPError):
            first.send(topic, value=b"zombie2", partition=0).get(timeout=30)
            first.commit_transaction()
        second.begin_transaction()
        second.send(topic, value=b"second", partition=2)
        second.commit_transaction()
    finally:
        second.close(timeout=10)
        first.close(timeout=5)
    assert _wait_values(cluster.bootstrap, topic, "read_committed", [b"second"]) == [b"second"]
    assert b"zombie2" not in _values(cluster.bootstrap, topic, "read_uncommitted")


# ---- aiokafka -------------------------------------------------------------------------------


def test_aiokafka_transactions_and_read_committed_consumer(cluster: Cluster, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=unique("aio"),
                             enable_idempotence=True, request_timeout_ms=30000)
        await p.start()
        try:
            async with p.transaction():
                for i in range(6):
                    await p.send_and_wait(topic, b"c%d" % i, partition=i % 3)
            await p.begin_transaction()
            for i in range(6):
                await p.send_and_wait(topic, b"a%d" % i, partition=i % 3)
            await p.abort_transaction()
        finally:
            await p.stop()

        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            tps = [ATP(topic, q) for q in PARTS]
            c.assign(tps)
            ends = await c.end_offsets(tps)  # read_committed: the last stable offsets
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                positions = [await c.position(tp) for tp in tps]
                if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                    break
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in recs)
            return sorted(got)
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"c%d" % i for i in range(6)]
    assert len(_values(cluster.bootstrap, topic, "read_uncommitted")) == 12


# ---- confluent-kafka ------------------------------------------------------------------------


def _ck_producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "transaction.timeout.ms": 60000, "linger.ms": 5, **CK_COMMON})


def test_undecided_data_is_invisible_to_list_offsets(cluster: Cluster, topic: str) -> None:
    """Kafka's testReadCommittedConsumerShouldNotSeeUndecidedData, with ListOffsets: while a
    transaction is open, read_committed "latest" stops at its first offset (the LSO) and a
    timestamp inside it finds nothing committed; once committed both move past it."""
    p = _ck_producer(cluster.bootstrap, unique("ck"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"c0", partition=0)
    p.commit_transaction(30)
    # Once c0's marker is on the log (the LSO passed it), every later record has a later time.
    deadline = time.monotonic() + 20
    while _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_COMMITTED)[0] != 2:
        assert time.monotonic() < deadline, "c0's commit marker never written"
        time.sleep(0.05)
    before = int(time.time() * 1000) + 1
    while int(time.time() * 1000) < before:
        time.sleep(0.001)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"u%d" % i, partition=0)
    assert p.flush(30) == 0

    assert _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_COMMITTED)[0] == 2  # c0 + its marker
    assert _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_UNCOMMITTED)[0] == 5
    assert _offsets_for_time(cluster.bootstrap, topic, before, IsolationLevel.READ_COMMITTED)[0] == -1
    assert _offsets_for_time(cluster.bootstrap, topic, before, IsolationLevel.READ_UNCOMMITTED)[0] == 2
    assert _values(cluster.bootstrap, topic, "read_committed") == [b"c0"]

    p.commit_transaction(30)
    assert _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_COMMITTED)[0] == 6
    assert _offsets_for_time(cluster.bootstrap, topic, before, IsolationLevel.READ_COMMITTED)[0] == 2
    assert _values(cluster.bootstrap, topic, "read_committed") == [b"c0", b"u0", b"u1", b"u2"]


def test_fenced_on_add_partitions_with_confluent(cluster: Cluster, topic: str) -> None:
    """Kafka's testFencingOnAddPartitions: after a second instance initialises, the first's
    produce to a partition new to its transaction needs AddPartitionsToTxn, which the
    coordinator refuses (stale epoch); none of the first's records become visible.
    (Fencing on send, to a partition already in the transaction, is the kafka-python test.)"""
    txn_id = unique("ckf")
    first = _ck_producer(cluster.bootstrap, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, value=b"zombie", partition=0)
    assert first.flush(30) == 0

    second = _ck_producer(cluster.bootstrap, txn_id)
    second.init_transactions(60)

    with pytest.raises(KafkaException):  # fatal: at the produce, the flush or the commit
        first.produce(topic, value=b"zombie2", partition=1)
        first.flush(30)
        first.commit_transaction(30)

    second.begin_transaction()
    second.produce(topic, value=b"second", partition=2)
    second.commit_transaction(30)
    assert _wait_values(cluster.bootstrap, topic, "read_committed", [b"second"]) == [b"second"]
    assert b"zombie2" not in _values(cluster.bootstrap, topic, "read_uncommitted")


def test_many_transactions_markers_to_one_leader(cluster: Cluster, topic: str) -> None:
    """Kafka's testMultipleMarkersOneLeader: several producers' transactions on the same
    partitions, committed and aborted alternately, all complete; read_committed sees exactly
    the committed ones."""
    producers = [_ck_producer(cluster.bootstrap, unique(f"ckm{i}")) for i in range(4)]
    for p in producers:
        p.init_transactions(30)
    want: list[bytes] = []
    for rnd in range(3):
        for i, p in enumerate(producers):
            p.begin_transaction()
            for q in PARTS:
                p.produce(topic, value=b"r%d-p%d-q%d" % (rnd, i, q), partition=q)
        for i, p in enumerate(producers):
            if (rnd + i) % 2 == 0:
                p.commit_transaction(30)
                want.extend(b"r%d-p%d-q%d" % (rnd, i, q) for q in PARTS)
            else:
                p.flush(30)
                p.abort_transaction(30)
    assert _values(cluster.bootstrap, topic, "read_committed") == sorted(want)
    assert len(_values(cluster.bootstrap, topic, "read_uncommitted")) == 3 * 4 * len(PARTS)
    # Every partition's LSO caught up with its end: no transaction left open.
    assert _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_COMMITTED) == \
        _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_UNCOMMITTED)


def test_init_transactions_times_out_with_the_cluster_down(tmp_path) -> None:  # noqa: ANN001
    """Kafka's testInitTransactionsTimeout: with no broker reachable, init_transactions fails
    within its timeout instead of hanging."""
    from tests.broker_harness import free_port

    p = _ck_producer(f"127.0.0.1:{free_port()}", unique("down"))
    t0 = time.monotonic()
    with pytest.raises(KafkaException):
        p.init_transactions(3)
    assert time.monotonic() - t0 < 30


def test_fenced_on_transaction_expiration(cluster: Cluster, topic: str) -> None:
    """Kafka's testFencingOnTransactionExpiration: a transaction left open past its
    transaction.timeout.ms is aborted by the coordinator, which bumps the producer's epoch; the
    producer's late commit fails and its records never become visible."""
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": unique("exp"),
                  "transaction.timeout.ms": 2000, "linger.ms": 5, **CK_COMMON, "socket.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"expired", partition=0)
    assert p.flush(30) == 0
    # The coordinator's abort marker moves the LSO past the record: wait for that, not for time.
    deadline = time.monotonic() + 30
    while _end_offsets(cluster.bootstrap, topic, IsolationLevel.READ_COMMITTED)[0] != 2:
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.1)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert _values(cluster.bootstrap, topic, "read_committed") == []
    assert _values(cluster.bootstrap, topic, "read_uncommitted") == [b"expired"]


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_commit_and_abort_time_out_with_the_broker_down(broker_factory, topic_name: str, ending: str) -> None:  # noqa: ANN001
    """Kafka's testCommitTransactionTimeout / testAbortTransactionTimeout: with the only broker
    killed, commit_transaction and abort_transaction give up within their timeout with a
    retriable error instead of hanging, and nothing was committed."""
    b = broker_factory(overrides={"auto.create.topics.enable": "true"}).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name)
    p = _ck_producer(b.bootstrap, unique("down"))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"x", partition=0)
    assert p.flush(30) == 0
    b.kill()
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as info:
        (p.commit_transaction if ending == "commit" else p.abort_transaction)(3)
    assert time.monotonic() - t0 < 20
    err = info.value.args[0]
    assert err.retriable() or err.code() == KafkaError._TIMED_OUT, err
