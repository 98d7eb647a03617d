"""CreateReplicaPlacement (kavka api key 1000, KIP-879) against real processes.

Three combined nodes on three racks-as-paths (/DC1/R1, /DC2/R1, /DC3/R1) with the multi-level
placer. A broker that is not the active controller is asked: it forwards to the controller, whose
placer answers; nothing is created. ForceSimplePlacement gives the `simple` formula exactly; bad
requests get Kafka's error codes with a message; the API is advertised in ApiVersions.
"""

from __future__ import annotations

import pytest

from kavka.client.admin import AdminClient
from kavka.client.errors import KafkaError
from kavka.controller.placement import ClusterView, PlacementSpec, SimplePlacer
from kavka.protocol.api import ApiKey
from tests.broker_harness import Cluster, wait_until

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


def _non_controller(cluster: Cluster) -> AdminClient:
    with AdminClient(cluster.bootstrap) as admin:
        leader = admin.describe_quorum().leader_id
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, message="three brokers registered")
    other = next(i for i in cluster.nodes if i != leader)
    return AdminClient(cluster.nodes[other].bootstrap)


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
