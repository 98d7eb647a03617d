"""Crash safety of a real kavka broker process.

1. kill -9 during a sustained acks=all produce: every record the broker
   acknowledged (delivery report with an offset) must be readable at that
   offset after a restart, offsets must be contiguous from 0, and the
   consumer (with CRC checks on) must never see a corrupt batch.
2. A damaged tail (bytes flipped in, or a torn write at the end of, the last
   segment) after an unclean stop: the broker starts, truncates to the last
   valid batch, logs what it dropped, serves everything before the damage,
   and appends after it at the right offset.
"""

from __future__ import annotations

import threading
import time

from tests.integration.helpers import (
    batch_spans,
    ck_admin,
    ck_create_topic,
    ck_produce_samples,
    ck_producer,
    ck_read_to_end,
    partition_dir,
    recent_base_ts,
    sample_records,
)
from tests.wait import wait_until


class AckedProducer:
    """A confluent-kafka producer in a thread, sending sequence-numbered
    values with acks=all and recording (offset -> value) for every ack."""

    RATE = 1000  # records/s: 20,000 in all last 20 s, room for two kill rounds

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = ck_producer(
            bootstrap,
            {
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 20,
                "message.timeout.ms": 20000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
            },
        )
        self.acked: dict[int, bytes] = {}
        self.twice: list[int] = []
        self.failed = 0
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.lock = threading.Lock()

    def _on_delivery(self, err, msg) -> None:  # noqa: ANN001
        with self.lock:
            if err is None:
                if msg.offset() in self.acked:  # checked by the test, not here (librdkafka thread)
                    self.twice.append(msg.offset())
                self.acked[msg.offset()] = msg.value()
            else:
                self.failed += 1

    def _run(self) -> None:
        # Sustained but bounded: at most 200 records awaiting their report,
        # at most 20,000 in all, so a kill always lands mid-stream.
        # Paced at RATE records/s: unpaced, librdkafka sends the whole 20,000
        # within a second and later rounds of the test find nothing left to ack.
        next_at = time.monotonic()
        while not self.stop.is_set() and self.sent < 20_000:
            now = time.monotonic()
            if now < next_at:
                self.producer.poll(min(next_at - now, 0.005))
                continue
            with self.lock:
                pending = self.sent - len(self.acked) - self.failed - len(self.twice)
            if pending >= 200:
                self.producer.poll(0.005)
                continue
            try:
                self.producer.produce(
                    self.topic,
                    value=b"seq-%08d" % self.sent,
                    partition=0,
                    on_delivery=self._on_delivery,
                )
                self.sent += 1
                next_at += 1.0 / self.RATE
            except BufferError:
                self.producer.poll(0.01)
            self.producer.poll(0)

    def n_acked(self) -> int:
        with self.lock:
            return len(self.acked)


def test_kill_9_during_acks_all_produce_loses_no_acknowledged_record(broker_factory, topic_name):
    b = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, partitions=1)
    p = AckedProducer(b.bootstrap, topic_name)
    p.thread.start()
    try:
        for round_ in range(2):
            target = p.n_acked() + 300
            wait_until(
                lambda t=target: p.n_acked() >= t,
                timeout=30,
                message=f"{target} acks (round {round_})",
            )
            b.kill()
            acked_at_kill = p.n_acked()
            b.start()
            # The producer reconnects and carries on: acks must resume.
            wait_until(
                lambda a=acked_at_kill: p.n_acked() >= a + 100,
                timeout=30,
                message="acks after restart",
            )
    finally:
        p.stop.set()
        p.thread.join(10)
    assert p.producer.flush(30) == 0
    assert not p.thread.is_alive()
    assert p.twice == [], f"offsets acknowledged twice: {p.twice[:10]}"

    got = ck_read_to_end(b.bootstrap, topic_name, timeout=60)
    offsets = [r.offset for r in got]
    assert offsets == list(range(len(got))), "offsets are not contiguous from 0"
    by_offset = {r.offset: r.value for r in got}
    lost = {o: v for o, v in p.acked.items() if by_offset.get(o) != v}
    assert not lost, (
        f"{len(lost)} acknowledged records missing or different after kill -9, e.g. "
        f"{[(o, v, by_offset.get(o)) for o, v in sorted(lost.items())[:5]]}"
    )
    # Nothing that was never produced (torn or garbage records).
    assert all(r.value is not None and r.value.startswith(b"seq-") for r in got)
    assert len(p.acked) >= 800


def _damaged_broker(broker_factory, topic_name: str):  # noqa: ANN001, ANN202
    """A broker holding 6 batches of 10 records, killed with -9 (so the next
    start recovers the log), with its segment file and batch layout."""
    b = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, partitions=1)
    sent = sample_records(60, base_ts=recent_base_ts())
    # A linger far longer than queueing 10 records takes even on a loaded machine;
    # flush() sends at once, so each group of 10 is exactly one batch.
    producer = ck_producer(b.bootstrap, {"acks": "all", "linger.ms": 10_000, "batch.num.messages": 10})
    producer.list_topics(topic_name, timeout=10)  # the leader known before the first record is queued
    for i in range(0, 60, 10):  # queued within the linger, then flushed: one batch each, usually
        ck_produce_samples(producer, topic_name, sent[i : i + 10])
    b.kill()
    segment = partition_dir(b.log_dirs[0], topic_name) / "00000000000000000000.log"
    spans = batch_spans(segment)
    # librdkafka may still send a group's first record on its own (seen under load); the tests
    # below only need contiguous batches ending at offset 59, and take what they keep from them.
    assert spans[0][2] == 0 and spans[-1][3] == 59 and len(spans) >= 6, spans
    assert all(a[3] + 1 == b_[2] for a, b_ in zip(spans, spans[1:], strict=False)), spans
    return b, sent, segment, spans


def _check_recovered(b, topic_name: str, sent, kept: int) -> None:  # noqa: ANN001
    b.start()
    log = b.log_text()
    assert "recovery of" in log and "dropping" in log, (
        f"no truncation message in the broker log:\n{log}"
    )
    got = ck_read_to_end(b.bootstrap, topic_name)
    assert [r.offset for r in got] == list(range(kept))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (s.key, s.value, s.headers, s.timestamp) for s in sent[:kept]
    ]
    # Appends continue right after the last valid batch.
    more = sample_records(5, base_ts=recent_base_ts())
    assert ck_produce_samples(ck_producer(b.bootstrap), topic_name, more) == [
        (0, kept + i) for i in range(5)
    ]
    got = ck_read_to_end(b.bootstrap, topic_name, start=kept)
    assert [(r.offset, r.value) for r in got] == [(kept + i, s.value) for i, s in enumerate(more)]


def test_flipped_bytes_in_last_batch_are_truncated(broker_factory, topic_name):
    b, sent, segment, spans = _damaged_broker(broker_factory, topic_name)
    pos, size, base, _last = spans[-1]
    data = bytearray(segment.read_bytes())
    for k in range(pos + 70, pos + 80):  # inside the records: the CRC-32C no longer matches
        data[k] ^= 0xFF
    segment.write_bytes(bytes(data))
    _check_recovered(b, topic_name, sent, kept=base)
    assert "CRC" in b.log_text() or "crc" in b.log_text().lower()


def test_torn_write_at_segment_end_is_truncated(broker_factory, topic_name):
    b, sent, segment, spans = _damaged_broker(broker_factory, topic_name)
    pos, size, base, _last = spans[-1]
    with open(segment, "r+b") as f:
        f.truncate(pos + size // 2)  # half of the last batch reached the disk
    _check_recovered(b, topic_name, sent, kept=base)


def test_garbage_appended_after_last_batch_is_truncated(broker_factory, topic_name):
    b, sent, segment, _spans = _damaged_broker(broker_factory, topic_name)
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x3c\x00\x00\x01\x00" + b"\xab" * 40)
    _check_recovered(b, topic_name, sent, kept=60)


def test_clean_restart_keeps_everything(broker_factory, topic_name):
    b = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, partitions=1)
    sent = sample_records(80, base_ts=recent_base_ts())
    ck_produce_samples(
        ck_producer(b.bootstrap, {"batch.num.messages": 9, "linger.ms": 0}), topic_name, sent
    )
    assert b.stop() == 0
    b.start()  # within the harness's start deadline; how fast is bench's business
    got = ck_read_to_end(b.bootstrap, topic_name)
    assert [r.offset for r in got] == list(range(80))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (s.key, s.value, s.headers, s.timestamp) for s in sent
    ]
