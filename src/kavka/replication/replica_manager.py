"""ReplicaManager: the partitions this broker hosts, their roles, and the waits on them.

It creates and removes Partition objects as the metadata image says (the
broker's metadata publisher calls `apply_partition` / `remove_partition`);
a partition whose leader is another broker is handed to the replica fetchers
(`fetchers`, set by the node), one this broker leads is taken from them.

The purgatory has two kinds of waits, both callbacks keyed by partition:
- *visible-change* waits -- consumer Fetch long-polls and acks=all produces --
  wake when a partition's high watermark moves or its role changes;
- *append* waits -- followers' Fetch long-polls -- wake on any append.
A callback runs once, at the change itself (Kafka's purgatory completes a
delayed operation in the thread that made it completable): it re-checks its
own condition and either completes its request's future or registers again
until its deadline. Completing a plain future, not resuming a task, keeps
the hops through the event loop's ready queue down to one per step of an
acks=all round trip (on a busy loop each hop waits for everything queued
before it).

ISR changes a leader wants (`IsrProposal`) are sent to the controller as
AlterPartition by one sender task, one request in flight at a time with every
queued partition in it (Kafka's AlterPartitionManager); a proposal whose
answer says "not applied" or "retry" is handled by the partition's
`LeaderState`, and the committed ISR comes back through the metadata log.

JBOD (KIP-112/113): partitions on a failed log dir are marked offline
(`mark_offline`, called by the broker's dir-failure listener);
`alter_replica_log_dir` starts a move between this broker's log dirs and
`swap_in_future` puts the caught-up copy in place between two requests.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

from kavka.controller.results import AlterPartitionItem
from kavka.delayed import Delayed
from kavka.replication.partition import Partition, TopicPartition
from kavka.replication.replica_state import IsrProposal, PartitionRegistration
from kavka.storage.errors import KafkaStorageError, LogDirNotFoundError
from kavka.storage.log import Log
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

log = logging.getLogger("kavka.replication")
T = TypeVar("T")

# AlterPartition answers: top-level error, and per (topic id, partition) (error, leader epoch, partition epoch).
AlterPartitionSender = Callable[
    [list[AlterPartitionItem]], Awaitable[tuple[ErrorCode, dict[tuple[str, int], tuple[ErrorCode, int, int]]]]
]


class FetcherManager(Protocol):
    def update(self, partition: Partition) -> None: ...
    def remove(self, tp: TopicPartition) -> None: ...


class ReplicaManager:
    def __init__(self, *, node_id: int, log_manager: LogManager, now_ms: Callable[[], int]) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self._hw_watchers: dict[TopicPartition, list[Callable[[], None]]] = {}
        self._append_watchers: dict[TopicPartition, list[Callable[[], None]]] = {}
        self._hw_checkpoint = log_manager.read_high_watermarks()
        self.fetchers: FetcherManager | None = None
        self.send_alter_partition: AlterPartitionSender | None = None
        self.broker_epochs: Callable[[], dict[int, int]] = dict  # broker id -> epoch, from the image
        self.alter_partition_retry_ms = 100
        self._isr_queue: dict[TopicPartition, IsrProposal] = {}
        self._isr_sender: asyncio.Task[None] | None = None
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.bytes_out: dict[str, int] = {}  # topic -> record bytes sent to consumers (BytesOutPerSec)

    # ------------------------------------------------------------ lifecycle

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, partition))

    def apply_partition(
        self,
        tp: TopicPartition,
        *,
        topic_id: str,
        registration: PartitionRegistration,
        config: LogConfig,
        min_insync_replicas: int,
    ) -> Partition | None:
        p = self.partitions.get(tp)
        if p is None:
            try:
                plog = self.log_manager.get_or_create_log(tp.topic, tp.partition, topic_id=topic_id, config=config)
            except KafkaStorageError as e:
                log.error("cannot host %s: %s", tp, e)
                return None
            p = Partition(
                tp,
                topic_id=topic_id,
                log=plog,
                local_broker_id=self.node_id,
                registration=registration,
                high_watermark=self._hw_checkpoint.get((tp.topic, tp.partition), 0),
                now_ms=self.now_ms(),
                min_insync_replicas=min_insync_replicas,
                on_storage_error=self.handle_storage_error,
                on_change=self._on_partition_change,
            )
            self.partitions[tp] = p
            role_changed = True
        else:
            old_isr = set(p.isr)
            role_changed = p.apply_registration(registration, now_ms=self.now_ms())
            if p.is_leader and not role_changed:  # IsrShrinksPerSec / IsrExpandsPerSec, counted by leaders
                new_isr = set(p.isr)
                self.isr_expands += new_isr > old_isr
                self.isr_shrinks += new_isr < old_isr
            p.min_insync_replicas = min_insync_replicas
            p.log.update_config(config)
            fut = self.log_manager.future_log((tp.topic, tp.partition))
            if fut is not None:
                fut.update_config(config)
        if role_changed:
            self._isr_queue.pop(tp, None)
            self._wake(self._append_watchers, tp)  # a waiting follower fetch answers NOT_LEADER now
        if self.fetchers is not None:
            self.fetchers.update(p)
        return p

    def update_config(self, tp: TopicPartition, config: LogConfig, min_insync_replicas: int) -> None:
        p = self.partitions.get(tp)
        if p is not None:
            p.log.update_config(config)
            p.min_insync_replicas = min_insync_replicas

    def remove_partition(self, tp: TopicPartition, *, delete: bool) -> None:
        p = self.partitions.pop(tp, None)
        self._isr_queue.pop(tp, None)
        if self.fetchers is not None:
            self.fetchers.remove(tp)
        self._wake(self._hw_watchers, tp)
        self._wake(self._append_watchers, tp)
        if p is not None and delete:
            self.log_manager.delete_log(tp.topic, tp.partition)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    # ------------------------------------------------------------ ISR changes (AlterPartition)

    def propose(self, partition: Partition, proposal: IsrProposal | None) -> None:
        """Queue a leader's ISR proposal for the AlterPartition sender."""
        if proposal is None:
            return
        old = partition.isr
        kind = "expand" if len(proposal.new_isr) > len(old) else "shrink"
        log.info("%s: proposing ISR %s -> %s (%s, leader epoch %d)", partition.tp, list(old), list(proposal.new_isr), kind,
                 proposal.leader_epoch)
        self._isr_queue[partition.tp] = proposal
        if self._isr_sender is None or self._isr_sender.done():
            self._isr_sender = asyncio.get_running_loop().create_task(self._send_isr_changes(), name="alter-partition")

    def shrink_isrs(self, *, replica_lag_time_max_ms: int) -> None:
        """Propose dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = self.now_ms()
        for p in self.leader_partitions():
            self.propose(p, p.maybe_shrink_isr(now_ms=now, replica_lag_time_max_ms=replica_lag_time_max_ms))

    async def _send_isr_changes(self) -> None:
        while self._isr_queue:
            batch = dict(self._isr_queue)
            self._isr_queue.clear()
            epochs = self.broker_epochs()
            sent: list[tuple[TopicPartition, IsrProposal, AlterPartitionItem]] = []
            for tp, prop in batch.items():
                p = self.partitions.get(tp)
                if p is None or p.leader_state is None or p.leader_state.pending != prop:
                    continue  # leadership moved or the proposal was settled meanwhile
                item = AlterPartitionItem(
                    p.topic_id, tp.partition, prop.leader_epoch, prop.partition_epoch,
                    tuple((b, epochs.get(b, -1)) for b in prop.new_isr),
                )
                sent.append((tp, prop, item))
            if not sent or self.send_alter_partition is None:
                continue
            retry: dict[TopicPartition, IsrProposal] = {}
            try:
                error, results = await self.send_alter_partition([item for _, _, item in sent])
            except Exception as e:  # no answer: its fate is unknown, so the proposal stays and is resent
                log.warning("AlterPartition for %d partitions got no answer (%s); retrying", len(sent), e)
                error, results = ErrorCode.request_timed_out, {}
            for tp, prop, item in sent:
                p = self.partitions.get(tp)
                ls = p.leader_state if p is not None else None
                if p is None or ls is None or ls.pending != prop:
                    continue  # settled by metadata while the request was out
                perr = error if error != ErrorCode.none else results.get((item.topic_id, item.partition), (ErrorCode.unknown_server_error, -1, -1))[0]
                if perr == ErrorCode.none:
                    continue  # committed: the registration arrives through the metadata log
                if ls.on_alter_partition_error(ErrorCode(perr)):
                    retry[tp] = prop
                else:
                    log.info("%s: AlterPartition %s answered %s", tp, list(prop.new_isr), ErrorCode(perr).name)
            if retry:
                await asyncio.sleep(self.alter_partition_retry_ms / 1000)
                for tp, prop in retry.items():
                    self._isr_queue.setdefault(tp, prop)

    # ------------------------------------------------------------ log dirs (KIP-112, KIP-113)

    def handle_storage_error(self, lg: Log, exc: OSError) -> None:
        self.log_manager.handle_io_error(lg.dir, exc)

    def mark_offline(self, tps: Iterable[tuple[str, int]]) -> None:
        """Replicas whose log dir failed: from now on they answer KAFKA_STORAGE_ERROR."""
        for topic, partition in tps:
            tp = TopicPartition(topic, partition)
            p = self.partitions.get(tp)
            if p is not None:
                p.offline = True
                if self.fetchers is not None:
                    self.fetchers.update(p)  # an offline replica is not fetched
            self._wake(self._hw_watchers, tp)
            self._wake(self._append_watchers, tp)

    def alter_replica_log_dir(self, tp: TopicPartition, path: str, *, now_ms: int) -> tuple[ErrorCode, bool]:
        """AlterReplicaLogDirs for one replica: (error, whether a mover must start)."""
        lm = self.log_manager
        key = (tp.topic, tp.partition)
        p = self.partitions.get(tp)
        try:
            if p is None:
                if lm.is_offline(*key):
                    return ErrorCode.kafka_storage_error, False
                # Kafka remembers the dir and uses it when the replica is created.
                lm.prefer_log_dir(key, Path(path))
                return ErrorCode.replica_not_available, False
            if p.offline:
                return ErrorCode.kafka_storage_error, False
            fut = lm.create_future_log(key, Path(path), now_ms=now_ms)
        except LogDirNotFoundError:
            return ErrorCode.log_dir_not_found, False
        except KafkaStorageError:
            return ErrorCode.kafka_storage_error, False
        return ErrorCode.none, fut is not None

    def swap_in_future(self, tp: TopicPartition, *, crash_point: Callable[[str], None]) -> Log:
        """The end of a move: the future log becomes the partition's log."""
        p = self.partitions[tp]
        new = self.log_manager.replace_current_with_future(
            (tp.topic, tp.partition), now_ms=self.now_ms(), crash_point=crash_point
        )
        p.log = new
        return new

    # ------------------------------------------------------------ purgatory

    @staticmethod
    def _wake(watchers: dict[TopicPartition, list[Callable[[], None]]], tp: TopicPartition) -> None:
        for callback in watchers.pop(tp, ()):
            try:
                callback()
            except Exception:  # one waiter's bug must not cost the others (or the append) their wake-up
                log.exception("a purgatory callback for %s failed", tp)

    def _on_partition_change(self, tp: TopicPartition) -> None:
        """A partition's high watermark or role changed: consumers and acks=all produces look again."""
        self._wake(self._hw_watchers, tp)

    def notify_append(self, tp: TopicPartition) -> None:
        if tp in self._append_watchers:
            self._wake(self._append_watchers, tp)

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float, *, follower: bool = False) -> None:
        """Return after a change to any of `tps`, or after `timeout_s`: for a follower an append,
        for anyone else a move of the high watermark (what makes records visible) or of the role."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        reg = self.on_change(tps, wake, follower=follower)
        timer = loop.call_later(max(timeout_s, 0.0), wake)
        try:
            await fut  # this wait's own future: a cancel of the waiting task cancels only it
        finally:
            timer.cancel()
            reg.cancel()

    def on_change(self, tps: Iterable[TopicPartition], callback: Callable[[], None], *, follower: bool = False) -> Registration:
        """Call `callback` once, at the next change to any of `tps` (as `wait_for_data`); the
        registration is dropped from the others then, or by `cancel()`."""
        return Registration(self._append_watchers if follower else self._hw_watchers, list(tps), callback)

    def acks_future(
        self, waits: list[tuple[TopicPartition, int]], timeout_s: float, finish: Callable[[dict[TopicPartition, ErrorCode]], T]
    ) -> DelayedProduce[T]:
        """acks=all (Kafka's DelayedProduce): answered with `finish(answers)` once each
        partition's high watermark reaches its required offset, or at the timeout. The answer per
        partition: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER (leadership
        moved), or REQUEST_TIMED_OUT. Checked at each change of a waiting partition, in the
        callback; cancelling its future (the connection closed) drops it from the purgatory."""
        return DelayedProduce(self, waits, timeout_s, finish)

    async def wait_for_acks(self, waits: list[tuple[TopicPartition, int]], timeout_s: float) -> dict[TopicPartition, ErrorCode]:
        """`acks_future` awaited: the answer per partition."""
        return await self.acks_future(waits, timeout_s, dict).future

    # ------------------------------------------------------------ checkpoints

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())


class DelayedProduce(Delayed[T]):
    """One acks=all wait (ReplicaManager.acks_future); it lets go of its registrations and
    request when it ends (kavka.delayed)."""

    __slots__ = ("_rm", "_out", "_pending", "_regs", "_finish")

    def __init__(
        self, rm: ReplicaManager, waits: list[tuple[TopicPartition, int]], timeout_s: float,
        finish: Callable[[dict[TopicPartition, ErrorCode]], T],
    ) -> None:
        super().__init__(timeout_s)
        self._rm: ReplicaManager | None = rm
        self._out: dict[TopicPartition, ErrorCode] = {}
        self._pending = dict(waits)
        self._regs: dict[TopicPartition, Registration] = {}
        self._finish: Callable[[dict[TopicPartition, ErrorCode]], T] | None = finish
        for tp in list(self._pending):
            self._check(tp)

    def _check(self, tp: TopicPartition) -> None:
        rm = self._rm
        if rm is None or tp not in self._pending:
            return
        p = rm.partitions.get(tp)
        state = ErrorCode.not_leader_or_follower if p is None else p.acks_all_state(self._pending[tp])
        if state is None:
            self._regs[tp] = rm.on_change([tp], functools.partial(self._check, tp))
            return
        self._out[tp] = state
        del self._pending[tp]
        if not self._pending:
            self._answer()

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
        self._finish = self._rm = None
        for reg in self._regs.values():
            reg.cancel()
        self._regs.clear()


class Registration:
    """`callback` registered on each of `keys` (ReplicaManager.on_change); it runs at most once."""

    def __init__(self, watchers: dict[TopicPartition, list[Callable[[], None]]], keys: list[TopicPartition], callback: Callable[[], None]) -> None:
        self._watchers = watchers
        self._keys = keys
        self._callback = callback
        for tp in keys:
            watchers.setdefault(tp, []).append(self._fire)

    def _fire(self) -> None:
        if not self._keys:
            return  # woken through a second partition in the same turn, or cancelled
        self.cancel()
        self._callback()

    def cancel(self) -> None:
        for tp in self._keys:
            lst = self._watchers.get(tp)
            if lst is None:
                continue  # woken: _wake took the list
            try:
                lst.remove(self._fire)
            except ValueError:
                pass
            if not lst:
                del self._watchers[tp]
        self._keys = []
