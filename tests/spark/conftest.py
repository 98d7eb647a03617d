"""Fixtures of the Spark connector tests: one `local[2]` SparkSession for the whole run.

Spark starts in 8-9 s, so one session serves every test (tests use unique
topics and temp dirs). Workers run this interpreter (PYSPARK_PYTHON), and
everything binds to loopback. The session has format "kavka" and Spark's own
JVM connector, format "kafka" (its jars from .cache/java on `spark.jars`,
tests/java_deps.py): one Python process holds one SparkContext, whose jars are
fixed when its JVM starts, so both connectors share the one session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from kavka.spark.session import local_session
from tests.java_deps import spark_kafka_jars


@pytest.fixture(scope="session")
def spark() -> Iterator:
    jars = ",".join(str(j) for j in spark_kafka_jars())
    session = local_session("kavka-tests", shuffle_partitions=2, **{"spark.jars": jars})
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _python_for_workers() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
