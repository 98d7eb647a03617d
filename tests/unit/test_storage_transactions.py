"""The log side of transactions (KIP-98): markers, producer state, the LSO, the .txnindex, recovery."""

import struct

import pytest

from kavka.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    parse_end_txn_marker,
)
from kavka.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    CorruptRecordError,
    InvalidRecordError,
    build_batch,
    decode_batch,
    iter_batches,
    parse_header,
    validate_batches,
)
from kavka.storage.cleaner import first_uncleanable_offset, maybe_clean
from kavka.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kavka.storage.log_config import LogConfig
from kavka.storage.producer_state import read_snapshot, snapshot_offsets, snapshot_path
from kavka.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from kavka.storage.unified_log import Log

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


def _open(d, *, clean=True, config=None, recovery_point=0):
    return Log.open(d, config or LogConfig(), topic_id=None, recovery_point=recovery_point,
                    log_start_offset=0, clean_shutdown=clean, now_ms=0)


def _txn(pid, epoch, seq, n=2, key=None):
    return build_batch([(1000 + i, key, b"t" + bytes([i])) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def _plain(n=1):
    return build_batch([(1000 + i, None, b"p") for i in range(n)])


def _marker(kind, pid, epoch, coordinator_epoch=0):
    return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp_ms=2000)


def _end(log, kind, pid, epoch, coordinator_epoch=0):
    return log.append_as_leader(_marker(kind, pid, epoch, coordinator_epoch), leader_epoch=0, now_ms=1, allow_control=True)


def _append(log, batch):
    return log.append_as_leader(batch, leader_epoch=0, now_ms=1)


# ------------------------------------------------------------------ 1. control batches


def test_marker_bytes_are_kafkas():
    buf = _marker(COMMIT, 42, 3, coordinator_epoch=9)
    h, records = decode_batch(buf)
    assert h.attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL) == ATTR_TRANSACTIONAL | ATTR_CONTROL
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 3, -1, 1)
    assert records[0].key == struct.pack(">hh", 0, 1)
    assert records[0].value == struct.pack(">hi", 0, 9)
    assert parse_end_txn_marker(buf)[1] == EndTransactionMarker(COMMIT, 9)
    assert parse_end_txn_marker(_marker(ABORT, 42, 3))[1].is_abort


def test_marker_parsing_refuses_a_data_batch_and_skips_an_unknown_type():
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(_plain())
    unknown = build_batch([(0, struct.pack(">hh", 0, 7), struct.pack(">hi", 0, 1))], producer_id=1,
                          producer_epoch=0, is_transactional=True, is_control=True)
    assert parse_end_txn_marker(unknown)[1] is None
    short = build_batch([(0, struct.pack(">hh", 0, 0), b"\x00")], producer_id=1, producer_epoch=0,
                        is_transactional=True, is_control=True)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(short)


def test_clients_may_not_write_markers(tmp_path):
    with pytest.raises(InvalidRecordError):
        validate_batches(_marker(COMMIT, 1, 0), max_message_bytes=1 << 20)
    log = _open(tmp_path / "t-0")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(_marker(COMMIT, 1, 0), leader_epoch=0, now_ms=1)
    assert log.log_end_offset == 0
    log.close()


# ------------------------------------------------------------------ 2. producer state


def test_transaction_opens_at_its_first_batch_and_a_marker_closes_it(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _plain(3))  # 0..2
    _append(log, _txn(5, 0, 0))  # 3..4 opens
    _append(log, _txn(5, 0, 2))  # 5..6 same transaction
    state = log.producer_state
    assert state.producers[5].current_txn_first_offset == 3
    assert log.first_unstable_offset == 3
    info = _end(log, COMMIT, 5, 0)
    assert info.first_offset == 7
    assert log.first_unstable_offset is None
    assert state.producers[5].current_txn_first_offset is None
    _append(log, _txn(5, 0, 4))  # the next transaction opens at 8
    assert log.first_unstable_offset == 8
    log.close()


def test_marker_with_older_producer_epoch_is_refused(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 2, 0))
    with pytest.raises(InvalidProducerEpochError):
        _end(log, ABORT, 5, 1)
    assert log.log_end_offset == 2 and log.first_unstable_offset == 0
    _end(log, ABORT, 5, 3)  # a bumped epoch (the coordinator's abort on timeout) is fine
    assert log.first_unstable_offset is None
    assert log.producer_state.producers[5].producer_epoch == 3
    log.close()


def test_marker_from_an_older_coordinator_epoch_is_refused(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))
    _end(log, COMMIT, 5, 0, coordinator_epoch=4)
    _append(log, _txn(5, 0, 2))
    with pytest.raises(TransactionCoordinatorFencedError):
        _end(log, COMMIT, 5, 0, coordinator_epoch=3)
    assert log.first_unstable_offset == 3
    log.close()


def test_non_transactional_batch_during_a_transaction_is_refused(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))
    idem = build_batch([(1, None, b"x")], producer_id=5, producer_epoch=0, base_sequence=2)
    with pytest.raises(InvalidTxnStateError):
        _append(log, idem)
    log.close()


def test_marker_without_a_transaction_completes_nothing(tmp_path):
    log = _open(tmp_path / "t-0")
    _end(log, ABORT, 9, 0)
    assert log.first_unstable_offset is None
    assert log.segments[0].txn_index.entries == []
    log.close()


def test_open_transaction_survives_in_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    log = _open(d)
    _append(log, _txn(5, 0, 0))  # 0..1
    _append(log, _txn(6, 1, 0))  # 2..3
    _end(log, COMMIT, 6, 1, coordinator_epoch=2)  # 4
    log.close()  # writes the snapshot at 5
    snap = read_snapshot(snapshot_path(d, 5))
    assert snap.producers[5].current_txn_first_offset == 0
    assert snap.ongoing_txns == {5: 0}
    assert snap.producers[6].current_txn_first_offset is None
    assert snap.producers[6].coordinator_epoch == 2
    log = _open(d)
    assert log.first_unstable_offset == 0
    with pytest.raises(TransactionCoordinatorFencedError):
        _end(log, COMMIT, 6, 1, coordinator_epoch=1)
    log.close()


def test_producer_with_an_open_transaction_does_not_expire(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))
    _append(log, _txn(6, 0, 0))
    _end(log, COMMIT, 6, 0)
    assert log.remove_expired_producers(10**9, 1000) == 1
    assert set(log.producer_state.producers) == {5}
    log.close()


# ------------------------------------------------------------------ 3. the last stable offset


def test_last_stable_offset_is_min_of_first_unstable_and_high_watermark(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _plain(4))  # 0..3
    assert log.last_stable_offset(high_watermark=2) == 2
    _append(log, _txn(5, 0, 0))  # 4..5
    _append(log, _txn(6, 0, 0))  # 6..7
    assert log.last_stable_offset(high_watermark=8) == 4
    assert log.last_stable_offset(high_watermark=3) == 3
    _end(log, COMMIT, 5, 0)  # 8
    assert log.last_stable_offset(high_watermark=9) == 6
    _end(log, ABORT, 6, 0)  # 9
    assert log.last_stable_offset(high_watermark=10) == 10
    log.close()


# ------------------------------------------------------------------ 4. the aborted-transaction index


def test_txn_index_file_format_and_search(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert idx.entries == [] and not idx.path.exists()
    idx.append(AbortedTxn(7, 0, 10, 11))
    idx.append(AbortedTxn(8, 5, 20, 21))
    raw = idx.path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert raw[:ENTRY_SIZE] == struct.pack(">hqqqq", 0, 7, 0, 10, 11)
    again = TransactionIndex(idx.path)
    assert again.entries == [AbortedTxn(7, 0, 10, 11), AbortedTxn(8, 5, 20, 21)]
    r = again.collect_aborted_txns(11, 15)
    assert r.aborted == [AbortedTxn(8, 5, 20, 21)] and r.complete  # its LSO 21 >= 15: no later one can overlap
    r = again.collect_aborted_txns(11, 30)
    assert r.aborted == [AbortedTxn(8, 5, 20, 21)] and not r.complete
    r = again.collect_aborted_txns(0, 3)
    assert r.aborted == [AbortedTxn(7, 0, 10, 11)] and r.complete
    with pytest.raises(ValueError):
        again.append(AbortedTxn(9, 1, 20, 22))
    again.truncate_to(20)
    assert again.entries == [AbortedTxn(7, 0, 10, 11)]
    assert len(idx.path.read_bytes()) == ENTRY_SIZE
    again.truncate_to(3)
    assert not idx.path.exists()


def test_abort_writes_an_index_entry_with_the_lso_after_it(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))  # 0..1
    _append(log, _txn(6, 0, 0))  # 2..3
    _end(log, ABORT, 6, 0)  # 4: 5's transaction still open -> LSO 0
    _end(log, COMMIT, 5, 0)  # 5: commits are not indexed
    _append(log, _txn(7, 0, 0))  # 6..7
    _end(log, ABORT, 7, 0)  # 8: nothing open -> LSO 9
    idx = log.segments[0].txn_index
    assert idx.entries == [AbortedTxn(6, 2, 4, 0), AbortedTxn(7, 6, 8, 9)]
    assert TransactionIndex(idx.path).entries == idx.entries  # on disk
    assert [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, 9)] == [(6, 2), (7, 6)]
    assert log.collect_aborted_transactions(5, 6) == []
    log.close()


def test_index_entry_goes_to_the_segment_the_marker_lands_in(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))  # 0..1
    log.roll(1)
    _append(log, _plain())  # 2
    _end(log, ABORT, 5, 0)  # 3
    first, second = log.segments
    assert first.txn_index.entries == []
    assert second.txn_index.entries == [AbortedTxn(5, 0, 3, 4)]
    assert [t.first_offset for t in log.collect_aborted_transactions(0, 2)] == [0]
    log.close()


def test_truncation_and_retention_take_the_index_with_their_segment(tmp_path):
    d = tmp_path / "t-0"
    log = _open(d)
    _append(log, _txn(5, 0, 0))  # 0..1
    _end(log, ABORT, 5, 0)  # 2
    log.roll(1)
    _append(log, _txn(5, 0, 2))  # 3..4
    _end(log, ABORT, 5, 0)  # 5
    _append(log, _txn(6, 0, 0))  # 6..7
    _end(log, ABORT, 6, 0)  # 8
    second = log.segments[1]
    assert [t.last_offset for t in second.txn_index.entries] == [5, 8]
    assert log.truncate_to(8)
    assert [t.last_offset for t in second.txn_index.entries] == [5]
    assert len(second.txn_index.path.read_bytes()) == ENTRY_SIZE
    assert log.first_unstable_offset == 6  # 6's transaction is open again: its marker is gone
    first_path = log.segments[0].txn_index.path
    assert first_path.exists()
    log.maybe_increment_log_start_offset(3, "test")
    assert not first_path.exists() and not (d / (first_path.name + ".deleted")).exists()
    log.truncate_fully_and_start_at(100)
    assert not list(d.glob("*.txnindex"))
    log.close()


def test_follower_append_keeps_state_and_index_current(tmp_path):
    leader = _open(tmp_path / "a" / "t-0")
    _append(leader, _txn(5, 0, 0))
    _append(leader, _plain())
    _end(leader, ABORT, 5, 0)
    _append(leader, _txn(6, 0, 0))
    data = leader.read(0, max_bytes=1 << 20).records
    follower = _open(tmp_path / "b" / "t-0")
    follower.append_as_follower(data, now_ms=1)
    assert follower.segments[0].txn_index.entries == [AbortedTxn(5, 0, 3, 4)]
    assert follower.first_unstable_offset == 4
    leader.close()
    follower.close()


# ------------------------------------------------------------------ recovery


def _abort_log(d):
    log = _open(d)
    _append(log, _txn(5, 0, 0))  # 0..1
    _append(log, _txn(6, 0, 0))  # 2..3
    log.roll(1)  # snapshot at 4: both open
    _end(log, ABORT, 6, 0)  # 4 -> LSO 0
    _end(log, ABORT, 5, 0)  # 5 -> LSO 6
    _append(log, _txn(7, 0, 0))  # 6..7, open
    expected = log.segments[1].txn_index.entries
    assert expected == [AbortedTxn(6, 2, 4, 0), AbortedTxn(5, 0, 5, 6)]
    return log, expected


def test_corrupt_or_missing_index_is_rebuilt_after_an_unclean_stop(tmp_path):
    d = tmp_path / "t-0"
    log, expected = _abort_log(d)
    path = log.segments[1].txn_index.path
    log.flush()
    log.close()
    for p in d.glob("*.snapshot"):
        if int(p.stem) > 4:
            p.unlink()  # as if the process died before the close snapshot
    path.write_bytes(b"\x00\x07garbage")
    log = _open(d, clean=False, recovery_point=4)
    assert log.segments[1].txn_index.entries == expected
    assert log.first_unstable_offset == 6
    log.close()
    path.unlink()
    log = _open(d, clean=False, recovery_point=0)
    assert TransactionIndex(path).entries == expected
    log.close()


def test_corrupt_index_is_rebuilt_even_after_a_clean_stop(tmp_path):
    d = tmp_path / "t-0"
    log, expected = _abort_log(d)
    path = log.segments[1].txn_index.path
    log.close()
    raw = bytearray(path.read_bytes())
    raw[0:2] = b"\x00\x05"  # unknown version
    path.write_bytes(bytes(raw))
    log = _open(d, clean=True)
    assert TransactionIndex(path).entries == expected
    assert log.first_unstable_offset == 6
    log.close()


def test_lost_index_entries_after_the_snapshot_are_added_back(tmp_path):
    d = tmp_path / "t-0"
    log, expected = _abort_log(d)
    path = log.segments[1].txn_index.path
    log.close()
    for p in d.glob("*.snapshot"):
        if int(p.stem) > 4:
            p.unlink()
    path.unlink()  # a missing file reads as empty; the state rebuild from the snapshot at 4 refills it
    log = _open(d, clean=True)
    assert log.first_unstable_offset == 6
    assert log.segments[1].txn_index.entries == expected
    log.close()


def test_recovery_replays_markers_after_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    log, _ = _abort_log(d)
    log.close()
    assert snapshot_offsets(d) == [4, 8]
    snapshot_path(d, 8).unlink()
    log = _open(d, clean=False, recovery_point=0)
    state = log.producer_state
    assert state.ongoing_txns == {7: 6}
    assert state.producers[5].current_txn_first_offset is None
    log.close()


def test_marker_batch_is_parsed_from_the_segment(tmp_path):
    log = _open(tmp_path / "t-0")
    _append(log, _txn(5, 0, 0))
    _end(log, COMMIT, 5, 0, coordinator_epoch=3)
    data = log.read(0, max_bytes=1 << 20).records
    (_, h1), (pos, h2) = list(iter_batches(data))
    assert h1.is_transactional and not h1.is_control
    assert parse_header(data, pos).is_control
    assert parse_end_txn_marker(data, pos)[1] == EndTransactionMarker(COMMIT, 3)
    log.close()


def test_the_cleaner_stops_at_the_last_stable_offset(tmp_path):
    cfg = LogConfig(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    log = _open(tmp_path / "t-0", config=cfg)
    k = build_batch([(1000, b"k", b"old")])
    _append(log, k)  # 0
    _append(log, build_batch([(1000, b"k", b"new")], producer_id=5, producer_epoch=0, base_sequence=0,
                             is_transactional=True))  # 1, open
    _append(log, k)  # 2
    log.roll(1)
    assert first_uncleanable_offset(log, high_watermark=log.log_end_offset, now_ms=2) == 1
    _end(log, ABORT, 5, 0)
    log.roll(2)
    assert first_uncleanable_offset(log, high_watermark=log.log_end_offset, now_ms=3) == 4
    log.close()


def test_a_cleaned_segment_keeps_its_groups_aborted_transactions(tmp_path):
    cfg = LogConfig(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    log = _open(tmp_path / "t-0", config=cfg)
    _append(log, _txn(5, 0, 0, key=b"t5"))  # 0..1
    _end(log, ABORT, 5, 0)  # 2
    log.roll(1)
    _append(log, build_batch([(1000, b"k", b"a")]))  # 3
    _append(log, _txn(6, 0, 0, key=b"t6"))  # 4..5
    _end(log, ABORT, 6, 0)  # 6
    _append(log, build_batch([(1000, b"k", b"b")]))  # 7: shadows 3
    log.roll(2)
    _append(log, build_batch([(1000, b"x", b"tail")]))
    result = maybe_clean(log, first_dirty_offset=0, high_watermark=log.log_end_offset, now_ms=10**6, force=True)
    assert result is not None
    assert [s.base_offset for s in log.segments] == [0, 8]
    assert log.segments[0].txn_index.entries == [AbortedTxn(5, 0, 2, 3), AbortedTxn(6, 4, 6, 7)]
    assert [t.first_offset for t in log.collect_aborted_transactions(0, 8)] == [0, 4]
    assert not (tmp_path / "t-0" / "00000000000000000003.txnindex").exists()
    log.close()


def test_the_cleaner_drops_aborted_records_so_they_never_shadow_committed_ones(tmp_path):
    """Kafka's cleaner: an aborted transaction's records stay out of the offset map and out of the
    cleaned segment; a committed transaction's records are compacted like any others; markers stay."""
    cfg = LogConfig(segment_bytes=4096, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    log = _open(tmp_path / "t-0", config=cfg)
    _append(log, build_batch([(1000, b"k", b"committed")]))  # 0
    _append(log, build_batch([(1000, b"k", b"aborted")], producer_id=5, producer_epoch=0, base_sequence=0,
                             is_transactional=True))  # 1
    _end(log, ABORT, 5, 0)  # 2
    _append(log, build_batch([(1000, b"j", b"j1")], producer_id=6, producer_epoch=0, base_sequence=0,
                             is_transactional=True))  # 3
    _end(log, COMMIT, 6, 0)  # 4
    _append(log, build_batch([(1000, b"j", b"j2")]))  # 5: shadows 3
    log.roll(1)
    _append(log, build_batch([(1000, b"x", b"tail")]))  # 6, active segment
    assert maybe_clean(log, first_dirty_offset=0, high_watermark=log.log_end_offset, now_ms=10**6, force=True) is not None
    kept = [(r.offset, r.key, r.value) for r in log.replay_records()]
    assert (0, b"k", b"committed") in kept  # the aborted value at 1 did not shadow it
    assert all(off not in (1, 3) for off, _, _ in kept)  # the aborted record and the shadowed one are gone
    assert (5, b"j", b"j2") in kept
    batches = [h for _, h in iter_batches(log.segments[0].log_path.read_bytes())]
    assert [h.base_offset for h in batches if h.is_control] == [2, 4]  # both markers kept
    assert [t.first_offset for t in log.collect_aborted_transactions(0, 7)] == [1]
    log.close()


# ---------------------------------------------------------------- KIP-890 verification guard


def test_verification_guard_lets_the_verified_append_open_a_transaction(tmp_path):
    log = _open(tmp_path / "t-0")
    ps = log.producer_state
    assert ps.needs_verification(7, 0)
    guard = ps.start_verification(7, 0, 0)
    assert ps.start_verification(7, 0, 0) is guard  # one verification in flight per producer and epoch
    assert ps.verified(7, 0, guard)
    assert not ps.verified(7, 0, None) and not ps.verified(7, 1, guard)
    _append(log, _txn(7, 0, 0))
    assert not ps.needs_verification(7, 0)  # open here: later batches need no verification
    assert ps.verification_guards == {}  # used up by the batch that opened the transaction
    assert ps.verified(7, 0, None)
    # transactions v2: the next transaction's batch (bumped epoch) while this one's marker is
    # still on its way must be verified (the coordinator answers CONCURRENT_TRANSACTIONS until
    # the marker is written), never join the open transaction
    assert ps.needs_verification(7, 1)
    assert not ps.verified(7, 1, None)


def test_a_marker_between_verification_and_append_makes_the_guard_stale(tmp_path):
    """The hanging-transaction race: verified, then the coordinator aborts (marker written), then
    the verified batch arrives. Its guard is gone, so it must not open a transaction."""
    log = _open(tmp_path / "t-0")
    ps = log.producer_state
    guard = ps.start_verification(7, 0, 0)
    _end(log, ABORT, 7, 0)
    assert not ps.verified(7, 0, guard)
    again = ps.start_verification(7, 0, 0)  # a new verification takes a new guard
    assert again is not guard and ps.verified(7, 0, again) and not ps.verified(7, 0, guard)


def test_a_batch_past_one_still_to_be_verified_is_refused_on_a_fresh_partition(tmp_path):
    """Kafka's VerificationStateEntry.lowestSequence: the producer's first batch here (sequence 0)
    failed its verification with a retriable error (the coordinator busy) and the next one
    (sequence 2) passed. Taken at its word, the later batch would be appended first and the first
    one's retry refused for ever; so the later one is refused (the producer retries it) until the
    first is in."""
    log = _open(tmp_path / "t-0")
    ps = log.producer_state
    guard = ps.start_verification(7, 0, 0)
    assert ps.start_verification(7, 0, 2) is guard and guard.lowest_sequence == 0
    with pytest.raises(OutOfOrderSequenceError, match="producer 7 epoch 0: 2 while its batch at sequence 0 is still"):
        _append(log, _txn(7, 0, 2))
    assert log.log_end_offset == 0
    _append(log, _txn(7, 0, 0))
    _append(log, _txn(7, 0, 2))
    assert log.log_end_offset == 4 and ps.verification_guards == {}
    # a lower sequence verified later lowers the bar
    other = ps.start_verification(8, 0, 5)
    assert ps.start_verification(8, 0, 3) is other and other.lowest_sequence == 3
    with pytest.raises(OutOfOrderSequenceError):
        _append(log, _txn(8, 0, 5))
    _append(log, _txn(8, 0, 3))


def test_an_epoch_begun_by_a_marker_starts_at_sequence_zero(tmp_path):
    """Transactions v2: the marker of the previous transaction carries the bumped epoch, so the
    partition knows the producer's new epoch before any of its batches; the first batch of that
    epoch must still be sequence 0 (Kafka's inSequence(-1, seq)), not any sequence."""
    log = _open(tmp_path / "t-0")
    _append(log, _txn(7, 0, 0))
    _end(log, COMMIT, 7, 1)  # the v2 marker: epoch 0's transaction, written with epoch 1
    with pytest.raises(OutOfOrderSequenceError, match="producer 7 epoch 1: expected 0, got 1"):
        _append(log, _txn(7, 1, 1))
    _append(log, _txn(7, 1, 0))
    assert log.log_end_offset == 5


def test_a_newer_epoch_makes_the_guard_stale(tmp_path):
    log = _open(tmp_path / "t-0")
    ps = log.producer_state
    guard = ps.start_verification(7, 0, 0)
    _end(log, ABORT, 7, 1)  # the coordinator bumped the epoch as it aborted
    assert not ps.verified(7, 0, guard)
    newer = ps.start_verification(7, 1, 0)
    _append(log, _txn(8, 0, 0))  # another producer's transaction does not touch it
    assert ps.verified(7, 1, newer)
