"""A streaming query from one topic into another, as its own process: what test_exactly_once_kill kills.

Usage: python -m tests.spark.eos_driver BOOTSTRAP SOURCE OUTPUT CHECKPOINT SEMANTICS MAX_OFFSETS

Reads SOURCE from the earliest offset (format kavka, maxOffsetsPerTrigger
MAX_OFFSETS: many micro-batches), writes each row's key and value to OUTPUT
(format kavka, kavka.sink.semantics SEMANTICS) with the checkpoint CHECKPOINT,
trigger availableNow, and exits 0 once every row available at the start has
been processed. Its Spark JVM and Python workers are its children, in its
process group: the test kills them all with one killpg.
"""

from __future__ import annotations

import sys

from kavka.spark.session import local_session


def main(argv: list[str]) -> int:
    bootstrap, source, output, checkpoint, semantics, max_offsets = argv
    spark = local_session("kavka-eos-driver", cores=2, shuffle_partitions=2)
    query = (
        spark.readStream.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .select("key", "value")
        .writeStream.format("kavka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
        .option("kavka.sink.semantics", semantics)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print("started", query.id, flush=True)
    query.awaitTermination()
    if query.exception() is not None:
        print("failed", query.exception(), file=sys.stderr, flush=True)
        return 1
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
