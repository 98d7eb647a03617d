"""`kavka` CLI commands on secured listeners with Kafka's `--command-config <client.properties>`:
one real broker with a SASL_SSL listener (PLAIN) and an SSL listener requiring client certificates
(mutual TLS), certificates from tests/tls_certs.py. `kavka topics list` lists a topic through each;
a wrong password, no properties at all, and a key that would have no effect are refused with one
line naming what failed, never the password."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_harness import KAVKA, BrokerProcess, free_port
from tests.tls_certs import CA, write_pem_keystore

PASSWORD = "cli-pw-s3cret-61"
WRONG = "cli-wrong-s3cret-62"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    d = tmp_path_factory.mktemp("clisec")
    ca = CA.create()
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"))
    write_pem_keystore(d / "client.pem", ca.issue("cli", server=False))
    plain, secure, mtls = free_port(), free_port(), free_port()
    b = BrokerProcess(d, port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:{secure},MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(d / "server.pem"),
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(d / "ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
    })
    b.start()
    b.secure, b.mtls, b.dir = f"127.0.0.1:{secure}", f"127.0.0.1:{mtls}", d
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("cli-secured-topic", 1, 1)])["cli-secured-topic"].result(20)
    yield b
    assert b.stop() == 0
    assert PASSWORD not in "".join(b.output) and WRONG not in "".join(b.output)


def props(d: Path, name: str, **kv: str) -> Path:
    path = d / name
    path.write_text("".join(f"{k}={v}\n" for k, v in kv.items()))
    return path


def kavka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAVKA, *args], capture_output=True, text=True, timeout=60)


def sasl_props(d: Path, name: str, password: str) -> Path:
    return props(d, name, **{
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem"),
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{password}";',
    })


def test_topics_list_over_sasl_ssl_and_mutual_tls(broker: BrokerProcess) -> None:
    d = broker.dir
    res = kavka("topics", "list", "--bootstrap-server", broker.secure, "--command-config", str(sasl_props(d, "sasl.properties", PASSWORD)), "--json")
    assert res.returncode == 0, res.stderr
    assert "cli-secured-topic" in res.stdout
    mtls = props(d, "mtls.properties", **{
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "client.pem"),
    })
    res = kavka("topics", "list", "--bootstrap-server", broker.mtls, "--command-config", str(mtls), "--json")
    assert res.returncode == 0, res.stderr
    assert "cli-secured-topic" in res.stdout


def test_refusals_name_what_failed_never_the_password(broker: BrokerProcess) -> None:
    d = broker.dir
    res = kavka("topics", "list", "--bootstrap-server", broker.secure, "--command-config", str(sasl_props(d, "wrong.properties", WRONG)))
    assert res.returncode == 1
    assert "with mechanism PLAIN failed: Authentication failed: Invalid username or password" in res.stderr
    assert WRONG not in res.stderr + res.stdout
    # No properties: a plaintext client on a TLS port is refused.
    res = kavka("topics", "list", "--bootstrap-server", broker.secure)
    assert res.returncode == 1 and "error:" in res.stderr and "cli-secured-topic" not in res.stdout
    # No client certificate where one is required.
    no_cert = props(d, "nocert.properties", **{"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                                "ssl.truststore.location": str(d / "ca.pem")})
    res = kavka("topics", "list", "--bootstrap-server", broker.mtls, "--command-config", str(no_cert))
    assert res.returncode == 1 and "cli-secured-topic" not in res.stdout
    # A key that would have no effect, named.
    useless = props(d, "useless.properties", **{"ssl.truststore.location": str(d / "ca.pem")})
    res = kavka("topics", "list", "--bootstrap-server", broker.bootstrap, "--command-config", str(useless))
    assert res.returncode == 1
    assert "ssl.truststore.location: security.protocol is PLAINTEXT, so this key would have no effect" in res.stderr
