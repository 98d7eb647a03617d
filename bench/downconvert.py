"""CPU cost of message-format conversion (Fetch v0-v3 down-conversion, Produce v0-v2 up-conversion).

Measures protocol.message_format in-process, on one core, without the
network: the work the broker adds per MB when an old client fetches (batch v2
-> magic 0/1 messages) or produces (message set -> batch v2). Input: batches
of `--batch` records with `--value` byte values and 12-byte keys, built the
way modern producers send them, uncompressed and compressed.

    .venv/bin/python bench/downconvert.py [--mb 32] [--value 1024] [--batch 100]

Prints, per codec: MB of record data converted per CPU-second and CPU ms per MB.
"""

from __future__ import annotations

import argparse
import os
import time

from kavka.protocol.compression import GZIP, LZ4, NONE, SNAPPY
from kavka.protocol.message_format import down_convert, up_convert
from kavka.protocol.records import build_batch


def _batches(total_bytes: int, value_size: int, per_batch: int, codec: int) -> tuple[bytes, int]:
    value = (os.urandom(value_size // 2).hex().encode())[:value_size]  # compressible like text
    out, payload, offset = [], 0, 0
    now = int(time.time() * 1000)
    while payload < total_bytes:
        recs = [(now + i, b"key-%08d" % (offset + i), value) for i in range(per_batch)]
        out.append(build_batch(recs, base_offset=offset, compression=codec))
        offset += per_batch
        payload += per_batch * (value_size + 12)
    return b"".join(out), payload


def _cpu(fn, *args) -> float:  # noqa: ANN001
    t0 = time.process_time()
    fn(*args)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=32)
    ap.add_argument("--value", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    total = int(args.mb * 1_000_000)
    print(f"{args.mb:g} MB of record data, {args.value}-byte values, {args.batch} records/batch")
    print("| stored batches | down-convert to magic 1 (Fetch v2-v3) MB/s | CPU ms/MB | down-convert to magic 0 (Fetch v0-v1) MB/s | CPU ms/MB |")
    print("|---|---|---|---|---|")
    for name, codec in (("none", NONE), ("gzip", GZIP), ("snappy", SNAPPY), ("lz4", LZ4)):
        data, payload = _batches(total, args.value, args.batch, codec)
        mb = payload / 1_000_000
        down1 = min(_cpu(down_convert, data, 1) for _ in range(2))
        down0 = min(_cpu(down_convert, data, 0) for _ in range(2))
        print(f"| {name} | {mb / down1:.0f} | {down1 * 1000 / mb:.1f} | {mb / down0:.0f} | {down0 * 1000 / mb:.1f} |")
    # Up-conversion input: uncompressed magic 1 message sets of `--batch` messages (a 0.10 producer's).
    one = down_convert(build_batch([(0, b"key-00000000", b"v" * args.value)] * args.batch, compression=NONE), 1)
    n = max(1, int(total / (args.batch * (args.value + 12))))
    up = min(_cpu(lambda: [up_convert(one) for _ in range(n)]) for _ in range(2))
    up_mb = n * args.batch * (args.value + 12) / 1_000_000
    print(f"\nup-convert (Produce v0-v2, uncompressed message sets -> batch v2): {up_mb / up:.0f} MB/s, {up * 1000 / up_mb:.1f} CPU ms/MB")


if __name__ == "__main__":
    main()
