"""The latest-offsets probe of the stream reader: once per trigger, one Fetch per leader, none
under Trigger.AvailableNow.

Spark asks for `latestOffset` and `reportLatestOffset` on every micro-batch; like Spark's Kafka
source (KafkaMicroBatchStream caches latestPartitionOffsets) the reader answers the second from
the first's Metadata + ListOffsets round instead of asking the broker again. The report is the
log end, not the rate-limited end. The high-watermark Fetch that backs ListOffsets(latest) asks
for all of a leader's partitions at once: at the log end the broker holds a Fetch for its
max_wait, so one per partition made every trigger wait once per partition. Under
Trigger.AvailableNow the reader plans up to the offsets found when the query started, as
Spark's Kafka source does (allDataForTriggerAvailableNow), and probes nothing per trigger.
Requests are counted on the client's connections; the broker is real.
"""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from kavka.client.connection import BlockingConnection  # noqa: E402
from kavka.client.fetcher import Fetcher  # noqa: E402
from kavka.protocol.api import ApiKey  # noqa: E402
from kavka.spark.options import parse_source_options  # noqa: E402
from kavka.spark.source import KavkaStreamReader  # noqa: E402
from tests.spark.util import create_topic, produce_per_partition  # noqa: E402


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Requests sent by kavka's blocking client, by API key."""
    sent: Counter = Counter()
    send = BlockingConnection.send

    def counting(self: BlockingConnection, request: object) -> object:
        sent[int(request.__api_key__)] += 1
        return send(self, request)

    monkeypatch.setattr(BlockingConnection, "send", counting)
    return sent


def _reader(bootstrap: str, topic: str, **extra: str) -> KavkaStreamReader:
    return KavkaStreamReader(parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest", **extra},
        streaming=True,
    ))


def test_report_latest_offset_is_the_last_probe(broker, topic_name):  # noqa: ANN001
    create_topic(broker.bootstrap, topic_name, 1)
    produce_per_partition(broker.bootstrap, topic_name, 1, 100)
    reader = _reader(broker.bootstrap, topic_name, maxOffsetsPerTrigger="10")
    try:
        start = reader.initialOffset()
        assert reader.latestOffset(start, ReadMaxRows(10)) == {topic_name: {"0": 10}}
        assert reader.reportLatestOffset() == {topic_name: {"0": 100}}
        produce_per_partition(broker.bootstrap, topic_name, 1, 5)
        assert reader.reportLatestOffset() == {topic_name: {"0": 100}}  # no second probe
        reader.latestOffset(start, ReadMaxRows(10))
        assert reader.reportLatestOffset() == {topic_name: {"0": 105}}
    finally:
        reader.stop()


def test_one_probe_fetch_per_leader_for_all_its_partitions(broker, topic_name, requests):  # noqa: ANN001
    create_topic(broker.bootstrap, topic_name, 4)
    produce_per_partition(broker.bootstrap, topic_name, [0, 1, 3], 7)  # partition 2 stays empty
    reader = _reader(broker.bootstrap, topic_name)
    try:
        start = reader.initialOffset()
        requests.clear()
        latest = reader.latestOffset(start, ReadAllAvailable())
        assert latest == {topic_name: {"0": 7, "1": 7, "2": 0, "3": 7}}
        assert requests[ApiKey.FETCH] == 1, requests  # one broker: one Fetch, not four
        assert requests[ApiKey.LIST_OFFSETS] == 1, requests
    finally:
        reader.stop()


def test_high_watermarks_of_partitions_in_and_out_of_range(broker, topic_name, requests):  # noqa: ANN001
    create_topic(broker.bootstrap, topic_name, 3)
    produce_per_partition(broker.bootstrap, topic_name, [0], 12)
    produce_per_partition(broker.bootstrap, topic_name, [1], 3)
    with Fetcher(broker.bootstrap, max_wait_ms=50, max_partition_fetch_bytes=1) as f:
        requests.clear()
        # at the end, below it, and past it (OFFSET_OUT_OF_RANGE answers the high watermark too)
        hw = f.high_watermarks({(topic_name, 0): 12, (topic_name, 1): 1, (topic_name, 2): 40})
    assert hw == {(topic_name, 0): 12, (topic_name, 1): 3, (topic_name, 2): 0}
    assert requests[ApiKey.FETCH] == 1, requests


def test_available_now_plans_to_its_start_without_probing(broker, topic_name, requests):  # noqa: ANN001
    create_topic(broker.bootstrap, topic_name, 2)
    produce_per_partition(broker.bootstrap, topic_name, 2, 30)
    reader = _reader(broker.bootstrap, topic_name, maxOffsetsPerTrigger="20")
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        produce_per_partition(broker.bootstrap, topic_name, 2, 5)  # after the query started
        requests.clear()
        first = reader.latestOffset(start, ReadMaxRows(20))
        assert first == {topic_name: {"0": 10, "1": 10}}
        second = reader.latestOffset(first, ReadMaxRows(20))
        assert second == {topic_name: {"0": 20, "1": 20}}
        assert reader.latestOffset(second, ReadMaxRows(20)) == {topic_name: {"0": 30, "1": 30}}
        assert reader.reportLatestOffset() == {topic_name: {"0": 30, "1": 30}}
        assert sum(requests.values()) == 0, requests
    finally:
        reader.stop()


@pytest.mark.parametrize("subscription", ["subscribe", "subscribePattern"])
def test_a_trigger_asks_metadata_once_for_all_subscribed_topics(broker, topic_name, requests, subscription):  # noqa: ANN001
    """Three topics: a trigger's probe asks Metadata for all of them at once (the partitions,
    then ListOffsets' leaders), not once per topic, then one ListOffsets and one Fetch (one
    broker). The Fetch's leaders are cached from the first trigger."""
    topics = [f"{topic_name}-{i}" for i in range(3)]
    for i, t in enumerate(topics):
        create_topic(broker.bootstrap, t, i + 1)
        produce_per_partition(broker.bootstrap, t, i + 1, 4)
    value = ",".join(topics) if subscription == "subscribe" else f"{topic_name}-[0-9]"
    reader = KavkaStreamReader(parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, subscription: value, "startingOffsets": "earliest"},
        streaming=True,
    ))
    try:
        start = reader.initialOffset()
        reader.latestOffset(start, ReadAllAvailable())
        requests.clear()
        latest = reader.latestOffset(start, ReadAllAvailable())
        assert latest == {t: {str(p): 4 for p in range(i + 1)} for i, t in enumerate(topics)}
        assert requests[ApiKey.METADATA] == 2, requests
        assert requests[ApiKey.LIST_OFFSETS] == 1 and requests[ApiKey.FETCH] == 1, requests
    finally:
        reader.stop()
