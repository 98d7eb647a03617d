"""CreateReplicaPlacement (kavka api key 1000, KIP-879) against real processes.

Three combined nodes on three racks-as-paths (/DC1/R1, /DC2/R1, /DC3/R1) with the multi-level
placer. A broker that is not the active controller is asked: it forwards to the controller, whose
placer answers; nothing is created. ForceSimplePlacement gives the `simple` formula exactly; bad
requests get Kafka's error codes with a message; the API is advertised in ApiVersions. The CLI
(`kavka replica-placement`, `kavka reassign-partitions --generate`) asks the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from kavka.client.admin import AdminClient, NewTopic
from kavka.client.errors import KafkaError
from kavka.controller.placement import ClusterView, PlacementSpec, SimplePlacer
from kavka.protocol.api import ApiKey
from tests.broker_harness import KAVKA, Cluster
from tests.integration.helpers import unique
from tests.wait import wait_until

RACKS = {1: "/DC1/R1", 2: "/DC2/R1", 3: "/DC3/R1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(
        tmp_path_factory.mktemp("placement"),
        3,
        overrides={"broker.replica.placer": "multi-level"},
        node_overrides={i: {"broker.rack": r} for i, r in RACKS.items()},
    ).start()
    yield c
    c.stop()


def _non_controller_id(cluster: Cluster) -> int:
    with AdminClient(cluster.bootstrap) as admin:
        leader = admin.describe_quorum().leader_id
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, message="three brokers registered")
    return next(i for i in cluster.nodes if i != leader)


def _non_controller(cluster: Cluster) -> AdminClient:
    return AdminClient(cluster.nodes[_non_controller_id(cluster)].bootstrap)


def test_a_non_controller_broker_answers_with_the_controllers_placer(cluster: Cluster) -> None:
    with _non_controller(cluster) as admin:
        assert admin._any().pick_version(ApiKey.CREATE_REPLICA_PLACEMENT) == 0  # advertised in ApiVersions
        out = admin.create_replica_placement(6, 2)
        assert len(out) == 6
        for reps in out:
            assert len(reps) == 2 and len({RACKS[b].split("/")[1] for b in reps}) == 2  # two DCs each
        assert sorted(r[0] for r in out) == [1, 1, 2, 2, 3, 3]  # leaders spread over the DCs
        simple = admin.create_replica_placement(6, 2, force_simple=True)
        assert simple == SimplePlacer().place(PlacementSpec(6, 2), ClusterView(), [1, 2, 3])
        assert admin.create_replica_placement(4, 2, node_ids=[2, 3]) and all(
            sorted(r) == [2, 3] for r in admin.create_replica_placement(4, 2, node_ids=[2, 3])
        )
        assert admin.list_topics() == []  # nothing was created


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ((3, 4), 38, "larger than available brokers: 3"),  # INVALID_REPLICATION_FACTOR
        ((0, 1), 37, "Number of partitions"),  # INVALID_PARTITIONS
        ((3, 1, [1, 9]), 39, "Broker 9 is not registered"),  # INVALID_REPLICA_ASSIGNMENT
    ],
)
def test_bad_requests_get_kafkas_errors(cluster: Cluster, args, code, words) -> None:  # noqa: ANN001
    num, rf, *nodes = args
    with _non_controller(cluster) as admin:
        with pytest.raises(KafkaError) as e:
            admin.create_replica_placement(num, rf, node_ids=nodes[0] if nodes else ())
        assert e.value.code == code and words in str(e.value)


def _kavka(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    res = subprocess.run([*KAVKA, *args, "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60, env=env)
    if check and res.returncode != 0:
        raise AssertionError(f"kavka {' '.join(args)} failed: {res.stdout}{res.stderr}")
    return res


def test_cli_replica_placement_table_and_json(cluster: Cluster) -> None:
    bootstrap = cluster.nodes[_non_controller_id(cluster)].bootstrap
    doc = json.loads(_kavka(bootstrap, "replica-placement", "--partitions", "3", "--replication-factor", "2",
                            "--force-simple", "--brokers", "1,2,3", "--json").stdout)
    assert doc == {"partitions": [{"partition": p, "replicas": r}
                                  for p, r in enumerate(SimplePlacer().place(PlacementSpec(3, 2), ClusterView(), [1, 2, 3]))]}
    text = _kavka(bootstrap, "replica-placement", "--partitions", "2", "--replication-factor", "3").stdout
    assert "Partition" in text and "Leader" in text and "Replicas" in text
    res = _kavka(bootstrap, "replica-placement", "--partitions", "2", "--replication-factor", "4", check=False)
    assert res.returncode == 1 and "INVALID_REPLICATION_FACTOR" in res.stderr and "larger than available brokers: 3" in res.stderr


def test_cli_reassign_generate_asks_the_clusters_placer(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("gen")
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 4, 1)])
        wait_until(lambda: len(admin.describe_topics([topic])[0].partitions) == 4, message="topic visible")
        current = {p.partition: list(p.replicas) for p in admin.describe_topics([topic])[0].partitions}
    f = tmp_path / "topics.json"
    f.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    res = _kavka(cluster.bootstrap, "reassign-partitions", "--generate", "--topics-to-move-json-file", str(f),
                 "--broker-list", "2,3", "--disable-rack-aware")
    lines = res.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment configuration"
    cur, prop = json.loads(lines[1]), json.loads(lines[4])
    assert [(e["partition"], e["replicas"]) for e in cur["partitions"]] == sorted(current.items())
    simple = SimplePlacer().place(PlacementSpec(4, 1), ClusterView(), [2, 3])
    assert prop == {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"]}
                                                 for p, r in enumerate(simple)]}
    doc = json.loads(_kavka(cluster.bootstrap, "reassign-partitions", "--generate", "--topics-to-move-json-file", str(f),
                            "--broker-list", "1,2,3", "--json").stdout)
    spread = Counter(e["replicas"][0] for e in doc["proposed"]["partitions"])
    assert set(spread) == {1, 2, 3} and max(spread.values()) == 2  # 4 partitions over 3 DCs, balanced
    assert [(e["partition"], e["replicas"]) for e in doc["current"]["partitions"]] == sorted(current.items())


def test_key_1000_is_advertised_to_kavkas_client_only(cluster: Cluster) -> None:
    from kafka import KafkaAdminClient

    # kafka-python maps every advertised key through its ApiKey enum (0-92): key 1000 would break it.
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        keys = {int(k) for k in kp.api_versions()}
    finally:
        kp.close()
    assert ApiKey.CREATE_TOPICS in keys and ApiKey.CREATE_REPLICA_PLACEMENT not in keys
    with AdminClient(cluster.bootstrap) as admin:  # KIP-511 client_software_name "kavka"
        assert admin._any().pick_version(ApiKey.CREATE_REPLICA_PLACEMENT) == 0
