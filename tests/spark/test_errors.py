"""Bad source options fail the query with a message naming the option."""

from __future__ import annotations

import pytest


def _read(spark, options, *, stream=False):
    r = (spark.readStream if stream else spark.read).format("kavka")
    for k, v in options.items():
        r = r.option(k, v)
    df = r.load()
    if stream:
        q = df.writeStream.format("noop").trigger(availableNow=True).start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    else:
        df.collect()


CASES = [
    ({"subscribe": "t"}, "kafka.bootstrap.servers: this option is required"),
    ({"BS": 1}, "subscribe, subscribePattern, assign: exactly one of these options must be set; none was given"),
    ({"BS": 1, "subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of these options must be set; got subscribe, assign"),
    ({"BS": 1, "subscribe": "t", "subscribePattern": "t.*"}, "got subscribe, subscribePattern"),
    ({"BS": 1, "assign": "{not json"}, "assign: malformed JSON"),
    ({"BS": 1, "assign": '{"t": "0"}'}, "assign: partitions of topic 't' must be a list"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsets": '{"TOPIC": {"0": 1'}, "startingOffsets: malformed JSON"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsets": "beginning"}, "startingOffsets: expected earliest, latest or a JSON object"),
    ({"BS": 1, "subscribe": "TOPIC", "endingOffsets": '{"TOPIC": {"0": -2}}'}, "endingOffsets: -2 (earliest) is not allowed"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsets": "latest"}, "startingOffsets: latest is not allowed for a batch query"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsets": '{"TOPIC": {"0": 0}}'}, "startingOffsets: no offset given for TOPIC-1"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsets": '{"TOPIC": {"0": 0, "1": 0, "9": 0}}'}, "startingOffsets: TOPIC-9 is not among the subscribed"),
    ({"BS": 1, "subscribe": "TOPIC", "startingTimestamp": "yesterday"}, "startingTimestamp: expected a timestamp in milliseconds"),
    ({"BS": 1, "subscribe": "TOPIC", "startingOffsetsByTimestamp": "[1]"}, "startingOffsetsByTimestamp: expected a JSON object"),
    ({"BS": 1, "subscribe": "TOPIC", "startingTimestamp": "4102444800000"}, "startingTimestamp: no record in TOPIC-0 has a timestamp at or after"),
    ({"BS": 1, "subscribe": "TOPIC", "minPartitions": "0"}, "minPartitions: expected a positive integer"),
    ({"BS": 1, "subscribe": "TOPIC", "failOnDataLoss": "yes"}, "failOnDataLoss: expected true or false"),
    ({"BS": 1, "subscribe": "no-such-topic-anywhere"}, "subscribe: topic 'no-such-topic-anywhere' does not exist"),
    ({"BS": 1, "assign": '{"TOPIC": [0, 7]}'}, "assign: partition 7 of topic 'TOPIC' does not exist"),
    ({"BS": 1, "subscribe": "TOPIC", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset: not supported; set startingOffsets instead"),
    ({"BS": 1, "subscribe": "TOPIC", "kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism: GSSAPI (Kafka's default"),
    ({"BS": 1, "subscribe": "TOPIC", "kafka.ssl.provider": "SunJSSE"}, "kafka.ssl.provider: not supported by this connector"),
]


@pytest.fixture(scope="module")
def two_partition_topic(broker):
    from tests.spark.util import create_topic, produce_per_partition

    name = "errors-topic"
    create_topic(broker.bootstrap, name, 2)
    produce_per_partition(broker.bootstrap, name, 2, 3)
    return name


@pytest.mark.parametrize(("options", "needle"), CASES)
def test_batch_read_refuses_bad_options(spark, broker, two_partition_topic, options, needle):
    opts = {
        k.replace("BS", "kafka.bootstrap.servers"): str(v).replace("TOPIC", two_partition_topic)
        for k, v in options.items()
    }
    if "BS" in options:
        opts["kafka.bootstrap.servers"] = broker.bootstrap
    with pytest.raises(Exception) as err:
        _read(spark, opts)
    assert needle.replace("TOPIC", two_partition_topic) in str(err.value)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"endingOffsets": "latest"}, "endingOffsets: not supported by streaming queries"),
        ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger: expected a positive integer"),
        ({"startingOffsets": "{]"}, "startingOffsets: malformed JSON"),
    ],
)
def test_stream_read_refuses_bad_options(spark, broker, two_partition_topic, options, needle):
    opts = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": two_partition_topic, **options}
    with pytest.raises(Exception) as err:
        _read(spark, opts, stream=True)
    assert needle in str(err.value)


def test_unreachable_bootstrap_fails_with_the_address(spark):
    from tests.broker_harness import free_port

    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception) as err:
        _read(spark, {"kafka.bootstrap.servers": address, "subscribe": "t", "kafka.request.timeout.ms": "2000"})
    assert f"cannot connect to {address}" in str(err.value)
