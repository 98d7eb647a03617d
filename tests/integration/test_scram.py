"""SASL/SCRAM-SHA-256 and -512 with credentials in the metadata log: real `kavka server` processes.

One broker for the module, formatted with `kavka storage format --add-scram` (user admin, both
mechanisms), with listeners PLAINTEXT (admin calls), SASL (SASL_PLAINTEXT) and SECURE (SASL_SSL,
TLS from tests/tls_certs.py), both serving only SCRAM. Users are created with confluent-kafka's
AdminClient (AlterUserScramCredentials) and the `kavka configs` CLI; confluent-kafka, kafka-python,
aiokafka and kcat then produce and consume (a group for confluent-kafka, kafka-python and aiokafka;
topics created through each one's admin client but kcat's) over both listeners with both mechanisms. A wrong password and an unknown user get SASL_AUTHENTICATION_FAILED
and the broker serves on; a deleted credential ends new logins; Kafka's errors come back through
the AdminClient and the CLI; no password reaches the log. Then a 3-node cluster: users created
through one node log in on the others, and after every node restarts from a metadata snapshot
that holds them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode

from kavka.protocol.api import ApiKey
from kavka.raft import snapshot as snapshots
from tests import client_roundtrip as roundtrip
from tests.broker_harness import KAVKA, BrokerProcess, Cluster, free_port
from tests.raw_client import RawClient
from tests.tls_certs import CA, write_pem_keystore
from tests.wait import wait_until

ADMIN_PW = "admin-scram-s3cret-91"
ALICE_PW = "alice-scram-s3cret-92"
BOB_PW = "bob-scram-s3cret-93"
WRONG_PW = "wrong-scram-s3cret-94"
SECRETS = (ADMIN_PW, ALICE_PW, BOB_PW, WRONG_PW)
DELAY_MS = 200
SCRAM_LISTENER = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "connection.failed.authentication.delay.ms": str(DELAY_MS),
}


def add_scram_args(user: str, password: str) -> list[str]:
    return ["--add-scram", f"SCRAM-SHA-256=[name={user},password={password}]",
            "--add-scram", f"SCRAM-SHA-512=[name={user},iterations=8192,password={password}]"]


def kavka_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAVKA, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("scram")
    ca = CA.create()
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"))
    plain, sasl, secure = free_port(), free_port(), free_port()
    b = BrokerProcess(
        d,
        port=plain,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl},SECURE://127.0.0.1:{secure}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0",
            **SCRAM_LISTENER,
            "listener.name.secure.scram-sha-512.sasl.jaas.config":
                f'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="{ADMIN_PW}";',
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(d / "server.pem"),
        },
    )
    b.format_args = add_scram_args("admin", ADMIN_PW)
    res = b.format()
    assert ADMIN_PW not in res.stdout + res.stderr
    assert ADMIN_PW.encode() not in (b.log_dirs[0] / "bootstrap.checkpoint").read_bytes()
    b.start(env={"KAVKA_LOG_LEVELS": "kavka.server=DEBUG"})
    b.sasl_port, b.secure_port, b.ca = sasl, secure, d / "ca.pem"
    yield b
    assert b.stop() == 0, b.log_text()
    log = "".join(b.output)
    for s in SECRETS:
        assert s not in log
    for p in (b.log_dirs[0] / "__cluster_metadata-0").iterdir():
        data = p.read_bytes()
        assert not any(s.encode() in data for s in SECRETS), p


def topic() -> str:
    return f"scram-{uuid.uuid4().hex[:8]}"


def ck_conf(port: int, mechanism: str, user: str, password: str, *, ca: Path | None = None) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if ca:
        conf["ssl.ca.location"] = str(ca)
    return conf


def upsert(admin: AdminClient, user: str, password: str, mechanism=ScramMechanism.SCRAM_SHA_256, iterations: int = 4096):
    futs = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    return futs[user].result(15)


@pytest.fixture(scope="module")
def users(broker):
    """alice (both mechanisms, through confluent-kafka's AdminClient) and bob (SHA-512, the CLI)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert(admin, "alice", ALICE_PW, ScramMechanism.SCRAM_SHA_256)
    upsert(admin, "alice", ALICE_PW, ScramMechanism.SCRAM_SHA_512, 8192)
    res = kavka_cli("configs", "alter", "--bootstrap-server", broker.bootstrap, "--entity-type", "users", "--entity-name", "bob",
                    "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={BOB_PW}]")
    assert res.returncode == 0, res.stderr
    assert BOB_PW not in res.stdout + res.stderr
    return admin


def run_confluent(conf: dict[str, object]) -> None:
    roundtrip.confluent(conf, what="confluent-kafka over SCRAM")


def test_the_bootstrapped_user_logs_in(broker):
    run_confluent(ck_conf(broker.sasl_port, "SCRAM-SHA-256", "admin", ADMIN_PW))
    assert "principal User:admin" in "".join(broker.output)


@pytest.mark.parametrize(("mechanism", "tls"), [("SCRAM-SHA-256", False), ("SCRAM-SHA-512", True)])
def test_confluent_kafka(broker, users, mechanism, tls):
    run_confluent(ck_conf(broker.secure_port if tls else broker.sasl_port, mechanism, "alice", ALICE_PW,
                          ca=broker.ca if tls else None))


def py_conf(broker, mechanism: str, tls: bool) -> dict[str, object]:  # noqa: ANN001
    """kafka-python's and aiokafka's keys for alice (the TLS trust added by the caller)."""
    return {"bootstrap_servers": f"127.0.0.1:{broker.secure_port if tls else broker.sasl_port}",
            "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice", "sasl_plain_password": ALICE_PW}


@pytest.mark.parametrize(("mechanism", "tls"), [("SCRAM-SHA-512", False), ("SCRAM-SHA-256", True)])
def test_kafka_python(broker, users, mechanism, tls):
    roundtrip.kafka_python({**py_conf(broker, mechanism, tls), **({"ssl_cafile": str(broker.ca)} if tls else {})})


@pytest.mark.parametrize(("mechanism", "tls"), [("SCRAM-SHA-256", False), ("SCRAM-SHA-512", True)])
def test_aiokafka(broker, users, mechanism, tls):
    from aiokafka.helpers import create_ssl_context

    extra = {"ssl_context": create_ssl_context(cafile=str(broker.ca))} if tls else {}
    roundtrip.aiokafka({**py_conf(broker, mechanism, tls), **extra})


@pytest.mark.skipif(not shutil.which("kcat"), reason="kcat is not installed")
@pytest.mark.parametrize(("mechanism", "tls"), [("SCRAM-SHA-512", True), ("SCRAM-SHA-256", False)])
def test_kcat(broker, users, mechanism, tls):
    opts = ["-b", f"127.0.0.1:{broker.secure_port if tls else broker.sasl_port}",
            "-X", f"security.protocol={'SASL_SSL' if tls else 'SASL_PLAINTEXT'}",
            "-X", f"sasl.mechanism={mechanism}", "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_PW}"]
    if tls:
        opts += ["-X", f"ssl.ca.location={broker.ca}"]
    roundtrip.kcat(opts)


# ----------------------------------------------------------------- failures


def scram_first(user: str) -> bytes:
    return f"n,,n={user},r=fyko+d2lbbFgONRv9qkxdawL".encode()


def logs_in(conf: dict[str, object]) -> None:
    """A real client authenticates to the one broker `conf` names and reads its metadata."""
    md = AdminClient(conf).list_topics(timeout=15)
    assert md.brokers, md


def login_fails(port: int, mechanism: str, user: str, password: str) -> None:
    """A real client's login is refused with SASL_AUTHENTICATION_FAILED (librdkafka reports it)."""
    errors: list[object] = []
    p = Producer({**ck_conf(port, mechanism, user, password), "error_cb": errors.append})
    try:
        wait_until(lambda: p.poll(0.2) >= 0 and any("invalid credentials" in str(e) for e in errors),
                   timeout=20, message=f"an authentication error for {user}")
    finally:
        p.flush(0)


@pytest.mark.parametrize(("user", "password"), [("alice", WRONG_PW), ("nobody", WRONG_PW)])
def test_a_wrong_password_or_an_unknown_user_fails_and_the_broker_serves(broker, users, user, password):
    with RawClient(broker.sasl_port) as c:
        assert c.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256").error_code == ErrorCode.none
        first = c.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=scram_first(user))
        assert first.error_code == ErrorCode.none and bytes(first.auth_bytes).startswith(b"r=fyko")
        final = c.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"c=biws,r=" + bytes(first.auth_bytes).split(b",")[0][2:]
                       + b",p=" + b"A" * 44)
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert final.error_message == "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    login_fails(broker.sasl_port, "SCRAM-SHA-512", user, password)
    run_confluent(ck_conf(broker.sasl_port, "SCRAM-SHA-512", "alice", ALICE_PW))  # serving on
    assert f"(user '{user}')" in "".join(broker.output)


def test_deleting_a_credential_ends_new_logins(broker, users):
    admin = users
    upsert(admin, "carol", BOB_PW, ScramMechanism.SCRAM_SHA_256)
    run_confluent(ck_conf(broker.sasl_port, "SCRAM-SHA-256", "carol", BOB_PW))
    futs = admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
    futs["carol"].result(15)
    login_fails(broker.sasl_port, "SCRAM-SHA-256", "carol", BOB_PW)


def test_admin_client_errors(broker, users):
    admin = users
    described = admin.describe_user_scram_credentials(["alice", "bob"])
    alice = described["alice"].result(10)
    assert sorted((i.mechanism, i.iterations) for i in alice.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]
    assert [(i.mechanism, i.iterations) for i in described["bob"].result(10).scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    every = admin.describe_user_scram_credentials().result(10)
    assert {"admin", "alice", "bob"} <= set(every)

    def error_of(fut) -> ErrorCode:
        with pytest.raises(KafkaException) as e:
            fut.result(10)
        return ErrorCode(e.value.args[0].code())

    assert error_of(admin.describe_user_scram_credentials(["nobody"])["nobody"]) == ErrorCode.resource_not_found
    cases = {
        "few": UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4095), b"x"),
        "many": UserScramCredentialUpsertion("many", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 16385), b"x"),
        "ghost": UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_256),
    }
    futs = admin.alter_user_scram_credentials(list(cases.values()))
    assert error_of(futs["few"]) == ErrorCode.unacceptable_credential
    assert error_of(futs["many"]) == ErrorCode.unacceptable_credential
    assert error_of(futs["ghost"]) == ErrorCode.resource_not_found
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("twice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"x"),
        UserScramCredentialUpsertion("twice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"x")])
    assert error_of(futs["twice"]) == ErrorCode.duplicate_resource


def test_the_configs_cli(broker, users):
    base = ["--bootstrap-server", broker.bootstrap, "--entity-type", "users"]
    res = kavka_cli("configs", "describe", *base, "--entity-name", "alice", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"user": "alice", "credentials": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 4096}, {"mechanism": "SCRAM-SHA-512", "iterations": 8192}], "quotas": {}}]
    res = kavka_cli("configs", "--describe", *base)  # kafka-configs.sh's flag form
    assert res.returncode == 0 and "bob" in res.stdout and "SCRAM-SHA-512" in res.stdout, res.stdout + res.stderr
    res = kavka_cli("configs", "describe", *base, "--entity-name", "nobody")
    assert res.returncode != 0 and "RESOURCE_NOT_FOUND" in res.stderr
    res = kavka_cli("configs", "alter", *base, "--entity-name", "dave", "--add-config", f"SCRAM-SHA-256=[iterations=20000,password={BOB_PW}]")
    assert res.returncode != 0 and "UNACCEPTABLE_CREDENTIAL" in res.stderr and "Too many iterations" in res.stderr
    assert BOB_PW not in res.stdout + res.stderr
    res = kavka_cli("configs", "alter", *base, "--entity-name", "dave", "--delete-config", "SCRAM-SHA-256")
    assert res.returncode != 0 and "RESOURCE_NOT_FOUND" in res.stderr
    res = kavka_cli("configs", "--alter", *base, "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512")
    assert res.returncode == 0, res.stderr
    login_fails(broker.sasl_port, "SCRAM-SHA-512", "bob", BOB_PW)


# ----------------------------------------------------------------- a cluster


def _with_sasl_listener(node: BrokerProcess) -> int:
    """Add a SASL_PLAINTEXT SCRAM listener to a Cluster node's server.properties; its port."""
    port = free_port()
    lines = node.config_file.read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if "=" in line)
    props["listeners"] += f",SASL://127.0.0.1:{port}"
    props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    props.update(SCRAM_LISTENER)
    node.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return port


def test_a_cluster_shares_users_through_the_metadata_log_and_its_snapshots(tmp_path):
    c = Cluster(tmp_path / "c", 3, overrides={"metadata.log.max.record.bytes.between.snapshots": "2048",
                                              "offsets.topic.replication.factor": "1"})
    ports = {i: _with_sasl_listener(n) for i, n in c.nodes.items()}
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.nodes[1].bootstrap})
        upsert(admin, "alice", ALICE_PW, ScramMechanism.SCRAM_SHA_512)
        upsert(admin, "bob", BOB_PW, ScramMechanism.SCRAM_SHA_256)
        for i in (2, 3):  # created through node 1, known everywhere
            logs_in(ck_conf(ports[i], "SCRAM-SHA-512", "alice", ALICE_PW))
        # Enough records for every node to write a snapshot holding the credentials.
        names = [topic() for _ in range(30)]
        futs = admin.create_topics([NewTopic(n, 1, 1) for n in names])
        for f in futs.values():
            f.result(30)

        def snapshot_has_users(node: BrokerProcess) -> bool:
            files = sorted((node.log_dirs[0] / "__cluster_metadata-0").glob("*.checkpoint"))
            keys = [k for k, _ in snapshots.decode(files[-1].read_bytes())] if files else []
            return keys.count(b"UserScramCredential") == 2

        for n in c.nodes.values():
            wait_until(lambda n=n: snapshot_has_users(n), timeout=30, message=f"a snapshot with the users on node {n.node_id}")
        c.stop()
        for n in c.nodes.values():
            n.start(wait=False)
        for n in c.nodes.values():
            n.wait_ready(60)
            assert any("loaded metadata snapshot" in line for line in n.output), n.log_text()
        for i in (1, 2, 3):
            logs_in(ck_conf(ports[i], "SCRAM-SHA-256", "bob", BOB_PW))
        # A deletion through node 3 ends bob's logins on node 1.
        admin3 = AdminClient({"bootstrap.servers": c.nodes[3].bootstrap})
        admin3.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])["bob"].result(15)
        login_fails(ports[1], "SCRAM-SHA-256", "bob", BOB_PW)
    finally:
        c.stop()
        for n in c.nodes.values():
            n.kill()


def test_the_scram_login_module_config_is_sensitive_in_describe_configs(broker, users):
    admin = AdminClient(ck_conf(broker.sasl_port, "SCRAM-SHA-256", "alice", ALICE_PW))
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(15)
    jaas = entries["listener.name.secure.scram-sha-512.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert entries["sasl.enabled.mechanisms"].value == "SCRAM-SHA-256,SCRAM-SHA-512"
    assert not any(s in str(e.value) for e in entries.values() for s in SECRETS)
