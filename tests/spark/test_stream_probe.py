"""One latest-offsets probe per trigger: `reportLatestOffset` reports what `latestOffset` probed.

Spark asks for both on every micro-batch; like Spark's Kafka source
(KafkaMicroBatchStream caches latestPartitionOffsets) the reader answers the
second from the first's Metadata + ListOffsets round instead of asking the
broker again. The report is the log end, not the rate-limited end.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: E402

from kavka.spark.options import parse_source_options  # noqa: E402
from kavka.spark.source import KavkaStreamReader  # noqa: E402
from tests.spark.util import create_topic, produce_per_partition  # noqa: E402


def test_report_latest_offset_is_the_last_probe(broker, topic_name):  # noqa: ANN001
    create_topic(broker.bootstrap, topic_name, 1)
    produce_per_partition(broker.bootstrap, topic_name, 1, 100)
    opts = parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name,
         "startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"},
        streaming=True,
    )
    reader = KavkaStreamReader(opts)
    try:
        start = reader.initialOffset()
        assert reader.latestOffset(start, ReadMaxRows(10)) == {topic_name: {"0": 10}}
        assert reader.reportLatestOffset() == {topic_name: {"0": 100}}
        produce_per_partition(broker.bootstrap, topic_name, 1, 5)
        assert reader.reportLatestOffset() == {topic_name: {"0": 100}}  # no second probe
        reader.latestOffset(start, ReadMaxRows(10))
        assert reader.reportLatestOffset() == {topic_name: {"0": 105}}
    finally:
        reader.stop()
