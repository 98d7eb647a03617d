"""`kavka dump-log`: the record batches of segment files, like kafka-dump-log.sh --files.

Reads `.log` segment files directly (no broker needed) and lists each batch:
base and last offset, record count, position, size, leader epoch, producer id
and sequence, codec, timestamp and CRC-32C, and whether the CRC holds
(`isvalid`). A torn tail (an incomplete last batch) is reported, not an error.
`dump_segment` is what the CLI prints and what tests compare replicas with:
two replicas of a partition agree below the high watermark when their batch
lists (offsets and CRCs) agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kavka.cli.common import CliError, emit, json_option, table
from kavka.protocol.records import batch_crc_ok, iter_batches

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def dump_segment(path: Path) -> dict[str, Any]:
    """The batches of one segment file, in file order."""
    data = path.read_bytes()
    batches = []
    end = 0
    for pos, h in iter_batches(data):
        batches.append(
            {
                "baseOffset": h.base_offset,
                "lastOffset": h.last_offset,
                "count": h.records_count,
                "position": pos,
                "size": h.size_in_bytes,
                "partitionLeaderEpoch": h.partition_leader_epoch,
                "producerId": h.producer_id,
                "producerEpoch": h.producer_epoch,
                "baseSequence": h.base_sequence,
                "isControl": h.is_control,
                "compresscodec": _CODECS.get(h.compression, str(h.compression)),
                "maxTimestamp": h.max_timestamp,
                "crc": h.crc,
                "isvalid": batch_crc_ok(data, pos, h),
            }
        )
        end = pos + h.size_in_bytes
    return {"file": str(path), "batches": batches, "validBytes": end, "trailingBytes": len(data) - end}


def dump_log_dir(partition_dir: Path) -> list[dict[str, Any]]:
    """Every batch of one replica's directory, segment after segment."""
    out: list[dict[str, Any]] = []
    for seg in sorted(partition_dir.glob("*.log")):
        out.extend(dump_segment(seg)["batches"])
    return out


@click.command("dump-log")
@click.option("--files", "files", required=True, help="comma-separated .log segment files (or partition directories)")
@json_option
def dump_log(files: str, as_json: bool) -> None:
    """Print the record batches of log segments (like kafka-dump-log.sh --files)."""
    paths = [Path(f.strip()) for f in files.split(",") if f.strip()]
    dumps: list[dict[str, Any]] = []
    for p in paths:
        if p.is_dir():
            dumps.extend(dump_segment(s) for s in sorted(p.glob("*.log")))
        elif p.is_file():
            dumps.append(dump_segment(p))
        else:
            raise CliError(f"no such file or directory: {p}")

    def render(console: Any) -> None:
        cols: Sequence[str] = ("baseOffset", "lastOffset", "count", "position", "size", "partitionLeaderEpoch",
                               "producerId", "baseSequence", "compresscodec", "maxTimestamp", "crc", "isvalid")
        for d in dumps:
            console.print(f"Dumping {d['file']}")
            console.print(table(None, cols, ([b[c] for c in cols] for b in d["batches"])))
            if d["trailingBytes"]:
                console.print(f"{d['trailingBytes']} bytes after the last whole batch (a torn tail)")

    emit(as_json, dumps, render)
