"""The purgatory: requests that are answered later, at a change of a partition or at a deadline.

Kafka's DelayedOperationPurgatory with its two kinds of delayed operation, DelayedProduce
(acks=all) and DelayedFetch (a Fetch with too little data), all in this module; the
ReplicaManager owns one `Purgatory` and creates the delayed operations from `append_records` and
`fetch_messages`.

Two kinds of watch, keyed by partition (`Purgatory.watch`):
- *visible-change* watches -- consumer Fetch long-polls -- fire when a partition's high watermark
  moves or its role changes (`Purgatory.visible_change`, called from the Partition's `on_change`);
- *append* watches -- followers' Fetch long-polls -- fire on any append (`Purgatory.appended`).
A watch fires once, in the callback of the change itself (Kafka's purgatory completes a delayed
operation in the thread that made it completable): the operation re-checks its own condition and
either completes or watches again until its deadline. Completing a plain future, not resuming a
task, keeps the hops through the event loop's ready queue down to one per step of an acks=all
round trip (on a busy loop each hop waits for everything queued before it).

acks=all produces wait differently (`Purgatory.watch_offset`): each for the high watermark to
reach its own offset, so they are kept per partition in a heap by that offset, and a visible
change asks them in that order until the first that still waits -- all after it need more, as a
role change ends every one of them. A move of the high watermark costs the produces it completes,
not one check and one new registration of each produce in flight: with a hundred acks=all
requests in flight, re-registering all of them at every follower fetch that moved the high
watermark (and removing each from a list) was a tenth of an RF=3 leader's busy time (27 Nov).

`Delayed` is the common part (Kafka's DelayedOperation). `future` is for code that awaits the
answer; `listen` gives the network server a callback run at once, in that same callback, so the
response is written without another turn of the event loop (an asyncio future's done-callbacks
are scheduled, and on a busy loop that turn waits behind everything already queued: ~0.4 ms of
an acks=all round trip at 1k records/s). A subclass says what happens at the deadline (`_expire`)
and what it lets go of when it is over (`_release`: its watches, its request); it answers with
`_resolve` / `_fail`. Whichever ends it -- an answer, the deadline, a cancel of `future` (the
connection closed) -- its deadline is cancelled and `_release` runs, so nothing of a request is left
in a reference cycle: at 1k requests/s, waits whose parts referred to each other left every
request to the cyclic garbage collector, whose full collections paused the loop for 45-120 ms.

Deadlines (`Deadlines`): every delayed operation's timeout is an entry in one heap per purgatory,
on one loop timer armed at the earliest, not a loop timer per operation (most are answered before
their deadline, and scheduling then cancelling a loop timer cost more than the heap's push).

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kavka.common import ErrorCode, TopicPartition

if TYPE_CHECKING:
    from kavka.replication.partition import Partition

log = logging.getLogger("kavka.replication")
T = TypeVar("T")


class _Waits:
    """The waits on one partition: registrations that fire at the next change (insertion-ordered,
    removed in O(1)), and acks=all waits in a heap by the offset they need (`OffsetWait` entries,
    [offset, sequence, check]; a cancelled one has no check and leaves the heap when it reaches
    the top)."""

    __slots__ = ("plain", "by_offset", "live")

    def __init__(self) -> None:
        self.plain: dict[Registration, None] = {}
        self.by_offset: list[list[Any]] = []
        self.live = 0  # the entries of by_offset not cancelled

    def __bool__(self) -> bool:
        return bool(self.plain) or self.live > 0


Watchers = dict[TopicPartition, _Waits]


def _drop_if_empty(watchers: Watchers, tp: TopicPartition, waits: _Waits) -> None:
    if not waits and watchers.get(tp) is waits:
        del watchers[tp]


class Registration:
    """`callback` watched on each of `keys` (Purgatory.watch); it runs at most once."""

    __slots__ = ("_watchers", "_keys", "_callback")

    def __init__(self, watchers: Watchers, keys: list[TopicPartition], callback: Callable[[], None]) -> None:
        self._watchers = watchers
        self._keys = keys
        self._callback = callback
        for tp in keys:
            waits = watchers.get(tp)
            if waits is None:
                waits = watchers[tp] = _Waits()
            waits.plain[self] = None

    def _fire(self) -> None:
        if not self._keys:
            return  # woken through a second partition in the same turn, or cancelled
        self.cancel()
        self._callback()

    def cancel(self) -> None:
        for tp in self._keys:
            waits = self._watchers.get(tp)
            if waits is None:
                continue
            waits.plain.pop(self, None)  # not there when woken: _wake took the partition's set
            _drop_if_empty(self._watchers, tp, waits)
        self._keys = []


class OffsetWait:
    """An acks=all wait on one partition (Purgatory.watch_offset); `cancel` when it is over."""

    __slots__ = ("_watchers", "_tp", "_waits", "_entry")

    def __init__(self, watchers: Watchers, tp: TopicPartition, waits: _Waits, entry: list[Any]) -> None:
        self._watchers, self._tp, self._waits, self._entry = watchers, tp, waits, entry

    def cancel(self) -> None:
        if _retire(self._waits, self._entry):
            _drop_if_empty(self._watchers, self._tp, self._waits)


def _retire(waits: _Waits, entry: list[Any]) -> bool:
    """Take an offset wait out of the count (it leaves the heap when it reaches the top); False if it was out."""
    if entry[2] is None:
        return False
    entry[2] = None
    waits.live -= 1
    return True


def _over(tp: TopicPartition, entry: list[Any]) -> bool:
    """Whether an offset wait is over: asked now, unless its owner ended it meanwhile."""
    check = entry[2]
    if check is None:
        return True
    try:
        return check()
    except Exception:  # one waiter's bug must not cost the others their wake-up; its deadline answers it
        log.exception("a purgatory callback for %s failed", tp)
        return True


class Deadline:
    """One deadline in `Deadlines`: `cancel()` before it passes and its callback never runs."""

    __slots__ = ("_owner", "callback")

    def __init__(self, owner: Deadlines, callback: Callable[[], None]) -> None:
        self._owner = owner
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        if self.callback is not None:
            self.callback = None
            self._owner.cancelled()


class Deadlines:
    """The deadlines of one purgatory's delayed operations on one loop timer (Kafka's purgatory
    keeps its own timer, SystemTimer, for the same reason): a heap of (when, sequence, deadline)
    and the loop's timer armed at the earliest. Most operations are answered before their
    deadline: a cancel only marks the entry, dropped when it comes to the top (or all at once
    when cancelled entries are most of the heap), instead of scheduling and cancelling a loop
    timer per operation. Deadlines due at the same time run in the order they were set.

    A deadline runs no earlier than `delay` after it was set, less the loop's timer granularity
    (1 ms: libuv counts whole milliseconds)."""

    __slots__ = ("_heap", "_seq", "_timer", "_armed", "_cancelled", "_loop")

    _GRANULARITY = 0.001

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._armed = float("inf")
        self._cancelled = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        """Deadlines set and not yet run or cancelled."""
        return len(self._heap) - self._cancelled

    def call_later(self, delay: float, callback: Callable[[], None]) -> Deadline:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use (a purgatory is built before its loop runs)
            self._loop, self._timer, self._armed = loop, None, float("inf")
        when = loop.time() + max(delay, 0.0)
        entry = Deadline(self, callback)
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, entry))
        if when < self._armed:
            self._arm(when)
        return entry

    def cancelled(self) -> None:
        self._cancelled += 1
        if self._cancelled > 8 and self._cancelled * 2 > len(self._heap):
            self._heap = [e for e in self._heap if e[2].callback is not None]
            heapq.heapify(self._heap)
            self._cancelled = 0

    def _arm(self, when: float) -> None:
        loop = self._loop
        assert loop is not None
        if self._timer is not None:
            self._timer.cancel()
        self._armed = when
        self._timer = loop.call_later(max(when - loop.time(), 0.0), self._run)

    def _run(self) -> None:
        self._timer, self._armed = None, float("inf")
        loop = self._loop
        assert loop is not None
        # self._heap each time: a callback may set deadlines, or cancel enough to compact the heap.
        while self._heap and self._heap[0][0] <= loop.time() + self._GRANULARITY:
            entry = heapq.heappop(self._heap)[2]
            callback, entry.callback = entry.callback, None
            if callback is None:
                self._cancelled -= 1
                continue
            try:
                callback()
            except Exception:  # one operation's bug must not cost the others their deadlines
                log.exception("a purgatory deadline failed")
        while self._heap and self._heap[0][2].callback is None:
            heapq.heappop(self._heap)
            self._cancelled -= 1
        if self._heap and self._heap[0][0] < self._armed:  # a callback may have armed a later one
            self._arm(self._heap[0][0])


class Purgatory:
    """The watches of one broker's delayed operations, keyed by partition."""

    def __init__(self) -> None:
        self.visible_watchers: Watchers = {}  # high watermark or role changes
        self.append_watchers: Watchers = {}  # appends (followers' fetches)
        self._sequence = itertools.count()
        self.deadlines = Deadlines()  # every delayed operation's timeout, on one loop timer

    def watch(self, tps: Iterable[TopicPartition], callback: Callable[[], None], *, follower: bool = False) -> Registration:
        """Call `callback` once, at the next change to any of `tps`: for a follower an append, for
        anyone else a move of the high watermark (what makes records visible) or of the role. The
        registration is dropped from the others then, or by `cancel()`."""
        return Registration(self.append_watchers if follower else self.visible_watchers, list(tps), callback)

    def watch_offset(self, tp: TopicPartition, offset: int, check: Callable[[], bool]) -> OffsetWait:
        """Call `check` at visible changes of `tp` while it returns False, in the order of `offset`
        among the partition's waits: the wait of an acks=all produce for the high watermark to reach
        `offset`. `check` must say False only while the high watermark is below `offset` and the role
        has not changed, so that no wait behind it in that order can be over either."""
        waits = self.visible_watchers.get(tp)
        if waits is None:
            waits = self.visible_watchers[tp] = _Waits()
        entry = [offset, next(self._sequence), check]
        heapq.heappush(waits.by_offset, entry)
        waits.live += 1
        return OffsetWait(self.visible_watchers, tp, waits, entry)

    def visible_change(self, tp: TopicPartition) -> None:
        """A partition's high watermark or role changed: consumers and acks=all produces look again."""
        waits = self.visible_watchers.get(tp)
        if waits is not None:
            self._wake(self.visible_watchers, tp, waits)

    def appended(self, tp: TopicPartition) -> None:
        waits = self.append_watchers.get(tp)
        if waits is not None:
            self._wake(self.append_watchers, tp, waits)

    def wake_all(self, tp: TopicPartition) -> None:
        """The partition went away or offline: every wait on it looks again (and answers an error)."""
        for watchers in (self.visible_watchers, self.append_watchers):
            waits = watchers.get(tp)
            if waits is not None:
                self._wake(watchers, tp, waits, every_offset=True)

    @staticmethod
    def _wake(watchers: Watchers, tp: TopicPartition, waits: _Waits, *, every_offset: bool = False) -> None:
        plain, waits.plain = waits.plain, {}
        for reg in plain:
            try:
                reg._fire()
            except Exception:  # one waiter's bug must not cost the others (or the append) their wake-up
                log.exception("a purgatory callback for %s failed", tp)
        if every_offset:
            for entry in [e for e in waits.by_offset if e[2] is not None]:
                if _over(tp, entry):
                    _retire(waits, entry)
            waits.by_offset = [e for e in waits.by_offset if e[2] is not None]
            heapq.heapify(waits.by_offset)
        else:
            heap = waits.by_offset
            while heap:
                entry = heap[0]
                if entry[2] is None:
                    heapq.heappop(heap)
                elif _over(tp, entry):
                    _retire(waits, entry)  # popped at the next turn, unless its owner's cancel came first
                else:
                    break  # the smallest offset still waits: so does every wait behind it
        _drop_if_empty(watchers, tp, waits)

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float, *, follower: bool = False) -> None:
        """Return after a change to any of `tps` (as `watch`), or after `timeout_s`."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        reg = self.watch(tps, wake, follower=follower)
        timer = self.deadlines.call_later(timeout_s, wake)
        try:
            await fut  # this wait's own future: a cancel of the waiting task cancels only it
        finally:
            timer.cancel()
            reg.cancel()


class Delayed(Generic[T]):
    """An answer that comes later, at an event or a deadline (Kafka's DelayedOperation)."""

    __slots__ = ("future", "_listener", "_timer")

    def __init__(self, timeout_s: float, deadlines: Deadlines) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[T] = loop.create_future()
        self._listener: Callable[[], None] | None = None
        self._timer: Deadline | None = deadlines.call_later(timeout_s, self._deadline)
        self.future.add_done_callback(self._cancelled)

    def listen(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the answer is set: now if it already is."""
        if self.future.done():
            callback()
        else:
            self._listener = callback

    def _expire(self) -> None:
        """The deadline passed: answer (subclasses)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Drop what the wait holds (subclasses)."""

    def _deadline(self) -> None:
        self._timer = None
        self._expire()

    def _cancelled(self, f: asyncio.Future[T]) -> None:
        if f.cancelled():
            self._listener = None
            self._end()

    def _end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release()

    def _resolve(self, value: T) -> None:
        self._end()
        self.future.set_result(value)
        self._notify()

    def _fail(self, exc: BaseException) -> None:
        self._end()
        self.future.set_exception(exc)
        self._notify()

    def _notify(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener()


class DelayedProduce(Delayed[T]):
    """One acks=all wait (Kafka's DelayedProduce): answered with `finish(answers)` once each
    partition's high watermark reaches its required offset, or at the timeout. The answer per
    partition: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER (leadership moved),
    or REQUEST_TIMED_OUT. Checked at each visible change of a waiting partition, in the callback."""

    __slots__ = ("_purgatory", "_partitions", "_out", "_pending", "_regs", "_finish")

    def __init__(
        self,
        purgatory: Purgatory,
        partitions: Mapping[TopicPartition, Partition],
        waits: list[tuple[TopicPartition, int]],
        timeout_s: float,
        finish: Callable[[dict[TopicPartition, ErrorCode]], T],
    ) -> None:
        super().__init__(timeout_s, purgatory.deadlines)
        self._purgatory: Purgatory | None = purgatory
        self._partitions: Mapping[TopicPartition, Partition] | None = partitions
        self._out: dict[TopicPartition, ErrorCode] = {}
        self._pending = dict(waits)
        self._regs: dict[TopicPartition, OffsetWait] = {}
        self._finish: Callable[[dict[TopicPartition, ErrorCode]], T] | None = finish
        for tp in list(self._pending):
            self._check(tp)

    def _check(self, tp: TopicPartition) -> bool:
        """Whether `tp`'s wait is over (answered, or nothing to wait for); while it is not, it is
        watched once (`Purgatory.watch_offset`) and asked again at each visible change."""
        purgatory, partitions = self._purgatory, self._partitions
        if purgatory is None or partitions is None or tp not in self._pending:
            return True
        p = partitions.get(tp)
        state = ErrorCode.not_leader_or_follower if p is None else p.acks_all_state(self._pending[tp])
        if state is None:
            if tp not in self._regs:
                self._regs[tp] = purgatory.watch_offset(tp, self._pending[tp], functools.partial(self._check, tp))
            return False
        self._out[tp] = state
        del self._pending[tp]
        if not self._pending:
            self._answer()
        return True

    def _expire(self) -> None:
        for tp in self._pending:
            self._out[tp] = ErrorCode.request_timed_out
        self._pending.clear()
        self._answer()

    def _answer(self) -> None:
        finish = self._finish
        if finish is None or self.future.done():
            return
        try:
            value = finish(self._out)
        except Exception as e:  # noqa: BLE001 -- the request's handler fails, not the waker
            self._fail(e)
            return
        self._resolve(value)

    def _release(self) -> None:
        self._finish = self._purgatory = self._partitions = None
        for reg in self._regs.values():
            reg.cancel()
        self._regs.clear()


class DelayedFetch(Delayed[T]):
    """One parked Fetch (Kafka's DelayedFetch): answered by the first read, at a change to one of
    `tps` (an append for a follower, a visible change for a consumer), that has `min_bytes` or an
    error, or by the read at the deadline. Watched from construction, so a change before the
    server's next turn is not missed; the read runs in the purgatory's callback, and the server
    writes the answer there too. `read()` returns (answer, bytes read, whether an error must be
    answered at once); `done(answer)` is what the request is answered with."""

    __slots__ = ("_purgatory", "_tps", "_follower", "_read", "_min_bytes", "_done", "_reg")

    def __init__(
        self,
        purgatory: Purgatory,
        tps: list[TopicPartition],
        follower: bool,
        wait_s: float,
        read: Callable[[], tuple[Any, int, bool]],
        min_bytes: int,
        done: Callable[[Any], T],
    ) -> None:
        super().__init__(wait_s, purgatory.deadlines)
        self._purgatory: Purgatory | None = purgatory
        self._tps, self._follower = tps, follower
        self._read: Callable[[], tuple[Any, int, bool]] | None = read
        self._min_bytes = min_bytes
        self._done: Callable[[Any], T] | None = done
        self._reg: Registration | None = None
        self._watch()

    def _watch(self) -> None:
        if self._purgatory is not None:
            self._reg = self._purgatory.watch(self._tps, self._changed, follower=self._follower)

    def _changed(self) -> None:
        self._attempt(False)

    def _expire(self) -> None:
        self._attempt(True)

    def _attempt(self, final: bool) -> None:
        read, done = self._read, self._done
        if read is None or done is None or self.future.done():
            return
        try:
            res, total, errors = read()
            if total >= self._min_bytes or errors or final:
                self._resolve(done(res))
                return
        except Exception as e:  # noqa: BLE001 -- the request fails (its connection closes), not the waker
            self._fail(e)
            return
        self._watch()

    def _release(self) -> None:
        if self._reg is not None:
            self._reg.cancel()
            self._reg = None
        self._read = self._done = self._purgatory = None
