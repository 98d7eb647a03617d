"""Log compaction in a running broker, read back with confluent-kafka.

A cleanup.policy=compact topic with small segments gets keyed overwrites and
tombstones (some batches gzip-compressed). The expected content is computed
in the test from the producer's delivery reports: below the active segment,
exactly the last record per key at its original offset; the active segment
untouched. It must hold once the cleaner has run, and again after a restart.
"""

from __future__ import annotations

import random

from confluent_kafka import Producer

from tests.broker_harness import BrokerProcess
from tests.integration.helpers import (
    CK_COMMON,
    ck_admin,
    ck_create_topic,
    ck_read_to_end,
    partition_dir,
)
from tests.wait import wait_until


def _active_base(b: BrokerProcess, topic: str) -> int:
    logs = sorted(partition_dir(b.log_dirs[0], topic).glob("*.log"))
    return int(logs[-1].name[: -len(".log")])


def _expected(written: list[tuple[int, bytes, bytes | None]], active_base: int) -> list[tuple[int, bytes, bytes | None]]:
    last = {k: o for o, k, _ in written if o < active_base}
    return [(o, k, v) for o, k, v in written if o >= active_base or last[k] == o]


def test_compacted_topic_keeps_last_value_per_key(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    b: BrokerProcess = broker_factory(overrides={"log.cleaner.backoff.ms": "200"}).start()
    ck_create_topic(
        ck_admin(b.bootstrap),
        topic_name,
        config={"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"},
    )
    rng = random.Random(11)
    written: list[tuple[int, bytes, bytes | None]] = []
    for round_, codec in enumerate(("none", "gzip", "none", "lz4")):
        p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 5, "batch.size": 1500, **CK_COMMON})

        def on_delivery(err, msg) -> None:  # noqa: ANN001
            assert err is None, err
            written.append((msg.offset(), msg.key(), msg.value()))

        for i in range(150):
            key = f"k{rng.randint(0, 19)}".encode()
            value = None if rng.random() < 0.1 else f"r{round_}-{i}".encode().ljust(30, b".")
            p.produce(topic_name, key=key, value=value, on_delivery=on_delivery)
        assert p.flush(30) == 0
    written.sort()
    assert [o for o, _, _ in written] == list(range(600))

    def compacted() -> list[tuple[int, bytes, bytes | None]] | None:
        got = [(r.offset, r.key, r.value) for r in ck_read_to_end(b.bootstrap, topic_name)]
        return got if got == _expected(written, _active_base(b, topic_name)) else None

    got = wait_until(compacted, 30, interval=0.3, message="the compacted log")
    assert len(got) < len(written)  # something was really removed
    assert sum(1 for _, _, v in got if v is None) >= 1  # tombstones stay for delete.retention.ms
    assert b.stop() == 0
    b.start()
    after = [(r.offset, r.key, r.value) for r in ck_read_to_end(b.bootstrap, topic_name)]
    assert after == _expected(written, _active_base(b, topic_name))
