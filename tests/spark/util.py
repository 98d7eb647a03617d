"""Helpers of the Spark connector tests: produce known records, read a DataFrame back as `Rec`s.

Records are produced with confluent-kafka (a client independent of the
connector) and compared record by record with what Spark returns.
"""

from __future__ import annotations

from collections.abc import Iterable

from tests.integration.helpers import (
    Rec,
    Sample,
    ck_admin,
    ck_create_topic,
    ck_produce_samples,
    ck_producer,
    recent_base_ts,
    sample_records,
)

__all__ = [
    "Rec",
    "Sample",
    "create_topic",
    "expected_recs",
    "produce_per_partition",
    "rows_to_recs",
]


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    ck_create_topic(ck_admin(bootstrap), topic, partitions, config)


def produce_per_partition(
    bootstrap: str, topic: str, partitions: int | Iterable[int], n: int, *, base_ts: int | None = None
) -> dict[int, list[Sample]]:
    """`n` sample records into each partition (`partitions`: a count, or which ones), with
    timestamps base_ts + 17 * i; returns them by partition."""
    base_ts = recent_base_ts() if base_ts is None else base_ts
    producer = ck_producer(bootstrap)
    out = {}
    for p in range(partitions) if isinstance(partitions, int) else partitions:
        samples = sample_records(n, base_ts=base_ts)
        reports = ck_produce_samples(producer, topic, samples, partition=p)
        first = reports[0][1]
        assert [o for _, o in reports] == list(range(first, first + n))
        out[p] = samples
    return out


def expected_recs(
    samples: dict[int, list[Sample]], ranges: dict[int, tuple[int, int]] | None = None
) -> list[Rec]:
    """Recs for offsets [start, end) of each partition (all when `ranges` is None)."""
    out = []
    for p, ss in sorted(samples.items()):
        start, end = (ranges or {}).get(p, (0, len(ss))) if ranges is None or p in ranges else (0, 0)
        for o in range(start, end):
            s = ss[o]
            out.append(Rec(p, o, s.key, s.value, s.headers, s.timestamp))
    return out


def rows_to_recs(rows: Iterable, *, headers: bool = True) -> list[Rec]:
    out = []
    for r in rows:
        ts = r["timestamp"]
        # PySpark gives naive datetimes in the process's local time; timestamp() reads them so.
        ms = round(ts.timestamp() * 1000)
        hdrs = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]) if headers else ()
        out.append(
            Rec(
                r["partition"],
                r["offset"],
                None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]),
                hdrs,
                ms,
            )
        )
    return sorted(out, key=lambda x: (x.partition, x.offset))
