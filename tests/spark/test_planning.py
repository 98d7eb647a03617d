"""Pure parts of the connector: option parsing, range planning, admission control, Kafka's partitioner."""

from __future__ import annotations

import pytest

from kavka.client.producer import murmur2
from kavka.spark.offsets import plan_ranges, rate_limit
from kavka.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    parse_sink_options,
    parse_source_options,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def _lower(d):
    return {k.lower(): v for k, v in d.items()}


def test_defaults_follow_sparks_kafka_source():
    batch = parse_source_options(_lower({**BS, "subscribe": "a,b"}), streaming=False)
    assert batch.subscribe == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source_options(_lower({**BS, "subscribePattern": "a.*"}), streaming=True)
    assert stream.starting.kind == "latest"
    assert stream.topic_matches("abc") and not stream.topic_matches("xa")


def test_offsets_json_and_timestamp_precedence():
    o = parse_source_options(
        _lower({**BS, "assign": '{"t": [1, 0, 1]}', "startingOffsets": '{"t": {"0": -2, "1": 7}}',
                "endingOffsets": '{"t": {"0": -1, "1": 9}}'}),
        streaming=False,
    )
    assert o.assign == {"t": (0, 1)}
    assert o.starting.offsets == {"t": {0: EARLIEST, 1: 7}}
    assert o.ending.offsets == {"t": {0: LATEST, 1: 9}}
    # startingTimestamp wins over startingOffsetsByTimestamp, which wins over startingOffsets.
    o = parse_source_options(
        _lower({**BS, "subscribe": "t", "startingTimestamp": "5",
                "startingOffsetsByTimestamp": '{"t": {"0": 6}}', "startingOffsets": "earliest"}),
        streaming=True,
    )
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 5)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"kafka.bootstrap.servers": "host:notaport", "subscribe": "t"}, "kafka.bootstrap.servers"),
        ({**BS, "subscribe": " , "}, "subscribe: no topic given"),
        ({**BS, "subscribePattern": "("}, "subscribePattern: '(' is not a valid regex"),
        ({**BS, "assign": "[]"}, "assign: expected a JSON object"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "startingOffsets: partition 'x'"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "startingOffsets: -3 for t-0 is invalid"),
        ({**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "skip"}, "startingOffsetsByTimestampStrategy"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger: expected a positive integer"),
    ],
)
def test_bad_options_name_the_option(options, needle):
    with pytest.raises(OptionError) as err:
        parse_source_options(_lower(options), streaming=False)
    assert needle in str(err.value)


def test_sink_options():
    o = parse_sink_options(_lower({**BS, "topic": "out", "kafka.acks": "1", "kafka.compression.type": "zstd",
                                   "kafka.enable.idempotence": "false"}))
    assert (o.topic, o.acks, o.compression, o.enable_idempotence) == ("out", 1, 4, False)
    with pytest.raises(OptionError, match="kafka.enable.idempotence: expected true or false"):
        parse_sink_options(_lower({**BS, "kafka.enable.idempotence": "maybe"}))


def test_plan_ranges_one_per_partition_then_split_for_min_partitions():
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    end = {("t", 0): 100, ("t", 1): 10, ("t", 2): 15}
    ranges = plan_ranges(start, end)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 100), (2, 5, 15)]
    split = plan_ranges(start, end, min_partitions=6)
    assert len(split) >= 6
    # Contiguous, non-overlapping, covering exactly the same offsets.
    for p, (a, b) in {0: (0, 100), 2: (5, 15)}.items():
        parts = sorted((r.start, r.end) for r in split if r.partition == p)
        assert parts[0][0] == a and parts[-1][1] == b
        assert all(x[1] == y[0] for x, y in zip(parts, parts[1:], strict=False))


def test_rate_limit_shares_the_budget_by_backlog_and_never_exceeds_latest():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 300, ("t", 1): 100, ("t", 2): 50}
    end = rate_limit(start, latest, 100)
    assert end == {("t", 0): 75, ("t", 1): 25, ("t", 2): 50}
    assert rate_limit(start, latest, 10_000) == latest
    # A small budget still moves every partition with a backlog (Spark rounds shares < 1 up).
    end = rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 3)
    assert end[("t", 1)] == 1 and end[("t", 0)] == 2


def test_murmur2_matches_kafkas_utils():
    # Vectors from Kafka's UtilsTest.testMurmur2.
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {k: murmur2(k) for k in cases} == cases


def test_the_connector_imports_no_broker_code():
    """Executors import only kavka.protocol, kavka.client and kavka.common (the shared ids and enums: pure values, imports nothing of kavka; docs/architecture.md)."""
    import subprocess
    import sys

    code = (
        "import sys, kavka.spark, kavka.spark.source, kavka.spark.sink; "
        "print(','.join(sorted(m for m in sys.modules if m.startswith('kavka.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    packages = {m.split(".")[1] for m in out.stdout.strip().split(",")}
    # client_properties: imported by kavka.spark.options, it loads nothing more until security options
    # are parsed; authorizer: the ACL value types of kavka.client.admin (pure, the bottom layer).
    assert packages == {"client", "client_properties", "authorizer", "common", "protocol", "spark"}, out.stdout


def test_a_streaming_source_runner_imports_no_crc32c():
    """A streaming query's source runner (a new Python process per query, which the query waits
    for) plans offsets and reads no batch: loading the connector's driver side there must not
    import crc32c, whose package looks its version up in the installed distributions' metadata
    (kavka.protocol.records binds it at the first CRC)."""
    import subprocess
    import sys

    code = (
        "import sys, kavka.spark, kavka.spark.source, kavka.spark.offsets, kavka.spark.options\n"
        "print('crc32c' in sys.modules)\n"
        "from kavka.protocol.records import build_batch, Record, batch_crc_ok, parse_header\n"
        "b = build_batch([Record(0, 0, b'k', b'v')])\n"
        "print(batch_crc_ok(b, 0, parse_header(b, 0)), 'crc32c' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"], out.stdout


def test_a_secured_connector_loads_only_the_tls_and_sasl_parsers_besides():
    """With kafka.security.protocol SASL_SSL the options are parsed by kavka.client_properties,
    which borrows the broker's ssl.* parsing and SSLContext builder (kavka.config, kavka.broker.tls)
    and the JAAS parser (kavka.sasl): a known layering debt (kavka/client_properties.py). Pinned
    here so it cannot grow: nothing else of the broker, no asyncio server, no replication."""
    import subprocess
    import sys

    code = (
        "import sys, kavka.spark.source, kavka.spark.sink\n"
        "from kavka.spark.options import parse_source_options\n"
        "parse_source_options({'kafka.bootstrap.servers': 'h:1', 'subscribe': 't', 'kafka.security.protocol': 'SASL_SSL',"
        " 'kafka.ssl.endpoint.identification.algorithm': '', 'kafka.sasl.mechanism': 'SCRAM-SHA-256',"
        " 'kafka.sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b\";'},"
        " streaming=False).client.client_security()\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('kavka.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(out.stdout.strip().split(","))
    packages = {m.split(".")[1] for m in modules}
    assert packages <= {"client", "client_properties", "authorizer", "common", "protocol", "spark", "config", "sasl", "scram",
                        "oauthbearer", "principal", "broker"}, out.stdout
    assert {m for m in modules if m.startswith("kavka.broker")} == {"kavka.broker", "kavka.broker.tls"}, out.stdout
