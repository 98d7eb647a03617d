"""A secured 3-node cluster: every listener, and every connection kavka makes itself, authenticated.

Three combined nodes (broker + controller voter), certificates from tests/tls_certs.py:
- CLIENT, SASL_SSL with PLAIN: what confluent-kafka talks to;
- INTERNAL, SASL_SSL with PLAIN and client certificates required: the inter-broker listener
  (followers' fetches), each broker logging in as `broker` (sasl.mechanism.inter.broker.protocol);
- CONTROLLER, SSL with client certificates required (mutual TLS): raft between the voters and
  the brokers' controller RPCs.
An idempotent acks=all producer writes to an RF=3 topic while the partition leader is killed -9;
every acknowledged record is read back from the survivors. Refusals: a broker whose inter-broker
password is wrong registers (its controller connection is good) but never fetches, so it never
joins the ISR, and logs the failed authentication without the password while the cluster serves
on; a broker whose certificate the cluster's truststore does not sign, and one whose truststore
does not sign the cluster's certificates, are refused by TLS and never register.
No password reaches any node's log. A second cluster: SCRAM-SHA-512 between brokers (the
brokers' user made by `kavka storage format --add-scram`), SCRAM-SHA-256 for clients.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kavka.protocol.framing import encode_request
from tests.broker_harness import KAVKA, BrokerProcess, free_port
from tests.integration.helpers import ck_read_to_end, unique
from tests.java_deps import run_kafka_tool
from tests.tls_certs import CA, write_pem_keystore
from tests.wait import wait_until

CLIENT_PW = "client-pw-s3cret-41"
BROKER_PW = "broker-pw-s3cret-42"
WRONG_PW = "wrong-pw-s3cret-43"
SECRETS = (CLIENT_PW, BROKER_PW, WRONG_PW)
SESSION_MS = 3000
CLIENT_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{CLIENT_PW}";'


def internal_jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="broker" password="{password}" user_broker="{BROKER_PW}";')


def scram_login(password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="{password}";'


class SecureCluster:
    def __init__(self, root: Path, voters: int = 3, *, internal: str = "SASL_SSL", controller: str = "SSL",
                 scram: bool = False) -> None:
        self.root = root
        self.internal, self.controller = internal, controller  # the two listeners' protocols
        # scram: INTERNAL logs in with SCRAM-SHA-512, clients with SCRAM-SHA-256, both users made by
        # `kavka storage format --add-scram` on every node; otherwise PLAIN everywhere.
        self.scram = scram
        self.ca = CA.create()
        self.ca_pem = root / "ca.pem"
        self.ca_pem.write_bytes(self.ca.pem())
        self.ctl_ports = {i: free_port() for i in range(1, voters + 1)}
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ctl_ports.items())
        self.nodes: dict[int, BrokerProcess] = {}
        self.cluster_id = ""
        for i in self.ctl_ports:
            self.nodes[i] = self.node(i)

    def node(self, node_id: int, *, password: str = BROKER_PW, controller_password: str = BROKER_PW,
             keystore_ca: CA | None = None, truststore: Path | None = None) -> BrokerProcess:
        d = self.root / f"node{node_id}"
        d.mkdir(parents=True, exist_ok=True)
        keystore = write_pem_keystore(d / "node.pem", (keystore_ca or self.ca).issue("localhost", client_too=True))
        client, internal = free_port(), free_port()
        voter = node_id in self.ctl_ports
        listeners = f"CLIENT://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal}"
        if voter:
            listeners += f",CONTROLLER://127.0.0.1:{self.ctl_ports[node_id]}"
        sasl: dict[str, str] = {}
        if self.scram:
            sasl["listener.name.client.sasl.enabled.mechanisms"] = "SCRAM-SHA-256"
            sasl["listener.name.internal.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            sasl["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
            sasl["listener.name.internal.scram-sha-512.sasl.jaas.config"] = scram_login(password)
        else:
            sasl["sasl.enabled.mechanisms"] = "PLAIN"
            sasl["listener.name.client.plain.sasl.jaas.config"] = CLIENT_JAAS
            if self.internal.startswith("SASL_"):
                sasl["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
                sasl["listener.name.internal.plain.sasl.jaas.config"] = internal_jaas(password)
        if self.controller.startswith("SASL_"):
            sasl["sasl.mechanism.controller.protocol"] = "PLAIN"
            sasl["listener.name.controller.plain.sasl.jaas.config"] = internal_jaas(controller_password)
        node = BrokerProcess(d, node_id=node_id, port=client, overrides={
            "process.roles": "broker,controller" if voter else "broker",
            "listeners": listeners,
            "listener.security.protocol.map": f"CLIENT:SASL_SSL,INTERNAL:{self.internal},CONTROLLER:{self.controller}",
            "inter.broker.listener.name": "INTERNAL",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": self.voters,
            **sasl,
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore or self.ca_pem),
            "broker.session.timeout.ms": str(SESSION_MS),
            "broker.heartbeat.interval.ms": "500",
            "replica.lag.time.max.ms": "3000",
            "default.replication.factor": "3",
            "offsets.topic.num.partitions": "2",
            "connection.failed.authentication.delay.ms": "50",
        })
        if self.scram:
            node.format_args = ["--add-scram", f"SCRAM-SHA-512=[name=broker,password={BROKER_PW}]",
                                "--add-scram", f"SCRAM-SHA-256=[name=alice,password={CLIENT_PW}]"]
        return node

    def start(self) -> SecureCluster:
        self.cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()  # a Kafka Uuid
        for n in self.nodes.values():
            n.format(self.cluster_id)
            n.start(wait=False)
        for n in self.nodes.values():
            n.wait_ready(60)
        return self

    def conf(self) -> dict[str, object]:
        return {
            "bootstrap.servers": ",".join(n.bootstrap for i, n in self.nodes.items() if i in self.ctl_ports and n.alive()),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca_pem),
            "sasl.mechanism": "SCRAM-SHA-256" if self.scram else "PLAIN",
            "sasl.username": "alice",
            "sasl.password": CLIENT_PW,
        }

    def admin(self) -> AdminClient:
        return AdminClient(self.conf())

    def partitions(self, topic: str) -> dict:
        return self.admin().list_topics(topic=topic, timeout=10).topics[topic].partitions

    def logs(self) -> str:
        return "".join("".join(n.output) for n in self.nodes.values())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    c = SecureCluster(tmp_path_factory.mktemp("secure")).start()
    yield c
    for n in c.nodes.values():
        n.kill()
    logs = c.logs()
    for secret in SECRETS:
        assert secret not in logs


def test_acks_all_records_survive_a_leader_kill_with_every_connection_secured(cluster: SecureCluster) -> None:
    topic = unique("secure")
    admin = cluster.admin()  # referenced until the result is in
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(20)
    wait_until(lambda: all(p.leader >= 0 and len(p.isrs) == 3 for p in cluster.partitions(topic).values()),
               timeout=30, message="the partition led and its ISR complete (followers fetch over SASL_SSL)")
    acked: set[bytes] = set()
    failed: list[str] = []
    stop = threading.Event()
    producer = Producer({**cluster.conf(), "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})

    def on_delivery(err: KafkaError | None, msg) -> None:  # noqa: ANN001
        if err is not None:
            failed.append(str(err))
        else:
            acked.add(msg.value())

    def run() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(topic, b"rec-%08d" % i, on_delivery=on_delivery)
            i += 1
            producer.poll(0.005)
        producer.flush(60)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acked) > 200, timeout=30, message="acks flowing")
        victim = cluster.partitions(topic)[0].leader
        cluster.nodes[victim].kill()
        before = len(acked)
        wait_until(lambda: cluster.partitions(topic)[0].leader not in (victim, -1), timeout=SESSION_MS / 1000 + 20,
                   message="a new leader elected among the survivors")
        wait_until(lambda: len(acked) > before + 200, timeout=30, message="acks flowing again after the kill")
    finally:
        stop.set()
        thread.join(90)
    assert not failed, failed[:3]
    conf = {k: v for k, v in cluster.conf().items() if k != "bootstrap.servers"}
    got = {r.value for r in ck_read_to_end(cluster.conf()["bootstrap.servers"], topic, [0], conf=conf)}
    assert acked <= got, f"{len(acked - got)} acknowledged records lost"
    # The survivors' followers still fetch over SASL_SSL: the ISR is the two of them.
    wait_until(lambda: len(cluster.partitions(topic)[0].isrs) == 2, timeout=20, message="ISR of the two survivors")


def test_a_broker_with_a_wrong_inter_broker_password_never_joins_the_isr(cluster: SecureCluster) -> None:
    live = [i for i in cluster.ctl_ports if cluster.nodes[i].alive()]
    bad = cluster.nodes[4] = cluster.node(4, password=WRONG_PW)
    bad.format(cluster.cluster_id)
    bad.start(timeout=60)  # registers: its controller connection (mutual TLS) is good
    topic = unique("wrongpw")
    leader = live[0]
    admin = cluster.admin()  # referenced until the result is in
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, 4]])])[topic].result(20)
    wait_until(lambda: "failed SASL authentication from" in "".join(cluster.nodes[leader].output),
               timeout=20, message="the leader logs the refused login")
    wait_until(lambda: "on listener INTERNAL with mechanism PLAIN failed: Authentication failed" in "".join(bad.output),
               timeout=20, message="the bad broker logs its failed authentication, naming listener and mechanism")
    wait_until(lambda: cluster.partitions(topic)[0].isrs == [leader], timeout=20, message="the ISR without broker 4")
    # The cluster keeps serving: acks=all to the leader alone.
    p = Producer({**cluster.conf(), "acks": "all"})
    errors: list[str] = []
    p.produce(topic, b"still-serving", on_delivery=lambda err, _m: err is not None and errors.append(str(err)))
    assert p.flush(20) == 0 and not errors
    bad.kill()


@pytest.mark.parametrize("which", ["untrusted certificate", "untrusting truststore"])
def test_a_peer_outside_the_trust_is_refused_by_tls(cluster: SecureCluster, which: str) -> None:
    rogue = CA.create("rogue CA")
    node_id = 5 if which == "untrusted certificate" else 6
    if which == "untrusted certificate":
        node = cluster.node(node_id, keystore_ca=rogue)  # trusts the cluster; the cluster does not trust it
    else:
        rogue_pem = cluster.root / "rogue-ca.pem"
        rogue_pem.write_bytes(rogue.pem())
        node = cluster.node(node_id, truststore=rogue_pem)  # its certificate is good; it trusts only the rogue CA
    cluster.nodes[node_id] = node
    node.format(cluster.cluster_id)
    node.start(wait=False)
    try:
        if which == "untrusted certificate":
            voters = [cluster.nodes[i] for i in cluster.ctl_ports if cluster.nodes[i].alive()]
            wait_until(lambda: any("on the controller listener: TLS handshake failed (CERTIFICATE_VERIFY_FAILED)"
                                   in "".join(v.output) for v in voters),
                       timeout=30, message="a voter refuses the rogue certificate")
            wait_until(lambda: "did it refuse this node's certificate?" in "".join(node.output), timeout=30,
                       message="the refused node says why it cannot reach the voters")
        else:
            wait_until(lambda: "on listener CONTROLLER failed" in "".join(node.output) and "CERTIFICATE_VERIFY_FAILED"
                       in "".join(node.output), timeout=30, message="the node refuses the voters' certificates")
        md = cluster.admin().list_topics(timeout=10)
        assert node_id not in md.brokers
        assert not any(line.startswith("KAVKA_READY") for line in node.output)
    finally:
        node.kill()


def test_sasl_ssl_to_the_controllers_and_mutual_tls_between_brokers(tmp_path: Path) -> None:
    """The other combination: CONTROLLER SASL_SSL (PLAIN, sasl.mechanism.controller.protocol, and
    mutual TLS), INTERNAL SSL with mutual TLS. A broker whose controller password is wrong never
    registers; the failed login is logged on both sides without the password."""
    c = SecureCluster(tmp_path, internal="SSL", controller="SASL_SSL").start()
    try:
        topic = unique("ctlsasl")
        admin = c.admin()  # referenced until the result is in
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(20)
        wait_until(lambda: all(p.leader >= 0 and len(p.isrs) == 3 for p in c.partitions(topic).values()),
                   timeout=30, message="ISR complete (followers fetch over mutual TLS)")
        p = Producer({**c.conf(), "acks": "all"})
        for i in range(50):
            p.produce(topic, b"v%d" % i)
        assert p.flush(30) == 0
        conf = {k: v for k, v in c.conf().items() if k != "bootstrap.servers"}
        assert len(ck_read_to_end(c.conf()["bootstrap.servers"], topic, [0], conf=conf)) == 50
        _metadata_quorum_on_the_sasl_controller_listener(c, tmp_path)

        bad = c.nodes[4] = c.node(4, controller_password=WRONG_PW)
        bad.format(c.cluster_id)
        bad.start(wait=False)
        wait_until(lambda: any("failed SASL authentication from" in "".join(n.output) and "on CONTROLLER" in "".join(n.output)
                               for i, n in c.nodes.items() if i != 4), timeout=30, message="a voter refuses the login")
        wait_until(lambda: "on listener CONTROLLER with mechanism PLAIN failed: Authentication failed" in "".join(bad.output),
                   timeout=30, message="the broker logs its refused login to the controllers")
        assert 4 not in c.admin().list_topics(timeout=10).brokers
        assert not any(line.startswith("KAVKA_READY") for line in bad.output)

        # A KRaft request before SASL authentication (over good TLS) closes that connection, unanswered.
        ctx = ssl.create_default_context(cafile=str(c.ca_pem))
        ctx.load_cert_chain(str(c.nodes[1].root / "node.pem"))
        with socket.create_connection(("127.0.0.1", c.ctl_ports[1]), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(encode_request(api_key=52, api_version=0, correlation_id=7, client_id="x", body=b"\0" * 16, flexible=True))
            assert tls.recv(1024) == b""  # closed, nothing answered
        wait_until(lambda: "before SASL authentication" in "".join(c.nodes[1].output), timeout=10,
                   message="the voter logs the early request")
        assert c.nodes[1].alive()
    finally:
        for n in c.nodes.values():
            n.kill()
    logs = c.logs()
    for secret in SECRETS:
        assert secret not in logs


def _metadata_quorum_on_the_sasl_controller_listener(c: SecureCluster, tmp_path: Path) -> None:
    """`--bootstrap-controller` (KIP-919) over a SASL_SSL controller listener, kavka's tool and
    Kafka's, logged in with --command-config as the controllers' own user (the listener also
    wants a client certificate); a wrong password is a clear refusal that shows no secret."""
    via = ",".join(f"127.0.0.1:{p}" for p in c.ctl_ports.values())

    def command_config(name: str, password: str) -> str:
        path = tmp_path / name
        path.write_text("\n".join([
            "security.protocol=SASL_SSL",
            "sasl.mechanism=PLAIN",
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="broker" password="{password}";',
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={c.ca_pem}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={c.nodes[1].root / 'node.pem'}",
            "ssl.endpoint.identification.algorithm=",  # the certificates name localhost, not 127.0.0.1
        ]) + "\n")
        return str(path)

    good, wrong = command_config("ctl-good.properties", BROKER_PW), command_config("ctl-wrong.properties", WRONG_PW)

    def kavka(config: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*KAVKA, "metadata-quorum", "--bootstrap-controller", via, "--command-config", config,
                               "describe", "--status"], capture_output=True, text=True, timeout=60)

    status = kavka(good)
    assert status.returncode == 0, status.stderr
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in status.stdout.splitlines())}
    leader = int(fields["LeaderId"])
    assert fields["ClusterId"] == c.cluster_id and leader in c.ctl_ports
    assert sorted(v["id"] for v in json.loads(fields["CurrentVoters"])) == sorted(c.ctl_ports)
    kafka = run_kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-controller", via,
                           "--command-config", good, "describe", "--status")
    assert kafka.returncode == 0, kafka.stdout + kafka.stderr
    assert f"ClusterId:              {c.cluster_id}" in kafka.stdout and f"LeaderId:               {leader}" in kafka.stdout

    refused = kavka(wrong)
    assert refused.returncode == 1 and "Authentication failed" in refused.stderr, refused.stderr
    assert not any(secret in refused.stdout + refused.stderr for secret in SECRETS)


def test_scram_between_brokers_and_for_clients(tmp_path: Path) -> None:
    """INTERNAL SASL_SSL with SCRAM-SHA-512 (sasl.mechanism.inter.broker.protocol, the brokers' own
    user made by `kavka storage format --add-scram` on every node, its login the listener's
    ScramLoginModule), CLIENT SASL_SSL with SCRAM-SHA-256, CONTROLLER mutual TLS. An RF=3 topic
    with min.insync.replicas=3: every acks=all record is on all three replicas -- the three logs
    byte for byte the same -- and is read back."""
    c = SecureCluster(tmp_path, scram=True).start()
    try:
        topic = unique("scramib")
        admin = c.admin()  # referenced until the result is in
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "3"})])[topic].result(20)
        wait_until(lambda: all(p.leader >= 0 and len(p.isrs) == 3 for p in c.partitions(topic).values()),
                   timeout=30, message="ISR of 3 (followers log in with SCRAM-SHA-512 over TLS)")
        p = Producer({**c.conf(), "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        errors: list[str] = []
        for i in range(300):
            p.produce(topic, b"scram-%04d" % i, on_delivery=lambda err, _m: err is not None and errors.append(str(err)))
        assert p.flush(30) == 0 and not errors, errors[:3]
        assert len(c.partitions(topic)[0].isrs) == 3

        def logs() -> list[bytes]:
            return [b"".join(f.read_bytes() for f in sorted((n.log_dirs[0] / f"{topic}-0").glob("*.log")))
                    for n in c.nodes.values()]

        wait_until(lambda: len(set(logs())) == 1, timeout=20, message="the three replicas' logs identical")
        assert all(b"scram-0299" in log for log in logs())
        conf = {k: v for k, v in c.conf().items() if k != "bootstrap.servers"}
        got = [r.value for r in ck_read_to_end(c.conf()["bootstrap.servers"], topic, [0], conf=conf)]
        assert got == [b"scram-%04d" % i for i in range(300)]
        leader = c.partitions(topic)[0].leader
        assert "failed SASL authentication" not in "".join(c.nodes[leader].output)
    finally:
        for n in c.nodes.values():
            n.kill()
    logs_text = c.logs()
    for secret in SECRETS:
        assert secret not in logs_text
