"""The metadata quorum as the controller sees it: a small Protocol and its value types.

`RaftClient` (raft/client.py) implements it for any number of voters; the
node drives it through `QuorumController` (controller/quorum_controller.py). A
listener has the shape of Kafka's `RaftClient.Listener`: committed batches are
handed over in log order, once each per process lifetime (a restarted node
replays from the latest snapshot, `handle_load_snapshot`, then from the
snapshot's end offset), never beyond the high watermark.

Called only from the thread that drives the quorum (the event loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kavka.raft.voters import VoterSet


class NotLeaderError(Exception):
    """append() on a node that is not the leader of its current epoch (NOT_LEADER_OR_FOLLOWER)."""


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch naming a snapshot: records below `end_offset`, last one written in `epoch`."""

    end_offset: int
    epoch: int


class RaftListener(Protocol):
    def handle_commit(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes | None, bytes | None]]
    ) -> None: ...

    def handle_load_snapshot(
        self, snapshot_id: SnapshotId, records: Iterable[tuple[bytes | None, bytes | None]]
    ) -> None: ...

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None: ...


@runtime_checkable
class MetadataQuorum(Protocol):
    def leader_and_epoch(self) -> LeaderAndEpoch: ...

    def append(self, records: Sequence[tuple[bytes | None, bytes | None]], *, now_ms: int) -> int:
        """Append one batch as leader; return its last offset. Raises NotLeaderError."""
        ...

    @property
    def high_watermark(self) -> int: ...

    def register_listener(self, listener: RaftListener) -> None: ...

    def prepare_snapshot(self, end_offset: int) -> SnapshotId | None:
        """Name a snapshot of the committed records below `end_offset` (None: not newer)."""
        ...

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        """The prepared snapshot is written (raft/snapshot.py format) and durable."""
        ...

    def voter_set_at(self, end_offset: int) -> VoterSet | None:
        """KIP-853: the voter set a snapshot ending at `end_offset` holds (None: a static quorum)."""
        ...
