"""KRaft's control records in the metadata log and its snapshots (Kafka's ControlRecordType,
ControlRecordUtils), as (key, value) pairs for a control batch.

Every control record's key is ControlRecordType's: int16 version 0, int16 type. The values:
- LEADER_CHANGE (2): LeaderChangeMessage v0 (flexible): int16 Version 0, int32 LeaderId,
  compact arrays Voters and GrantingVoters of {int32 VoterId}, tagged fields. A new leader
  writes it as the first record of its epoch (KIP-595); Kafka's readers (KafkaRaftClient,
  kafka-dump-log.sh --cluster-metadata-decoder) parse it, so a null key or value breaks them.
- SNAPSHOT_HEADER (3): SnapshotHeaderRecord v0: int16 Version 0, int64
  LastContainedLogTimestamp, tagged fields.
- SNAPSHOT_FOOTER (4): SnapshotFooterRecord v0: int16 Version 0, tagged fields.
- KRAFT_VERSION (5) and VOTERS (6): KIP-853's KRaftVersionRecord and VotersRecord, encoded and
  read by kavka.raft.voters.

kavka's raft core never reads a LeaderChange record's value back (the epoch and leader are in
quorum-state), and logs written before kavka wrote it (a null key and value) still load.
Pure functions; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32

from kavka.protocol.framing import encode_entity

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5  # KRaftVersionRecord (KIP-853: kavka.raft.voters)
VOTERS = 6  # VotersRecord (ControlRecordType.KRAFT_VOTERS)
CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version, type

Record = tuple[bytes | None, bytes | None]


def control_key(kind: int) -> bytes:
    return CONTROL_KEY.pack(0, kind)


def control_type(key: bytes | None) -> int | None:
    """The type in a control record's key; None for a key too short to hold one."""
    if key is None or len(key) < CONTROL_KEY.size:
        return None
    return CONTROL_KEY.unpack_from(key)[1]


def leader_change(leader_id: int, voters: Iterable[int], granting_voters: Iterable[int]) -> Record:
    """The LeaderChange record a leader writes at the start of its epoch."""
    message = LeaderChangeMessage(
        version=i16(0),
        leader_id=BrokerId(leader_id),
        voters=tuple(Voter(voter_id=i32(v)) for v in sorted(voters)),
        granting_voters=tuple(Voter(voter_id=i32(v)) for v in sorted(granting_voters)),
    )
    return control_key(LEADER_CHANGE), encode_entity(message)
