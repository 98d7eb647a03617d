"""A slow disk under one partition delays nothing else (issue 10 item 4).

Fault injection below the process boundary (storage.faults, test-only): the
control file line ``block-fsync <dir>`` makes every fsync of a file in that dir
wait until the line is removed, and ``<control>.fsync-blocked`` exists while one
waits. Partition ``slow`` (flush.ms=0: the flush scheduler fsyncs it on every
pass) gets a record; its fsync blocks. While it is blocked -- the marker still
there -- a produce to another topic is acknowledged and read back, and a
heartbeat-free request (metadata) is answered: ordering, not wall-clock
thresholds. With the fsync on the event loop (before this change) neither
could complete until the disk came back.
"""

from __future__ import annotations

from pathlib import Path

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


def _produce_one(bootstrap: str, topic: str, value: bytes, timeout: float) -> list[tuple[int, bytes]]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, **CK_COMMON})
    got: list[tuple[int, bytes]] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        assert err is None, err
        got.append((msg.offset(), msg.value()))

    p.produce(topic, value=value, on_delivery=on_delivery)
    p.flush(timeout)
    return got


def test_a_blocked_fsync_of_one_partition_does_not_hold_up_a_produce_to_another(broker_factory, tmp_path: Path) -> None:
    control = tmp_path / "faults"
    control.write_text("")
    b: BrokerProcess = broker_factory(
        overrides={"kavka.test.fault.injection.enable": "true", "log.flush.scheduler.interval.ms": "100"}
    ).start(env={"KAVKA_FAULT_INJECTION_FILE": str(control)})
    admin = ck_admin(b.bootstrap)
    ck_create_topic(admin, "slow", 1, config={"flush.ms": "0"})
    ck_create_topic(admin, "fast", 1)
    assert _produce_one(b.bootstrap, "fast", b"before", 30) == [(0, b"before")]

    marker = control.with_name(control.name + ".fsync-blocked")
    control.write_text(f"block-fsync {partition_dir(b.log_dirs[0], 'slow')}\n")
    assert _produce_one(b.bootstrap, "slow", b"stuck", 30) == [(0, b"stuck")]
    wait_until(marker.exists, 30, message="the flush of 'slow' to block in fsync")

    # The disk under 'slow' hangs. Another partition's produce and fetch go through meanwhile.
    assert _produce_one(b.bootstrap, "fast", b"during", 30) == [(1, b"during")]
    assert [r.value for r in ck_read_to_end(b.bootstrap, "fast", timeout=30)] == [b"before", b"during"]
    assert "fast" in admin.list_topics(timeout=10).topics
    assert marker.exists(), "the fsync finished early: the test proved nothing"

    control.write_text("")
    wait_until(lambda: not marker.exists(), 30, message="the blocked fsync to finish")
    assert [r.value for r in ck_read_to_end(b.bootstrap, "slow", timeout=30)] == [b"stuck"]
    assert b.alive()
    assert b.stop() == 0
