"""The ``local`` RemoteStorageManager: remote storage in a directory (``rsm.config.dir``).

For tests, demos and a shared filesystem (NFS) mounted on every broker. Layout under the root is
``api.object_name``: one directory per topic-partition, one file per segment and per index, named
by the segment's unique id. Every file is written to a ``.tmp`` name, fsynced and renamed, so a
crash never leaves a file with its final name and partial contents; copying the same id again
rewrites identical files (idempotent). Delete unlinks each file, ignoring ones already gone.
Thread-safe: no shared mutable state beyond the filesystem.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

from kavka.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    check_range,
    object_name,
)


class LocalDirRemoteStorageManager:
    def __init__(self) -> None:
        self._root: Path | None = None

    def configure(self, configs: Mapping[str, str]) -> None:
        d = configs.get("dir")
        if not d:
            raise ValueError("rsm.config.dir is required for the local remote storage manager")
        self._root = Path(d)
        self._root.mkdir(parents=True, exist_ok=True)

    def _path(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType | None) -> Path:
        if self._root is None:
            raise RemoteStorageError("local remote storage manager is not configured")
        return self._root / object_name(metadata.segment_id, index_type)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None:
        try:
            for index_type, src in data.files().items():
                dst = self._path(metadata, index_type)
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f"{dst.name}.{uuid.uuid4().hex}.tmp")
                with open(tmp, "wb") as out:
                    if isinstance(src, bytes):
                        out.write(src)
                    else:
                        with open(src, "rb") as inp:
                            shutil.copyfileobj(inp, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, dst)
        except OSError as e:
            raise RemoteStorageError(f"copy of {metadata.segment_id}: {e}") from e

    def _read(self, path: Path, start: int, end_inclusive: int | None) -> bytes:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                end = size if end_inclusive is None else min(size, end_inclusive + 1)
                return os.pread(f.fileno(), max(0, end - start), start)
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(str(path)) from e
        except OSError as e:
            raise RemoteStorageError(f"read {path}: {e}") from e

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        check_range(start_position, end_position)
        return self._read(self._path(metadata, None), start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._read(self._path(metadata, index_type), 0, None)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        for index_type in [None, *IndexType]:
            try:
                self._path(metadata, index_type).unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                raise RemoteStorageError(f"delete of {metadata.segment_id}: {e}") from e

    def close(self) -> None:
        pass
