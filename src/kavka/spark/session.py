"""`local_session`: a local SparkSession set up the way kavka's demo, tests and benchmarks need.

Python workers run the current interpreter (PYSPARK_PYTHON, or they pick
whatever ``python3`` is on PATH and miss kavka), the driver binds to loopback,
the UI is off, log4j stays quiet, and format ``kavka`` is registered.
Driver only.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(
    app_name: str = "kavka", *, cores: int = 2, shuffle_partitions: int = 4, **conf: str
) -> Any:
    from pyspark.sql import SparkSession

    from kavka.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
