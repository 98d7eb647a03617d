"""Output and argument handling of `kavka topics` / `kavka configs` (a fake admin client).

The admin client is replaced by a recorder returning canned results, so these
tests pin what users see -- the table text, the JSON shape, exit codes and
stderr -- without a broker.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from click.testing import CliRunner

from kavka.cli import common
from kavka.cli.main import cli
from kavka.client.admin import (
    ConfigEntry,
    CreatedTopic,
    PartitionInfo,
    TopicDescription,
    TopicListing,
)
from kavka.client.errors import KafkaError


class FakeAdmin:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, KafkaError] = {}

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _call(self, name: str, arg: Any) -> None:
        self.calls.append((name, arg))
        if name in self.fail:
            raise self.fail[name]

    def list_topics(self, include_internal: bool = False) -> list[TopicListing]:
        self._call("list_topics", include_internal)
        return [TopicListing("events", "tid1", False, 2)]

    def describe_topics(self, names: Any, include_internal: bool = True) -> list[TopicDescription]:
        self._call("describe_topics", names)
        parts = (
            PartitionInfo(0, 1, 0, (1, 2), (1, 2)),
            PartitionInfo(1, -1, 0, (2, 1), (), error="LEADER_NOT_AVAILABLE"),
        )
        return [TopicDescription("events", "tid1", False, parts)]

    def describe_configs(
        self, rtype: str, name: str, include_synonyms: bool = False, **kw: Any
    ) -> list[ConfigEntry]:
        self._call("describe_configs", (rtype, name))
        return [
            ConfigEntry("cleanup.policy", "delete", "DEFAULT_CONFIG", False, False, True),
            ConfigEntry("retention.ms", "5", "DYNAMIC_TOPIC_CONFIG", False, False, False),
            ConfigEntry("segment.bytes", "1024", "STATIC_BROKER_CONFIG", False, False, False),
            ConfigEntry("ssl.key.password", None, "DYNAMIC_BROKER_CONFIG", False, True, False),
        ]

    def create_topics(self, topics: list[Any], validate_only: bool = False) -> list[CreatedTopic]:
        self._call("create_topics", (topics, validate_only))
        t = topics[0]
        return [CreatedTopic(t.name, "tid2", 3 if t.num_partitions < 0 else t.num_partitions, 1)]

    def delete_topics(self, names: list[str]) -> None:
        self._call("delete_topics", names)

    def create_partitions(self, totals: dict[str, int]) -> None:
        self._call("create_partitions", totals)

    def incremental_alter_configs(self, rtype: str, name: str, set: dict, delete: list) -> None:  # noqa: A002
        self._call("incremental_alter_configs", (rtype, name, set, delete))

    def alter_client_quotas(self, entries: list, validate_only: bool = False) -> None:
        self._call("alter_client_quotas", entries)

    def describe_client_quotas(self, components: list, strict: bool = True) -> list:
        self._call("describe_client_quotas", (components, strict))
        return [((("client-id", None), ("user", "alice")), {"producer_byte_rate": 1024.0})]


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    holder: dict[str, FakeAdmin] = {}
    fake = FakeAdmin("unset")

    def make(bootstrap: str) -> FakeAdmin:
        fake.bootstrap = bootstrap
        holder["a"] = fake
        return fake

    for mod in ("kavka.cli.topics", "kavka.cli.configs"):
        monkeypatch.setattr(f"{mod}.admin_client", make)
    return fake


def run(*args: str, env: dict[str, str] | None = None):  # noqa: ANN201
    return CliRunner().invoke(cli, list(args), env=env)


def test_describe_json_has_kafka_topics_fields(admin: FakeAdmin) -> None:
    res = run("topics", "describe", "--topic", "events", "--json")
    assert res.exit_code == 0, res.output
    (t,) = json.loads(res.stdout)
    assert {k: t[k] for k in ("topic", "topic_id", "partition_count", "replication_factor")} == {
        "topic": "events", "topic_id": "tid1", "partition_count": 2, "replication_factor": 2,
    }  # fmt: skip
    # Configs: everything not at its default, as kafka-topics.sh shows.
    assert t["configs"] == {"retention.ms": "5", "segment.bytes": "1024", "ssl.key.password": None}
    assert t["partitions"][0] == {
        "partition": 0,
        "leader": 1,
        "leader_epoch": 0,
        "replicas": [1, 2],
        "isr": [1, 2],
        "offline_replicas": [],
    }
    assert t["partitions"][1]["error"] == "LEADER_NOT_AVAILABLE"
    assert admin.calls[0] == ("describe_topics", ["events"])


def test_describe_table_reads_like_kafka_topics(admin: FakeAdmin) -> None:
    res = run("topics", "describe")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = lines[0].split()
    assert header[:8] == [
        "Topic:",
        "events",
        "TopicId:",
        "tid1",
        "PartitionCount:",
        "2",
        "ReplicationFactor:",
        "2",
    ]
    assert "Configs: retention.ms=5,segment.bytes=1024" in lines[0]
    assert lines[1].split() == ["Partition", "┃", "Leader", "┃", "Replicas", "┃", "Isr"]
    rows = [line.replace("│", " ").split() for line in lines[3:5]]
    assert rows == [["0", "1", "1,2", "1,2"], ["1", "none", "2,1", "-"]]
    assert admin.calls[0] == ("describe_topics", None)


def test_list_table_and_json(admin: FakeAdmin) -> None:
    res = run("topics", "list")
    assert res.exit_code == 0
    assert res.stdout.splitlines()[2].replace("│", " ").split() == ["events", "2", "tid1"]
    assert json.loads(run("topics", "list", "--json").stdout) == [
        {"name": "events", "topic_id": "tid1", "partitions": 2, "internal": False}
    ]
    assert admin.calls[0] == ("list_topics", True)
    run("topics", "list", "--exclude-internal")
    assert admin.calls[-1] == ("list_topics", False)


def test_bootstrap_defaults_then_env_then_option(admin: FakeAdmin) -> None:
    run("topics", "list")
    assert admin.bootstrap == "localhost:9092"
    run("topics", "list", env={"KAVKA_BOOTSTRAP": "10.0.0.1:9000"})
    assert admin.bootstrap == "10.0.0.1:9000"
    run("topics", "list", "--bootstrap-server", "h:1", env={"KAVKA_BOOTSTRAP": "10.0.0.1:9000"})
    assert admin.bootstrap == "h:1"


def test_create_passes_broker_defaults_and_configs(admin: FakeAdmin) -> None:
    res = run(
        "topics",
        "create",
        "--topic",
        "t",
        "--config",
        "retention.ms=5",
        "--config",
        "cleanup.policy=[delete,compact]",
        "--json",
    )
    assert res.exit_code == 0, res.output
    (new,), validate_only = admin.calls[0][1]
    assert (new.name, new.num_partitions, new.replication_factor, validate_only) == (
        "t",
        -1,
        -1,
        False,
    )
    assert dict(new.configs) == {"retention.ms": "5", "cleanup.policy": "delete,compact"}
    out = json.loads(res.stdout)
    assert (out["topic"], out["topic_id"], out["partitions"], out["created"]) == (
        "t",
        "tid2",
        3,
        True,
    )
    res = run(
        "topics",
        "create",
        "--topic",
        "t",
        "--partitions",
        "4",
        "--replication-factor",
        "1",
        "--validate-only",
    )
    assert res.exit_code == 0 and res.stdout.strip() == "Validated creation of topic t."


def test_create_existing_topic_fails_unless_if_not_exists(admin: FakeAdmin) -> None:
    admin.fail["create_topics"] = KafkaError(36, message="Topic 't' already exists.", resource="t")
    res = run("topics", "create", "--topic", "t")
    assert res.exit_code == 1
    assert res.stderr == "error: t: TOPIC_ALREADY_EXISTS: Topic 't' already exists.\n"
    assert res.stdout == ""
    res = run("topics", "create", "--topic", "t", "--if-not-exists", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["created"] is False


def test_delete_unknown_topic_fails_unless_if_exists(admin: FakeAdmin) -> None:
    admin.fail["delete_topics"] = KafkaError(3, resource="t")
    res = run("topics", "delete", "--topic", "t")
    assert res.exit_code == 1 and "does not exist" in res.stderr
    res = run("topics", "delete", "--topic", "t", "--if-exists", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout) == {"topic": "t", "deleted": False}


def test_alter_partitions_and_configs(admin: FakeAdmin) -> None:
    res = run(
        "topics",
        "alter",
        "--topic",
        "t",
        "--partitions",
        "6",
        "--config",
        "retention.ms=9",
        "--delete-config",
        "segment.ms",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert admin.calls == [
        ("create_partitions", {"t": 6}),
        ("incremental_alter_configs", ("topic", "t", {"retention.ms": "9"}, ["segment.ms"])),
    ]
    assert json.loads(res.stdout) == {
        "topic": "t",
        "partitions": 6,
        "set": {"retention.ms": "9"},
        "deleted": ["segment.ms"],
    }
    res = run("topics", "alter", "--topic", "t")
    assert res.exit_code == 2 and "nothing to alter" in res.stderr


def test_configs_describe_shows_dynamic_configs_unless_all(admin: FakeAdmin) -> None:
    res = run("configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--json")
    assert [e["name"] for e in json.loads(res.stdout)] == ["retention.ms", "ssl.key.password"]
    assert admin.calls[0] == ("describe_configs", ("broker", "1"))
    res = run("configs", "describe", "--entity-type", "topics", "--entity-name", "t", "--all")
    assert res.exit_code == 0
    assert "All configs for topic t" in res.stdout
    assert "[hidden]" in res.stdout and "cleanup.policy" in res.stdout
    res = run("configs", "describe", "--entity-type", "topics")
    assert res.exit_code == 2 and "--entity-name" in res.stderr


def test_configs_alter_parses_kafka_configs_syntax(admin: FakeAdmin) -> None:
    res = run(
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--add-config",
        "a=1,b=[x,y]",
        "--delete-config",
        "c,d",
    )
    assert res.exit_code == 0, res.output
    assert admin.calls == [
        ("incremental_alter_configs", ("topic", "t", {"a": "1", "b": "x,y"}, ["c", "d"]))
    ]
    assert res.stdout.strip() == "Completed updating config for topic t."
    res = run(
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.bytes=5",
    )
    assert res.exit_code == 0 and admin.calls[-1][1][:2] == ("broker", "")
    res = run(
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--add-config",
        "novalue",
    )
    assert res.exit_code == 2 and "expected key=value" in res.stderr


def test_configs_quota_entities_pair_as_kafka_configs_does(admin: FakeAdmin) -> None:
    """Each --entity-type takes the --entity-name or --entity-default that follows it, in order."""
    base = ("configs", "alter", "--bootstrap-server", "b:9092")
    res = run(*base, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default",
              "--add-config", "producer_byte_rate=1024", "--delete-config", "consumer_byte_rate")
    assert res.exit_code == 0, res.output
    assert admin.calls[-1] == ("alter_client_quotas", [([("user", "alice"), ("client-id", None)],
                                                         [("producer_byte_rate", 1024.0), ("consumer_byte_rate", None)])])
    res = run(*base, "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-name", "app",
              "--add-config", "consumer_byte_rate=5")
    assert admin.calls[-1][1][0][0] == [("user", None), ("client-id", "app")]
    # kafka-configs.sh's --describe flag form; a type without a name is SPECIFIED, a default DEFAULT.
    res = run("configs", "--describe", "--bootstrap-server", "b:9092", "--entity-type", "clients", "--entity-default",
              "--entity-type", "users", "--json")
    assert res.exit_code == 0, res.output
    assert admin.calls[-1] == ("describe_client_quotas", ([("client-id", 1, None), ("user", 2, None)], True))
    assert json.loads(res.stdout) == [{"entity": {"client-id": None, "user": "alice"}, "quotas": {"producer_byte_rate": 1024.0}}]
    for bad, message in [
        (("--entity-type", "users", "--entity-type", "clients", "--entity-name", "a", "--add-config", "producer_byte_rate=1"),
         "must be specified with each --entity-type"),
        (("--entity-type", "ips", "--entity-name", "1.2.3.4", "--entity-type", "users", "--entity-name", "a",
          "--add-config", "producer_byte_rate=1"), "ips cannot be combined"),
        (("--entity-type", "clients", "--entity-name", "a", "--add-config", "producer_byte_rate=lots"), "must be a number"),
        (("--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1"),
         "cannot be altered in one command"),
    ]:
        res = run(*base, *bad)
        assert res.exit_code == 2 and message in res.stderr, res.output


def test_split_config_list() -> None:
    assert common.split_config_list("a=1, b=[x,y],c=") == ["a=1", "b=[x,y]", "c="]
    assert common.split_config_list("") == []


def test_unreachable_broker_is_one_line_on_stderr() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert res.exit_code == 1
    assert (
        res.stderr.startswith(f"error: cannot connect to 127.0.0.1:{port}")
        and res.stderr.count("\n") == 1
    )
    res = run("topics", "list", "--bootstrap-server", "127.0.0.1:notaport")
    assert res.exit_code == 2 and "--bootstrap-server" in res.stderr
