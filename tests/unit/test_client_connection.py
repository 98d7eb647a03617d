"""BlockingConnection and AdminClient against a scripted in-process broker.

The fake broker speaks real frames (protocol.framing + kio) on a loopback
socket, advertises a chosen version table and answers with handlers given
per test, so the handshake fallback and per-version request building are
checked end to end without a kavka broker process.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kavka.client.admin import AdminClient, NewTopic
from kavka.client.connection import BlockingConnection, parse_host_port
from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError
from kavka.protocol import api
from kavka.protocol.framing import (
    FrameDecoder,
    decode_body,
    encode_entity,
    encode_response,
    peek_request_header,
    read_request_header,
)
from kavka.protocol.messages import NO_THROTTLE, make, nested

Handler = Callable[[int, Any], Any]


class FakeBroker:
    """Accepts connections on 127.0.0.1 and answers each request with `handlers[api_key]`."""

    def __init__(
        self, versions: dict[int, tuple[int, int]], handlers: dict[int, Handler] | None = None
    ) -> None:
        self.versions = versions
        self.handlers = handlers or {}
        self.seen: list[tuple[int, int]] = []  # (api_key, api_version) of every request
        self.close_on: int | None = None  # api key whose request makes us hang up
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder(1 << 20)
        with conn:
            while data := conn.recv(65536):
                for frame in decoder.feed(data):
                    out = self._answer(frame)
                    if out is None:
                        return
                    conn.sendall(out)

    def _answer(self, frame: memoryview) -> bytes | None:
        key, version, _ = peek_request_header(frame)
        self.seen.append((key, version))
        if key == self.close_on:
            return None
        lo, hi = self.versions.get(key, (0, -1))
        if key == 18 and not lo <= version <= hi:
            # KIP-511: refuse with a v0 body listing what we speak.
            header = read_request_header(frame, flexible=False)
            return encode_response(
                header.correlation_id,
                encode_entity(self._api_versions(0, ErrorCode.unsupported_version)),
                flexible_header=False,
            )
        header = read_request_header(frame, flexible=api.is_flexible(key, version))
        request = decode_body(api.request_schema(key, version), frame, header.header_size)
        response = (
            self._api_versions(version, ErrorCode.none)
            if key == 18
            else self.handlers[key](version, request)
        )
        return encode_response(
            header.correlation_id,
            encode_entity(response),
            flexible_header=api.response_header_flexible(key, version),
        )

    def _api_versions(self, version: int, error: ErrorCode) -> Any:
        cls = api.response_schema(18, version)
        keys = tuple(
            make(nested(cls, "ApiVersion"), api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in self.versions.items()
        )
        return make(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() thread
        except OSError:
            pass
        self._sock.close()


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeBroker]]:
    made: list[FakeBroker] = []

    def make_broker(
        versions: dict[int, tuple[int, int]] | None = None,
        handlers: dict[int, Handler] | None = None,
    ) -> FakeBroker:
        b = FakeBroker(versions or dict(api.SUPPORTED), handlers)
        made.append(b)
        return b

    yield make_broker
    for b in made:
        b.close()


# ------------------------------------------------------------------ connection


def test_handshake_reads_the_broker_table_and_picks_common_versions(fake) -> None:  # noqa: ANN001
    b = fake({18: (0, 4), 3: (0, 5), 19: (3, 20)})
    with BlockingConnection("127.0.0.1", b.port) as conn:
        assert b.seen == [(18, 3)]
        assert conn.broker_versions == {18: (0, 4), 3: (0, 5), 19: (3, 20)}
        assert conn.pick_version(3) == 5
        assert conn.pick_version(19) == api.SUPPORTED[19][1]
        assert conn.pick_version(3, 2) == 2
        with pytest.raises(KafkaProtocolError, match="broker does not support"):
            conn.pick_version(60)
        assert int(conn.request_class(3, 4).__version__) == 4


def test_handshake_retries_when_the_broker_refuses_v3(fake) -> None:  # noqa: ANN001
    b = fake({18: (0, 2), 3: (0, 9)})
    with BlockingConnection("127.0.0.1", b.port) as conn:
        assert b.seen == [(18, 3), (18, 2)]
        assert conn.broker_versions[3] == (0, 9)


def test_handshake_falls_back_to_v0_when_the_refusal_lists_no_api_versions(fake) -> None:  # noqa: ANN001
    b = fake({3: (0, 9), 18: (5, 9)})  # an odd broker: lists ApiVersions only above what we speak
    with pytest.raises(KafkaProtocolError, match="ApiVersions v0"):
        BlockingConnection("127.0.0.1", b.port)
    assert b.seen == [(18, 3), (18, 0)]


def test_send_decodes_the_version_it_sent(fake) -> None:  # noqa: ANN001
    def describe_cluster(version: int, request: Any) -> Any:
        cls = api.response_schema(60, version)
        broker = make(nested(cls, "DescribeClusterBroker"), broker_id=7, host="h", port=1, rack="r")
        return make(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=1,
            cluster_id="cid",
            controller_id=7,
            brokers=(broker,),
            cluster_authorized_operations=0,
        )

    b = fake({18: (0, 3), 60: (0, 0)}, {60: describe_cluster})
    with AdminClient(f"127.0.0.1:{b.port}") as admin:
        d = admin.describe_cluster()
    assert (60, 0) in b.seen
    assert d.cluster_id == "cid" and d.controller_id == 7 and d.brokers[0].rack == "r"


def test_broken_connections_raise_connection_errors(fake) -> None:  # noqa: ANN001
    b = fake()
    b.close_on = 3
    conn = BlockingConnection("127.0.0.1", b.port, timeout_s=5)
    from kavka.client import requests

    with pytest.raises(KafkaConnectionError, match="closed the connection"):
        conn.send(requests.metadata(conn.pick_version(3), None))
    assert conn.closed
    with pytest.raises(KafkaConnectionError, match="is closed"):
        conn.send(requests.metadata(1, None))
    port = b.port
    b.close()
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        BlockingConnection("127.0.0.1", port, timeout_s=5)


def test_admin_tries_each_bootstrap_address(fake) -> None:  # noqa: ANN001
    b = fake({18: (0, 3), 3: (0, 12)}, {3: _metadata_handler([])})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with AdminClient(f"127.0.0.1:{dead},127.0.0.1:{b.port}") as admin:
        assert admin.list_topics() == []
    with AdminClient(f"127.0.0.1:{dead}") as admin, pytest.raises(KafkaConnectionError):
        admin.list_topics()


def test_parse_host_port() -> None:
    assert parse_host_port("h:1") == ("h", 1)
    assert parse_host_port("h") == ("h", 9092)
    assert parse_host_port("[::1]:5") == ("::1", 5)
    for bad in (":1", "h:x", "h:70000"):
        with pytest.raises(ValueError):
            parse_host_port(bad)


# ------------------------------------------------------------------ admin over old and new versions


def _metadata_handler(
    topics: list[tuple[str, int, int]], *, error: dict[str, ErrorCode] | None = None
) -> Handler:
    """topics: (name, partitions, leader)."""

    def handle(version: int, request: Any) -> Any:
        cls = api.response_schema(3, version)
        tcls, pcls, bcls = (
            nested(cls, "MetadataResponseTopic"),
            nested(cls, "MetadataResponsePartition"),
            nested(cls, "MetadataResponseBroker"),
        )
        wanted = None if not request.topics else [t.name for t in request.topics]
        if version >= 4:
            assert request.allow_auto_topic_creation is False
        out = []
        for name, n, leader in topics:
            if wanted is not None and name not in wanted:
                continue
            parts = tuple(
                make(
                    pcls,
                    error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
                    partition_index=p,
                    leader_id=leader,
                    leader_epoch=3,
                    replica_nodes=(1,),
                    isr_nodes=(1,) if leader >= 0 else (),
                    offline_replicas=(),
                )
                for p in reversed(range(n))
            )
            out.append(
                make(
                    tcls,
                    error_code=ErrorCode.none,
                    name=name,
                    topic_id=None,
                    is_internal=False,
                    partitions=parts,
                    topic_authorized_operations=0,
                )
            )
        for name in wanted or []:
            if name in (error or {}):
                out.append(
                    make(
                        tcls,
                        error_code=error[name],
                        name=name,
                        topic_id=None,
                        is_internal=False,
                        partitions=(),
                        topic_authorized_operations=0,
                    )
                )
        brokers = (make(bcls, node_id=1, host="127.0.0.1", port=0, rack=None),)
        return make(
            cls,
            throttle_time=NO_THROTTLE,
            brokers=brokers,
            cluster_id="c",
            controller_id=1,
            topics=tuple(out),
            cluster_authorized_operations=0,
        )

    return handle


@pytest.mark.parametrize("metadata_max", [0, 1, 5, 12])
def test_describe_topics_on_each_metadata_version(fake, metadata_max: int) -> None:  # noqa: ANN001
    b = fake(
        {18: (0, 3), 3: (0, metadata_max)},
        {
            3: _metadata_handler(
                [("b", 2, 1), ("a", 1, -1)], error={"zz": ErrorCode.unknown_topic_or_partition}
            )
        },
    )
    with AdminClient(f"127.0.0.1:{b.port}") as admin:
        got = admin.describe_topics()
        assert [t.name for t in got] == ["a", "b"]
        assert [p.partition for p in got[1].partitions] == [0, 1]
        a = got[0].partitions[0]
        assert (a.leader, a.isr, a.error) == (-1, (), "LEADER_NOT_AVAILABLE")
        assert got[1].topic_id is None and got[1].replication_factor == 1
        assert [t.name for t in admin.describe_topics(["b"])] == ["b"]
        with pytest.raises(KafkaError) as e:
            admin.describe_topics(["zz"])
        assert e.value.name == "UNKNOWN_TOPIC_OR_PARTITION" and e.value.resource == "zz"
    assert (3, metadata_max) in b.seen


def test_create_topics_reports_kafkas_error_name_and_message(fake) -> None:  # noqa: ANN001
    requests_seen: list[Any] = []

    def create(version: int, request: Any) -> Any:
        requests_seen.append(request)
        cls = api.response_schema(19, version)
        res = [
            make(nested(cls, "CreatableTopicResult"), name=t.name, topic_id=None,
                 error_code=ErrorCode.topic_already_exists if t.name == "dup" else ErrorCode.none,
                 error_message="Topic 'dup' already exists." if t.name == "dup" else None,
                 topic_config_error_code=0, num_partitions=t.num_partitions, replication_factor=t.replication_factor, configs=())
            for t in request.topics
        ]  # fmt: skip
        return make(cls, throttle_time=NO_THROTTLE, topics=tuple(res))

    b = fake({18: (0, 3), 19: (0, 4)}, {19: create})
    with AdminClient(f"127.0.0.1:{b.port}") as admin:
        (created,) = admin.create_topics(
            [NewTopic("ok", 3, 1, {"retention.ms": "5"})], validate_only=True, timeout_ms=1234
        )
        assert (created.name, created.num_partitions, created.replication_factor) == ("ok", 3, 1)
        with pytest.raises(KafkaError) as e:
            admin.create_topics([NewTopic("dup", 1, 1)])
    assert (e.value.code, e.value.name, e.value.message) == (
        36,
        "TOPIC_ALREADY_EXISTS",
        "Topic 'dup' already exists.",
    )
    assert (19, 4) in b.seen
    r = requests_seen[0]
    assert r.validate_only is True and r.timeout.total_seconds() == 1.234
    assert [(c.name, c.value) for c in r.topics[0].configs] == [("retention.ms", "5")]


def test_describe_configs_maps_sources_and_defaults(fake) -> None:  # noqa: ANN001
    def describe(version: int, request: Any) -> Any:
        cls = api.response_schema(32, version)
        ccls, scls = (
            nested(cls, "DescribeConfigsResourceResult"),
            nested(cls, "DescribeConfigsSynonym"),
        )
        (res,) = request.resources
        assert (res.resource_type, res.resource_name) == (2, "t")
        configs = (
            make(ccls, name="retention.ms", value="5", read_only=False, config_source=1, is_sensitive=False, config_type=5, documentation="doc",
                 synonyms=(make(scls, name="retention.ms", value="5", source=1), make(scls, name="log.retention.hours", value="168", source=5))),
            make(ccls, name="a.default", value="x", read_only=True, config_source=5, is_sensitive=False, config_type=2, documentation=None, synonyms=()),
        )  # fmt: skip
        result = make(
            nested(cls, "DescribeConfigsResult"),
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=2,
            resource_name="t",
            configs=configs,
        )
        return make(cls, throttle_time=NO_THROTTLE, results=(result,))

    b = fake({18: (0, 3), 32: (0, 4)}, {32: describe})
    with AdminClient(f"127.0.0.1:{b.port}") as admin:
        a, r = admin.describe_configs("topic", "t", include_synonyms=True)
    assert (a.name, a.source, a.is_default, a.is_read_only) == (
        "a.default",
        "DEFAULT_CONFIG",
        True,
        True,
    )
    assert (r.name, r.value, r.source, r.is_default, r.config_type, r.documentation) == (
        "retention.ms",
        "5",
        "DYNAMIC_TOPIC_CONFIG",
        False,
        "LONG",
        "doc",
    )
    assert [s.source for s in r.synonyms] == ["DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"]
