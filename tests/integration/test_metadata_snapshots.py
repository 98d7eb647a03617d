"""Metadata snapshots in a real 3-node cluster: written by every node, loaded on restart, fetched by a wiped node.

A small `metadata.log.max.record.bytes.between.snapshots` makes every node
write `.checkpoint` files under `__cluster_metadata-0/` while topics are
created. A node restarted after that rebuilds its image from its newest
snapshot (its log says so) plus the log after it; a node whose metadata log
directory was wiped (meta.properties kept) rejoins by fetching the leader's
snapshot (FetchSnapshot), since the leader's log no longer starts at 0.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from kavka.raft import snapshot as snapshots
from tests.broker_harness import BrokerProcess, Cluster
from tests.integration.helpers import ck_admin, ck_wait_topic, unique
from tests.wait import wait_until


def _metadata_dir(node: BrokerProcess) -> Path:
    return node.log_dirs[0] / "__cluster_metadata-0"


def _checkpoints(node: BrokerProcess) -> list[Path]:
    return sorted(p for p in _metadata_dir(node).glob("*.checkpoint") if snapshots.parse_file_name(p.name))


def _create_topics(bootstrap: str, names: list[str], first: int = 0) -> None:
    admin = ck_admin(bootstrap)
    futs = admin.create_topics(
        [NewTopic(n, num_partitions=2, replication_factor=1, config={"retention.ms": str(1000 + first + i)})
         for i, n in enumerate(names)],
        operation_timeout=20,
        request_timeout=30,
    )
    for f in futs.values():
        f.result(timeout=40)


def _check_topics(node: BrokerProcess, names: list[str]) -> None:
    admin = ck_admin(node.bootstrap)
    for n in names:
        ck_wait_topic(admin, n, 2)
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in (names[0], names[-1])]
    futs = admin.describe_configs(resources)
    got = {r.name: f.result(timeout=10)["retention.ms"].value for r, f in futs.items()}
    assert got == {names[0]: "1000", names[-1]: str(1000 + len(names) - 1)}


def test_snapshots_are_written_loaded_on_restart_and_fetched_by_a_wiped_node(tmp_path: Path) -> None:
    c = Cluster(tmp_path / "c", 3, overrides={"metadata.log.max.record.bytes.between.snapshots": "2048"}).start()
    try:
        names = [unique(f"snap{i}") for i in range(40)]
        for i in range(0, len(names), 10):
            _create_topics(c.bootstrap, names[i : i + 10], first=i)
        # Every node (not only the leader) writes snapshots of its committed image.
        for node in c.nodes.values():
            wait_until(lambda node=node: len(_checkpoints(node)) >= 1, timeout=20, message=f"a snapshot on node {node.node_id}")
            # The newest and one earlier once frozen (a third while a new one is being written).
            wait_until(lambda node=node: len(_checkpoints(node)) <= 2, timeout=10, message="old snapshots deleted")
            for p in _checkpoints(node):
                assert snapshots.decode(p.read_bytes())  # a whole, valid Kafka snapshot file

        # A restarted node loads its newest snapshot, then the log after it.
        node = c.nodes[2]
        node.stop()
        newest = snapshots.parse_file_name(_checkpoints(node)[-1].name)
        assert newest is not None
        node.start(timeout=60)
        loaded = [line for line in node.output if "loaded metadata snapshot" in line]
        assert loaded, node.log_text()
        assert f"{newest.end_offset:020d}-{newest.epoch:010d}" in loaded[0]
        _check_topics(node, names)

        # A node wiped of its metadata log (meta.properties kept) rejoins through FetchSnapshot.
        wiped = c.nodes[3]
        wiped.stop()
        shutil.rmtree(_metadata_dir(wiped))
        assert (wiped.log_dirs[0] / "meta.properties").exists()
        more = [unique("after") for _ in range(10)]
        _create_topics(c.nodes[1].bootstrap, more)
        wiped.start(timeout=60)
        assert any("loaded metadata snapshot" in line for line in wiped.output), wiped.log_text()
        _check_topics(wiped, names)
        _check_topics(wiped, more)
        fetched = _checkpoints(wiped)
        assert fetched, "the wiped node keeps the snapshot it fetched"
        assert snapshots.parse_file_name(fetched[0].name).end_offset > 0  # type: ignore[union-attr]
    finally:
        c.stop()
        for n in c.nodes.values():
            n.kill()
