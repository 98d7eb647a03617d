"""A real 3-node KRaft cluster: combined broker,controller processes on loopback.

Each node is a voter of the metadata quorum; metadata changes reach the
active controller from any node; topics spread over every broker; the quorum
survives kill -9 of its leader and a restart of every node.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kavka.common import ErrorCode
from kavka.protocol import api
from kavka.protocol.framing import encode_entity, encode_request
from kavka.protocol.messages import make, nested
from kavka.raft import codec
from kavka.raft import messages as m
from tests.broker_harness import BrokerProcess, Cluster, free_port
from tests.integration.helpers import (
    ck_admin,
    ck_producer,
    ck_read_to_end,
    ck_wait_topic,
    recent_base_ts,
    sample_records,
    unique,
)
from tests.raw_client import RawClient, raw_call
from tests.wait import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("cluster3"), 3).start()
    yield c
    c.stop()


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = ck_admin(bootstrap).list_topics(topic=topic, timeout=10)
    return {p: md.topics[topic].partitions[p].leader for p in md.topics[topic].partitions}


def _create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = ck_admin(bootstrap)  # kept referenced until the result is in
    futs = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
        request_timeout=15,
    )
    futs[topic].result(timeout=20)


def _quorum(node: BrokerProcess, version: int = 2, topic: str = "__cluster_metadata", partition: int = 0):  # noqa: ANN202
    """DescribeQuorum through `node` (a follower asks the leader): the partition data."""
    cls = api.request_schema(55, version)
    topic_cls, part_cls = nested(cls, "TopicData"), nested(cls, "PartitionData")
    req = make(cls, topics=(make(topic_cls, topic_name=topic, partitions=(make(part_cls, partition_index=partition),)),))
    resp = raw_call(node, 55, version, req)
    [topic_data] = resp.topics
    [part] = topic_data.partitions
    if topic == "__cluster_metadata" and partition == 0:
        assert part.error_code == 0, part
    return part


def test_every_node_lists_every_broker_and_describes_one_quorum(cluster: Cluster) -> None:
    leaders = set()
    for node in cluster.nodes.values():
        md = ck_admin(node.bootstrap).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert {b.port for b in md.brokers.values()} == {n.port for n in cluster.nodes.values()}
        # As a KRaft broker does, each names a live broker (itself) as "controller": it forwards.
        assert md.controller_id in (1, 2, 3)
        for version in (0, 1, 2):
            part = _quorum(node, version)
            leaders.add((part.leader_id, part.leader_epoch))
            assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
            assert part.high_watermark > 0
        # Kafka's answer for any other topic or partition.
        assert _quorum(node, 2, "other-topic").error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert _quorum(node, 1, "__cluster_metadata", 1).error_code == 3
    assert len(leaders) == 1 and next(iter(leaders))[0] in (1, 2, 3)


def test_topics_created_from_any_node_spread_over_every_broker(cluster: Cluster) -> None:
    for node_id, node in cluster.nodes.items():
        topic = unique(f"spread{node_id}")
        # A node that is not the active controller forwards the request to it.
        _create(node.bootstrap, topic, 6)
        for other in cluster.nodes.values():
            ck_wait_topic(ck_admin(other.bootstrap), topic, 6)
        leaders = _leaders(node.bootstrap, topic)
        assert sorted(set(leaders.values())) == [1, 2, 3], leaders
        assert all(_leaders(o.bootstrap, topic) == leaders for o in cluster.nodes.values())


def test_a_duplicate_create_is_refused_by_the_controller_from_any_node(cluster: Cluster) -> None:
    topic = unique("dup")
    _create(cluster.nodes[1].bootstrap, topic, 1)
    for node in cluster.nodes.values():
        admin = ck_admin(node.bootstrap)
        futs = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)
        with pytest.raises(KafkaException) as e:
            futs[topic].result(timeout=20)
        assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"


def test_confluent_produce_and_consume_across_leaders_and_idempotence(cluster: Cluster) -> None:
    topic = unique("xleaders")
    _create(cluster.nodes[2].bootstrap, topic, 3)
    ck_wait_topic(ck_admin(cluster.bootstrap), topic, 3)
    assert len(set(_leaders(cluster.bootstrap, topic).values())) == 3
    # Idempotence needs a producer id: every node allocates blocks through the controller.
    for node in cluster.nodes.values():
        p = ck_producer(node.bootstrap, {"enable.idempotence": True})
        for part in range(3):
            for s in sample_records(20, base_ts=recent_base_ts()):
                p.produce(topic, key=s.key, value=s.value, partition=part)
        assert p.flush(30) == 0
    got = ck_read_to_end(cluster.nodes[3].bootstrap, topic, partitions=(0, 1, 2))
    assert len(got) == 3 * 3 * 20
    for part in range(3):
        offsets = [r.offset for r in got if r.partition == part]
        assert offsets == list(range(60))


def test_kafka_python_aiokafka_and_kcat_against_the_cluster(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition

    topic = unique("clients")
    _create(cluster.nodes[1].bootstrap, topic, 3)
    ck_wait_topic(ck_admin(cluster.bootstrap), topic, 3)
    prod = KafkaProducer(bootstrap_servers=cluster.nodes[3].bootstrap)
    for part in range(3):
        prod.send(topic, value=f"kp-{part}".encode(), partition=part).get(timeout=20)
    prod.close()

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.structs import TopicPartition as ATP

        p = AIOKafkaProducer(bootstrap_servers=cluster.nodes[2].bootstrap)
        await p.start()
        try:
            for part in range(3):
                await p.send_and_wait(topic, f"aio-{part}".encode(), partition=part)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=cluster.nodes[1].bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            tps = [ATP(topic, part) for part in range(3)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(out) < 6 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                out += [r.value for recs in batch.values() for r in recs]
            return out
        finally:
            await c.stop()

    values = asyncio.run(aio())
    assert sorted(values) == sorted([f"kp-{p}".encode() for p in range(3)] + [f"aio-{p}".encode() for p in range(3)])

    kc = KafkaConsumer(bootstrap_servers=cluster.nodes[2].bootstrap, consumer_timeout_ms=3000)
    kc.assign([TopicPartition(topic, p) for p in range(3)])
    kc.seek_to_beginning()
    assert len(list(kc)) == 6
    kc.close()

    out = subprocess.run(["kcat", "-b", cluster.nodes[3].bootstrap, "-L", "-t", topic], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert " 3 brokers:" in out.stdout
    for node_id in (1, 2, 3):
        assert f"broker {node_id} at 127.0.0.1:{cluster.nodes[node_id].port}" in out.stdout


def test_configs_altered_through_one_node_are_seen_by_every_node(cluster: Cluster) -> None:
    topic = unique("cfg")
    _create(cluster.nodes[1].bootstrap, topic, 1)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)
    ])
    admin = ck_admin(cluster.nodes[3].bootstrap)
    admin.incremental_alter_configs([res])[res].result(timeout=20)

    def seen(node: BrokerProcess) -> bool:
        admin = ck_admin(node.bootstrap)
        [cfg] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        return cfg.result(timeout=10)["retention.ms"].value == "123456"

    for node in cluster.nodes.values():
        wait_until(lambda n=node: seen(n), timeout=10, message=f"retention.ms on node {node.node_id}")


def test_raft_rpcs_from_another_cluster_are_refused(cluster: Cluster) -> None:
    req = m.VoteRequest(
        cluster_id="AAAAAAAAAAAAAAAAAAAAAA", candidate_epoch=99, candidate_id=1,
        last_offset_epoch=0, last_offset=0, pre_vote=True,
    )
    entity = codec.encode(req, destination=2)
    frame = encode_request(
        api_key=entity.__api_key__, api_version=entity.__version__, correlation_id=5,
        client_id="intruder", body=encode_entity(entity), flexible=True,
    )
    with RawClient(cluster.controller_ports[2]) as c:
        c.send_bytes(frame)
        response_frame = c.read_frame()  # ConnectionError: closed without an answer
    from kavka.protocol.framing import decode_body

    resp = codec.decode(decode_body(codec.RESPONSE_SCHEMA[type(entity)], response_frame, 5), request=req)
    assert resp.error_code == ErrorCode.inconsistent_cluster_id
    # ...and the quorum did not move to the intruder's epoch.
    assert _quorum(cluster.nodes[2]).leader_epoch < 99


def _controller(node: BrokerProcess) -> int:
    return _quorum(node).leader_id


def test_kill_9_of_the_active_controller_then_every_node_restarts(tmp_path: Path) -> None:
    c = Cluster(tmp_path / "c", 3).start()
    try:
        first = c.nodes[1]
        leader = wait_until(lambda: _controller(first), timeout=20, message="an active controller")
        before = unique("before")
        _create(c.nodes[leader].bootstrap, before, 3, {"retention.ms": "7654321"})
        ck_wait_topic(ck_admin(c.bootstrap), before, 3)
        p = ck_producer(c.bootstrap, {"enable.idempotence": True})
        for i in range(90):
            p.produce(before, value=f"v{i}".encode(), partition=i % 3)
        assert p.flush(30) == 0
        c.nodes[leader].kill()
        survivors = [n for i, n in c.nodes.items() if i != leader]
        killed_at = time.monotonic()
        after = unique("after")
        # The next CreateTopics through a survivor succeeds once a new controller is elected.
        def created() -> bool:
            try:
                _create(survivors[0].bootstrap, after, 2)
                return True
            except KafkaException as e:
                if e.args[0].name() == "TOPIC_ALREADY_EXISTS":
                    return True
                raise
        wait_until(created, timeout=10, interval=0.2, message="CreateTopics after the controller's kill -9")
        assert time.monotonic() - killed_at < 10
        new_leader = _controller(survivors[0])
        assert new_leader != leader and new_leader in c.nodes
        # The killed node comes back as a follower and learns what it missed.
        c.nodes[leader].start(timeout=60)
        ck_wait_topic(ck_admin(c.nodes[leader].bootstrap), after, 2)
        assert _controller(c.nodes[leader]) == new_leader
        assert any("raft Follower" in line for line in c.nodes[leader].output)
        # Every node restarts; topics and their configs are all still there.
        c.stop()
        c.start(timeout=60)
        for node in c.nodes.values():
            admin = ck_admin(node.bootstrap)
            ck_wait_topic(admin, before, 3)
            ck_wait_topic(admin, after, 2)
        admin = ck_admin(c.nodes[1].bootstrap)
        [cfg] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, before)]).values()
        assert cfg.result(timeout=10)["retention.ms"].value == "7654321"
        # Every record written before the kill is back, at its offset, on the partition it went to.
        got = ck_read_to_end(c.nodes[2].bootstrap, before, partitions=(0, 1, 2))
        for part in range(3):
            recs = [r for r in got if r.partition == part]
            assert [r.offset for r in recs] == list(range(30))
            assert [r.value for r in recs] == [f"v{i}".encode() for i in range(part, 90, 3)]
    finally:
        c.stop()
        for n in c.nodes.values():
            n.kill()


def test_a_voter_set_that_does_not_match_the_quorum_state_is_refused(tmp_path: Path) -> None:
    ctl = free_port()
    b = BrokerProcess(tmp_path / "n1", overrides={"controller.quorum.voters": f"1@127.0.0.1:{ctl}"})
    b.start()
    b.stop()
    other = free_port()
    props = b.config_file.read_text().replace(
        f"controller.quorum.voters=1@127.0.0.1:{ctl}",
        f"controller.quorum.voters=1@127.0.0.1:{ctl},2@127.0.0.1:{other}",
    ).replace(f"listeners=PLAINTEXT://127.0.0.1:{b.port}", f"listeners=PLAINTEXT://127.0.0.1:{b.port},CONTROLLER://127.0.0.1:{ctl}")
    b.config_file.write_text(props)
    with pytest.raises(RuntimeError) as e:
        b.start(timeout=30)
    assert "controller.quorum.voters" in str(e.value) and "quorum-state" in str(e.value)


def test_consumer_groups_find_their_coordinator_on_any_node(cluster: Cluster) -> None:
    from confluent_kafka import Consumer

    topic = unique("groups")
    _create(cluster.nodes[1].bootstrap, topic, 3)
    ck_wait_topic(ck_admin(cluster.bootstrap), topic, 3)
    p = ck_producer(cluster.nodes[2].bootstrap)
    for i in range(30):
        p.produce(topic, value=str(i).encode(), partition=i % 3)
    assert p.flush(30) == 0

    def consume(group: str, bootstrap: str, want: int) -> list[int]:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        try:
            c.subscribe([topic])
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < want and time.monotonic() < deadline:
                msg = c.poll(0.5)
                if msg is None or msg.error():
                    continue
                got.append(int(msg.value()))
            c.commit(asynchronous=False)
            return got
        finally:
            c.close()

    coordinators = set()
    for i in range(6):
        group = unique(f"g{i}")
        node = cluster.nodes[1 + i % 3]
        assert sorted(consume(group, node.bootstrap, 30)) == list(range(30))
        # The committed offsets are kept by the coordinator: a new member resumes at the end.
        admin = ck_admin(cluster.nodes[3].bootstrap)
        [fut] = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)]
        ).values()
        offsets = {tp.partition: tp.offset for tp in fut.result(timeout=20).topic_partitions if tp.topic == topic}
        assert offsets == {0: 10, 1: 10, 2: 10}
        desc = admin.describe_consumer_groups([group])[group].result(timeout=20)
        coordinators.add(desc.coordinator.id)
    # Six groups hash onto partitions led by more than one broker.
    assert len(coordinators) >= 2, coordinators


def test_garbage_on_the_controller_listener_closes_only_that_connection(cluster: Cluster) -> None:
    port = cluster.controller_ports[1]
    for payload in (b"\x00\x00\x00\x08" + b"\xff" * 8,  # a frame that is no request
                    struct.pack(">ihhi", 10, 19, 99, 1) + b"\x00\x00"):  # CreateTopics at a version nodes never speak
        with RawClient(port) as c:
            c.send_bytes(payload)
            assert c.sock.recv(100) == b"", "the connection should be closed without an answer"
    # The node and the quorum are unharmed: metadata changes still go through it.
    topic = unique("aftergarbage")
    _create(cluster.nodes[1].bootstrap, topic, 2)
    ck_wait_topic(ck_admin(cluster.nodes[1].bootstrap), topic, 2)
    assert _quorum(cluster.nodes[1]).high_watermark > 0
