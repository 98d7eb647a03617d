"""I/O fault injection for tests, below the process boundary (KIP-112 tests).

A broker started with ``KAVKA_FAULT_INJECTION_FILE=<control file>`` in its
environment and ``kavka.test.fault.injection.enable=true`` in its config
(kavka.faults; the variable alone is ignored) points the process-wide
`FAULTS` at that file at startup (`configure`); from then on it checks, before each segment write, read and fsync and each
checkpoint write, whether the path lies under a dir listed in the control
file (one absolute path a line); if so the operation raises
``OSError(EIO)``, exactly what a dying disk raises. A line
``block-fsync <dir>`` instead makes every fsync of a file under that dir wait
until the line is gone (`before_fsync`): a disk that is slow, not dead. The control file is read
again at most every 20 ms, so a test fails a
dir of a running broker by writing its path there. Without the variable,
`check` is one attribute test. Any thread may call `check`.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

FAULT_INJECTION_ENV = "KAVKA_FAULT_INJECTION_FILE"
_RECHECK_S = 0.02
BLOCK_FSYNC_MAX_S = 120.0


class DiskFaults:
    def __init__(self, control_file: str | None) -> None:
        self.configure(control_file)

    def configure(self, control_file: str | None) -> None:
        """(Re)point at a control file; None turns injection off (unit tests use this)."""
        self.enabled = bool(control_file)
        self._control = Path(control_file) if control_file else None
        self._next_stat = 0.0
        self._failing: tuple[str, ...] = ()
        self._block_fsync: tuple[str, ...] = ()

    def _refresh(self, *, force: bool = False) -> None:
        # The file is re-read every interval, not on an mtime change: a test's write_text
        # truncates then writes, and a stat between the two sees the empty file with the same
        # coarse-clock mtime the write then leaves, so an mtime check could miss the new lines.
        now = time.monotonic()
        if (now < self._next_stat and not force) or self._control is None:
            return
        self._next_stat = now + _RECHECK_S
        try:
            lines = [x.strip() for x in self._control.read_text().splitlines() if x.strip()]
        except OSError:
            lines = []
        block = "block-fsync "
        # one assignment each: another thread reading meanwhile sees the old or the new tuple
        self._failing = tuple(os.path.abspath(x) + os.sep for x in lines if not x.startswith(block))
        self._block_fsync = tuple(
            os.path.abspath(x[len(block) :].strip()) + os.sep for x in lines if x.startswith(block)
        )

    def before_fsync(self, path: Path | str) -> None:
        """Block an fsync of a file under a dir listed as ``block-fsync <dir>`` until that
        line is removed (at most BLOCK_FSYNC_MAX_S); ``<control file>.fsync-blocked`` exists
        meanwhile, so a test can see that an fsync is stuck (a slow disk, below the process)."""
        if not self.enabled or self._control is None:
            return
        # Always re-read before an fsync (far dearer than reading the small control file): with
        # the 20 ms cache, an fsync right after the test wrote its line could still pass.
        self._refresh(force=True)
        if not self._blocked_fsync(path):
            return
        marker = self._control.with_name(self._control.name + ".fsync-blocked")
        marker.write_text(f"{path}\n")
        deadline = time.monotonic() + BLOCK_FSYNC_MAX_S
        try:
            while time.monotonic() < deadline and self._blocked_fsync(path):
                time.sleep(_RECHECK_S)
                self._refresh()
        finally:
            marker.unlink(missing_ok=True)

    def _blocked_fsync(self, path: Path | str) -> bool:
        p = os.path.abspath(path) + os.sep
        return any(p.startswith(prefix) for prefix in self._block_fsync)

    def check(self, path: Path | str) -> None:
        """Raise OSError(EIO) if ``path`` lies under a dir the test has failed."""
        if not self.enabled:
            return
        self._refresh()
        p = os.path.abspath(path)
        for prefix in self._failing:
            if (p + os.sep).startswith(prefix):
                raise OSError(errno.EIO, "injected I/O error (" + FAULT_INJECTION_ENV + ")", str(path))


FAULTS = DiskFaults(None)  # off until broker startup enables it (kavka.faults)
