"""Helpers for the tiered storage tests: real segment files of record batches v2."""

from __future__ import annotations

import os
from pathlib import Path

from kavka.protocol.records import build_batch


def write_segment(directory: Path, base_offset: int, batches: int, value_size: int = 100
                  ) -> tuple[Path, list[bytes]]:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base_offset:020d}.log"
    raw: list[bytes] = []
    offset = base_offset
    for i in range(batches):
        recs = [(1_700_000_000_000 + i, f"k{offset + j}".encode(), os.urandom(value_size), [])
                for j in range(3)]
        raw.append(build_batch(recs, base_offset=offset))
        offset += 3
    path.write_bytes(b"".join(raw))
    return path, raw
