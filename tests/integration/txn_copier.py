"""A transactional copier, as Kafka's TransactionalMessageCopier (its transactions_test system
test): read one input partition read_committed, write each record to the output topic, and
commit the consumed offsets in the same transaction (send_offsets_to_transaction). Run as its
own process so a test can kill -9 it; a restarted copier with the same transactional.id fences
the old one and resumes from the offsets committed by the last committed transaction.

    python -m tests.integration.txn_copier --bootstrap B --input-topic I --input-partition 0
        --output-topic O --transactional-id T --group-id G [--max-per-txn 200]

Prints one line per committed transaction ("COMMITTED <position>") and exits 0 once its
position reaches the input partition's end; exits 3 when fenced (a newer instance took over).

A transactional call still blocked 30 s after its own timeout prints "HUNG <call>" and exits 4
(the test restarts it, which fences nothing it has not already lost): librdkafka 2.16's
send_offsets_to_transaction can wait forever when the group coordinator it cached disappears
from the metadata (a broker fenced after a kill), confluentinc/librdkafka#5511 and #5456 (the
coordinator request's timeout is never checked). The test allows that one call to hang and no
other.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def _fatal_or_fenced(e: KafkaException) -> bool:
    err = e.args[0]
    return err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)


HANG_GRACE_S = 30.0


def guarded(name: str, timeout: float, call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args, timeout)`; if it has not returned HANG_GRACE_S after its own timeout, say so
    and exit 4 (a client hang, not an error the application could handle)."""

    def hung() -> None:
        print(f"HUNG {name}: still blocked {HANG_GRACE_S:.0f} s after its {timeout:.0f} s timeout", flush=True)
        os._exit(4)

    watchdog = threading.Timer(timeout + HANG_GRACE_S, hung)
    watchdog.daemon = True
    watchdog.start()
    try:
        return call(*args, timeout)
    finally:
        watchdog.cancel()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input-topic", required=True)
    ap.add_argument("--input-partition", type=int, required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--group-id", required=True)
    ap.add_argument("--max-per-txn", type=int, default=200)
    ap.add_argument("--deadline-s", type=float, default=300.0)
    a = ap.parse_args(argv)
    common = {"bootstrap.servers": a.bootstrap, "socket.timeout.ms": 10000, "metadata.max.age.ms": 5000,
              "topic.metadata.refresh.interval.ms": 1000}
    consumer = Consumer({**common, "group.id": a.group_id, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    producer = Producer({**common, "transactional.id": a.transactional_id, "transaction.timeout.ms": 60000,
                         "linger.ms": 5, "message.timeout.ms": 60000})
    stop_at = time.monotonic() + a.deadline_s
    tp = TopicPartition(a.input_topic, a.input_partition)
    try:
        guarded("init_transactions", 60, producer.init_transactions)
    except KafkaException as e:
        print(f"INIT FAILED {e}", flush=True)
        return 3 if _fatal_or_fenced(e) else 1

    def rewind() -> None:
        """Back to the last committed position (after an abort)."""
        committed = consumer.committed([tp], timeout=30)[0]
        consumer.assign([TopicPartition(tp.topic, tp.partition, committed.offset if committed.offset >= 0 else 0)])

    rewind()
    end = consumer.get_watermark_offsets(tp, timeout=30)[1]
    print(f"START end={end}", flush=True)
    while time.monotonic() < stop_at:
        pos = consumer.position([tp])[0].offset
        if pos >= end and pos >= 0:
            print(f"DONE {pos}", flush=True)
            return 0
        msgs = [m for m in consumer.consume(a.max_per_txn, timeout=1.0) if m.error() is None]
        if not msgs:
            continue
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(a.output_topic, key=m.key(), value=m.value())
            guarded("send_offsets_to_transaction", 60, producer.send_offsets_to_transaction,
                    consumer.position([tp]), consumer.consumer_group_metadata())
            guarded("commit_transaction", 60, producer.commit_transaction)
            print(f"COMMITTED {msgs[-1].offset() + 1}", flush=True)
        except KafkaException as e:
            if _fatal_or_fenced(e):
                print(f"FENCED {e}", flush=True)
                return 3
            print(f"ABORT {e}", flush=True)
            try:
                guarded("abort_transaction", 60, producer.abort_transaction)
            except KafkaException as e2:
                print(f"ABORT FAILED {e2}", flush=True)
                return 3 if _fatal_or_fenced(e2) else 1
            rewind()
    print("DEADLINE", flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
