"""Closed segments cost nothing until read (issue 10 item 5, Kafka's LazyIndex); idle partitions
hold no descriptor and have no index files until written (issue 32 item 8).

A partition of ~100 segments is written and the broker restarted cleanly.
The restarted broker must hold file descriptors for only a few of that
partition's files (counted in /proc/<pid>/fd), must not have read the old
segments' indexes (one is made corrupt while the broker is down: no rebuild
is logged at startup), and must still serve every record -- reading the old
segment then loads, finds the damage, rebuilds that index and answers right.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.integration.helpers import (
    ck_admin,
    ck_create_topic,
    ck_producer,
    ck_read_to_end,
    partition_dir,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")

RECORDS = 2000


def _fds_under(pid: int, d: Path) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(d) + os.sep):
            out.append(target)
    return out


def test_a_log_of_many_segments_opens_without_touching_them(broker_factory, topic_name):
    b = broker_factory(overrides={"log.segment.bytes": "16384", "log.index.interval.bytes": "1024"}).start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    p = ck_producer(b.bootstrap, {"linger.ms": 0, "batch.num.messages": 5})
    for i in range(RECORDS):
        p.produce(topic_name, value=b"%06d" % i + b"x" * 500, partition=0)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert b.stop() == 0

    d = partition_dir(b.log_dirs[0], topic_name)
    logs = sorted(d.glob("*.log"))
    assert len(logs) >= 50, f"only {len(logs)} segments"
    victim = logs[1].with_suffix(".index")
    assert victim.stat().st_size >= 16
    with victim.open("r+b") as f:  # a length that is not a multiple of 8: corrupt
        f.truncate(victim.stat().st_size - 3)

    b.start()
    assert b.proc is not None
    held = _fds_under(b.proc.pid, d)
    assert len(held) <= 4, f"{len(held)} fds held into a partition of {len(logs)} segments: {held[:8]}"
    assert victim.name not in b.log_text(), "an old segment's index was read at startup"

    got = ck_read_to_end(b.bootstrap, topic_name)
    assert [int(r.value[:6]) for r in got] == list(range(RECORDS))  # type: ignore[index]
    assert [r.offset for r in got] == list(range(RECORDS))
    assert victim.name in b.log_text() and "rebuilding" in b.log_text(), "the damaged index was not noticed on read"
    assert b.stop() == 0


IDLE = 300


def test_idle_partitions_hold_no_descriptors_until_written(broker_factory, topic_name):
    """A broker of many idle partitions held one descriptor per partition (its empty active
    segment's .log), so about 20,000 partitions exhausted a 20,000 open-file limit. Now a new
    log's first segment has no file until its first append (nor index files), and a descriptor
    is opened on first use."""
    b = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, IDLE)
    data = b.log_dirs[0]
    first = "00000000000000000000"
    logs = [partition_dir(data, topic_name, i) / f"{first}.log" for i in range(IDLE)]
    created = [partition_dir(data, topic_name, i) / "partition.metadata" for i in range(IDLE)]
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in created):  # the broker creates the logs as it applies the topic
        assert time.monotonic() < deadline, f"{sum(p.exists() for p in created)} of {IDLE} logs created"
        time.sleep(0.1)
    assert b.proc is not None
    held = _fds_under(b.proc.pid, data)
    assert len(held) < 10, f"{len(held)} descriptors held into {IDLE} idle partitions: {held[:8]}"
    assert not any(p.exists() for p in logs), "an idle partition has a segment file"
    assert not any((p.parent / f"{first}.index").exists() for p in logs), "an idle segment has index files"

    written = range(5)
    p = ck_producer(b.bootstrap, {"linger.ms": 0})
    for i in range(200):
        p.produce(topic_name, value=b"%06d" % i, partition=i % len(written))
    assert p.flush(30) == 0
    for i in written:  # created with the first append, before any flush could have run
        assert (partition_dir(data, topic_name, i) / f"{first}.log").stat().st_size > 0
        assert (partition_dir(data, topic_name, i) / f"{first}.index").exists()
        assert (partition_dir(data, topic_name, i) / f"{first}.timeindex").exists()
    assert not (partition_dir(data, topic_name, len(written)) / f"{first}.index").exists()
    assert not (partition_dir(data, topic_name, len(written)) / f"{first}.log").exists()
    held = _fds_under(b.proc.pid, data)
    assert len(held) < 10 + len(written), f"{len(held)} descriptors after writing {len(written)} partitions"

    assert b.stop() == 0
    b.start()
    assert b.proc is not None
    held = _fds_under(b.proc.pid, data)
    assert len(held) < 10, f"{len(held)} descriptors held after a restart: {held[:8]}"
    assert not any(p.exists() for p in logs[len(written):]), "a restart created an idle partition's segment file"
    got = ck_read_to_end(b.bootstrap, topic_name, partitions=list(written))
    assert sorted(int(r.value) for r in got) == list(range(200))  # type: ignore[arg-type]
    # An idle partition still takes records after the restart.
    p = ck_producer(b.bootstrap, {"linger.ms": 0})
    p.produce(topic_name, value=b"late", partition=IDLE - 1)
    assert p.flush(30) == 0
    assert [r.value for r in ck_read_to_end(b.bootstrap, topic_name, partitions=[IDLE - 1])] == [b"late"]
    assert b.stop() == 0
