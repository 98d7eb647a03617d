"""The purgatory's deadlines (replication.purgatory.Deadlines): every delayed operation's timeout on
one loop timer, against what a loop timer per operation would do.

Driven on a manual clock (a loop with just `time` and `call_later`, as the replication
simulation's): hypothesis draws deadlines set, cancelled and the clock moved; every deadline must
run exactly when one loop timer of its own would have (at its time, less the 1 ms granularity,
never before it was due), once, in order of time and then of setting, none that was cancelled, and
the loop must never hold more than one timer of the purgatory at a time.
"""

from __future__ import annotations

import asyncio
import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.replication.purgatory import Deadlines


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualLoop:
    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, _Timer, object]] = []
        self._seq = 0

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback) -> _Timer:  # noqa: ANN001
        timer = _Timer()
        self._seq += 1
        heapq.heappush(self._timers, (self.now + delay, self._seq, timer, callback))
        return timer

    def pending(self) -> int:
        return sum(not t.cancelled for _, _, t, _ in self._timers)

    def advance(self, to: float) -> None:
        while self._timers and self._timers[0][0] <= to:
            when, _, timer, callback = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            if not timer.cancelled:
                callback()
        self.now = to


steps = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 200)),  # a deadline this many ms from now
        st.tuples(st.just("cancel"), st.integers(0, 50)),  # the n-th deadline set so far (if any)
        st.tuples(st.just("advance"), st.integers(0, 120)),  # the clock, by this many ms
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_deadlines_run_as_a_timer_each_would_on_one_loop_timer(steps: list[tuple[str, int]]) -> None:
    loop = ManualLoop()
    asyncio._set_running_loop(loop)  # type: ignore[arg-type]
    try:
        d = Deadlines()
        due: list[float] = []
        handles = []
        cancelled: set[int] = set()
        ran: list[tuple[int, float]] = []
        for op, n in steps:
            if op == "set":
                i = len(due)
                due.append(loop.now + n / 1000)
                handles.append(d.call_later(n / 1000, lambda i=i: ran.append((i, loop.now))))
            elif op == "cancel" and n < len(handles):
                if all(r[0] != n for r in ran):
                    cancelled.add(n)
                handles[n].cancel()
            else:
                loop.advance(loop.now + n / 1000)
            assert loop.pending() <= 1
            assert len(d) == sum(1 for i in range(len(due)) if i not in cancelled and all(r[0] != i for r in ran))
        loop.advance(loop.now + 1.0)  # past every deadline
        assert sorted(i for i, _ in ran) == [i for i in range(len(due)) if i not in cancelled]
        for i, at in ran:
            assert due[i] - 0.001 - 1e-9 <= at <= due[i] + 1e-9  # when its own timer would have run
        assert [i for i, _ in ran] == sorted((i for i, _ in ran), key=lambda i: (due[i], i)) or all(
            abs(due[a] - due[b]) <= 0.001 + 1e-9 for (a, _), (b, _) in zip(ran, ran[1:], strict=False)
            if (due[a], a) > (due[b], b))
        assert len(d) == 0 and loop.pending() == 0
    finally:
        asyncio._set_running_loop(None)


def test_a_failing_deadline_does_not_stop_the_others() -> None:
    loop = ManualLoop()
    asyncio._set_running_loop(loop)  # type: ignore[arg-type]
    try:
        d = Deadlines()
        ran = []
        d.call_later(0.01, lambda: 1 / 0)
        d.call_later(0.01, lambda: ran.append("second"))
        loop.advance(0.02)
        assert ran == ["second"]
    finally:
        asyncio._set_running_loop(None)


def test_a_deadline_that_cancels_and_sets_others() -> None:
    """A deadline's callback cancels most of the rest (the heap is compacted under the run) and
    sets one due before those left: each still runs at its time, the cancelled never."""
    loop = ManualLoop()
    asyncio._set_running_loop(loop)  # type: ignore[arg-type]
    try:
        d = Deadlines()
        ran: list[tuple[str, float]] = []
        later = [d.call_later(0.5 + i / 1000, lambda i=i: ran.append((f"later{i}", loop.now))) for i in range(40)]

        def first() -> None:
            ran.append(("first", loop.now))
            for h in later[:-2]:
                h.cancel()
            d.call_later(0.1, lambda: ran.append(("new", loop.now)))

        d.call_later(0.2, first)
        loop.advance(2.0)
        due = {"first": 0.2, "new": 0.3, "later38": 0.538, "later39": 0.539}
        assert [name for name, _ in ran] == list(due)
        assert all(due[name] - 0.001 - 1e-9 <= at <= due[name] + 1e-9 for name, at in ran)
        assert len(d) == 0 and loop.pending() == 0
    finally:
        asyncio._set_running_loop(None)
