"""The voter set of a dynamic quorum (KIP-853) and its control records.

Format (Kafka's ControlRecordType and its JSON schemas): a control record's key is
int16 version 0, int16 type; its value the flexible message (kio's entity):
- KRaftVersionRecord (type 5): Version 0, KRaftVersion (1: the voter set is in the log);
- VotersRecord (type 6): Version 0, Voters [VoterId, VoterDirectoryId, Endpoints
  [Name, Host, Port], KRaftVersionFeature {Min,MaxSupportedVersion}].
The LeaderChange record kavka writes at the start of every epoch has no key.

Invariants (KIP-853, the raft core keeps them): a replica's identity is its node
id *and* the directory id of its metadata log dir (a voter whose disk was wiped
comes back with a new directory id and is not the voter any more); the voter set
in force is the latest VotersRecord in the log, committed or not (else the one
of the latest snapshot, else the bootstrap checkpoint's); two voter sets in the
log differ by at most one voter, and at most one VotersRecord is uncommitted.

Pure values and functions; any thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.static.primitive import i16, i32, u16

from kavka.protocol.framing import decode_body, encode_entity
from kavka.protocol.messages import uuid_from_str, uuid_to_str
from kavka.raft.control_records import KRAFT_VERSION, VOTERS, control_key, control_type

# The kraft.version feature levels kavka supports (0: static controller.quorum.voters; 1: KIP-853).
SUPPORTED_KRAFT_VERSIONS = (0, 1)


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    name: str  # the controller listener's name
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    """One voter: Kafka's ReplicaKey (id, directory id) and where it listens."""

    node_id: int
    directory_id: str | None  # base64url Uuid as in meta.properties; None: any (kraft.version 0)
    endpoints: tuple[VoterEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class VoterSet:
    voters: tuple[VoterNode, ...]  # sorted by node id

    @staticmethod
    def of(nodes: list[VoterNode] | tuple[VoterNode, ...]) -> VoterSet:
        ids = [n.node_id for n in nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a voter set names a node twice: {sorted(ids)}")
        return VoterSet(tuple(sorted(nodes, key=lambda n: n.node_id)))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(n.node_id for n in self.voters)

    def get(self, node_id: int) -> VoterNode | None:
        return next((n for n in self.voters if n.node_id == node_id), None)

    def needs_update(self, me: VoterNode) -> bool:
        """Kafka's VoterSet.voterNodeNeedsUpdate: `me` is a voter here (same id and directory id)
        listed with other endpoints than its own (it restarted on another controller-listener
        address), so it asks the leader to update them (UpdateRaftVoter)."""
        n = self.get(me.node_id)
        return (
            n is not None and n.directory_id is not None and n.directory_id == me.directory_id
            and set(n.endpoints) != set(me.endpoints)
        )

    def contains(self, node_id: int, directory_id: str | None) -> bool:
        """Is (node_id, directory_id) a voter? A voter listed without a directory id matches any."""
        n = self.get(node_id)
        return n is not None and (n.directory_id is None or n.directory_id == directory_id)

    def with_voter(self, node: VoterNode) -> VoterSet:
        return VoterSet.of([*self.voters, node])

    def without(self, node_id: int) -> VoterSet:
        return VoterSet(tuple(n for n in self.voters if n.node_id != node_id))


def _uuid_from(directory_id: str | None) -> uuid.UUID | None:
    return uuid_from_str(directory_id) if directory_id else None


def _uuid_str(value: uuid.UUID | None) -> str | None:
    return None if value is None or value.int == 0 else uuid_to_str(value)


def encode_voters(voters: VoterSet) -> tuple[bytes, bytes]:
    """A VotersRecord control record (key, value)."""
    record = VotersRecord(
        version=i16(0),
        voters=tuple(
            Voter(
                voter_id=i32(n.node_id),
                voter_directory_id=_uuid_from(n.directory_id),
                endpoints=tuple(
                    Endpoint(name=e.name, host=e.host, port=u16(e.port)) for e in n.endpoints
                ),
                k_raft_version_feature=KRaftVersionFeature(
                    min_supported_version=i16(SUPPORTED_KRAFT_VERSIONS[0]),
                    max_supported_version=i16(SUPPORTED_KRAFT_VERSIONS[-1]),
                ),
            )
            for n in voters.voters
        ),
    )
    return control_key(VOTERS), encode_entity(record)


def encode_kraft_version(level: int) -> tuple[bytes, bytes]:
    """A KRaftVersionRecord control record (key, value)."""
    return control_key(KRAFT_VERSION), encode_entity(
        KRaftVersionRecord(version=i16(0), k_raft_version=i16(level))
    )


def decode_voters(value: bytes) -> VoterSet:
    record = decode_body(VotersRecord, value, 0)
    return VoterSet.of(
        [
            VoterNode(
                node_id=int(v.voter_id),
                directory_id=_uuid_str(v.voter_directory_id),
                endpoints=tuple(VoterEndpoint(e.name, e.host, int(e.port)) for e in v.endpoints),
            )
            for v in record.voters
        ]
    )


def decode_kraft_version(value: bytes) -> int:
    return int(decode_body(KRaftVersionRecord, value, 0).k_raft_version)


def voters_in(key: bytes | None, value: bytes | None) -> VoterSet | None:
    """The voter set a control record carries, if it is a VotersRecord."""
    if control_type(key) != VOTERS or value is None:
        return None
    return decode_voters(value)
