"""The fault harness's workload: real confluent-kafka clients, run as `python -m kavka.testing.fault_workload`.

It runs inside the harness's client namespace (`NetnsCluster.client_argv`), so each command is a
subprocess that writes its history as JSON lines, one event a line, flushed as it happens (a
killed run keeps what it had):

- `setup`: wait until every broker is registered, create the topic (RF, min.insync.replicas),
  wait until every partition has a leader.
- `produce`: an idempotent acks=all producer writes the unique values `v0, v1, ...` round-robin
  over the partitions at a steady rate for `--duration` seconds, then flushes. Each delivery
  report is a line: `{"ack": [partition, offset, value, t]}` or `{"fail": [partition, value, t,
  error]}` (a failed value may or may not have been written: an indeterminate op, never counted
  as lost). Every second it also writes the leaders it sees (`{"leaders": {...}, "t": t}`) for
  the nemesis. A fatal producer error is recorded and the producer made again.
- `consume`: a consumer assigned every partition from offset 0 records `{"read": [partition,
  offset, value, t]}` until `--duration` runs out.
- `read`: the final read: the high watermark of every partition (`{"hw": {...}}`), then every
  record below it (`{"read": ...}`), with a deadline.

Times are `time.time()` (one machine, one clock for every process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class _Out:
    def __init__(self, path: str) -> None:
        self.file: TextIO = open(path, "a")  # noqa: SIM115 -- closed by close(); lines flushed one by one

    def write(self, event: dict[str, Any]) -> None:
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def setup(args: argparse.Namespace) -> int:
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    deadline = time.monotonic() + args.timeout
    while len(admin.list_topics(timeout=5).brokers) < args.brokers:
        if time.monotonic() > deadline:
            print(f"only {len(admin.list_topics(timeout=5).brokers)} brokers registered", file=sys.stderr)
            return 1
        time.sleep(0.2)
    topic = NewTopic(args.topic, args.partitions, args.replication_factor,
                     config={"min.insync.replicas": str(args.min_insync_replicas)})
    admin.create_topics([topic])[args.topic].result(30)
    while True:
        parts = admin.list_topics(topic=args.topic, timeout=5).topics[args.topic].partitions
        if len(parts) == args.partitions and all(p.leader >= 0 and len(p.isrs) == args.replication_factor
                                                 for p in parts.values()):
            return 0
        if time.monotonic() > deadline:
            print(f"partitions not ready: {parts}", file=sys.stderr)
            return 1
        time.sleep(0.2)


def _producer(bootstrap: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "request.timeout.ms": 5000,
        "message.timeout.ms": 30000,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "socket.connection.setup.timeout.ms": 3000,
        "topic.metadata.refresh.interval.ms": 1000,
    })


def produce(args: argparse.Namespace) -> int:
    out = _Out(args.out)
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "socket.connection.setup.timeout.ms": 3000})

    def report(err: KafkaError | None, msg: Any) -> None:
        now = time.time()
        value = msg.value().decode()
        if err is None:
            out.write({"ack": [msg.partition(), msg.offset(), value, now]})
        else:
            out.write({"fail": [msg.partition(), value, now, str(err)]})

    producer = _producer(args.bootstrap)
    start = time.time()
    out.write({"start": start})
    end = start + args.duration
    n = 0
    next_send = time.monotonic()
    next_leaders = 0.0
    while time.time() < end:
        now_m = time.monotonic()
        if now_m >= next_send:
            value = f"v{n}"
            try:
                producer.produce(args.topic, value.encode(), partition=n % args.partitions, on_delivery=report)
                n += 1
            except BufferError:
                pass
            except KafkaException as e:
                out.write({"fatal": [time.time(), str(e)]})
                producer = _remake(producer, out, args.bootstrap)
            next_send = now_m + 1.0 / args.rate
        try:
            producer.poll(max(0.0, min(0.05, next_send - time.monotonic())))
        except KafkaException as e:
            out.write({"fatal": [time.time(), str(e)]})
            producer = _remake(producer, out, args.bootstrap)
        if now_m >= next_leaders:
            next_leaders = now_m + 1.0
            try:
                parts = admin.list_topics(topic=args.topic, timeout=0.5).topics[args.topic].partitions
                out.write({"leaders": {str(p): pm.leader for p, pm in parts.items()}, "t": time.time()})
            except KafkaException:
                pass
    out.write({"stop": time.time(), "sent": n})
    left = producer.flush(args.flush_timeout)
    out.write({"flushed": time.time(), "undelivered": left})
    out.close()
    return 0


def _remake(producer: Producer, out: _Out, bootstrap: str) -> Producer:
    """After a fatal error (e.g. a fenced idempotent producer) the instance is unusable; its queued
    values are reported failed by purge, and a new producer (a new producer id) goes on."""
    try:
        producer.purge()
        producer.flush(1)
    except KafkaException:
        pass
    out.write({"remade": time.time()})
    return _producer(bootstrap)


def _consumer(bootstrap: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "fault-workload-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "socket.connection.setup.timeout.ms": 3000,
        "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 200,
    })


def consume(args: argparse.Namespace) -> int:
    out = _Out(args.out)
    consumer = _consumer(args.bootstrap)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    end = time.time() + args.duration
    while time.time() < end:
        for msg in consumer.consume(500, 0.2):
            if msg.error() is None:
                out.write({"read": [msg.partition(), msg.offset(), msg.value().decode(), time.time()]})
    consumer.close()
    out.close()
    return 0


def read(args: argparse.Namespace) -> int:
    """Every record below each partition's high watermark; exit 1 at the deadline with what was read."""
    out = _Out(args.out)
    consumer = _consumer(args.bootstrap)
    deadline = time.monotonic() + args.timeout
    hws: dict[int, int] = {}
    while len(hws) < args.partitions:
        for p in range(args.partitions):
            if p not in hws:
                try:
                    hws[p] = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=2)[1]
                except KafkaException:
                    if time.monotonic() > deadline:
                        return 1
    out.write({"hw": {str(p): hw for p, hw in hws.items()}})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    position = dict.fromkeys(hws, 0)
    while any(position[p] < hws[p] for p in hws):
        if time.monotonic() > deadline:
            out.write({"incomplete": {str(p): position[p] for p in hws}})
            return 1
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is None:
                out.write({"read": [msg.partition(), msg.offset(), msg.value().decode(), time.time()]})
                position[msg.partition()] = msg.offset() + 1
    consumer.close()
    out.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kavka.testing.fault_workload")
    parser.add_argument("command", choices=["setup", "produce", "consume", "read"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=100.0, help="values produced per second")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--flush-timeout", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", default="/dev/stdout")
    args = parser.parse_args(argv)
    return {"setup": setup, "produce": produce, "consume": consume, "read": read}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
