"""A tiny run of bench/spark_read.py, so the benchmark keeps working (figures are not checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spark_read.py"


def test_bench_spark_read_smoke(spark, broker, tmp_path):
    spec = importlib.util.spec_from_file_location("spark_read_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.main(
        ["--bootstrap", broker.bootstrap, "--records", "2000", "--runs", "1", "--stream-batches", "2",
         "--json", str(tmp_path / "figures.json")],
        spark=spark,
    )
    assert figures["records"] == 2000
    assert figures["spark_read_rows_s"] > 0 and figures["confluent_read_rows_s"] > 0
    assert figures["spark_write_rows_s"] > 0
    # Spark's JVM connector side by side (the session carries its jars: tests/spark/conftest.py)
    for key in ("jvm_read_rows_s", "jvm_write_rows_s", "kavka_stream_rows_s", "jvm_stream_rows_s"):
        assert figures[key] > 0, key
    assert figures["kavka_vs_jvm_read"] > 0 and figures["kavka_vs_jvm_stream"] > 0
    assert all(c >= 0 for c in figures["runs"]["jvm_read_cpu_s"])
    assert (tmp_path / "figures.json").exists()
