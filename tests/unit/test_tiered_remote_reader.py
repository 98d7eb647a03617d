"""Remote reads: every offset of copied segments read back through the local-dir backend, max_bytes
and min-one-message, many partitions in one call without blocking the event loop, byte-limited
caches."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

from kavka.protocol.records import decode_batch, iter_batches
from kavka.storage.txn_index import AbortedTxn, TransactionIndex
from kavka.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from kavka.tiered.backends.local_dir import LocalDirRemoteStorageManager
from kavka.tiered.remote_index import build_remote_indexes
from kavka.tiered.remote_reader import ByteLRU, RemoteFetch, RemoteLogReader
from tests.unit.tiered_segments import write_segment


class CountingRSM(LocalDirRemoteStorageManager):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.gate: threading.Event | None = None
        self.waiting = threading.Semaphore(0)

    def fetch_log_segment(self, metadata, start_position, end_position=None):  # noqa: ANN001, ANN201
        self.calls += 1
        if self.gate is not None:
            self.waiting.release()
            assert self.gate.wait(30)
        return super().fetch_log_segment(metadata, start_position, end_position)


def copied_segment(rsm: CountingRSM, tmp: Path, partition: int, base: int = 500,
                   batches: int = 60, txns: list[AbortedTxn] | None = None) -> tuple[RemoteLogSegmentMetadata, bytes]:
    d = tmp / f"p{partition}"
    log_path, raw = write_segment(d, base, batches)
    sid = RemoteLogSegmentId(TopicIdPartition(uuid.UUID(int=1), "t", partition), uuid.uuid4())
    idx = build_remote_indexes(log_path, base_offset=base, segment_id=sid.id, out_dir=d,
                               interval_bytes=1500)
    for suffix in (".index", ".timeindex", ".snapshot"):
        (d / f"{base:020d}{suffix}").write_bytes(b"x")
    stem = d / f"{base:020d}"
    txn_index = None
    if txns is not None:
        index = TransactionIndex(Path(f"{stem}.txnindex"))
        for t in txns:
            index.append(t)
        txn_index = index.path
    rsm.copy_log_segment_data(
        md := RemoteLogSegmentMetadata(
            segment_id=sid, start_offset=base, end_offset=base + 3 * batches - 1,
            max_timestamp_ms=0, broker_id=1, event_timestamp_ms=0,
            segment_size_in_bytes=log_path.stat().st_size),
        LogSegmentData(log_segment=log_path, offset_index=Path(f"{stem}.index"),
                       time_index=Path(f"{stem}.timeindex"), transaction_index=txn_index,
                       producer_snapshot_index=Path(f"{stem}.snapshot"), leader_epoch_index=b"",
                       remote_log_index=idx.remote_log_index,
                       remote_offset_index=idx.remote_offset_index,
                       remote_time_index=idx.remote_time_index))
    return md, b"".join(raw)


@pytest.fixture
def rsm(tmp_path: Path) -> CountingRSM:
    r = CountingRSM()
    r.configure({"dir": str(tmp_path / "remote")})
    return r


def test_every_offset_reads_back(rsm: CountingRSM, tmp_path: Path) -> None:
    md, raw = copied_segment(rsm, tmp_path, 0)
    reader = RemoteLogReader(rsm, threads=2)
    try:
        for offset in range(md.start_offset, md.end_offset + 1):
            got = reader.read(RemoteFetch(md, offset, max_bytes=1 << 20))
            heads = [h for _, h in iter_batches(got)]
            assert heads[0].base_offset <= offset <= heads[0].base_offset + heads[0].last_offset_delta
            assert heads[-1].base_offset + heads[-1].last_offset_delta == md.end_offset
            assert raw.endswith(got)  # byte for byte the segment's tail, whole batches
            _, records = decode_batch(got)
            assert records[0].key == f"k{heads[0].base_offset}".encode()
        assert reader.read(RemoteFetch(md, md.end_offset + 1, max_bytes=1 << 20)) == b""
    finally:
        reader.close()


def test_max_bytes_and_min_one_message(rsm: CountingRSM, tmp_path: Path) -> None:
    md, raw = copied_segment(rsm, tmp_path, 0)
    first_batch = next(iter_batches(raw))[1].size_in_bytes
    reader = RemoteLogReader(rsm, threads=1)
    try:
        got = reader.read(RemoteFetch(md, md.start_offset, max_bytes=3 * first_batch + 5))
        assert len(got) == 3 * first_batch and raw.startswith(got)
        assert reader.read(RemoteFetch(md, md.start_offset, max_bytes=10)) == b""
        one = reader.read(RemoteFetch(md, md.start_offset, max_bytes=10, min_one_message=True))
        assert one == raw[:first_batch]
    finally:
        reader.close()


def test_many_partitions_in_one_call_do_not_block_the_event_loop(rsm: CountingRSM,
                                                                 tmp_path: Path) -> None:
    segs = [copied_segment(rsm, tmp_path, p) for p in range(6)]
    reader = RemoteLogReader(rsm, threads=6)
    rsm.gate = threading.Event()

    async def scenario() -> list[bytes | BaseException]:
        task = asyncio.ensure_future(reader.read_many(
            [RemoteFetch(md, md.start_offset, 1 << 20) for md, _ in segs]))
        # all six reads are blocked inside the backend at once, and the loop still runs this
        for _ in range(6):
            assert await asyncio.to_thread(rsm.waiting.acquire, True, 30)
        assert not task.done()
        rsm.gate.set()
        return await asyncio.wait_for(task, 60)

    try:
        results = asyncio.run(scenario())
    finally:
        rsm.gate.set()
        reader.close()
    for (_md, raw), got in zip(segs, results, strict=True):
        assert got == raw


def test_a_failed_partition_does_not_fail_the_others(rsm: CountingRSM, tmp_path: Path) -> None:
    md, raw = copied_segment(rsm, tmp_path, 0)
    gone, _ = copied_segment(rsm, tmp_path, 1)
    rsm.delete_log_segment_data(gone)
    reader = RemoteLogReader(rsm, threads=2)
    try:
        ok, failed = asyncio.run(reader.read_many(
            [RemoteFetch(md, md.start_offset, 1 << 20), RemoteFetch(gone, gone.start_offset, 100)]))
    finally:
        reader.close()
    assert ok == raw and isinstance(failed, Exception)


def test_caches_hit_and_respect_their_byte_limit(rsm: CountingRSM, tmp_path: Path) -> None:
    md, _ = copied_segment(rsm, tmp_path, 0)
    reader = RemoteLogReader(rsm, threads=1, chunk_cache_bytes=4000)
    try:
        reader.read(RemoteFetch(md, md.start_offset, 1 << 20))
        calls = rsm.calls
        assert reader.chunk_cache.size <= 4000
        reader.read(RemoteFetch(md, md.end_offset, 1 << 20))  # the last chunk is still cached
        assert rsm.calls == calls
        assert reader.index_cache.hits >= 2
    finally:
        reader.close()
    lru = ByteLRU(10)
    lru.put("a", b"12345")
    lru.put("b", b"12345")
    assert lru.get("a") == b"12345"
    lru.put("c", b"123")  # evicts b, the least recently used
    assert lru.get("b") is None and lru.size == 8
    lru.put("big", b"x" * 11)  # bigger than the cache: served, not kept
    assert lru.get("big") is None
    assert IndexType.REMOTE_LOG_INDEX.value == ".remoteLogIndex"


def test_offset_for_timestamp(rsm: CountingRSM, tmp_path: Path) -> None:
    md, raw = copied_segment(rsm, tmp_path, 0)
    batches = [h for _, h in iter_batches(raw)]
    md = RemoteLogSegmentMetadata(
        segment_id=md.segment_id, start_offset=md.start_offset, end_offset=md.end_offset,
        max_timestamp_ms=max(h.max_timestamp for h in batches), broker_id=1,
        event_timestamp_ms=0, segment_size_in_bytes=md.segment_size_in_bytes)
    reader = RemoteLogReader(rsm, threads=1)
    try:
        for h in batches:
            expect = next(b.base_offset for b in batches if b.max_timestamp >= h.max_timestamp)
            assert reader.offset_for_timestamp(md, h.max_timestamp) == expect
        assert reader.offset_for_timestamp(md, 0) == md.start_offset
        assert reader.offset_for_timestamp(md, md.max_timestamp_ms + 1) is None
    finally:
        reader.close()


def test_aborted_transactions_from_remote_txn_indexes(rsm: CountingRSM, tmp_path: Path) -> None:
    """Kafka's collectAbortedTransactions over remote segments: entries overlapping the range, from
    the segment read and those after it, until an entry's LSO reaches the range's end (complete);
    a segment copied without a .txnindex has none."""
    first, second = AbortedTxn(1, 510, 520, 521), AbortedTxn(2, 600, 650, 700)
    a, _ = copied_segment(rsm, tmp_path, 0, base=500, txns=[first, second])
    b, _ = copied_segment(rsm, tmp_path, 0, base=680)
    reader = RemoteLogReader(rsm, threads=1)
    try:
        assert reader.aborted_transactions([a, b], 505, 560) == ([first], True)
        assert reader.aborted_transactions([a, b], 505, 610) == ([first, second], True)
        assert reader.aborted_transactions([a, b], 655, 800) == ([], False)  # go on with the local log
        assert reader.aborted_transactions([b], 680, 800) == ([], False)
        assert asyncio.run(reader.aborted_transactions_async([a, b], 515, 516)) == ([first], True)
    finally:
        reader.close()
