"""The hand-written Metadata response encoder (protocol.metadata_wire) against kio.

For every version kavka answers (v0-v12), hypothesis draws responses -- nulls where the version
allows them (rack, cluster_id, a topic name from v12), empty arrays, error entries, names of any
unicode, ids and epochs over the whole int32 range, leader -1, authorized operations unset -- and
the hand encoder must write the bytes kio writes for the same response, built as the handler
built it through kio before (`messages.make`, which drops the fields a version lacks). Then the
handler's rows themselves: which leaders and replicas a partition answers as offline.
"""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.broker.handlers.metadata import partition_rows
from kavka.metadata.image import PartitionRegistration
from kavka.protocol import api, metadata_wire
from kavka.protocol.framing import encode_entity
from kavka.protocol.messages import make, nested
from kavka.replication.replica_manager import ReplicaManager
from kavka.storage.log_config import LogConfig
from kavka.storage.log_manager import LogManager

VERSIONS = list(range(metadata_wire.LAST + 1))
i32 = st.integers(-(2**31), 2**31 - 1)
texts = st.text(max_size=12)  # any unicode: UTF-8 of several bytes per character
errors = st.sampled_from([ErrorCode.none, ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition,
                          ErrorCode.topic_authorization_failed, ErrorCode.invalid_topic_exception,
                          ErrorCode.unknown_topic_id, ErrorCode.invalid_request])
ids = st.lists(i32, max_size=5).map(tuple)
ops = st.just(metadata_wire.OPS_UNSET) | i32
partitions = st.tuples(errors, i32, st.just(-1) | i32, i32, ids, ids, ids)
brokers = st.lists(st.tuples(i32, texts, i32, st.none() | texts), max_size=3)


def _topics(nullable_names: bool) -> st.SearchStrategy:
    name = st.none() | texts if nullable_names else texts
    topic_ids = st.just(uuid.UUID(int=0)) | st.uuids()
    return st.lists(st.tuples(errors, name, topic_ids, st.booleans(), st.lists(partitions, max_size=4), ops),
                    max_size=4)


def _kio_response(version: int, resp: metadata_wire.MetadataResponse) -> object:
    cls = api.response_schema(api.ApiKey.METADATA, version)
    broker_cls = nested(cls, "MetadataResponseBroker")
    topic_cls, part_cls = nested(cls, "MetadataResponseTopic"), nested(cls, "MetadataResponsePartition")
    return make(
        cls,
        throttle_time=resp.throttle_time,
        brokers=tuple(make(broker_cls, node_id=n, host=h, port=p, rack=r) for n, h, p, r in resp.brokers),
        cluster_id=resp.cluster_id,
        controller_id=resp.controller_id,
        topics=tuple(
            make(topic_cls, error_code=ErrorCode(e), name=name, topic_id=tid, is_internal=internal,
                 topic_authorized_operations=topic_ops, partitions=tuple(
                     make(part_cls, error_code=ErrorCode(pe), partition_index=i, leader_id=leader, leader_epoch=epoch,
                          replica_nodes=tuple(replicas), isr_nodes=tuple(isr), offline_replicas=tuple(offline))
                     for pe, i, leader, epoch, replicas, isr, offline in parts))
            for e, name, tid, internal, parts, topic_ops in resp.topics),
        cluster_authorized_operations=resp.cluster_authorized_operations,
    )


@st.composite
def responses(draw: st.DrawFn) -> tuple[int, metadata_wire.MetadataResponse]:
    version = draw(st.sampled_from(VERSIONS))
    resp = metadata_wire.MetadataResponse(
        brokers=draw(brokers) if version >= 1 else [(n, h, p, None) for n, h, p, _ in draw(brokers)],
        cluster_id=draw(st.none() | texts),
        controller_id=draw(i32),
        topics=draw(_topics(nullable_names=version >= 12)),
        cluster_authorized_operations=draw(ops),
        throttle_time=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
    )
    return version, resp


@settings(max_examples=600, deadline=None)
@given(responses())
def test_response_bytes_equal_kios(drawn: tuple[int, metadata_wire.MetadataResponse]) -> None:
    version, resp = drawn
    assert metadata_wire.encode_response(version, resp) == encode_entity(_kio_response(version, resp))


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(VERSIONS), sizes=st.tuples(*[st.sampled_from([0, 1, 126, 127, 128, 300])] * 3))
def test_long_replica_arrays_equal_kios(version: int, sizes: tuple[int, int, int]) -> None:
    """Arrays of 127 elements and more take a two-byte compact count: the field-by-field path,
    also when a topic's other partitions take the one-pack path."""
    big = tuple(tuple(range(1000, 1000 + n)) for n in sizes)
    parts = [(0, 0, 1, 5, (1, 2), (1,), ()), (0, 1, 1000, 7, *big), (0, 2, -1, 3, (1,), (), (1,))]
    resp = metadata_wire.MetadataResponse(
        brokers=[(1, "h", 9092, None)], cluster_id="c", controller_id=1,
        topics=[(0, "t", uuid.uuid4(), False, parts, metadata_wire.OPS_UNSET)])
    assert metadata_wire.encode_response(version, resp) == encode_entity(_kio_response(version, resp))


def test_an_all_topics_answer_at_scale_equals_kios() -> None:
    """Many partitions of a few shapes, as a real cluster's: the per-topic format cache reused."""
    topics = [
        (0, f"topic-{t}", uuid.UUID(int=t + 1), t == 0, [
            (0 if p % 7 else 5, p, (p % 3) + 1 if p % 7 else -1, p // 3, (1, 2, 3), (1, 2, 3)[: 1 + p % 3],
             () if p % 5 else (3,))
            for p in range(100)], metadata_wire.OPS_UNSET)
        for t in range(20)
    ]
    resp = metadata_wire.MetadataResponse(brokers=[(1, "a", 1, "r1"), (2, "b", 2, None), (3, "c", 3, "r3")],
                                          cluster_id="cluster", controller_id=1, topics=topics)
    for version in VERSIONS:
        assert metadata_wire.encode_response(version, resp) == encode_entity(_kio_response(version, resp))


def test_partition_rows_mark_offline_leaders_and_replicas(tmp_path: Path) -> None:
    """What the handler hands the encoder (broker.handlers.metadata.partition_rows): a leader on
    a fenced or unknown broker answers LEADER_NOT_AVAILABLE with leader -1; replicas on such
    brokers are offline, and so is this broker's replica on a failed log dir (KIP-112) -- only
    where this broker is a replica."""
    lm = LogManager([tmp_path / "d0"], default_config=LogConfig(), now_ms=0)
    rm = ReplicaManager(node_id=1, log_manager=lm, now_ms=lambda: 0, replica_lag_time_max_ms=3000)
    node = SimpleNamespace(node_id=1, replica_manager=rm, log_manager=lm)
    for p in (0, 1, 4):
        lm.get_or_create_log("t", p, topic_id="AAAAAAAAAAAAAAAAAAAAAw", now_ms=0)
    live = {1, 2}  # 3 is fenced
    regs = [
        PartitionRegistration(0, (1, 2), (1, 2), 2, 7, 0),
        PartitionRegistration(1, (2, 1, 3), (2,), 1, 8, 0),
        PartitionRegistration(2, (2, 3), (3,), 3, 9, 0),
        PartitionRegistration(3, (2,), (2,), 2, 1, 0),
        PartitionRegistration(4, (2,), (2,), 2, 1, 0),  # a log of this broker that is no longer a replica
    ]
    ok, gone = ErrorCode.none, ErrorCode.leader_not_available
    before = [
        (ok, 0, 2, 7, (1, 2), (1, 2), ()),
        (ok, 1, 1, 8, (2, 1, 3), (2,), (3,)),
        (gone, 2, -1, 9, (2, 3), (3,), (3,)),
        (ok, 3, 2, 1, (2,), (2,), ()),
        (ok, 4, 2, 1, (2,), (2,), ()),
    ]
    assert partition_rows(node, live, "t", regs) == before
    lm.mark_dir_offline(tmp_path / "d0", "test")
    assert lm.is_offline("t", 0) and lm.is_offline("t", 4)
    assert partition_rows(node, live, "t", regs) == [
        (ok, 0, 2, 7, (1, 2), (1, 2), (1,)),
        (ok, 1, 1, 8, (2, 1, 3), (2,), (1, 3)),
        *before[2:],
    ]


def test_only_the_versions_kavka_answers_are_encoded() -> None:
    """The encoder knows the fields up to v12 (and the server advertises up to it, protocol.api):
    a later version is refused, not written as v12."""
    assert api.is_supported(api.ApiKey.METADATA, metadata_wire.LAST)
    assert not api.is_supported(api.ApiKey.METADATA, metadata_wire.LAST + 1)
    resp = metadata_wire.MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=[])
    with pytest.raises(ValueError, match="v13"):
        metadata_wire.encode_response(metadata_wire.LAST + 1, resp)
