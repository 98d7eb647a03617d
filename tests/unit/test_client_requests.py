"""Version picking and request building of the client, for every version it claims."""

from __future__ import annotations

import io

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kavka.client import negotiation, requests
from kavka.client.errors import KafkaError, KafkaProtocolError, error_name
from kavka.protocol.api import ApiKey
from kavka.protocol.framing import decode_body, read_request_header


def _roundtrip(entity):  # noqa: ANN001, ANN202
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    got, size = entity_reader(type(entity))(memoryview(buf.getvalue()), 0)
    assert size == len(buf.getvalue())
    return got


# ------------------------------------------------------------------ pick_version


def test_pick_version_is_the_highest_common_version() -> None:
    client = {3: (0, 12)}
    assert negotiation.pick_version({3: (1, 9)}, 3, client=client) == 9
    assert negotiation.pick_version({3: (0, 13)}, 3, client=client) == 12
    assert negotiation.pick_version({3: (0, 13)}, 3, 5, client=client) == 5


def test_pick_version_refuses_disjoint_ranges_and_unknown_apis() -> None:
    with pytest.raises(KafkaProtocolError, match="no common version of METADATA"):
        negotiation.pick_version({3: (13, 14)}, 3, client={3: (0, 12)})
    with pytest.raises(KafkaProtocolError, match="at most 2"):
        negotiation.pick_version({3: (4, 12)}, 3, 2, client={3: (0, 12)})
    with pytest.raises(KafkaProtocolError, match="broker does not support CREATE_TOPICS"):
        negotiation.pick_version({3: (0, 12)}, 19)
    with pytest.raises(KafkaProtocolError, match="client does not implement"):
        negotiation.pick_version({999: (0, 1)}, 999)


def test_request_class_has_the_requested_version() -> None:
    for key, (lo, hi) in negotiation.CLIENT_VERSIONS.items():
        for v in (lo, hi):
            cls = negotiation.request_class(key, v)
            assert (int(cls.__api_key__), int(cls.__version__)) == (key, v)


def test_retry_version_after_unsupported_version() -> None:
    assert negotiation.retry_api_versions_version({18: (0, 2)}) == 2
    assert negotiation.retry_api_versions_version({18: (0, 9)}) == 3
    assert negotiation.retry_api_versions_version({}) == 0


# ------------------------------------------------------------------ encode / decode


def test_encode_writes_header_v2_for_flexible_and_v1_otherwise() -> None:
    for version, flexible in ((12, True), (8, False)):
        entity = requests.metadata(version, ["a"])
        frame = negotiation.encode(entity, correlation_id=7, client_id="me")
        header = read_request_header(memoryview(frame)[4:], flexible=flexible)
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            3,
            version,
            7,
            "me",
        )
        body = decode_body(type(entity), memoryview(frame)[4:], header.header_size)
        assert body == entity


def test_decode_checks_the_correlation_id() -> None:
    from kavka.protocol.framing import encode_entity, encode_response
    from kavka.protocol.messages import NO_THROTTLE, make

    cls = negotiation.response_class(60, 1)
    resp = make(
        cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, endpoint_type=1,
        cluster_id="c", controller_id=1, brokers=(), cluster_authorized_operations=0,
    )  # fmt: skip
    frame = encode_response(5, encode_entity(resp), flexible_header=True)[4:]
    assert negotiation.decode(frame, 60, 1, correlation_id=5) == resp
    with pytest.raises(KafkaProtocolError, match="correlation id 5, expected 6"):
        negotiation.decode(frame, 60, 1, correlation_id=6)
    with pytest.raises(KafkaProtocolError):
        negotiation.decode(frame[:9], 60, 1, correlation_id=5)


def test_api_versions_refusal_is_read_as_v0() -> None:
    from kavka.protocol.framing import encode_entity, encode_response
    from kavka.protocol.messages import make, nested

    v0 = negotiation.response_class(18, 0)
    body = make(
        v0,
        error_code=ErrorCode.unsupported_version,
        api_keys=(make(nested(v0, "ApiVersion"), api_key=18, min_version=0, max_version=2),),
    )
    frame = encode_response(1, encode_entity(body), flexible_header=False)[4:]
    error, table = negotiation.decode_api_versions(frame, 3, correlation_id=1)
    assert error == 35 and table == {18: (0, 2)}


# ------------------------------------------------------------------ builders, every version


def _all_versions(key: ApiKey) -> range:
    lo, hi = negotiation.CLIENT_VERSIONS[int(key)]
    return range(lo, hi + 1)


BUILDERS = {
    ApiKey.METADATA: lambda v: requests.metadata(v, ["a", "b"]),
    ApiKey.CREATE_TOPICS: lambda v: requests.create_topics(
        v,
        [("a", 3, 1, {"retention.ms": "1"}, None), ("b", -1, -1, {}, {0: [1, 2]})],
        validate_only=True,
        timeout_ms=1500,
    ),
    ApiKey.DELETE_TOPICS: lambda v: requests.delete_topics(v, ["a"], timeout_ms=1000),
    ApiKey.CREATE_PARTITIONS: lambda v: requests.create_partitions(
        v, {"a": 4}, validate_only=False, timeout_ms=1000
    ),
    ApiKey.DESCRIBE_CONFIGS: lambda v: requests.describe_configs(
        v, [(2, "a")], include_synonyms=True, include_documentation=True
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda v: requests.incremental_alter_configs(
        v,
        2,
        "a",
        [("retention.ms", requests.OP_SET, "5"), ("segment.ms", requests.OP_DELETE, None)],
    ),
    ApiKey.LIST_OFFSETS: lambda v: requests.list_offsets(
        v, {("a", 1): -1, ("a", 0): -2, ("b", 0): 1234}
    ),
    ApiKey.DELETE_RECORDS: lambda v: requests.delete_records(v, {("a", 0): 10}, timeout_ms=1000),
    ApiKey.DESCRIBE_CLUSTER: lambda v: requests.describe_cluster(v),
    ApiKey.API_VERSIONS: lambda v: negotiation.api_versions_request(v),
}


@pytest.mark.parametrize(
    ("key", "version"),
    [(k, v) for k in BUILDERS for v in _all_versions(k)],
    ids=lambda x: str(getattr(x, "name", x)),
)
def test_every_builder_builds_every_version_and_encodes(key: ApiKey, version: int) -> None:
    entity = BUILDERS[key](version)
    assert int(entity.__version__) == version and int(entity.__api_key__) == int(key)
    assert _roundtrip(entity) == entity


def test_metadata_asks_for_all_topics_per_version_and_never_auto_creates() -> None:
    assert requests.metadata(0, None).topics == ()
    assert requests.metadata(1, None).topics is None
    m = requests.metadata(12, ["x"])
    assert m.allow_auto_topic_creation is False
    assert [(t.name, t.topic_id) for t in m.topics] == [("x", None)]


def test_create_topics_fields() -> None:
    r = requests.create_topics(
        7, [("a", 3, 2, {"k": "v"}, {1: [2, 3], 0: [1, 2]})], validate_only=True, timeout_ms=2500
    )
    (t,) = r.topics
    assert (t.name, t.num_partitions, t.replication_factor) == ("a", 3, 2)
    assert [(c.name, c.value) for c in t.configs] == [("k", "v")]
    assert [(a.partition_index, a.broker_ids) for a in t.assignments] == [(0, (1, 2)), (1, (2, 3))]
    assert r.timeout.total_seconds() == 2.5 and r.validate_only is True


def test_delete_topics_by_name_before_and_after_v6() -> None:
    assert requests.delete_topics(5, ["a"], timeout_ms=1).topic_names == ("a",)
    assert [t.name for t in requests.delete_topics(6, ["a"], timeout_ms=1).topics] == ["a"]


def test_list_offsets_groups_by_topic_and_sorts_partitions() -> None:
    r = requests.list_offsets(9, {("a", 1): -1, ("b", 0): 5, ("a", 0): -2})
    assert r.replica_id == -1
    got = {t.name: [(p.partition_index, p.timestamp) for p in t.partitions] for t in r.topics}
    assert got == {"a": [(0, -2), (1, -1)], "b": [(0, 5)]}


def test_offset_specs_and_resource_types() -> None:
    assert [
        requests.offset_spec_timestamp(s) for s in ("latest", "earliest", "max-timestamp", 17)
    ] == [-1, -2, -3, 17]
    for bad in ("newest", -5, True):
        with pytest.raises(ValueError):
            requests.offset_spec_timestamp(bad)
    assert requests.resource_type_code("topic") == 2
    assert requests.resource_type_code("brokers") == 4
    with pytest.raises(ValueError):
        requests.resource_type_code("group")


def test_kafka_error_carries_kafkas_name_and_description() -> None:
    e = KafkaError(36, message="Topic 'a' already exists.", resource="a")
    assert (e.code, e.name) == (36, "TOPIC_ALREADY_EXISTS")
    assert str(e) == "a: TOPIC_ALREADY_EXISTS: Topic 'a' already exists."
    assert "does not host" in KafkaError(3).message
    assert KafkaError(3).retriable and not KafkaError(36).retriable
    assert error_name(12345) == "UNKNOWN_ERROR_CODE_12345"
