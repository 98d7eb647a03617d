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
"""

from __future__ import annotations

import gc
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
