"""CPU cost of decoding a request body in-process: the guard's walk (protocol.guard) and kio's read.

Measures `framing.decode_body` (guard + kio) and `guard.check_body` alone on
typical hot-path requests, without the network, on one core: a Produce of one
batch of `--records` records with `--value` byte values to one partition
(v9, flexible; v7, not), a Produce spread over 3 topics x 4 partitions, and a
consumer's Fetch v11 (kio's path; v12+ is decoded by hand, protocol.fetch_wire).

    .venv/bin/python bench/decode_request.py [--records 10] [--value 100] [--n 20000]

Prints, per request: CPU microseconds per decode (best of 5 runs of --n decodes;
the machine is shared, so the best run is the least disturbed one).
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable

from kavka.protocol import api
from kavka.protocol.framing import decode_body, encode_entity
from kavka.protocol.guard import check_body
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch


def _produce(version: int, batch: bytes, topics: int, partitions: int) -> tuple[type, bytes]:
    cls = api.request_schema(api.ApiKey.PRODUCE, version)
    topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    req = make(
        cls,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(
            make(topic_cls, name=f"topic-{t}", partition_data=tuple(
                make(part_cls, index=p, records=batch) for p in range(partitions)))
            for t in range(topics)
        ),
    )
    return cls, encode_entity(req)


def _fetch_v11() -> tuple[type, bytes]:
    cls = api.request_schema(api.ApiKey.FETCH, 11)
    topic_cls, part_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    req = make(
        cls,
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1, max_bytes=52_428_800, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="",
        forgotten_topics_data=(),
        topics=(make(topic_cls, topic="topic-0", partitions=tuple(
            make(part_cls, partition=p, current_leader_epoch=0, fetch_offset=1000, log_start_offset=-1,
                 partition_max_bytes=1_048_576) for p in range(4))),),
    )
    return cls, encode_entity(req)


def _best_us(fn: Callable[[type, bytes, int], object], cls: type, body: bytes, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()  # CPU time: a shared machine's waits for a core are not counted
        for _ in range(n):
            fn(cls, body, 0)
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    batch = build_batch([(0, b"key-%04d" % i, b"v" * args.value) for i in range(args.records)])
    cases = {
        "Produce v9, 1 partition": _produce(9, batch, 1, 1),
        "Produce v7, 1 partition": _produce(7, batch, 1, 1),
        "Produce v9, 3 topics x 4 partitions": _produce(9, batch, 3, 4),
        "Fetch v11, 4 partitions": _fetch_v11(),
    }
    print(f"{'request':40} {'bytes':>6} {'decode_body us':>15} {'check_body us':>14}")
    for name, (cls, body) in cases.items():
        full = _best_us(decode_body, cls, body, args.n)
        guard = _best_us(check_body, cls, body, args.n)
        print(f"{name:40} {len(body):6d} {full:15.2f} {guard:14.2f}")


if __name__ == "__main__":
    main()
