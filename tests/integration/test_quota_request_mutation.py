"""The request quota (KIP-124, `request_percentage`) and the controller mutation quota (KIP-599,
`controller_mutation_rate`) enforced by a real `kavka server`, driven by raw requests, and the
quota sensors on its Prometheus endpoint.

The broker samples over `quota.window.num=2` windows of `quota.window.size.seconds=1`, so a quota
bites within a second or two, and a controller mutation bucket holds 2 windows' worth of tokens
(5 partitions/s: a burst of 10). Assertions hold on a loaded 2-core machine: they check the
direction of an effect with wide margins, never a precise duration.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from kavka.client.admin import AdminClient as KavkaAdmin
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested
from tests.broker_harness import BrokerProcess
from tests.integration.helpers import scrape
from tests.raw_client import RawClient
from tests.wait import wait_until

THROTTLED = ErrorCode.throttling_quota_exceeded


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("quotas2"),
        overrides={
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
            "metrics.prometheus.port": "0",
            "num.partitions": "1",
        },
    )
    b.format()
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()


def metrics_port(b: BrokerProcess) -> int:
    m = wait_until(lambda: re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", b.log_text()), 10,
                   message="the metrics endpoint in the broker log")
    return int(m.group(1))


def set_quota(b: BrokerProcess, entity, key: str, value: float | None) -> None:
    with KavkaAdmin(b.bootstrap) as admin:
        admin.alter_client_quotas([(entity, [(key, value)])])


def throttle_ms(resp) -> int:
    return int(resp.throttle_time.total_seconds() * 1000)


def metadata(c: RawClient):
    """One cheap request: Metadata v12 for no topic."""
    return c.call(ApiKey.METADATA, 12, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def flood(c: RawClient, seconds: float) -> list[tuple[float, int]]:
    """Metadata requests back to back for `seconds`: (when answered, throttle_time_ms) of each."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append((time.monotonic(), throttle_ms(metadata(c))))
    return out


def test_request_percentage_throttles_a_flooding_client_and_not_another(broker):
    port = metrics_port(broker)
    with RawClient(broker.port, client_id="flooder") as c:
        baseline = flood(c, 1.5)
    assert all(t == 0 for _, t in baseline)  # no quota yet
    baseline_rate = len(baseline) / 1.5
    # 1% of the event loop for client-id "flooder": Metadata back to back uses far more.
    set_quota(broker, [("client-id", "flooder")], "request_percentage", 1.0)
    bystander: list[tuple[float, int]] = []

    def other_client() -> None:
        with RawClient(broker.port, client_id="bystander") as b:
            bystander.extend(flood(b, 3.0))

    t = threading.Thread(target=other_client)
    with RawClient(broker.port, client_id="flooder") as c:
        t.start()
        throttled = flood(c, 5.0)
        t.join(30)
    times = [ms for _, ms in throttled]
    assert max(times) > 0, times[:20]
    assert max(times) <= 1000  # capped at one window (Kafka's ClientRequestQuotaManager)
    # The mute holds the flooder back: its rate over the last 3 s falls far below its baseline.
    start = throttled[0][0]
    late = [w for w, _ in throttled if w >= start + 2.0]
    assert len(late) / 3.0 < baseline_rate / 4, (len(late), baseline_rate)
    # The other client, on the same broker at the same time, is never throttled.
    assert bystander and all(ms == 0 for _, ms in bystander), bystander[:5]
    # Kafka's Request sensor, per user and client id, on the Prometheus endpoint.
    m = scrape(port)
    labels = (("client_id", "flooder"), ("user", ""))
    assert m[("kafka_server_request_throttle_time", labels)] > 0
    assert m[("kafka_server_request_request_time", labels)] > 0
    assert ("kafka_server_request_request_time", (("client_id", "bystander"), ("user", ""))) not in m  # no quota: no sensor
    set_quota(broker, [("client-id", "flooder")], "request_percentage", None)


def create_topics_request(version: int, names: list[str], partitions: int):
    req_cls = api.request_schema(ApiKey.CREATE_TOPICS, version)
    topic_cls = nested(req_cls, "CreatableTopic")
    topics = tuple(make(topic_cls, name=n, num_partitions=partitions, replication_factor=1, assignments=(), configs=()) for n in names)
    return make(req_cls, topics=topics, timeout=timedelta(seconds=15), validate_only=False)


def delete_topics_request(version: int, names: list[str]):
    return make(api.request_schema(ApiKey.DELETE_TOPICS, version), topic_names=tuple(names), timeout=timedelta(seconds=15))


def create_partitions_request(version: int, name: str, count: int):
    req_cls = api.request_schema(ApiKey.CREATE_PARTITIONS, version)
    topic = make(nested(req_cls, "CreatePartitionsTopic"), name=name, count=count, assignments=None)
    return make(req_cls, topics=(topic,), timeout=timedelta(seconds=15), validate_only=False)


def test_controller_mutation_rate_strict_and_permissive(broker):
    port = metrics_port(broker)
    # 5 partitions/s with a burst of 10 (2 windows of 1 s) for client-id "mutator".
    set_quota(broker, [("client-id", "mutator")], "controller_mutation_rate", 5.0)
    names = [f"mut-{i}" for i in range(5)]
    with RawClient(broker.port, client_id="mutator") as c:
        # CreateTopics v7 (strict since v6): 9 partitions each. mut-0 (10 -> 1), mut-1 (within
        # quota at its start: taken whole, 1 -> -8); mut-2, mut-3 and mut-4 refused.
        resp = c.call(ApiKey.CREATE_TOPICS, 7, create_topics_request(7, names, 9))
        created_at = time.monotonic()
    errors = {t.name: t.error_code for t in resp.topics}
    assert errors == {"mut-0": 0, "mut-1": 0, "mut-2": THROTTLED, "mut-3": THROTTLED, "mut-4": THROTTLED}, errors
    assert [t.error_message for t in resp.topics if t.name == "mut-3"] == ["The throttling quota has been exceeded."]
    assert 0 < throttle_ms(resp) <= 1600  # -8 tokens at 5/s, less the time since
    # Another client of the same user is not limited (the quota is per client id).
    with RawClient(broker.port, client_id="other") as c:
        resp = c.call(ApiKey.CREATE_TOPICS, 7, create_topics_request(7, ["other-0", "other-1", "other-2"], 8))
    assert [t.error_code for t in resp.topics] == [0, 0, 0] and throttle_ms(resp) == 0

    # A strict DeleteTopics (v5) once the bucket is back at zero or above: mut-1 left it at -8 and
    # it refills at 5/s, so 1.6 s after that answer at the latest (a lower bound: a later start
    # only refills more, to at most the burst of 10). mut-0 (9) is taken whatever the tokens in
    # [0, 10]; other-2 (8 more after 9 + 9) never is.
    time.sleep(max(0.0, created_at + 1.7 - time.monotonic()))
    with RawClient(broker.port, client_id="mutator") as c:
        resp = c.call(ApiKey.DELETE_TOPICS, 5, delete_topics_request(5, ["mut-0", "mut-1", "other-2"]))
    deleted = {r.name: r.error_code for r in resp.responses}
    assert deleted["mut-0"] == 0 and deleted["other-2"] == THROTTLED, deleted
    assert throttle_ms(resp) > 0

    # Older versions are permissive: CreatePartitions v2 takes its partitions even below zero and
    # only throttles; v3 (strict) is refused while the bucket is below zero.
    with RawClient(broker.port, client_id="mutator") as c:
        resp = c.call(ApiKey.CREATE_PARTITIONS, 2, create_partitions_request(2, "other-0", 20))
        assert resp.results[0].error_code == 0 and throttle_ms(resp) > 1000  # 12 more partitions
    with RawClient(broker.port, client_id="mutator") as c:
        resp = c.call(ApiKey.CREATE_PARTITIONS, 3, create_partitions_request(3, "other-1", 9))
        assert resp.results[0].error_code == THROTTLED and throttle_ms(resp) > 0
    # Kafka's ControllerMutation sensor on the Prometheus endpoint.
    m = scrape(port)
    labels = (("client_id", "mutator"), ("user", ""))
    assert m[("kafka_server_controllermutation_throttle_time", labels)] > 0
    assert m[("kafka_server_controllermutation_mutation_rate", labels)] > 0
    set_quota(broker, [("client-id", "mutator")], "controller_mutation_rate", None)


def test_byte_rate_sensors_are_exported_and_expire(broker):
    port = metrics_port(broker)
    set_quota(broker, [("user", "ANONYMOUS"), ("client-id", "meter")], "producer_byte_rate", 1000)
    with RawClient(broker.port, client_id="meter") as c:
        resp = c.call(ApiKey.CREATE_TOPICS, 7, create_topics_request(7, ["meter-t"], 1))
        assert resp.topics[0].error_code in (0, ErrorCode.topic_already_exists)
    from tests.integration.test_quota_enforcement import raw_produce

    def led() -> bool:
        with RawClient(broker.port, client_id="meter") as c:
            return raw_produce(c, "meter-t", 5000)[0] == ErrorCode.none
    wait_until(led, 10, message="a produce to meter-t")
    m = scrape(port)
    labels = (("client_id", "meter"), ("user", "ANONYMOUS"))
    assert m[("kafka_server_produce_byte_rate", labels)] > 0
    assert m[("kafka_server_produce_throttle_time", labels)] > 0  # 5 KB at 1 KB/s
    # Idle for longer than the windows: no longer exported (bounded label cardinality).
    wait_until(lambda: ("kafka_server_produce_byte_rate", labels) not in scrape(port), 10,
               message="the idle sensor dropped from the endpoint")
    set_quota(broker, [("user", "ANONYMOUS"), ("client-id", "meter")], "producer_byte_rate", None)
