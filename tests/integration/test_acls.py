"""ACL admin APIs (CreateAcls, DescribeAcls, DeleteAcls) on real `kavka server` processes.

One broker with `authorizer.class.name=kavka`: confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient create, describe (with ANY and MATCH filters) and delete ACLs; Kafka's errors come
back per binding (INVALID_REQUEST for a CLUSTER resource not named kafka-cluster, for ANY types);
v0 of each API (LITERAL only) is answered. A broker without an authorizer answers
SECURITY_DISABLED. Then a restart: the ACLs come back from a metadata snapshot.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import nested
from tests.broker_harness import KAVKA, BrokerProcess
from tests.raw_client import RawClient
from tests.wait import wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Small snapshot threshold: the restart test loads the ACLs from a metadata snapshot. The
    # clients here connect as User:ANONYMOUS: a super user, as the ACL APIs need Alter / Describe on
    # the Cluster.
    b = BrokerProcess(tmp_path_factory.mktemp("acls"), overrides={
        "authorizer.class.name": "kavka", "metadata.log.max.record.bytes.between.snapshots": "2048",
        "super.users": "User:ANONYMOUS"})
    b.format()
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()


def admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def describe(a: AdminClient, flt: AclBindingFilter) -> set[tuple]:
    got = a.describe_acls(flt, request_timeout=10).result(timeout=15)
    return {(x.restype, x.name, x.resource_pattern_type, x.principal, x.host, x.operation, x.permission_type) for x in got}


def test_confluent_admin_creates_describes_and_deletes(broker):
    a = admin(broker)
    read = AclBinding(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "ck-", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1",
                      AclOperation.WRITE, AclPermissionType.DENY)
    group = AclBinding(ResourceType.GROUP, "ck-group", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
    for f in a.create_acls([read, deny, group], request_timeout=10).values():
        assert f.result(timeout=15) is None
    ck = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                          AclPermissionType.ANY)
    everything = describe(a, ck)
    assert {(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
             AclPermissionType.ALLOW),
            (ResourceType.TOPIC, "ck-", ResourcePatternType.PREFIXED, "User:bob", "10.0.0.1", AclOperation.WRITE,
             AclPermissionType.DENY)} <= everything
    # MATCH: every ACL that applies to the topic ck-orders, the prefixed one included
    match = AclBindingFilter(ResourceType.TOPIC, "ck-orders", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert {x[1] for x in describe(a, match)} == {"ck-orders", "ck-"}
    only_bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                                AclPermissionType.ANY)
    assert {x[1] for x in describe(a, only_bob)} == {"ck-"}

    deleted = a.delete_acls([match], request_timeout=10)[match].result(timeout=15)
    assert {(d.name, d.resource_pattern_type) for d in deleted} == {("ck-orders", ResourcePatternType.LITERAL),
                                                                    ("ck-", ResourcePatternType.PREFIXED)}
    assert {x[1] for x in describe(a, ck)} >= {"ck-group"}
    assert not {x[1] for x in describe(a, ck)} & {"ck-orders", "ck-"}  # this broker's image shows the deletion


def test_invalid_creations_get_kafkas_errors(broker):
    a = admin(broker)
    bad = AclBinding(ResourceType.BROKER, "my-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    good = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.ALTER, AclPermissionType.ALLOW)
    fs = a.create_acls([bad, good], request_timeout=10)
    with pytest.raises(KafkaException) as e:
        fs[bad].result(timeout=15)
    assert e.value.args[0].code() == ErrorCode.invalid_request
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in e.value.args[0].str()
    assert fs[good].result(timeout=15) is None
    # what confluent-kafka refuses to send, on the wire: ANY types, an empty name, an unknown code
    req_cls = api.request_schema(ApiKey.CREATE_ACLS, 3)
    creation = nested(req_cls, "AclCreation")

    def c(rt: int = 2, name: str = "t", pt: int = 3, op: int = 3, perm: int = 3):
        return creation(resource_type=rt, resource_name=name, resource_pattern_type=pt, principal="User:a", host="*",
                        operation=op, permission_type=perm)

    with RawClient(broker.port) as raw:
        resp = raw.call(ApiKey.CREATE_ACLS, 3, req_cls(creations=(
            c(rt=1), c(pt=2), c(op=1), c(perm=1), c(name=""), c(rt=99), c())))
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (ErrorCode.invalid_request, "Invalid resourceType ANY"),
        (ErrorCode.invalid_request, "Invalid patternType MATCH"),
        (ErrorCode.invalid_request, "Invalid operation ANY"),
        (ErrorCode.invalid_request, "Invalid permissionType ANY"),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN"),
        (ErrorCode.none, None),
    ]


def test_v0_is_literal_only(broker):
    with RawClient(broker.port) as raw:
        req_cls = api.request_schema(ApiKey.CREATE_ACLS, 0)
        creation = nested(req_cls, "AclCreation")
        resp = raw.call(ApiKey.CREATE_ACLS, 0, req_cls(creations=(creation(
            resource_type=2, resource_name="v0-topic", principal="User:v0", host="*", operation=4, permission_type=3),)))
        assert [r.error_code for r in resp.results] == [ErrorCode.none]
        d_cls = api.request_schema(ApiKey.DESCRIBE_ACLS, 0)
        resp = raw.call(ApiKey.DESCRIBE_ACLS, 0, d_cls(resource_type_filter=2, resource_name_filter="v0-topic",
                                                       principal_filter=None, host_filter=None, operation=1,
                                                       permission_type=1))
        assert resp.error_code == ErrorCode.none
        assert [(r.resource_name, [(x.principal, x.operation) for x in r.acls]) for r in resp.resources] == [
            ("v0-topic", [("User:v0", 4)])]


def test_kafka_python_admin(broker):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        acl = ACL("User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.GROUP, "kp-", ACLResourcePatternType.PREFIXED))
        created = kp.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        flt = ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        acls, error = kp.describe_acls(flt)
        assert error.errno == 0
        assert [(a.principal, a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in acls] == [
            ("User:carol", "kp-", ACLResourcePatternType.PREFIXED)]
        deleted = kp.delete_acls([flt])
        assert [len(matches) for _f, matches, _e in deleted] == [1]
        assert kp.describe_acls(flt)[0] == []
    finally:
        kp.close()


def test_without_an_authorizer_the_apis_answer_security_disabled(tmp_path):
    b = BrokerProcess(tmp_path)
    b.format()
    b.start()
    try:
        # (confluent-kafka's describe_acls drops the top-level error: asked on the wire)
        d_cls = api.request_schema(ApiKey.DESCRIBE_ACLS, 3)
        with RawClient(b.port) as raw:
            resp = raw.call(ApiKey.DESCRIBE_ACLS, 3, d_cls(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1))
        assert (resp.error_code, resp.error_message) == (ErrorCode.security_disabled,
                                                         "No Authorizer is configured on the broker")
        a = admin(b)
        binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
                             AclPermissionType.ALLOW)
        with pytest.raises(KafkaException) as e:
            a.create_acls([binding], request_timeout=10)[binding].result(timeout=15)
        assert e.value.args[0].code() == ErrorCode.security_disabled
    finally:
        assert b.stop() == 0, b.log_text()


def test_acls_survive_a_restart(broker):
    a = admin(broker)
    binding = AclBinding(ResourceType.TRANSACTIONAL_ID, "tx-1", ResourcePatternType.LITERAL, "User:dave", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    filler = [AclBinding(ResourceType.GROUP, f"snap-{i}", ResourcePatternType.LITERAL, "User:dave", "*",
                         AclOperation.READ, AclPermissionType.ALLOW) for i in range(30)]  # > 2048 bytes of records
    for f in a.create_acls([binding, *filler], request_timeout=10).values():
        f.result(timeout=15)
    metadata_dir = broker.log_dirs[0] / "__cluster_metadata-0"
    wait_until(lambda: list(metadata_dir.glob("*.checkpoint")), timeout=20, message="a metadata snapshot")
    assert broker.stop() == 0, broker.log_text()
    broker.output.clear()
    broker.start()
    assert any("loaded metadata snapshot" in line for line in broker.output), broker.log_text()
    f = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, "tx-1", ResourcePatternType.LITERAL, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    assert describe(admin(broker), f) == {(ResourceType.TRANSACTIONAL_ID, "tx-1", ResourcePatternType.LITERAL,
                                           "User:dave", "*", AclOperation.WRITE, AclPermissionType.ALLOW)}


def test_a_broker_only_node_forwards_to_the_controller(tmp_path):
    """Create and Delete through a broker-only node go to the controller-only node over the
    controller listener; the broker answers once its own image shows the change."""
    from tests.broker_harness import Cluster

    c = Cluster(tmp_path, 2, controllers=1, overrides={"authorizer.class.name": "kavka", "super.users": "User:ANONYMOUS"}).start()
    try:
        # One CI run timed out "waiting for controller" here (not reproduced in 7 local runs):
        # the client's view of the cluster is logged, and shown with the brokers' logs if it fails.
        a = AdminClient({"bootstrap.servers": c.bootstrap, "debug": "broker,admin,metadata"})
        binding = AclBinding(ResourceType.TOPIC, "fw", ResourcePatternType.PREFIXED, "User:erin", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        a.create_acls([binding], request_timeout=10)[binding].result(timeout=15)
        f = AclBindingFilter(ResourceType.TOPIC, "fw-1", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
        assert {x[1] for x in describe(a, f)} == {"fw"}  # at once: the broker waited for its image
        [deleted] = a.delete_acls([f], request_timeout=10)[f].result(timeout=15)
        assert deleted.name == "fw"
        assert describe(a, f) == set()
    finally:
        c.stop()


def kavka_acls(b: BrokerProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAVKA, "acls", "--bootstrap-server", b.bootstrap, *args], capture_output=True, text=True,
                          timeout=60, input=stdin)


def test_cli_add_list_remove(broker):
    r = kavka_acls(broker, "--add", "--allow-principal", "User:frank", "--allow-principal", "User:gina",
                   "--operation", "Read", "--operation", "Describe", "--topic", "cli-t", "--json")
    assert r.returncode == 0, r.stderr
    added = json.loads(r.stdout)
    assert {(a["principal"], a["operation"], a["host"], a["permission_type"]) for a in added} == {
        (p, o, "*", "ALLOW") for p in ("User:frank", "User:gina") for o in ("Read", "Describe")}
    # --producer / --consumer: Kafka's expansion, prefixed
    r = kavka_acls(broker, "--add", "--deny-principal", "User:hank", "--deny-host", "10.1.1.1", "--producer",
                   "--consumer", "--topic", "cli-p", "--group", "cli-g", "--resource-pattern-type", "prefixed", "--json")
    assert r.returncode == 0, r.stderr
    got = {(a["resource_type"], a["operation"]) for a in json.loads(r.stdout)}
    assert got == {("TOPIC", "Write"), ("TOPIC", "Describe"), ("TOPIC", "Create"), ("TOPIC", "Read"), ("GROUP", "Read")}
    r = kavka_acls(broker, "--add", "--allow-principal", "User:ivan", "--producer", "--idempotent",
                   "--transactional-id", "cli-tx", "--json")
    assert r.returncode == 0, r.stderr
    assert {(a["resource_type"], a["resource_name"], a["operation"]) for a in json.loads(r.stdout)} == {
        ("TRANSACTIONAL_ID", "cli-tx", "Write"), ("TRANSACTIONAL_ID", "cli-tx", "Describe"),
        ("CLUSTER", "kafka-cluster", "IdempotentWrite")}
    # the table lists them
    r = kavka_acls(broker, "--list", "--topic", "cli-t")
    assert r.returncode == 0, r.stderr
    assert "User:frank" in r.stdout and "User:hank" not in r.stdout  # literal by default
    r = kavka_acls(broker, "--list", "--principal", "User:gina", "--json")
    assert {(a["principal"], a["resource_name"]) for a in json.loads(r.stdout)} == {("User:gina", "cli-t")}
    r = kavka_acls(broker, "--list", "--topic", "cli-p-1", "--resource-pattern-type", "match", "--json")
    assert {a["principal"] for a in json.loads(r.stdout)} == {"User:hank"}
    # remove one principal's ACLs, then the rest of the resource's
    r = kavka_acls(broker, "--remove", "--allow-principal", "User:frank", "--operation", "Read", "--topic", "cli-t",
                   "--force", "--json")
    assert r.returncode == 0, r.stderr
    assert [(a["principal"], a["operation"]) for a in json.loads(r.stdout)] == [("User:frank", "Read")]
    r = kavka_acls(broker, "--remove", "--topic", "cli-t", stdin="n\n")  # declined: nothing removed
    assert r.returncode == 0 and "Are you sure" in r.stdout
    r = kavka_acls(broker, "--remove", "--topic", "cli-t", stdin="y\n", )
    assert r.returncode == 0, r.stderr
    r = kavka_acls(broker, "--list", "--topic", "cli-t", "--json")
    assert json.loads(r.stdout) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"], "ResourceType GROUP only supports"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:name"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "not valid when adding"),
    (["--add", "--list", "--topic", "t"], "exactly one action"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--group"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "unknown operation"),
])
def test_cli_refusals(broker, args, message):
    r = kavka_acls(broker, *args)
    assert r.returncode != 0
    assert message in r.stderr
