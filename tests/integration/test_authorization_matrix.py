"""The authorization matrix (Kafka's AuthorizerIntegrationTest model), generated from the per-API
declarations in kavka.broker.api_authorization.NEEDS: a new API is covered without new test code.

One `kavka server` with `authorizer.class.name=kavka`, a PLAINTEXT listener whose User:ANONYMOUS
is a super user (it sets up topics and ACLs) and a SASL/PLAIN listener with one user per API key
(`m<key>`), who starts with no ACL at all. For every API key that needs authorization: the raw
client, logged in as that API's user, sends a minimal valid request (tests/raw_client.minimal at
the highest version kavka serves, every name set to the API's own topic/group `m<key>`, topic ids
to that topic's id) and must get the declared error code; then exactly the declared ACL (and the
further per-item ones it declares, e.g. OffsetCommit's Read on the topic) is granted on `m<key>`
(or the Cluster) and the same request must no longer get any authorization error. ListGroups
(which filters instead of failing) and DescribeCluster (which only reports 0 authorized operations)
have their own tests; ApiVersions must advertise no key without a declaration; KIP-430's
authorized_operations are checked through Metadata, DescribeGroups and DescribeCluster.
"""

from __future__ import annotations

import uuid
from dataclasses import fields, is_dataclass, replace
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
)
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import ResourceType as CkResourceType

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.api_authorization import NEEDS, Checked
from kavka.broker.authorization import SUPPORTED_OPERATIONS, to_32bit_field
from kavka.common import AclOperation, ConfigResourceType, ErrorCode, ResourceType
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from tests.broker_harness import BrokerProcess, free_port
from tests.raw_client import TOPIC, RawClient, minimal
from tests.wait import wait_until

AUTHORIZATION_ERRORS = {ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed,
                        ErrorCode.cluster_authorization_failed, ErrorCode.transactional_id_authorization_failed}
MATRIX = [k for k, n in sorted(NEEDS.items()) if n.checked is not Checked.NONE and n.error != ErrorCode.none]
# APIs that never fail for want of an ACL, each with its own test below.
NEVER_REFUSED = {ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_CLUSTER, ApiKey.LIST_TRANSACTIONS}
CONFIG_APIS = {ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS}
EXTRA_USERS = ("kip430", "txn", "txo", "txa")
# The version each API is tested at when the highest one is not a client's: AddPartitionsToTxn
# v4+ is broker-to-broker (ClusterAction, tests/integration/test_txn_verification.py).
CLIENT_VERSION = {ApiKey.ADD_PARTITIONS_TO_TXN: 3}


def version_of(key: int) -> int:
    return CLIENT_VERSION.get(key, api.SUPPORTED[key][1])


def name_for(key: int) -> str:
    return f"m{int(key)}"


def password(user: str) -> str:
    return f"pw-{user}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    users = [name_for(k) for k in NEEDS] + list(EXTRA_USERS)
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{u}="{password(u)}"' for u in users) + ";")
    b = BrokerProcess(tmp_path_factory.mktemp("authzmatrix"), port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS",
    })
    b.format()
    b.start()
    b.sasl_port = sasl
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    names = [name_for(k) for k in NEEDS] + list(EXTRA_USERS)
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(timeout=30)
    with RawClient(b.port) as c:
        md = wait_until(lambda: _all_led(c, names), timeout=30, message="every matrix topic has a leader")
    b.topic_ids = {t.name: t.topic_id for t in md.topics}
    b.admin = admin
    yield b
    assert b.stop() == 0, b.log_text()


def _all_led(c: RawClient, names: list[str]) -> Any:
    md = c.call(ApiKey.METADATA, 12, topics=tuple(_md_topic(n) for n in names), allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)
    ok = all(t.error_code == 0 and t.partitions and t.partitions[0].leader_id >= 0 for t in md.topics)
    return md if ok else None


def _md_topic(name: str) -> Any:
    from kavka.protocol.messages import make, nested
    return make(nested(api.request_schema(ApiKey.METADATA, 12), "MetadataRequestTopic"), name=name, topic_id=None)


def _renamed(entity: Any, name: str, topic_id: uuid.UUID, config: bool) -> Any:
    """`entity` with every string TOPIC replaced by `name`, every topic id by `topic_id`, and (for
    the config APIs) every resource type set to TOPIC."""
    changes: dict[str, Any] = {}
    for f in fields(entity):
        v = getattr(entity, f.name)
        if f.name == "topic_id":
            changes[f.name] = topic_id
        elif config and f.name == "resource_type":
            changes[f.name] = ConfigResourceType.TOPIC
        elif isinstance(v, str) and v == TOPIC:
            changes[f.name] = name
        elif is_dataclass(v):
            changes[f.name] = _renamed(v, name, topic_id, config)
        elif isinstance(v, tuple):
            changes[f.name] = tuple(_renamed(x, name, topic_id, config) if is_dataclass(x)
                                    else (name if isinstance(x, str) and x == TOPIC else x) for x in v)
    return replace(entity, **changes)


def _codes(entity: Any) -> set[int]:
    """Every error code in a response, nested ones included (AddPartitionsToTxn v3 names its field
    partition_error_code)."""
    out: set[int] = set()
    for f in fields(entity):
        v = getattr(entity, f.name)
        if f.name == "error_code" or f.name.endswith("_error_code"):
            out.add(int(v))
        for item in v if isinstance(v, tuple) else (v,):
            if is_dataclass(item):
                out |= _codes(item)
    return out


def call_as(b: BrokerProcess, user: str, key: int, request: Any) -> Any:
    with RawClient(b.sasl_port, timeout=20) as c:
        c.sasl_plain(user, password(user))
        return c.call(key, version_of(key), request)


def grant(b: BrokerProcess, user: str, op: AclOperation, rt: ResourceType, name: str) -> None:
    ck_rt = {ResourceType.TOPIC: CkResourceType.TOPIC, ResourceType.GROUP: CkResourceType.GROUP,
             ResourceType.CLUSTER: CkResourceType.BROKER,
             ResourceType.TRANSACTIONAL_ID: CkResourceType.TRANSACTIONAL_ID}[rt]
    binding = AclBinding(ck_rt, CLUSTER_NAME if rt == ResourceType.CLUSTER else name, ResourcePatternType.LITERAL,
                         f"User:{user}", "*", CkOperation(int(op)), AclPermissionType.ALLOW)
    b.admin.create_acls([binding], request_timeout=10)[binding].result(timeout=15)


@pytest.mark.parametrize("key", MATRIX, ids=lambda k: ApiKey(k).name if k in ApiKey._value2member_map_ else str(k))
def test_declared_acl_is_exactly_what_the_api_needs(broker, key):
    need = NEEDS[key]
    assert need.operation is not None and need.resource_type is not None
    name = name_for(key)
    version = version_of(key)
    request = _renamed(minimal(api.request_schema(key, version)), name, broker.topic_ids[name], key in CONFIG_APIS)

    denied = _codes(call_as(broker, name, key, request))
    assert need.error in denied, f"{ApiKey(key).name} without ACLs answered {denied}, expected {need.error!r}"

    grant(broker, name, need.operation, need.resource_type, name)
    for op, rt in need.also:
        grant(broker, name, op, rt, name)
    allowed = wait_until(lambda: (lambda c: c if not c & AUTHORIZATION_ERRORS else None)(
        _codes(call_as(broker, name, key, request))), timeout=15,
        message=f"{ApiKey(key).name} authorized once {need.operation.name} on {need.resource_type.name} is granted")
    assert not allowed & AUTHORIZATION_ERRORS


def test_apis_never_refused_are_each_tested_on_their_own():
    never = {k for k, n in NEEDS.items() if n.checked is not Checked.NONE and n.error == ErrorCode.none}
    assert never == NEVER_REFUSED


def test_every_advertised_api_has_a_declaration(broker):
    user = name_for(ApiKey.API_VERSIONS)
    with RawClient(broker.sasl_port) as c:
        c.sasl_plain(user, password(user))
        av = c.call(ApiKey.API_VERSIONS, 3, client_software_name=api.OWN_CLIENT_SOFTWARE_NAME,
                    client_software_version="0")
    advertised = {k.api_key for k in av.api_keys}
    assert api.ApiKey.CREATE_REPLICA_PLACEMENT in advertised
    assert advertised - set(NEEDS) == set()


def _commit_as_super_user(b: BrokerProcess, group: str, topic: str) -> None:
    """A standalone commit (generation -1) creates the group."""
    from kavka.protocol.messages import make, nested
    cls = api.request_schema(ApiKey.OFFSET_COMMIT, 8)
    part = make(nested(cls, "OffsetCommitRequestPartition"), partition_index=0, committed_offset=0,
                committed_leader_epoch=-1, committed_metadata="")
    req = make(cls, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               topics=(make(nested(cls, "OffsetCommitRequestTopic"), name=topic, partitions=(part,)),))

    def committed() -> bool:
        with RawClient(b.port) as c:
            return _codes(c.call(ApiKey.OFFSET_COMMIT, 8, req)) == {0}

    wait_until(committed, timeout=20, message="the super user's commit")


def test_list_groups_filters_instead_of_failing(broker):
    key = ApiKey.LIST_GROUPS
    name = name_for(key)
    _commit_as_super_user(broker, name, name)
    request = minimal(api.request_schema(key, api.SUPPORTED[key][1]))
    request = replace(request, states_filter=(), types_filter=()) if "types_filter" in {
        f.name for f in fields(request)} else replace(request, states_filter=())
    before = call_as(broker, name, key, request)
    assert before.error_code == 0 and name not in {g.group_id for g in before.groups}
    grant(broker, name, AclOperation.DESCRIBE, ResourceType.GROUP, name)
    wait_until(lambda: name in {g.group_id for g in call_as(broker, name, key, request).groups}, timeout=15,
               message="the group listed once Describe on it is granted")


def test_kip_430_authorized_operations(broker):
    user = "kip430"
    grant(broker, user, AclOperation.READ, ResourceType.TOPIC, user)
    grant(broker, user, AclOperation.READ, ResourceType.GROUP, user)
    grant(broker, user, AclOperation.DESCRIBE, ResourceType.CLUSTER, user)
    _commit_as_super_user(broker, user, user)

    def metadata() -> Any:
        return call_as(broker, user, ApiKey.METADATA, replace(
            _renamed(minimal(api.request_schema(ApiKey.METADATA, 12)), user, broker.topic_ids[user], False),
            include_topic_authorized_operations=True))

    read_describe = to_32bit_field([AclOperation.READ, AclOperation.DESCRIBE])  # Read implies Describe
    wait_until(lambda: metadata().topics[0].topic_authorized_operations == read_describe, timeout=15,
               message="Metadata's topic_authorized_operations")
    not_asked = replace(_renamed(minimal(api.request_schema(ApiKey.METADATA, 12)), user, broker.topic_ids[user],
                                 False), include_topic_authorized_operations=False)
    assert call_as(broker, user, ApiKey.METADATA, not_asked).topics[0].topic_authorized_operations == -(2**31)

    dg = call_as(broker, user, ApiKey.DESCRIBE_GROUPS, replace(
        minimal(api.request_schema(ApiKey.DESCRIBE_GROUPS, api.SUPPORTED[ApiKey.DESCRIBE_GROUPS][1])),
        groups=(user,), include_authorized_operations=True))
    assert dg.groups[0].error_code == 0
    assert dg.groups[0].authorized_operations == read_describe

    dc = call_as(broker, user, ApiKey.DESCRIBE_CLUSTER, replace(
        minimal(api.request_schema(ApiKey.DESCRIBE_CLUSTER, api.SUPPORTED[ApiKey.DESCRIBE_CLUSTER][1])),
        include_cluster_authorized_operations=True))
    assert dc.error_code == 0
    assert dc.cluster_authorized_operations == to_32bit_field([AclOperation.DESCRIBE])
    # without Describe on the Cluster: answered all the same, with 0 operations (Kafka's AuthHelper)
    nobody = name_for(ApiKey.DESCRIBE_CLUSTER)
    dc = call_as(broker, nobody, ApiKey.DESCRIBE_CLUSTER, replace(
        minimal(api.request_schema(ApiKey.DESCRIBE_CLUSTER, api.SUPPORTED[ApiKey.DESCRIBE_CLUSTER][1])),
        include_cluster_authorized_operations=True))
    assert dc.error_code == 0 and dc.brokers and dc.cluster_authorized_operations == 0
    # the super user holds every operation the Cluster supports
    with RawClient(broker.port) as c:
        su = c.call(ApiKey.DESCRIBE_CLUSTER, api.SUPPORTED[ApiKey.DESCRIBE_CLUSTER][1], replace(
            minimal(api.request_schema(ApiKey.DESCRIBE_CLUSTER, api.SUPPORTED[ApiKey.DESCRIBE_CLUSTER][1])),
            include_cluster_authorized_operations=True))
    assert su.cluster_authorized_operations == to_32bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])


def test_a_transactional_produce_needs_write_on_its_transactional_id(broker):
    user = "txn"
    grant(broker, user, AclOperation.WRITE, ResourceType.TOPIC, user)
    key = ApiKey.PRODUCE
    request = replace(_renamed(minimal(api.request_schema(key, api.SUPPORTED[key][1])), user,
                               broker.topic_ids[user], False), transactional_id=user)
    wait_until(lambda: _codes(call_as(broker, user, key, request)) == {ErrorCode.transactional_id_authorization_failed},
               timeout=15, message="TRANSACTIONAL_ID_AUTHORIZATION_FAILED with Write on the topic only")
    assert _end_offset(broker, user) == 0  # the refused produce wrote nothing
    grant(broker, user, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, user)
    wait_until(lambda: not _codes(call_as(broker, user, key, request)) & AUTHORIZATION_ERRORS, timeout=15,
               message="no authorization error once Write on the TransactionalId is granted")


def _end_offset(broker, topic: str) -> int:  # noqa: ANN001
    """The log end offset of `topic`-0, read as the super user (the plaintext listener)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": f"end-{topic}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[1]
    finally:
        c.close()


def test_a_transactional_producer_without_write_on_its_id_writes_nothing(broker):
    """confluent-kafka with a transactional.id its principal may only Describe (FindCoordinator
    works) and Write on the topic: init_transactions fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    and the topic stays empty."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    user = "txa"
    grant(broker, user, AclOperation.WRITE, ResourceType.TOPIC, user)
    grant(broker, user, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, user)
    p = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password(user),
                  "transactional.id": user, "transaction.timeout.ms": 60000})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, info.value
    assert _end_offset(broker, user) == 0


def test_send_offsets_to_transaction_needs_read_on_the_group(broker):
    """confluent-kafka's send_offsets_to_transaction (AddOffsetsToTxn, then TxnOffsetCommit) by a
    principal with Write on its TransactionalId but no Read on the group: GROUP_AUTHORIZATION_FAILED;
    once Read on the group is granted the offsets commit with the transaction."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    from kavka.protocol.messages import make, nested
    user = "txo"
    sasl = {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password(user)}
    grant(broker, user, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, user)
    grant(broker, user, AclOperation.READ, ResourceType.TOPIC, user)
    grant(broker, user, AclOperation.DESCRIBE, ResourceType.GROUP, user)  # FindCoordinator
    p = Producer({**sasl, "transactional.id": user, "transaction.timeout.ms": 60000})
    consumer = Consumer({**sasl, "group.id": user})
    group_md = consumer.consumer_group_metadata()
    consumer.close()
    offsets = [TopicPartition(user, 0, 0)]
    p.init_transactions(30)
    p.begin_transaction()
    with pytest.raises(KafkaException) as info:
        p.send_offsets_to_transaction(offsets, group_md, 30)
    assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, info.value
    p.abort_transaction(30)

    grant(broker, user, AclOperation.READ, ResourceType.GROUP, user)

    def committed() -> bool:
        p.begin_transaction()
        try:
            p.send_offsets_to_transaction(offsets, group_md, 30)
        except KafkaException:
            p.abort_transaction(30)
            return False
        p.commit_transaction(30)
        return True

    wait_until(committed, timeout=30, message="send_offsets_to_transaction once Read on the group is granted")
    with RawClient(broker.port) as c:  # the super user
        resp = c.call(ApiKey.OFFSET_FETCH, 8, groups=(make(nested(api.request_schema(ApiKey.OFFSET_FETCH, 8),
                                                                  "OffsetFetchRequestGroup"),
                                                           group_id=user, topics=None),), require_stable=True)
    assert [(t.name, q.committed_offset) for t in resp.groups[0].topics for q in t.partitions] == [(user, 0)]
