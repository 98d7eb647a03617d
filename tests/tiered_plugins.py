"""A RemoteStorageManager plugin for tests (loaded by a real broker as
``remote.log.storage.manager.class.name=tests.tiered_plugins:BlockingReadsRemoteStorageManager``):
the ``local`` backend whose segment reads wait while ``<rsm.config.dir>/block-reads`` exists,
with ``<rsm.config.dir>/read-blocked`` present while one waits. Fault injection below the
process boundary: it shows what a slow object store does to the broker, nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from kavka.tiered.api import RemoteLogSegmentMetadata
from kavka.tiered.backends.local_dir import LocalDirRemoteStorageManager


class BlockingReadsRemoteStorageManager(LocalDirRemoteStorageManager):
    def configure(self, configs: Mapping[str, str]) -> None:
        super().configure(configs)
        self._control = Path(configs["dir"])

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        block, marker = self._control / "block-reads", self._control / "read-blocked"
        deadline = time.monotonic() + 60
        while block.exists() and time.monotonic() < deadline:
            marker.touch()
            time.sleep(0.01)
        marker.unlink(missing_ok=True)
        return super().fetch_log_segment(metadata, start_position, end_position)
