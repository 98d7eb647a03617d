"""ACLs enforced on the data path: Produce (Write), Fetch (Read) and Metadata (Describe), over a
SASL/PLAIN listener of a real `kavka server` with `authorizer.class.name=kavka`.

alice may Write and Read the topic `open-<id>` (bob only Describe it); nobody but the super user
has an ACL on `secret-<id>`. confluent-kafka clients logged in as alice and bob: bob's produce
and fetch fail TOPIC_AUTHORIZATION_FAILED while alice's go through; alice's all-topics Metadata
leaves `secret` out, a Metadata naming it is TOPIC_AUTHORIZATION_FAILED; a DENY then takes
alice's Write away at once, and its deletion gives it back (the broker's authorizer follows its
image). The PLAINTEXT listener's
principal, User:ANONYMOUS, is a super user (it creates the topics and the ACLs). Both may Read
the consumer groups `g-*` (FindCoordinator and offsets need it). `kavka acls` lists ACLs over the
SASL listener with --command-config, as alice, who may Describe the Cluster (DescribeAcls needs it).
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.broker_harness import KAVKA, BrokerProcess, free_port
from tests.wait import wait_until

ALICE_PW = "alice-acl-pw-71"
BOB_PW = "bob-acl-pw-72"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'user_alice="{ALICE_PW}" user_bob="{BOB_PW}";')


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("aclenf"), port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    })
    b.format()
    b.start()
    b.sasl_port = sasl
    yield b
    assert b.stop() == 0, b.log_text()


def conf(b: BrokerProcess, user: str, password: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def allow(principal: str, topic: str, op: AclOperation, perm: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op, perm)


def produce(b: BrokerProcess, user: str, password: str, topic: str) -> KafkaError | None:
    p = Producer(conf(b, user, password, **{"message.timeout.ms": 10000, "retries": 0}))
    outcome: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


@pytest.fixture(scope="module")
def topics(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    suffix = uuid.uuid4().hex[:6]
    open_t, secret_t = f"open-{suffix}", f"secret-{suffix}"
    for f in admin.create_topics([NewTopic(open_t, 1, 1), NewTopic(secret_t, 1, 1)]).values():
        f.result(timeout=15)
    acls = [allow("User:alice", open_t, AclOperation.WRITE), allow("User:alice", open_t, AclOperation.READ),
            allow("User:bob", open_t, AclOperation.DESCRIBE),
            # the consumers' groups (FindCoordinator needs Describe, offsets Read) and alice's DescribeAcls
            AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, "User:*", "*", AclOperation.READ,
                       AclPermissionType.ALLOW),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    for f in admin.create_acls(acls, request_timeout=10).values():
        f.result(timeout=15)
    return open_t, secret_t


def test_produce_needs_write(broker, topics):
    open_t, _ = topics
    assert produce(broker, "alice", ALICE_PW, open_t) is None
    before = end_offset(broker, open_t)
    err = produce(broker, "bob", BOB_PW, open_t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(broker, open_t) == before >= 1  # the refused record was not written


def end_offset(b: BrokerProcess, topic: str) -> int:
    """The topic's high watermark, read over the PLAINTEXT listener."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_fetch_needs_read(broker, topics):
    open_t, _ = topics
    assert produce(broker, "alice", ALICE_PW, open_t) is None

    def first(user: str, password: str) -> object:
        c = Consumer(conf(broker, user, password, **{"group.id": f"g-{uuid.uuid4().hex[:6]}",
                                                       "auto.offset.reset": "earliest"}))
        try:
            c.assign([TopicPartition(open_t, 0, 0)])
            return wait_until(lambda: c.poll(0.5), timeout=20, message=f"{user}'s first poll")
        finally:
            c.close()

    msg = first("alice", ALICE_PW)
    assert msg.error() is None and msg.value() == b"v"
    msg = first("bob", BOB_PW)  # bob may Describe (metadata) but not Read
    assert msg.error() is not None and msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_shows_only_described_topics(broker, topics):
    open_t, secret_t = topics
    admin = AdminClient(conf(broker, "alice", ALICE_PW))
    listed = admin.list_topics(timeout=10).topics
    assert open_t in listed and secret_t not in listed
    named = admin.list_topics(topic=secret_t, timeout=10).topics[secret_t]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the super user on the PLAINTEXT listener sees both
    assert {open_t, secret_t} <= set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics)


def test_a_deny_takes_effect_at_once(broker, topics):
    open_t, _ = topics
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deny = allow("User:*", open_t, AclOperation.WRITE, AclPermissionType.DENY)
    admin.create_acls([deny], request_timeout=10)[deny].result(timeout=15)
    err = produce(broker, "alice", ALICE_PW, open_t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    flt = AclBindingFilter(ResourceType.TOPIC, open_t, ResourcePatternType.LITERAL, "User:*", None, AclOperation.WRITE,
                           AclPermissionType.DENY)
    admin.delete_acls([flt], request_timeout=10)[flt].result(timeout=15)
    assert produce(broker, "alice", ALICE_PW, open_t) is None


def test_kavka_acls_over_sasl_with_command_config(broker, topics, tmp_path):
    open_t, _ = topics
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="alice" password="{ALICE_PW}";\n')
    r = subprocess.run([*KAVKA, "acls", "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}", "--command-config",
                        str(props), "--list", "--topic", open_t, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert {(a["principal"], a["operation"]) for a in json.loads(r.stdout)} >= {("User:alice", "Write"),
                                                                               ("User:alice", "Read")}
