"""Metadata snapshots on disk: Kafka's `.checkpoint` files under `__cluster_metadata-0/`.

Format (Kafka's raft/snapshot RecordsSnapshotWriter, FileRawSnapshotWriter):
    <metadata.log.dir>/__cluster_metadata-0/<end offset, 20 digits>-<epoch, 10 digits>.checkpoint

A snapshot named (end offset E, epoch P) holds the state machine after every
committed record below E, the last of which was written in leader epoch P.
The file is a stream of record batches v2, offsets dense from 0, every batch
carrying P as its partition leader epoch:
- first, a control batch of one SnapshotHeader record (control key: int16
  version 0, int16 type 3; value: int16 Version 0, int64
  LastContainedLogTimestamp, empty tagged fields -- SnapshotHeaderRecord.json);
- with a dynamic quorum (KIP-853), then a control batch of a KRaftVersionRecord
  (type 5) and a VotersRecord (type 6): the voter set in force at E (raft/voters.py).
  The bootstrap checkpoint `kavka storage format` writes (0-0) holds only these,
  or only the KRaftVersionRecord (`--no-initial-controllers`);
- then data batches of the metadata records that rebuild the state;
- last, a control batch of one SnapshotFooter record (type 4; value: int16
  Version 0, empty tagged fields).
A file without both, with a bad CRC or with gaps is corrupt and never loaded.

Writes are atomic: `<name>.checkpoint.part` is written and fsynced, renamed to
`<name>.checkpoint`, and the directory fsynced (Kafka's FileRawSnapshotWriter
freeze). A `.part` found at start is a torn write and is deleted.

Pure functions over bytes plus small file helpers; any thread (a snapshot is
written by a worker thread, never the event loop).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from kavka.protocol.records import build_batch, decode_batch, iter_batches, valid_prefix_length
from kavka.raft import voters as voter_records
from kavka.raft.api import SnapshotId
from kavka.raft.control_records import SNAPSHOT_FOOTER, SNAPSHOT_HEADER, control_key, control_type
from kavka.raft.replicated_log import ReplicatedLog
from kavka.raft.voters import KRAFT_VERSION, VOTERS, VoterSet, encode_kraft_version, encode_voters

log = logging.getLogger("kavka.raft")

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_HEADER_VALUE = struct.Struct(">hq")  # SnapshotHeaderRecord v0: Version, LastContainedLogTimestamp
_FOOTER_VALUE = struct.Struct(">h")  # SnapshotFooterRecord v0: Version
_RECORDS_PER_BATCH = 512

Record = tuple[bytes | None, bytes | None]


class CorruptSnapshotError(ValueError):
    """A snapshot file that is torn, fails its CRC, or lacks its header or footer."""


def file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_file_name(name: str) -> SnapshotId | None:
    match = _NAME.match(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))


def _control(kind: int, value: bytes) -> Record:
    return control_key(kind), value + b"\x00"  # + empty tagged fields


def encode(
    snapshot_id: SnapshotId,
    records: Sequence[Record],
    *,
    last_contained_timestamp_ms: int = -1,
    voters: VoterSet | None = None,
    kraft_version: int = 0,
) -> bytes:
    """The bytes of a snapshot file holding `records` (and the voter set, KIP-853: a snapshot
    with `voters` has kraft.version 1)."""
    epoch = snapshot_id.epoch
    out = [
        build_batch(
            [(0, *_control(SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, last_contained_timestamp_ms)))],
            base_offset=0,
            partition_leader_epoch=epoch,
            is_control=True,
        )
    ]
    offset = 1
    if voters is not None or kraft_version > 0:
        control = [(0, *encode_kraft_version(max(kraft_version, 1)))]
        if voters is not None:
            control.append((0, *encode_voters(voters)))
        out.append(build_batch(control, base_offset=offset, partition_leader_epoch=epoch, is_control=True))
        offset += len(control)
    for i in range(0, len(records), _RECORDS_PER_BATCH):
        chunk = records[i : i + _RECORDS_PER_BATCH]
        out.append(build_batch([(0, k, v) for k, v in chunk], base_offset=offset, partition_leader_epoch=epoch))
        offset += len(chunk)
    out.append(
        build_batch(
            [(0, *_control(SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0)))],
            base_offset=offset,
            partition_leader_epoch=epoch,
            is_control=True,
        )
    )
    return b"".join(out)


def last_contained_timestamp(log: ReplicatedLog, snapshot_id: SnapshotId) -> int:
    """The timestamp of the last record a snapshot contains (its header's
    LastContainedLogTimestamp, as Kafka fills it); -1 if the log no longer holds that record.
    Reads the log: call it on the log's owner thread, before handing the encoding to a worker."""
    last = log.read(snapshot_id.end_offset - 1, 1) if snapshot_id.end_offset > log.start_offset else []
    return last[0].timestamp if last else -1


def _control_type(key: bytes | None) -> int:
    kind = control_type(key)
    if kind is None:
        raise CorruptSnapshotError("control record without a ControlRecordType key")
    return kind


def decode(data: bytes) -> list[Record]:
    """The data records of a whole snapshot file; CorruptSnapshotError if it is not one."""
    return _decode(data)[0]


def decode_voters(data: bytes) -> VoterSet | None:
    """The voter set a snapshot holds (KIP-853); None for a static quorum's snapshot."""
    return _decode(data)[1]


def decode_kraft_version(data: bytes) -> int:
    """The kraft.version a snapshot records (0 when it has no KRaftVersionRecord)."""
    return _decode(data)[2]


def _decode(data: bytes) -> tuple[list[Record], VoterSet | None, int]:
    voters: VoterSet | None = None
    kraft_version = 0
    if valid_prefix_length(data) != len(data):
        raise CorruptSnapshotError("torn or corrupt record batch (CRC or size)")
    records: list[Record] = []
    header_seen = footer_seen = False
    expected = 0
    try:
        for pos, _h in iter_batches(data):
            header, batch = decode_batch(data, pos)
            if footer_seen:
                raise CorruptSnapshotError("a batch after the SnapshotFooter")
            if header.base_offset != expected:
                raise CorruptSnapshotError(f"batch at offset {header.base_offset}, expected {expected}")
            expected = header.base_offset + len(batch)
            if header.is_control:
                for r in batch:
                    kind = _control_type(r.key)
                    if kind == SNAPSHOT_HEADER and not header_seen and expected == 1:
                        header_seen = True
                    elif kind == SNAPSHOT_FOOTER and header_seen:
                        footer_seen = True
                    elif kind == KRAFT_VERSION and header_seen and r.value is not None:
                        kraft_version = voter_records.decode_kraft_version(r.value)
                    elif kind == VOTERS and header_seen and r.value is not None:
                        voters = voter_records.decode_voters(r.value)
                    else:
                        raise CorruptSnapshotError(f"unexpected control record type {kind}")
            else:
                if not header_seen:
                    raise CorruptSnapshotError("data before the SnapshotHeader")
                records.extend((r.key, r.value) for r in batch)
    except CorruptSnapshotError:
        raise
    except Exception as e:  # noqa: BLE001 -- any decoding failure means a corrupt file
        raise CorruptSnapshotError(str(e)) from e
    if not header_seen or not footer_seen:
        raise CorruptSnapshotError("no SnapshotHeader" if not header_seen else "no SnapshotFooter (torn)")
    return records, voters, kraft_version


def write(directory: Path, snapshot_id: SnapshotId, data: bytes) -> Path:
    """Write `data` as snapshot `snapshot_id` atomically (.part, fsync, rename, fsync dir)."""
    final = directory / file_name(snapshot_id)
    part = directory / (final.name[: -len(SUFFIX)] + PART_SUFFIX)
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, final)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return final


def scan(directory: Path) -> Iterator[tuple[SnapshotId, Path]]:
    """The snapshot files of `directory`, oldest first; a torn `.part` is deleted with a warning."""
    found: list[tuple[SnapshotId, Path]] = []
    if not directory.is_dir():
        return iter(())
    for p in directory.iterdir():
        if p.name.endswith(PART_SUFFIX):
            log.warning("deleting a partial metadata snapshot %s (a write that did not finish)", p)
            p.unlink(missing_ok=True)
            continue
        sid = parse_file_name(p.name)
        if sid is not None:
            found.append((sid, p))
    found.sort(key=lambda x: (x[0].end_offset, x[0].epoch))
    return iter(found)
