"""producer.id.expiration.ms (KIP-854): an idle producer's state leaves the partition.

Two idempotent producers write to one partition: one with record timestamps
of now, one with timestamps half an hour ahead (so it cannot expire during the
test). With producer.id.expiration.ms=1000 checked every 100 ms, the broker
logs that it removed one producer id; the producer-state snapshot written at
the clean stop then holds the second producer only.
"""

from __future__ import annotations

import time

from kavka.storage.producer_state import read_snapshot, snapshot_offsets, snapshot_path
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, partition_dir
from tests.wait import wait_until


def _produce(bootstrap: str, topic: str, ts_ms: int) -> None:
    p = ck_producer(bootstrap, {"enable.idempotence": True, "acks": "all"})
    for i in range(3):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts_ms)
    assert p.flush(30) == 0


def test_an_idle_producer_id_expires(broker_factory, topic_name):
    b = broker_factory(overrides={
        "producer.id.expiration.ms": "1000",
        "producer.id.expiration.check.interval.ms": "100",
    }).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    now = int(time.time() * 1000)
    _produce(b.bootstrap, topic_name, now)
    _produce(b.bootstrap, topic_name, now + 30 * 60 * 1000)
    wait_until(lambda: "removed 1 expired producer ids" in b.log_text(), 20, message="the expiry pass")
    assert b.stop() == 0
    d = partition_dir(b.log_dirs[0], topic_name)
    state = read_snapshot(snapshot_path(d, snapshot_offsets(d)[-1]))
    assert len(state.producers) == 1, state.producers
    (entry,) = state.producers.values()
    assert entry.batches[-1].timestamp == now + 30 * 60 * 1000
