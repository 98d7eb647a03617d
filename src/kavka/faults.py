"""The per-broker fault-injection switches: production code, read once at broker startup.

`FaultInjection()` (nothing injected) is what every broker runs with unless its config has
``kavka.test.fault.injection.enable=true``. Only then does broker startup (broker.node, the
only caller of `from_environment`) read ``KAVKA_TEST_CRASH_POINT``,
``KAVKA_FAULT_CUT_PRODUCE_EVERY`` and ``KAVKA_FAULT_INJECTION_FILE``, and log a WARNING naming
every active switch; otherwise those variables are ignored (and a warning says so), so a stray
environment variable can never make a production broker kill itself or drop connections.
Values are immutable; the broker hands them to the parts that inject (server, log-dir movers,
disk faults: the I/O side is storage.faults) when it starts.

This lives outside kavka.testing because the broker imports it and production code never
imports test code; kavka.testing re-exports it for tests.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# The logger keeps the name it had under kavka.testing, so broker logs read as before.
log = logging.getLogger("kavka.testing")

ENABLE_KEY = "kavka.test.fault.injection.enable"
CRASH_POINT_ENV = "KAVKA_TEST_CRASH_POINT"
CUT_PRODUCE_ENV = "KAVKA_FAULT_CUT_PRODUCE_EVERY"
DISK_FAULT_ENV = "KAVKA_FAULT_INJECTION_FILE"
_SWITCHES = (CRASH_POINT_ENV, CUT_PRODUCE_ENV, DISK_FAULT_ENV)


@dataclass(frozen=True, slots=True)
class FaultInjection:
    crash_point: str | None = None  # a step (log-dir move, tiered copy, txn markers) at which the broker SIGKILLs itself
    cut_produce_every: int = 0  # close the connection instead of answering every Nth Produce
    disk_fault_file: str | None = None  # control file listing dirs whose I/O fails with EIO

    @property
    def active(self) -> bool:
        return bool(self.crash_point or self.cut_produce_every or self.disk_fault_file)

    @classmethod
    def from_environment(cls, enabled: bool, environ: Mapping[str, str] | None = None) -> FaultInjection:
        """The switches in ``environ`` if ``enabled``; else none (and a warning if any were set)."""
        env = os.environ if environ is None else environ
        present = [k for k in _SWITCHES if env.get(k)]
        if not enabled:
            if present:
                log.warning(
                    "ignoring fault-injection variables %s: %s is not set", ", ".join(present), ENABLE_KEY
                )
            return cls()
        try:
            cut = int(env.get(CUT_PRODUCE_ENV, "0") or 0)
        except ValueError:
            raise ValueError(f"{CUT_PRODUCE_ENV} must be an integer, got {env[CUT_PRODUCE_ENV]!r}") from None
        faults = cls(env.get(CRASH_POINT_ENV) or None, cut, env.get(DISK_FAULT_ENV) or None)
        log.warning(
            "*** TEST-ONLY FAULT INJECTION ENABLED (%s=true): crash point %s, cut every %s produce, "
            "disk fault file %s -- never run a production broker like this ***",
            ENABLE_KEY,
            faults.crash_point or "-",
            faults.cut_produce_every or "-",
            faults.disk_fault_file or "-",
        )
        return faults

    def crash_point_hook(self) -> Callable[[str], None]:
        """A callable the log-dir mover calls at each step; kills the process at `crash_point`."""
        wanted = self.crash_point

        def crash_point(step: str) -> None:
            if wanted is not None and step == wanted:
                log.warning("crash point %s reached: killing this broker (%s)", step, CRASH_POINT_ENV)
                os.kill(os.getpid(), signal.SIGKILL)

        return crash_point

