"""Test-only hooks of a broker instance; inert unless the broker enables them.

Owns `FaultInjection`: which faults a broker injects (a kill at a step of a
log-dir move, a cut connection after every Nth Produce, I/O errors on failed
dirs). The broker builds one at startup from ``KAVKA_TEST_CRASH_POINT``,
``KAVKA_FAULT_CUT_PRODUCE_EVERY`` and ``KAVKA_FAULT_INJECTION_FILE`` only when
its config sets ``kavka.test.fault.injection.enable=true``; otherwise those
variables are ignored (and a warning says so), so a stray environment variable
can never make a production broker kill itself or drop connections. Only
broker startup (broker.node) may call `from_environment`.
"""

from kavka.testing.faults import (
    CRASH_POINT_ENV,
    CUT_PRODUCE_ENV,
    DISK_FAULT_ENV,
    ENABLE_KEY,
    FaultInjection,
)

__all__ = ["CRASH_POINT_ENV", "CUT_PRODUCE_ENV", "DISK_FAULT_ENV", "ENABLE_KEY", "FaultInjection"]
