import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader

from kavka.protocol import api
from kavka.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    ProtocolError,
    decode_body,
    encode_entity,
    encode_request,
    encode_response,
    read_request_header,
    read_response,
)
from kavka.protocol.legacy import (
    LEGACY_PRODUCE_VERSIONS,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    as_produce_v3_body,
    encode_legacy_produce_response,
)
from kavka.protocol.produce_wire import all_failed
from tests.schema_bodies import non_null_violations


def test_decoder_splits_frames_across_arbitrary_chunks():
    frames = [b"a" * n for n in (0, 1, 7, 300)]
    wire = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for chunk in (1, 3, 5, len(wire)):
        dec = FrameDecoder(1000)
        got = []
        for i in range(0, len(wire), chunk):
            got += [bytes(f) for f in dec.feed(wire[i : i + chunk])]
        assert got == frames


@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_decoder_copies_a_frame_only_when_it_spans_chunks(frames, cuts):
    """Any chunking gives the frames back in order; a frame inside one chunk is a view of that
    chunk (no copy), one that spans chunks is joined once into a writable buffer of its own."""
    wire = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    chunks, i = [], 0
    while i < len(wire):
        step = cuts[len(chunks) % len(cuts)]
        chunks.append(wire[i : i + step])
        i += step
    dec = FrameDecoder(1000)
    got = []
    for chunk in chunks:
        for f in dec.feed(chunk):
            got.append(f)
            if f.readonly:
                assert f.obj is chunk  # a view, not a copy
            else:
                assert isinstance(f.obj, bytearray) and len(f.obj) == len(f)
    assert [bytes(f) for f in got] == frames
    assert dec.pending_frame_size() is None


def test_oversized_frame_refused_from_its_prefix_alone():
    dec = FrameDecoder(1024)
    with pytest.raises(FrameTooLargeError) as e:
        dec.feed(struct.pack(">i", 2**31 - 1))  # no body sent, nothing buffered
    assert e.value.size == 2**31 - 1


def test_negative_size_refused():
    with pytest.raises(ProtocolError):
        FrameDecoder(1024).feed(struct.pack(">i", -5))


@pytest.mark.parametrize("version", [0, 3])
def test_request_roundtrip_through_header_and_body(version):
    cls = api.request_schema(api.ApiKey.API_VERSIONS, version)
    kwargs = {"client_software_name": "x", "client_software_version": "1"} if version >= 3 else {}
    body = encode_entity(cls(**kwargs))
    flexible = api.is_flexible(18, version)
    wire = encode_request(api_key=18, api_version=version, correlation_id=42, client_id="me", body=body, flexible=flexible)
    (frame,) = FrameDecoder(1 << 20).feed(wire)
    hdr = read_request_header(frame, flexible=flexible)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, version, 42, "me")
    assert decode_body(cls, frame, hdr.header_size) == cls(**kwargs)


def test_a_response_split_across_reads_decodes():
    """A frame joined from several reads is writable (a bytearray); kio's native reader wants a
    read-only buffer (CI: every SASL handshake over TLS, whose reads are small, failed)."""
    cls = api.response_schema(api.ApiKey.SASL_HANDSHAKE, 1)
    body = encode_entity(cls(error_code=__import__("kio.schema.errors", fromlist=["ErrorCode"]).ErrorCode.none,
                             mechanisms=("PLAIN", "SCRAM-SHA-512")))
    wire = encode_response(9, body, flexible_header=False)
    decoder = FrameDecoder(1 << 20)
    frames = [f for i in range(len(wire)) for f in decoder.feed(wire[i : i + 1])]
    assert len(frames) == 1 and not frames[0].readonly
    corr, resp = read_response(frames[0], cls, flexible_header=False)
    assert corr == 9 and resp.mechanisms == ("PLAIN", "SCRAM-SHA-512")


def test_response_header_v0_for_api_versions_and_v1_for_flexible():
    assert api.response_header_flexible(18, 3) is False
    assert api.response_header_flexible(3, 12) is True
    assert api.response_header_flexible(3, 8) is False
    cls = api.response_schema(3, 12)
    body = encode_entity(cls(throttle_time=__import__("datetime").timedelta(0), brokers=(), cluster_id="c", controller_id=1, topics=()))
    wire = encode_response(7, body, flexible_header=True)
    (frame,) = FrameDecoder(1 << 20).feed(wire)
    corr, resp = read_response(frame, cls, flexible_header=True)
    assert corr == 7 and resp.cluster_id == "c"


@given(st.binary(max_size=200))
def test_garbage_bodies_raise_protocol_error_only(data):
    cls = api.request_schema(api.ApiKey.METADATA, 12)
    try:
        decode_body(cls, data, 0)
    except ProtocolError:
        pass


def _legacy(key: int, version: int) -> bool:
    """Produce v0-v2 have no kio schema: they are decoded as v3 (protocol.legacy)."""
    return key == api.ApiKey.PRODUCE and version in LEGACY_PRODUCE_VERSIONS


def test_supported_table_is_within_kio_and_has_the_required_apis():
    for key in (0, 1, 2, 3, 10, 18, 19, 20, 21, 22, 23, 32, 33, 37, 44, 60):
        lo, hi = api.SUPPORTED[key]
        assert lo <= hi
        api.request_schema(key, hi)
        api.response_schema(key, 3 if _legacy(key, lo) else lo)


_ALL_SCHEMAS = [
    (k, v) for k, (lo, hi) in sorted(api.SUPPORTED.items()) for v in range(lo, hi + 1) if not _legacy(k, v)
]


def test_legacy_produce_body_decodes_as_v3_and_answers_in_its_own_layout():
    # v0-v2 body: acks, timeout_ms, [topic name, [partition index, records]] (v3 without transactional_id)
    body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    body += struct.pack(">i", 7) + struct.pack(">i", 3) + b"abc"
    req = decode_body(api.request_schema(0, 3), as_produce_v3_body(body, 0), 0)
    assert req.transactional_id is None and req.acks == 1
    assert [(t.name, [(p.index, bytes(p.records)) for p in t.partition_data]) for t in req.topic_data] == [
        ("t", [(7, b"abc")])
    ]
    resp = all_failed(req, UNSUPPORTED_FOR_MESSAGE_FORMAT)  # what the handler answers v0-v2
    part = struct.pack(">ihq", 7, 43, -1)
    head = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    assert encode_legacy_produce_response(0, resp) == head + part
    assert encode_legacy_produce_response(1, resp) == head + part + struct.pack(">i", 0)
    v2 = encode_legacy_produce_response(2, resp)
    assert v2 == head + part + struct.pack(">q", -1) + struct.pack(">i", 0)
    # v2 has exactly the v3 layout, so kio reads it back with the v3 schema.
    back, _ = entity_reader(api.response_schema(0, 3))(v2, 0)
    assert back.responses[0].partition_responses[0].error_code == 43


@given(st.sampled_from(_ALL_SCHEMAS), st.binary(max_size=120))
def test_any_body_for_any_supported_request_is_decoded_or_refused(kv, data):
    """kio's native decoder aborts the process on absurd array lengths; the guard must refuse them first.
    What it lets through has every non-nullable field non-null (issue 25)."""
    cls = api.request_schema(*kv)
    try:
        request = decode_body(cls, data, 0)
    except ProtocolError:
        return
    assert non_null_violations(cls, request) == []


def test_huge_array_length_is_refused_not_allocated():
    # MetadataRequest v12: compact array length 2**35 in 5 varint bytes.
    body = bytes([0x80, 0x80, 0x80, 0x80, 0x7F])
    with pytest.raises(ProtocolError, match="overruns"):
        decode_body(api.request_schema(3, 12), body, 0)
    body = struct.pack(">i", 2**31 - 1)  # legacy array, Metadata v4
    with pytest.raises(ProtocolError, match="overruns"):
        decode_body(api.request_schema(3, 4), body, 0)
