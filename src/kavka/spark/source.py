"""The source: batch and streaming readers of the `kavka` format.

Driver side (`KavkaBatchReader.partitions`, `KavkaStreamReader`) resolves
offsets with `offsets.OffsetResolver` and plans one Spark partition per
topic-partition offset range. Executor side (`read_range`) fetches a range
with `kavka.client.fetcher.Fetcher`, decodes it with the vectorised
`kavka.spark.arrow_decode.decode_arrow` and yields Arrow record batches whose
schema is exactly the one Spark derives from `SCHEMA` (binary, not
large_binary; timestamp[us, tz=UTC]), so they pass to the JVM without a
per-row conversion.

Executors import only `kavka.protocol` and `kavka.client`. Connections are
opened in `read()`, never when a reader is built (readers are pickled into
tasks), and kept in a per-process cache because Spark reuses Python workers.

Streaming: the stream offset is ``{"topic": {"partition": next offset}}``;
`latestOffset` admits at most ``maxOffsetsPerTrigger`` records, picks up new
partitions and (for subscribePattern) new topics, which start at their
earliest offset; a restarted query resumes from the checkpointed offset.
Retention-deleted ranges fail the task with `DataLossError` naming topic,
partition and offsets, or are skipped with a warning when
``failOnDataLoss=false``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kavka.client.fetcher import Fetcher, OffsetOutOfRangeError
from kavka.spark.offsets import (
    OffsetRange,
    OffsetResolver,
    TopicPartition,
    from_json_offsets,
    plan_ranges,
    rate_limit,
    to_json_offsets,
)
from kavka.spark.options import ClientSettings, OffsetSpec, SourceOptions
from kavka.spark.worker import freeze_imports

log = logging.getLogger(__name__)

def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema (headers only when asked)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class DataLossError(RuntimeError):
    """Records the query should have read are gone (retention, DeleteRecords, a recreated topic)."""


class KafkaInputPartition(InputPartition):
    """One offset range of one topic-partition: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _input_partitions(ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
    return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]


# ---------------------------------------------------------------------- executor side

_fetchers: dict[ClientSettings, Fetcher] = {}
_fetchers_lock = threading.Lock()


def _fetcher(client: ClientSettings) -> Fetcher:
    with _fetchers_lock:
        f = _fetchers.get(client)
        if f is None:
            f = Fetcher(
                client.bootstrap_servers,
                client_id=client.client_id,
                timeout_s=client.request_timeout_ms / 1000,
                max_wait_ms=client.fetch_max_wait_ms,
                fetch_max_bytes=client.fetch_max_bytes,
                max_partition_fetch_bytes=client.max_partition_fetch_bytes,
                security=client.client_security(),
                isolation_level=client.isolation_level,
            )
            _fetchers[client] = f
        return f


def _drop_fetcher(client: ClientSettings) -> None:
    with _fetchers_lock:
        f = _fetchers.pop(client, None)
    if f is not None:
        f.close()


@functools.cache
def _arrow_schema(include_headers: bool) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    # The conversion Spark itself checks returned batches against.
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def read_range(opts: SourceOptions, part: KafkaInputPartition) -> Iterator[Any]:
    """Arrow batches of the records of `part` (runs on executors)."""
    # Imported here: the driver's planning processes (a streaming query's source runner above
    # all, started anew for each query) never decode records.
    from kavka.spark.arrow_decode import decode_arrow

    freeze_imports()
    schema = _arrow_schema(opts.include_headers)
    topic, partition, position, end = part.topic, part.partition, part.start, part.end
    fetcher = _fetcher(opts.client)

    def decode(buf: bytes, start: int, stop: int) -> tuple[Any, int]:
        return decode_arrow(buf, start, stop, topic, partition, schema)

    try:
        for _attempt in range(1000):  # one attempt per data-loss skip
            try:
                for batch in fetcher.read_range_with(topic, partition, position, end, decode):
                    position = batch.column(4)[-1].as_py() + 1
                    yield batch
            except OffsetOutOfRangeError as e:
                if e.log_start_offset > position and e.log_start_offset <= e.high_watermark:
                    lost = (position, min(e.log_start_offset, end) - 1)
                    _data_loss(
                        opts,
                        f"offsets {lost[0]} to {lost[1]} of {topic}-{partition} were deleted "
                        f"(retention or DeleteRecords) before they were read; the log now starts "
                        f"at {e.log_start_offset}",
                    )
                    position = e.log_start_offset
                    if position >= end:
                        return
                    continue
                _data_loss(
                    opts,
                    f"{topic}-{partition} ends at {e.high_watermark} but offsets up to {end - 1} "
                    "were planned (was the topic deleted and recreated?)",
                )
                return
            if position < end:
                # The fetcher waited out its timeout without reaching `end`. With a
                # compacted tail the last offsets may simply have no records left.
                log.info("%s-%s: no records between %s and %s", topic, partition, position, end)
            return
    except BaseException:
        _drop_fetcher(opts.client)  # a broken connection must not serve the next task
        raise


def _data_loss(opts: SourceOptions, what: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{what}. Some data may have been lost. Set the option failOnDataLoss=false "
            "to skip lost records and go on."
        )
    log.warning("%s: skipping them (failOnDataLoss=false)", what)


# ---------------------------------------------------------------------- batch


class KavkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[KafkaInputPartition]:
        with OffsetResolver(self.opts) as r:
            tps = r.topic_partitions()
            start = r.resolve(self.opts.starting, tps, option=_option(self.opts.starting, "starting"))
            end = r.resolve(
                self.opts.ending, tps, option=_option(self.opts.ending, "ending"), ending=True
            )
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"{_option(self.opts.starting, 'starting')}: the start offset {start[tp]} of "
                    f"{tp[0]}-{tp[1]} is after its end offset {end[tp]}"
                )
        parts = _input_partitions(plan_ranges(start, end, self.opts.min_partitions))
        # Spark needs at least one partition; an empty range reads nothing.
        return parts or [KafkaInputPartition("", 0, 0, 0)]

    def read(self, partition: KafkaInputPartition) -> Iterator[Any]:
        if partition.end <= partition.start:
            return iter(())
        return read_range(self.opts, partition)


def _option(spec: OffsetSpec, side: str) -> str:
    return {
        "timestamp": f"{side}Timestamp",
        "timestamps": f"{side}OffsetsByTimestamp",
    }.get(spec.kind, f"{side}Offsets")


# ---------------------------------------------------------------------- streaming


class KavkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; lives in one driver process per query run."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._resolver: OffsetResolver | None = None
        self._initial: dict[str, dict[str, int]] | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._probed: dict[TopicPartition, int] | None = None  # latest offsets, last probe

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_resolver": None, "_initial": self._initial, "_target": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.opts = state["opts"]
        self._resolver = None
        self._initial = state["_initial"]
        self._target = None
        self._probed = None

    @property
    def resolver(self) -> OffsetResolver:
        if self._resolver is None:
            self._resolver = OffsetResolver(self.opts)
        return self._resolver

    def _reset(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None

    def initialOffset(self) -> dict:
        # Spark may call this twice in one run: resolve "latest" once.
        if self._initial is None:
            r = self.resolver
            tps = r.topic_partitions()
            start = r.resolve(self.opts.starting, tps, option=_option(self.opts.starting, "starting"))
            self._initial = to_json_offsets(start)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        r = self.resolver
        self._target = r.latest(r.topic_partitions(strict=False))

    def _available(self) -> dict[TopicPartition, int]:
        if self._target is not None:
            # Trigger.AvailableNow reads up to what was there when it started: as Spark's Kafka
            # source (allDataForTriggerAvailableNow), no Metadata + ListOffsets probe per trigger.
            self._probed = dict(self._target)
            return dict(self._target)
        r = self.resolver
        latest = r.latest(r.topic_partitions(strict=False))
        self._probed = dict(latest)  # for reportLatestOffset, as Spark's Kafka source caches it
        return latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_offsets(start)
        latest = self._available()
        new = [tp for tp in latest if tp not in begin]
        if new:
            log.info("new partitions %s start at their earliest offsets", new)
            begin.update(self.resolver.earliest(new))
        for tp, o in list(latest.items()):
            if o < begin[tp]:
                _data_loss(
                    self.opts,
                    f"{tp[0]}-{tp[1]} ends at offset {o}, before the query's position {begin[tp]} "
                    "(was the topic deleted and recreated?)",
                )
                latest[tp] = begin[tp]
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, limit.max_rows)
        else:
            end = latest
        # Partitions that disappeared keep their last position.
        for tp, o in from_json_offsets(start).items():
            end.setdefault(tp, o)
        return to_json_offsets(end)

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after latestOffset: report that probe's offsets (one
        # Metadata + ListOffsets round per trigger, not two).
        if self._probed is not None:
            return to_json_offsets(self._probed)
        r = self.resolver
        return to_json_offsets(r.latest(r.topic_partitions(strict=False)))

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin = from_json_offsets(start)
        stop = from_json_offsets(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self.resolver.earliest(new))
        return _input_partitions(plan_ranges(begin, stop, self.opts.min_partitions))

    def read(self, partition: KafkaInputPartition) -> Iterator[Any]:
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint; there is no consumer group to commit to.
        pass

    def stop(self) -> None:
        self._reset()
