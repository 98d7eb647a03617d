"""Apache Kafka's own command-line tools (4.4.0, run from its jars as bin/kafka-*.sh run them)
against a real three-node kavka cluster with two log dirs per node, each output checked against
the cluster's true state as kavka's admin client reads it. The APIs the tools send that Kafka 4
added (DescribeTopicPartitions, ConsumerGroupDescribe, UpdateFeatures and ApiVersions' features)
are also checked raw, for what the tools never show (the page cursor, the errors)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import Any

import pytest

from kavka.client.admin import AdminClient
from kavka.common import ErrorCode
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make
from tests.broker_harness import Cluster
from tests.java_deps import run_kafka_tool
from tests.raw_client import raw_call
from tests.wait import wait_until

TOOLS = "org.apache.kafka.tools."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = Cluster(tmp_path_factory.mktemp("kafkatools"), 3, log_dirs=2).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Any:
    with AdminClient(cluster.bootstrap) as a:
        yield a


def tool(cluster: Cluster, main_class: str, *args: str, ok: bool = True, input: str | None = None,
         bootstrap_flag: str = "--bootstrap-server") -> str:
    res = run_kafka_tool(TOOLS + main_class, *([bootstrap_flag, cluster.bootstrap] if bootstrap_flag else []), *args, input=input)
    if ok:
        assert res.returncode == 0, f"{main_class} {args} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout + ("" if ok else res.stderr)


def create(cluster: Cluster, topic: str, partitions: int, rf: int = 2, *extra: str) -> None:
    out = tool(cluster, "TopicCommand", "--create", "--topic", topic, "--partitions", str(partitions),
               "--replication-factor", str(rf), *extra)
    assert f"Created topic {topic}." in out


def produce(cluster: Cluster, topic: str, n: int, size: int = 100) -> None:
    out = _perf(cluster, topic, n, size)
    assert f"{n} records sent" in out


def _perf(cluster: Cluster, topic: str, n: int, size: int, *extra: str) -> str:
    return tool(cluster, "ProducerPerformance", "--topic", topic, "--num-records", str(n), "--record-size",
                str(size), "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap}",
                "acks=all", *extra, bootstrap_flag="")


# -- kafka-topics ---------------------------------------------------------------------------------

_PART = re.compile(r"Topic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)"
                   r"\tElr: ([\d,]*)\tLastKnownElr: ([\d,]*)")


def described(out: str) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    ints = lambda s: tuple(int(x) for x in s.split(",") if x)  # noqa: E731
    rows = {}
    for m in _PART.finditer(out):
        assert m.group(6) == "" and m.group(7) == ""  # no partition here is below min ISR: no ELR
        rows[(m.group(1), int(m.group(2)))] = (int(m.group(3)), ints(m.group(4)), ints(m.group(5)))
    return rows


def truth(admin: AdminClient, *topics: str) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    return {(t.name, p.partition): (p.leader, p.replicas, p.isr) for t in admin.describe_topics(list(topics))
            for p in t.partitions}


def test_kafka_topics_create_describe_alter_delete(cluster, admin):
    create(cluster, "tools-a", 3, 2, "--config", "retention.ms=3600000")
    create(cluster, "tools-b", 2, 3)
    out = tool(cluster, "TopicCommand", "--describe", "--topic", "tools-a")
    assert "PartitionCount: 3\tReplicationFactor: 2\tConfigs: retention.ms=3600000" in out
    assert described(out) == truth(admin, "tools-a")
    tool(cluster, "TopicCommand", "--alter", "--topic", "tools-a", "--partitions", "5")
    wait_until(lambda: len(admin.describe_topics(["tools-a"])[0].partitions) == 5)
    # One partition a page (DescribeTopicPartitions' cursor): every partition of both topics.
    paged = described(tool(cluster, "TopicCommand", "--describe", "--topic", "tools-.*",
                           "--partition-size-limit-per-response", "1"))
    assert paged == truth(admin, "tools-a", "tools-b") and len(paged) == 7
    tool(cluster, "TopicCommand", "--delete", "--topic", "tools-b")
    wait_until(lambda: "tools-b" not in {t.name for t in admin.list_topics()})
    assert "tools-b" not in tool(cluster, "TopicCommand", "--list").split()


# -- kafka-configs --------------------------------------------------------------------------------

def config(admin: AdminClient, kind: str, name: str, key: str) -> tuple[str | None, str]:
    e = next(e for e in admin.describe_configs(kind, name, keys=[key]) if e.name == key)
    return e.value, e.source


def test_kafka_configs_topic_broker_and_dynamic_default(cluster, admin):
    create(cluster, "tools-cfg", 1, 2)
    cc = "ConfigCommand"
    tool(cluster, cc, "--alter", "--entity-type", "topics", "--entity-name", "tools-cfg",
         "--add-config", "retention.ms=123456,max.message.bytes=200000")
    out = tool(cluster, cc, "--describe", "--entity-type", "topics", "--entity-name", "tools-cfg")
    assert "retention.ms=123456 sensitive=false" in out and "max.message.bytes=200000" in out
    assert config(admin, "topic", "tools-cfg", "retention.ms") == ("123456", "DYNAMIC_TOPIC_CONFIG")
    tool(cluster, cc, "--alter", "--entity-type", "topics", "--entity-name", "tools-cfg", "--delete-config", "retention.ms")
    assert config(admin, "topic", "tools-cfg", "retention.ms")[1] != "DYNAMIC_TOPIC_CONFIG"
    # A per-broker dynamic config, then a cluster-wide default.
    tool(cluster, cc, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--add-config", "message.max.bytes=2000000")
    out = tool(cluster, cc, "--describe", "--entity-type", "brokers", "--entity-name", "2")
    assert "message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000" in out
    assert config(admin, "broker", "2", "message.max.bytes") == ("2000000", "DYNAMIC_BROKER_CONFIG")
    tool(cluster, cc, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=7200000")
    out = tool(cluster, cc, "--describe", "--entity-type", "brokers", "--entity-default")
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" in out
    wait_until(lambda: config(admin, "broker", "3", "log.retention.ms") == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"))
    tool(cluster, cc, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms")
    tool(cluster, cc, "--alter", "--entity-type", "brokers", "--entity-name", "2", "--delete-config", "message.max.bytes")
    wait_until(lambda: config(admin, "broker", "2", "message.max.bytes")[1] == "DEFAULT_CONFIG")


# -- console producer/consumer, kafka-consumer-groups ---------------------------------------------

def group_rows(out: str, group: str) -> dict[tuple[str, int], list[str]]:
    """GROUP TOPIC PARTITION ... rows (--describe's, and --reset-offsets' GROUP TOPIC PARTITION NEW-OFFSET)."""
    return {(cols[1], int(cols[2])): cols[3:] for line in out.splitlines()
            if (cols := line.split()) and cols[0] == group and len(cols) >= 4 and cols[2].isdigit()}


def test_console_producer_consumer_and_consumer_groups(cluster, admin):
    create(cluster, "tools-console", 2, 2)
    lines = "".join(f"h{i}:a{i},x:y\tk{i}\tv{i}\n" for i in range(6))
    tool(cluster, "ConsoleProducer", "--topic", "tools-console", "--reader-property", "parse.key=true",
         "--reader-property", "parse.headers=true", input=lines)
    out = tool(cluster, "consumer.ConsoleConsumer", "--topic", "tools-console", "--from-beginning",
               "--max-messages", "6", "--group", "tools-g", "--formatter-property", "print.key=true",
               "--formatter-property", "print.headers=true", "--timeout-ms", "30000")
    assert sorted(line for line in out.splitlines() if "\t" in line) == sorted(lines.splitlines())
    gc = "consumer.group.ConsumerGroupCommand"
    assert "tools-g" in tool(cluster, gc, "--list").split()
    committed = admin.list_group_offsets("tools-g")
    rows = group_rows(tool(cluster, gc, "--describe", "--group", "tools-g"), "tools-g")
    assert {tp: int(r[0]) for tp, r in rows.items()} == committed and sum(committed.values()) == 6
    # reset-offsets: a dry run changes nothing; --execute does.
    reset = ("--reset-offsets", "--group", "tools-g", "--topic", "tools-console")
    dry = group_rows(tool(cluster, gc, *reset, "--to-earliest", "--dry-run"), "tools-g")
    assert {int(r[0]) for r in dry.values()} == {0} and admin.list_group_offsets("tools-g") == committed
    tool(cluster, gc, *reset, "--to-earliest", "--execute")
    assert set(admin.list_group_offsets("tools-g").values()) == {0}
    tool(cluster, gc, "--reset-offsets", "--group", "tools-g", "--topic", "tools-console:0", "--to-offset", "1", "--execute")
    assert admin.list_group_offsets("tools-g")[("tools-console", 0)] == 1
    tool(cluster, gc, *reset, "--to-datetime", "2099-01-01T00:00:00.000", "--execute")  # after every record: the end
    ends = {tp: r.offset for tp, r in admin.list_offsets({("tools-console", p): "latest" for p in (0, 1)}).items()}
    assert admin.list_group_offsets("tools-g") == ends
    assert "Deletion of requested consumer groups ('tools-g') was successful." in tool(cluster, gc, "--delete", "--group", "tools-g")
    assert "tools-g" not in tool(cluster, gc, "--list").split()


def test_consumer_groups_describe_a_kip848_group(cluster, admin):
    """A group.protocol=consumer member: kafka-consumer-groups asks ConsumerGroupDescribe and shows
    its epochs and assignment."""
    create(cluster, "tools-848", 3, 2)
    consumer = subprocess.Popen(
        [*_java_cmd(), TOOLS + "consumer.ConsoleConsumer", "--bootstrap-server", cluster.bootstrap,
         "--topic", "tools-848", "--group", "tools-848g", "--command-property", "group.protocol=consumer",
         "--timeout-ms", "60000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        gc = "consumer.group.ConsumerGroupCommand"

        def members() -> list[list[str]] | None:
            out = tool(cluster, gc, "--describe", "--group", "tools-848g", "--members", "--verbose", ok=False)
            rows = [line.split() for line in out.splitlines() if line.startswith("tools-848g ")]
            return rows if rows and rows[0][5] != "-" and rows[0][6] == "tools-848:0,1,2" else None

        rows = wait_until(members, timeout=60, interval=1)
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
        assert len(rows) == 1 and rows[0][4] == "3" and rows[0][8] == "tools-848:0,1,2" and int(rows[0][5]) >= 1
        state = tool(cluster, gc, "--describe", "--group", "tools-848g", "--state")
        assert re.search(r"tools-848g\s+\S+\s+\(\d\)\s+uniform\s+Stable\s+1", state), state
    finally:
        consumer.kill()
        consumer.wait()


def _java_cmd() -> list[str]:
    from tests.java_deps import java, kafka_classpath
    return [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", kafka_classpath()]


# -- kafka-reassign-partitions, kafka-leader-election, kafka-log-dirs -----------------------------

def replica_dirs(admin: AdminClient, topic: str) -> dict[tuple[int, int], str]:
    """(broker, partition) -> the log dir holding that replica (not a future one)."""
    return {(b, r.partition): d.path for b, dirs in admin.describe_log_dirs(topics=[topic]).items()
            for d in dirs for r in d.replicas if r.topic == topic and not r.is_future}


def test_kafka_reassign_partitions_the_full_workflow(cluster, admin, tmp_path):
    create(cluster, "tools-move", 2, 2)
    produce(cluster, "tools-move", 200)
    before = truth(admin, "tools-move")
    (tmp_path / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "tools-move"}]}))
    gen = tool(cluster, "reassign.ReassignPartitionsCommand", "--generate", "--topics-to-move-json-file",
               str(tmp_path / "topics.json"), "--broker-list", "1,2,3")
    current = json.loads(gen.split("Current partition replica assignment")[1].split("Proposed")[0])
    assert {(p["partition"]): tuple(p["replicas"]) for p in current["partitions"]} == {p: v[1] for (_, p), v in before.items()}
    # Partition 0: the replica order reversed (a new preferred leader) and the second replica
    # moved to its broker's other log dir; partition 1: one replica moved to the third broker.
    dirs = replica_dirs(admin, "tools-move")
    (x0, y0), (x1, y1) = before[("tools-move", 0)][1], before[("tools-move", 1)][1]
    other = next(str(d) for d in cluster.nodes[y0].log_dirs if str(d) != dirs[(y0, 0)])
    z1 = ({1, 2, 3} - {x1, y1}).pop()
    plan = {"version": 1, "partitions": [
        {"topic": "tools-move", "partition": 0, "replicas": [y0, x0], "log_dirs": [other, "any"]},
        {"topic": "tools-move", "partition": 1, "replicas": [x1, z1], "log_dirs": ["any", "any"]},
    ]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    rp = ("reassign.ReassignPartitionsCommand", "--reassignment-json-file", str(tmp_path / "plan.json"))
    out = tool(cluster, *rp, "--execute", "--throttle", "50000000", "--replica-alter-log-dirs-throttle", "50000000")
    assert "Successfully started partition reassignments for tools-move-0,tools-move-1" in out
    assert config(admin, "broker", str(x1), "leader.replication.throttled.rate")[0] == "50000000"
    assert config(admin, "topic", "tools-move", "leader.replication.throttled.replicas")[0]

    def verified() -> str | None:
        out = tool(cluster, *rp, "--verify")
        return out if "still in progress" not in out else None

    out = wait_until(verified, timeout=60, interval=1)
    assert "Reassignment of partition tools-move-0 is completed." in out
    assert f"Reassignment of replica tools-move-0-{y0} completed successfully." in out
    assert "Clearing broker-level throttles" in out and "Clearing topic-level throttles on topic tools-move" in out
    after = truth(admin, "tools-move")
    assert after[("tools-move", 0)][1] == (y0, x0) and after[("tools-move", 1)][1] == (x1, z1)
    assert replica_dirs(admin, "tools-move")[(y0, 0)] == other and (z1, 1) in replica_dirs(admin, "tools-move")
    for b in (1, 2, 3):  # verify took the throttles off
        assert config(admin, "broker", str(b), "leader.replication.throttled.rate")[1] == "DEFAULT_CONFIG"
    assert not config(admin, "topic", "tools-move", "leader.replication.throttled.replicas")[0]

    # kafka-leader-election: the preferred leader of partition 0 is now y0.
    le = tool(cluster, "LeaderElectionCommand", "--election-type", "preferred", "--topic", "tools-move", "--partition", "0")
    assert ("Successfully completed leader election (PREFERRED) for partitions tools-move-0" in le
            or "Valid replica already elected for partitions tools-move-0" in le), le
    wait_until(lambda: truth(admin, "tools-move")[("tools-move", 0)][0] == y0)

    # kafka-log-dirs --describe: Kafka's JSON, the same as the admin client's view.
    out = tool(cluster, "LogDirsCommand", "--describe", "--topic-list", "tools-move")
    doc = json.loads(out.splitlines()[-1])
    seen = {(b["broker"], int(p["partition"].rsplit("-", 1)[1])): d["logDir"]
            for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"] if not p["isFuture"]}
    assert seen == replica_dirs(admin, "tools-move")


def test_kafka_reassign_partitions_cancel(cluster, admin, tmp_path):
    """A reassignment held back by a 1 byte/s throttle is still running, and --cancel ends it with
    the replicas as they were."""
    create(cluster, "tools-cancel", 1, 1)
    produce(cluster, "tools-cancel", 200, 1000)
    (src,) = truth(admin, "tools-cancel")[("tools-cancel", 0)][1]
    dest = src % 3 + 1
    (tmp_path / "plan.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-cancel", "partition": 0, "replicas": [dest], "log_dirs": ["any"]}]}))
    rp = ("reassign.ReassignPartitionsCommand", "--reassignment-json-file", str(tmp_path / "plan.json"))
    tool(cluster, *rp, "--execute", "--throttle", "1")
    assert ("tools-cancel", 0) in admin.list_partition_reassignments()
    out = tool(cluster, *rp, "--cancel")
    assert "Successfully cancelled partition reassignment for: tools-cancel-0" in out
    wait_until(lambda: ("tools-cancel", 0) not in admin.list_partition_reassignments())
    assert truth(admin, "tools-cancel")[("tools-cancel", 0)][1] == (src,)


# -- kafka-metadata-quorum, kafka-features --------------------------------------------------------

def test_kafka_metadata_quorum(cluster, admin):
    q = admin.describe_quorum()
    status = tool(cluster, "MetadataQuorumCommand", "describe", "--status")
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
    assert int(fields["LeaderId"]) == admin.describe_quorum().leader_id and int(fields["LeaderEpoch"]) >= q.leader_epoch
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == [1, 2, 3]
    rep = tool(cluster, "MetadataQuorumCommand", "describe", "--replication")
    rows = [line.split() for line in rep.splitlines()[1:] if line.strip()]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3] and [r[-1] for r in rows].count("Leader") == 1
    now = time.time() * 1000
    for r in rows:  # LastFetchTimestamp and LastCaughtUpTimestamp are wall-clock milliseconds
        assert now - 120_000 < int(r[4]) <= now + 1000 and now - 120_000 < int(r[5]) <= now + 1000, rep


def test_kafka_features(cluster):
    out = tool(cluster, "FeatureCommand", "describe")
    levels = dict(re.findall(r"Feature: (\S+)\s+SupportedMinVersion: \S+\s+SupportedMaxVersion: \S+\s+FinalizedVersionLevel: (\S+)", out))
    assert levels == {"eligible.leader.replicas.version": "1", "group.version": "1", "kraft.version": "0",
                      "transaction.version": "2"}
    assert "group.version was upgraded to 1" in tool(cluster, "FeatureCommand", "upgrade", "--feature", "group.version=1")
    out = tool(cluster, "FeatureCommand", "downgrade", "--feature", "group.version=0", ok=False)
    assert "Invalid update version 0 for feature group.version. Local controller" in out


# -- kafka-get-offsets, kafka-delete-records -------------------------------------------------------

def test_kafka_get_offsets_and_delete_records(cluster, admin, tmp_path):
    create(cluster, "tools-offsets", 2, 2)
    tool(cluster, "ConsoleProducer", "--topic", "tools-offsets", input="".join(f"v{i}\n" for i in range(10)))
    ends = {p: r.offset for (_, p), r in admin.list_offsets({("tools-offsets", p): "latest" for p in (0, 1)}).items()}
    out = tool(cluster, "GetOffsetShell", "--topic", "tools-offsets")
    assert {int(p): int(o) for _, p, o in (line.split(":") for line in out.split())} == ends and sum(ends.values()) == 10
    fat = max(ends, key=ends.get)
    (tmp_path / "d.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-offsets", "partition": fat, "offset": 3}]}))
    out = tool(cluster, "DeleteRecordsCommand", "--offset-json-file", str(tmp_path / "d.json"))
    assert f"partition: tools-offsets-{fat}\tlow_watermark: 3" in out
    out = tool(cluster, "GetOffsetShell", "--topic", "tools-offsets", "--time", "-2")
    assert f"tools-offsets:{fat}:3" in out.split()
    assert admin.list_offsets({("tools-offsets", fat): "earliest"})[("tools-offsets", fat)].offset == 3


# -- perf tests, kafka-transactions ---------------------------------------------------------------

def test_perf_tests_and_kafka_transactions(cluster, admin):
    create(cluster, "tools-perf", 2, 2)
    produce(cluster, "tools-perf", 300)
    out = _perf(cluster, "tools-perf", 60, 100, "--transactional-id", "tools-tx", "--transaction-duration-ms", "200")
    assert "60 records sent" in out
    out = tool(cluster, "ConsumerPerformance", "--topic", "tools-perf", "--messages", "300", "--timeout", "30000")
    header, row = [line for line in out.splitlines() if line.count(",") >= 9][-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=True))
    assert int(stats["data.consumed.in.nMsg"]) >= 300 and "WARNING" not in out
    # kafka-transactions
    (listed,) = [t for t in admin.list_transactions() if t.transactional_id == "tools-tx"]
    out = tool(cluster, "TransactionsCommand", "list")
    row = next((line.split() for line in out.splitlines() if line.startswith("tools-tx")), None)
    assert row is not None, out
    assert row[1:4] == [str(listed.coordinator), str(listed.producer_id), listed.state]
    d = admin.describe_transaction("tools-tx")
    out = tool(cluster, "TransactionsCommand", "describe", "--transactional-id", "tools-tx")
    row = next((cols for line in out.splitlines() if "tools-tx" in (cols := line.split())), None)
    assert row is not None, out
    assert row[:5] == [str(d.coordinator), "tools-tx", str(d.producer_id), str(d.producer_epoch), d.state]
    pids: set[int] = set()
    for p in (0, 1):  # the perf test's sticky partitioner may have written to one partition only
        out = tool(cluster, "TransactionsCommand", "describe-producers", "--topic", "tools-perf", "--partition", str(p))
        pids |= {int(line.split()[0]) for line in out.splitlines()[1:] if line.strip()}
    assert d.producer_id in pids
    for b in (1, 2, 3):
        out = tool(cluster, "TransactionsCommand", "find-hanging", "--broker-id", str(b))
        assert len([line for line in out.splitlines() if line.strip()]) == 1, out  # the header only


# -- the new APIs, raw ---------------------------------------------------------------------------

def _node(cluster: Cluster) -> Any:
    return cluster.nodes[1]


def test_describe_topic_partitions_pages_with_a_cursor(cluster, admin):
    from kio.schema.describe_topic_partitions.v0 import request as r
    create(cluster, "tools-page-a", 3, 1)
    create(cluster, "tools-page-b", 2, 1)

    def page(limit: int, cursor: tuple[str, int] | None, names=("tools-page-a", "tools-page-b", "tools-page-none")) -> Any:
        req = r.DescribeTopicPartitionsRequest(
            topics=tuple(r.TopicRequest(name=n) for n in names), response_partition_limit=limit,
            cursor=r.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
        return raw_call(_node(cluster), ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, req)

    seen, cursor, pages = [], None, 0
    while True:
        resp = page(2, cursor)
        pages += 1
        for t in resp.topics:
            if t.name == "tools-page-none":
                assert t.error_code == ErrorCode.unknown_topic_or_partition and not t.partitions
                continue
            assert t.error_code == ErrorCode.none
            seen += [(t.name, p.partition_index) for p in t.partitions]
            assert all(p.eligible_leader_replicas == () and p.last_known_elr == () for p in t.partitions)
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    assert seen == [("tools-page-a", 0), ("tools-page-a", 1), ("tools-page-a", 2), ("tools-page-b", 0), ("tools-page-b", 1)]
    assert pages == 3
    # A page that ends exactly with a topic points at the next topic's partition 0.
    resp = page(3, None)
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("tools-page-b", 0)
    whole = page(2000, None)
    assert whole.next_cursor is None
    t = next(t for t in whole.topics if t.name == "tools-page-a")
    assert str(t.topic_id) and [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions] == [
        (p.partition, p.leader, p.replicas, p.isr) for p in admin.describe_topics(["tools-page-a"])[0].partitions]
    bad = page(10, ("tools-page-a", -1), names=("tools-page-a",))
    assert [x.error_code for x in bad.topics] == [ErrorCode.invalid_request]


def test_consumer_group_describe_of_an_unknown_or_classic_group(cluster, admin):
    from kio.schema.consumer_group_describe.v1 import request as r
    from kio.schema.find_coordinator.v4 import request as fc
    create(cluster, "tools-classic", 1, 1)
    tool(cluster, "ConsoleProducer", "--topic", "tools-classic", input="a\n")
    tool(cluster, "consumer.ConsoleConsumer", "--topic", "tools-classic", "--from-beginning", "--max-messages", "1",
         "--group", "tools-classic-g", "--timeout-ms", "30000")
    for group, message in (("tools-classic-g", "Group tools-classic-g not found."), ("nobody", "Group nobody not found.")):
        found = raw_call(_node(cluster), ApiKey.FIND_COORDINATOR, 4, make(fc.FindCoordinatorRequest, key_type=0, coordinator_keys=(group,)))
        node = next(n for n in cluster.nodes.values() if n.node_id == found.coordinators[0].node_id)
        resp = raw_call(node, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, r.ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False))
        assert [(g.error_code, g.error_message) for g in resp.groups] == [(ErrorCode.group_id_not_found, message)]
        other = next(n for n in cluster.nodes.values() if n.node_id != found.coordinators[0].node_id)
        resp = raw_call(other, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, r.ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False))
        assert [g.error_code for g in resp.groups] == [ErrorCode.not_coordinator]
    # ...and kafka-consumer-groups falls back to DescribeGroups for the classic group.
    rows = group_rows(tool(cluster, "consumer.group.ConsumerGroupCommand", "--describe", "--group", "tools-classic-g"), "tools-classic-g")
    assert rows[("tools-classic", 0)][0] == "1"


def test_api_versions_features_and_update_features_raw(cluster):
    from kio.schema.api_versions.v3 import request as av
    from kio.schema.update_features.v1 import request as uf
    resp = raw_call(_node(cluster), ApiKey.API_VERSIONS, 3, av.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    assert {f.name: (f.min_version, f.max_version) for f in resp.supported_features}["group.version"] == (1, 1)
    assert [(f.name, f.max_version_level) for f in resp.finalized_features] == [
        ("eligible.leader.replicas.version", 1), ("group.version", 1), ("transaction.version", 2)]
    assert "transaction.version" not in {f.name for f in resp.supported_features}  # v3: minimum 0 left out
    resp4 = raw_call(_node(cluster), ApiKey.API_VERSIONS, 4, av.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    assert {f.name: (f.min_version, f.max_version) for f in resp4.supported_features}["transaction.version"] == (0, 2)
    # A static quorum: kraft.version supported 0-1 (KIP-853), finalized 0 (so not listed).
    assert {f.name: (f.min_version, f.max_version) for f in resp4.supported_features}["kraft.version"] == (0, 1)
    assert resp.finalized_features_epoch > 0
    req = uf.UpdateFeaturesRequest(feature_updates=(
        uf.FeatureUpdateKey(feature="group.version", max_version_level=1, upgrade_type=1),
        uf.FeatureUpdateKey(feature="transaction.version", max_version_level=1, upgrade_type=2),
        uf.FeatureUpdateKey(feature="no.such.version", max_version_level=1, upgrade_type=1),
    ), validate_only=False)
    resp = raw_call(_node(cluster), ApiKey.UPDATE_FEATURES, 1, req)
    assert [(x.feature, x.error_code) for x in resp.results] == [
        ("group.version", ErrorCode.none), ("transaction.version", ErrorCode.invalid_update_version),
        ("no.such.version", ErrorCode.invalid_update_version)]
    assert resp.results[2].error_message == "Invalid update version 1 for feature no.such.version. Local controller 1 does not support this feature."

