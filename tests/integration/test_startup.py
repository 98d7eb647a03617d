"""Startup and shutdown of a real broker process: refusals name the problem; restarts keep state."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.broker_harness import KAVKA, BrokerProcess, free_port


def _start_fails(b: BrokerProcess) -> str:
    res = subprocess.run(
        [*KAVKA, "server", "start", "--config", str(b.config_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    return res.stdout + res.stderr


def test_unformatted_log_dir_is_refused(broker_factory):
    b = broker_factory()
    out = _start_fails(b)
    assert "not formatted" in out and str(b.log_dirs[0]) in out


def test_invalid_config_value_names_the_key(broker_factory):
    b = broker_factory(overrides={"num.partitions": "many"})
    res = subprocess.run(
        [*KAVKA, "server", "start", "--config", str(b.config_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0
    assert "num.partitions" in res.stdout + res.stderr


def test_node_id_mismatch_is_refused(broker_factory):
    b = broker_factory()
    b.format()
    text = b.config_file.read_text().replace("node.id=1", "node.id=2")
    b.config_file.write_text(text)
    out = _start_fails(b)
    assert "node.id" in out


def test_topics_configs_and_data_survive_a_clean_restart(broker_factory, topic_name):
    b = broker_factory().start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1, config={"retention.ms": "123456789"})])[
        topic_name
    ].result(15)
    res = ConfigResource(
        ConfigResource.Type.BROKER, "1", set_config={"log.retention.bytes": "987654321"}
    )
    admin.alter_configs([res])[res].result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic_name, value=b"v%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    assert b.stop() == 0
    assert "shut down cleanly" in b.log_text()

    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic_name].partitions) == 2
    tres = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    cfg = admin.describe_configs([tres])[tres].result(15)
    assert cfg["retention.ms"].value == "123456789"
    bres = ConfigResource(ConfigResource.Type.BROKER, "1")
    bcfg = admin.describe_configs([bres])[bres].result(15)
    assert bcfg["log.retention.bytes"].value == "987654321"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic_name, p, 0) for p in range(2)])
    got = set()
    for _ in range(40):
        for m in c.consume(100, 0.5):
            assert m.error() is None
            got.add((m.partition(), m.offset(), m.value()))
        if len(got) == 20:
            break
    c.close()
    assert got == {(i % 2, i // 2, b"v%d" % i) for i in range(20)}
    assert b.stop() == 0


def test_second_broker_on_the_same_dir_is_refused(broker_factory, tmp_path):
    b = broker_factory().start()
    # Same log dir, another free port: only the log-dir lock can refuse it.
    text = b.config_file.read_text()
    other = free_port()
    second = tmp_path / "second.properties"
    second.write_text(text.replace(f"127.0.0.1:{b.port}", f"127.0.0.1:{other}"))
    assert f"127.0.0.1:{other}" in second.read_text()
    res = subprocess.run([*KAVKA, "server", "start", "--config", str(second)], capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "is locked by another process" in out and str(b.log_dirs[0]) in out, out
    assert b.alive()
    assert b.stop() == 0


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_graceful_shutdown_on_signal(broker_factory, signal_name):
    import signal

    b = broker_factory().start()
    assert b.proc is not None
    b.proc.send_signal(getattr(signal, signal_name))
    assert b.proc.wait(30) == 0
    assert "shut down cleanly" in b.log_text()


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        # An SSL listener with nothing to serve it with; a SASL one (here also the inter-broker
        # listener) whose mechanism for kavka's own connections is Kafka's default, GSSAPI.
        ({"listeners": "SSL://127.0.0.1:{port}"}, "ssl.keystore.location", "missing"),
        ({"listeners": "SASL_SSL://127.0.0.1:{port}"}, "sasl.mechanism.inter.broker.protocol", "not supported"),
        # TLS is served, but not from a JKS keystore (kavka has no JVM).
        ({"listeners": "PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:0", "ssl.keystore.location": "/etc/kafka/broker.jks"},
         "ssl.keystore.type", "not supported"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.enabled.mechanisms", "no effect"),
    ],
)
def test_security_is_refused_not_ignored(broker_factory, overrides, key, words):
    """Issue 10 item 1: a broker asked for TLS/SASL must not start serving plaintext."""
    b = broker_factory()
    b.format()
    text = b.config_file.read_text()
    for k, v in overrides.items():
        v = v.format(port=b.port)
        lines = [line for line in text.splitlines() if not line.startswith(f"{k}=")]
        text = "\n".join([*lines, f"{k}={v}"]) + "\n"
    b.config_file.write_text(text)
    out = _start_fails(b)
    assert key in out and words in out, out


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="needs /proc")
def test_the_soft_open_file_limit_is_raised_to_the_hard_one(broker_factory):
    """Issue 32 item 8: a broker of many partitions needs descriptors; Kafka's docs tell operators
    to raise the limit, kavka raises its own soft limit to the hard one and says so."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, hard, 512)
    if low == hard:
        pytest.skip("the hard limit leaves nothing to raise")
    b = broker_factory()
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))  # the broker inherits it
    try:
        b.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert b.proc is not None
    limits = Path(f"/proc/{b.proc.pid}/limits").read_text()
    row = next(line for line in limits.splitlines() if line.startswith("Max open files")).split()
    assert row[3] != str(low) and row[3] == row[4]  # "Max open files  <soft>  <hard>  files"
    assert f"raised the open-file limit from {low} to the hard limit {hard}" in b.log_text()
    assert b.stop() == 0
