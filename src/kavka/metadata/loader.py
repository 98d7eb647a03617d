"""MetadataLoader: committed metadata records -> the node's MetadataImage, published after each poll.

Kafka's MetadataLoader (metadata/.../image/loader/MetadataLoader.java) with its SnapshotGenerator.
Every node has one, whatever its `process.roles`: it is a listener of the raft client, so the
committed records of `__cluster_metadata` arrive here (`handle_commit`, or a whole snapshot in
`handle_load_snapshot`, at start or when a follower fetched one), are replayed into one
MetadataDelta, and after each raft poll (`after_poll`, called by the raft driver) the delta becomes
the new image and every publisher (`add_publisher`) is handed (delta, image), in the order they
were added. At startup the whole committed log arrives in one poll and is published as one delta.
The broker's publishers (broker.metadata_publisher) make the local replicas, the group
coordinator, tiered storage and the quotas follow it; the QuorumController decides on `image` and
completes its operations once `applied_offset` passes their records.

Snapshots (Kafka's SnapshotGenerator, on every node): once
`metadata.log.max.record.bytes.between.snapshots` bytes of records were committed since the last
snapshot (or `metadata.log.max.snapshot.interval.ms` passed with any), `after_poll` names the
snapshot in raft and hands `write_snapshot` a function that serialises the published image
(metadata.snapshot); the image is immutable, so the driver runs it, the encoding and the write on
a worker thread (10,000 partitions take about half a second to serialise), then freezes the
snapshot in raft. One at a time.

Runs on the event-loop thread (the raft driver's); the clock is injected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from kavka.raft import snapshot as raft_snapshot
from kavka.raft.api import SnapshotId
from kavka.raft.client import RaftClient

log = logging.getLogger("kavka.metadata")

Publisher = Callable[[MetadataDelta, MetadataImage], None]
Record = tuple[bytes | None, bytes | None]
# write_snapshot(snapshot_id, make_records, done): make_records() (any thread) gives the records;
# write and freeze them, then call done(snapshot_id, ok).
SnapshotWriter = Callable[
    [SnapshotId, Callable[[], list[Record]], Callable[[SnapshotId, bool], None]], None
]


class MetadataLoader:
    def __init__(
        self,
        raft: RaftClient,
        *,
        snapshot_bytes: int,
        snapshot_interval_ms: int,
        clock: Callable[[], float] = time.time,
        write_snapshot: SnapshotWriter | None = None,
    ) -> None:
        self.raft = raft
        self._clock = clock
        self.image = MetadataImage()
        self._publishers: list[Publisher] = []
        self._delta: MetadataDelta | None = None
        self._applied = -1  # last committed offset replayed into the image or the pending delta
        self._changed: asyncio.Event | None = None
        self._write_snapshot = write_snapshot or self._write_snapshot_inline
        self._snapshot_bytes = snapshot_bytes
        self._snapshot_interval_ms = snapshot_interval_ms
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = self._now_ms()
        self._snapshot_in_flight: SnapshotId | None = None
        raft.register_listener(self)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def add_publisher(self, publisher: Publisher) -> None:
        self._publishers.append(publisher)

    @property
    def applied_offset(self) -> int:
        """The last committed offset replayed (published at the end of the current poll)."""
        return self._applied

    # ---- raft listener ---------------------------------------------------------------------

    def handle_commit(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes | None, bytes | None]]
    ) -> None:
        if self._delta is None:
            self._delta = MetadataDelta(self.image)
        for offset, key, value in records:
            self._delta.replay(mr.decode(key, value), offset)
            self._applied = offset
            # Kafka counts batch bytes; key + value is close enough to pace snapshots.
            self._bytes_since_snapshot += len(key or b"") + len(value or b"")

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: Iterable[Record]) -> None:
        started = time.monotonic()
        old = self.image
        delta = MetadataDelta(MetadataImage())
        last = snapshot_id.end_offset - 1
        count = 0
        for key, value in records:
            delta.replay(mr.decode(key, value), last)
            count += 1
        delta.offset = last
        # Topics the old image had and the snapshot has not were deleted meanwhile.
        for topic_id, topic in old.topics_by_id.items():
            if topic_id not in delta.topics:
                delta.deleted_topics[topic_id] = topic
        self._delta = delta  # supersedes anything replayed but not yet published
        self._applied = last
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = self._now_ms()
        log.info(
            "loaded metadata snapshot %s (%d records) in %.3fs",
            raft_snapshot.file_name(snapshot_id)[: -len(raft_snapshot.SUFFIX)],
            count,
            time.monotonic() - started,
        )

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self._signal()

    def after_poll(self) -> None:
        """Publish what the last poll committed; maybe start a snapshot."""
        if self._delta is not None:
            delta, self._delta = self._delta, None
            self.image = delta.apply()
            for publisher in self._publishers:
                publisher(delta, self.image)
        self._maybe_snapshot()
        self._signal()

    # ---- readiness -------------------------------------------------------------------------

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `condition()` holds after some poll; False at the deadline."""
        if self._changed is None:
            self._changed = asyncio.Event()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            left = deadline - loop.time()
            if left <= 0:
                return False
            self._changed.clear()
            try:
                async with asyncio.timeout(min(left, 0.5)):  # not wait_for: 3.11's can lose a cancel
                    await self._changed.wait()
            except TimeoutError:
                pass
        return True

    # ---- snapshots (Kafka's SnapshotGenerator) ---------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self._snapshot_in_flight is not None or self._bytes_since_snapshot == 0:
            return
        if self._applied + 1 > self.raft.high_watermark:
            return  # not yet known committed here (a restart learns the high watermark late)
        now = self._now_ms()
        due = self._bytes_since_snapshot >= self._snapshot_bytes or (
            self._snapshot_interval_ms > 0 and now - self._last_snapshot_ms >= self._snapshot_interval_ms
        )
        if not due:
            return
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now
        sid = self.raft.prepare_snapshot(self._applied + 1)
        if sid is None:
            return
        image = self.image  # immutable: safe to serialise on another thread

        def make_records() -> list[Record]:
            return [mr.encode(r) for r in image_records(image)]

        self._snapshot_in_flight = sid
        self._write_snapshot(sid, make_records, self._snapshot_done)

    def _snapshot_done(self, snapshot_id: SnapshotId, ok: bool) -> None:
        if self._snapshot_in_flight == snapshot_id:
            self._snapshot_in_flight = None
        if ok:
            log.info("wrote metadata snapshot %s", raft_snapshot.file_name(snapshot_id))

    def _write_snapshot_inline(
        self,
        snapshot_id: SnapshotId,
        make_records: Callable[[], list[Record]],
        done: Callable[[SnapshotId, bool], None],
    ) -> None:
        """Without a driver (tests): serialise, encode, write and freeze right here."""
        last_timestamp = raft_snapshot.last_contained_timestamp(self.raft.log, snapshot_id)
        voters = self.raft.voter_set_at(snapshot_id.end_offset)
        self.raft.log.write_snapshot(
            snapshot_id,
            raft_snapshot.encode(snapshot_id, make_records(), last_contained_timestamp_ms=last_timestamp, voters=voters),
        )
        self.raft.snapshot_frozen(snapshot_id)
        done(snapshot_id, True)
