"""Raw-socket tests of the wire server: version negotiation, pipelining, and hostile bytes.

Whatever a client sends, the broker process must survive, close only that
client's connection, and keep serving everyone else.
"""

from __future__ import annotations

import random
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.framing import encode_request
from tests.raw_client import RawClient, request_bytes, request_frame
from tests.schema_bodies import ADVERTISED, Body, Fate, Pick
from tests.wait import wait_until
from tests.wire_fuzz import FATES, answer_until_closed, mutate, problems, schema_frame


def _connect(broker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _api_versions(broker, version: int = 3, corr: int = 1):
    with RawClient(broker.port) as c:
        fields = {"client_software_name": "raw", "client_software_version": "1"} if version >= 3 else {}
        c.send(18, version, correlation_id=corr, **fields)
        return c.read_response(18, min(version, api.SUPPORTED[18][1]))


def _schema_frame(key: int, version: int, corr: int, pick: Pick) -> tuple[bytes, Body]:
    return schema_frame(api.request_schema(key, version), key, version, corr, pick)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(broker, version):
    corr, resp = _api_versions(broker, version, corr=77)
    assert corr == 77
    assert resp.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    # kavka's own APIs (key 1000) are listed only for kavka's own client (KIP-511 software name).
    assert advertised == {k: v for k, v in api.SUPPORTED.items() if k not in api.OWN_API_KEYS}


def test_api_versions_lists_kavkas_own_apis_to_kavkas_client(broker):
    with RawClient(broker.port) as c:
        c.send(18, 3, correlation_id=9, client_software_name=api.OWN_CLIENT_SOFTWARE_NAME, client_software_version="1")
        _corr, resp = c.read_response(18, 3)
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == api.SUPPORTED


def test_api_versions_too_new_falls_back_to_v0_with_unsupported_version(broker):
    with RawClient(broker.port) as c:
        # ApiVersions v99: the body is unknown to us, the header is enough (KIP-511).
        payload = struct.pack(">hhih", 18, 99, 5, 3) + b"raw" + b"\x00" + b"\x00garbage"
        c.send_bytes(struct.pack(">i", len(payload)) + payload)
        corr, resp = c.read_response(18, 0)
    assert corr == 5
    assert resp.error_code == ErrorCode.unsupported_version
    # Only ApiVersions' own range, as Kafka answers (the oracle's api_versions_unsupported_version).
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, *api.SUPPORTED[18])]


def test_pipelined_requests_are_answered_in_order(broker):
    reqs = []
    expected = []
    for i in range(60):
        if i % 3 == 0:
            reqs.append(request_frame(18, 3, correlation_id=i, client_software_name="raw", client_software_version="1"))
            expected.append((i, 18, 3))
        else:
            reqs.append(request_frame(3, 12, correlation_id=i, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            expected.append((i, 3, 12))
    with RawClient(broker.port) as c:
        c.send_bytes(b"".join(reqs))  # all at once: the broker reads ahead
        for corr, key, version in expected:
            got_corr, resp = c.read_response(key, version)
            assert got_corr == corr
            if key == 3:
                assert resp.brokers[0].port == broker.port


def test_oversized_frame_is_refused_without_reading_it(broker):
    with RawClient(broker.port) as c:
        c.send_bytes(struct.pack(">i", 2**31 - 1))  # 2 GiB announced, nothing sent
        assert c.closed_by_peer()
    assert _api_versions(broker)[1].error_code == ErrorCode.none
    assert broker.alive()


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x00\x00\x02\x00\x12",  # a whole frame shorter than a request header
        struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1),  # unknown API key
        struct.pack(">i", 8) + struct.pack(">hhi", 0, 99, 1),  # unsupported Produce version
        struct.pack(">i", -1),  # negative size
        # Metadata v12 claiming 2**35 topics in a 5-byte varint
        struct.pack(">i", 16) + struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + bytes([0x80, 0x80, 0x80, 0x80, 0x7F]),
    ],
    ids=["short", "unknown-api", "bad-version", "negative-size", "huge-array"],
)
def test_malformed_frames_close_only_their_connection(broker, payload):
    bystander = RawClient(broker.port)
    with RawClient(broker.port) as c:
        c.send_bytes(payload)
        assert c.closed_by_peer()
    # the other client is unaffected and the broker still answers
    bystander.send(18, 3, correlation_id=9, client_software_name="raw", client_software_version="1")
    corr, _ = bystander.read_response(18, 3)
    assert corr == 9
    bystander.close()
    assert broker.alive()


def _valid_frames() -> list[bytes]:
    # Every (key, version) kavka serves, so each new version is fuzzed too.
    frames = [
        request_frame(18, 3, correlation_id=1, client_software_name="f", client_software_version="1"),
        request_frame(3, 12, correlation_id=2, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        request_frame(3, 4, correlation_id=3, topics=None, allow_auto_topic_creation=False),
        request_frame(2, 7, correlation_id=4, replica_id=-1, isolation_level=0, topics=()),
    ]
    for key, (lo, hi) in sorted(api.SUPPORTED.items()):
        frames += [request_bytes(key, v, 100 + v) for v in range(lo, hi + 1)]
    return frames


def test_fuzzed_frames_never_hurt_the_broker(broker):
    """Random and mutated frames: each gets an answer or a closed connection; the broker lives on,
    and logs nothing at ERROR (a frame it cannot serve is a WARNING: issue 25)."""
    mark = len(broker.output)
    _fuzz_frames(broker)
    assert problems(broker.output[mark:]) == [], broker.log_text()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def _fuzz_frames(broker, data):
    base = data.draw(st.sampled_from(_valid_frames()))
    frame = mutate(base, data.draw(st.randoms(use_true_random=False)))
    with RawClient(broker.port) as c:
        s = c.sock
        s.settimeout(5)
        try:
            s.sendall(bytes(frame))
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, TimeoutError):
            pass
    assert broker.alive(), broker.log_text()


# Issue 25: a fuzzer found frames with valid headers whose non-nullable array was null; the
# handler raised TypeError and logged it at ERROR with a traceback, once per frame.
_ISSUE_25 = [
    (api.ApiKey.PRODUCE, "ProduceRequest.topic_data"),  # v0-v2 through the up-conversion too
    (api.ApiKey.DELETE_TOPICS, "DeleteTopicsRequest.topic"),  # topic_names (v0-v5), topics (v6)
    (api.ApiKey.LIST_OFFSETS, "ListOffsetsRequest.topics"),
    (api.ApiKey.FETCH, "FetchRequest.topics"),  # v12+ through protocol.fetch_wire
]


def _null_in(field: str) -> Pick:
    def pick(where: str, nullable: bool, flexible: bool) -> Fate:
        return Fate.NULL if where.startswith(field) else Fate.VALID
    return pick


def test_impossible_nulls_close_the_connection_with_one_warning(broker_factory, topic_name):
    """Every advertised version of issue 25's requests with its non-nullable array null: each
    connection is closed unanswered, each logs one WARNING and nothing at ERROR, and the broker
    keeps serving with nothing already written lost."""
    from tests.integration.helpers import (
        assert_same_records,
        ck_admin,
        ck_create_topic,
        ck_produce_samples,
        ck_producer,
        ck_read_to_end,
        recent_base_ts,
        sample_records,
    )

    b = broker_factory().start()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, partitions=1)
    samples = sample_records(40, base_ts=recent_base_ts())
    producer = ck_producer(b.bootstrap)
    ck_produce_samples(producer, topic_name, samples[:20])
    mark = len(b.output)
    sent = 0
    for key, field in _ISSUE_25:
        lo, hi = api.SUPPORTED[key]
        for version in range(lo, hi + 1):
            frame, body = _schema_frame(key, version, 1000 + version, _null_in(field))
            assert body.forbidden, f"{field} v{version} is nullable?"
            with _connect(b) as s:
                s.sendall(frame)
                assert answer_until_closed(s) == b"", f"{api.ApiKey(key).name} v{version} was answered"
            sent += 1

    def warnings() -> list[str]:
        return [line for line in b.output[mark:] if " WARNING " in line and "null in non-nullable field" in line]

    wait_until(lambda: len(warnings()) == sent, message=f"{sent} WARNING lines")
    assert all(field in "".join(warnings()) for _, field in _ISSUE_25[1:])
    assert problems(b.output[mark:]) == [], b.log_text()
    # Still serving: a produce and a read afterwards, and the records written before are all there.
    ck_produce_samples(producer, topic_name, samples[20:])
    assert_same_records(ck_read_to_end(b.bootstrap, topic_name), samples)
    assert b.alive()
    assert problems(b.output[mark:]) == [], b.log_text()


_FATES = st.sampled_from(FATES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kv=st.sampled_from(ADVERTISED), data=st.data())
def _fuzz_schema_fates(broker, kv, data):
    key, version = kv
    frame, body = _schema_frame(key, version, 7, lambda where, nullable, flexible: data.draw(_FATES, label=where))
    with _connect(broker) as s:
        s.sendall(frame)
        if body.forbidden:
            assert answer_until_closed(s) == b"", f"{api.ApiKey(key).name} v{version} answered despite {body.forbidden}"
    assert broker.alive(), broker.log_text()


def test_fuzzed_nulls_and_lengths_in_every_request_version_never_reach_a_handler(broker):
    """Valid frames of every advertised version with fields drawn null, negative or overlong: a
    forbidden one closes its connection unanswered, and nothing is logged at ERROR."""
    mark = len(broker.output)
    _fuzz_schema_fates(broker)
    assert problems(broker.output[mark:]) == [], broker.log_text()


def test_broker_still_serves_after_a_storm_of_garbage(broker):
    rng = random.Random(7)
    for _ in range(200):
        with RawClient(broker.port) as c:
            try:
                c.send_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))))
            except OSError:
                pass
    corr, resp = _api_versions(broker, 3, corr=123)
    assert corr == 123 and resp.error_code == ErrorCode.none
    assert broker.alive()


def _legacy_produce_frame(version: int, corr: int, topic: str, records: bytes, acks: int = 1) -> bytes:
    """Produce v0-v2 as a pre-0.11 client writes it, by hand (independent of the generated schemas)."""
    name = topic.encode()
    body = struct.pack(">hi", acks, 5000) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records)) + records
    return encode_request(api_key=0, api_version=version, correlation_id=corr, client_id="old", body=body, flexible=False)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_with_a_corrupt_message_set_writes_nothing(broker, topic_name, version):
    """A v0-v2 message set with a bad CRC is refused for its partition (INVALID_RECORD); the connection lives."""
    from tests.integration.helpers import ck_admin, ck_create_topic, ck_read_to_end

    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=1)
    # A magic-1 message set: offset, size, crc, magic=1, attributes, timestamp, key, value.
    msg = struct.pack(">bbqii", 1, 0, 0, -1, 1) + b"v"
    message_set = struct.pack(">qi", 0, len(msg) + 4) + struct.pack(">I", 0) + msg
    with RawClient(broker.port) as c:
        c.send_bytes(_legacy_produce_frame(version, 41, topic_name, message_set))
        frame = c.read_frame()
        # The connection stays usable: a Metadata request right after is answered.
        c.send(3, 12, correlation_id=42, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        corr2, _ = c.read_response(3, 12)
    (corr,) = struct.unpack_from(">i", frame, 0)
    body = frame[4:]
    pos = 4
    (nlen,) = struct.unpack_from(">h", body, pos)
    assert body[pos + 2 : pos + 2 + nlen].decode() == topic_name
    pos += 2 + nlen + 4
    index, error, base_offset = struct.unpack_from(">ihq", body, pos)
    pos += 14 + (8 if version >= 2 else 0) + (4 if version >= 1 else 0)
    assert (corr, corr2, index, error, base_offset) == (41, 42, 0, ErrorCode.invalid_record, -1)
    assert pos == len(body), "response layout does not match the request version"
    assert ck_read_to_end(broker.bootstrap, topic_name) == []


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6])
def test_find_coordinator_names_this_broker_for_groups(broker, version):
    if version < 4:
        fields = {"key": "g1", "key_type": 0}
    else:
        fields = {"key_type": 0, "coordinator_keys": ("g1", "g2")}
    with RawClient(broker.port) as c:
        c.send(10, version, correlation_id=9, **fields)
        corr, resp = c.read_response(10, version)
    assert corr == 9
    if version < 4:
        got = [(resp.error_code, resp.node_id, resp.host, resp.port)]
    else:
        assert [c.key for c in resp.coordinators] == ["g1", "g2"]
        got = [(c.error_code, c.node_id, c.host, c.port) for c in resp.coordinators]
    assert set(got) == {(ErrorCode.none, 1, "127.0.0.1", broker.port)}


def test_find_coordinator_for_transactions_answers_the_state_partition_leader(broker):
    with RawClient(broker.port) as c:
        c.send(10, 4, correlation_id=3, key_type=1, coordinator_keys=("tx",))
        _, resp = c.read_response(10, 4)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in resp.coordinators] == [
        ("tx", ErrorCode.none, 1, broker.port)
    ]
