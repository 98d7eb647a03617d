"""The hand-written Fetch codec (protocol.fetch_wire) against kio, byte for byte, both ways.

For every flexible Fetch version (v12-v17), hypothesis draws requests and responses: the hand
encoder's bytes must equal kio's for the same message, and the hand decoder must read kio's bytes
back to the same fields. Truncated or garbled bodies must raise ProtocolError, never anything else.
"""

from __future__ import annotations

import datetime
import importlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.protocol import fetch_wire
from kavka.protocol.framing import ProtocolError, encode_entity

VERSIONS = list(range(12, 18))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
name = st.text("abcXYZ._-09", min_size=1, max_size=20)
uuids = st.builds(lambda b: uuid.UUID(bytes=b), st.binary(min_size=16, max_size=16))
errors = st.sampled_from([ErrorCode.none, ErrorCode.offset_out_of_range, ErrorCode.not_leader_or_follower,
                          ErrorCode.fenced_leader_epoch, ErrorCode.offset_moved_to_tiered_storage])


def _schema(version: int, kind: str):  # noqa: ANN202
    return importlib.import_module(f"kio.schema.fetch.v{version}.{kind}")


def _key(version: int, data: st.DataObject) -> object:
    return data.draw(uuids) if version >= 13 else data.draw(name)


def _topic_kw(version: int, key: object) -> dict[str, object]:
    return {"topic_id": key} if version >= 13 else {"topic": key}


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_response_bytes_equal_kios_and_decode_back(version: int, data: st.DataObject) -> None:
    m = _schema(version, "response")
    partition = st.tuples(
        i32, errors, i64, i64, i64,
        st.none() | st.just((-1, -1)) | st.tuples(st.just(-1) | i32, st.just(-1) | i64),
        st.none() | st.lists(st.tuples(i64, i64), max_size=3),
        i32,
        st.none() | st.binary(max_size=300),
    )
    topics = [(_key(version, data), data.draw(st.lists(partition, max_size=4))) for _ in range(data.draw(st.integers(0, 3)))]
    error, session, throttle = data.draw(errors), data.draw(i32), data.draw(st.integers(0, 2**31 - 1))
    entity = m.FetchResponse(
        throttle_time=datetime.timedelta(milliseconds=throttle), error_code=error, session_id=session,
        responses=tuple(
            m.FetchableTopicResponse(**_topic_kw(version, key), partitions=tuple(
                m.PartitionData(
                    partition_index=p[0], error_code=p[1], high_watermark=p[2], last_stable_offset=p[3],
                    log_start_offset=p[4],
                    diverging_epoch=m.EpochEndOffset(epoch=p[5][0], end_offset=p[5][1]) if p[5] else m.EpochEndOffset(),
                    aborted_transactions=None if p[6] is None else tuple(
                        m.AbortedTransaction(producer_id=a, first_offset=b) for a, b in p[6]),
                    preferred_read_replica=p[7], records=p[8],
                ) for p in parts))
            for key, parts in topics),
    )
    kio_bytes = encode_entity(entity)
    hand = fetch_wire.encode_response(version, topics, error_code=error, session_id=session, throttle_ms=throttle)
    assert b"".join(bytes(b) for b in hand) == kio_bytes

    back = fetch_wire.decode_response(memoryview(b"xx" + kio_bytes), 2, version)
    assert (back.error_code, back.session_id, back.throttle_time) == (error, session, entity.throttle_time)
    assert len(back.responses) == len(topics)
    for t, (key, parts) in zip(back.responses, topics, strict=True):
        assert (t.topic_id if version >= 13 else t.topic) == key
        for pd, p in zip(t.partitions, parts, strict=True):
            div = p[5] if p[5] else (-1, -1)
            assert (pd.partition_index, pd.error_code, pd.high_watermark, pd.last_stable_offset, pd.log_start_offset) == p[:5]
            assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == div
            got_aborted = None if pd.aborted_transactions is None else [
                (a.producer_id, a.first_offset) for a in pd.aborted_transactions]
            assert got_aborted == p[6]
            assert (pd.preferred_read_replica, pd.records) == (p[7], p[8])


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_request_bytes_equal_kios_and_decode_back(version: int, data: st.DataObject) -> None:
    m = _schema(version, "request")
    part = st.tuples(i32, i32, i64, i32, i64, i32)
    topics = [(_key(version, data), data.draw(st.lists(part, max_size=4))) for _ in range(data.draw(st.integers(0, 3)))]
    replica_id, replica_epoch = data.draw(st.just(-1) | i32), data.draw(st.just(-1) | i64)
    max_wait, min_bytes, max_bytes = data.draw(st.integers(0, 2**31 - 1)), data.draw(i32), data.draw(i32)
    isolation, rack = data.draw(st.sampled_from([0, 1])), data.draw(st.text(max_size=10))
    replica = ({"replica_state": m.ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch)}
               if version >= 15 else {"replica_id": replica_id})
    entity = m.FetchRequest(
        **replica, max_wait=datetime.timedelta(milliseconds=max_wait), min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=tuple(m.FetchTopic(**_topic_kw(version, key), partitions=tuple(
            m.FetchPartition(partition=p[0], current_leader_epoch=p[1], fetch_offset=p[2], last_fetched_epoch=p[3],
                             log_start_offset=p[4], partition_max_bytes=p[5]) for p in parts)) for key, parts in topics),
        forgotten_topics_data=(), rack_id=rack,
    )
    kio_bytes = encode_entity(entity)
    hand = fetch_wire.encode_request(
        version, replica_id=replica_id, replica_epoch=replica_epoch if version >= 15 else -1, max_wait_ms=max_wait,
        min_bytes=min_bytes, max_bytes=max_bytes, topics=topics, isolation_level=isolation, rack_id=rack,
    )
    assert hand == kio_bytes

    # What kio writes with the fields the hand encoder never sends (sessions, forgotten topics,
    # a cluster id, a replica directory) decodes back too.
    forgotten = [(_key(version, data), data.draw(st.lists(i32, max_size=3))) for _ in range(data.draw(st.integers(0, 2)))]
    cluster_id = data.draw(st.none() | st.text(max_size=8))
    directory = data.draw(st.none() | uuids) if version >= 17 else None
    session_id, session_epoch = data.draw(i32), data.draw(i32)
    full = m.FetchRequest(
        **replica, cluster_id=cluster_id, max_wait=entity.max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation, session_id=session_id, session_epoch=session_epoch,
        topics=tuple(m.FetchTopic(**_topic_kw(version, key), partitions=tuple(
            m.FetchPartition(partition=p[0], current_leader_epoch=p[1], fetch_offset=p[2], last_fetched_epoch=p[3],
                             log_start_offset=p[4], partition_max_bytes=p[5],
                             **({"replica_directory_id": directory} if version >= 17 else {})) for p in parts))
            for key, parts in topics),
        forgotten_topics_data=tuple(m.ForgottenTopic(**_topic_kw(version, key), partitions=tuple(ps)) for key, ps in forgotten),
        rack_id=rack,
    )
    back = fetch_wire.decode_request(memoryview(b"abc" + encode_entity(full)), 3, version)
    assert back.__version__ == version
    if version >= 15:
        assert (back.replica_state.replica_id, back.replica_state.replica_epoch) == (replica_id, replica_epoch)
    else:
        assert back.replica_id == replica_id
    assert (back.cluster_id, back.max_wait, back.min_bytes, back.max_bytes, back.isolation_level) == (
        cluster_id, entity.max_wait, min_bytes, max_bytes, isolation)
    assert (back.session_id, back.session_epoch, back.rack_id) == (session_id, session_epoch, rack)
    assert [(t.topic_id if version >= 13 else t.topic, [
        (p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, p.partition_max_bytes)
        for p in t.partitions]) for t in back.topics] == [(k, list(ps)) for k, ps in topics]
    assert all(p.replica_directory_id == directory for t in back.topics for p in t.partitions)
    assert [(t.topic_id if version >= 13 else t.topic, list(t.partitions)) for t in back.forgotten_topics_data] == forgotten


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(VERSIONS), cut=st.integers(0, 200), noise=st.binary(min_size=1, max_size=8), data=st.data())
def test_truncated_or_garbled_bodies_raise_protocol_error(version: int, cut: int, noise: bytes, data: st.DataObject) -> None:
    topics = [(_key(version, data), [(0, 1, 100, 1, 0, 1 << 20), (1, 1, 7, 0, 0, 1 << 20)])]
    req = fetch_wire.encode_request(version, replica_id=2, replica_epoch=5, max_wait_ms=500, min_bytes=1,
                                    max_bytes=1 << 20, topics=topics)
    resp = b"".join(bytes(b) for b in fetch_wire.encode_response(
        version, [(topics[0][0], [(0, 0, 10, 10, 0, (1, 5), [(3, 4)], -1, b"r" * 50)])]))
    for body, decode in ((req, fetch_wire.decode_request), (resp, fetch_wire.decode_response)):
        at = min(cut, len(body) - 1)
        with pytest.raises(ProtocolError):  # every prefix is short of the closing tagged fields at least
            decode(body[:at], 0, version)
        try:  # garbled: it may still parse as some other message, but it fails only as ProtocolError
            decode(body[:at] + noise + body[at + len(noise):], 0, version)
        except ProtocolError:
            pass


def test_only_flexible_versions_are_hand_decoded() -> None:
    with pytest.raises(ValueError, match="v11"):
        fetch_wire.decode_request(b"", 0, 11)
