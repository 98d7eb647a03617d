"""The Spark source reads a tiered topic whose head is only in remote storage (KIP-405), record by
record, from offset 0 -- through the same Fetch path as every other client."""

from __future__ import annotations

from pathlib import Path

from tests.integration.helpers import (
    ck_produce_samples,
    ck_producer,
    recent_base_ts,
    sample_records,
)
from tests.integration.test_tiered import EARLIEST_LOCAL, TIERED, list_offset, tiered_broker
from tests.spark.util import create_topic, expected_recs, rows_to_recs
from tests.wait import wait_until


def test_spark_batch_read_of_a_tiered_topic(spark, tmp_path: Path) -> None:
    b = tiered_broker(tmp_path / "b", tmp_path / "remote").start()
    try:
        topic = "spark-tiered"
        create_topic(b.bootstrap, topic, 2, TIERED)
        producer = ck_producer(b.bootstrap, {"linger.ms": 0, "batch.num.messages": 5})  # batches < segment.bytes
        samples = {p: sample_records(200, base_ts=recent_base_ts()) for p in range(2)}
        for p, ss in samples.items():
            ck_produce_samples(producer, topic, ss, partition=p)
        wait_until(lambda: all(list_offset(b, topic, EARLIEST_LOCAL, p)[1] > 0 for p in range(2)),
                   timeout=60, message="the head of each partition to leave local disk")
        df = (spark.read.format("kavka").option("kafka.bootstrap.servers", b.bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true").load())
        assert rows_to_recs(df.collect()) == expected_recs(samples)
    finally:
        assert b.stop() == 0, b.log_text()
