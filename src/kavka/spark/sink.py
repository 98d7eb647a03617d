"""The sink: batch and streaming writers of the `kavka` format.

Input columns, as Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string; the ``topic`` option wins over
it), ``partition`` (int; else Kafka's default partitioner: murmur2 of the
key, a sticky partition for null keys) and ``headers``
(array<struct<key: string, value: binary>>). Other columns are ignored. The
schema is checked on the driver (`check_schema`) so a wrong column fails the
query before any task runs.

Each task writes with its own idempotent `kavka.client.producer.Producer`
(a fresh producer id per task attempt), so requests retried inside a task
never duplicate. Semantics are at-least-once: a task that Spark retries, or a
streaming batch replayed after a crash, writes its rows again under a new
producer id. Writers run on executors and open connections only in `write()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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

from kavka.client.producer import Producer, ProducerConfig
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


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _hashable(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_binary(t) or pa.types.is_string(t))


def write_batches(opts: SinkOptions, batches: Iterator[Any]) -> KavkaCommitMessage:
    """Produce every row of `batches` (Arrow record batches); runs on executors."""
    config = ProducerConfig(
        acks=opts.acks,
        compression=opts.compression,
        enable_idempotence=opts.enable_idempotence,
        batch_max_bytes=opts.batch_max_bytes,
        request_timeout_ms=opts.client.request_timeout_ms,
        delivery_timeout_ms=opts.delivery_timeout_ms,
        client_id=opts.client.client_id,
    )
    with Producer(opts.client.bootstrap_servers, config) as producer:
        for batch in batches:
            names = [n.lower() for n in batch.schema.names]
            cols = {n: batch.column(i).to_pylist() for i, n in enumerate(names)}
            n = batch.num_rows
            values = cols["value"]
            keys = cols.get("key") or [None] * n
            topics = [opts.topic] * n if opts.topic else cols["topic"]
            partitions = cols.get("partition") or [None] * n
            if opts.topic and "key" in names and n and _hashable(batch.schema.field(names.index("key")).type):
                # Kafka's default partitioner over the whole key column at once;
                # an explicit partition still wins, a null key stays sticky.
                hashed = key_partitions(
                    batch.column(names.index("key")), producer.partitions_for(opts.topic)
                ).tolist()
                partitions = [
                    p if p is not None else (h if h >= 0 else None)
                    for p, h in zip(partitions, hashed, strict=True)
                ]
            headers = cols.get("headers") or [None] * n
            for i in range(n):
                topic = topics[i]
                if not topic:
                    raise ValueError(
                        "topic: a row has a null topic and no topic option is set"
                    )
                hdrs = headers[i]
                producer.send(
                    topic,
                    _bytes(values[i]),
                    _bytes(keys[i]),
                    headers=[(h["key"], h["value"]) for h in hdrs] if hdrs else (),
                    partition=partitions[i],
                )
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
