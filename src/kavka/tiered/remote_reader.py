"""Reads below the local log start offset, served from remote storage (KIP-405 "reading from
remote storage"), for many partitions at once without blocking the event loop.

``RemoteLogReader.read_many`` is awaited by the fetch path on the event loop: each partition's
read runs in a bounded thread pool (``remote.log.reader.threads``, Kafka's name) so one slow object
store read never stalls the loop, and all partitions of one Fetch are read in parallel (Kafka
served one remote partition per Fetch for years, KAFKA-14915). A read:

1. finds the seed's remote index entry holding the fetch offset (remote_index.lookup_offset), from
   the segment's ``.remoteOffsetIndex`` and ``.remoteLogIndex``, fetched once and kept in the index
   cache;
2. fetches whole entries (runs of whole batches) from the entry's byte position until max_bytes,
   each range kept in the chunk cache;
3. drops batches wholly below the fetch offset and cuts at a batch boundary at max_bytes, keeping
   at least one batch when ``min_one_message`` (a Fetch's first partition, as Kafka does).

Both caches are LRU with a byte limit (``ByteLRU``); an entry bigger than the limit is served but
not kept. Caches and reader are thread-safe (one lock per cache); the RemoteStorageManager must be.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kavka.protocol.records import decode_batch, iter_batches
from kavka.storage.txn_index import AbortedTxn, parse_entries
from kavka.tiered.api import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)
from kavka.tiered.remote_index import decode_entry, lookup_offset, lookup_timestamp


class ByteLRU:
    """A least-recently-used map of bytes values whose total size never exceeds ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.size -= len(old)
            self._data[key] = value
            self.size += len(value)
            while self.size > self.max_bytes:
                _, evicted = self._data.popitem(last=False)
                self.size -= len(evicted)


@dataclass(frozen=True, slots=True)
class RemoteFetch:
    metadata: RemoteLogSegmentMetadata
    fetch_offset: int
    max_bytes: int
    min_one_message: bool = False


class RemoteLogReader:
    def __init__(self, rsm: RemoteStorageManager, *, threads: int = 10,
                 index_cache_bytes: int = 64 << 20, chunk_cache_bytes: int = 64 << 20) -> None:
        self.rsm = rsm
        self.index_cache = ByteLRU(index_cache_bytes)
        self.chunk_cache = ByteLRU(chunk_cache_bytes)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="remote-reader")

    def _index(self, md: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        key = (md.segment_id.id, index_type)
        data = self.index_cache.get(key)
        if data is None:
            data = self.rsm.fetch_index(md, index_type)
            self.index_cache.put(key, data)
        return data

    def _chunk(self, md: RemoteLogSegmentMetadata, position: int, length: int) -> bytes:
        key = (md.segment_id.id, position, length)
        data = self.chunk_cache.get(key)
        if data is None:
            data = self.rsm.fetch_log_segment(md, position, position + length - 1)
            self.chunk_cache.put(key, data)
        return data

    def read(self, req: RemoteFetch) -> bytes:
        """Record batches from ``req.fetch_offset`` on (blocking; run in the pool)."""
        md = req.metadata
        if req.fetch_offset > md.end_offset:
            return b""
        log_index = self._index(md, IndexType.REMOTE_LOG_INDEX)
        offset_index = self._index(md, IndexType.REMOTE_OFFSET_INDEX)
        entry = lookup_offset(offset_index, log_index, base_offset=md.start_offset,
                              target_offset=req.fetch_offset)
        if entry is None:
            return b""
        # walk the entries from the found one on: the remote offset index lists them in order
        first_rel = entry.first_offset - md.start_offset
        positions = [p for rel, p in struct.iter_unpack(">ii", offset_index) if rel >= first_rel]
        out = bytearray()
        for pos in positions:
            e, _ = decode_entry(log_index, pos)
            chunk = self._chunk(md, e.position, e.data_length)
            for rel, h in iter_batches(chunk):
                if h.base_offset + h.last_offset_delta < req.fetch_offset:
                    continue
                size = h.size_in_bytes
                if len(out) + size > req.max_bytes and (out or not req.min_one_message):
                    return bytes(out)
                out += chunk[rel:rel + size]
            if len(out) >= req.max_bytes:
                break
        return bytes(out)

    def aborted_transactions(
        self, segments: Sequence[RemoteLogSegmentMetadata], fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """The remote half of Kafka's RemoteLogManager.collectAbortedTransactions (blocking; run
        in the pool): the aborted transactions with data in [fetch_offset, upper_bound_offset) from
        the ``.txnindex`` of each of ``segments`` in order (the one read and those after it), and
        whether the search is complete (an entry's LSO reached the upper bound, so no later
        segment, remote or local, can hold one). A segment copied without a txn index has none."""
        found: list[AbortedTxn] = []
        for md in segments:
            if md.end_offset < fetch_offset:
                continue
            key = (md.segment_id.id, IndexType.TRANSACTION)
            data = self.index_cache.get(key)
            if data is None:
                try:
                    data = self.rsm.fetch_index(md, IndexType.TRANSACTION)
                except RemoteResourceNotFoundError:
                    data = b""
                self.index_cache.put(key, data)
            for e in parse_entries(data, f"remote {md.segment_id.id}.txnindex"):
                if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                    found.append(e)
                if e.last_stable_offset >= upper_bound_offset:
                    return found, True
        return found, False

    async def aborted_transactions_async(
        self, segments: Sequence[RemoteLogSegmentMetadata], fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self.aborted_transactions, segments, fetch_offset, upper_bound_offset
        )

    def offset_for_timestamp(self, md: RemoteLogSegmentMetadata, timestamp: int) -> int | None:
        """The first offset in the segment whose batch max timestamp is >= ``timestamp`` (the
        ListOffsets rule), via the seed's ``.remoteTimeIndex``; None if none is that late."""
        if md.max_timestamp_ms < timestamp:
            return None
        time_index = self._index(md, IndexType.REMOTE_TIME_INDEX)
        start = lookup_timestamp(time_index, base_offset=md.start_offset,
                                 target_timestamp=timestamp)
        if start is None:
            return None
        log_index = self._index(md, IndexType.REMOTE_LOG_INDEX)
        offset_index = self._index(md, IndexType.REMOTE_OFFSET_INDEX)
        first_rel = start - md.start_offset
        for rel, pos in struct.iter_unpack(">ii", offset_index):
            if rel < first_rel:
                continue
            e, _ = decode_entry(log_index, pos)
            if e.last_timestamp < timestamp:
                continue
            for _, h in iter_batches(self._chunk(md, e.position, e.data_length)):
                if h.max_timestamp >= timestamp:
                    return h.base_offset
        return None

    async def read_many(self, reqs: Sequence[RemoteFetch]) -> list[bytes | BaseException]:
        """All partitions of one Fetch, in parallel in the pool; a failed partition yields its
        exception (the fetch path answers that partition with an error, the rest with data)."""
        loop = asyncio.get_running_loop()
        futures = [loop.run_in_executor(self._pool, self.read, r) for r in reqs]
        return list(await asyncio.gather(*futures, return_exceptions=True))

    def record_for_timestamp(self, md: RemoteLogSegmentMetadata, timestamp: int, min_offset: int
                             ) -> tuple[int, int, int] | None:
        """(timestamp, offset, batch leader epoch) of the first record at or above ``min_offset``
        whose timestamp is >= ``timestamp`` (ListOffsets), or None (blocking; run in the pool)."""
        start = self.offset_for_timestamp(md, timestamp)
        if start is None:
            return None
        while start <= md.end_offset:
            data = self.read(RemoteFetch(md, max(start, min_offset), 1 << 20, min_one_message=True))
            if not data:
                return None
            next_start = start
            for pos, h in iter_batches(data):
                next_start = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp < timestamp:
                    continue
                _, records = decode_batch(data[pos:pos + h.size_in_bytes])
                for r in records:
                    if r.offset >= min_offset and r.timestamp >= timestamp:
                        return r.timestamp, r.offset, h.partition_leader_epoch
            if next_start <= start:
                return None
            start = next_start
        return None

    async def record_for_timestamp_async(self, md: RemoteLogSegmentMetadata, timestamp: int, min_offset: int
                                         ) -> tuple[int, int, int] | None:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.record_for_timestamp, md, timestamp, min_offset)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

