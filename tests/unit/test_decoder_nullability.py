"""The decoder refuses what a request's schema forbids, for every advertised API and version (issue 25).

Bodies are written from the request class's fields (tests/schema_bodies.py),
independently of protocol.guard: each length-prefixed field (array, string, bytes, records,
nullable struct) is written valid, null, with a negative length other than -1,
or with a length beyond the frame. Nullability comes from kio's own
introspection (`is_optional`). The oracle is exact: a body with no forbidden
choice must decode, with every non-nullable field non-null; a body with one
must raise ProtocolError, and nothing else. Fetch v12+ is decoded by hand
(protocol.fetch_wire) and held to the same oracle.
"""

from __future__ import annotations

from dataclasses import is_dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kavka.protocol import api, fetch_wire
from kavka.protocol.framing import ProtocolError, decode_body
from tests.schema_bodies import ADVERTISED, Body, Fate, Pick, non_null_violations


def decode(key: int, version: int, body: bytes) -> Any:
    """The request as the server decodes it (server._dispatch): by hand for Fetch v12+, else guard + kio."""
    if key == api.ApiKey.FETCH and version >= fetch_wire.FIRST_FLEXIBLE:
        return fetch_wire.decode_request(body, 0, version)
    return decode_body(api.request_schema(key, version), body, 0)


def check(key: int, version: int, pick: Pick) -> Body:
    """Write a body with `pick`, decode it, and hold the result to the oracle."""
    cls = api.request_schema(key, version)
    body = Body(pick)
    data = body.entity(cls)
    try:
        request = decode(key, version, data)
    except ProtocolError as e:
        assert body.forbidden, f"{cls.__name__} v{version}: a body the schema allows was refused: {e}"
        return body
    assert not body.forbidden, f"{cls.__name__} v{version} decoded despite {body.forbidden}"
    assert non_null_violations(cls, request) == []
    return body


def _length_fields(key: int, version: int) -> int:
    """How many length-prefixed fields a valid body of this request has (one element per array)."""
    seen: list[str] = []
    check(key, version, lambda where, nullable, flexible: seen.append(where) or Fate.VALID)
    return len(seen)


@pytest.mark.parametrize(("key", "version"), ADVERTISED, ids=[f"{api.ApiKey(k).name}-v{v}" for k, v in ADVERTISED])
def test_every_field_of_every_version_refuses_each_forbidden_length(key, version):
    """For each length-prefixed field in turn: null, negative and overlong, the rest valid."""
    n = _length_fields(key, version)
    for target in range(n):
        for fate in (Fate.NULL, Fate.NEGATIVE, Fate.OVERLONG):
            count = iter(range(n))

            def pick(where: str, nullable: bool, flexible: bool, target=target, fate=fate, count=count) -> Fate:  # noqa: ANN001
                return fate if next(count) == target else Fate.VALID

            check(key, version, pick)


_FATES = st.sampled_from([Fate.VALID] * 6 + [Fate.NULL, Fate.NULL, Fate.NEGATIVE, Fate.OVERLONG])


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(ADVERTISED), st.data())
def test_fuzzed_nulls_and_lengths_in_any_request_decode_sound_or_raise_protocol_error(kv, data):
    """Any mix of fates over any advertised request: ProtocolError exactly when one is forbidden."""
    check(*kv, lambda where, nullable, flexible: data.draw(_FATES, label=where))


# The thirteen fuzzer findings of issue 25, by name: each reached a handler with None and raised TypeError.
@pytest.mark.parametrize(
    ("key", "versions", "field"),
    [
        (api.ApiKey.PRODUCE, range(0, 3), "ProduceRequest.topic_data"),  # the v0-v2 up-conversion
        (api.ApiKey.PRODUCE, range(3, 12), "ProduceRequest.topic_data"),
        (api.ApiKey.DELETE_TOPICS, range(0, 7), "DeleteTopicsRequest.topic"),  # topic_names, then topics (v6)
        (api.ApiKey.LIST_OFFSETS, range(0, 10), "ListOffsetsRequest.topics"),
        (api.ApiKey.FETCH, range(0, 18), "FetchRequest.topics"),  # v12+ through protocol.fetch_wire
    ],
)
def test_issue_25_nulls_are_protocol_errors(key, versions, field):
    for version in versions:
        lo, hi = api.SUPPORTED[key]
        if not lo <= version <= hi:
            continue
        hit: list[str] = []

        def pick(where: str, nullable: bool, flexible: bool, hit: list[str] = hit) -> Fate:
            if where.startswith(field) and not hit:
                hit.append(where)
                return Fate.NULL
            return Fate.VALID

        body = check(key, version, pick)
        assert hit and body.forbidden, f"v{version}: no non-nullable {field}"


def test_a_legal_null_still_decodes():
    """Nullable fields keep their null: Produce's transactional_id, Metadata v12's topics."""
    def null_of(name: str) -> Pick:
        return lambda where, nullable, flexible: Fate.NULL if where == name else Fate.VALID

    body = Body(null_of("ProduceRequest.transactional_id"))
    assert decode(0, 9, body.entity(api.request_schema(0, 9))).transactional_id is None
    body = Body(null_of("MetadataRequest.topics"))
    assert decode(3, 12, body.entity(api.request_schema(3, 12))).topics is None
    assert body.forbidden == []


def test_refusal_names_schema_version_and_field():
    body = Body(lambda where, nullable, flexible: Fate.NULL if where == "TopicProduceData.partition_data" else Fate.VALID)
    with pytest.raises(ProtocolError, match=r"null in non-nullable field TopicProduceData.partition_data \(v9\)"):
        decode(0, 9, body.entity(api.request_schema(0, 9)))


def test_body_writer_matches_kio_for_valid_bodies():
    """The writer here is the oracle's ground: its valid bodies are what kio itself would write."""
    from kavka.protocol.framing import encode_entity

    for key, version in ADVERTISED:
        if key == api.ApiKey.FETCH and version >= fetch_wire.FIRST_FLEXIBLE:
            continue
        cls = api.request_schema(key, version)
        data = Body(lambda where, nullable, flexible: Fate.VALID).entity(cls)
        assert encode_entity(decode_body(cls, data, 0)) == data, f"{cls.__name__} v{version}"


def test_every_advertised_request_class_is_a_dataclass():
    assert all(is_dataclass(api.request_schema(k, v)) for k, v in ADVERTISED)


def test_nullable_struct_marker_kip_893():
    """ConsumerGroupHeartbeat's response `assignment` is a nullable struct (int8 marker -1 or 1): both
    decode (the guard once read the marker as the struct's first byte and refused them), other markers do not."""
    import datetime
    import uuid

    from kio.schema.errors import ErrorCode

    from kavka.protocol.framing import encode_entity
    from kavka.protocol.messages import make, nested

    cls = api.response_schema(api.ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    assignment_cls, tp_cls = nested(cls, "Assignment"), nested(cls, "TopicPartitions")
    present = make(assignment_cls, topic_partitions=(make(tp_cls, topic_id=uuid.uuid4(), partitions=(1, 2)),))
    for assignment in (None, present):
        resp = make(cls, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                    member_id="m", member_epoch=1, heartbeat_interval=datetime.timedelta(seconds=1),
                    assignment=assignment)
        data = encode_entity(resp)
        assert decode_body(cls, data, 0) == resp
    marker = data.index(b"\x01" + encode_entity(present))
    with pytest.raises(ProtocolError, match="struct marker 2"):
        decode_body(cls, data[:marker] + b"\x02" + data[marker + 1 :], 0)
