"""KIP-392 replica selection: Kafka's RackAwareReplicaSelector and findPreferredReadReplica rules.

The selector is tested on views; `preferred_read_replica` on a real leader Partition (a Log in a
temp dir) whose followers have fetched, so the candidates come from the leader's own state: ISR,
follower log end and start offsets, the brokers' racks and liveness from the metadata image.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kavka.config import RACK_AWARE_REPLICA_SELECTOR, ConfigError, build_config, informational_keys
from kavka.metadata.image import BrokerRegistration
from kavka.protocol.records import build_batch
from kavka.replication.partition import Partition, TopicPartition
from kavka.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ClientMetadata,
    PartitionView,
    RackAwareReplicaSelector,
    ReplicaView,
    preferred_read_replica,
    replica_selector,
)
from kavka.replication.replica_state import PartitionRegistration
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000
TP = TopicPartition("t", 0)
RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def client(rack: str) -> ClientMetadata:
    return ClientMetadata(rack, "consumer-1", "127.0.0.1:5555")


# ---------------------------------------------------------------- the selector on views


def view(*replicas: ReplicaView) -> PartitionView:
    return PartitionView(tuple(replicas), replicas[0])


LEADER = ReplicaView(1, "a", 100, 0)


@pytest.mark.parametrize("rack", ["", "z"])
def test_no_rack_or_an_unknown_rack_reads_from_the_leader(rack: str) -> None:
    v = view(LEADER, ReplicaView(2, "b", 100, 0))
    assert RackAwareReplicaSelector().select(TP, client(rack), v) == LEADER


def test_the_leader_in_the_clients_rack_is_kept() -> None:
    v = view(LEADER, ReplicaView(2, "a", 100, 0))
    assert RackAwareReplicaSelector().select(TP, client("a"), v) == LEADER


def test_the_most_caught_up_replica_of_the_rack_is_chosen() -> None:
    sel = RackAwareReplicaSelector()
    behind, ahead = ReplicaView(2, "b", 90, 0), ReplicaView(4, "b", 100, 50)
    assert sel.select(TP, client("b"), view(LEADER, behind, ahead)) == ahead
    # Same log end offset: the one caught up more recently; then the larger broker id (Kafka's comparator).
    fresher = ReplicaView(2, "b", 100, 10)
    assert sel.select(TP, client("b"), view(LEADER, fresher, ahead)) == fresher
    tie = ReplicaView(2, "b", 100, 50)
    assert sel.select(TP, client("b"), view(LEADER, tie, ahead)) == ahead


def test_replica_selector_class_names() -> None:
    assert replica_selector(None) is None
    assert replica_selector("") is None
    assert isinstance(replica_selector(RACK_AWARE_REPLICA_SELECTOR), RackAwareReplicaSelector)


def test_config_accepts_kafkas_class_and_refuses_any_other() -> None:
    cfg = build_config({"node.id": "1", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    assert cfg["replica.selector.class"] == RACK_AWARE_REPLICA_SELECTOR
    assert build_config({"node.id": "1"})["replica.selector.class"] is None
    for bad in ("com.example.MySelector", "org.apache.kafka.common.replica.LeaderSelector"):
        with pytest.raises(ConfigError) as e:
            build_config({"node.id": "1", "replica.selector.class": bad})
        assert e.value.key == "replica.selector.class"
        assert RACK_AWARE_REPLICA_SELECTOR in str(e.value)
    assert "replica.selector.class" not in informational_keys()  # it has its effect


# ---------------------------------------------------------------- findPreferredReadReplica on a leader


def brokers(changes: dict[int, dict[str, bool]] | None = None) -> dict[int, BrokerRegistration]:
    out = {}
    for b, rack in RACKS.items():
        flags = {"fenced": False, **(changes or {}).get(b, {})}
        out[b] = BrokerRegistration(b, f"inc{b}", (("PLAINTEXT", "127.0.0.1", 9000 + b),), rack, (), epoch=b, **flags)
    return out


def leader(tmp_path: Path, *, isr: tuple[int, ...] = (1, 2, 3, 4), records: int = 10) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig(), topic_id="J8aAPcfLQt2bqs1JT_rMgQ", recovery_point=0,
                   log_start_offset=0, clean_shutdown=True, now_ms=NOW)
    reg = PartitionRegistration(partition_id=0, replicas=(1, 2, 3, 4), isr=isr, leader=1, leader_epoch=3, partition_epoch=5)
    p = Partition(TP, topic_id="J8aAPcfLQt2bqs1JT_rMgQ", log=log, local_broker_id=1, registration=reg,
                  high_watermark=0, now_ms=NOW)
    p.append_records_to_leader(build_batch([(NOW, b"k", b"v%d" % i) for i in range(records)]), required_acks=1,
                               now_ms=NOW)
    return p


def fetched(p: Partition, replica: int, offset: int, *, log_start: int = 0) -> None:
    p.fetch_for_follower(replica, fetch_offset=offset, last_fetched_epoch=-1, current_leader_epoch=p.leader_epoch, max_bytes=1 << 20,
                         min_one_message=True, now_ms=NOW, log_start_offset=log_start)


def pick(p: Partition, rack: str, offset: int, *, selector: object = RackAwareReplicaSelector(), image: dict | None = None) -> int:
    return preferred_read_replica(selector, p, client=client(rack), brokers=image or brokers(),  # type: ignore[arg-type]
                                  fetch_offset=offset, now_ms=NOW + 10)


def test_a_caught_up_follower_in_the_clients_rack_is_preferred(tmp_path: Path) -> None:
    p = leader(tmp_path)
    for r in (2, 3):
        fetched(p, r, 10)
    fetched(p, 4, 6)
    assert pick(p, "b", 0) == 2  # 2 and 4 are in rack b; 2 is further
    assert pick(p, "c", 5) == 3
    assert pick(p, "b", 8) == 2
    assert pick(p, "b", 10) == 2  # the end of the follower's log: it holds the offset
    assert pick(p, "a", 0) == NO_PREFERRED_REPLICA  # the leader's own rack
    assert pick(p, "", 0) == NO_PREFERRED_REPLICA
    assert pick(p, "z", 0) == NO_PREFERRED_REPLICA
    assert pick(p, "b", 0, selector=None) == NO_PREFERRED_REPLICA  # replica.selector.class unset


def test_only_followers_that_hold_the_fetch_offset(tmp_path: Path) -> None:
    p = leader(tmp_path)
    fetched(p, 3, 6, log_start=2)
    assert pick(p, "c", 6) == 3
    assert pick(p, "c", 7) == NO_PREFERRED_REPLICA  # beyond its log end
    assert pick(p, "c", 1) == NO_PREFERRED_REPLICA  # below its log start
    assert pick(p, "b", 0) == NO_PREFERRED_REPLICA  # 2 and 4 never fetched in this leadership


def test_followers_outside_the_isr_or_on_unusable_brokers_are_not_chosen(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(1, 3, 4))
    for r in (2, 3):
        fetched(p, r, 10)
    fetched(p, 4, 8)
    assert pick(p, "b", 0) == 4  # 2 is further but out of the ISR
    assert pick(p, "c", 0) == 3
    assert pick(p, "c", 0, image=brokers({3: {"fenced": True}})) == NO_PREFERRED_REPLICA
    assert pick(p, "c", 0, image=brokers({3: {"in_controlled_shutdown": True}})) == NO_PREFERRED_REPLICA
    image = brokers()
    del image[4]
    assert pick(p, "b", 0, image=image) == NO_PREFERRED_REPLICA  # unregistered


def test_a_follower_replica_redirects_nobody(tmp_path: Path) -> None:
    p = leader(tmp_path)
    fetched(p, 2, 10)
    p.apply_registration(PartitionRegistration(0, (1, 2, 3, 4), (1, 2, 3, 4), 2, 4, 6), now_ms=NOW)
    assert not p.is_leader
    assert pick(p, "b", 0) == NO_PREFERRED_REPLICA


def test_a_new_leadership_forgets_follower_positions(tmp_path: Path) -> None:
    p = leader(tmp_path)
    fetched(p, 2, 10)
    p.apply_registration(PartitionRegistration(0, (1, 2, 3, 4), (1, 2, 3, 4), 2, 4, 6), now_ms=NOW)
    p.apply_registration(PartitionRegistration(0, (1, 2, 3, 4), (1, 2, 3, 4), 1, 5, 7), now_ms=NOW)
    assert pick(p, "b", 0) == NO_PREFERRED_REPLICA  # 2 has not fetched from this leadership yet
    fetched(p, 2, 10)
    assert pick(p, "b", 0) == 2


def test_a_tiered_partition_is_served_by_its_leader(tmp_path: Path) -> None:
    """Followers cannot read remote storage, and their local log may start above the leader's."""
    p = leader(tmp_path)
    fetched(p, 2, 10)
    assert pick(p, "b", 0) == 2
    p.log.update_config(LogConfig(remote_storage_enable=True))
    assert pick(p, "b", 0) == NO_PREFERRED_REPLICA
