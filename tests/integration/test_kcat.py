"""kcat (Debian's, built on librdkafka 2.0.2) against a real kavka broker.

The older librdkafka matters: it opens with ApiVersions v3 and its own idea
of which versions to use, and it is what users reach for first. Every kcat
run has a timeout; outputs are parsed and compared record by record.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.integration.helpers import (
    CODEC_IDS,
    CODECS,
    batch_codecs,
    ck_admin,
    ck_create_topic,
    ck_produce_samples,
    ck_producer,
    recent_base_ts,
    sample_records,
    segment_files,
)

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
pytestmark = pytest.mark.skipif(not shutil.which("kcat"), reason="kcat is not installed")
CLIENT_TIMEOUTS = ["-X", "socket.timeout.ms=10000", "-X", "topic.metadata.refresh.interval.ms=1000"]


def kcat(bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 30.0) -> str:
    res = subprocess.run(
        [KCAT, "-b", bootstrap, *CLIENT_TIMEOUTS, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert res.returncode == 0, (
        f"kcat {' '.join(args)} exited {res.returncode}:\n{res.stderr[-3000:]}"
    )
    return res.stdout


def test_metadata_listing(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=3)
    text = kcat(broker.bootstrap, "-L", "-t", topic_name)
    assert "1 brokers:" in text, text
    assert f"broker 1 at {broker.bootstrap}" in text, text
    assert f'topic "{topic_name}" with 3 partitions:' in text, text
    for p in range(3):
        assert f"partition {p}, leader 1, replicas: 1, isrs: 1" in text, text

    md = json.loads(kcat(broker.bootstrap, "-L", "-J"))
    assert [b["id"] for b in md["brokers"]] == [1]
    assert md["brokers"][0]["name"] == broker.bootstrap
    topic = next(t for t in md["topics"] if t["topic"] == topic_name)
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == 1 for p in topic["partitions"])


@pytest.mark.parametrize("codec", CODECS)
def test_produce_keys_headers_codec_then_consume(broker, topic_name, codec):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=1)
    lines = []
    expected = []
    for i in range(40):
        if i % 10 == 7:
            lines.append(f"k{i}:")  # -Z: an empty value is sent as NULL
            expected.append((f"k{i}", "NULL"))
        else:
            lines.append(f"k{i}:value {i} " + "x" * (i % 13))
            expected.append((f"k{i}", f"value {i} " + "x" * (i % 13)))
    kcat(
        broker.bootstrap,
        "-P",
        "-t",
        topic_name,
        "-p",
        "0",
        "-K:",
        "-Z",
        "-H",
        "origin=kcat",
        "-H",
        "codec=" + codec,
        "-X",
        f"compression.codec={codec}",
        "-X",
        "linger.ms=1000",  # one batch: kcat reads its 40 lines in far less; see the confluent codec test
        stdin="\n".join(lines) + "\n",
    )
    out = kcat(
        broker.bootstrap,
        "-C",
        "-t",
        topic_name,
        "-e",
        "-o",
        "beginning",
        "-Z",
        "-f",
        "%k|%s|%h|%o|%p\n",
    )
    rows = [line.split("|") for line in out.splitlines()]
    assert len(rows) == 40, out[-2000:]
    for i, (row, (k, v)) in enumerate(zip(rows, expected, strict=True)):
        assert row == [k, v, f"origin=kcat,codec={codec}", str(i), "0"], f"record {i}: {row}"
    codecs = [c for f in segment_files(broker.log_dirs[0], topic_name) for c in batch_codecs(f)]
    assert codecs and set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}"


def test_consume_json_envelope_timestamps_and_nulls(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=1)
    sent = sample_records(25, base_ts=recent_base_ts())
    ck_produce_samples(ck_producer(broker.bootstrap), topic_name, sent)
    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-e", "-o", "beginning", "-J")
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(msgs) == 25
    for i, (m, s) in enumerate(zip(msgs, sent, strict=True)):
        assert (m["partition"], m["offset"], m["tstype"], m["ts"]) == (
            0,
            i,
            "create",
            s.timestamp,
        ), m
        assert m["key"] == (s.key.decode() if s.key is not None else None), m
        assert m["payload"] == (s.value.decode() if s.value is not None else None), m
        # kcat's envelope: headers flattened [k1, v1, k2, v2, ...], absent when none.
        flat = [x for k, v in s.headers for x in (k, None if v is None else v.decode())]
        assert m.get("headers") == (flat or None), m


def test_consume_from_offset_and_count(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=1)
    sent = sample_records(30, base_ts=recent_base_ts())
    ck_produce_samples(ck_producer(broker.bootstrap), topic_name, sent)
    out = kcat(
        broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "12", "-c", "5", "-f", "%o\n"
    )
    assert out.split() == ["12", "13", "14", "15", "16"]
    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "-3", "-e", "-f", "%o\n")
    assert out.split() == ["27", "28", "29"]


def test_query_offset_by_timestamp(broker, topic_name):
    ck_create_topic(ck_admin(broker.bootstrap), topic_name, partitions=1)
    sent = sample_records(20, base_ts=recent_base_ts())
    ck_produce_samples(
        ck_producer(broker.bootstrap, {"batch.num.messages": 4, "linger.ms": 0}), topic_name, sent
    )
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:{sent[9].timestamp - 1}")
    assert f"{topic_name} [0] offset 9" in out, out
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic_name}:0:{sent[0].timestamp - 10_000}")
    assert f"{topic_name} [0] offset 0" in out, out
