"""A Python worker freezes what it imported at its first task (`kavka.spark.worker`).

Spark's worker daemon runs a full collection after every task of a reused
worker; frozen objects are left out of it. Run in a fresh interpreter, as a
worker is: the test process's own collector must not be frozen.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

CODE = """
import gc, json
from pyspark.taskcontext import TaskContext
import kavka.spark.source
from kavka.spark.worker import freeze_imports

freeze_imports()                       # not in a Spark task: the driver, a test
outside = gc.get_freeze_count()
TaskContext._getOrCreate()             # what pyspark.worker sets up before a task runs
tracked = len(gc.get_objects())
freeze_imports()
frozen = gc.get_freeze_count()
left = len(gc.get_objects())
freeze_imports()                       # the worker's next task
again = gc.get_freeze_count()
import kavka.spark.sink                # a write task after the reads: the sink's modules
freeze_imports()
print(json.dumps({"outside": outside, "tracked": tracked, "frozen": frozen, "left": left,
                  "again": again, "after_sink": gc.get_freeze_count()}))
"""


def test_the_first_task_freezes_the_imports_once_and_again_after_new_imports():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["outside"] == 0, r
    # kio, pyarrow, numpy and pyspark: tens of thousands of objects, now out of every collection
    assert r["frozen"] > 20_000 and r["frozen"] >= 0.9 * r["tracked"], r
    assert r["left"] < 0.1 * r["tracked"], r
    assert r["again"] == r["frozen"], r
    # the sink's modules (the producer, pyarrow.compute) are frozen too when a task imports them
    assert r["after_sink"] > r["frozen"], r


HOOKS = """
import json, sys
import kavka.spark, kavka.spark.source, kavka.spark.offsets
loaded = "hypothesis" in sys.modules
import hypothesis.strategies           # still importable by anything else
from kio.static import _phantom
print(json.dumps({"loaded": loaded, "hooks": _phantom.hypothesis is not None}))
"""


def test_spark_processes_import_kio_without_its_hypothesis_strategies():
    """kio registers hypothesis strategies at import where hypothesis is installed (this venv);
    a process Spark started (SPARK_PYTHON_RUNTIME, which pyspark's worker code asserts) skips
    them, a driver does not."""
    pytest.importorskip("hypothesis")

    def run(env: dict[str, str]) -> dict:
        out = subprocess.run([sys.executable, "-c", HOOKS], capture_output=True, text=True, check=True, env=env)
        return json.loads(out.stdout)

    driver = {k: v for k, v in os.environ.items() if k != "SPARK_PYTHON_RUNTIME"}
    assert run(driver) == {"loaded": True, "hooks": True}
    assert run({**driver, "SPARK_PYTHON_RUNTIME": "PYTHON_WORKER"}) == {"loaded": False, "hooks": False}


def test_a_worker_reads_consecutive_micro_batches_over_one_connection(broker, topic_name, monkeypatch):  # noqa: ANN001
    """A reused worker keeps its fetcher between tasks (`source._fetchers`): the ranges of
    consecutive micro-batches are read over the connections the first one opened, each record
    exactly once, and a failed task drops the fetcher so the next opens new ones."""
    from kavka.client.connection import BlockingConnection
    from kavka.spark import source
    from kavka.spark.options import parse_source_options
    from tests.spark.util import create_topic, produce_per_partition

    create_topic(broker.bootstrap, topic_name, 1)
    samples = produce_per_partition(broker.bootstrap, topic_name, 1, 60)[0]
    opened = []
    init = BlockingConnection.__init__

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        opened.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(BlockingConnection, "__init__", counting)
    opts = parse_source_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name}, streaming=True)

    def read(start: int, end: int) -> list[tuple[int, bytes]]:
        # Each task unpickles its own copy of the options, as Spark's tasks do.
        part = source.KafkaInputPartition(topic_name, 0, start, end)
        rows = []
        for batch in source.read_range(pickle.loads(pickle.dumps(opts)), part):
            rows += zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True)
        return rows

    try:
        got = read(0, 20)
        first = len(opened)
        assert first >= 1
        got += read(20, 45) + read(45, 60)
        assert got == [(o, samples[o].value) for o in range(60)]
        assert len(opened) == first, opened  # opened by the first task only
        with pytest.raises(source.DataLossError):
            read(70, 80)  # past the end: the task fails, and its fetcher goes with it
        assert read(58, 60) == [(o, samples[o].value) for o in (58, 59)]
        assert len(opened) > first, opened
    finally:
        source._drop_fetcher(opts.client)
