"""A leader proposes a caught-up follower for the ISR only if its metadata shows it eligible
(Kafka's isReplicaIsrEligible, KIP-903): unfenced, not in controlled shutdown, and of the broker
epoch its fetch carries. Otherwise the controller answers INELIGIBLE_REPLICA, the proposal is
dropped, and every later fetch (milliseconds apart) proposed it again."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kavka.metadata.image import BrokerRegistration
from kavka.protocol.records import build_batch
from kavka.replication.partition import Partition, TopicPartition
from kavka.replication.replica_manager import ReplicaManager
from kavka.replication.replica_state import PartitionRegistration
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

NOW = 1_700_000_000_000


def _leader(tmp_path: Path) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig(), topic_id="J8aAPcfLQt2bqs1JT_rMgQ", recovery_point=0,
                   log_start_offset=0, clean_shutdown=True, now_ms=NOW)
    reg = PartitionRegistration(partition_id=0, replicas=(1, 2, 3), isr=(1, 3), leader=1, leader_epoch=3, partition_epoch=5)
    p = Partition(TopicPartition("t", 0), topic_id="J8aAPcfLQt2bqs1JT_rMgQ", log=log, local_broker_id=1,
                  registration=reg, high_watermark=0, now_ms=NOW)
    p.append_records_to_leader(build_batch([(NOW, b"k", b"v%d" % i) for i in range(5)]), required_acks=1, now_ms=NOW)
    return p


def _fetch(p: Partition, offset: int, *, eligible: bool):  # noqa: ANN202
    return p.fetch_for_follower(2, fetch_offset=offset, last_fetched_epoch=-1, current_leader_epoch=3, max_bytes=1 << 20,
                                min_one_message=True, now_ms=NOW, isr_eligible=eligible)


def test_an_ineligible_caught_up_follower_is_not_proposed_and_an_eligible_one_is(tmp_path: Path) -> None:
    p = _leader(tmp_path)
    _fetch(p, 0, eligible=False)
    for _ in range(3):  # caught up, fetch after fetch: never proposed while ineligible
        assert _fetch(p, 5, eligible=False).proposal is None
    assert p.leader_state is not None and p.leader_state.pending is None
    r = _fetch(p, 5, eligible=True)
    assert r.proposal is not None and set(r.proposal.new_isr) == {1, 2, 3}


def _node(**flags: object) -> SimpleNamespace:
    reg = BrokerRegistration(2, "inc2", (("PLAINTEXT", "127.0.0.1", 9002),), None, (), epoch=40,
                             **{"fenced": False, **flags})
    return SimpleNamespace(metadata=lambda: SimpleNamespace(brokers={2: reg}))


@pytest.mark.parametrize(
    ("flags", "fetch_epoch", "eligible"),
    [
        ({}, 40, True),
        ({}, -1, True),  # a fetch before v15 carries no epoch: not checked
        ({}, 39, False),  # an earlier incarnation's epoch
        ({"fenced": True}, 40, False),
        ({"in_controlled_shutdown": True}, 40, False),
    ],
)
def test_eligibility_from_the_metadata_image(flags: dict, fetch_epoch: int, eligible: bool) -> None:
    assert ReplicaManager._isr_eligible(_node(**flags), 2, fetch_epoch) is eligible  # type: ignore[arg-type]
    assert ReplicaManager._isr_eligible(_node(**flags), 7, fetch_epoch) is False  # a broker the image does not know
