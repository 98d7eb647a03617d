"""A Python worker freezes what it imported at its first task (`kavka.spark.worker`).

Spark's worker daemon runs a full collection after every task of a reused
worker; frozen objects are left out of it. Run in a fresh interpreter, as a
worker is: the test process's own collector must not be frozen.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

CODE = """
import gc, json
from pyspark.taskcontext import TaskContext
import kavka.spark.source, kavka.spark.sink
from kavka.spark.worker import freeze_imports

freeze_imports()                       # not in a Spark task: the driver, a test
outside = gc.get_freeze_count()
TaskContext._getOrCreate()             # what pyspark.worker sets up before a task runs
tracked = len(gc.get_objects())
freeze_imports()
frozen = gc.get_freeze_count()
left = len(gc.get_objects())
freeze_imports()                       # the worker's next task
print(json.dumps({"outside": outside, "tracked": tracked, "frozen": frozen, "left": left,
                  "again": gc.get_freeze_count()}))
"""


def test_the_first_task_freezes_the_imports_once():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["outside"] == 0, r
    # kio, pyarrow, numpy and pyspark: tens of thousands of objects, now out of every collection
    assert r["frozen"] > 20_000 and r["frozen"] >= 0.9 * r["tracked"], r
    assert r["left"] < 0.1 * r["tracked"], r
    assert r["again"] == r["frozen"], r
