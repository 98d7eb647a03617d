"""Executor-side set-up of a Python worker process, shared by the source and the sink.

Spark's worker daemon (pyspark/daemon.py) runs a full ``gc.collect()`` after
every task of a reused Python worker. A worker that has imported the connector
holds about 90,000 objects the collector tracks (kio's generated message
classes, pyarrow, numpy, pyspark), and a full collection of them costs about
50 ms of CPU: more than reading a task's 12,500 records of 1 KiB (about 35 ms),
and paid again by every task of every micro-batch of a stream (measured:
2.8 s against 1.2 s of Python-worker CPU for 10 micro-batches of 20,000
records). `freeze_imports` moves what is alive at a worker's first task -- the
imported modules, their classes and tables -- into the collector's permanent
generation (`gc.freeze`), so later collections visit only what tasks allocate.
Reference counting still frees frozen objects; only reference cycles among them
are never collected, and what is frozen is what a worker keeps for its life.
Only a Spark task freezes: the same code called in a driver or a test process
leaves that process's collector alone. The source and the sink are imported
only by the tasks that use them (`kavka.spark`), so a worker whose first task
read and whose next one writes imports the sink then: a task that finds more
modules loaded than at the last freeze freezes again.

`import_kio_without_test_hooks` is the other half of a worker's set-up, for
every Python process Spark starts (executors' workers, the planners, and each
streaming query's source runner, which the query waits for).
"""

from __future__ import annotations

import gc
import os
import sys

from pyspark import TaskContext

_modules_at_freeze = 0


def freeze_imports() -> None:
    """In a Spark task, once per Python worker and again after new imports: collect, then
    freeze everything alive."""
    global _modules_at_freeze
    if len(sys.modules) == _modules_at_freeze or TaskContext.get() is None:
        return
    _modules_at_freeze = len(sys.modules)
    gc.collect()
    gc.freeze()


def import_kio_without_test_hooks() -> None:
    """In a Python process Spark started, import kio without its hypothesis strategies.

    kio registers a hypothesis strategy for each of its types at import whenever
    hypothesis is importable (`kio.static._phantom`), and imports hypothesis to do it:
    130-250 ms of CPU in every process that loads the connector where hypothesis is
    installed (a development or test environment, as this repository's), paid by each
    streaming query's source runner before its first micro-batch. Spark's processes never
    draw kio values from hypothesis, so there kio's probe is answered ImportError; every
    other import of hypothesis is left alone, and a driver or a test process (which Spark
    did not start: no ``SPARK_PYTHON_RUNTIME``) imports kio as usual.
    """
    if os.environ.get("SPARK_PYTHON_RUNTIME") != "PYTHON_WORKER" or "kio" in sys.modules:
        return
    saved = sys.modules.get("hypothesis")
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` raises ImportError
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        if saved is None:
            del sys.modules["hypothesis"]
        else:
            sys.modules["hypothesis"] = saved
