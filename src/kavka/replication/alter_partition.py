"""AlterPartitionManager: a leader's ISR proposals, sent to the controller as AlterPartition.

Kafka's AlterPartitionManager. A leader that wants its ISR changed (`IsrProposal`, from
`LeaderState`: a caught-up eligible follower to add, a lagging one to drop) submits it here;
one sender task keeps one AlterPartition request in flight at a time, carrying every queued
partition. A proposal the controller answers "not applied" or "retry" is handed back to the
partition's `LeaderState` (`on_alter_partition_error`), which says whether to send it again; a
committed change comes back through the metadata log as the partition's new registration, which
settles the proposal. A proposal whose partition lost its leadership (or was settled by metadata
meanwhile) is dropped unsent.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from kavka.common import ErrorCode, TopicPartition
from kavka.replication.partition import Partition
from kavka.replication.replica_state import IsrProposal

log = logging.getLogger("kavka.replication")


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request: the ISR its leader wants, and what it saw."""

    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch or -1)

# AlterPartition answers: top-level error, and per (topic id, partition) (error, leader epoch, partition epoch).
AlterPartitionSender = Callable[
    [list[AlterPartitionItem]], Awaitable[tuple[ErrorCode, dict[tuple[str, int], tuple[ErrorCode, int, int]]]]
]


class AlterPartitionManager:
    def __init__(self, partitions: Mapping[TopicPartition, Partition]) -> None:
        self._partitions = partitions
        self.send: AlterPartitionSender | None = None  # set by the node: an RPC to the active controller
        self.broker_epochs: Callable[[], Mapping[int, int]] = dict  # broker id -> epoch, from the image
        self.retry_ms = 100
        self._queue: dict[TopicPartition, IsrProposal] = {}
        self._sender: asyncio.Task[None] | None = None

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        old = partition.isr
        kind = "expand" if len(proposal.new_isr) > len(old) else "shrink"
        log.info("%s: proposing ISR %s -> %s (%s, leader epoch %d)", partition.tp, list(old), list(proposal.new_isr), kind,
                 proposal.leader_epoch)
        self._queue[partition.tp] = proposal
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_all(), name="alter-partition")

    def forget(self, tp: TopicPartition) -> None:
        """The partition's role changed or it is gone: its queued proposal is void."""
        self._queue.pop(tp, None)

    def _pending(self, tp: TopicPartition, prop: IsrProposal) -> Partition | None:
        """The partition, if `prop` is still its leader's open proposal."""
        p = self._partitions.get(tp)
        if p is None or p.leader_state is None or p.leader_state.pending != prop:
            return None  # leadership moved or the proposal was settled meanwhile
        return p

    async def _send_all(self) -> None:
        while self._queue:
            batch = dict(self._queue)
            self._queue.clear()
            epochs = self.broker_epochs()
            sent: list[tuple[TopicPartition, IsrProposal, AlterPartitionItem]] = []
            for tp, prop in batch.items():
                p = self._pending(tp, prop)
                if p is None:
                    continue
                item = AlterPartitionItem(
                    p.topic_id, tp.partition, prop.leader_epoch, prop.partition_epoch,
                    tuple((b, epochs.get(b, -1)) for b in prop.new_isr),
                )
                sent.append((tp, prop, item))
            if not sent or self.send is None:
                continue
            retry: dict[TopicPartition, IsrProposal] = {}
            try:
                error, results = await self.send([item for _, _, item in sent])
            except Exception as e:  # no answer: its fate is unknown, so the proposal stays and is resent
                log.warning("AlterPartition for %d partitions got no answer (%s); retrying", len(sent), e)
                error, results = ErrorCode.request_timed_out, {}
            for tp, prop, item in sent:
                p = self._pending(tp, prop)
                if p is None or p.leader_state is None:
                    continue  # settled by metadata while the request was out
                perr = error if error != ErrorCode.none else results.get((item.topic_id, item.partition), (ErrorCode.unknown_server_error, -1, -1))[0]
                if perr == ErrorCode.none:
                    continue  # committed: the registration arrives through the metadata log
                if p.leader_state.on_alter_partition_error(ErrorCode(perr)):
                    retry[tp] = prop
                else:
                    log.info("%s: AlterPartition %s answered %s", tp, list(prop.new_isr), ErrorCode(perr).name)
            if retry:
                await asyncio.sleep(self.retry_ms / 1000)
                for tp, prop in retry.items():
                    self._queue.setdefault(tp, prop)
