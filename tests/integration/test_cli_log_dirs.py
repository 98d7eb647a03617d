"""`kavka log-dirs describe|balance` and `kavka reassign-partitions` as a user runs them, against a real broker with two log dirs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.broker_harness import KAVKA, BrokerProcess
from tests.integration.helpers import ck_admin, ck_create_topic, ck_producer, ck_read_to_end
from tests.wait import wait_until


def kavka(broker: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="400")  # long temp paths stay on one table line
    res = subprocess.run([*KAVKA, *args, "--bootstrap-server", broker.bootstrap], capture_output=True, text=True, timeout=60, env=env)
    if check:
        assert res.returncode == 0, f"kavka {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
    return res


def kavka_json(broker: BrokerProcess, *args: str) -> Any:
    return json.loads(kavka(broker, *args, "--json").stdout)


def where(broker: BrokerProcess, topic: str) -> dict[str, tuple[str, bool]]:
    doc = kavka_json(broker, "log-dirs", "describe", "--topic-list", topic)
    return {p["partition"] + ("(future)" if p["isFuture"] else ""): (d["logDir"], p["isFuture"])
            for d in doc["brokers"][0]["logDirs"] for p in d["partitions"]}


def fill(broker: BrokerProcess, topic: str, sizes: dict[int, int]) -> int:
    p = ck_producer(broker.bootstrap, {"acks": "all"})
    n = 0
    for partition, count in sizes.items():
        for i in range(count):
            p.produce(topic, value=b"%d-" % i + b"x" * 1000, partition=partition)
            n += 1
            if i % 200 == 0:
                p.poll(0)
    assert p.flush(30) == 0
    return n


def test_describe_json_is_kafka_log_dirs_format(broker_factory, topic_name):
    b = broker_factory(log_dirs=2).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    fill(b, topic_name, {0: 10, 1: 20})
    doc = kavka_json(b, "log-dirs", "describe", "--broker-list", "1", "--topic-list", topic_name)
    assert doc["version"] == 1 and [x["broker"] for x in doc["brokers"]] == [1]
    dirs = doc["brokers"][0]["logDirs"]
    assert [d["logDir"] for d in dirs] == [str(d) for d in b.log_dirs]
    assert all(d["error"] is None and d["totalBytes"] > 0 and 0 <= d["usableBytes"] <= d["totalBytes"] for d in dirs)
    parts = {p["partition"]: p for d in dirs for p in d["partitions"]}
    assert set(parts) == {f"{topic_name}-0", f"{topic_name}-1"}
    assert parts[f"{topic_name}-1"]["size"] > parts[f"{topic_name}-0"]["size"] > 10 * 1000
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())
    human = kavka(b, "log-dirs", "describe").stdout
    assert str(b.log_dirs[0]) in human and f"{topic_name}-1" in human
    assert b.stop() == 0


def test_reassign_partitions_moves_between_dirs_with_a_throttle(broker_factory, topic_name, tmp_path):
    b = broker_factory(log_dirs=2).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 2)
    n = fill(b, topic_name, {0: 300, 1: 300})
    before = where(b, topic_name)
    target = {p: str(b.log_dirs[1] if d == str(b.log_dirs[0]) else b.log_dirs[0]) for p, (d, _) in before.items()}
    plan = {"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "log_dirs": [target[f"{topic_name}-0"]]},
        {"topic": topic_name, "partition": 1, "replicas": [1], "log_dirs": ["any"]},
    ]}
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan))
    out = kavka_json(b, "reassign-partitions", "--reassignment-json-file", str(f), "--execute", "--replica-alter-log-dirs-throttle", "50000000")
    assert out["throttle"] == 50000000 and [r["error_code"] for r in out["replicas"]] == [0]
    cfg = kavka_json(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1")
    assert {"name": "replica.alter.log.dirs.io.max.bytes.per.second", "value": "50000000"}.items() <= next(
        c for c in cfg if c["name"] == "replica.alter.log.dirs.io.max.bytes.per.second").items()

    def verified() -> Any:
        doc = kavka_json(b, "reassign-partitions", "--reassignment-json-file", str(f), "--verify")
        return doc if doc["complete"] else None

    doc = wait_until(verified, 30, 0.2, "the reassignment to complete")
    assert doc["throttle_removed"] and doc["replicas"][0]["status"] == "completed"
    cfg = kavka_json(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1")
    assert not any(c["name"] == "replica.alter.log.dirs.io.max.bytes.per.second" for c in cfg)
    after = where(b, topic_name)
    assert after[f"{topic_name}-0"] == (target[f"{topic_name}-0"], False)
    assert after[f"{topic_name}-1"] == before[f"{topic_name}-1"]  # "any": left where it is
    assert len(ck_read_to_end(b.bootstrap, topic_name, [0, 1])) == n
    # A move to a broker that does not exist is refused with Kafka's message.
    plan["partitions"][0]["replicas"] = [2]
    plan["partitions"][0]["log_dirs"] = ["any"]
    f.write_text(json.dumps(plan))
    res = kavka(b, "reassign-partitions", "--reassignment-json-file", str(f), "--execute", check=False)
    assert res.returncode == 1 and "Unknown broker id(s) 2" in res.stderr
    assert b.stop() == 0


def test_balance_plans_then_executes_even_bytes(broker_factory, topic_name):
    b = broker_factory(log_dirs=2, overrides={"log.dir.select.strategy": "partitions"}).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 4)
    # partitions strategy: 0,2 -> data0 and 1,3 -> data1; make data0 heavy.
    n = fill(b, topic_name, {0: 900, 2: 700, 1: 100, 3: 100})
    before = where(b, topic_name)
    assert before[f"{topic_name}-0"][0] == before[f"{topic_name}-2"][0] == str(b.log_dirs[0])
    plan = kavka_json(b, "log-dirs", "balance", "--broker", "1")
    assert plan["executed"] is False and len(plan["moves"]) >= 1
    assert where(b, topic_name) == before  # nothing moved without --execute
    spread_before = abs(plan["bytes_before"][str(b.log_dirs[0])] - plan["bytes_before"][str(b.log_dirs[1])])
    spread_after = abs(plan["bytes_after"][str(b.log_dirs[0])] - plan["bytes_after"][str(b.log_dirs[1])])
    assert spread_after < spread_before / 2
    done = kavka_json(b, "log-dirs", "balance", "--broker", "1", "--execute")
    assert [m["error_code"] for m in done["moves"]] == [0] * len(done["moves"])
    moved = {m["partition"]: m["to"] for m in done["moves"]}

    def settled() -> bool:
        now = where(b, topic_name)
        return len(now) == 4 and all(now[p][0] == d for p, d in moved.items())

    wait_until(settled, 30, 0.2, "the balancing moves")
    doc = kavka_json(b, "log-dirs", "describe")
    per_dir = [sum(p["size"] for p in d["partitions"]) for d in doc["brokers"][0]["logDirs"]]
    assert abs(per_dir[0] - per_dir[1]) == spread_after
    assert kavka_json(b, "log-dirs", "balance", "--broker", "1")["moves"] == []
    assert len(ck_read_to_end(b.bootstrap, topic_name, [0, 1, 2, 3])) == n
    assert Path(moved[next(iter(moved))]).is_dir()
    assert b.stop() == 0
