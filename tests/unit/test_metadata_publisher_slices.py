"""The broker's metadata publisher applies a large delta in slices, and what runs between them.

Issue 32 item 8: on a 3-node cluster, each CreateTopics of 2,000 partitions took 8-27 s once
about 30,000 partitions existed. Each node applied the previous delta in 50 ms slices, yielding
once between two; a raft exchange takes several turns of the event loop (the frame read, the
driver's inbox, its poll and answer), and each turn waited for the next slice. These tests pin
down that such a chain of turns completes between two slices, and that the replicas a delta
creates here, not every hosted one, are what the AssignmentsManager is asked to compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace
from typing import Any

import pytest
import uvloop

from kavka.broker.metadata_publisher import BrokerMetadataPublisher
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.records import PartitionRecord, TopicRecord

TURNS = 3  # loop turns of one raft exchange on a node: frame read -> driver inbox -> poll


class _Logs:
    @staticmethod
    def placement_batch(*, background: bool = False) -> contextlib.nullcontext:
        return contextlib.nullcontext()

    @staticmethod
    def get_log(topic: str, partition: int) -> None:
        return None


class _SlowReplicas:
    """Creating a replica costs a millisecond of the event loop's time, as a log creation does."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, int]] = []
        self.removed: list[tuple[str, int]] = []

    def apply_partition(self, tp: Any, **_: Any) -> None:
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass
        self.applied.append((tp.topic, tp.partition))

    def remove_partition(self, tp: Any, *, delete: bool) -> None:
        self.removed.append((tp.topic, tp.partition))


class _Resolver:
    @staticmethod
    def log_config(image: MetadataImage, topic: str) -> None:
        return None

    @staticmethod
    def topic(image: MetadataImage, topic: str, key: str) -> Any:
        return SimpleNamespace(value=1)


def _delta(partitions: int, replicas: tuple[int, ...] = (1,)) -> tuple[MetadataDelta, MetadataImage]:
    delta = MetadataDelta(MetadataImage())
    delta.replay(TopicRecord("t", "tid"), 0)
    for p in range(partitions):
        delta.replay(PartitionRecord("tid", p, replicas, replicas, replicas[0]), p + 1)
    return delta, delta.apply()


def _publisher(rm: _SlowReplicas) -> BrokerMetadataPublisher:
    return BrokerMetadataPublisher(
        node_id=1, replica_manager=rm, log_manager=_Logs(), resolver=_Resolver(),  # type: ignore[arg-type]
        online_dir_ids=list,
    )


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}  # the broker runs uvloop


def _slices_per_exchange(monkeypatch: pytest.MonkeyPatch, yields: int, loop: str) -> list[int]:
    """Slices that ran while each of a series of raft-like exchanges (TURNS loop turns) went on."""
    monkeypatch.setattr(BrokerMetadataPublisher, "SLICE_S", 0.005)
    monkeypatch.setattr(BrokerMetadataPublisher, "YIELDS", yields)
    rm = _SlowReplicas()
    publisher = _publisher(rm)
    slices = [0]
    run_slice = publisher._run_slice

    def counting(**kw: bool) -> float:
        slices[0] += 1
        return run_slice(**kw)

    monkeypatch.setattr(publisher, "_run_slice", counting)

    async def main() -> list[int]:
        delta, image = _delta(300)
        publisher.publish(delta, image)
        waited = []
        async with asyncio.timeout(60):
            while publisher._queue:
                before = slices[0]
                for _ in range(TURNS):
                    await asyncio.sleep(0)
                waited.append(slices[0] - before)
            await publisher.published()
        assert len(rm.applied) == 300
        return waited

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        waited = runner.run(main())
    assert len(waited) >= 5  # the delta took many slices: the exchanges ran while it applied
    return waited


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_raft_exchange_completes_between_two_slices(monkeypatch: pytest.MonkeyPatch, loop: str) -> None:
    assert max(_slices_per_exchange(monkeypatch, BrokerMetadataPublisher.YIELDS, loop)) <= 1


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_with_one_yield_each_turn_of_an_exchange_waited_for_a_slice(monkeypatch: pytest.MonkeyPatch, loop: str) -> None:
    """The behaviour before: what the test above would see if the publisher yielded once."""
    assert max(_slices_per_exchange(monkeypatch, 1, loop)) >= TURNS - 1


def test_the_assignments_manager_is_asked_about_the_replicas_created_here_only() -> None:
    rm = _SlowReplicas()
    publisher = _publisher(rm)
    kicks: list[Any] = []
    publisher.assignments = SimpleNamespace(maybe_kick=kicks.append)  # type: ignore[assignment]

    async def main() -> None:
        delta = MetadataDelta(MetadataImage())
        delta.replay(TopicRecord("t", "tid"), 0)
        for p in range(4):
            replicas = (1,) if p % 2 == 0 else (2,)
            delta.replay(PartitionRecord("tid", p, replicas, replicas, replicas[0]), p + 1)
        publisher.publish(delta, delta.apply())
        await publisher.published()

    asyncio.run(main())
    assert kicks == [[("t", 0), ("t", 2)]]
    assert rm.applied == [("t", 0), ("t", 2)]
