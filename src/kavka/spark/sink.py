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
never duplicate. Semantics are at-least-once: a task that Spark retries, or a
streaming batch replayed after a crash, writes its rows again under a new
producer id. Writers run on executors and open connections only in `write()`.
"""

from __future__ import annotations

import random
import time
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
from kavka.client.producer import Producer, ProducerConfig, RecordsRegion
from kavka.spark.arrow_encode import chunk_bounds, encode_chunks, int_values, record_sizes
from kavka.spark.options import OptionError, SinkOptions
from kavka.spark.partitioner import key_partitions


@dataclass
class KavkaCommitMessage(WriterCommitMessage):
    records: int
    idempotent: bool


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


def write_batches(opts: SinkOptions, batches: Iterator[Any]) -> KavkaCommitMessage:
    """Produce every row of `batches` (Arrow record batches); runs on executors.

    Each input batch is split by topic and partition, encoded in bulk
    (`kavka.spark.arrow_encode`) and queued to the producer's sender thread,
    which sends it while the next input batch is encoded."""
    config = ProducerConfig(
        acks=opts.acks,
        compression=opts.compression,
        enable_idempotence=opts.enable_idempotence,
        batch_max_bytes=opts.batch_max_bytes,
        request_timeout_ms=opts.client.request_timeout_ms,
        delivery_timeout_ms=opts.delivery_timeout_ms,
        client_id=opts.client.client_id,
    )
    with Producer(opts.client.bootstrap_servers, config, security=opts.client.client_security()) as producer:
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
        producer.flush()
        return KavkaCommitMessage(records=producer.records_sent, idempotent=producer.idempotent)


class KavkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> KavkaCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # every task's records are acknowledged before its write() returns

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # records already acknowledged stay: the sink is at-least-once


class KavkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> KavkaCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass
