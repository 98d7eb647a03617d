"""The acknowledgement-timing workload of tests/faults (driven by netns_run.py), run in the client namespace.

`python ack_gaps.py create BOOTSTRAP TOPIC ASSIGNMENT` creates TOPIC with min.insync.replicas=2
and the replicas ASSIGNMENT gives (`1:5:2,1:2:3`: partition 0 on nodes 1, 5, 2, leader 1; ...) and
waits until every partition is led by its first replica with the whole ISR.

`python ack_gaps.py produce BOOTSTRAP TOPIC OUT GROUPS SECONDS`: GROUPS is `;`-separated groups of
comma-separated partitions, one idempotent acks=all confluent-kafka producer per group (the
settings of `kavka.testing.fault_workload`). Every producer writes one record to each partition of
its group every 20 ms; every acknowledgement is a JSON line `{"group": g, "p": partition, "t": time,
"v": value}` in OUT (errors as `"err"`), and a last line `{"done": time}` after the final flush.

`python ack_gaps.py read BOOTSTRAP TOPIC OUT`: every record of every partition below its high
watermark, one JSON line `{"p": partition, "v": value}` each, then `{"done": true}`.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create(bootstrap: str, topic: str, assignment: str) -> int:
    replicas = [[int(b) for b in p.split(":")] for p in assignment.split(",")]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas,
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = admin.list_topics(topic, timeout=5).topics[topic].partitions
        if len(parts) == len(replicas) and all(
                parts[i].leader == r[0] and sorted(parts[i].isrs) == sorted(r) for i, r in enumerate(replicas)):
            return 0
        time.sleep(0.2)
    print(f"partitions not ready: {parts}", file=sys.stderr)
    return 1


def produce(bootstrap: str, topic: str, out_path: str, groups_arg: str, seconds: str) -> int:
    groups = [[int(p) for p in g.split(",")] for g in groups_arg.split(";")]
    out = open(out_path, "w")  # noqa: SIM115 -- closed below
    producers = [Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "request.timeout.ms": 5000, "message.timeout.ms": 30000, "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 3000,
        "topic.metadata.refresh.interval.ms": 1000,
    }) for _ in groups]

    def report(group: int):
        def on_delivery(err, msg) -> None:
            line = {"group": group, "p": msg.partition(), "t": time.time(), "v": msg.value().decode()}
            if err is not None:
                line["err"] = str(err)
            out.write(json.dumps(line) + "\n")
        return on_delivery

    end = time.monotonic() + float(seconds)
    next_send = time.monotonic()
    n = 0
    while time.monotonic() < end:
        if time.monotonic() >= next_send:
            for g, (producer, parts) in enumerate(zip(producers, groups, strict=True)):
                for p in parts:
                    producer.produce(topic, f"v{n}".encode(), partition=p, on_delivery=report(g))
            n += 1
            next_send += 0.02
        for producer in producers:
            producer.poll(0.002)
    left = sum(producer.flush(30) for producer in producers)
    out.write(json.dumps({"done": time.time(), "undelivered": left}) + "\n")
    out.close()
    return 0


def read(bootstrap: str, topic: str, out_path: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ack-gaps-read", "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted"})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    left = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + 60
    with open(out_path, "w") as out:
        while left and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            p = msg.partition()
            if msg.offset() < ends[p]:
                out.write(json.dumps({"p": p, "v": msg.value().decode()}) + "\n")
            if msg.offset() >= ends[p] - 1:
                left.discard(p)
        out.write(json.dumps({"done": not left}) + "\n")
    consumer.close()
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit({"create": create, "produce": produce, "read": read}[sys.argv[1]](*sys.argv[2:]))
