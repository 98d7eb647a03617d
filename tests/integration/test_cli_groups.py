"""`kavka groups list|describe|delete|reset-offsets` as a user runs them, against a real broker.

A confluent-kafka consumer group commits known offsets; the CLI's JSON output
is checked against them (committed offset, log end, lag, owner), then the
group is reset (dry run changes nothing, --execute does) and deleted.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker_harness import BrokerProcess
from tests.integration.helpers import ck_admin, ck_create_topic
from tests.integration.test_cli_topics import kavka, kavka_json
from tests.wait import wait_until

PARTITIONS = 3
RECORDS = 10  # per partition
# Recent timestamps (old ones would fall to retention), whole seconds for --to-datetime.
BASE_TS = (int(time.time()) - 3600) * 1000


def _fill(b: BrokerProcess, topic: str) -> None:
    ck_create_topic(ck_admin(b.bootstrap), topic, partitions=PARTITIONS)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for part in range(PARTITIONS):
        for i in range(RECORDS):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part, timestamp=BASE_TS + i * 1000)
    assert p.flush(30) == 0


def test_groups_cli(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    b: BrokerProcess = broker_factory(
        overrides={"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}
    ).start()
    t, group = topic_name, f"cli-{topic_name}"
    _fill(b, t)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 1500, "heartbeat.interval.ms": 200})
    c.subscribe([t])
    try:
        wait_until(lambda: (c.poll(0.1), len(c.assignment()) == PARTITIONS)[1], 20,
                   message="the consumer owns every partition")
        commits = [TopicPartition(t, 0, 4), TopicPartition(t, 1, 10), TopicPartition(t, 2, 0)]
        c.commit(offsets=commits, asynchronous=False)

        listed = kavka_json(b, "groups", "list")
        assert {"group": group, "state": "Stable", "protocol_type": "consumer"} in listed
        [d] = kavka_json(b, "groups", "describe", "--group", group)
        assert d["state"] == "Stable" and len(d["members"]) == 1
        rows = {r["partition"]: r for r in d["offsets"]}
        assert {p: (r["current_offset"], r["log_end_offset"], r["lag"]) for p, r in rows.items()} == {
            0: (4, 10, 6), 1: (10, 10, 0), 2: (0, 10, 10)
        }
        assert {r["consumer_id"] for r in rows.values()} == {d["members"][0]["member_id"]}
        refused = kavka(b, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute", check=False)
        assert refused.returncode == 1 and "inactive" in refused.stderr
        table = kavka(b, "groups", "describe", "--group", group).stdout
        assert f"Group {group} (Stable, range)" in table
    finally:
        c.close()  # LeaveGroup: the group goes Empty

    wait_until(lambda: kavka_json(b, "groups", "describe", "--group", group)[0]["state"] == "Empty", 20,
               message="the group is empty after close")
    dry = kavka_json(b, "groups", "reset-offsets", "--group", group, "--topic", f"{t}:0,1", "--to-offset", "2")
    assert not dry["executed"]
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in dry["offsets"]] == [(0, 4, 2), (1, 10, 2)]
    still = {r["partition"]: r["current_offset"] for r in kavka_json(b, "groups", "describe", "--group", group)[0]["offsets"]}
    assert still == {0: 4, 1: 10, 2: 0}

    at5 = datetime.fromtimestamp((BASE_TS + 5000) / 1000, UTC).replace(tzinfo=None).isoformat()
    done = kavka_json(b, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-datetime", at5, "--execute")
    assert done["executed"] and [r["new_offset"] for r in done["offsets"]] == [5, 5, 5]
    latest = kavka_json(b, "groups", "reset-offsets", "--group", group, "--topic", t, "--to-latest", "--execute")
    assert [r["new_offset"] for r in latest["offsets"]] == [10, 10, 10]
    now = {r["partition"]: r["current_offset"] for r in kavka_json(b, "groups", "describe", "--group", group)[0]["offsets"]}
    assert now == {0: 10, 1: 10, 2: 10}

    deleted = kavka_json(b, "groups", "delete", "--group", group)
    assert deleted == [{"group": group, "deleted": True, "error": None}]
    assert group not in {g["group"] for g in kavka_json(b, "groups", "list")}
    again = kavka(b, "groups", "delete", "--group", group, "--json", check=False)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in again.stdout + again.stderr
