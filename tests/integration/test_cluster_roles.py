"""Separate roles, as in a production KRaft cluster: three controller-only voters and two broker-only
nodes that follow the metadata log as observers (process.roles=controller / process.roles=broker).

Brokers register with and heartbeat the active controller over its listener; topics land on the
brokers only; clients produce and consume through the brokers; kill -9 of the active controller
elects another and the next CreateTopics through a broker succeeds; DescribeQuorum shows the
controllers as voters and the brokers as observers; bad role configs stop startup naming the key.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kavka.client.admin import AdminClient
from tests.broker_harness import BrokerProcess, Cluster
from tests.integration.helpers import (
    ck_admin,
    ck_create_topic,
    ck_producer,
    ck_read_to_end,
    unique,
)
from tests.wait import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("roles"), 5, controllers=3).start()
    yield c
    c.stop()


def _quorum(bootstrap: str):  # noqa: ANN202
    admin = AdminClient(bootstrap)
    try:
        return admin.describe_quorum()
    finally:
        admin.close()


def test_brokers_serve_clients_and_controllers_only_the_quorum(cluster: Cluster) -> None:
    md = ck_admin(cluster.bootstrap).list_topics(timeout=10)
    assert sorted(md.brokers) == [4, 5]  # controllers never register as brokers
    q = _quorum(cluster.nodes[4].bootstrap)
    assert q.leader_id in (1, 2, 3)
    assert sorted(v.node_id for v in q.voters) == [1, 2, 3]
    topic = unique("roles")
    ck_create_topic(ck_admin(cluster.nodes[5].bootstrap), topic, 4)
    leaders = {p.leader for p in ck_admin(cluster.bootstrap).list_topics(topic=topic, timeout=10).topics[topic].partitions.values()}
    assert leaders == {4, 5}
    p = ck_producer(cluster.bootstrap)
    for i in range(40):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 4)
    assert p.flush(20) == 0
    got = ck_read_to_end(cluster.bootstrap, topic, [0, 1, 2, 3])
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(40))
    for i in (1, 2, 3):
        assert any("controller-only node" in line for line in cluster.nodes[i].output)


def test_describe_quorum_lists_the_brokers_as_observers(cluster: Cluster) -> None:
    def observers() -> list[int]:
        return sorted(o.node_id for o in _quorum(cluster.nodes[4].bootstrap).observers)

    wait_until(lambda: observers() == [4, 5], timeout=10, message="both brokers listed as observers")


def test_killing_the_active_controller_elects_another(cluster: Cluster) -> None:
    leader = _quorum(cluster.bootstrap).leader_id
    cluster.nodes[leader].kill()
    killed = time.monotonic()
    topic = unique("after-kill")

    def created() -> bool:
        ck_create_topic(ck_admin(cluster.nodes[4].bootstrap), topic, 2)
        return True

    wait_until(created, timeout=10, message="CreateTopics through a broker after the controller died")
    assert time.monotonic() - killed < 10
    new_leader = _quorum(cluster.bootstrap).leader_id
    assert new_leader in (1, 2, 3) and new_leader != leader
    cluster.nodes[leader].start()
    wait_until(lambda: sorted(v.node_id for v in _quorum(cluster.bootstrap).voters) == [1, 2, 3], timeout=10)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:1"}, "controller.quorum.voters"),
        ({"process.roles": "broker", "controller.quorum.voters": "2@127.0.0.1:1",
          "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"}, "listeners"),
        ({"process.roles": "controller", "controller.quorum.voters": "1@127.0.0.1:1",
          "listeners": "PLAINTEXT://127.0.0.1:0"}, "controller.listener.names"),
        ({"process.roles": "broker"}, "controller.quorum.voters"),
    ],
)
def test_bad_role_configs_stop_startup_naming_the_key(tmp_path: Path, props: dict[str, str], key: str) -> None:
    b = BrokerProcess(tmp_path / "bad", node_id=1, overrides=props)
    with pytest.raises(RuntimeError) as e:
        b.start(timeout=30)  # `kavka storage format` and startup both refuse the config
    assert key in str(e.value), str(e.value)
