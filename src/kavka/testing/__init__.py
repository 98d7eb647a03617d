"""Test-only parts: deterministic stand-ins for seeded simulations and their harnesses.

- `ManualClock`, `SimNetwork`, `MemoryLog`: time, network and a crash-losing log for seeded
  simulations; nothing reads the wall clock or global randomness (every source of
  nondeterminism is a `random.Random` the test seeds). Used by tests only.
- `raft_simulation`, `replication_simulation`, `tiered_simulation`: the harnesses of the seeded
  simulations in tests/simulation (import them by module; a failing seed replays from there).
- `FaultInjection` and its switch names: re-exported from kavka.faults (production code, since
  the broker builds one at startup; production never imports this package).
"""

from kavka.faults import (
    CRASH_POINT_ENV,
    CUT_PRODUCE_ENV,
    DISK_FAULT_ENV,
    ENABLE_KEY,
    FaultInjection,
)
from kavka.testing.clock import ManualClock
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
