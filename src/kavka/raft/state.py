"""Epoch states of a raft voter (Kafka's QuorumState) as a transition table, and the quorum-state store.

Theory of operation (KIP-595 with KIP-996 pre-vote). A voter is in exactly
one state at a time, each tied to an epoch:

    Unattached  -- no leader known for this epoch; may have voted
    Prospective -- election timer fired; asking for pre-votes, epoch unchanged
    Candidate   -- a majority granted pre-votes; epoch+1, voted for itself
    Leader      -- a majority voted for it in this epoch
    Follower    -- fetching from the known leader of this epoch
    Resigned    -- a leader that lost its quorum or is shutting down

`TRANSITIONS` maps (from, to) to the epoch rule the move must obey; any move
not in the table is a bug and raises IllegalTransition. The durable part of
the state -- epoch, voted id, leader id -- is written to quorum-state (Kafka's
JSON, written atomically) before the move takes effect, so a restarted voter
never votes twice in one epoch nor goes back to an older epoch.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class EpochState(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


class EpochRule(enum.Enum):
    SAME = "same"  # the epoch does not change
    HIGHER = "higher"  # strictly higher epoch
    SAME_OR_HIGHER = "same-or-higher"
    NEXT = "next"  # exactly epoch + 1 (a candidate)


_S = EpochState
_R = EpochRule
TRANSITIONS: dict[tuple[EpochState, EpochState], EpochRule] = {
    (_S.UNATTACHED, _S.UNATTACHED): _R.HIGHER,
    (_S.UNATTACHED, _S.PROSPECTIVE): _R.SAME,
    (_S.UNATTACHED, _S.FOLLOWER): _R.SAME_OR_HIGHER,
    (_S.PROSPECTIVE, _S.PROSPECTIVE): _R.SAME,  # a new pre-vote round after a lost one
    (_S.PROSPECTIVE, _S.CANDIDATE): _R.NEXT,
    (_S.PROSPECTIVE, _S.FOLLOWER): _R.SAME_OR_HIGHER,
    (_S.PROSPECTIVE, _S.UNATTACHED): _R.HIGHER,
    (_S.CANDIDATE, _S.LEADER): _R.SAME,
    (_S.CANDIDATE, _S.PROSPECTIVE): _R.SAME,  # election lost or timed out (KIP-996)
    (_S.CANDIDATE, _S.FOLLOWER): _R.SAME_OR_HIGHER,
    (_S.CANDIDATE, _S.UNATTACHED): _R.HIGHER,
    (_S.LEADER, _S.RESIGNED): _R.SAME,
    (_S.LEADER, _S.UNATTACHED): _R.HIGHER,
    (_S.LEADER, _S.FOLLOWER): _R.HIGHER,
    (_S.FOLLOWER, _S.PROSPECTIVE): _R.SAME,  # fetch timeout
    (_S.FOLLOWER, _S.FOLLOWER): _R.HIGHER,
    (_S.FOLLOWER, _S.UNATTACHED): _R.SAME_OR_HIGHER,  # same: EndQuorumEpoch from our leader
    (_S.RESIGNED, _S.PROSPECTIVE): _R.SAME,
    (_S.RESIGNED, _S.UNATTACHED): _R.HIGHER,
    (_S.RESIGNED, _S.FOLLOWER): _R.HIGHER,
}


class IllegalTransition(RuntimeError):
    """A move the table does not allow: a bug in the raft core, never a peer's fault."""


def check_transition(src: EpochState, src_epoch: int, dst: EpochState, dst_epoch: int) -> None:
    rule = TRANSITIONS.get((src, dst))
    ok = rule is not None and (
        (rule is _R.SAME and dst_epoch == src_epoch)
        or (rule is _R.HIGHER and dst_epoch > src_epoch)
        or (rule is _R.SAME_OR_HIGHER and dst_epoch >= src_epoch)
        or (rule is _R.NEXT and dst_epoch == src_epoch + 1)
    )
    if not ok:
        raise IllegalTransition(f"{src.value}@{src_epoch} -> {dst.value}@{dst_epoch}")


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What quorum-state holds: Kafka's leaderEpoch, leaderId, votedId (-1 for none in the file)."""

    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """A store that survives a simulated crash (it stands for a file that is fsynced on every write)."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state


class FileQuorumStateStore:
    """<metadata.log.dir>/__cluster_metadata-0/quorum-state, Kafka's data_version 0 JSON, written atomically."""

    def __init__(self, path: Path, voters: tuple[int, ...]) -> None:
        self.path = path
        self.voters = voters

    def read(self) -> ElectionState | None:
        if not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text())
            leader = int(data["leaderId"])
            voted = int(data["votedId"])
            return ElectionState(
                epoch=int(data["leaderEpoch"]),
                leader_id=None if leader < 0 else leader,
                voted_id=None if voted < 0 else voted,
            )
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"corrupt quorum-state file {self.path}: {e}") from None

    def stored_voters(self) -> tuple[int, ...] | None:
        """The voter set the file was written with (None when there is no file)."""
        if not self.path.exists():
            return None
        try:
            return tuple(sorted(int(v["voterId"]) for v in json.loads(self.path.read_text())["currentVoters"]))
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"corrupt quorum-state file {self.path}: {e}") from None

    def write(self, state: ElectionState) -> None:
        data = {
            "clusterId": "",
            "leaderId": -1 if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": -1 if state.voted_id is None else state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in self.voters],
            "data_version": 0,
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(json.dumps(data).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
