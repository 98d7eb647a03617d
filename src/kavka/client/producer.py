"""`Producer`: a small blocking, idempotent producer (the Spark sink's writer).

Owns a per-partition buffer of records, Kafka's default partitioner, one
producer id and the per-partition sequence numbers of an idempotent producer
(KIP-98): on start it asks any broker for a producer id with InitProducerId;
every batch carries (producer id, epoch, base sequence), so when a request is
retried after a broken connection or a leader change the broker recognises
batches it already appended (DUPLICATE_SEQUENCE_NUMBER, or a silent dedup)
and nothing is written twice. A broker without InitProducerId gets
non-idempotent batches (producer id -1): retries may then duplicate.

Sending: `flush()` builds one record batch v2 per partition (at most
`batch_max_bytes` of record payload, then another round) and sends one
Produce request per leader, waiting for each answer -- one request in flight
per connection, so batches of a partition are appended in sequence order.
acks=0 is not offered: it has no answer to wait for, so retries could not be
told apart from successes. One thread owns a producer.

Bulk path (the Spark sink's): `send_regions` takes records already encoded
into the records region of a batch (`RecordsRegion`, e.g. from
`kavka.spark.arrow_encode`) and hands them to a sender thread through a
bounded queue (`PIPELINE_DEPTH` rounds): the caller encodes the next rows
while the previous Produce is on the wire. A round holds at most one batch
per partition; the sender seals it (`seal_batch`: compressed once, sequence
numbers assigned in queue order) and sends it with the same retries and
acks as `flush()`, one request at a time, so a partition's batches still
arrive in sequence order. A sender error is raised to the owning thread by
the next `send_regions` or `flush()`; `flush()` returns once every round is
acknowledged.
"""

from __future__ import annotations

import itertools
import logging
import queue
import random
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import crc32c
from kio.schema.errors import ErrorCode

from kavka.client.admin import AdminClient
from kavka.client.connection import BlockingConnection
from kavka.client.errors import LEADER_MAY_HAVE_MOVED, KafkaConnectionError, KafkaError
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.protocol import compression as _compression
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from kavka.protocol.records import (
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    build_batch,
)

log = logging.getLogger(__name__)

# Produce v13+ names topics by id (KIP-516); v3-v11 carry record batch v2 by name.
MAX_PRODUCE_VERSION = 11
DUPLICATE_SEQUENCE_NUMBER = ErrorCode.duplicate_sequence_number
# Errors after which the same batch (same sequence) is sent again.
_RETRIABLE = LEADER_MAY_HAVE_MOVED | {
    ErrorCode.request_timed_out,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
}
ACKS = {"all": -1, "-1": -1, "1": 1}
COMPRESSION_CODES = {name: code for code, name in _compression.CODEC_NAMES.items()}
# Rounds of encoded batches queued for the sender thread: bounds the memory a
# fast encoder can fill while the broker is slow.
PIPELINE_DEPTH = 2
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # kavka.protocol.records' header layout
_MAGIC = 2
_CRC_START = 21  # the CRC covers the attributes onwards


class TransactionStateError(RuntimeError):
    """A transactional call out of order (commit without begin, begin twice...)."""


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional.id exists (PRODUCER_FENCED or
    INVALID_PRODUCER_EPOCH): this one must stop; its open transaction is aborted by the
    coordinator."""


TXN_RETRIABLE = {
    int(ErrorCode.coordinator_load_in_progress),
    int(ErrorCode.coordinator_not_available),
    int(ErrorCode.not_coordinator),
    int(ErrorCode.concurrent_transactions),
}
_FENCED = {int(ErrorCode.producer_fenced), int(ErrorCode.invalid_producer_epoch)}


def txn_error_action(code: int) -> str:
    """What a transactional producer does with a coordinator's error code: ok, retry
    (after a backoff), refind (look the coordinator up again, then retry), fenced or fatal."""
    if code == 0:
        return "ok"
    if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
        return "refind"
    if code in TXN_RETRIABLE:
        return "retry"
    if code in _FENCED:
        return "fenced"
    return "fatal"


@dataclass(slots=True)
class TxnState:
    """The client side of one transactional.id: uninitialized -> ready -> in_transaction
    -> ending -> ready; `partitions` were added to the open transaction (each is added
    with AddPartitionsToTxn once, before its first write)."""

    transactional_id: str
    state: str = "uninitialized"
    partitions: set[tuple[str, int]] = field(default_factory=set)
    coordinator: tuple[str, int] | None = None

    def initialized(self) -> None:
        self.state = "ready"
        self.partitions.clear()

    def begin(self) -> None:
        if self.state != "ready":
            raise TransactionStateError(f"begin_transaction in state {self.state}")
        self.state = "in_transaction"

    def needs_adding(self, tps: set[tuple[str, int]]) -> set[tuple[str, int]]:
        if self.state != "in_transaction":
            raise TransactionStateError(f"a transactional write in state {self.state}")
        return tps - self.partitions

    def added(self, tps: set[tuple[str, int]]) -> None:
        self.partitions |= tps

    def end(self, commit: bool) -> bool:
        """Start ending; False when nothing was written (no EndTxn needed)."""
        if self.state == "ready" and not commit:
            return False  # aborting when no transaction is open: nothing to do
        if self.state not in ("in_transaction", "ending"):
            raise TransactionStateError(
                f"{'commit' if commit else 'abort'}_transaction in state {self.state}"
            )
        if not self.partitions:
            self.state = "ready"
            return False
        self.state = "ending"
        return True

    def ended(self) -> None:
        self.state = "ready"
        self.partitions.clear()


@dataclass(frozen=True, slots=True)
class RecordsRegion:
    """The uncompressed records of one batch (offset deltas 0..count-1), not yet sealed.

    `data` may be a view of a buffer the encoder owns (no copy until sealed)."""

    data: bytes | memoryview
    count: int
    base_timestamp: int
    max_timestamp: int


def seal_batch(
    region: RecordsRegion,
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """`region` as one v2 batch at base offset 0: compressed once, header, CRC-32C.

    Byte-for-byte what `build_batch` writes for the same records (CreateTime)."""
    if region.count <= 0:
        raise ValueError("a record batch needs at least one record")
    payload = _compression.compress(compression, region.data) if compression else region.data
    size = BATCH_HEADER_SIZE + len(payload)
    header = bytearray(BATCH_HEADER_SIZE)
    _BATCH_HEADER.pack_into(
        header, 0, 0, size - LOG_OVERHEAD, -1, _MAGIC, 0,
        (compression & 0x07) | (ATTR_TRANSACTIONAL if is_transactional else 0), region.count - 1, region.base_timestamp, region.max_timestamp,
        producer_id, producer_epoch, base_sequence, region.count,
    )
    # CRC-32C from the attributes to the end, continued over the payload: one copy, not three.
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[_CRC_START:]))
    struct.pack_into(">I", header, 17, crc)
    return b"".join((header, payload))


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    acks: int = -1
    compression: int = 0
    enable_idempotence: bool = True
    batch_max_bytes: int = 512 * 1024  # below Kafka's default max.message.bytes (1 MiB)
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    client_id: str = "kavka-producer"
    # Transactional mode (KIP-98): a transactional.id, and the coordinator's timeout for
    # a transaction this producer leaves open.
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000


@dataclass(slots=True)
class _PartitionBuffer:
    records: list[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]] = (
        field(default_factory=list)
    )
    size: int = 0


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the default partitioner's hash), as a signed int32."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) + (
            (data[i4 + 3] & 0xFF) << 24
        )
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= (data[idx + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[idx + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[idx] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Producer:
    def __init__(self, bootstrap: str, config: ProducerConfig | None = None, *,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.config = config or ProducerConfig()
        self.admin = AdminClient(
            bootstrap,
            client_id=self.config.client_id,
            timeout_s=self.config.request_timeout_ms / 1000,
            security=security,
        )
        self._buffers: dict[tuple[str, int], _PartitionBuffer] = {}
        self._partition_counts: dict[str, int] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._sticky: dict[str, int] = {}
        self._sequences: dict[tuple[str, int], int] = {}
        self.producer_id = -1
        self.producer_epoch = -1
        self.records_sent = 0
        # Guards the AdminClient's connections and the metadata maps once a
        # sender thread exists (it refreshes leaders while the owner may look
        # up a new topic).
        self._lock = threading.RLock()
        self._queue: queue.Queue[list[tuple[tuple[str, int], RecordsRegion]] | None] = (
            queue.Queue(PIPELINE_DEPTH)
        )
        self._sender: threading.Thread | None = None
        self._sender_error: BaseException | None = None
        self._txn: TxnState | None = None
        if self.config.transactional_id is not None:
            self._txn = TxnState(self.config.transactional_id)
            self._init_transactions()
        elif self.config.enable_idempotence:
            self._init_producer_id()

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0

    def close(self) -> None:
        if self._sender is not None:
            self._queue.put(None)
            self._sender.join()
            self._sender = None
        self.admin.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ API

    def partitions_for(self, topic: str) -> int:
        if topic not in self._partition_counts:
            with self._lock:
                self._refresh_metadata(topic)
        return self._partition_counts[topic]

    def send_regions(self, items: Sequence[tuple[str, int, RecordsRegion]]) -> None:
        """Queue encoded batches for the sender thread; blocks while `PIPELINE_DEPTH` rounds wait.

        Batches of one partition are sent in the order given, each in its own
        Produce request (one batch per partition per request)."""
        self._raise_sender_error()
        rounds: list[list[tuple[tuple[str, int], RecordsRegion]]] = []
        depth: dict[tuple[str, int], int] = {}
        for topic, partition, region in items:
            count = self.partitions_for(topic)
            if not 0 <= partition < count:
                raise KafkaError(
                    3, message=f"partition {partition} does not exist ({count} partitions)",
                    resource=f"{topic}-{partition}",
                )
            k = depth.get((topic, partition), 0)
            depth[(topic, partition)] = k + 1
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(((topic, partition), region))
        if rounds and self._sender is None:
            self._sender = threading.Thread(
                target=self._run_sender, name=f"{self.config.client_id}-sender", daemon=True
            )
            self._sender.start()
        for r in rounds:
            self._queue.put(r)
        self._raise_sender_error()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Buffer one record; `flush()` sends it. A full buffer is flushed first."""
        count = self.partitions_for(topic)
        if partition is None:
            if key is not None:
                partition = default_partition(key, count)
            else:
                partition = self._sticky.setdefault(topic, random.randrange(count))
        elif not 0 <= partition < count:
            raise KafkaError(
                3, message=f"partition {partition} does not exist ({count} partitions)",
                resource=f"{topic}-{partition}",
            )
        ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        buf = self._buffers.setdefault((topic, partition), _PartitionBuffer())
        buf.records.append((ts, key, value, headers))
        buf.size += (len(key) if key else 0) + (len(value) if value else 0) + 16
        if buf.size >= self.config.batch_max_bytes:
            self.flush()

    def flush(self) -> None:
        """Send every buffered record; returns once every batch is acknowledged."""
        if self._sender is not None:
            self._queue.join()  # every queued round answered (or dropped after an error)
            self._raise_sender_error()
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        while self._buffers:
            batches: dict[tuple[str, int], tuple[bytes, int]] = {}
            for tp, buf in list(self._buffers.items()):
                seq = self._sequences.get(tp, 0)
                batches[tp] = (
                    build_batch(
                        buf.records,
                        compression=self.config.compression,
                        producer_id=self.producer_id,
                        producer_epoch=self.producer_epoch,
                        base_sequence=seq if self.idempotent else -1,
                        is_transactional=self.transactional,
                    ),
                    len(buf.records),
                )
                del self._buffers[tp]
            self._send_batches(batches, deadline)
            for tp, (_, n) in batches.items():
                if self.idempotent:
                    self._sequences[tp] = (self._sequences.get(tp, 0) + n) & 0x7FFFFFFF
                self.records_sent += n
            self._sticky.clear()  # a new sticky partition per batch, as Kafka's KIP-480

    # ------------------------------------------------------------------ transactions

    @property
    def transactional(self) -> bool:
        return self._txn is not None

    def begin_transaction(self) -> None:
        self._require_txn().begin()

    def commit_transaction(self) -> None:
        """Flush, then EndTxn(commit); raises if the producer was fenced."""
        self.flush()
        self._end_transaction(commit=True)

    def abort_transaction(self) -> None:
        """EndTxn(abort) of the open transaction. Buffered records are dropped; a sender
        error is not raised again (the transaction is being abandoned)."""
        if self._sender is not None:
            self._queue.join()
        self._buffers.clear()
        self._sender_error = None
        self._end_transaction(commit=False)

    def _require_txn(self) -> TxnState:
        if self._txn is None:
            raise TransactionStateError("not a transactional producer (no transactional_id)")
        return self._txn

    def _end_transaction(self, *, commit: bool) -> None:
        txn = self._require_txn()
        if not txn.end(commit):
            return  # nothing was written: the coordinator never heard of this transaction
        from kio.schema.end_txn.v3.request import EndTxnRequest

        self._coordinator_call(
            "EndTxn",
            lambda: EndTxnRequest(
                transactional_id=txn.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, committed=commit,
            ),
            lambda resp: int(resp.error_code),
        )
        txn.ended()

    def _init_transactions(self) -> None:
        """InitProducerId with the transactional.id at its coordinator: completes (aborts) a
        transaction an earlier producer with the same id left open and bumps the epoch, which
        fences that producer (a zombie task attempt)."""
        txn = self._require_txn()

        def build() -> Any:
            conn = self._txn_coordinator()
            version = max(1, conn.pick_version(ApiKey.INIT_PRODUCER_ID))
            return make(
                conn.request_class(ApiKey.INIT_PRODUCER_ID, version),
                transactional_id=txn.transactional_id,
                transaction_timeout=timedelta(milliseconds=self.config.transaction_timeout_ms),
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=False,
                keep_prepared_txn=False,
            )

        resp = self._coordinator_call("InitProducerId", build, lambda r: int(r.error_code))
        self.producer_id = int(resp.producer_id)
        self.producer_epoch = int(resp.producer_epoch)
        self._sequences.clear()
        txn.initialized()

    def _add_partitions(self, tps: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn (v3) for partitions this transaction has not written yet."""
        txn = self._require_txn()
        new = txn.needs_adding(tps)
        if not new:
            return
        from kio.schema.add_partitions_to_txn.v3 import request as apt

        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(new):
            by_topic.setdefault(t, []).append(p)

        def build() -> Any:
            return apt.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=txn.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=tuple(
                    apt.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )

        def error(resp: Any) -> int:
            codes = [
                int(r.partition_error_code)
                for t in resp.results_by_topic_v3_and_below
                for r in t.results_by_partition
                if int(r.partition_error_code)
            ]
            # OPERATION_NOT_ATTEMPTED marks the partitions a sibling's error held back.
            real = [c for c in codes if c != ErrorCode.operation_not_attempted]
            return real[0] if real else (codes[0] if codes else 0)

        self._coordinator_call("AddPartitionsToTxn", build, error)
        txn.added(new)

    def _txn_coordinator(self) -> BlockingConnection:
        txn = self._require_txn()
        if txn.coordinator is None:
            conn = self.admin._any()
            version = conn.pick_version(ApiKey.FIND_COORDINATOR)
            resp = conn.send(make(
                conn.request_class(ApiKey.FIND_COORDINATOR, version),
                key=txn.transactional_id,
                key_type=1,  # a transactional id
                coordinator_keys=(txn.transactional_id,),
            ))
            c = resp.coordinators[0] if version >= 4 else resp
            if int(c.error_code):
                raise KafkaError(int(c.error_code), resource=f"transactional.id {txn.transactional_id}")
            txn.coordinator = (c.host, int(c.port))
        return self.admin._connect(*txn.coordinator)

    def _coordinator_call(
        self, what: str, build: Callable[[], Any], error: Callable[[Any], int]
    ) -> Any:
        """Send `build()` to the transaction coordinator until it succeeds: retriable errors
        (a coordinator loading or moved, a transaction still completing) back off and retry
        until the request timeout; others raise (PRODUCER_FENCED as `ProducerFencedError`)."""
        txn = self._require_txn()
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        for attempt in itertools.count():
            code: int
            with self._lock:
                try:
                    req = build()
                    resp = self._txn_coordinator().send(req)
                    code = error(resp)
                except KafkaConnectionError:
                    code = int(ErrorCode.coordinator_not_available)
                    resp = None
                except KafkaError as e:
                    if e.code not in TXN_RETRIABLE:
                        raise
                    code, resp = e.code, None
            action = txn_error_action(code)
            if action == "ok":
                return resp
            if action == "fenced":
                raise ProducerFencedError(
                    code, message=f"{what}: another producer with transactional.id "
                    f"{txn.transactional_id} has a newer epoch",
                    resource=f"transactional.id {txn.transactional_id}",
                )
            if action == "fatal":
                raise KafkaError(code, message=what, resource=f"transactional.id {txn.transactional_id}")
            if action == "refind":
                txn.coordinator = None
            if time.monotonic() > deadline:
                raise KafkaError(code, message=f"{what}: still failing at the request timeout",
                                 resource=f"transactional.id {txn.transactional_id}")
            time.sleep(min(0.02 * 2**attempt, 0.5))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ internals

    def _raise_sender_error(self) -> None:
        if self._sender_error is not None:
            raise self._sender_error

    def _run_sender(self) -> None:
        """The sender thread: seal and send each queued round; the first error stops sending."""
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._sender_error is None:
                    self._send_round(item)
            except BaseException as e:  # handed to the owner thread, which re-raises it
                self._sender_error = e
            finally:
                self._queue.task_done()

    def _send_round(self, items: list[tuple[tuple[str, int], RecordsRegion]]) -> None:
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        batches: dict[tuple[str, int], tuple[bytes, int]] = {}
        for tp, region in items:
            seq = self._sequences.get(tp, 0)
            batches[tp] = (
                seal_batch(
                    region,
                    compression=self.config.compression,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=seq if self.idempotent else -1,
                    is_transactional=self.transactional,
                ),
                region.count,
            )
        with self._lock:
            self._send_batches(batches, deadline)
        for tp, (_, n) in batches.items():
            if self.idempotent:
                self._sequences[tp] = (self._sequences.get(tp, 0) + n) & 0x7FFFFFFF
            self.records_sent += n

    def _init_producer_id(self) -> None:
        # Any broker answers InitProducerId without a transactional id; one that dies between the
        # connect and the answer (a leader killed while a Spark task starts) hands over to the
        # next bootstrap server (AdminClient.send_any).
        def build(conn: BlockingConnection) -> object | None:
            if int(ApiKey.INIT_PRODUCER_ID) not in conn.broker_versions:
                log.warning(
                    "%s:%s has no InitProducerId: producing without idempotence "
                    "(a retried request may write duplicates)", conn.host, conn.port,
                )
                return None
            version = conn.pick_version(ApiKey.INIT_PRODUCER_ID)
            return make(
                conn.request_class(ApiKey.INIT_PRODUCER_ID, version),
                transactional_id=None,
                transaction_timeout=timedelta(milliseconds=60_000),
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=False,
                keep_prepared_txn=False,
            )

        resp = self.admin.send_any(build)
        if resp is None:
            return
        if resp.error_code:
            raise KafkaError(int(resp.error_code), resource="InitProducerId")
        self.producer_id = int(resp.producer_id)
        self.producer_epoch = int(resp.producer_epoch)

    def _refresh_metadata(self, topic: str) -> None:
        for desc in self.admin.describe_topics([topic]):
            self._partition_counts[desc.name] = len(desc.partitions)
            for p in desc.partitions:
                self._leaders[(desc.name, p.partition)] = p.leader

    def _send_batches(
        self, batches: dict[tuple[str, int], tuple[bytes, int]], deadline: float
    ) -> None:
        if self._txn is not None:
            self._add_partitions(set(batches))
        pending = dict(batches)
        for attempt in range(50):
            by_leader: dict[int, dict[tuple[str, int], bytes]] = {}
            for tp, (data, _n) in pending.items():
                leader = self._leaders.get(tp, -1)
                by_leader.setdefault(leader, {})[tp] = data
            failed: dict[tuple[str, int], tuple[bytes, int]] = {}
            last_error: Exception | None = None
            for leader, part in by_leader.items():
                try:
                    if leader < 0:
                        raise KafkaError(5, resource=", ".join(f"{t}-{p}" for t, p in part))
                    conn = self.admin.node_connection(leader)
                    retry = self._produce(conn, part)
                except (KafkaConnectionError, KafkaError) as e:
                    if isinstance(e, KafkaError) and e.code not in _RETRIABLE:
                        raise
                    retry = set(part)
                    last_error = e
                for tp in retry:
                    failed[tp] = pending[tp]
            if not failed:
                return
            if time.monotonic() > deadline:
                raise KafkaConnectionError(
                    f"records of {sorted(failed)} not acknowledged before delivery.timeout.ms: "
                    f"{last_error}"
                )
            pending = failed
            time.sleep(min(0.05 * 2**attempt, 1.0))
            for topic in {t for t, _ in failed}:
                try:
                    self._refresh_metadata(topic)
                except (KafkaConnectionError, KafkaError) as e:
                    last_error = e
        raise KafkaConnectionError(f"records of {sorted(pending)} not acknowledged after 50 tries")

    def _produce(
        self, conn: BlockingConnection, part: dict[tuple[str, int], bytes]
    ) -> set[tuple[str, int]]:
        """One Produce request; returns the partitions to retry. Raises on fatal errors."""
        version = conn.pick_version(ApiKey.PRODUCE, MAX_PRODUCE_VERSION)
        cls = conn.request_class(ApiKey.PRODUCE, version)
        topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        for (topic, p), data in sorted(part.items()):
            by_topic.setdefault(topic, []).append((p, data))
        req = make(
            cls,
            transactional_id=self.config.transactional_id,
            acks=self.config.acks,
            timeout=timedelta(milliseconds=self.config.request_timeout_ms),
            topic_data=tuple(
                make(
                    topic_cls,
                    name=topic,
                    partition_data=tuple(
                        make(part_cls, index=p, records=data) for p, data in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )
        resp = conn.send(req)
        retry: set[tuple[str, int]] = set()
        answered: set[tuple[str, int]] = set()
        for t in resp.responses:
            for p in t.partition_responses:
                tp = (t.name, int(p.index))
                answered.add(tp)
                code = int(p.error_code)
                if code == 0 or code == DUPLICATE_SEQUENCE_NUMBER:
                    continue  # a duplicate is a batch the broker already has: delivered
                if code in _RETRIABLE:
                    retry.add(tp)
                    continue
                if code in _FENCED and self._txn is not None:
                    raise ProducerFencedError(
                        code, message=getattr(p, "error_message", None), resource=f"{tp[0]}-{tp[1]}"
                    )
                raise KafkaError(
                    code, message=getattr(p, "error_message", None), resource=f"{tp[0]}-{tp[1]}"
                )
        missing = set(part) - answered
        if missing:
            raise KafkaConnectionError(f"the Produce response left out {sorted(missing)}")
        return retry


__all__ = [
    "ACKS",
    "COMPRESSION_CODES",
    "Producer",
    "ProducerConfig",
    "ProducerFencedError",
    "TransactionStateError",
    "TxnState",
    "txn_error_action",
    "RecordsRegion",
    "PIPELINE_DEPTH",
    "seal_batch",
    "default_partition",
    "murmur2",
]
