"""The cleaner and transaction markers (Kafka's CleanedTransactionMetadata, KIP-534): aborted data
goes at the first pass; a marker goes once its transaction's data is all gone and
delete.retention.ms has passed since a pass stamped its delete horizon; the .txnindex follows."""

from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.records import (
    ATTR_CONTROL,
    batch_crc_ok,
    build_batch,
    decode_batch,
    iter_batches,
)
from kavka.storage.cleaner import maybe_clean
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT
RETENTION = 50_000
DELETE_HORIZON_BIT = 0x40  # record batch v2 attributes, KIP-534


def _open(d, segment_bytes=4096):
    cfg = LogConfig(segment_bytes=segment_bytes, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0,
                    delete_retention_ms=RETENTION)
    return Log.open(d, cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=0)


def _txn(log, pid, seq, key, value=b"v"):
    batch = build_batch([(1000, key, value)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                        is_transactional=True)
    return log.append_as_leader(batch, leader_epoch=0, now_ms=1).first_offset


def _plain(log, key, value=b"v"):
    return log.append_as_leader(build_batch([(1000, key, value)]), leader_epoch=0, now_ms=1).first_offset


def _end(log, kind, pid):
    marker = build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                        timestamp_ms=2000)
    return log.append_as_leader(marker, leader_epoch=0, now_ms=1, allow_control=True).first_offset


def _tail(log):
    log.roll(1)
    _plain(log, b"tail")  # the active segment: never cleaned


def _clean(log, now):
    return maybe_clean(log, first_dirty_offset=0, high_watermark=log.log_end_offset, now_ms=now, force=True)


def _batches(log):
    out = []
    for seg in log.segments:
        data = seg.log_path.read_bytes()
        out += [(data, pos, h) for pos, h in iter_batches(data)]
    return out


def _markers(log):
    """offset -> header of every control batch in the log."""
    return {h.base_offset: h for _, _, h in _batches(log) if h.is_control}


def _read_committed(log):
    """(offset, key, value) a read_committed consumer gets from offset 0: the Java consumer's
    filter, driven by the aborted transactions the broker would list (the .txnindex)."""
    pending = sorted(log.collect_aborted_transactions(0, log.log_end_offset), key=lambda t: t.first_offset)
    aborting: set[int] = set()
    out = []
    for data, pos, h in _batches(log):
        while pending and pending[0].first_offset <= h.last_offset:
            aborting.add(pending.pop(0).producer_id)
        _, records = decode_batch(data, pos)
        if h.is_control:
            if records and records[0].key is not None and records[0].key[3] == ABORT:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        out += [(r.offset, r.key, r.value) for r in records]
    return out


def test_aborted_data_goes_first_and_its_marker_only_after_the_delete_horizon(tmp_path):
    log = _open(tmp_path / "t-0")
    _plain(log, b"k", b"committed")  # 0
    _txn(log, 5, 0, b"k", b"aborted")  # 1
    abort = _end(log, ABORT, 5)  # 2
    _tail(log)
    assert [t.first_offset for t in log.collect_aborted_transactions(0, 3)] == [1]

    # Pass 1: the data goes, the marker and its index entry stay (they still covered data).
    assert _clean(log, 10_000).records_removed == 1
    assert abort in _markers(log) and not _markers(log)[abort].has_delete_horizon
    assert [t.first_offset for t in log.segments[0].txn_index.entries] == [1]
    assert _read_committed(log)[:1] == [(0, b"k", b"committed")]

    # Pass 2: nothing of the transaction is left: the marker gets its delete horizon, the entry goes.
    _clean(log, 20_000)
    marker = _markers(log)[abort]
    assert marker.has_delete_horizon and marker.base_timestamp == 20_000 + RETENTION
    assert marker.attributes & DELETE_HORIZON_BIT and marker.attributes & ATTR_CONTROL
    data, pos, header = next(b for b in _batches(log) if b[2].base_offset == abort)
    assert batch_crc_ok(data, pos, header)
    assert log.segments[0].txn_index.entries == []

    # Before the horizon it stays; at the horizon it goes.
    _clean(log, 20_000 + RETENTION - 1)
    assert abort in _markers(log)
    _clean(log, 20_000 + RETENTION)
    assert abort not in _markers(log)
    assert [(o, k, v) for o, k, v in _read_committed(log)] == [(0, b"k", b"committed"), (3, b"tail", b"v")]
    log.close()


def test_a_commit_marker_goes_after_its_records_are_all_shadowed_and_the_horizon(tmp_path):
    log = _open(tmp_path / "t-0")
    _txn(log, 6, 0, b"j", b"j1")  # 0
    commit = _end(log, COMMIT, 6)  # 1
    _plain(log, b"j", b"j2")  # 2: shadows 0
    _tail(log)
    _clean(log, 10_000)  # the record goes; the marker still saw it in this pass
    assert commit in _markers(log) and not _markers(log)[commit].has_delete_horizon
    _clean(log, 20_000)
    assert _markers(log)[commit].base_timestamp == 20_000 + RETENTION
    _clean(log, 20_000 + RETENTION - 1)
    assert commit in _markers(log)
    _clean(log, 20_000 + RETENTION)
    assert _markers(log) == {}
    assert _read_committed(log) == [(2, b"j", b"j2"), (3, b"tail", b"v")]
    log.close()


def test_a_marker_whose_transaction_keeps_records_is_kept(tmp_path):
    log = _open(tmp_path / "t-0")
    _txn(log, 7, 0, b"m", b"m1")  # 0: the latest for m, kept
    commit = _end(log, COMMIT, 7)  # 1
    _txn(log, 8, 0, b"n", b"n1")  # 2: aborted, but...
    _txn(log, 8, 1, b"n", b"n2")  # 3
    abort = _end(log, ABORT, 8)  # 4
    _tail(log)
    for now in (10_000, 20_000, 10**9, 2 * 10**9):
        _clean(log, now)
        markers = _markers(log)
        assert commit in markers and not markers[commit].has_delete_horizon
    assert abort not in _markers(log)
    assert _read_committed(log) == [(0, b"m", b"m1"), (5, b"tail", b"v")]
    log.close()


def test_read_committed_never_sees_aborted_data_across_cleaning_groups(tmp_path):
    """The aborted data and its marker sit in different segments that do not merge (each fills
    segment.bytes), so different groups of the pass: the data must go before the marker, and the
    marker's index entry must stay as long as any of that data is there."""
    log = _open(tmp_path / "t-0", segment_bytes=4096)
    big = b"x" * 2500
    _plain(log, b"k", b"committed")  # 0
    _txn(log, 9, 0, b"k", b"aborted-" + big)  # 1
    _txn(log, 10, 0, b"c", b"c1")  # 2: committed below
    log.roll(1)
    _plain(log, b"pad", big)  # 3
    abort = _end(log, ABORT, 9)  # 4
    commit = _end(log, COMMIT, 10)  # 5
    _plain(log, b"k2", b"v")  # 6
    _tail(log)
    assert len(log.segments) == 3
    expected = [(0, b"k", b"committed"), (2, b"c", b"c1"), (3, b"pad", big), (6, b"k2", b"v"), (7, b"tail", b"v")]
    assert _read_committed(log) == expected
    for now in (10_000, 20_000, 20_000 + RETENTION, 10**9):
        _clean(log, now)
        assert _read_committed(log) == expected
        assert all(r.value is None or not r.value.startswith(b"aborted") for r in log.replay_records())
    assert abort not in _markers(log)
    assert commit in _markers(log)  # its transaction's record at 2 is still there
    log.close()


def test_a_cleaned_log_reopens_the_same_after_an_unclean_stop(tmp_path):
    """Recovery rebuilds the .txnindex and producer state from the cleaned log (markers without
    data, stamped markers, removed markers): read_committed and the LSO are unchanged."""
    d = tmp_path / "t-0"
    log = _open(d)
    _plain(log, b"k", b"committed")  # 0
    _txn(log, 5, 0, b"k", b"aborted")  # 1
    _end(log, ABORT, 5)  # 2
    _txn(log, 6, 0, b"j", b"j1")  # 3
    _end(log, COMMIT, 6)  # 4
    _txn(log, 7, 0, b"m", b"m1")  # 5
    _end(log, ABORT, 7)  # 6
    _tail(log)
    _clean(log, 10_000)
    _clean(log, 20_000)
    expected = _read_committed(log)
    assert expected == [(0, b"k", b"committed"), (3, b"j", b"j1"), (7, b"tail", b"v")]
    lso = log.last_stable_offset(log.log_end_offset)
    log.close()
    cfg = log.config
    again = Log.open(d, cfg, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=False, now_ms=0)
    assert _read_committed(again) == expected
    assert again.last_stable_offset(again.log_end_offset) == lso == again.log_end_offset
    again.close()
