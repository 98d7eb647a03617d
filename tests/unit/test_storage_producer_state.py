"""Idempotent producer state: duplicates answered with their first offsets, gaps and fenced epochs refused."""

import pytest

from kavka.protocol.records import build_batch
from kavka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log


def _batch(pid, epoch, seq, n=2, tag=b"v"):
    return build_batch([(1000 + i, None, tag + bytes([i])) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.fixture
def log(tmp_path):
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig(), topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    yield lg
    lg.close()


def test_retried_batch_is_not_written_twice(log):
    first = log.append_as_leader(_batch(7, 0, 0), leader_epoch=0, now_ms=1)
    log.append_as_leader(_batch(7, 0, 2), leader_epoch=0, now_ms=1)
    again = log.append_as_leader(_batch(7, 0, 0), leader_epoch=0, now_ms=1)
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 1)
    assert log.log_end_offset == 4


def test_gap_and_fenced_epoch_are_refused_and_nothing_is_written(log):
    log.append_as_leader(_batch(7, 1, 0), leader_epoch=0, now_ms=1)
    # (the messages name what the broker logs of a refusal: producer, epoch, expected and received)
    with pytest.raises(OutOfOrderSequenceError, match="producer 7 epoch 1: expected 2, got 5"):
        log.append_as_leader(_batch(7, 1, 5), leader_epoch=0, now_ms=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(_batch(7, 0, 2), leader_epoch=0, now_ms=1)
    with pytest.raises(OutOfOrderSequenceError, match=r"producer 7 epoch 2 \(current epoch 1\).* must be 0, got 3"):
        log.append_as_leader(_batch(7, 2, 3), leader_epoch=0, now_ms=1)  # new epoch must start at 0
    assert log.log_end_offset == 2
    log.append_as_leader(_batch(7, 2, 0), leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 4


def test_state_is_rebuilt_from_the_log_after_reopen(tmp_path):
    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig(), topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    for seq in range(0, 10, 2):
        lg.append_as_leader(_batch(3, 0, seq), leader_epoch=0, now_ms=1)
    lg.close()
    lg = Log.open(d, LogConfig(), topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=0)
    dup = lg.append_as_leader(_batch(3, 0, 8), leader_epoch=0, now_ms=1)
    assert (dup.first_offset, dup.last_offset) == (8, 9)
    assert lg.log_end_offset == 10
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(_batch(3, 0, 11), leader_epoch=0, now_ms=1)
    lg.append_as_leader(_batch(3, 0, 10), leader_epoch=0, now_ms=1)
    assert lg.log_end_offset == 12
    lg.close()


def test_non_idempotent_batches_are_untouched(log):
    b = build_batch([(1, b"k", b"v")])
    log.append_as_leader(b, leader_epoch=0, now_ms=1)
    log.append_as_leader(b, leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 2


def test_snapshot_keeps_dedup_after_the_producers_batches_are_gone(tmp_path):
    # Small segments: every append rolls, and each roll writes a snapshot.
    cfg = LogConfig(segment_bytes=100)
    d = tmp_path / "t-0"
    lg = Log.open(d, cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    for seq in range(0, 6, 2):
        lg.append_as_leader(_batch(5, 0, seq), leader_epoch=0, now_ms=1)
    for i in range(3):  # another, non-idempotent writer after it
        lg.append_as_leader(build_batch([(1, b"k", bytes([i]) * 20)]), leader_epoch=0, now_ms=1)
    lg.close()
    snaps = sorted(p.name for p in d.glob("*.snapshot"))
    assert snaps and snaps[-1] == f"{lg.log_end_offset:020d}.snapshot"
    leo = lg.log_end_offset
    lg = Log.open(d, cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=0)
    # Retention takes every segment that holds producer 5's batches.
    assert lg.maybe_increment_log_start_offset(6, "test")
    assert all(s.base_offset >= 6 for s in lg.segments)
    dup = lg.append_as_leader(_batch(5, 0, 4), leader_epoch=0, now_ms=1)
    assert (dup.first_offset, dup.last_offset) == (4, 5) and lg.log_end_offset == leo  # answered, not written
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(_batch(5, 0, 9), leader_epoch=0, now_ms=1)
    lg.append_as_leader(_batch(5, 0, 6), leader_epoch=0, now_ms=1)
    assert lg.log_end_offset == leo + 2
    lg.close()


def test_snapshot_above_the_recovered_log_end_and_a_corrupt_one_are_ignored(tmp_path):
    from kavka.protocol.records import parse_header
    from kavka.storage.producer_state import ProducerStateManager, snapshot_path, write_snapshot

    d = tmp_path / "t-0"
    lg = Log.open(d, LogConfig(), topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    lg.append_as_leader(_batch(9, 0, 0), leader_epoch=0, now_ms=1)
    lg.close()
    stale = ProducerStateManager()  # claims producer 9 is at sequence 99, from a log that no longer exists
    stale.update(parse_header(_batch(9, 0, 98)))
    write_snapshot(d, 1000, stale)
    snapshot_path(d, 1).write_bytes(b"\x00\x01garbage")
    lg = Log.open(d, LogConfig(), topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    lg.append_as_leader(_batch(9, 0, 2), leader_epoch=0, now_ms=1)  # in sequence with the log, not the stale snapshot
    assert lg.log_end_offset == 4
    assert not snapshot_path(d, 1000).exists()
    lg.close()


def test_producer_ids_expire_after_their_last_batch(log):
    # Batch timestamps: 1000..1001 (see _batch); producer 8 writes later ones.
    log.append_as_leader(_batch(7, 0, 0), leader_epoch=0, now_ms=1)
    log.append_as_leader(build_batch([(5000, None, b"x")], producer_id=8, producer_epoch=0, base_sequence=0),
                         leader_epoch=0, now_ms=1)
    assert log.remove_expired_producers(now_ms=1001 + 999, expiration_ms=1000) == 0
    assert log.remove_expired_producers(now_ms=1001 + 1000, expiration_ms=1000) == 1  # Kafka's >=
    assert set(log.producer_state.producers) == {8}
    # An expired producer is a stranger now: a gap is taken at its word, as after retention.
    log.append_as_leader(_batch(7, 0, 10), leader_epoch=0, now_ms=1)
    assert log.producer_state.producers[7].last_seq == 11


def test_coordinator_transactional_batches_carry_no_sequence(log):
    """The group coordinator's TxnOffsetCommit batches (allow_control: Kafka's AppendOrigin.COORDINATOR)
    have no sequence: each is taken, the transaction stays open until its marker, an older epoch is
    refused; a client may not send such a batch."""
    from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
    from kavka.protocol.records import InvalidRecordError

    def txn(epoch: int) -> bytes:
        return build_batch([(1000, b"k", b"v")], producer_id=9, producer_epoch=epoch, is_transactional=True)

    with pytest.raises(InvalidRecordError):
        log.append_as_leader(txn(3), leader_epoch=0, now_ms=1)
    log.append_as_leader(txn(3), leader_epoch=0, now_ms=1, allow_control=True)
    log.append_as_leader(txn(3), leader_epoch=0, now_ms=1, allow_control=True)
    assert log.log_end_offset == 2 and log.first_unstable_offset == 0
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn(2), leader_epoch=0, now_ms=1, allow_control=True)
    marker = build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=9, producer_epoch=3,
                                        coordinator_epoch=0, timestamp_ms=1)
    log.append_as_leader(marker, leader_epoch=0, now_ms=1, allow_control=True)
    assert log.first_unstable_offset is None
    got = [(h.is_transactional, h.is_control, h.producer_id, [r.offset for r in rs]) for h, rs in log.replay_batches()]
    assert got == [(True, False, 9, [0]), (True, False, 9, [1]), (True, True, 9, [2])]
