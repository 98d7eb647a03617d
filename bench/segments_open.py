"""Open cost of many segments: file descriptors and RSS (issue 10 item 5, lazy segments).

``python -m bench.segments_open [DIR] [PARTITIONS]`` writes PARTITIONS logs of
~25 segments each (64 KiB segments, 512-byte index interval) under DIR with the
storage API, then opens them all as after a clean shutdown in a fresh process
and prints the file descriptors and RSS the open added and how long it took.
Not a test: numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kavka.protocol.records import build_batch
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

CFG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512)


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def _open(root: Path, n: int, clean: bool) -> list[Log]:
    return [
        Log.open(root / f"t-{p}", CFG, topic_id=None, recovery_point=0, log_start_offset=0, clean_shutdown=clean, now_ms=0)
        for p in range(n)
    ]


def build(root: Path, n: int) -> None:
    for lg in _open(root, n, clean=False):
        for _ in range(400):
            lg.append_as_leader(build_batch([(1000, None, b"x" * 4000)]), leader_epoch=0, now_ms=1)
        lg.close()


def measure(root: Path, n: int) -> str:
    fds0, rss0 = len(os.listdir("/proc/self/fd")), _rss_kb()
    started = time.monotonic()
    logs = _open(root, n, clean=True)
    took = time.monotonic() - started
    segs = sum(len(list(lg.dir.glob("*.log"))) for lg in logs)
    fds = len(os.listdir("/proc/self/fd")) - fds0
    return f"{n} partitions, {segs} segments: +{fds} fds, +{(_rss_kb() - rss0) / 1024:.1f} MiB RSS, opened in {took:.2f} s"


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="kavka-segs-"))
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    if len(sys.argv) > 3 and sys.argv[3] == "--measure":
        print(measure(root, n))
        return
    if not any(root.glob("t-*")):
        build(root, n)
    subprocess.run([sys.executable, "-m", "bench.segments_open", str(root), str(n), "--measure"], check=True)


if __name__ == "__main__":
    main()
