"""Test-only parts: deterministic stand-ins for seeded simulations, and a broker's fault hooks.

- `ManualClock`, `SimNetwork`, `MemoryLog`: time, network and a crash-losing log for seeded
  simulations; nothing reads the wall clock or global randomness (every source of
  nondeterminism is a `random.Random` the test seeds). Used by tests only.
- `FaultInjection`: which faults a broker injects (a kill at a step of a log-dir move, a cut
  connection after every Nth Produce, I/O errors on failed dirs). The broker builds one at
  startup from ``KAVKA_TEST_CRASH_POINT``, ``KAVKA_FAULT_CUT_PRODUCE_EVERY`` and
  ``KAVKA_FAULT_INJECTION_FILE`` only when its config sets
  ``kavka.test.fault.injection.enable=true``; otherwise those variables are ignored (and a
  warning says so), so a stray environment variable can never make a production broker kill
  itself or drop connections. Only broker startup (broker.node) may call `from_environment`.
"""

from kavka.testing.clock import ManualClock
from kavka.testing.faults import (
    CRASH_POINT_ENV,
    CUT_PRODUCE_ENV,
    DISK_FAULT_ENV,
    ENABLE_KEY,
    FaultInjection,
)
from kavka.testing.memory_log import MemoryLog
from kavka.testing.network import SimNetwork

__all__ = [
    "CRASH_POINT_ENV",
    "CUT_PRODUCE_ENV",
    "DISK_FAULT_ENV",
    "ENABLE_KEY",
    "FaultInjection",
    "ManualClock",
    "MemoryLog",
    "SimNetwork",
]
