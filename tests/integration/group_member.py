"""One consumer-group member as its own process, for the group integration tests.

    python -m tests.integration.group_member CLIENT BOOTSTRAP TOPIC GROUP ASSIGNOR [INSTANCE_ID]

CLIENT is confluent, kafka-python or aiokafka. The member subscribes, and for
each batch it prints the records it processed, then commits synchronously
(commit-after-process: at-least-once). It prints one line per event, flushed:

    A [p, ...]      its assignment, whenever it changes
    G [p, ...]      a rebalance gave it these partitions (confluent only: the on_assign callback)
    R [p, ...]      a rebalance took these (confluent only: on_revoke)
    P p offset      a record it processed
    C               a commit succeeded

SIGTERM closes the consumer cleanly (LeaveGroup); SIGKILL from the test is the
"member died" case, left to the broker's session timeout. Runs until killed or
for at most MAX_LIFETIME_S.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

SESSION_TIMEOUT_MS = int(os.environ.get("GROUP_MEMBER_SESSION_MS", "1500"))
INSTANCE_ID = sys.argv[6] if len(sys.argv) > 6 else None  # group.instance.id: a static member (KIP-345)
HEARTBEAT_MS = 200
MAX_LIFETIME_S = 120

_stop = False


def _on_term(*_: object) -> None:
    global _stop
    _stop = True


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class _Tracker:
    def __init__(self) -> None:
        self.last: list[int] | None = None

    def update(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.last:
            self.last = partitions
            _say("A " + json.dumps(partitions))


def run_confluent(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
        **({"group.instance.id": INSTANCE_ID} if INSTANCE_ID else {}),
    }
    if assignor.startswith("consumer-"):
        # KIP-848: the broker assigns (ASSIGNOR is consumer-uniform or consumer-range) and owns the
        # session timeout and heartbeat interval, which the client may not set.
        conf.update({"group.protocol": "consumer", "group.remote.assignor": assignor.removeprefix("consumer-")})
    else:
        conf.update(
            {
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": assignor,
            }
        )
    c = Consumer(conf)
    def on_assign(_c, partitions) -> None:  # noqa: ANN001
        _say("G " + json.dumps(sorted(tp.partition for tp in partitions)))

    def on_revoke(_c, partitions) -> None:  # noqa: ANN001
        _say("R " + json.dumps(sorted(tp.partition for tp in partitions)))

    # The callbacks only report; the binding applies the assignment itself.
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    tracker = _Tracker()
    deadline = time.monotonic() + MAX_LIFETIME_S
    uncommitted = False  # processed records whose commit has not succeeded yet
    while not _stop and time.monotonic() < deadline:
        msgs = c.consume(num_messages=50, timeout=0.1)
        tracker.update([tp.partition for tp in c.assignment()])
        good = [m for m in msgs if m.error() is None]
        for m in good:
            _say(f"P {m.partition()} {m.offset()}")
        if good or uncommitted:
            try:
                c.commit(asynchronous=False)
                _say("C")
                uncommitted = False
            except KafkaException as e:
                # A rebalance took the partitions (their records are processed again by the next
                # owner: at-least-once) or the commit failed while they stayed here: try again
                # next round, or a member already at the end of its partitions never commits
                # them (CI: KIP-848's range assignor, committed offsets short of the log end).
                uncommitted = e.args[0].code() != KafkaError._NO_OFFSET
    c.close()


def run_kafka_python(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import KafkaError

    strategies = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        partition_assignment_strategy=[strategies[assignor]],
        metadata_max_age_ms=1000,
    )
    tracker = _Tracker()
    deadline = time.monotonic() + MAX_LIFETIME_S
    while not _stop and time.monotonic() < deadline:
        batches = c.poll(timeout_ms=100, max_records=50)
        tracker.update([tp.partition for tp in c.assignment()])
        n = 0
        for tp, recs in batches.items():
            for r in recs:
                _say(f"P {tp.partition} {r.offset}")
                n += 1
        if n:
            try:
                c.commit()
                _say("C")
            except KafkaError:
                pass
    c.close()


def run_aiokafka(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from aiokafka.errors import KafkaError

    strategies = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }

    async def main() -> None:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            partition_assignment_strategy=(strategies[assignor],),
            metadata_max_age_ms=1000,
        )
        await c.start()
        tracker = _Tracker()
        deadline = time.monotonic() + MAX_LIFETIME_S
        try:
            while not _stop and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=100, max_records=50)
                tracker.update([tp.partition for tp in c.assignment()])
                n = 0
                for tp, recs in batches.items():
                    for r in recs:
                        _say(f"P {tp.partition} {r.offset}")
                        n += 1
                if n:
                    try:
                        await c.commit()
                        _say("C")
                    except KafkaError:
                        pass
        finally:
            await c.stop()

    asyncio.run(main())


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_term)
    client, bootstrap, topic, group, assignor = sys.argv[1:6]
    RUNNERS[client](bootstrap, topic, group, assignor)
    _say("EXIT")
