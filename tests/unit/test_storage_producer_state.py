"""Idempotent producer state: duplicates answered with their first offsets, gaps and fenced epochs refused."""

import pytest

from kavka.protocol.records import build_batch
from kavka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig


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
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_batch(7, 1, 5), leader_epoch=0, now_ms=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(_batch(7, 0, 2), leader_epoch=0, now_ms=1)
    with pytest.raises(OutOfOrderSequenceError):
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
