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
from kavka.protocol.framing import encode_entity, encode_request, read_response
from kavka.protocol.messages import make


def _connect(broker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _recv_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    return _recv_exact(s, size)


def _request(key: int, version: int, corr: int, **fields) -> bytes:
    body = encode_entity(make(api.request_schema(key, version), **fields))
    return encode_request(api_key=key, api_version=version, correlation_id=corr, client_id="raw", body=body, flexible=api.is_flexible(key, version))


def _api_versions(broker, version: int = 3, corr: int = 1):
    with _connect(broker) as s:
        fields = {"client_software_name": "raw", "client_software_version": "1"} if version >= 3 else {}
        s.sendall(_request(18, version, corr, **fields))
        frame = _recv_frame(s)
    return read_response(frame, api.response_schema(18, min(version, api.SUPPORTED[18][1])), flexible_header=False)


def _closed_by_peer(s: socket.socket, timeout: float = 10.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(broker, version):
    corr, resp = _api_versions(broker, version, corr=77)
    assert corr == 77
    assert resp.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == api.SUPPORTED


def test_api_versions_too_new_falls_back_to_v0_with_unsupported_version(broker):
    with _connect(broker) as s:
        # ApiVersions v99: the body is unknown to us, the header is enough (KIP-511).
        payload = struct.pack(">hhih", 18, 99, 5, 3) + b"raw" + b"\x00" + b"\x00garbage"
        s.sendall(struct.pack(">i", len(payload)) + payload)
        frame = _recv_frame(s)
    corr, resp = read_response(frame, api.response_schema(18, 0), flexible_header=False)
    assert corr == 5
    assert resp.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in resp.api_keys} == set(api.SUPPORTED)


def test_pipelined_requests_are_answered_in_order(broker):
    reqs = []
    expected = []
    for i in range(60):
        if i % 3 == 0:
            reqs.append(_request(18, 3, i, client_software_name="raw", client_software_version="1"))
            expected.append((i, 18, 3))
        else:
            reqs.append(_request(3, 12, i, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            expected.append((i, 3, 12))
    with _connect(broker) as s:
        s.sendall(b"".join(reqs))  # all at once: the broker reads ahead
        for corr, key, version in expected:
            frame = _recv_frame(s)
            got_corr, resp = read_response(frame, api.response_schema(key, version), flexible_header=api.response_header_flexible(key, version))
            assert got_corr == corr
            if key == 3:
                assert resp.brokers[0].port == broker.port


def test_oversized_frame_is_refused_without_reading_it(broker):
    with _connect(broker) as s:
        s.sendall(struct.pack(">i", 2**31 - 1))  # 2 GiB announced, nothing sent
        assert _closed_by_peer(s)
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
    bystander = _connect(broker)
    with _connect(broker) as s:
        s.sendall(payload)
        assert _closed_by_peer(s)
    # the other client is unaffected and the broker still answers
    bystander.sendall(_request(18, 3, 9, client_software_name="raw", client_software_version="1"))
    corr, _ = read_response(_recv_frame(bystander), api.response_schema(18, 3), flexible_header=False)
    assert corr == 9
    bystander.close()
    assert broker.alive()


def _valid_frames() -> list[bytes]:
    return [
        _request(18, 3, 1, client_software_name="f", client_software_version="1"),
        _request(3, 12, 2, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        _request(3, 4, 3, topics=None, allow_auto_topic_creation=False),
        _request(2, 7, 4, replica_id=-1, isolation_level=0, topics=()),
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_frames_never_hurt_the_broker(broker, data):
    """Random and mutated frames: each gets an answer or a closed connection; the broker lives on."""
    base = data.draw(st.sampled_from(_valid_frames()))
    kind = data.draw(st.sampled_from(["flip", "truncate", "extend", "random"]))
    frame = bytearray(base)
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(4, len(frame) - 1))
            frame[i] = data.draw(st.integers(0, 255))
    elif kind == "truncate":
        cut = data.draw(st.integers(5, len(frame)))
        frame = frame[:cut]
        frame[0:4] = struct.pack(">i", len(frame) - 4)
    elif kind == "extend":
        frame += data.draw(st.binary(min_size=1, max_size=64))
        frame[0:4] = struct.pack(">i", len(frame) - 4)
    else:
        body = data.draw(st.binary(min_size=0, max_size=200))
        frame = bytearray(struct.pack(">i", len(body)) + body)
    with _connect(broker) as s:
        s.settimeout(5)
        try:
            s.sendall(bytes(frame))
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, TimeoutError):
            pass
    assert broker.alive(), broker.log_text()


def test_broker_still_serves_after_a_storm_of_garbage(broker):
    rng = random.Random(7)
    for _ in range(200):
        with _connect(broker) as s:
            try:
                s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))))
            except OSError:
                pass
    corr, resp = _api_versions(broker, 3, corr=123)
    assert corr == 123 and resp.error_code == ErrorCode.none
    assert broker.alive()
