"""A clock that moves only when the test says so (milliseconds, starting where the test likes)."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self.now_ms += ms
        return self.now_ms

    def advance_to(self, when_ms: int) -> int:
        self.now_ms = max(self.now_ms, when_ms)
        return self.now_ms
