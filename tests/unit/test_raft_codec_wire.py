"""The KRaft codec's wire bytes, pinned: a digest of every message's encoded body, taken from the
isinstance-chain codec before it became tables, so a change to the codec cannot change the bytes
a peer (kavka's or Kafka's) receives without this failing."""

from __future__ import annotations

import hashlib
import typing

import pytest

from kavka.common import ErrorCode
from kavka.protocol.framing import encode_entity
from kavka.raft import codec
from kavka.raft import messages as m
from kavka.raft.api import SnapshotId
from kavka.raft.replicated_log import LogEntry

CID = "abcdefghijklmnopqrstuv"
ENTRIES = (
    LogEntry(10, 3, 10, None, None, control=True),
    LogEntry(11, 3, 11, b"k1", b"v1"),
    LogEntry(12, 3, 11, None, b"v2"),
    LogEntry(13, 4, 13, b"k3", None),
)

# (message, first 32 hex digits of sha256(body)), bodies encoded for destination 3.
PINNED: list[tuple[m.Message, str]] = [
    (m.VoteRequest(CID, 5, 2, 4, 100, pre_vote=True), "e9c72391236b500e69572b9fae33f0ed"),
    (m.VoteRequest(CID, 5, 2, 4, 100, pre_vote=False), "392fb86ca0c45dd71ca39dc712fcc4cc"),
    (m.VoteResponse(ErrorCode.none, 3, 5, True, False), "58054343ad075178d38d0a136899f3b9"),
    (m.VoteResponse(ErrorCode.none, None, 5, False, False), "6f50b9ea2cc2a99e40afe1dafa8bc57d"),
    (m.BeginQuorumEpochRequest(CID, 1, 7), "aeeeae30968442da955637c850a95532"),
    (m.BeginQuorumEpochResponse(ErrorCode.fenced_leader_epoch, 2, 8), "a89e78f48423bb790e1ecf3300e617b3"),
    (m.EndQuorumEpochRequest(CID, 1, 7, (3, 2)), "a7855e8045e5592eb5811276fde08d8d"),
    (m.EndQuorumEpochResponse(ErrorCode.none, None, 7), "9ac2cbf6b71bcd9f3c5573a336b3d02c"),
    (m.FetchRequest(CID, 2, 7, 120, 6, 99, 500), "d29379748ea5aef440ea7a6cd84dab4b"),
    (m.FetchResponse(ErrorCode.none, 1, 7, 11, ENTRIES, None), "ae02016960c3aa3c78b8642edadc2b43"),
    (m.FetchResponse(ErrorCode.none, 1, 7, 11, (), (4, 90)), "a9e812b16924a385f5d4c0fd163a9e99"),
    (m.FetchResponse(ErrorCode.not_leader_or_follower, None, 8, 0, (), None), "29294bf032c5c85b3010a5406d3e3ae3"),
    (m.VoteResponse(ErrorCode.inconsistent_voter_set, 1, 3, False, False), "a9ff5848f703de9e5510b79c5974abc3"),
    (m.FetchResponse(ErrorCode.none, 1, 7, 500, (), None, SnapshotId(400, 6)), "ef80b76500cdf00f9f633378dd9dd8b3"),
    (m.FetchSnapshotRequest(CID, 2, 7, SnapshotId(400, 6), 4096, 1 << 20), "2a572f26833830ad4efe2e2fbd49fe6a"),
    (
        m.FetchSnapshotResponse(ErrorCode.none, 1, 7, SnapshotId(400, 6), 9000, 4096, b"\x00\x01chunk"),
        "186ceba7715586737d107d60418a3dd3",
    ),
    (
        m.FetchSnapshotResponse(ErrorCode.snapshot_not_found, 1, 7, SnapshotId(400, 6), -1, 0, b""),
        "3f27c8cd830dad65e7827ead24027c8f",
    ),
]


def _digest(entity: object) -> str:
    return hashlib.sha256(encode_entity(entity)).hexdigest()[:32]


@pytest.mark.parametrize(("msg", "digest"), PINNED, ids=lambda x: type(x).__name__)
def test_wire_bytes_are_pinned(msg: m.Message, digest: str) -> None:
    assert _digest(codec.encode(msg, destination=3)) == digest


def test_top_level_inconsistent_cluster_id_bytes_are_pinned() -> None:
    msg = m.VoteResponse(ErrorCode.inconsistent_cluster_id, None, -1, False, False)
    assert _digest(codec.encode(msg, destination=2)) == "5e34c681daa28c400af63ea6f0d9a97a"


def test_describe_quorum_bytes_are_pinned() -> None:
    desc = m.QuorumDescription(
        ErrorCode.none,
        1,
        4,
        77,
        (m.ReplicaDescription(1, 80, 1000, 1000), m.ReplicaDescription(2, -1, -1, -1)),
        (m.ReplicaDescription(7, 5, 6, -1),),
    )
    assert _digest(codec.encode_describe_quorum(desc)) == "4e754a77bfe0af6dd8899cf45d45379f"


def test_every_message_type_has_one_codec_row_both_ways() -> None:
    messages = set(typing.get_args(m.Message))
    assert {row.message for row in codec.CODECS} == messages
    assert len({row.entity for row in codec.CODECS}) == len(codec.CODECS)
    assert {type(msg) for msg, _ in PINNED} == messages
    for row in codec.CODECS:
        msg = next(msg for msg, _ in PINNED if type(msg) is row.message)
        entity = codec.encode(msg, destination=3)
        assert type(entity) is row.entity
        assert type(codec.decode(entity, request=None)) is row.message
    # every request the core sends has a version and a response schema
    requests = {row.entity for row in codec.CODECS if row.entity.__name__.endswith("Request")}
    assert set(codec.API_VERSIONS) == requests == set(codec.RESPONSE_SCHEMA)


def test_a_type_without_a_row_is_refused() -> None:
    with pytest.raises(TypeError):
        codec.encode(m.ReplicaDescription(1, 0, 0, 0), destination=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a KRaft message"):
        codec.decode(codec.encode_describe_quorum(m.QuorumDescription(ErrorCode.none, 1, 1, 0, ())))
