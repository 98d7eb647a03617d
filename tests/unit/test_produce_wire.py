"""The hand-written Produce codec (protocol.produce_wire) against kio, both ways.

For every version it claims (v3-v12), hypothesis draws requests and responses: the hand decoder
must read kio's bytes to the same fields kio's own decoder (protocol.guard + kio, the path it
replaced) reads, and the hand encoder must write the bytes kio writes for the same response, built
as the handler built it before. Garbled and truncated requests must get the same answer from both
paths: the same fields, or ProtocolError from both.
"""

from __future__ import annotations

import datetime
from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.protocol import api, produce_wire
from kavka.protocol.framing import ProtocolError, decode_body, encode_entity, uvarint
from kavka.protocol.messages import make, nested

VERSIONS = list(range(produce_wire.FIRST, produce_wire.LAST + 1))
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text("abcXYZ._-09", min_size=1, max_size=20)
texts = st.text(max_size=12)  # any unicode: UTF-8 of several bytes per character
errors = st.sampled_from([ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.invalid_record,
                          ErrorCode.corrupt_message, ErrorCode.unknown_topic_or_partition])
topics_data = st.lists(
    st.tuples(names, st.lists(st.tuples(i32, st.none() | st.binary(max_size=200)), max_size=3)), max_size=3)


def _kio_request(version: int, txn: str | None, acks: int, timeout_ms: int, topics: list) -> object:
    cls = api.request_schema(api.ApiKey.PRODUCE, version)
    topic_cls, part_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    return make(cls, transactional_id=txn, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms),
                topic_data=tuple(make(topic_cls, name=n, partition_data=tuple(
                    make(part_cls, index=i, records=r) for i, r in parts)) for n, parts in topics))


def _fields(req: object) -> tuple:
    return (req.transactional_id, req.acks, req.timeout, [  # type: ignore[attr-defined]
        (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
        for t in req.topic_data])  # type: ignore[attr-defined]


def _either(decode, *args):  # noqa: ANN001, ANN202
    try:
        return _fields(decode(*args))
    except ProtocolError:
        return ProtocolError


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), txn=st.none() | texts, acks=st.sampled_from([-1, 0, 1, 2]),
       timeout_ms=st.integers(0, 2**31 - 1), topics=topics_data)
def test_request_decodes_to_kios_fields(version: int, txn: str | None, acks: int, timeout_ms: int, topics: list) -> None:
    body = encode_entity(_kio_request(version, txn, acks, timeout_ms, topics))
    frame = memoryview(b"head" + body)
    hand = produce_wire.decode_request(frame, 4, version)
    assert hand.__version__ == version
    assert _fields(hand) == _fields(decode_body(api.request_schema(0, version), frame, 4))
    assert _fields(hand) == (txn, acks, datetime.timedelta(milliseconds=timeout_ms),
                             [(n, list(parts)) for n, parts in topics])
    for t in hand.topic_data:  # records are views into the frame, not copies
        assert all(p.records is None or p.records.obj is frame.obj for p in t.partition_data)


@settings(max_examples=400, deadline=None)
@given(version=st.sampled_from(VERSIONS), topics=topics_data.filter(bool), txn=st.none() | texts,
       cut=st.integers(0, 400), noise=st.binary(min_size=1, max_size=6), mode=st.sampled_from(["cut", "noise", "both"]))
def test_garbled_requests_get_kios_answer(version: int, topics: list, txn: str | None, cut: int, noise: bytes,
                                          mode: str) -> None:
    """A truncated or overwritten body: both paths read the same fields, or both refuse it."""
    body = encode_entity(_kio_request(version, txn, 1, 100, topics))
    at = min(cut, len(body))
    if mode == "cut":
        garbled = body[:at]
    elif mode == "noise":
        garbled = body[:at] + noise + body[at + len(noise):]
    else:
        garbled = body[:at] + noise
    frame = memoryview(garbled)
    hand = _either(produce_wire.decode_request, frame, 0, version)
    kio = _either(decode_body, api.request_schema(0, version), frame, 0)
    assert hand == kio


def test_nulls_where_the_schema_forbids_them_are_refused() -> None:
    for version, null_topics in ((3, b"\xff\xff\xff\xff"), (9, b"\x00")):
        txn = b"\xff\xff" if version < 9 else b"\x00"
        body = txn + b"\x00\x01\x00\x00\x00\x64" + null_topics
        with pytest.raises(ProtocolError, match="topic_data"):
            produce_wire.decode_request(body, 0, version)
        with pytest.raises(ProtocolError, match="topic_data"):
            decode_body(api.request_schema(0, version), body, 0)


def test_a_compact_string_over_0x7fff_bytes_is_refused() -> None:
    """Its length would fit a compact varint, but no string of the protocol is longer (int16)."""
    for n, refused in ((0x7FFF, False), (0x8000, True)):
        frame = (b"\x00\x00\x01\x00\x00\x00\x64\x02" + uvarint(n + 1) + b"a" * n
                 + b"\x02\x00\x00\x00\x00\x01\x00\x00\x00")
        for decode in (lambda f: produce_wire.decode_request(f, 0, 9),
                       lambda f: decode_body(api.request_schema(0, 9), f, 0)):
            if refused:
                with pytest.raises(ProtocolError, match="string"):
                    decode(frame)
            else:
                assert decode(frame).topic_data[0].name == "a" * n


def test_only_the_batch_v2_versions_are_hand_decoded() -> None:
    with pytest.raises(ValueError, match="v2"):
        produce_wire.decode_request(b"", 0, 2)
    with pytest.raises(ValueError, match="v13"):
        produce_wire.decode_request(b"", 0, 13)


def _kio_response(version: int, topics: list, throttle_ms: int) -> object:
    """The response as the Produce handler built it through kio before the hand encoder."""
    cls = api.response_schema(api.ApiKey.PRODUCE, version)
    topic_cls, part_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
    err_cls = nested(cls, "BatchIndexAndErrorMessage") if version >= 8 else None

    def part(p: produce_wire.PartitionProduceResponse) -> object:
        return make(
            part_cls, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
            log_append_time=datetime.datetime.fromtimestamp(p.log_append_time_ms / 1000, UTC)
            if p.log_append_time_ms >= 0 else None,
            log_start_offset=p.log_start_offset,
            record_errors=tuple(make(err_cls, batch_index=i, batch_index_error_message=m) for i, m in p.record_errors)
            if err_cls is not None else (),
            error_message=p.error_message,
        )

    return make(cls, responses=tuple(make(topic_cls, name=n, partition_responses=tuple(part(p) for p in parts))
                                     for n, parts in topics),
                throttle_time=datetime.timedelta(milliseconds=throttle_ms))


partition_responses = st.builds(
    produce_wire.PartitionProduceResponse, i32, errors, i64,
    st.just(-1) | st.integers(0, 2**41),  # log append time: none, or ms since the epoch
    i64, st.lists(st.tuples(i32, st.none() | texts), max_size=2).map(tuple), st.none() | texts)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), throttle_ms=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(names, st.lists(partition_responses, max_size=3)), max_size=3))
def test_response_bytes_equal_kios(version: int, throttle_ms: int, topics: list) -> None:
    resp = produce_wire.ProduceResponse(
        tuple(produce_wire.TopicProduceResponse(n, tuple(parts)) for n, parts in topics),
        datetime.timedelta(milliseconds=throttle_ms))
    assert produce_wire.encode_response(version, resp) == encode_entity(_kio_response(version, topics, throttle_ms))
