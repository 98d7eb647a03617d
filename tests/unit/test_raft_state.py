"""The raft epoch-state table, the quorum-state file, and the crash-losing MemoryLog."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kavka.raft.replicated_log import LogEntry
from kavka.raft.state import (
    ElectionState,
    EpochState,
    FileQuorumStateStore,
    IllegalTransition,
    check_transition,
)
from kavka.testing import ManualClock, MemoryLog, SimNetwork

S = EpochState


@pytest.mark.parametrize(
    ("src", "src_epoch", "dst", "dst_epoch"),
    [
        (S.UNATTACHED, 3, S.PROSPECTIVE, 3),
        (S.PROSPECTIVE, 3, S.CANDIDATE, 4),
        (S.CANDIDATE, 4, S.LEADER, 4),
        (S.LEADER, 4, S.RESIGNED, 4),
        (S.FOLLOWER, 4, S.UNATTACHED, 4),
        (S.FOLLOWER, 4, S.FOLLOWER, 9),
        (S.LEADER, 4, S.FOLLOWER, 5),
    ],
)
def test_legal_transitions(src: EpochState, src_epoch: int, dst: EpochState, dst_epoch: int) -> None:
    check_transition(src, src_epoch, dst, dst_epoch)


@pytest.mark.parametrize(
    ("src", "src_epoch", "dst", "dst_epoch"),
    [
        (S.UNATTACHED, 3, S.LEADER, 3),  # leadership only through an election
        (S.UNATTACHED, 3, S.CANDIDATE, 4),  # a candidate only after a pre-vote
        (S.PROSPECTIVE, 3, S.CANDIDATE, 5),  # a candidate stands in exactly epoch + 1
        (S.LEADER, 4, S.FOLLOWER, 4),  # two leaders in one epoch
        (S.FOLLOWER, 4, S.FOLLOWER, 4),  # a second leader in the same epoch
        (S.FOLLOWER, 4, S.UNATTACHED, 3),  # epochs never go back
        (S.RESIGNED, 4, S.LEADER, 4),
    ],
)
def test_illegal_transitions(src: EpochState, src_epoch: int, dst: EpochState, dst_epoch: int) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(src, src_epoch, dst, dst_epoch)


def test_quorum_state_file_is_kafkas_json_and_round_trips(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path / "quorum-state", (1, 2, 3))
    assert store.read() is None
    store.write(ElectionState(epoch=7, leader_id=None, voted_id=2))
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data["leaderEpoch"] == 7 and data["leaderId"] == -1 and data["votedId"] == 2
    assert data["currentVoters"] == [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}]
    assert store.read() == ElectionState(epoch=7, leader_id=None, voted_id=2)
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_corrupt_quorum_state_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text('{"leaderEpoch": "x"}')
    with pytest.raises(RuntimeError, match="quorum-state"):
        FileQuorumStateStore(tmp_path / "quorum-state", (1,)).read()


def _entries(start: int, epoch: int, n: int) -> list[LogEntry]:
    return [LogEntry(start + i, epoch, start, b"k", b"v") for i in range(n)]


def test_memory_log_epoch_cache_truncation_and_crash() -> None:
    log = MemoryLog()
    log.append(_entries(0, 1, 3))
    log.append(_entries(3, 3, 2))
    assert (log.end_offset, log.last_epoch) == (5, 3)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)  # largest epoch <= 2 is 1, ending where 3 starts
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(9) == (3, 5)
    log.flush()
    log.append(_entries(5, 4, 2))
    log.crash()  # the unflushed epoch-4 records are gone
    assert (log.end_offset, log.last_epoch) == (5, 3)
    log.truncate_to(2)
    assert (log.end_offset, log.last_epoch, log.flushed_end_offset) == (2, 1, 2)
    with pytest.raises(ValueError):
        log.append(_entries(5, 4, 1))  # not at the log end
    with pytest.raises(ValueError):
        log.append(_entries(2, 0, 1))  # epochs never decrease


def test_sim_network_partitions_drops_and_duplicates_are_seeded() -> None:
    net = SimNetwork(random.Random(1), min_delay_ms=5, max_delay_ms=5)
    assert net.send(1, 2, 100) == [105]
    net.partition([[1], [2, 3]])
    assert net.send(1, 2, 100) == [] and net.send(2, 3, 100) == [105]
    net.heal()
    assert net.send(1, 3, 0) == [5]
    lossy = SimNetwork(random.Random(2), drop_rate=1.0)
    assert lossy.send(1, 2, 0) == []
    dup = SimNetwork(random.Random(3), duplicate_rate=1.0)
    assert len(dup.send(1, 2, 0)) == 2
    clock = ManualClock(10)
    assert clock.advance(5) == 15 and clock.advance_to(12) == 15
    with pytest.raises(ValueError):
        clock.advance(-1)
