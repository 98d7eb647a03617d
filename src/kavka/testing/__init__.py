"""Deterministic stand-ins for time, network and disk, shared by seeded simulations.

Nothing here reads the wall clock or global randomness: every source of
nondeterminism is a `random.Random` the test seeds. Used by tests only.
"""

from kavka.testing.clock import ManualClock
from kavka.testing.memory_log import MemoryLog
from kavka.testing.network import SimNetwork

__all__ = ["ManualClock", "MemoryLog", "SimNetwork"]
