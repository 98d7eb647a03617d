"""Bootstrap metadata: records a new cluster starts with, written by `kavka storage format`.

Format (Kafka's `bootstrap.checkpoint`, written by kafka-storage.sh format): the file
`<metadata.log.dir>/bootstrap.checkpoint` is a metadata snapshot file (raft.snapshot: header
control batch, record batches of metadata records, footer control batch) holding the records the
first active controller writes before any other, in its first batch -- today only
UserScramCredentialRecords (`--add-scram`: salt, StoredKey, ServerKey and iterations, never a
password). The controller reads it at startup; once the metadata log has any record the file has
no further effect (a user deleted later does not come back on a restart). A missing file is no
bootstrap records; a corrupt one stops startup.

Small file helpers; called by the CLI and at node startup (no event loop).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kavka.metadata import records as mr
from kavka.raft import snapshot
from kavka.raft.api import SnapshotId

BOOTSTRAP_FILE = "bootstrap.checkpoint"


def write_bootstrap(metadata_log_dir: Path, records: Sequence[mr.MetadataRecord]) -> Path:
    """Write the bootstrap records atomically (a .tmp file renamed into place)."""
    data = snapshot.encode(SnapshotId(0, 0), [mr.encode(r) for r in records])
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def read_bootstrap(metadata_log_dir: Path) -> list[mr.MetadataRecord]:
    """The bootstrap records ([] without a file); CorruptSnapshotError or MetadataRecordError if unreadable."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [mr.decode(k, v) for k, v in snapshot.decode(data)]
