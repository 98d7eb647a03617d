"""Driver-side offset work of the source: which partitions, which offsets, which ranges.

`OffsetResolver` (owns one AdminClient and one Fetcher; driver only) turns
the subscription into topic-partitions and an `OffsetSpec` into concrete
offsets. "latest" is the last stable offset (LSO) under
``kafka.isolation.level=read_committed``, otherwise the high watermark: the larger of ListOffsets(latest)
and the high watermark a Fetch reports, because some Kafka-compatible
brokers (Tansu 0.6) answer ListOffsets(latest) with the last batch's base
offset + 1 rather than the log end.

The pure functions below are the planning rules of Spark's Kafka source
(``KafkaOffsetRangeCalculator`` and ``KafkaMicroBatchStream.rateLimit``):
one range per topic-partition, split further to reach ``minPartitions``, and
``maxOffsetsPerTrigger`` spread over partitions in proportion to their
backlog. Stream offsets are JSON like Spark's: ``{"topic": {"0": 42}}``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kavka.client.admin import AdminClient
from kavka.client.errors import KafkaError
from kavka.client.fetcher import Fetcher
from kavka.common import ErrorCode, TopicPartition
from kavka.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

log = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


# ---------------------------------------------------------------------- pure planning


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges start..end per partition, split to reach `min_partitions` in total."""
    ranges = [
        OffsetRange(t, p, start[(t, p)], end[(t, p)])
        for (t, p) in sorted(end)
        if (t, p) in start and end[(t, p)] > start[(t, p)]
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, math.ceil(r.size / total * min_partitions)))
        step = r.size / parts
        bounds = [r.start + round(i * step) for i in range(parts)] + [r.end]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """End offsets that admit about `max_rows` records, shared by backlog size."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    end = {}
    budget = max_rows
    for tp in sorted(latest):
        size = backlog[tp]
        share = max_rows * size / total
        take = min(size, budget, math.ceil(share) if share < 1 else math.floor(share))
        budget -= take
        end[tp] = start.get(tp, latest[tp]) + take
    return end


# ---------------------------------------------------------------------- resolver


class OffsetResolver:
    """Metadata and offset look-ups for one source, on the driver."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        c = opts.client
        self.admin = AdminClient(
            c.bootstrap_servers, client_id=c.client_id, timeout_s=c.request_timeout_ms / 1000,
            security=c.client_security(),
        )
        self.fetcher = Fetcher(
            c.bootstrap_servers,
            client_id=c.client_id,
            timeout_s=c.request_timeout_ms / 1000,
            # A probe for the high watermark, not for data (`Fetcher.high_watermarks`: max_wait 0
            # first). Tansu leaves a partition out of a Fetch answered with max_wait 0, so the
            # retry for those waits a little.
            max_wait_ms=50,
            max_partition_fetch_bytes=1,
            security=c.client_security(),
        )

    def close(self) -> None:
        self.admin.close()
        self.fetcher.close()

    def __enter__(self) -> OffsetResolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ partitions

    def topic_partitions(self, *, strict: bool = True) -> list[TopicPartition]:
        """The subscribed partitions now; with `strict`, a named topic that does not exist is an OptionError."""
        o = self.opts
        if o.assign is not None:
            wanted = sorted(o.assign)
            counts = self._partition_counts(wanted, "assign", strict=strict)
            out = []
            for topic, parts in sorted(o.assign.items()):
                for p in parts:
                    if p >= counts.get(topic, 0):
                        if strict:
                            raise OptionError(
                                f"assign: partition {p} of topic {topic!r} does not exist "
                                f"(the topic has {counts.get(topic, 0)} partitions)"
                            )
                        continue
                    out.append((topic, p))
            return out
        if o.subscribe:
            counts = self._partition_counts(list(o.subscribe), "subscribe", strict=strict)
        else:
            # The listing's Metadata already counts each topic's partitions.
            counts = {
                t.name: t.partition_count
                for t in self.admin.list_topics()
                if not t.name.startswith("__") and o.topic_matches(t.name)
            }
        return [(t, p) for t in sorted(counts) for p in range(counts[t])]

    def _partition_counts(self, topics: list[str], option: str, *, strict: bool) -> dict[str, int]:
        """Partitions per topic: one Metadata for all of them (a trigger's probe asks again), one
        per topic only when one of them does not exist, to name it or leave it out."""
        if not topics:
            return {}
        try:
            return {desc.name: len(desc.partitions) for desc in self.admin.describe_topics(topics)}
        except KafkaError as e:
            if e.code != ErrorCode.unknown_topic_or_partition:
                raise
        counts: dict[str, int] = {}
        for topic in topics:
            try:
                (desc,) = self.admin.describe_topics([topic])
            except KafkaError as e:
                if e.code != ErrorCode.unknown_topic_or_partition:
                    raise
                if strict:
                    raise OptionError(f"{option}: topic {topic!r} does not exist") from None
                continue
            counts[topic] = len(desc.partitions)
        return counts

    # ------------------------------------------------------------------ offsets

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        if not tps:
            return {}
        res = self.admin.list_offsets({tp: "earliest" for tp in tps})
        return {tp: res[tp].offset for tp in tps}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(tps)
        if not tps:
            return {}
        committed = self.opts.client.isolation_level == 1
        res = self.admin.list_offsets({tp: "latest" for tp in tps}, isolation_level=int(committed))
        listed = {tp: res[tp].offset for tp in tps}
        if committed:
            # ListOffsets(latest) under read_committed answers the LSO: records at
            # and above it may still be aborted, so a plan never reaches past it.
            return listed
        # One probe Fetch per leader for all its partitions: at the log end each waits out
        # its max_wait, once per leader rather than once per partition.
        hw = self.fetcher.high_watermarks({tp: max(o, 0) for tp, o in listed.items()})
        return {tp: max(listed[tp], hw[tp]) for tp in tps}

    def resolve(
        self, spec: OffsetSpec, tps: list[TopicPartition], *, option: str, ending: bool = False
    ) -> dict[TopicPartition, int]:
        """Concrete offsets of `spec` for `tps` (`option` names the option in errors)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            wanted = self._exactly(spec.offsets, tps, option)
            out = {}
            earliest = latest = None
            for tp in tps:
                o = wanted[tp]
                if o == EARLIEST:
                    earliest = earliest or self.earliest(tps)
                    o = earliest[tp]
                elif o == LATEST:
                    latest = latest or self.latest(tps)
                    o = latest[tp]
                out[tp] = o
            return out
        if spec.kind == "timestamp":
            stamps = {tp: spec.timestamp for tp in tps}
        else:
            stamps = self._exactly(spec.offsets, tps, option)
        found = self.admin.list_offsets(dict(stamps)) if stamps else {}
        out = {}
        latest = None
        for tp in tps:
            offset = found[tp].offset
            if offset < 0:  # no record at or after the timestamp
                if not ending and self.opts.by_timestamp_strategy == "error":
                    raise OptionError(
                        f"{option}: no record in {tp[0]}-{tp[1]} has a timestamp at or after "
                        f"{stamps[tp]} (set startingOffsetsByTimestampStrategy=latest to start "
                        "at the end instead)"
                    )
                latest = latest or self.latest(tps)
                offset = latest[tp]
            out[tp] = offset
        return out

    @staticmethod
    def _exactly(
        given: Mapping[str, Mapping[int, int]], tps: list[TopicPartition], option: str
    ) -> dict[TopicPartition, int]:
        flat = {(t, p): o for t, parts in given.items() for p, o in parts.items()}
        extra = sorted(set(flat) - set(tps))
        if extra:
            raise OptionError(
                f"{option}: {', '.join(f'{t}-{p}' for t, p in extra)} "
                "is not among the subscribed topic partitions"
            )
        missing = sorted(set(tps) - set(flat))
        if missing:
            raise OptionError(
                f"{option}: no offset given for {', '.join(f'{t}-{p}' for t, p in missing)}; "
                "specific offsets must name every subscribed topic partition"
            )
        return flat
