"""Dynamic keystore reload (Kafka's DynamicListenerConfig): a per-broker
`listener.name.<l>.ssl.keystore.*` alteration swaps the listener's certificate for new connections;
open ones keep working; a bad keystore, a changed DN and a cluster-default alteration are refused."""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from cryptography.hazmat.primitives.serialization import Encoding

from tests.broker_harness import BrokerProcess, free_port
from tests.tls_certs import CA, write_pkcs12
from tests.wait import wait_until

PW_A = "reload-a-s3cret-81"
PW_B = "reload-b-s3cret-82"
SECRETS = (PW_A, PW_B)


def served(ca: str, port: int) -> str:
    """The SHA-256 fingerprint of the certificate a new TLS connection is given."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as s:
        return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def alter(admin: AdminClient, broker: str, **configs: str) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.BROKER, broker, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(15)


def test_the_keystore_is_reloaded_for_new_connections(tmp_path):
    ca = CA.create()
    (tmp_path / "ca.pem").write_bytes(ca.pem())
    a, b, other = ca.issue("localhost"), ca.issue("localhost"), ca.issue("elsewhere")
    write_pkcs12(tmp_path / "a.p12", a, PW_A)
    write_pkcs12(tmp_path / "b.p12", b, PW_B)
    write_pkcs12(tmp_path / "other.p12", other, PW_B)
    (tmp_path / "junk.p12").write_bytes(b"not a keystore")
    fp = {name: hashlib.sha256(i.cert.public_bytes(Encoding.DER)).hexdigest() for name, i in (("a", a), ("b", b))}
    plain, tls = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "broker", port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "ssl.keystore.type": "PKCS12",
        "listener.name.ssl.ssl.keystore.location": str(tmp_path / "a.p12"),
        "listener.name.ssl.ssl.keystore.password": PW_A,
    })
    broker.start()
    try:
        cafile = str(tmp_path / "ca.pem")
        assert served(cafile, tls) == fp["a"]
        conf = {"bootstrap.servers": f"127.0.0.1:{tls}", "security.protocol": "SSL", "ssl.ca.location": cafile}
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        name = f"reload-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
        producer = Producer(conf)  # its connection is opened with certificate A
        producer.produce(name, b"before")
        assert producer.flush(15) == 0

        alter(admin, "1", **{"listener.name.ssl.ssl.keystore.location": str(tmp_path / "b.p12"),
                             "listener.name.ssl.ssl.keystore.password": PW_B})
        wait_until(lambda: served(cafile, tls) == fp["b"], timeout=10, message="certificate B served")

        producer.produce(name, b"after")  # the connection opened before the reload
        assert producer.flush(15) == 0
        c = Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
        c.subscribe([name])
        got: list[bytes] = []
        try:
            wait_until(lambda: got.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(got) >= 2,
                       timeout=20, message="both records consumed over TLS")
        finally:
            c.close()
        assert got == [b"before", b"after"]

        refusals = {
            "not a keystore": ({"listener.name.ssl.ssl.keystore.location": str(tmp_path / "junk.p12")}, "INVALID_REQUEST"),
            "wrong password": ({"listener.name.ssl.ssl.keystore.password": PW_A}, "INVALID_REQUEST"),
            "another DN": ({"listener.name.ssl.ssl.keystore.location": str(tmp_path / "other.p12")}, "subject"),
            "a missing file": ({"listener.name.ssl.ssl.keystore.location": str(tmp_path / "nope.p12")}, "cannot read"),
        }
        for why, (configs, expected) in refusals.items():
            with pytest.raises(Exception) as e:
                alter(admin, "1", **configs)
            assert expected in str(e.value), (why, str(e.value))
            assert not [s for s in SECRETS if s in str(e.value)], why
        # (the cluster-default refusal: tests/unit/test_controller.py -- confluent-kafka sends no empty broker name)
        with pytest.raises(Exception, match="Cannot update these configs dynamically"):
            alter(admin, "1", **{"listener.name.ssl.ssl.truststore.location": str(tmp_path / "ca.pem")})
        assert served(cafile, tls) == fp["b"]

        # The same path again re-reads the file when it changed (its modification time).
        b2 = ca.issue("localhost")
        write_pkcs12(tmp_path / "b.p12", b2, PW_B)
        os.utime(tmp_path / "b.p12", ns=(time.time_ns(), time.time_ns() + 10**9))
        alter(admin, "1", **{"listener.name.ssl.ssl.keystore.location": str(tmp_path / "b.p12")})
        assert served(cafile, tls) == hashlib.sha256(b2.cert.public_bytes(Encoding.DER)).hexdigest()

        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([res])[res].result(15)
        pw = entries["listener.name.ssl.ssl.keystore.password"]
        assert pw.is_sensitive and pw.value is None
        assert entries["listener.name.ssl.ssl.keystore.location"].value == str(tmp_path / "b.p12")
        text = "".join(broker.output)
        assert "keystore reloaded" in text
        assert not [s for s in SECRETS if s in text]
    finally:
        assert broker.stop() == 0, broker.log_text()
