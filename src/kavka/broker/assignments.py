"""AssignmentsManager: tells the controller which log dir holds each replica (KIP-858).

The broker is the authority on directories: the controller's partition records say what it last
heard (UNASSIGNED for a new replica on a broker with several dirs), and this manager sends
AssignReplicasToDirs (API 73) until they say where the replicas really are. It works by
reconciliation rather than by remembering events: each pass compares, for every replica this broker
hosts in an online dir, the directory id in the metadata image with the id of the dir the
LogManager has it in, and sends the differences. So a new replica is reported once it exists, a
replica moved between dirs (AlterReplicaLogDirs) once the future copy caught up and was swapped in
(never before: until then the current copy is where the data is), and a lost or refused request is
simply sent again on the next pass. Replicas in an offline dir are left out: heartbeats report the
dir itself (BrokerHeartbeat OfflineLogDirs).

- A pass runs after every metadata change and every `RECHECK_S` otherwise, batching at most
  `MAX_BATCH` replicas per request (Kafka's AssignmentsManager batch limit); after an error the next
  pass waits with an exponential backoff up to `MAX_BACKOFF_S`.
- A pass after a metadata change looks at the replicas that change created or updated
  (`maybe_kick(partitions)`, given `placement_of`); every hosted replica is compared every
  `FULL_RECHECK_S`, after an error, and when kicked without partitions. A full pass walks every log
  of the broker: once a second and after every delta it was a fifth of a cluster node's event loop
  with 10,000-13,000 logs, each CreateTopics of 2,000 partitions waiting on that loop.
- `mismatching` (the gauge kafka.server:type=KafkaServer,name=NumMismatchingReplicaToLogDirAssignments)
  is the count of hosted replicas whose recorded directory differs from the actual one.

Runs on the event loop; `pending_assignments` is pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from kio.schema.errors import ErrorCode

from kavka.controller import directories
from kavka.metadata.image import MetadataImage

log = logging.getLogger("kavka.broker")

MAX_BATCH = 2250
RECHECK_S = 1.0
FULL_RECHECK_S = 10.0
MAX_BACKOFF_S = 10.0

# (directory id, topic id, partition)
Assignment = tuple[str, str, int]


def pending_assignments(
    image: MetadataImage, broker_id: int, placements: Iterable[tuple[str, int, str]]
) -> list[Assignment]:
    """The assignments the controller has wrong: `placements` is (topic name, partition, actual dir
    id) of each replica this broker hosts in an online dir."""
    out: list[Assignment] = []
    for topic, partition, dir_id in placements:
        t = image.topics_by_name.get(topic)
        reg = t.partitions.get(partition) if t is not None else None
        if t is None or reg is None or broker_id not in reg.replicas:
            continue  # being deleted or moved away from this broker: not ours to report
        if directories.directory_of(reg, broker_id) != dir_id:
            out.append((dir_id, t.topic_id, partition))
    return out


class AssignmentsManager:
    def __init__(
        self,
        send: Callable[[list[Assignment]], Awaitable[tuple[ErrorCode, dict[Assignment, ErrorCode]]]],
        *,
        broker_id: int,
        image: Callable[[], MetadataImage],
        placements: Callable[[], Iterable[tuple[str, int, str]]],
        ready: Callable[[], bool] = lambda: True,
        placement_of: Callable[[str, int], str | None] | None = None,
    ) -> None:
        self._send = send
        self.broker_id = broker_id
        self._image = image
        self._placements = placements
        # (topic, partition) -> the id of the online dir holding it, None if not hosted in one.
        self._placement_of = placement_of
        self._dirty: set[tuple[str, int]] = set()  # to compare at the next pass
        self._full = True  # the next pass compares every hosted replica
        self._last_full = float("-inf")
        self._ready = ready  # registered (a broker epoch to send)
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.mismatching = 0
        self.sent = 0  # assignments the controller accepted

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="assignments-manager")

    def maybe_kick(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Something changed (a metadata delta, a replica created or moved): check soon --
        `partitions` (topic, partition) only if given, else every hosted replica."""
        if partitions is None or self._placement_of is None:
            self._full = True
        else:
            self._dirty.update(partitions)
        self._kick.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def pending(self) -> list[Assignment]:
        todo = pending_assignments(self._image(), self.broker_id, self._placements())
        self.mismatching = len(todo)
        return todo

    def _pending_now(self, now: float) -> list[Assignment]:
        """A pass: every hosted replica when due, else the ones marked since the last pass."""
        if self._full or self._placement_of is None or now - self._last_full >= FULL_RECHECK_S:
            self._full, self._last_full = False, now
            self._dirty.clear()
            return self.pending()
        dirty, self._dirty = self._dirty, set()
        where = self._placement_of
        placements = [(t, p, d) for t, p in dirty if (d := where(t, p)) is not None]
        return pending_assignments(self._image(), self.broker_id, placements)

    async def _run(self) -> None:
        backoff = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(backoff, RECHECK_S)):
                    await self._kick.wait()
            self._kick.clear()
            if not self._ready():
                continue
            todo = self._pending_now(asyncio.get_running_loop().time())
            if not todo:
                backoff = 0.0
                continue
            ok = await self._send_batch(todo[:MAX_BATCH])
            backoff = 0.0 if ok else min(MAX_BACKOFF_S, max(0.2, backoff * 2))
            if not ok:
                self._full = True  # the batch again, after the backoff
            elif len(todo) > MAX_BATCH:
                self.maybe_kick()  # the rest, now

    async def _send_batch(self, batch: list[Assignment]) -> bool:
        try:
            error, results = await self._send(batch)
        except Exception as e:  # noqa: BLE001 -- retried on the next pass
            log.debug("AssignReplicasToDirs not answered: %s", e)
            return False
        if error != ErrorCode.none:
            log.warning("AssignReplicasToDirs: the controller answered %s; retrying", ErrorCode(error).name)
            return False
        failed = {a: e for a, e in results.items() if e != ErrorCode.none}
        if failed:
            self._full = True  # refused ones are compared (and sent) again at the next pass
        self.sent += len(batch) - len(failed)
        for (d, t, p), e in failed.items():
            log.info("AssignReplicasToDirs for partition %d of topic id %s in dir %s: %s", p, t, d, ErrorCode(e).name)
        log.debug("assigned %d replicas to their log dirs", len(batch) - len(failed))
        return True

