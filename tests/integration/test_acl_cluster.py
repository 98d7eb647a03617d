"""ACLs are metadata: created through one node of a 3-node cluster, they are enforced by all three,
listed alike by `kavka acls --list` and DescribeAcls through another node, and after every node
restarts they come back from a metadata snapshot and are enforced everywhere again.

Each node is broker and controller, with a PLAINTEXT listener (User:ANONYMOUS, a super user: the
nodes' own inter-broker and controller connections use it, and the test's admin) and a
SASL/PLAIN listener where alice and bob log in. The topic `acl-n<i>` has its one replica on node
i, so a producer bootstrapped on node i alone is answered Metadata and Produce by node i: alice
(Write on the PREFIXED `acl-`) is served, bob (Describe only, and a DENY) refused, on each node.
"""

from __future__ import annotations

import json
import subprocess

from confluent_kafka import KafkaError, Producer
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

from kavka.raft import snapshot as snapshots
from tests.broker_harness import KAVKA, BrokerProcess, Cluster, free_port
from tests.wait import wait_until

PASSWORDS = {"alice": "alice-cluster-pw", "bob": "bob-cluster-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
NODES = (1, 2, 3)
ACLS = [
    AclBinding(ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
               AclPermissionType.ALLOW),
    AclBinding(ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.DESCRIBE,
               AclPermissionType.ALLOW),
    AclBinding(ResourceType.TOPIC, "acl-n3", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.WRITE,
               AclPermissionType.DENY),
    AclBinding(ResourceType.GROUP, "acl-g", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
               AclPermissionType.ALLOW),
]
EVERY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)


def with_sasl_listener(node: BrokerProcess) -> int:
    """Add a SASL_PLAINTEXT PLAIN listener to a Cluster node's server.properties; its port."""
    port = free_port()
    props = dict(line.split("=", 1) for line in node.config_file.read_text().splitlines() if "=" in line)
    props["listeners"] += f",SASL://127.0.0.1:{port}"
    props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
    props["sasl.enabled.mechanisms"] = "PLAIN"
    props["listener.name.sasl.plain.sasl.jaas.config"] = JAAS
    node.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return port


def produce(port: int, user: str, topic: str) -> KafkaError | None:
    """One record produced by `user`, bootstrapped on one node's SASL listener alone."""
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user],
                  "acks": "all", "message.timeout.ms": 8000, "retries": 0})
    outcome: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(12)
    assert outcome, "no delivery report"
    return outcome[0]


def enforced_everywhere(ports: dict[int, int]) -> None:
    for i in NODES:
        # alice is served once node i's image holds her ACL (the wait: propagation, or leadership
        # just after a restart); bob is refused by every node, node 3 through an explicit DENY
        wait_until(lambda i=i: produce(ports[i], "alice", f"acl-n{i}") is None, timeout=20,
                   message=f"alice's produce through node {i}")
        err = produce(ports[i], "bob", f"acl-n{i}")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (i, err)


def as_cli_rows(bindings: list[AclBinding]) -> set[tuple[str, ...]]:
    """confluent-kafka's bindings in `kavka acls --json`'s terms (Kafka's names)."""
    return {(b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
             "".join(w.capitalize() for w in b.operation.name.split("_")), b.permission_type.name) for b in bindings}


def snapshot_acls(node: BrokerProcess) -> int:
    files = sorted((node.log_dirs[0] / "__cluster_metadata-0").glob("*.checkpoint"))
    keys = [k for k, _ in snapshots.decode(files[-1].read_bytes())] if files else []
    return keys.count(b"AccessControlEntry")


def test_acls_made_on_one_node_are_enforced_on_all_and_survive_restarts_from_a_snapshot(tmp_path):
    c = Cluster(tmp_path / "c", 3, overrides={
        "authorizer.class.name": "kavka", "super.users": "User:ANONYMOUS",
        "metadata.log.max.record.bytes.between.snapshots": "2048", "offsets.topic.replication.factor": "1"})
    ports = {i: with_sasl_listener(n) for i, n in c.nodes.items()}
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.nodes[1].bootstrap})
        placed = [NewTopic(f"acl-n{i}", num_partitions=1, replica_assignment=[[i]]) for i in NODES]
        for f in admin.create_topics(placed).values():
            f.result(timeout=15)
        for f in admin.create_acls(ACLS, request_timeout=10).values():
            f.result(timeout=15)
        enforced_everywhere(ports)

        # `kavka acls --list` through node 3 and DescribeAcls through node 3 agree, on all four
        admin3 = AdminClient({"bootstrap.servers": c.nodes[3].bootstrap})
        described = admin3.describe_acls(EVERY_ACL, request_timeout=10).result(timeout=15)
        assert as_cli_rows(described) == as_cli_rows(ACLS)
        r = subprocess.run([*KAVKA, "acls", "--bootstrap-server", c.nodes[3].bootstrap, "--list", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        listed = json.loads(r.stdout)
        assert len(listed) == len(ACLS)
        assert {(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                 a["operation"], a["permission_type"]) for a in listed} == as_cli_rows(described)

        # enough metadata records for every node to write a snapshot holding the four ACLs
        for f in admin.create_topics([NewTopic(f"filler-{k}", 1, 1) for k in range(30)]).values():
            f.result(timeout=30)
        for n in c.nodes.values():
            wait_until(lambda n=n: snapshot_acls(n) == len(ACLS), timeout=30,
                       message=f"a snapshot with the ACLs on node {n.node_id}")
        del admin, admin3  # closed: they would only retry the stopped nodes
        c.stop()
        for n in c.nodes.values():
            n.start(wait=False)
        for n in c.nodes.values():
            n.wait_ready(60)
            assert any("loaded metadata snapshot" in line for line in n.output), n.log_text()
        enforced_everywhere(ports)
    finally:
        c.stop()
        for n in c.nodes.values():
            n.kill()
