"""Fixtures of the Spark connector tests: one `local[2]` SparkSession for the whole run.

Spark starts in 8-9 s, so one session serves every test (tests use unique
topics and temp dirs). Workers run this interpreter (PYSPARK_PYTHON), and
everything binds to loopback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from kavka.spark.session import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator:
    session = local_session("kavka-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _python_for_workers() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
