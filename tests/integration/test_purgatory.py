"""The fetch and produce purgatory on real brokers: parked requests answer at the change, not at
their deadline.

- A consumer Fetch parked at the log end (max_wait 12 s) answers with the record produced after it,
  long before max_wait; one that needs more bytes than the first record stays parked (registered
  again) and answers when the second arrives, with both; one that nothing wakes answers empty at
  max_wait.
- Followers' Fetches parked at the leader wake on the append: with `replica.fetch.wait.max.ms` at
  25 s (Kafka caps it at replica.lag.time.max.ms), acks=all produces to an RF=3 partition are
  acknowledged within their 10 s request timeout, which they could not be if the leader answered
  the parked follower fetches only at their deadline.
"""

from __future__ import annotations

import datetime
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError
from kio.schema.fetch.v12 import request as fr

from kavka.protocol.records import iter_records
from tests.broker_harness import BrokerProcess, Cluster
from tests.integration.helpers import ck_admin, ck_producer, ck_read_to_end, unique
from tests.raw_client import raw_call

MAX_WAIT_S = 12  # under raw_call's 15 s socket timeout


def _create(bootstrap: str, topic: str, rf: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = ck_producer(bootstrap, {"acks": "all"})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def _fetch_in_thread(broker: BrokerProcess, topic: str, offset: int, *, min_bytes: int, max_wait_s: float) -> tuple[threading.Thread, dict]:
    req = fr.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(seconds=max_wait_s),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(fr.FetchTopic(topic=topic, partitions=(
            fr.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    out: dict = {}

    def run() -> None:
        t0 = time.monotonic()
        out["resp"] = raw_call(broker, 1, 12, req)
        out["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _records(out: dict) -> list[tuple[int, bytes]]:
    pd = out["resp"].responses[0].partitions[0]
    assert pd.error_code == 0
    return [(r.offset, r.value) for r in iter_records(pd.records or b"")]


def test_a_parked_consumer_fetch_answers_at_the_append(broker: BrokerProcess) -> None:
    topic = unique("park")
    _create(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, [b"before"])

    # Woken by the first record after it.
    t, out = _fetch_in_thread(broker, topic, 1, min_bytes=1, max_wait_s=MAX_WAIT_S)
    _produce(broker.bootstrap, topic, [b"after"])
    t.join(MAX_WAIT_S + 5)
    assert out["elapsed"] < MAX_WAIT_S - 4, out["elapsed"]
    assert _records(out) == [(1, b"after")]

    # Needs more than one record's bytes: the first wakes it, it registers again, the second completes it.
    big = [b"a" * 1000, b"b" * 1000]
    t, out = _fetch_in_thread(broker, topic, 2, min_bytes=1500, max_wait_s=MAX_WAIT_S)
    _produce(broker.bootstrap, topic, big[:1])
    _produce(broker.bootstrap, topic, big[1:])
    t.join(MAX_WAIT_S + 5)
    assert out["elapsed"] < MAX_WAIT_S - 4, out["elapsed"]
    assert _records(out) == [(2, big[0]), (3, big[1])]

    # Nothing wakes it: answered empty, without error, at max_wait.
    t, out = _fetch_in_thread(broker, topic, 4, min_bytes=1, max_wait_s=1.0)
    t.join(10)
    assert out["elapsed"] >= 0.9 and _records(out) == []


def test_parked_follower_fetches_wake_on_the_append(tmp_path: Path) -> None:
    c = Cluster(tmp_path, 3, overrides={"replica.fetch.wait.max.ms": "25000", "replica.socket.timeout.ms": "60000"}).start(timeout=90)
    try:
        topic = unique("fpark")
        _create(c.bootstrap, topic, rf=3)
        errors: list[KafkaError | None] = []
        p = ck_producer(c.bootstrap, {"acks": "all", "request.timeout.ms": 10000, "message.timeout.ms": 10000,
                                      "retries": 0})
        values = [f"v{i}".encode() for i in range(10)]
        for v in values:  # one at a time: each needs both followers' next fetches
            p.produce(topic, v, partition=0, on_delivery=lambda e, _m: errors.append(e))
            assert p.flush(15) == 0
        assert errors == [None] * len(values)
        assert [r.value for r in ck_read_to_end(c.bootstrap, topic, [0], timeout=30)] == values
    finally:
        c.stop()
