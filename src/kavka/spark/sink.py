"""The sink: batch and streaming writers of the `kavka` format.

Input columns, as Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string; the ``topic`` option wins over
it), ``partition`` (int; else Kafka's default partitioner: murmur2 of the
key, a sticky partition for null keys) and ``headers``
(array<struct<key: string, value: binary>>). Other columns are ignored. The
schema is checked on the driver (`check_schema`) so a wrong column fails the
query before any task runs.

Rows are never turned into Python objects: each Arrow batch is split by
topic and partition with numpy/Arrow kernels and encoded in bulk into record
batches (`kavka.spark.arrow_encode`), which the producer's sender thread
sends while the next batch is encoded.

Each task writes with its own idempotent `kavka.client.producer.Producer`
(a fresh producer id per task attempt), so requests retried inside a task
never duplicate. Semantics are at-least-once by default: a task that Spark
retries, or a streaming batch replayed after a crash, writes its rows again
under a new producer id. Writers run on executors and open connections only
in `write()`.

``kavka.sink.semantics=exactly_once``: each task writes its rows in one
transaction whose transactional.id is derived from (write id, Spark partition
id) -- the streaming query's id (kept in the checkpoint) or a uuid made on the
driver for one batch write -- and, in the same transaction, a progress record
``"<write id>/<partition>" -> epoch`` (the micro-batch id; 0 for a batch
write) to the compacted topic `PROGRESS_TOPIC`. The producer's InitProducerId
completes whatever an earlier attempt of the task left (and fences it); the
task then reads its progress record with read_committed and writes nothing if
that epoch is already committed. Correct only if a replayed micro-batch gives
each partition the same rows (docs/spark.md#transactions).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from kavka.client.errors import KafkaError
from kavka.client.producer import (
    Producer,
    ProducerConfig,
    ProducerFencedError,
    RecordsRegion,
    default_partition,
)
from kavka.spark.arrow_encode import chunk_bounds, encode_chunks, int_values, record_sizes
from kavka.spark.options import OptionError, SinkOptions
from kavka.spark.partitioner import key_partitions
from kavka.spark.worker import freeze_imports

log = logging.getLogger(__name__)


@dataclass
class KavkaCommitMessage(WriterCommitMessage):
    records: int
    idempotent: bool
    # exactly_once: the task found its progress record and wrote nothing (a replay).
    skipped: bool = False


PROGRESS_TOPIC = "__kavka_spark_sink"
PROGRESS_PARTITIONS = 8
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY


@dataclass(frozen=True)
class TaskIdentity:
    """Who writes what, for exactly_once: a write (a streaming query's id, or one batch
    write's id), a Spark partition of it, and the epoch (micro-batch id; 0 for batch writes)."""

    write_id: str
    partition: int
    epoch: int

    @property
    def transactional_id(self) -> str:
        return f"kavka-spark-{self.write_id}-{self.partition}"

    @property
    def progress_key(self) -> bytes:
        return f"{self.write_id}/{self.partition}".encode()


def ensure_progress_topic(opts: SinkOptions) -> None:
    """Create the compacted progress topic on first use (on the driver) and wait until its
    metadata is served."""
    from kio.schema.errors import ErrorCode

    from kavka.client.admin import AdminClient, NewTopic

    c = opts.client
    with AdminClient(c.bootstrap_servers, client_id=c.client_id,
                     timeout_s=c.request_timeout_ms / 1000, security=c.client_security()) as admin:
        try:
            admin.create_topics([NewTopic(PROGRESS_TOPIC, PROGRESS_PARTITIONS, -1,
                                          {"cleanup.policy": "compact"})])
        except KafkaError as e:
            if e.code != ErrorCode.topic_already_exists:
                raise
        deadline = time.monotonic() + c.request_timeout_ms / 1000
        while True:
            try:
                (desc,) = admin.describe_topics([PROGRESS_TOPIC])
                if all(p.leader >= 0 for p in desc.partitions):
                    return
            except KafkaError as e:
                if e.code != ErrorCode.unknown_topic_or_partition:
                    raise
            if time.monotonic() > deadline:
                raise KafkaError(5, message="the progress topic has no leaders", resource=PROGRESS_TOPIC)
            time.sleep(0.1)


def read_progress(opts: SinkOptions, who: TaskIdentity, partition: int) -> int | None:
    """The last committed epoch of `who`'s progress record (read_committed), or None.

    Reads the progress partition up to its high watermark as it is now (after this task's
    InitProducerId completed any earlier transaction of the same transactional id), waiting
    while another task's open transaction holds the last stable offset below it."""
    from kavka.client.fetcher import (
        Fetcher,
        OffsetOutOfRangeError,
        RecordColumns,
        _decode_into,
        drop_aborted,
    )

    c = opts.client
    timeout_s = c.request_timeout_ms / 1000
    with Fetcher(c.bootstrap_servers, client_id=c.client_id, timeout_s=timeout_s, max_wait_ms=100,
                 security=c.client_security(), isolation_level=1) as fetcher:
        offsets = fetcher.admin.list_offsets(
            {(PROGRESS_TOPIC, partition): "earliest"}
        )[(PROGRESS_TOPIC, partition)].offset
        hw = fetcher.admin.list_offsets(
            {(PROGRESS_TOPIC, partition): "latest"}
        )[(PROGRESS_TOPIC, partition)].offset
        position, found = offsets, None
        deadline = time.monotonic() + timeout_s
        while position < hw:
            try:
                result = fetcher.fetch(PROGRESS_TOPIC, partition, position)
            except OffsetOutOfRangeError as e:  # compaction or retention moved the start
                position = max(position + 1, e.log_start_offset)
                continue
            kept, past = drop_aborted(result.records, result.aborted)
            cols = RecordColumns()
            nxt = max(_decode_into(cols, kept, position, hw), min(past, hw))
            for key, value in zip(cols.keys, cols.values, strict=True):
                if key == who.progress_key:
                    found = None if value is None else int(value)
            if nxt == position:
                if time.monotonic() > deadline:
                    raise KafkaError(
                        7, message=f"the progress of {who.transactional_id} could not be read: the "
                        f"last stable offset stayed below {hw}", resource=f"{PROGRESS_TOPIC}-{partition}",
                    )
                time.sleep(0.05)
                continue
            position = nxt
        return found


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """Refuse, naming the column or option, a DataFrame the sink cannot write."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("value: the DataFrame needs a value column (binary or string) to write")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], BinaryType | StringType):
            raise OptionError(
                f"{name}: the {name} column must be binary or string, not {fields[name].simpleString()}"
            )
    if "topic" in fields:
        if not isinstance(fields["topic"], StringType):
            raise OptionError(
                f"topic: the topic column must be a string, not {fields['topic'].simpleString()}"
            )
    elif opts.topic is None:
        raise OptionError(
            "topic: set the topic option or give the DataFrame a topic column (string)"
        )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(
            f"partition: the partition column must be an int, not {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                "headers: the headers column must be array<struct<key: string, value: binary>>, "
                f"not {h.simpleString()}"
            )


def _partitions(
    rows: Any, names: list[str], topic: str, count: int
) -> np.ndarray:
    """The partition of every row: the partition column, else murmur2 of the key, else sticky.

    Kafka's default partitioner (KIP-480): keyed rows by murmur2 of the key;
    rows with neither key nor partition share one random partition per input
    batch."""
    n = rows.num_rows
    parts = np.full(n, -1, dtype=np.int64)
    if "partition" in names:
        col = rows.column(names.index("partition"))
        explicit = int_values(col, -1)
        bad = explicit[(explicit >= count) | (explicit < -1)]
        if len(bad):
            raise KafkaError(
                3, message=f"partition {int(bad[0])} does not exist ({count} partitions)",
                resource=f"{topic}-{int(bad[0])}",
            )
        parts = explicit
    if "key" in names and (parts < 0).any():
        hashed = key_partitions(rows.column(names.index("key")), count)
        parts = np.where(parts >= 0, parts, hashed)
    if (parts < 0).any():
        parts = np.where(parts >= 0, parts, random.randrange(count))
    return parts


def _regions(
    rows: Any, names: list[str], topic: str, producer: Producer, max_bytes: int
) -> list[tuple[str, int, RecordsRegion]]:
    """`rows` (one topic) encoded as batches of at most `max_bytes`, per partition.

    Rows are put in partition order once (a stable sort keeps each
    partition's rows in input order), cut into batches, and encoded in one
    `encode_chunks` call."""
    parts = _partitions(rows, names, topic, producer.partitions_for(topic))
    cols = {n: rows.column(names.index(n)) for n in ("key", "value", "headers") if n in names}
    if len(parts) > 1 and (np.diff(parts) < 0).any():
        order = np.argsort(parts, kind="stable")
        parts = parts[order]
        idx = pa.array(order)
        cols = {n: c.take(idx) for n, c in cols.items()}
    sizes = record_sizes(cols["value"], cols.get("key"), cols.get("headers"))
    cuts = np.flatnonzero(np.diff(parts)) + 1
    edges = [0, *cuts.tolist(), len(parts)]
    bounds: list[tuple[int, int]] = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        bounds += [(lo + s, lo + e) for s, e in chunk_bounds(sizes[lo:hi], max_bytes)]
    regions = encode_chunks(
        cols["value"], keys=cols.get("key"), headers=cols.get("headers"),
        timestamps=int(time.time() * 1000), bounds=bounds,
    )
    return [(topic, int(parts[s]), r) for (s, _), r in zip(bounds, regions, strict=True)]


def write_batches(
    opts: SinkOptions, batches: Iterator[Any], who: TaskIdentity | None = None
) -> KavkaCommitMessage:
    """Produce every row of `batches` (Arrow record batches); runs on executors.

    Each input batch is split by topic and partition, encoded in bulk
    (`kavka.spark.arrow_encode`) and queued to the producer's sender thread,
    which sends it while the next input batch is encoded."""
    freeze_imports()
    config = ProducerConfig(
        acks=opts.acks,
        compression=opts.compression,
        enable_idempotence=opts.enable_idempotence,
        batch_max_bytes=opts.batch_max_bytes,
        request_timeout_ms=opts.client.request_timeout_ms,
        delivery_timeout_ms=opts.delivery_timeout_ms,
        client_id=opts.client.client_id,
        transactional_id=who.transactional_id if who else None,
        transaction_timeout_ms=opts.transaction_timeout_ms,
    )
    with Producer(opts.client.bootstrap_servers, config, security=opts.client.client_security()) as producer:
        if who is None:
            _produce_all(opts, batches, producer)
            producer.flush()
            return KavkaCommitMessage(records=producer.records_sent, idempotent=producer.idempotent)
        # exactly_once: the producer's InitProducerId has completed any transaction an earlier
        # attempt of this task left (and fenced that attempt); its progress record says whether
        # it committed this epoch.
        progress_partition = default_partition(who.progress_key, producer.partitions_for(PROGRESS_TOPIC))
        done = read_progress(opts, who, progress_partition)
        if done is not None and done >= who.epoch:
            log.info("%s: epoch %s already committed (progress %s): writing nothing",
                     who.transactional_id, who.epoch, done)
            for _ in batches:  # the rows Spark streams to this task are still read, not written
                pass
            return KavkaCommitMessage(records=0, idempotent=True, skipped=True)
        producer.begin_transaction()
        try:
            _produce_all(opts, batches, producer)
            producer.send(PROGRESS_TOPIC, str(who.epoch).encode(), who.progress_key,
                          partition=progress_partition)
            producer.commit_transaction()
        except ProducerFencedError:
            raise  # a newer attempt owns the transactional id: leave its transaction alone
        except BaseException:
            try:
                producer.abort_transaction()
            except Exception:  # the coordinator aborts it at the transaction timeout anyway
                log.warning("%s: abort failed", who.transactional_id, exc_info=True)
            raise
        # The progress record is not a row.
        return KavkaCommitMessage(records=producer.records_sent - 1, idempotent=True)


def _produce_all(opts: SinkOptions, batches: Iterator[Any], producer: Producer) -> None:
    for batch in batches:
        if batch.num_rows == 0:
            continue
        names = [n.lower() for n in batch.schema.names]
        if opts.topic:
            by_topic = [(opts.topic, batch)]
        else:
            topics = batch.column(names.index("topic"))
            if topics.null_count or not pc.all(pc.greater(pc.binary_length(topics), 0)).as_py():
                raise ValueError("topic: a row has a null topic and no topic option is set")
            uniq = pc.unique(topics).to_pylist()
            by_topic = (
                [(uniq[0], batch)] if len(uniq) == 1
                else [(t, batch.filter(pc.equal(topics, t))) for t in uniq]
            )
        items: list[tuple[str, int, RecordsRegion]] = []
        for topic, rows in by_topic:
            items += _regions(rows, names, topic, producer, opts.batch_max_bytes)
        producer.send_regions(items)


def _task_partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("kavka.sink.semantics=exactly_once: not running in a Spark task")
    return ctx.partitionId()


class KavkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        # Made once on the driver per write: every attempt of a task shares it.
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> KavkaCommitMessage:
        who = TaskIdentity(self.write_id, _task_partition(), 0) if self.opts.exactly_once else None
        return write_batches(self.opts, iterator, who)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # every task's records are acknowledged before its write() returns

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # records already acknowledged stay: the sink is at-least-once


class KavkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> KavkaCommitMessage:
        who = None
        if self.opts.exactly_once:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            query = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx else None
            batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx else None
            if not query or batch is None:
                raise RuntimeError(
                    "kavka.sink.semantics=exactly_once: the task carries no streaming query id "
                    "and batch id (continuous processing is not supported)"
                )
            # The query id is kept in the checkpoint: the same across restarts of the query.
            who = TaskIdentity(query, _task_partition(), int(batch))
        return write_batches(self.opts, iterator, who)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass
