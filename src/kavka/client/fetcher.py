"""`Fetcher`: read an offset range of one partition with Fetch requests, no consumer group.

The Spark executors' consumer. It is given (topic, partition, start, end) and
returns every record with ``start <= offset < end``, as Spark's Kafka source
does with an assigned consumer: no group, no committed offsets -- the offsets
live in the caller's plan or checkpoint.

Fetch is sent to the partition's leader (found with Metadata, refreshed on
NOT_LEADER_OR_FOLLOWER and friends) at the highest version both sides speak
up to v12, the last version that names topics (v13+ names them by topic id,
KIP-516). Batches may start before the asked offset (a fetch returns whole
batches) and control batches (transaction markers) carry no user records;
both are skipped. Records are returned column-wise (`RecordColumns`), decoded
by a tight decoder of record batch v2 (layout in `kavka.protocol.records`),
because executors turn them into Arrow arrays without building per-record
objects. `read_range_with` takes another decoder of the fetched bytes (the
Spark executors' vectorised `kavka.spark.arrow_decode`); this one is the
reference it is tested against.

Data loss -- a range below the partition's log start offset, because
retention or DeleteRecords removed it -- raises `OffsetOutOfRangeError` with
the log start offset, so callers decide (Spark's ``failOnDataLoss``). One
thread owns a fetcher.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from kio.schema.errors import ErrorCode

from kavka.client.admin import AdminClient
from kavka.client.connection import BlockingConnection
from kavka.client.errors import LEADER_MAY_HAVE_MOVED, KafkaConnectionError, KafkaError
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.protocol import compression as _compression
from kavka.protocol.api import ApiKey
from kavka.protocol.control_records import ControlRecordType, control_record_type
from kavka.protocol.messages import make, nested
from kavka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    CorruptRecordError,
    iter_batches,
    iter_records,
    read_varint,
)

# v13+ address topics by id; names keep this client simple and work with every broker.
MAX_FETCH_VERSION = 12
OFFSET_OUT_OF_RANGE = ErrorCode.offset_out_of_range
# Tries of a fetch or a probe (each within the fetcher's timeout) before giving up.
ATTEMPTS = 20
T = TypeVar("T")


class OffsetOutOfRangeError(KafkaError):
    """The asked offset is outside [log_start_offset, high_watermark]."""

    def __init__(
        self, topic: str, partition: int, offset: int, log_start_offset: int, high_watermark: int
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        super().__init__(
            OFFSET_OUT_OF_RANGE,
            message=(
                f"offset {offset} is out of range: the log holds offsets "
                f"{log_start_offset} to {high_watermark}"
            ),
            resource=f"{topic}-{partition}",
        )


@dataclass(slots=True)
class RecordColumns:
    """Records of one partition, column-wise (parallel lists)."""

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)  # ms since the epoch
    timestamp_types: list[int] = field(default_factory=list)  # 0 CreateTime, 1 LogAppendTime
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]]] | None = None

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True, slots=True)
class FetchResult:
    high_watermark: int
    log_start_offset: int
    records: bytes
    last_stable_offset: int = -1
    # read_committed: (producer id, first offset) of the aborted transactions in range
    aborted: tuple[tuple[int, int], ...] = ()


class Fetcher:
    """Fetches ranges of partitions from their leaders over blocking connections."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kavka-spark",
        timeout_s: float = 30,
        max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 8 * 1024 * 1024,
        security: ClientSecurity = PLAINTEXT,
        isolation_level: int = 0,
    ) -> None:
        self.isolation_level = isolation_level
        self.admin = AdminClient(bootstrap, client_id=client_id, timeout_s=timeout_s, security=security)
        self.timeout_s = timeout_s
        self.max_wait_ms = max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self._leaders: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ API

    def fetch(self, topic: str, partition: int, offset: int) -> FetchResult:
        """One Fetch of `topic`-`partition` from `offset`; raises on any partition error."""
        tp = (topic, partition)

        def attempt(n: int, deadline: float) -> FetchResult:
            conn = self._leader(topic, partition, refresh=n > 0)
            result = self._fetch_once(conn, {tp: offset})[tp]
            if isinstance(result, KafkaError):
                raise result
            return result

        return self._retrying(attempt, lambda: f"{topic}-{partition}")

    def high_watermarks(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The high watermark of every partition of `offsets`, from one Fetch per leader at those
        offsets: a probe, which returns at most max_partition_fetch_bytes of records a partition.
        The first Fetch has max_wait 0, which Kafka (and kavka) answer at once with every
        partition; a broker that leaves partitions out of such an answer (Tansu 0.6) is asked
        again for those with the fetcher's max_wait_ms. An offset out of range answers with the
        high watermark too."""
        out: dict[tuple[str, int], int] = {}
        todo = dict(offsets)

        def attempt(n: int, deadline: float) -> dict[tuple[str, int], int] | None:
            by_leader: dict[int, dict[tuple[str, int], int]] = {}
            for tp, offset in todo.items():
                by_leader.setdefault(self._leader_id(*tp, refresh=n > 0), {})[tp] = offset
            wait = 0 if n == 0 else self.max_wait_ms
            for leader, parts in by_leader.items():
                conn = self.admin.node_connection(leader)
                for tp, result in self._fetch_once(conn, parts, max_wait_ms=wait).items():
                    if isinstance(result, OffsetOutOfRangeError):
                        out[tp] = result.high_watermark
                    elif isinstance(result, KafkaError):
                        # The other partitions' answers still count; this one is asked again.
                        if not _may_retry(result, deadline):
                            raise result
                        continue
                    else:
                        out[tp] = result.high_watermark
                    del todo[tp]
            return None if todo else out

        return self._retrying(attempt, lambda: f"{sorted(todo)}")

    def read_range(
        self, topic: str, partition: int, start: int, end: int, *, include_headers: bool = False
    ) -> Iterator[RecordColumns]:
        """Records with start <= offset < end, one chunk per Fetch (at most
        max_partition_fetch_bytes of batches, or one larger batch).

        Raises OffsetOutOfRangeError when `start` (or a later fetch position)
        is below the log start offset. Stops early, without error, if the log
        ends before `end` for longer than the fetcher's timeout -- callers
        compare the last offset with `end` to detect that.
        """

        def decode(buf: bytes, position: int, end: int) -> tuple[RecordColumns | None, int]:
            cols = RecordColumns(headers=[] if include_headers else None)
            next_position = _decode_into(cols, buf, position, end)
            return (cols if len(cols) else None), next_position

        return self.read_range_with(topic, partition, start, end, decode)

    def read_range_with(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        decode: Callable[[bytes, int, int], tuple[T | None, int]],
    ) -> Iterator[T]:
        """`read_range` with another decoder of the fetched batches: ``decode(records,
        position, end)`` returns (chunk or None, next position) as `_decode_into` does."""
        position = start
        idle_deadline = time.monotonic() + self.timeout_s
        while position < end:
            result = self.fetch(topic, partition, position)
            records, past = result.records, position
            if self.isolation_level:
                records, past = drop_aborted(records, result.aborted)
            chunk, next_position = decode(records, position, end)
            # Dropped batches of aborted transactions advance the position too.
            next_position = max(next_position, min(past, end))
            if next_position == position:
                # Nothing at or after `position` was returned.
                if result.high_watermark <= position or not result.records:
                    if time.monotonic() > idle_deadline:
                        return
                    continue
                # Whole batches all below position: cannot happen with a sane broker.
                raise CorruptRecordError(
                    f"{topic}-{partition}: fetch at offset {position} returned no usable batch"
                )
            idle_deadline = time.monotonic() + self.timeout_s
            position = next_position
            if chunk is not None:
                yield chunk

    # ------------------------------------------------------------------ internals

    def _retrying(self, attempt: Callable[[int, float], T | None], what: Callable[[], str]) -> T:
        """`attempt(n, deadline)` until it returns a result (not None), at most ATTEMPTS times
        with a doubling back-off. Connection errors, and errors saying the leader may have moved
        (attempts after the first look the leader up again), are retried until the fetcher's
        timeout; any other error raises at once. Running out of attempts raises naming `what()`."""
        deadline = time.monotonic() + self.timeout_s
        for n in range(ATTEMPTS):
            try:
                result = attempt(n, deadline)
            except KafkaConnectionError:
                if time.monotonic() > deadline:
                    raise
            except KafkaError as e:
                if not _may_retry(e, deadline):
                    raise
            else:
                if result is not None:
                    return result
            time.sleep(min(0.05 * 2**n, 1.0))
        raise KafkaConnectionError(f"could not fetch {what()} after {ATTEMPTS} attempts")

    def _leader(self, topic: str, partition: int, *, refresh: bool) -> BlockingConnection:
        return self.admin.node_connection(self._leader_id(topic, partition, refresh=refresh))

    def _leader_id(self, topic: str, partition: int, *, refresh: bool) -> int:
        tp = (topic, partition)
        if refresh or tp not in self._leaders:
            for desc in self.admin.describe_topics([topic]):
                for p in desc.partitions:
                    self._leaders[(desc.name, p.partition)] = p.leader
        leader = self._leaders.get(tp)
        if leader is None:
            raise KafkaError(3, resource=f"{topic}-{partition}")
        if leader < 0:
            raise KafkaError(5, resource=f"{topic}-{partition}")
        return leader

    def _fetch_once(
        self, conn: BlockingConnection, offsets: Mapping[tuple[str, int], int], *, max_wait_ms: int | None = None
    ) -> dict[tuple[str, int], FetchResult | KafkaError]:
        """One Fetch of the partitions of `offsets` from `conn`'s broker: each partition's result,
        or its error (OffsetOutOfRangeError for OFFSET_OUT_OF_RANGE) as a value; a partition the
        response leaves out is UNKNOWN_TOPIC_OR_PARTITION. A request-level error raises."""
        version = conn.pick_version(ApiKey.FETCH, MAX_FETCH_VERSION)
        cls = conn.request_class(ApiKey.FETCH, version)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append((partition, offset))
        req = make(
            cls,
            replica_id=-1,
            max_wait=timedelta(milliseconds=self.max_wait_ms if max_wait_ms is None else max_wait_ms),
            min_bytes=1,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,  # sessionless (KIP-227)
            topics=tuple(
                make(
                    nested(cls, "FetchTopic"),
                    topic=topic,
                    partitions=tuple(
                        make(
                            nested(cls, "FetchPartition"),
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=self.max_partition_fetch_bytes,
                        )
                        for partition, offset in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        resp = conn.send(req)
        if getattr(resp, "error_code", 0):
            raise KafkaError(int(resp.error_code), resource=",".join(f"{t}-{p}" for t, p in offsets))
        out: dict[tuple[str, int], FetchResult | KafkaError] = {}
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                if tp not in offsets:
                    continue
                code = int(p.error_code)
                if code == OFFSET_OUT_OF_RANGE:
                    out[tp] = OffsetOutOfRangeError(
                        t.topic, p.partition_index, offsets[tp], int(p.log_start_offset), int(p.high_watermark)
                    )
                elif code:
                    out[tp] = KafkaError(code, resource=f"{t.topic}-{p.partition_index}")
                else:
                    out[tp] = FetchResult(
                        high_watermark=int(p.high_watermark),
                        log_start_offset=int(p.log_start_offset),
                        records=bytes(p.records or b""),
                        last_stable_offset=int(getattr(p, "last_stable_offset", -1)),
                        aborted=tuple(
                            (int(a.producer_id), int(a.first_offset))
                            for a in (getattr(p, "aborted_transactions", None) or ())
                        ),
                    )
        for topic, partition in offsets:
            out.setdefault((topic, partition), KafkaError(
                3, message="partition missing from the fetch response", resource=f"{topic}-{partition}"
            ))
        return out


def _may_retry(error: KafkaError, deadline: float) -> bool:
    """A leader that may have moved is looked up again until `deadline`."""
    return error.code in LEADER_MAY_HAVE_MOVED and time.monotonic() <= deadline


# ---------------------------------------------------------------------- decoding


def drop_aborted(buf: bytes, aborted: Iterable[tuple[int, int]]) -> tuple[bytes, int]:
    """The batches of `buf` without those of aborted transactions (read_committed).

    Kafka's consumer Fetcher walk: `aborted` is the response's
    (producer id, first offset) list; a producer is "aborting" from the first
    batch whose base offset reaches one of its first offsets until its ABORT
    marker; its transactional data batches in between are dropped. Control
    batches are kept (the decoders skip them). Returns (kept bytes, offset
    after the last whole batch of `buf`) so the caller advances past dropped
    batches even when nothing is kept.
    """
    pending = sorted((first, pid) for pid, first in aborted)
    if not buf:
        return buf, -1
    aborting: set[int] = set()
    kept: list[memoryview] = []
    view = memoryview(buf)
    past = -1
    dropped = False
    i = 0
    for pos, header in iter_batches(buf):
        past = header.next_offset
        while i < len(pending) and pending[i][0] <= header.last_offset:
            aborting.add(pending[i][1])
            i += 1
        piece = view[pos : pos + header.size_in_bytes]
        if header.is_control:
            if header.producer_id in aborting and _is_abort_marker(piece):
                aborting.discard(header.producer_id)
            kept.append(piece)
        elif header.is_transactional and header.producer_id in aborting:
            dropped = True
        else:
            kept.append(piece)
    if not dropped:
        return buf, past
    return b"".join(kept), past


def _is_abort_marker(batch: memoryview) -> bool:
    for record in iter_records(batch):
        return control_record_type(record.key) == ControlRecordType.ABORT
    return False


def _decode_into(cols: RecordColumns, buf: bytes, start: int, end: int) -> int:
    """Append records with start <= offset < end from whole batches in `buf`.

    Returns the offset to fetch next: past the last batch that was consumed
    (so control batches and compacted gaps advance it), capped at `end`.
    """
    position = start
    for pos, header in iter_batches(buf):
        if header.next_offset <= position:
            continue
        if header.base_offset >= end:
            break
        if not header.is_control and header.records_count > 0:
            payload: bytes | memoryview = memoryview(buf)[
                pos + BATCH_HEADER_SIZE : pos + header.size_in_bytes
            ]
            if header.compression:
                payload = _compression.decompress(header.compression, payload)
            _decode_records(
                cols,
                bytes(payload),
                header.records_count,
                base_offset=header.base_offset,
                base_timestamp=header.base_timestamp,
                log_append_time=header.max_timestamp
                if header.timestamp_type == LOG_APPEND_TIME
                else None,
                start=position,
                end=end,
            )
        position = min(header.next_offset, end)
    return position


def _decode_records(
    cols: RecordColumns,
    data: bytes,
    count: int,
    *,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    start: int,
    end: int,
) -> None:
    """The record loop of `protocol.records.decode_batch`, unrolled into columns.

    Varints are zigzag; the one-byte case is taken inline because record
    attributes, deltas of small batches and header counts nearly always fit.
    """
    offsets, timestamps, keys, values = cols.offsets, cols.timestamps, cols.keys, cols.values
    ts_types = cols.timestamp_types
    headers_out = cols.headers
    ts_type = 0 if log_append_time is None else 1
    n = len(data)
    p = 0
    try:
        for _ in range(count):
            length, p = _varint(data, p)
            rec_end = p + length
            if length < 0 or rec_end > n:
                raise CorruptRecordError(f"record of length {length} overruns its batch")
            p += 1  # attributes
            # One-byte varints inline: a call per field costs more than the decoding.
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = _varint(data, p)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = _varint(data, p)
            offset = base_offset + off_delta
            if offset < start or offset >= end:
                p = rec_end
                continue
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = _varint(data, p)
            if klen < 0:
                key = None
            else:
                key = data[p : p + klen]
                p += klen
            vlen, p = _varint(data, p)
            if vlen < 0:
                value = None
            else:
                value = data[p : p + vlen]
                p += vlen
            if headers_out is not None:
                nh, p = _varint(data, p)
                hdrs: list[tuple[str, bytes | None]] = []
                for _h in range(nh):
                    hk, p = _varint(data, p)
                    hkey = data[p : p + hk].decode("utf-8", errors="replace")
                    p += hk
                    hv, p = _varint(data, p)
                    if hv < 0:
                        hdrs.append((hkey, None))
                    else:
                        hdrs.append((hkey, data[p : p + hv]))
                        p += hv
                headers_out.append(hdrs)
            if p > rec_end:
                raise CorruptRecordError("record fields run past the record length")
            p = rec_end
            offsets.append(offset)
            timestamps.append(base_timestamp + ts_delta if log_append_time is None else log_append_time)
            ts_types.append(ts_type)
            keys.append(key)
            values.append(value)
    except IndexError as exc:
        raise CorruptRecordError("records of a fetched batch are truncated") from exc


def _varint(data: bytes, p: int) -> tuple[int, int]:
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    return read_varint(data, p)


__all__ = ["FetchResult", "Fetcher", "OffsetOutOfRangeError", "RecordColumns"]
