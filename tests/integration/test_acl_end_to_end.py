"""End-to-end flows with minimal ACLs, as Kafka's EndToEndAuthorizationTest: real confluent-kafka
producers, consumers and admin clients, logged in over SASL/PLAIN to a real `kavka server` with
`authorizer.class.name=kavka`, each holding exactly the ACLs its flow needs and nothing more.

What it proves: a producer with kafka-acls' `--producer` set (Write, Describe, Create) on a
PREFIXED pattern produces (acks=all) under that prefix and nowhere else; a consumer group with
Read on its group and its topic consumes through subscribe() and commits, and without the group
ACL is refused GROUP_AUTHORIZATION_FAILED (an error event from poll(): FindCoordinator; with
Describe but not Read on the group, an exception from commit()); Alter on the Cluster is what CreateAcls needs and
Create on the Cluster what CreateTopics needs; a DENY on a LITERAL name beats an ALLOW on a
PREFIXED one; deleting a consumer's Read ACL stops it at its next fetch; a super user needs no
ACL at all; `allow.everyone.if.no.acl.found=true` lets anyone use a topic without ACLs until the
first ACL on it appears.

The PLAINTEXT listener's principal, User:ANONYMOUS, is a super user: it creates the topics and
grants the ACLs, so every refusal seen here comes from the one ACL a test leaves out.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
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

from tests.broker_harness import BrokerProcess, free_port
from tests.wait import wait_until

USERS = ("pia", "carl", "gus", "ada", "cruz", "nina", "dora", "rita", "sam")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-e2e-pw"' for u in USERS) + ";")
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


def start_broker(root, **extra: str) -> BrokerProcess:
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(root, port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS;User:sam",
        **extra,
    })
    b.format()
    b.start()
    b.sasl_port = sasl
    return b


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("acle2e"))
    yield b
    assert b.stop() == 0, b.log_text()


def conf(b: BrokerProcess, user: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-e2e-pw", **extra}


def super_admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def acl(rt: ResourceType, name: str, pattern: ResourcePatternType, user: str, op: AclOperation,
        perm: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rt, name, pattern, f"User:{user}", "*", op, perm)


def grant(b: BrokerProcess, *bindings: AclBinding) -> None:
    admin = super_admin(b)  # held: a client destroyed before its futures resolve fails them
    for f in admin.create_acls(list(bindings), request_timeout=10).values():
        f.result(timeout=15)


def new_topics(b: BrokerProcess, *names: str) -> None:
    admin = super_admin(b)
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(timeout=15)


def create_acl(cfg: dict[str, object], binding: AclBinding) -> None:
    admin = AdminClient(cfg)
    return admin.create_acls([binding], request_timeout=10)[binding].result(timeout=15)


def create_topic(cfg: dict[str, object], name: str) -> None:
    admin = AdminClient(cfg)
    return admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=15)


def describe_acls(b: BrokerProcess, flt: AclBindingFilter) -> list[AclBinding]:
    admin = super_admin(b)
    return admin.describe_acls(flt, request_timeout=10).result(timeout=15)


def delete_acls(b: BrokerProcess, flt: AclBindingFilter) -> list[AclBinding]:
    admin = super_admin(b)
    return admin.delete_acls([flt], request_timeout=10)[flt].result(timeout=15)


def topic_names(b: BrokerProcess) -> set[str]:
    admin = super_admin(b)
    return set(admin.list_topics(timeout=10).topics)


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def produce(cfg: dict[str, object], topic: str, value: bytes = b"v") -> KafkaError | None:
    """One record with acks=all; the delivery report's error (None: written)."""
    p = Producer({**cfg, "acks": "all", "message.timeout.ms": 10000, "retries": 0})
    outcome: list[KafkaError | None] = []
    p.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def first_message(cfg: dict[str, object], topic: str, group: str) -> object:
    """The first message or error event a consumer assigned to the topic's partition 0 polls."""
    c = Consumer({**cfg, "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        return wait_until(lambda: c.poll(0.5), timeout=15, message=f"a first poll on {topic}")
    finally:
        c.close()


def first_subscribed(cfg: dict[str, object], topic: str, group: str) -> object:
    """The first message or error event of a consumer subscribed to the topic (a topic the
    consumer may not Describe is reported through subscribe(), not assign())."""
    c = Consumer({**cfg, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        return wait_until(lambda: c.poll(0.5), timeout=15, message=f"a first poll on {topic}")
    finally:
        c.close()


def code(err: KafkaError | None) -> int | None:
    return None if err is None else err.code()


def test_a_producer_with_write_on_a_prefix_produces_only_under_it(broker):
    s = suffix()
    mine, other = f"team-{s}-x", f"other-{s}-x"
    new_topics(broker, mine, other)
    # kafka-acls --producer --resource-pattern-type prefixed: Write, Describe, Create
    grant(broker, *(acl(ResourceType.TOPIC, f"team-{s}-", PREFIXED, "pia", op)
                    for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)))
    assert produce(conf(broker, "pia"), mine) is None
    assert code(produce(conf(broker, "pia"), other)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # what was and was not written, read by the super user
    assert end_offset(broker, mine) == 1 and end_offset(broker, other) == 0


def end_offset(b: BrokerProcess, topic: str) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"probe-{suffix()}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


@pytest.mark.parametrize("group_pattern", [LITERAL, PREFIXED])
def test_a_consumer_group_with_read_on_group_and_topic_consumes_and_commits(broker, group_pattern):
    s = suffix()
    topic, group = f"orders-{s}", f"carl-{s}-app"
    new_topics(broker, topic)
    for i in range(3):
        assert produce({"bootstrap.servers": broker.bootstrap}, topic, b"r%d" % i) is None
    group_name = group if group_pattern is LITERAL else f"carl-{s}"
    grant(broker, acl(ResourceType.GROUP, group_name, group_pattern, "carl", AclOperation.READ),
          acl(ResourceType.TOPIC, topic, LITERAL, "carl", AclOperation.READ))
    c = Consumer(conf(broker, "carl", **{"group.id": group, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False}))
    try:
        c.subscribe([topic])
        seen: list[bytes] = []

        def three() -> bool:
            m = c.poll(0.5)
            if m is not None:
                seen.append(m.value() if m.error() is None else m.error())
            return len(seen) >= 3

        wait_until(three, timeout=15, message="carl's three records")
        assert seen == [b"r0", b"r1", b"r2"]
        committed = c.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [(topic, 0, 3, None)]
        assert [(tp.topic, tp.offset) for tp in c.committed([TopicPartition(topic, 0)], timeout=10)] == [(topic, 3)]
    finally:
        c.close()


def test_a_consumer_without_its_group_acl_is_refused_group_authorization_failed(broker):
    s = suffix()
    topic = f"orders-{s}"
    new_topics(broker, topic)
    assert produce({"bootstrap.servers": broker.bootstrap}, topic) is None
    grant(broker, acl(ResourceType.TOPIC, topic, LITERAL, "gus", AclOperation.READ))  # the topic, not the group
    c = Consumer(conf(broker, "gus", **{"group.id": f"gus-{s}", "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        # FindCoordinator (Describe on the group) is refused: librdkafka gives poll() an error event
        msg = wait_until(lambda: c.poll(0.5), timeout=15, message="gus's first poll")
        assert msg.error() is not None and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, msg.error()
    finally:
        c.close()
    # With Describe on the group (it finds its coordinator) but not Read, a commit is refused:
    # OffsetCommit needs Read on the group, and confluent-kafka raises it from commit().
    grant(broker, acl(ResourceType.GROUP, f"gus-{s}", LITERAL, "gus", AclOperation.DESCRIBE))
    c = Consumer(conf(broker, "gus", **{"group.id": f"gus-{s}", "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msg = wait_until(lambda: c.poll(0.5), timeout=15, message="gus's record")
        assert msg.error() is None and msg.value() == b"v", msg.error()  # Read on the topic: fetched
        with pytest.raises(KafkaException) as e:
            c.commit(message=msg, asynchronous=False)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value
    finally:
        c.close()
    assert committed_offset(broker, f"gus-{s}", topic) < 0  # nothing was committed


def committed_offset(b: BrokerProcess, group: str, topic: str) -> int:
    """The group's committed offset of partition 0, read by the super user (negative: none)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def test_create_acls_needs_alter_and_create_topics_needs_create_on_the_cluster(broker):
    s = suffix()
    grant(broker, acl(ResourceType.BROKER, "kafka-cluster", LITERAL, "ada", AclOperation.ALTER),
          acl(ResourceType.BROKER, "kafka-cluster", LITERAL, "cruz", AclOperation.CREATE))
    binding = acl(ResourceType.TOPIC, f"ada-{s}", LITERAL, "someone", AclOperation.READ)
    assert create_acl(conf(broker, "ada"), binding) is None
    listed = describe_acls(broker, AclBindingFilter(
        ResourceType.TOPIC, f"ada-{s}", LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY))
    assert [(x.principal, x.operation) for x in listed] == [("User:someone", AclOperation.READ)]
    other = acl(ResourceType.TOPIC, f"nina-{s}", LITERAL, "someone", AclOperation.READ)
    for user in ("nina", "cruz"):  # Create on the Cluster does not give Alter
        with pytest.raises(KafkaException) as e:
            create_acl(conf(broker, user), other)
        assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, user

    made = f"cruz-{s}"
    assert create_topic(conf(broker, "cruz"), made) is None
    assert made in topic_names(broker)
    refused = f"nina-{s}"
    for user in ("nina", "ada"):  # Alter on the Cluster does not give Create
        with pytest.raises(KafkaException) as e:
            create_topic(conf(broker, user), refused)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, user
    assert refused not in topic_names(broker)


def test_a_literal_deny_overrides_a_prefixed_allow(broker):
    s = suffix()
    open_t, secret = f"team-{s}-open", f"team-{s}-secret"
    new_topics(broker, open_t, secret)
    for t in (open_t, secret):
        assert produce({"bootstrap.servers": broker.bootstrap}, t) is None
    grant(broker, acl(ResourceType.TOPIC, f"team-{s}-", PREFIXED, "dora", AclOperation.READ),
          acl(ResourceType.TOPIC, secret, LITERAL, "dora", AclOperation.READ, AclPermissionType.DENY),
          acl(ResourceType.GROUP, f"dora-{s}", LITERAL, "dora", AclOperation.READ))
    msg = first_message(conf(broker, "dora"), open_t, f"dora-{s}")
    assert msg.error() is None and msg.value() == b"v"
    msg = first_message(conf(broker, "dora"), secret, f"dora-{s}")
    assert msg.error() is not None and msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, msg.error()


def test_a_revoked_read_acl_stops_an_active_consumer_at_its_next_fetch(broker):
    s = suffix()
    topic, group = f"live-{s}", f"rita-{s}"
    new_topics(broker, topic)
    read = acl(ResourceType.TOPIC, topic, LITERAL, "rita", AclOperation.READ)
    # Describe on its own, so her metadata stays good and librdkafka keeps fetching once Read goes
    grant(broker, read, acl(ResourceType.TOPIC, topic, LITERAL, "rita", AclOperation.DESCRIBE),
          acl(ResourceType.GROUP, group, LITERAL, "rita", AclOperation.READ))
    superuser = {"bootstrap.servers": broker.bootstrap}
    fetches_sent = [0]

    def stats(raw: str) -> None:
        brokers = json.loads(raw)["brokers"].values()
        fetches_sent.append(sum(br["req"].get("Fetch", 0) for br in brokers if br["nodeid"] >= 0))

    c = Consumer(conf(broker, "rita", **{"group.id": group, "enable.auto.commit": False,
                                         "statistics.interval.ms": 100, "stats_cb": stats,
                                         "fetch.error.backoff.ms": 100}))  # retry a refused fetch soon
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        # consuming: each record the super user produces reaches rita
        for i in range(3):
            assert produce(superuser, topic, b"before-%d" % i) is None
            msg = wait_until(lambda: c.poll(0.2), timeout=10, message=f"record before-{i}")
            assert msg.error() is None and msg.value() == b"before-%d" % i, msg.error()

        flt = AclBindingFilter(ResourceType.TOPIC, topic, LITERAL, "User:rita", None, AclOperation.READ,
                               AclPermissionType.ALLOW)
        [deleted] = delete_acls(broker, flt)
        assert (deleted.name, deleted.principal) == (topic, "User:rita")

        leaked: list[bytes] = []  # records polled after the revocation (kept: wait_until swallows asserts)

        def refused() -> bool:
            m = c.poll(0.2)
            if m is None:
                return False
            if m.error() is None:
                leaked.append(m.value())
                return False
            return m.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        wait_until(refused, timeout=10, message="TOPIC_AUTHORIZATION_FAILED at rita's next fetch")
        assert leaked == []  # nothing was produced since the records she saw
        # Records produced once a fetch has been refused never reach her, while she goes on
        # fetching (a fetch authorized before the deletion may still have been waiting for data
        # when it came, as in Kafka, so "after" starts at the first refusal). librdkafka reports
        # the same fetch error once, so her fetches are counted in its statistics: one Fetch in
        # flight per broker, so a third new one means two answered after the records were written.
        for i in range(3):
            assert produce(superuser, topic, b"after-%d" % i) is None
        sent_before = fetches_sent[-1]

        def three_more_fetches() -> bool:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                leaked.append(m.value())
            return fetches_sent[-1] >= sent_before + 3

        wait_until(three_more_fetches, timeout=10, message="three more fetches from rita")
        assert leaked == []
        assert end_offset(broker, topic) == 6  # the records are there, for whoever may Read
    finally:
        c.close()


def test_a_super_user_needs_no_acl(broker):
    s = suffix()
    topic = f"sam-{s}"
    sam = conf(broker, "sam")
    # no ACL names sam anywhere
    mine = describe_acls(broker, AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:sam", None, AclOperation.ANY, AclPermissionType.ANY))
    assert mine == []
    assert create_topic(sam, topic) is None
    assert produce(sam, topic, b"sam's") is None
    msg = first_message(sam, topic, f"sam-{s}")
    assert msg.error() is None and msg.value() == b"sam's"
    binding = acl(ResourceType.TOPIC, topic, LITERAL, "nina", AclOperation.READ)
    assert create_acl(sam, binding) is None
    # and the ACL sam made works: nina may now Read the topic
    grant(broker, acl(ResourceType.GROUP, f"nina-{s}", LITERAL, "nina", AclOperation.READ))
    msg = first_message(conf(broker, "nina"), topic, f"nina-{s}")
    assert msg.error() is None and msg.value() == b"sam's"


def test_allow_everyone_if_no_acl_found(tmp_path):
    b = start_broker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        topic, group = "free-for-all", "nina-g"
        new_topics(b, topic)
        nina = conf(b, "nina")
        assert produce(nina, topic, b"nina's") is None  # no ACL on the topic: allowed
        msg = first_subscribed(nina, topic, group)  # nor on the group
        assert msg.error() is None and msg.value() == b"nina's"
        # one ACL on the topic, for someone else: the topic now has ACLs, and none allows nina
        grant(b, acl(ResourceType.TOPIC, topic, LITERAL, "pia", AclOperation.WRITE))
        assert code(produce(nina, topic)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        msg = first_subscribed(nina, topic, group)
        assert msg.error() is not None and msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, msg.error()
        assert produce(conf(b, "pia"), topic) is None  # while pia's ACL lets her write
        # a PREFIXED ACL counts too: a topic under it is no longer "without ACLs"
        new_topics(b, "pre-one")
        assert produce(nina, "pre-one") is None
        grant(b, acl(ResourceType.TOPIC, "pre-", PREFIXED, "pia", AclOperation.WRITE))
        assert code(produce(nina, "pre-one")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        assert b.stop() == 0, b.log_text()
