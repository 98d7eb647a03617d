"""`kavka topics` and `kavka configs` as a user runs them, against a real kavka broker process.

The broker is started by the shared harness (itself `kavka storage format` +
`kavka server start`); every command here is a `kavka ... --json` subprocess
whose JSON output is checked.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.broker_harness import KAVKA, BrokerProcess
from tests.wait import wait_until


def kavka(
    broker: BrokerProcess, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [*KAVKA, *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert res.returncode == 0, (
            f"kavka {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
        )
    return res


def kavka_json(broker: BrokerProcess, *args: str) -> Any:
    return json.loads(kavka(broker, *args, "--json").stdout)


def test_topic_lifecycle_through_the_cli(broker: BrokerProcess, topic_name: str) -> None:
    t = topic_name
    created = kavka_json(
        broker,
        "topics",
        "create",
        "--topic",
        t,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=86400000",
    )
    assert (
        created["topic"],
        created["partitions"],
        created["replication_factor"],
        created["created"],
    ) == (t, 3, 1, True)
    assert len(created["topic_id"]) == 22

    again = kavka(broker, "topics", "create", "--topic", t, check=False)
    assert (
        again.returncode == 1
        and "TOPIC_ALREADY_EXISTS" in again.stderr
        and "Traceback" not in again.stderr
    )
    assert (
        kavka_json(broker, "topics", "create", "--topic", t, "--if-not-exists")["created"] is False
    )

    listed = {x["name"]: x for x in kavka_json(broker, "topics", "list")}
    assert listed[t] == {
        "name": t,
        "topic_id": created["topic_id"],
        "partitions": 3,
        "internal": False,
    }

    (d,) = kavka_json(broker, "topics", "describe", "--topic", t)
    assert (d["topic"], d["topic_id"], d["partition_count"], d["replication_factor"]) == (
        t,
        created["topic_id"],
        3,
        1,
    )
    assert d["configs"].get("retention.ms") == "86400000"
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in d["partitions"]] == [
        (i, 1, [1], [1]) for i in range(3)
    ]

    altered = kavka_json(
        broker,
        "topics",
        "alter",
        "--topic",
        t,
        "--partitions",
        "5",
        "--config",
        "segment.ms=600000",
        "--delete-config",
        "retention.ms",
    )
    assert altered["partitions"] == 5
    (d,) = kavka_json(broker, "topics", "describe", "--topic", t)
    assert d["partition_count"] == 5 and len(d["partitions"]) == 5
    assert d["configs"].get("segment.ms") == "600000" and "retention.ms" not in d["configs"]

    shrink = kavka(broker, "topics", "alter", "--topic", t, "--partitions", "2", check=False)
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr

    bad = kavka(
        broker, "topics", "alter", "--topic", t, "--config", "retention.ms=forever", check=False
    )
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr

    assert kavka_json(broker, "topics", "delete", "--topic", t) == {"topic": t, "deleted": True}
    wait_until(
        lambda: t not in {x["name"] for x in kavka_json(broker, "topics", "list")},
        message=f"{t} gone from the list",
    )
    gone = kavka(broker, "topics", "describe", "--topic", t, check=False)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr
    assert kavka_json(broker, "topics", "delete", "--topic", t, "--if-exists")["deleted"] is False


def test_validate_only_creates_nothing(broker: BrokerProcess, topic_name: str) -> None:
    out = kavka_json(
        broker, "topics", "create", "--topic", topic_name, "--partitions", "2", "--validate-only"
    )
    assert out["created"] is False and out["validate_only"] is True
    assert topic_name not in {x["name"] for x in kavka_json(broker, "topics", "list")}


def test_configs_describe_and_alter_topic_and_broker(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    b = broker_factory().start()
    kavka(b, "topics", "create", "--topic", topic_name)
    kavka(
        b,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic_name,
        "--add-config",
        "cleanup.policy=[delete,compact],retention.bytes=1000",
    )
    dyn = {
        e["name"]: e
        for e in kavka_json(
            b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name
        )
    }
    assert {k: (v["value"], v["source"]) for k, v in dyn.items()} == {
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
        "retention.bytes": ("1000", "DYNAMIC_TOPIC_CONFIG"),
    }
    every = {
        e["name"]: e
        for e in kavka_json(
            b,
            "configs",
            "describe",
            "--entity-type",
            "topics",
            "--entity-name",
            topic_name,
            "--all",
        )
    }
    assert (
        every["segment.bytes"]["source"] == "DEFAULT_CONFIG"
        and every["segment.bytes"]["is_default"] is True
    )
    kavka(
        b,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic_name,
        "--delete-config",
        "retention.bytes",
    )
    dyn = kavka_json(
        b, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name
    )
    assert [e["name"] for e in dyn] == ["cleanup.policy"]

    kavka(
        b,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "log.retention.bytes=987654321",
    )
    brk = {
        e["name"]: e
        for e in kavka_json(
            b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1"
        )
    }
    assert (brk["log.retention.bytes"]["value"], brk["log.retention.bytes"]["source"]) == (
        "987654321",
        "DYNAMIC_BROKER_CONFIG",
    )
    # the topic inherits the dynamic broker default
    every = {
        e["name"]: e
        for e in kavka_json(
            b,
            "configs",
            "describe",
            "--entity-type",
            "topics",
            "--entity-name",
            topic_name,
            "--all",
        )
    }
    assert (every["retention.bytes"]["value"], every["retention.bytes"]["source"]) == (
        "987654321",
        "DYNAMIC_BROKER_CONFIG",
    )
    assert b.stop() == 0


def test_table_output_is_readable(broker: BrokerProcess, topic_name: str) -> None:
    kavka(broker, "topics", "create", "--topic", topic_name, "--partitions", "2")
    out = kavka(broker, "topics", "describe", "--topic", topic_name).stdout
    assert (
        f"Topic: {topic_name}" in out
        and "PartitionCount: 2" in out
        and "ReplicationFactor: 1" in out
    )
    assert "Leader" in out and "Isr" in out
    assert topic_name in kavka(broker, "topics", "list").stdout
