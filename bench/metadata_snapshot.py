"""Cost of a metadata snapshot: serialise an image, encode the .checkpoint, decode it, replay it.

``python -m bench.metadata_snapshot [TOPICS] [PARTITIONS_PER_TOPIC] [RUNS]`` builds a
MetadataImage of TOPICS topics (default 1000) with PARTITIONS_PER_TOPIC partitions each
(default 10) and one config each, on 3 brokers, then times, RUNS times (default 5), what a
node does to write a snapshot (controller/snapshot.py image_records + record encoding;
raft/snapshot.py encode) and to load one (decode; replay into an empty image). Prints the
median and max of each step and the file size. Not a test: numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import sys
import time

from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from kavka.raft import snapshot as snapshots
from kavka.raft.api import SnapshotId


def build_image(topics: int, partitions: int) -> MetadataImage:
    d = MetadataDelta(MetadataImage())
    offset = 0
    recs: list[object] = [mr.RegisterBrokerRecord(b, f"inc{b}", (("PLAINTEXT", "h", 9092 + b),)) for b in range(3)]
    for t in range(topics):
        recs.append(mr.TopicRecord(f"topic-{t}", f"id-{t}"))
        recs += [mr.PartitionRecord(f"id-{t}", p, (p % 3,), (p % 3,), p % 3) for p in range(partitions)]
        recs.append(mr.ConfigRecord(2, f"topic-{t}", "retention.ms", "86400000"))
    for r in recs:
        d.replay(r, offset)
        offset += 1
    return d.apply()


def main(argv: list[str]) -> None:
    topics = int(argv[0]) if argv else 1000
    partitions = int(argv[1]) if len(argv) > 1 else 10
    runs = int(argv[2]) if len(argv) > 2 else 5
    image = build_image(topics, partitions)
    sid = SnapshotId(image.offset + 1, 1)
    times: dict[str, list[float]] = {"serialise": [], "encode": [], "decode": [], "replay": []}
    size = count = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        recs = [mr.encode(r) for r in image_records(image)]
        t1 = time.perf_counter()
        data = snapshots.encode(sid, recs)
        t2 = time.perf_counter()
        back = snapshots.decode(data)
        t3 = time.perf_counter()
        d = MetadataDelta(MetadataImage())
        for k, v in back:
            d.replay(mr.decode(k, v), sid.end_offset - 1)
        d.apply()
        t4 = time.perf_counter()
        for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[k].append(v)
        size, count = len(data), len(recs)
    print(f"{topics} topics x {partitions} partitions: {count} records, {size / 1e6:.2f} MB .checkpoint, {runs} runs")
    for k, v in times.items():
        print(f"  {k:9s} median {statistics.median(v) * 1000:7.1f} ms   max {max(v) * 1000:7.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
