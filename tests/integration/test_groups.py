"""Consumer groups with real clients: assignment, rebalances, commit-after-process, restart, bad input.

Each group member is its own process (tests/integration/group_member.py), so
"a member dies" is a real kill -9 left to the broker's session timeout, and
"a member leaves" is the client's own close() (LeaveGroup). The test reads the
members' stdout: their assignments, the records they processed, their
commits. Committed offsets are read back with a different client (kafka-python's
admin OffsetFetch) and again after a broker restart, from `__consumer_offsets`.

Wall time: session.timeout.ms 1500, heartbeats every 200 ms, the broker's
group.initial.rebalance.delay.ms 300.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from kavka.client import requests as rq
from kavka.client.connection import BlockingConnection
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from tests.broker_harness import BrokerProcess
from tests.wait import wait_until

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 6
PER_PARTITION = 50
GROUP_BROKER = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    # KIP-848 members get their session timeout and heartbeat interval from the broker.
    "group.consumer.session.timeout.ms": "1500",
    "group.consumer.heartbeat.interval.ms": "200",
}


class Member:
    """A group member process and what it has reported."""

    def __init__(
        self, client: str, bootstrap: str, topic: str, group: str, assignor: str, instance_id: str | None = None,
        *, session_ms: int = 1500,
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.group_member", client, bootstrap, topic, group, assignor,
             *([instance_id] if instance_id else [])],
            cwd=REPO,
            env=dict(os.environ, GROUP_MEMBER_SESSION_MS=str(session_ms)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.assignment: list[int] | None = None
        self.assignments_seen: list[list[int]] = []
        self.processed: set[tuple[int, int]] = set()
        self.commits = 0
        self.rebalance_events: list[str] = []
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
                if line.startswith("A "):
                    self.assignment = [int(x) for x in line[2:].strip("[]").split(",") if x.strip()]
                    self.assignments_seen.append(self.assignment)
                elif line.startswith("P "):
                    _, p, o = line.split()
                    self.processed.add((int(p), int(o)))
                elif line.startswith(("G ", "R ")):
                    self.rebalance_events.append(line)
                elif line == "C":
                    self.commits += 1

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines[-30:])


def exact_cover(members: list[Member], partitions: int = PARTITIONS, *, balanced: bool = False) -> bool:
    """Every partition is owned by exactly one of `members`, and each member owns some
    (with `balanced`, as evenly as possible: a KIP-848 group passes through uneven states
    while members revoke one by one)."""
    owned = [m.assignment for m in members]
    if any(not a for a in owned):
        return False
    flat = [p for a in owned for p in a]  # type: ignore[union-attr]
    if balanced and max(map(len, owned)) - min(map(len, owned)) > 1:  # type: ignore[arg-type]
        return False
    return sorted(flat) == list(range(partitions))


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        got = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in got.items() if tp.topic == topic}


def produce(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(PARTITIONS * PER_PARTITION):
        p.send(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)
    p.close()


CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("confluent", "consumer-uniform"),  # KIP-848: group.protocol=consumer, the broker assigns
    ("confluent", "consumer-range"),
    ("kafka-python", "range"),
    ("kafka-python", "cooperative-sticky"),
    ("aiokafka", "roundrobin"),
]


@pytest.mark.parametrize(("client", "assignor"), CASES)
def test_group_of_three_rebalances_and_commits_survive_restart(
    broker_factory, topic_name: str, client: str, assignor: str  # noqa: ANN001
) -> None:
    b: BrokerProcess = broker_factory(overrides=GROUP_BROKER).start()
    produce(b.bootstrap, topic_name)
    group = f"grp-{topic_name}"
    members: list[Member] = []
    try:
        members = [Member(client, b.bootstrap, topic_name, group, assignor) for _ in range(3)]

        def diag() -> str:
            return "\n---\n".join(m.output() for m in members) + "\n--- broker:\n" + b.log_text()[-3000:]

        try:
            wait_until(lambda: exact_cover(members[:3], balanced=True), 40, message="3 members own the 6 partitions")
            assert sorted(len(m.assignment or ()) for m in members) == [2, 2, 2]

            # A fourth member joins: its share comes from the others.
            members.append(Member(client, b.bootstrap, topic_name, group, assignor))
            wait_until(lambda: exact_cover(members, balanced=True), 40, message="4 members own the 6 partitions")

            # It leaves (close(): LeaveGroup): its partitions go back to the three.
            assert members[3].stop() == 0
            wait_until(lambda: exact_cover(members[:3], balanced=True), 40, message="3 members after a leave")

            # One is killed: the session timeout (1.5 s) evicts it and the two survivors take over.
            members[0].kill()
            wait_until(lambda: exact_cover(members[1:3], balanced=True), 40, message="2 members after a kill")
            assert sorted(len(m.assignment or ()) for m in members[1:3]) == [3, 3]

            everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}
            wait_until(lambda: set().union(*(m.processed for m in members)) >= everything, 40,
                       message="every record processed at least once")
            processed = set().union(*(m.processed for m in members))
            assert processed == everything  # nothing beyond the log end
            want = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
            wait_until(lambda: committed(b.bootstrap, group, topic_name) == want, 30,
                       message="committed offsets at the log end")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{diag()}") from None
    finally:
        for m in members:
            m.stop()
    before = committed(b.bootstrap, group, topic_name)
    assert b.stop() == 0
    b.start()
    after = committed(b.bootstrap, group, topic_name)
    assert after == before == dict.fromkeys(range(PARTITIONS), PER_PARTITION)


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    """KIP-345 with librdkafka: a static member killed and restarted within its session timeout."""
    b: BrokerProcess = broker_factory(overrides=GROUP_BROKER).start()
    produce(b.bootstrap, topic_name)
    group = f"static-{topic_name}"
    args = ("confluent", b.bootstrap, topic_name, group, "range")
    members = [Member(*args, f"instance-{i}", session_ms=8000) for i in range(3)]
    try:
        wait_until(lambda: exact_cover(members), 40, message="3 static members own the 6 partitions")
        before = [list(m.assignment or ()) for m in members]
        state = _describe_state(b, group)
        events = [list(m.rebalance_events) for m in members]
        members[0].kill()  # no LeaveGroup: static members never send one
        members[0] = Member(*args, "instance-0", session_ms=8000)
        wait_until(lambda: members[0].assignment == before[0], 20, message="the restarted member gets its partitions back")
        assert [m.assignment for m in members] == before
        wait_until(lambda: members[0].rebalance_events, 10, message="the restarted member's assignment callback")
        for i, m in enumerate(members[1:], start=1):
            # No rebalance reached the others: no revoke, no new assignment callback.
            assert m.rebalance_events == events[i], m.rebalance_events
        assert _describe_state(b, group) == state == ("Stable", ["instance-0", "instance-1", "instance-2"])
    finally:
        for m in members:
            m.stop()


def _describe_state(b: BrokerProcess, group: str) -> tuple[str, list[str]]:
    with BlockingConnection("127.0.0.1", b.port) as conn:
        d = conn.send(rq.describe_groups(conn.pick_version(ApiKey.DESCRIBE_GROUPS), [group])).groups[0]
    return d.group_state, sorted(m.group_instance_id for m in d.members)


# ---------------------------------------------------------------- bad input, with kavka's own client


def _join(conn: BlockingConnection, group: str, member_id: str = "") -> object:
    v = conn.pick_version(ApiKey.JOIN_GROUP)
    cls = conn.request_class(ApiKey.JOIN_GROUP, v)
    proto = nested(cls, "JoinGroupRequestProtocol")
    from datetime import timedelta

    return conn.send(
        make(
            cls,
            group_id=group,
            session_timeout=timedelta(seconds=3),
            rebalance_timeout=timedelta(seconds=10),
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(make(proto, name="range", metadata=b"\x00\x00\x00\x00\x00\x00"),),
            reason=None,
        )
    )


def _commit(conn: BlockingConnection, group: str, topic: str, offset: int, **kw) -> dict[int, ErrorCode]:  # noqa: ANN003
    resp = conn.send(rq.offset_commit(conn.pick_version(ApiKey.OFFSET_COMMIT), group, {(topic, 0): offset}, **kw))
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def _fetch(conn: BlockingConnection, group: str, topic: str) -> int:
    v = conn.pick_version(ApiKey.OFFSET_FETCH)
    resp = conn.send(rq.offset_fetch(v, group, [(topic, 0)]))
    topics = resp.groups[0].topics if v >= 8 else resp.topics
    return topics[0].partitions[0].committed_offset


def test_bad_offset_commits_get_kafkas_errors_and_lose_nothing(broker_factory, topic_name: str) -> None:  # noqa: ANN001
    b: BrokerProcess = broker_factory(overrides={**GROUP_BROKER, "group.initial.rebalance.delay.ms": "0"}).start()
    produce(b.bootstrap, topic_name)
    group = "bad-input"
    with BlockingConnection("127.0.0.1", b.port) as conn:
        # A generation for a group that does not exist: OffsetCommit v9+ says GROUP_ID_NOT_FOUND,
        # older versions ILLEGAL_GENERATION, as Kafka 4 answers.
        assert _commit(conn, "no-such-group", topic_name, 5, generation_id=3, member_id="m") == {0: ErrorCode.group_id_not_found}
        old = conn.send(rq.offset_commit(8, "no-such-group", {(topic_name, 0): 5}, generation_id=3, member_id="m"))
        assert [p.error_code for t in old.topics for p in t.partitions] == [ErrorCode.illegal_generation]
        assert _fetch(conn, "no-such-group", topic_name) == -1

        first = _join(conn, group)
        assert first.error_code == ErrorCode.member_id_required  # type: ignore[attr-defined]
        joined = _join(conn, group, first.member_id)  # type: ignore[attr-defined]
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1  # type: ignore[attr-defined]
        me, gen = joined.member_id, joined.generation_id  # type: ignore[attr-defined]
        sv = conn.pick_version(ApiKey.SYNC_GROUP)
        scls = conn.request_class(ApiKey.SYNC_GROUP, sv)
        sync = conn.send(make(scls, group_id=group, generation_id=gen, member_id=me, group_instance_id=None,
                              protocol_type="consumer", protocol_name="range",
                              assignments=(make(nested(scls, "SyncGroupRequestAssignment"), member_id=me, assignment=b"x"),)))
        assert sync.error_code == ErrorCode.none and sync.assignment == b"x"

        assert _commit(conn, group, topic_name, 17, generation_id=gen, member_id=me) == {0: ErrorCode.none}
        assert _commit(conn, group, topic_name, 99, generation_id=gen + 1, member_id=me) == {0: ErrorCode.illegal_generation}
        assert _commit(conn, group, topic_name, 99, generation_id=gen, member_id="stale-member") == {0: ErrorCode.unknown_member_id}
        assert _commit(conn, group, topic_name, 99, generation_id=-1, member_id="") == {0: ErrorCode.unknown_member_id}
        unknown = conn.send(rq.offset_commit(conn.pick_version(ApiKey.OFFSET_COMMIT), group, {("no-such-topic", 0): 1},
                                             generation_id=gen, member_id=me))
        assert unknown.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        hv = conn.pick_version(ApiKey.HEARTBEAT)
        hb = conn.send(make(conn.request_class(ApiKey.HEARTBEAT, hv), group_id=group, generation_id=gen,
                            member_id="stale-member", group_instance_id=None))
        assert hb.error_code == ErrorCode.unknown_member_id
        deleted = conn.send(rq.delete_groups(conn.pick_version(ApiKey.DELETE_GROUPS), [group]))
        assert deleted.results[0].error_code == ErrorCode.non_empty_group
        assert _fetch(conn, group, topic_name) == 17  # the bad commits changed nothing
    assert b.stop() == 0
    b.start()
    with BlockingConnection("127.0.0.1", b.port) as conn:
        assert _fetch(conn, group, topic_name) == 17
        described = conn.send(rq.describe_groups(conn.pick_version(ApiKey.DESCRIBE_GROUPS), [group]))
        # Reloaded with its member (Stable); nobody heartbeats, so the session timeout empties it.
        assert described.groups[0].group_state in ("Stable", "PreparingRebalance", "Empty")
        def state() -> str:
            return conn.send(rq.describe_groups(conn.pick_version(ApiKey.DESCRIBE_GROUPS), [group])).groups[0].group_state

        wait_until(lambda: state() == "Empty", timeout=30, interval=0.2, message=f"group {group} Empty")
        deleted = conn.send(rq.delete_groups(conn.pick_version(ApiKey.DELETE_GROUPS), [group]))
        assert deleted.results[0].error_code == ErrorCode.none
        assert _fetch(conn, group, topic_name) == -1
