"""PySpark connector for kavka and any Kafka-compatible cluster: format ``kavka``.

A pure-Python data source on PySpark's Python Data Source API (Spark 4.x):
batch and streaming read (`source`), batch and streaming write (`sink`),
options parsed by `options`, offsets planned by `offsets`. The options and
the output schema are those of Spark's Kafka connector, which needs a JVM jar
this one does not::

    from kavka.spark import register
    register(spark)
    df = (spark.read.format("kavka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Only `kavka.protocol` and `kavka.client` run on executors.

Every Python process that unpickles the data source imports this module: the
planner workers, the executors' workers and, for each streaming query, a new
`python_streaming_source_runner` whose start delays the query's first
micro-batch. So the source and the sink are imported by the methods that use
them: a read never loads the sink's encoder (pyarrow.compute, the producer),
a write never loads the source's offset planning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource

from kavka.spark.worker import import_kio_without_test_hooks

if TYPE_CHECKING:
    from kavka.spark.sink import KavkaBatchWriter, KavkaStreamWriter
    from kavka.spark.source import KavkaBatchReader, KavkaStreamReader

FORMAT = "kavka"

import_kio_without_test_hooks()  # before anything of the connector imports kio


class KavkaDataSource(DataSource):
    """Format ``kavka``: Spark's Kafka connector options and schema, in Python."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        from kavka.spark.source import source_schema

        include = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: Any) -> KavkaBatchReader:
        from kavka.spark.options import parse_source_options
        from kavka.spark.source import KavkaBatchReader

        return KavkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: Any) -> KavkaStreamReader:
        from kavka.spark.options import parse_source_options
        from kavka.spark.source import KavkaStreamReader

        return KavkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: Any, overwrite: bool) -> KavkaBatchWriter:
        from kavka.spark.options import OptionError, parse_sink_options
        from kavka.spark.sink import KavkaBatchWriter, check_schema, ensure_progress_topic

        opts = parse_sink_options(self.options)
        if overwrite:
            raise OptionError(
                "mode: overwrite is not supported; records are appended to topics (use append)"
            )
        check_schema(schema, opts)
        if opts.exactly_once:
            ensure_progress_topic(opts)
        return KavkaBatchWriter(opts)

    def streamWriter(self, schema: Any, overwrite: bool) -> KavkaStreamWriter:
        from kavka.spark.options import parse_sink_options
        from kavka.spark.sink import KavkaStreamWriter, check_schema, ensure_progress_topic

        opts = parse_sink_options(self.options)
        check_schema(schema, opts)
        if opts.exactly_once:
            ensure_progress_topic(opts)
        return KavkaStreamWriter(opts)


def register(spark: Any) -> None:
    """Make ``spark.read.format("kavka")`` (and readStream, write, writeStream) available."""
    spark.dataSource.register(KavkaDataSource)


def __getattr__(name: str) -> Any:
    # The exceptions a job catches, importable from here without importing everything eagerly.
    if name == "OptionError":
        from kavka.spark.options import OptionError

        return OptionError
    if name == "DataLossError":
        from kavka.spark.source import DataLossError

        return DataLossError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMAT", "DataLossError", "KavkaDataSource", "OptionError", "register"]
