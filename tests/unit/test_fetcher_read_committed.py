"""`kavka.client.fetcher.drop_aborted`: the consumer's read_committed walk over fetched batches
(Kafka's Fetcher: a producer is aborting from the batch that reaches its aborted-transaction
first offset until its ABORT marker), and `Fetcher.read_range_with` advancing past dropped
batches."""

from __future__ import annotations

from kavka.client.fetcher import RecordColumns, _decode_into, drop_aborted
from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.records import build_batch


def _data(base: int, values: list[bytes], pid: int = -1) -> bytes:
    return build_batch(
        [(1000, None, v) for v in values], base_offset=base, producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
        is_transactional=pid >= 0,
    )


def _marker(base: int, pid: int, kind: ControlRecordType) -> bytes:
    return build_end_txn_marker_batch(
        kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1000, base_offset=base
    )


def _values(buf: bytes, start: int, end: int) -> tuple[list[bytes | None], int]:
    cols = RecordColumns()
    nxt = _decode_into(cols, buf, start, end)
    return cols.values, nxt


def test_aborted_batches_are_dropped_and_committed_kept() -> None:
    # pid 7 aborts [0, 2), pid 8 commits [2, 3); pid 7 again commits later at 6.
    buf = b"".join([
        _data(0, [b"a0", b"a1"], pid=7),
        _data(2, [b"c0"], pid=8),
        _data(3, [b"p0"]),  # not transactional: always kept
        _marker(4, 7, ControlRecordType.ABORT),
        _marker(5, 8, ControlRecordType.COMMIT),
        _data(6, [b"c1"], pid=7),  # after its ABORT marker: a new transaction of pid 7
        _marker(7, 7, ControlRecordType.COMMIT),
    ])
    kept, past = drop_aborted(buf, [(7, 0)])
    assert past == 8
    assert _values(kept, 0, 8) == ([b"c0", b"p0", b"c1"], 8)
    # read_uncommitted decoding of the same bytes: all data, no marker rows.
    assert _values(buf, 0, 8)[0] == [b"a0", b"a1", b"c0", b"p0", b"c1"]


def test_an_aborted_transaction_starting_inside_a_later_batch_range() -> None:
    # The entry's first offset is 3; the pid-7 batch at 0 belongs to an earlier, committed transaction.
    buf = b"".join([
        _data(0, [b"c0"], pid=7),
        _marker(1, 7, ControlRecordType.COMMIT),
        _data(2, [b"x"]),
        _data(3, [b"a0", b"a1"], pid=7),
        _marker(5, 7, ControlRecordType.ABORT),
    ])
    kept, past = drop_aborted(buf, [(7, 3)])
    assert past == 6
    assert _values(kept, 0, 6)[0] == [b"c0", b"x"]


def test_a_fetch_of_only_aborted_data_still_advances() -> None:
    buf = _data(10, [b"a0", b"a1", b"a2"], pid=3)
    kept, past = drop_aborted(buf, [(3, 10)])
    assert kept == b"" and past == 13
    assert drop_aborted(b"", []) == (b"", -1)


def test_nothing_dropped_returns_the_same_bytes() -> None:
    buf = _data(0, [b"c0"], pid=5)
    assert drop_aborted(buf, [])[0] is buf
