"""Apache Kafka's Java client, unmodified (kafka-clients at the newest 3.9.x and the newest 4.x
from Maven Central, tests/java/versions.env), against three real kavka brokers with two log dirs
each.

`tests/java/src/KavkaClientProbe.java` is compiled once per client version (tests/java_deps.py)
and run once per scenario: it produces and consumes with the client and calls the Admin client,
printing JSON lines; the checks are here. Every record produced is read back exactly: key,
value, headers (repeated keys, null values), timestamp and offset. Each scenario's JVM runs once
per module and version; the tests below each check one part of its output.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_harness import Cluster
from tests.integration.helpers import CODEC_IDS, batch_codecs, unique
from tests.java_deps import KAFKA_CLIENT_VERSIONS, probe_classes, probe_command

pytestmark = pytest.mark.timeout(300)

VERSIONS = pytest.mark.parametrize("version", KAFKA_CLIENT_VERSIONS)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PRODUCE_COMBOS = tuple(f"{c}/all" for c in CODECS) + ("none/0", "none/1")
COUNT = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    for v in KAFKA_CLIENT_VERSIONS:  # compiled before the brokers start: javac takes a few seconds
        probe_classes(v)
    c = Cluster(tmp_path_factory.mktemp("java"), 3, log_dirs=2, overrides={
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "group.initial.rebalance.delay.ms": "0",
        # ACLs enforced (StandardAuthorizer's rules); PLAINTEXT connections are ANONYMOUS, a super user.
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS",
    }).start()
    try:
        yield c
    finally:
        c.stop()


class Probe:
    """Runs each (version, scenario) once per module and keeps its JSON lines."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.runs: dict[tuple[str, str], list[dict]] = {}
        self.failed: dict[tuple[str, str], str] = {}  # a failed run fails every test that reads it, once run

    def run(self, version: str, scenario: str, run_as: str | None = None, **args: object) -> list[dict]:
        """`run_as` names one of several runs of one scenario (with other arguments)."""
        key = (version, run_as or scenario)
        if key in self.failed:
            raise AssertionError(self.failed[key])
        if key not in self.runs:
            cmd = probe_command(version, scenario, bootstrap=self.cluster.bootstrap, **args)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
            events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
            failed = [e for e in events if e["event"] in ("error", "member_error")]
            if res.returncode != 0 or failed:
                self.failed[key] = (
                    f"KavkaClientProbe {scenario} (kafka-clients {version}) exited {res.returncode}:\n"
                    + "\n".join(f"{e.get('error')}: {e.get('message')}\n{e.get('trace')}" for e in failed)
                    + f"\nstderr (last 4000 chars):\n{res.stderr[-4000:]}")
                raise AssertionError(self.failed[key])
            start = events[0]
            assert start["event"] == "start" and start["client"] == version, start
            assert events[-1]["event"] == "done"
            self.runs[key] = events
        return self.runs[key]


@pytest.fixture(scope="module")
def probe(cluster: Cluster) -> Probe:
    return Probe(cluster)


def _b(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def _rec(e: dict) -> tuple:
    """A record as compared: key, value, timestamp, headers (in order, repeated keys kept)."""
    return (_b(e["key"]), _b(e["value"]), e["timestamp"], [(k, _b(v)) for k, v in e["headers"]])


def _of(events: list[dict], kind: str, **match: object) -> list[dict]:
    return [e for e in events if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]


# ---- producer: idempotent with every codec, acks 0/1/all ------------------------------------


def _produce(probe: Probe, version: str) -> list[dict]:
    return probe.run(version, "produce", topic=unique("jp"), count=COUNT, combos=",".join(PRODUCE_COMBOS))


@VERSIONS
@pytest.mark.parametrize("combo", PRODUCE_COMBOS)
def test_produce_read_back_exactly(probe: Probe, cluster: Cluster, version: str, combo: str) -> None:
    codec, acks = combo.split("/")
    events = _produce(probe, version)
    sent = _of(events, "sent", codec=codec, acks=acks)
    read = _of(events, "read", codec=codec, acks=acks)
    assert len(sent) == COUNT
    # The sample holds null and empty keys and values and headers with a repeated key and a null value.
    assert any(e["key"] is None for e in sent) and any(e["value"] is None for e in sent)
    assert any(len(e["headers"]) == 3 for e in sent)
    if acks == "0":
        assert all(e["offset"] == -1 for e in sent), "acks=0: the producer learns no offset"
    else:
        assert [e["offset"] for e in sent] == list(range(COUNT))
    assert [e["offset"] for e in read] == list(range(COUNT)), "every record once, in order"
    assert [_rec(e) for e in read] == [_rec(e) for e in sent]
    assert {e["timestamp_type"] for e in read} == {"CreateTime"}
    # Stored as the client compressed them: the batches on the leader's disk carry the codec.
    topic = sent[0]["topic"]
    codecs = {c for node in cluster.nodes.values() for d in node.log_dirs
              for f in sorted((d / f"{topic}-0").glob("*.log")) for c in batch_codecs(f)}
    assert codecs == {CODEC_IDS[codec]}, f"stored batch codecs {codecs}, sent {codec}"


# ---- consumer groups: classic (two assignors) and KIP-848 -----------------------------------

GROUP_MODES = ("classic-range", "classic-cooperative-sticky", "consumer")


@VERSIONS
@pytest.mark.parametrize("mode", GROUP_MODES)
def test_group_two_members_share_and_commit(probe: Probe, version: str, mode: str) -> None:
    protocol, _, assignor = mode.partition("-")
    topic, group = unique("jg"), unique("jgroup")
    events = probe.run(version, "group", run_as=f"group-{mode}", topic=topic, group=group, count=80,
                       partitions=4, protocol=protocol, assignor=assignor or "none")
    sent = _of(events, "sent")
    read = _of(events, "read")
    assert len(sent) == 80
    by_pos = {(e["partition"], e["offset"]): e for e in read}
    assert len(by_pos) == len(read), "a record read twice: commits before revocation must prevent it"
    assert sorted(by_pos) == sorted((e["partition"], e["offset"]) for e in sent)
    for s in sent:
        assert _rec(by_pos[(s["partition"], s["offset"])]) == _rec(s)
    members = {e["member"] for e in read}
    assert members == {"a", "b"}, f"both members read after the rebalance, got {members}"
    shared = _of(events, "shared")[0]
    assert shared["a"] and shared["b"] and not set(shared["a"]) & set(shared["b"])
    group_desc = _of(events, "group")[0]
    assert len(group_desc["members"]) == 2
    assert sorted(p for m in group_desc["members"] for p in m["partitions"]) == [f"{topic}-{p}" for p in range(4)]
    if protocol == "classic":
        assert group_desc["assignor"] == {"range": "range", "cooperative-sticky": "cooperative-sticky"}[assignor]
    committed = _of(events, "committed")[0]["offsets"]
    ends = {}
    for s in sent:
        ends[s["partition"]] = max(ends.get(s["partition"], 0), s["offset"] + 1)
    assert committed == {f"{topic}-{p}": {"offset": o, "metadata": ""} for p, o in ends.items()}




@VERSIONS
def test_static_members_keep_their_assignment(probe: Probe, version: str) -> None:
    """A static member (group.instance.id) closed and replaced by a new consumer with its instance
    id gets the same partitions back, and the other member sees no rebalance (KIP-345)."""
    events = probe.run(version, "static", topic=unique("js"), group=unique("jsgroup"), partitions=4, assignor="range")
    before, after = _of(events, "before")[0], _of(events, "after")[0]
    assert after["b2"] == before["b"], "the new instance-b gets instance-b's partitions"
    assert after["a"] == before["a"]
    assert after["a_callbacks"] == before["a_callbacks"], "member a must not be rebalanced"
    described = _of(events, "group")
    for d in described:
        assert sorted(m["instance_id"] for m in d["members"]) == ["instance-a", "instance-b"]


# ---- seek, offsetsForTimes, beginning/end offsets, deleteRecords, listOffsets ---------------


@VERSIONS
def test_seek_offsets_for_times_and_list_offsets(probe: Probe, version: str) -> None:
    events = probe.run(version, "seek", topic=unique("jk"), count=20, seek=12, delete_before=5)
    sent = _of(events, "sent")
    base = sent[0]["timestamp"]
    assert [e["timestamp"] for e in sent] == [base + 1000 * i for i in range(20)]
    assert _of(events, "offsets")[0] == {"event": "offsets", "beginning": 0, "end": 20}
    for_time = {e["ts"] - base: (e["offset"], e["timestamp"]) for e in _of(events, "for_time")}
    assert for_time == {
        -1: (0, base), 7500: (8, base + 8000), 7000: (7, base + 7000),
        19_000: (19, base + 19_000), 20_000: (None, None),
    }
    positions = {e["after"]: e["position"] for e in _of(events, "position")}
    assert positions == {"seek": 12, "seekToEnd": 20, "seekToBeginning": 0}
    read = _of(events, "read")
    assert [e["offset"] for e in read] == list(range(12, 20))
    assert [_rec(e) for e in read] == [_rec(e) for e in sent[12:]]
    deleted = _of(events, "deleted")[0]
    assert (deleted["low_watermark"], deleted["beginning"]) == (5, 5)
    listed = {e["spec"]: (e["offset"], e["timestamp"]) for e in _of(events, "list_offsets")}
    assert listed["earliest"][0] == 5 and listed["latest"][0] == 20
    assert listed["max_timestamp"] == (19, base + 19_000)
    assert listed["for_timestamp"] == (11, base + 11_000)


# ---- the Admin client ---------------------------------------------------------------------


def _admin_step(probe: Probe, version: str, step: str) -> dict:
    events = probe.run(version, "admin", topic=unique("ja"))
    found = _of(events, "step", step=step)
    assert found, f"step {step} did not run"
    e = found[0]
    assert "error" not in e, f"{step}: {e['error']}: {e['message']}\n{e['trace']}"
    return e["result"]


@VERSIONS
def test_admin_cluster_quorum_features(probe: Probe, cluster: Cluster, version: str) -> None:
    c = _admin_step(probe, version, "describeCluster")
    assert c["cluster_id"] == cluster.cluster_id
    assert sorted(n["id"] for n in c["nodes"]) == [1, 2, 3]
    assert {n["port"] for n in c["nodes"]} == {b.port for b in cluster.brokers.values()}
    assert c["controller"] in (1, 2, 3)
    q = _admin_step(probe, version, "describeMetadataQuorum")
    assert q["leader"] in (1, 2, 3) and q["epoch"] >= 1 and q["high_watermark"] > 0
    assert sorted(v["id"] for v in q["voters"]) == [1, 2, 3]
    # From ApiVersions' feature fields: kavka advertises no features today (no metadata.version,
    # no transaction.version, so the 4.x producer uses transactions v1); the call must answer.
    f = _admin_step(probe, version, "describeFeatures")
    assert isinstance(f["finalized"], dict) and isinstance(f["supported"], dict)


@VERSIONS
def test_admin_topics(probe: Probe, version: str) -> None:
    assert _admin_step(probe, version, "createTopics") == {"duplicate_error": "TopicExistsException"}
    assert _admin_step(probe, version, "listTopics") == {"a": True, "b": True, "c": False}
    d = _admin_step(probe, version, "describeTopics")
    (a_name, a), (b_name, b) = sorted(d.items())
    assert a_name.endswith("-a") and b_name.endswith("-b")
    assert [p["partition"] for p in a["partitions"]] == [0, 1, 2]
    for p in a["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3] and p["leader"] in p["replicas"]
    assert [p["replicas"] for p in b["partitions"]] == [[1, 2], [2, 3]]
    assert a["topic_id"] != b["topic_id"] and not a["internal"]
    assert _admin_step(probe, version, "createPartitions") == {"partitions": 5}
    assert _admin_step(probe, version, "deleteTopics") == {"listed": False}


@VERSIONS
def test_admin_configs(probe: Probe, version: str) -> None:
    t = _admin_step(probe, version, "describeConfigs.topic")
    assert t["retention.ms"] == {"value": "123456", "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False}
    assert t["cleanup.policy"] == {"value": "compact", "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False}
    assert t["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    t2 = _admin_step(probe, version, "incrementalAlterConfigs.topic")
    assert t2["retention.ms"]["value"] == "654321" and t2["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert t2["cleanup.policy"]["value"] == "delete" and t2["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    br = _admin_step(probe, version, "describeConfigs.broker")
    assert br["num.partitions"]["value"] == "1" and br["count"] > 50
    assert br["log.retention.check.interval.ms"]["source"] == "STATIC_BROKER_CONFIG"
    alt = _admin_step(probe, version, "incrementalAlterConfigs.broker")
    assert alt["set"]["producer.id.expiration.ms"]["value"] == "7654321"
    assert alt["set"]["producer.id.expiration.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert alt["deleted"]["producer.id.expiration.ms"]["source"] == "DEFAULT_CONFIG"


@VERSIONS
def test_admin_elect_and_reassign(probe: Probe, version: str) -> None:
    e = _admin_step(probe, version, "electLeaders")["results"]
    assert len(e) == 2 and set(e.values()) <= {None, "ElectionNotNeededException"}
    r = _admin_step(probe, version, "alterPartitionReassignments")
    assert r["replicas"] == [2, 3] and r["end_offset"] == 20
    if r["listed"] is not None:  # listed while it ran (it may already be done)
        assert r["listed"]["replicas"] and set(r["listed"]["adding"]) <= {3}


@VERSIONS
def test_admin_group_offsets(probe: Probe, version: str) -> None:
    g = _admin_step(probe, version, "groupOffsets")
    assert len(g["listed"]) == 1 and g["listed"][0]["simple"] is False
    assert len(g["described"]["members"]) == 1
    topic = g["described"]["members"][0]["partitions"][0].rsplit("-", 1)[0]
    p0, p1 = f"{topic}-0", f"{topic}-1"
    assert g["offsets"] == {p0: {"offset": 3, "metadata": "meta-3"}, p1: {"offset": 2, "metadata": ""}}
    assert g["alter_while_active"] == "UnknownMemberIdException"
    assert g["delete_offsets_while_subscribed"] == "GroupSubscribedToTopicException"
    assert g["after_alter"] == {p0: {"offset": 5, "metadata": "five"}, p1: {"offset": 2, "metadata": ""}}
    assert g["after_delete_offsets"] == {p0: {"offset": 5, "metadata": "five"}}
    assert g["listed_after_delete"] is False


# ---- log dirs: a replica moved between a broker's two dirs -----------------------------------


@VERSIONS
def test_log_dirs_and_replica_move(probe: Probe, cluster: Cluster, version: str) -> None:
    topic = unique("jl")
    events = probe.run(version, "logdirs", topic=topic, broker=1, count=50)
    dirs = _of(events, "log_dirs")[0]["dirs"]
    assert sorted(d["path"] for d in dirs) == sorted(str(d) for d in cluster.nodes[1].log_dirs)
    holding = [d for d in dirs if d["replica"] is not None]
    assert len(holding) == 1 and holding[0]["replica"]["size"] > 0 and holding[0]["replica"]["future"] is False
    assert all(d["error"] is None and d["total_bytes"] > 0 and d["usable_bytes"] > 0 for d in dirs)
    before = _of(events, "replica_dir", when="before")[0]
    after = _of(events, "replica_dir", when="after")[0]
    assert before["current"] == holding[0]["path"] and before["future"] is None
    assert after["current"] != before["current"] and after["future"] is None
    assert _of(events, "moved")[0]["size"] == holding[0]["replica"]["size"]
    assert (Path(after["current"]) / f"{topic}-0").is_dir()
    assert not (Path(before["current"]) / f"{topic}-0").exists()


# ---- transactions ------------------------------------------------------------------------


@VERSIONS
def test_transactions_commit_abort_and_admin(probe: Probe, version: str) -> None:
    """initTransactions/send/sendOffsetsToTransaction/commit, then abort, then commit: every send
    succeeds and a read_committed consumer sees exactly the committed records. kavka finalizes
    transaction.version 2, so the 4.x client runs transactions v2 (KIP-890 part 2: Produce v12
    adds each partition, EndTxn v5 bumps the epoch) and the 3.9 client v1 (AddPartitionsToTxn
    before its batches, with the leaders' verification)."""
    txn_id = unique("jtxn")
    events = probe.run(version, "txn", topic=unique("jt"), txn_id=txn_id, group=unique("jtgroup"),
                       plan="commit:10,abort:5,commit:3")
    _check_txn_run(events, txn_id)


@VERSIONS
def test_transactions_with_pipelined_batches_on_a_fresh_topic(probe: Probe, version: str) -> None:
    """The same with one batch per record (linger.ms=0, 2 ms apart), so each partition has several
    batches of the producer in flight while its first is verified or added by the coordinator
    (issue 30: a later batch was appended before the first, which then got
    OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the transaction -- on nearly every run of this scenario)."""
    txn_id = unique("jtxnp")
    events = probe.run(version, "txn", run_as="txn-pipelined", topic=unique("jtp"), txn_id=txn_id,
                       group=unique("jtpgroup"), plan="commit:10,abort:5,commit:3", linger_ms=0, pause_ms=2)
    _check_txn_run(events, txn_id)


def _check_txn_run(events: list[dict], txn_id: str) -> None:
    sent = _of(events, "sent")
    assert len(sent) == 18
    for iso, outcomes in (("read_committed", {"commit"}), ("read_uncommitted", {"commit", "abort"})):
        read = _of(events, "read", isolation=iso)
        for p in (0, 1):
            want = [_rec(e) for e in sent if e["partition"] == p and e["outcome"] in outcomes]
            got = [_rec(e) for e in read if e["partition"] == p]
            assert got == want, f"{iso} partition {p}"
    offsets = _of(events, "group_offsets")[0]["offsets"]
    assert [o["offset"] for o in offsets.values()] == [18], "the aborted transaction's offsets are discarded"
    steps = {e["step"]: e for e in _of(events, "step")}
    for name, e in steps.items():
        assert "error" not in e, f"{name}: {e['error']}: {e['message']}\n{e['trace']}"
    # The transaction left PrepareCommit within the probe's 15 s (its markers written).
    assert steps["settled"]["result"]["state"] == "CompleteCommit"
    producers = steps["describeProducers"]["result"]["producers"]
    assert len(producers) == 1 and producers[0]["txn_start"] == -1
    assert steps["listTransactions"]["result"]["listed"] == [{"id": txn_id, "state": "CompleteCommit"}]
    d = steps["describeTransactions"]["result"]
    assert d["state"] == "CompleteCommit" and d["producer_id"] == producers[0]["producer_id"]
    assert d["timeout_ms"] == 60000


@VERSIONS
def test_admin_acls(probe: Probe, version: str) -> None:
    """createAcls, describeAcls, deleteAcls on a cluster with an authorizer (its clients are
    super users)."""
    acls = _admin_step(probe, version, "acls")
    topic_acls = [x for x in acls["described"] if x.startswith("TOPIC:LITERAL:")]
    group_acls = [x for x in acls["described"] if x.startswith("GROUP:PREFIXED:")]
    assert len(topic_acls) == 2 and len(group_acls) == 1
    assert {x.split(" ", 2)[2] for x in topic_acls} == {"* READ ALLOW", "10.0.0.1 WRITE DENY"}
    assert group_acls[0].endswith(" * READ ALLOW")
    assert acls["deleted"] == topic_acls
    assert acls["left"] == group_acls
