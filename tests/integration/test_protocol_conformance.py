"""Conformance sweep: every (API key, version) the broker advertises is answered in that version's layout.

The table comes from the running broker's own ApiVersions answer, so a new
handler or version is covered without new test code. For each entry a raw
request is built from kio's schema for exactly that version with minimal
content -- one element in every array, the field's default or zero elsewhere,
names pointing at a real topic and group -- and sent over a real socket. The
answer must arrive (no closed connection), decode with that version's response
schema consuming every byte, and carry Kafka error codes. Then a request at a
version outside the table gets the connection closed (Kafka 3.9's answer) and a
single WARNING naming the client.
"""

from __future__ import annotations

import struct
from dataclasses import fields, is_dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kavka.protocol import api
from kavka.protocol.framing import encode_request, skip_tagged_fields
from tests.integration.helpers import ck_admin, ck_create_topic
from tests.raw_client import TOPIC, RawClient, request_bytes
from tests.wait import wait_until


def _error_codes(entity: Any) -> list[ErrorCode]:
    out: list[ErrorCode] = []
    if isinstance(entity, tuple):
        for e in entity:
            out += _error_codes(e)
    elif is_dataclass(entity):
        for f in fields(entity):
            v = getattr(entity, f.name)
            if f.name == "error_code" or f.name.endswith("_error_code"):  # AddPartitionsToTxn v0-v3
                out.append(ErrorCode(v))
            else:
                out += _error_codes(v)
    return out


def _legacy_produce_errors(body: bytes, version: int) -> list[ErrorCode]:
    """Produce v0/v1 responses (no kio schema): topics[name, partitions[index, error, base_offset]], v1: throttle."""
    pos, errors = 0, []
    (n_topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(n_topics):
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + n
        (n_parts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(n_parts):
            _idx, err, _off = struct.unpack_from(">ihq", body, pos)
            errors.append(ErrorCode(err))
            pos += 14
    if version >= 1:
        pos += 4
    assert pos == len(body), f"Produce v{version} response has {len(body) - pos} trailing bytes"
    return errors


def _decode_response(key: int, version: int, frame: bytes) -> list[ErrorCode]:
    pos = 4  # correlation id
    if api.response_header_flexible(key, version):
        pos = skip_tagged_fields(frame, pos)
    if key == api.ApiKey.PRODUCE and version < 2:
        return _legacy_produce_errors(frame[pos:], version)
    schema = api.response_schema(key, max(version, 3) if key == api.ApiKey.PRODUCE else version)
    entity, size = entity_reader(schema)(memoryview(frame), pos)
    assert pos + size == len(frame), f"{len(frame) - pos - size} bytes after the {schema.__name__} v{version} body"
    return _error_codes(entity)


def _advertised(port: int) -> list[tuple[int, int, int]]:
    with RawClient(port, timeout=30) as c:
        c.send_bytes(request_bytes(18, 0, 1))
        frame = c.read_frame()
    _corr, = struct.unpack_from(">i", frame, 0)
    entity, _ = entity_reader(api.response_schema(18, 0))(memoryview(frame), 4)
    return [(k.api_key, k.min_version, k.max_version) for k in entity.api_keys]


def test_every_advertised_version_is_answered_in_its_layout(broker_factory):
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    b.start()
    ck_create_topic(ck_admin(b.bootstrap), TOPIC, 1)
    table = _advertised(b.port)
    assert len(table) >= 25
    failures: list[str] = []
    answered = 0
    for key, lo, hi in table:
        for version in range(lo, hi + 1):
            with RawClient(b.port, timeout=30) as c:
                c.send_bytes(request_bytes(key, version, 7))
                try:
                    frame = c.read_frame()
                    (corr,) = struct.unpack_from(">i", frame, 0)
                    assert corr == 7
                    codes = _decode_response(key, version, frame)
                    assert codes, "no error_code in the response"
                    answered += 1
                except Exception as e:  # collected: one run names every failing (key, version)
                    failures.append(f"{api.ApiKey(key).name} v{version}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)
    assert answered == sum(hi - lo + 1 for _, lo, hi in table)
    assert b.alive()
    assert "Traceback" not in b.log_text()


def test_unadvertised_version_closes_only_that_connection_and_warns_once(broker_factory):
    b = broker_factory()
    b.start()
    lo, hi = api.SUPPORTED[api.ApiKey.METADATA]
    for attempt in range(3):
        with RawClient(b.port, timeout=30, client_id="old-app") as c:
            # KIP-511 software name first, so the warning can name it.
            c.send(18, 3, _minimal_api_versions(), correlation_id=1)
            c.read_frame()
            c.send_bytes(encode_request(api_key=3, api_version=hi + 1, correlation_id=2, client_id="old-app", body=b"\x00" * 8,
                                        flexible=True))
            try:
                data = c.sock.recv(1)
            except ConnectionResetError:
                data = b""
            assert data == b"", f"attempt {attempt}: the broker answered an unadvertised version"
    wait_until(lambda: "unsupported API key 3 version" in b.log_text(), message="the warning")
    lines = [ln for ln in b.log_text().splitlines() if "unsupported API key 3 version" in ln]
    assert len(lines) == 1, lines
    assert "WARNING" in lines[0] and "'old-app'" in lines[0] and "conformance-sw 9.9" in lines[0]
    assert b.alive()


def _minimal_api_versions() -> Any:
    cls = api.request_schema(18, 3)
    return cls(client_software_name="conformance-sw", client_software_version="9.9")
