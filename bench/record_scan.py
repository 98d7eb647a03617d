"""`python -m bench.record_scan [SRC ...]`: the validator's record walk in-process, in ns a record.

`storage.log_validator._scan_records` over the records of one batch, as a client sends them: one
shape (uniform: 100 B values, null keys, timestamps over 5 ms; 1 KiB values; keyed; one header
each) or of varying value sizes, where runs rarely form. With several SRC trees (each a
checkout's `src` directory) the module is loaded from each and the trees measured in turn in one
process, three times over. The figure is process CPU time (the machine is shared: load inflates
wall time, CPU time much less), the best of each tree's measurements.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import random
import sys
import time
import timeit
from pathlib import Path
from types import ModuleType

from kavka.protocol.records import Record, build_batch, decode_batch

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000


def cases() -> dict[str, list]:
    rnd = random.Random(1)
    v = os.urandom(1024)
    return {
        "one shape, 4,000 x 100 B": [(NOW + i * 5 // 4000, None, v[:100]) for i in range(4000)],
        "one shape, 10,000 x 100 B": [(NOW + i * 5 // 10000, None, v[:100]) for i in range(10000)],
        "one shape, 1,000 x 1 KiB": [(NOW + i * 5 // 1000, None, v) for i in range(1000)],
        "one shape, keyed, 4,000 x 100 B": [(NOW + i * 5 // 4000, b"key-%06d" % i, v[:100]) for i in range(4000)],
        "one shape, a header, 1,000 x 100 B": [
            Record(offset=i, timestamp=NOW, key=None, value=v[:100], headers=(("h", b"x"),)) for i in range(1000)],
        "values of 50-100 B, 4,000": [(NOW + i * 5 // 4000, None, v[: rnd.randint(50, 100)]) for i in range(4000)],
        "values of 95-105 B, 4,000": [(NOW + i * 5 // 4000, None, v[: rnd.randint(95, 105)]) for i in range(4000)],
    }


def load(src: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, src / "kavka" / "storage" / "log_validator.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.record_scan", description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, nargs="*", help="src/ directories to compare (default: this checkout's)")
    ap.add_argument("--number", type=int, default=10, help="scans per measurement (default 10)")
    a = ap.parse_args()
    trees = [p.resolve() for p in a.src] or [ROOT / "src"]
    modules = [load(t, f"_record_scan_{i}") for i, t in enumerate(trees)]
    print("CPU ns a record, best of 3 x 3 measurements: " + " | ".join(str(t)[-40:] for t in trees))
    for name, recs in cases().items():
        batch = bytearray(build_batch(recs))
        header, _ = decode_batch(batch)
        data = memoryview(batch)[61:]
        best = [float("inf")] * len(modules)
        for _ in range(3):
            for i, m in enumerate(modules):
                scan = functools.partial(m._scan_records, data, header.records_count, header.base_timestamp, False)
                scan()  # (tables built on first use)
                t = min(timeit.repeat(scan, number=a.number, repeat=3, timer=time.process_time))
                best[i] = min(best[i], t / a.number / len(recs) * 1e9)
        ratios = "  ".join(f"{b / best[0]:.2f}" for b in best[1:])
        print(f"{name:36} " + " ".join(f"{b:7.0f}" for b in best) + (f"   ratio to the first: {ratios}" if ratios else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
