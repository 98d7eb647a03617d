"""The purgatory (ReplicaManager): waits keyed by partition, answered in the callback of the change.

- `Purgatory.watch` calls its callback once, at the first change to any of its partitions, and is gone
  from the others then: registered when made, so a change before the waiter's next turn of the
  loop is not missed (a parked Fetch once sat out the whole replica.fetch.wait.max.ms that way,
  and acks=all produces waited 500 ms).
- `wait_for_data` returns at a change or quietly at its timeout, and leaves nothing registered.
- `acks_future` (acks=all) answers at the change that completes it, times out, and a cancel (the
  producer's connection closed) unregisters it.
- The server's listener runs in the callback of the change, and a completed wait (produce or
  fetch) leaves no reference cycle: each one the cyclic collector had to find cost a full
  collection's pause of 50-120 ms on a busy broker.
"""

from __future__ import annotations

import asyncio
import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.replication.partition import TopicPartition
from kavka.replication.replica_manager import ReplicaManager


def test_wait_for_data_returns_at_a_change_or_its_timeout_and_unregisters() -> None:
    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        waiter = asyncio.ensure_future(rm.wait_for_data([a, b], 30))
        await asyncio.sleep(0)  # registered
        assert a in rm.purgatory.visible_watchers and b in rm.purgatory.visible_watchers
        rm.purgatory.visible_change(a)
        await asyncio.wait_for(waiter, 5)  # at once, not after 30 s
        assert not rm.purgatory.visible_watchers  # gone from b too

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await rm.wait_for_data([a], 0.05, follower=True)  # nothing happens: times out quietly
        assert loop.time() - t0 >= 0.04 and not rm.purgatory.append_watchers

    asyncio.run(run())


class _Partition:
    """What acks_future reads of a partition: where an acks=all produce stands."""

    def __init__(self) -> None:
        self.high_watermark = 0
        self.leader = True

    def acks_all_state(self, required: int):  # noqa: ANN201
        from kio.schema.errors import ErrorCode

        if not self.leader:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none if self.high_watermark >= required else None


class _Logs:
    def read_high_watermarks(self) -> dict:
        return {}


def _manager() -> tuple[ReplicaManager, TopicPartition, TopicPartition, _Partition, _Partition]:
    rm = ReplicaManager(node_id=1, log_manager=_Logs(), now_ms=lambda: 0)  # type: ignore[arg-type]
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    pa, pb = _Partition(), _Partition()
    rm.partitions[a], rm.partitions[b] = pa, pb  # type: ignore[assignment]
    return rm, a, b, pa, pb


def test_acks_future_answers_at_the_change_that_completes_it() -> None:
    from kio.schema.errors import ErrorCode

    async def run() -> None:
        rm, a, b, pa, pb = _manager()
        fut = rm.acks_future([(a, 5), (b, 3)], 30, lambda out: sorted((tp.partition, e) for tp, e in out.items())).future
        pa.high_watermark = 5
        rm.purgatory.visible_change(a)
        assert not fut.done()  # b still waits
        pb.high_watermark = 2
        rm.purgatory.visible_change(b)
        assert not fut.done()  # not far enough: registered again
        pb.high_watermark = 3
        rm.purgatory.visible_change(b)
        assert fut.done() and fut.result() == [(0, ErrorCode.none), (1, ErrorCode.none)]
        assert not rm.purgatory.visible_watchers  # nothing left registered

        lost = rm.acks_future([(a, 9)], 30, dict).future
        pa.leader = False
        rm.purgatory.visible_change(a)
        assert (await lost) == {a: ErrorCode.not_leader_or_follower}

    asyncio.run(run())


def test_acks_future_times_out_and_a_cancel_unregisters() -> None:
    from kio.schema.errors import ErrorCode

    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        assert (await rm.wait_for_acks([(a, 1), (b, 1)], 0.05)) == {a: ErrorCode.request_timed_out, b: ErrorCode.request_timed_out}
        assert not rm.purgatory.visible_watchers
        fut = rm.acks_future([(a, 1)], 30, dict).future
        assert a in rm.purgatory.visible_watchers
        fut.cancel()  # the producer's connection closed
        await asyncio.sleep(0)
        assert not rm.purgatory.visible_watchers

    asyncio.run(run())


def test_on_change_runs_once_and_leaves_the_other_partitions() -> None:
    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        calls: list[int] = []
        rm.purgatory.watch([a, b], lambda: calls.append(1), follower=True)
        rm.notify_append(a)
        rm.notify_append(b)
        assert calls == [1] and not rm.purgatory.append_watchers

    asyncio.run(run())


def _ours(o: object) -> bool:
    """An object of kavka's or asyncio's (a Future, Task, Handle): a cycle the code under test made
    holds at least one. Garbage from the process's other threads (pytest-xdist's execnet channel
    runs one beside the test) holds none, so it cannot fail the count."""
    mod = getattr(type(o), "__module__", "") or ""
    if callable(o) and not isinstance(o, type):
        mod = getattr(o, "__module__", None) or mod
    return mod.startswith(("kavka", "asyncio", "_asyncio"))


def _cyclic_garbage_of(run_one) -> int:  # noqa: ANN001
    """kavka's and asyncio's objects the cyclic collector finds after `run_one` (a coroutine
    function) ran, with automatic collection off meanwhile."""

    async def run() -> int:
        await run_one()  # warm up: first-call caches are not garbage
        gc.collect()
        gc.disable()
        try:
            await run_one()
            await asyncio.sleep(0)  # the scheduled done-callbacks run
            await asyncio.sleep(0)
            gc.set_debug(gc.DEBUG_SAVEALL)  # keep what is collected, to look at it
            gc.collect()
            found = [o for o in gc.garbage if _ours(o)]
            gc.garbage.clear()
            return len(found)
        finally:
            gc.set_debug(0)
            gc.enable()

    return asyncio.run(run())


def test_a_completed_acks_all_wait_calls_its_listener_at_once_and_leaves_no_cycle() -> None:
    from kio.schema.errors import ErrorCode

    rm, a, b, pa, pb = _manager()
    heard: list[object] = []

    async def one() -> None:
        pa.high_watermark = pb.high_watermark = 0
        d = rm.acks_future([(a, 1), (b, 1)], 30, lambda out: dict(out))
        d.listen(lambda: heard.append(d.future.result()))
        before = len(heard)
        pa.high_watermark = pb.high_watermark = 1
        rm.purgatory.visible_change(a)
        assert len(heard) == before
        rm.purgatory.visible_change(b)
        assert heard[before:] == [{a: ErrorCode.none, b: ErrorCode.none}]  # in the callback, not a later turn
        timed_out = rm.acks_future([(a, 5)], 0.001, dict)
        await timed_out.future
        cancelled = rm.acks_future([(a, 5)], 30, dict)
        cancelled.future.cancel()

    assert _cyclic_garbage_of(one) == 0
    assert len(heard) == 2 and not rm.purgatory.visible_watchers


def test_a_parked_fetch_leaves_no_cycle() -> None:
    from kavka.replication.purgatory import DelayedFetch

    rm, a, _b, _pa, _pb = _manager()

    async def one() -> None:
        ready = iter([0, 1])  # bytes each read finds
        woken = DelayedFetch(rm.purgatory, [a], True, 30, lambda: (None, next(ready), False), 1, lambda r: "answer")
        rm.notify_append(a)  # 0 bytes: registered again
        assert not woken.future.done() and a in rm.purgatory.append_watchers
        rm.notify_append(a)  # enough
        assert woken.future.result() == "answer"
        expired = DelayedFetch(rm.purgatory, [a], False, 0.001, lambda: (None, 0, False), 1, lambda r: "late")
        assert (await expired.future) == "late"
        DelayedFetch(rm.purgatory, [a], False, 30, lambda: (None, 0, False), 1, lambda r: r).future.cancel()

    assert _cyclic_garbage_of(one) == 0
    assert not rm.purgatory.visible_watchers and not rm.purgatory.append_watchers


def test_the_cycle_counter_sees_an_asyncio_cycle() -> None:
    """The counter can fail: a Future kept alive only by its own callback is counted."""

    async def one() -> None:
        fut = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f, fut=fut: fut)  # pending: fut -> its callback -> fut

    assert _cyclic_garbage_of(one) > 0


class _AcksPartition(_Partition):
    """acks_all_state as Partition's: also NOT_ENOUGH_REPLICAS_AFTER_APPEND past the offset with a small ISR."""

    def __init__(self) -> None:
        super().__init__()
        self.isr_too_small = False

    def acks_all_state(self, required: int):  # noqa: ANN201
        from kio.schema.errors import ErrorCode

        state = super().acks_all_state(required)
        if state == ErrorCode.none and self.isr_too_small:
            return ErrorCode.not_enough_replicas_after_append
        return state


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.lists(st.tuples(st.integers(0, 1), st.integers(0, 40)), min_size=1, max_size=2)),
        st.tuples(st.just("hw"), st.integers(0, 1), st.integers(0, 12)),
        st.tuples(st.just("role"), st.integers(0, 1), st.booleans()),
        st.tuples(st.just("isr"), st.integers(0, 1), st.booleans()),
        st.tuples(st.just("wake_all"), st.integers(0, 1)),
        st.tuples(st.just("cancel"), st.integers(0, 30)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_acks_all_waits_by_offset_answer_as_a_check_of_every_wait_at_every_change(ops) -> None:  # noqa: ANN001
    """The purgatory asks acks=all waits in the order of their offsets and stops at the first that
    still waits (Purgatory.watch_offset). Reference: each wait of each produce asked at every
    visible change of its partition (and at construction), as a watch per produce did before.
    Both must answer the same produces, with the same errors per partition, at the same step,
    and leave nothing registered once all are answered or cancelled."""

    async def run() -> None:
        rm, a, b, _pa, _pb = _manager()
        tps = (a, b)
        parts = {tp: _AcksPartition() for tp in tps}
        rm.partitions.update(parts)  # type: ignore[arg-type]
        futures: list[asyncio.Future] = []
        model: list[dict | None] = []  # per produce: {"pending": {tp: offset}, "out": {...}}; None once cancelled

        def model_check(m: dict, tp: TopicPartition) -> None:
            if tp in m["pending"]:
                state = parts[tp].acks_all_state(m["pending"][tp])
                if state is not None:
                    m["out"][tp] = state
                    del m["pending"][tp]

        for op in ops:
            kind = op[0]
            if kind == "produce":
                waits = list(dict((tps[i], off) for i, off in op[1]).items())
                futures.append(rm.acks_future(waits, 30, dict).future)
                m = {"pending": dict(waits), "out": {}}
                for tp in list(m["pending"]):
                    model_check(m, tp)
                model.append(m)
                continue
            if kind == "cancel":
                if op[1] < len(futures) and not futures[op[1]].done():
                    futures[op[1]].cancel()
                    model[op[1]] = None
                    await asyncio.sleep(0)  # the done-callback that unregisters it
                continue
            tp = tps[op[1]]
            p = parts[tp]
            if kind == "hw":
                p.high_watermark = max(p.high_watermark, op[2])
            elif kind == "role":
                p.leader = op[2]
            elif kind == "isr":
                p.isr_too_small = op[2]
                continue  # no visible change: nothing is asked
            if kind == "wake_all":
                rm.purgatory.wake_all(tp)
            else:
                rm.purgatory.visible_change(tp)
            for m in model:
                if m is not None and m["pending"]:
                    model_check(m, tp)
            for fut, m in zip(futures, model, strict=True):
                if m is None:
                    continue
                assert fut.done() == (not m["pending"]), (op, m)
                if fut.done():
                    assert fut.result() == m["out"]
        for fut in futures:
            fut.cancel()
        await asyncio.sleep(0)
        assert not rm.purgatory.visible_watchers

    asyncio.run(run())
