"""The broker's AssignmentsManager (KIP-858): which replica-to-dir assignments it sends, that it
retries after errors, and the broker lifecycle's log.dir.failure.timeout.ms."""

import asyncio

from kio.schema.errors import ErrorCode

from kavka.broker import assignments as am
from kavka.broker.lifecycle import BrokerLifecycle
from kavka.common import DirectoryId
from kavka.controller import directories as dirs
from kavka.controller.quorum_controller import HeartbeatReply
from tests.unit.test_controller_directories import _apply, _assign, _cluster, _logic, _with_topic


def _image():
    logic = _logic()
    image = _with_topic(logic, _cluster(), "t", {0: [1, 2], 1: [2, 1], 2: [2, 3]})
    image, *_ = _assign(logic, image, 1, [("d1a", "t", 1)])
    return logic, image


def test_pending_assignments_are_the_replicas_recorded_elsewhere():
    _, image = _image()
    tid = image.topics_by_name["t"].topic_id
    placements = [("t", 0, "d1b"), ("t", 1, "d1a"), ("t", 2, "d1a"), ("gone", 0, "d1a")]
    # t-0 is UNASSIGNED in the record; t-1 already right; t-2 and "gone" are not broker 1's.
    assert am.pending_assignments(image, 1, placements) == [("d1b", tid, 0)]
    assert dirs.directory_of(image.topics_by_name["t"].partitions[0], 1) == DirectoryId.UNASSIGNED


def test_the_manager_retries_until_the_controller_records_the_dirs():
    logic, image = _image()
    state = {"image": image, "calls": 0}

    async def send(batch):
        state["calls"] += 1
        if state["calls"] == 1:
            raise TimeoutError("no controller")
        if state["calls"] == 2:
            return ErrorCode.not_controller, {}
        img = state["image"]
        recs, error, results = logic.replication.assign_replicas_to_dirs(
            img, broker_id=1, broker_epoch=img.brokers[1].epoch, assignments=batch
        )
        state["image"] = _apply(img, recs)
        return error, {(d, t, p): e for d, t, p, e in results}

    async def run():
        m = am.AssignmentsManager(
            send, broker_id=1, image=lambda: state["image"], placements=lambda: [("t", 0, "d1b"), ("t", 1, "d1b")]
        )
        m.start()
        m.maybe_kick()
        try:
            async with asyncio.timeout(10):
                while m.pending():
                    await asyncio.sleep(0.02)
        finally:
            await m.stop()
        return m

    m = asyncio.run(run())
    parts = state["image"].topics_by_name["t"].partitions
    assert dirs.directory_of(parts[0], 1) == "d1b" and dirs.directory_of(parts[1], 1) == "d1b"
    assert state["calls"] == 3 and m.sent == 2 and m.mismatching == 0


def _recording_controller(logic, state):
    async def send(batch):
        state["sent"].append(sorted(batch))
        img = state["image"]
        recs, error, results = logic.replication.assign_replicas_to_dirs(
            img, broker_id=1, broker_epoch=img.brokers[1].epoch, assignments=batch
        )
        state["image"] = _apply(img, recs)
        return error, {(d, t, p): e for d, t, p, e in results}

    return send


async def _until(condition, timeout_s=10):
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def test_a_kick_with_partitions_compares_those_replicas_only(monkeypatch):
    monkeypatch.setattr(am, "FULL_RECHECK_S", 1000.0)  # no full pass but the first one
    logic, image = _image()
    tid = image.topics_by_name["t"].topic_id
    state = {"image": image, "sent": []}
    where = {("t", 0): "d1a", ("t", 1): "d1a"}
    full_passes = []

    def placements():
        full_passes.append(1)
        return [(t, p, d) for (t, p), d in where.items()]

    async def run():
        m = am.AssignmentsManager(
            _recording_controller(logic, state), broker_id=1, image=lambda: state["image"],
            placements=placements, placement_of=lambda t, p: where.get((t, p)),
        )
        m.start()
        try:
            # The first pass compares every hosted replica: t-0 (UNASSIGNED in the record) is sent.
            await _until(lambda: state["sent"])
            # t-1 moves: a kick naming it sends it, without walking every replica again.
            where[("t", 1)] = "d1b"
            m.maybe_kick([("t", 1)])
            await _until(lambda: len(state["sent"]) == 2)
            # t-0 changes too, but nothing names it: no pass looks at it.
            where[("t", 0)] = "d1b"
            m.maybe_kick([("t", 1)])
            await asyncio.sleep(1.5)  # past RECHECK_S: a periodic pass ran and found nothing new
        finally:
            await m.stop()

    asyncio.run(run())
    assert state["sent"] == [[("d1a", tid, 0)], [("d1b", tid, 1)]]
    assert full_passes == [1]


def test_a_full_pass_finds_a_change_nothing_named(monkeypatch):
    monkeypatch.setattr(am, "FULL_RECHECK_S", 0.3)
    monkeypatch.setattr(am, "RECHECK_S", 0.1)
    logic, image = _image()
    tid = image.topics_by_name["t"].topic_id
    state = {"image": image, "sent": []}
    where = {("t", 1): "d1a"}

    async def run():
        m = am.AssignmentsManager(
            _recording_controller(logic, state), broker_id=1, image=lambda: state["image"],
            placements=lambda: [(t, p, d) for (t, p), d in where.items()], placement_of=lambda t, p: where.get((t, p)),
        )
        m.start()
        try:
            await asyncio.sleep(0.2)
            where[("t", 1)] = "d1b"  # moved, and no kick
            await _until(lambda: state["sent"])
        finally:
            await m.stop()

    asyncio.run(run())
    assert state["sent"] == [[("d1b", tid, 1)]]
    assert dirs.directory_of(state["image"].topics_by_name["t"].partitions[1], 1) == "d1b"


class _Controller:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.offline_seen: list[list[str]] = []

    async def broker_heartbeat(self, **kw):
        self.offline_seen.append(list(kw["offline_log_dirs"]))
        if not self.answer:
            raise TimeoutError("no controller")
        return HeartbeatReply(ErrorCode.none, is_caught_up=True, is_fenced=False)


def _lifecycle(controller, fatal):
    async def register(_incarnation):
        return 5

    return BrokerLifecycle(
        controller, broker_id=1, heartbeat_interval_ms=50, metadata_offset=lambda: 10, register=register,
        dir_failure_timeout_ms=300, on_fatal=fatal.append,
    )


def test_a_failed_dir_is_reported_at_once_and_then_in_every_heartbeat():
    async def run():
        c, fatal = _Controller(answer=True), []
        lc = _lifecycle(c, fatal)
        await lc.register()
        lc.start()
        lc.propagate_dir_failure("dirX")
        async with asyncio.timeout(5):
            while "dirX" not in lc.acked_offline_dirs:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # past the timeout: acknowledged, so no shutdown
        await lc.stop()
        return c, fatal

    c, fatal = asyncio.run(run())
    # Every heartbeat names it (the controller acts once; the repeats are how a new one learns it).
    assert fatal == [] and len(c.offline_seen) >= 3 and all(x == ["dirX"] for x in c.offline_seen)


def test_a_failed_dir_the_controller_never_hears_of_shuts_the_broker_down():
    async def run():
        c, fatal = _Controller(answer=False), []
        lc = _lifecycle(c, fatal)
        await lc.register()
        lc.start()
        lc.propagate_dir_failure("dirX")
        async with asyncio.timeout(5):
            while not fatal:
                await asyncio.sleep(0.01)
        await lc.stop()
        return fatal

    fatal = asyncio.run(run())
    assert "dirX" in fatal[0] and "log.dir.failure.timeout.ms=300" in fatal[0]
