"""The controller listener is authorized (Kafka's ControllerApis: ClusterAction on the Cluster), and
a request a broker forwards to the controller is authorized on that broker as its client (Kafka's
Envelope semantics): neither refused nor allowed because of the forwarding broker's identity.

A controller-only node and a broker-only node with `authorizer.class.name=kavka` and a PLAINTEXT
controller listener, so the broker's principal there is User:ANONYMOUS. Without `super.users` (or
an ACL) the controller refuses the broker's KRaft Fetch of the metadata log (it closes the
connection; a controller RPC such as BrokerRegistration would get CLUSTER_AUTHORIZATION_FAILED) and
logs the denial on `kavka.authorizer`, so the broker never catches up nor registers; with
`super.users=User:ANONYMOUS` (tests/integration/test_acls.py's broker-only test) it does.
"""

from __future__ import annotations

from datetime import timedelta

from tests.broker_harness import Cluster
from tests.wait import wait_until


def test_a_broker_without_cluster_action_is_refused_by_the_controller(tmp_path):
    c = Cluster(tmp_path, 2, controllers=1, overrides={"authorizer.class.name": "kavka"})
    for n in c.nodes.values():
        n.format(c.cluster_id)
        n.start(wait=False)
    try:
        controller = next(n for i, n in c.nodes.items() if i not in c.brokers)
        wait_until(lambda: "is Denied operation = ClusterAction" in controller.log_text(), timeout=30,
                   message="the controller's denial of the broker")
        line = next(x for x in controller.log_text().splitlines() if "is Denied operation = ClusterAction" in x)
        assert "for request = Fetch" in line or "for request = BrokerRegistration" in line, line
        assert "kavka.authorizer" in line and "Principal = User:ANONYMOUS" in line
        assert "resource = Cluster:LITERAL:kafka-cluster" in line
        # An admin client straight on the controller listener (--bootstrap-controller, KIP-919):
        # ApiVersions is answered to anyone, DescribeCluster refused with Kafka's error code.
        from kio.schema.api_versions.v3 import request as av
        from kio.schema.describe_cluster.v1 import request as dc

        from kavka.common import ErrorCode
        from tests.raw_client import RawClient

        with RawClient(controller.port) as raw:
            versions = raw.call(18, 3, av.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            refused = raw.call(60, 1, dc.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2))
        assert versions.error_code is ErrorCode.none and 60 in {k.api_key for k in versions.api_keys}
        assert refused.error_code is ErrorCode.cluster_authorization_failed and refused.brokers == ()
    finally:
        c.stop()


CAROL_PW = "carol-fw-pw-33"


def _create_topic(port: int, name: str) -> tuple[int, str | None]:
    from kavka.protocol import api
    from kavka.protocol.messages import make, nested
    from tests.raw_client import RawClient

    version = api.SUPPORTED[api.ApiKey.CREATE_TOPICS][1]
    cls = api.request_schema(api.ApiKey.CREATE_TOPICS, version)
    topic = make(nested(cls, "CreatableTopic"), name=name, num_partitions=1, replication_factor=1, assignments=(),
                 configs=())
    with RawClient(port, timeout=20) as c:
        c.sasl_plain("carol", CAROL_PW)
        [r] = c.call(api.ApiKey.CREATE_TOPICS, version, make(cls, topics=(topic,), timeout=timedelta(seconds=15),
                                                             validate_only=False)).topics
    return r.error_code, r.error_message


def test_a_forwarded_request_is_authorized_as_the_client_on_the_receiving_broker(tmp_path):
    """CreateTopics through a broker-only node: refused for carol although the broker's own
    principal (a super user) forwards it; allowed once carol may Create the topic, although carol
    holds no ClusterAction at the controller."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from tests.broker_harness import free_port

    c = Cluster(tmp_path, 2, controllers=1, overrides={"authorizer.class.name": "kavka",
                                                         "super.users": "User:ANONYMOUS"})
    broker = c.nodes[2]
    sasl = free_port()
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="{CAROL_PW}";'
    with broker.config_file.open("a") as f:  # later keys win
        f.write(f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SASL://127.0.0.1:{sasl}\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                "sasl.enabled.mechanisms=PLAIN\n"
                f"listener.name.sasl.plain.sasl.jaas.config={jaas}\n")
    c.start()
    try:
        error, message = _create_topic(sasl, "fw-carol")
        assert error == 29 and message == "Authorization failed.", (error, message)  # TOPIC_AUTHORIZATION_FAILED
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        binding = AclBinding(ResourceType.TOPIC, "fw-carol", ResourcePatternType.LITERAL, "User:carol", "*",
                             AclOperation.CREATE, AclPermissionType.ALLOW)
        admin.create_acls([binding], request_timeout=10)[binding].result(timeout=15)
        assert wait_until(lambda: _create_topic(sasl, "fw-carol")[0] in (0, 36), timeout=20,  # 36: already exists
                          message="carol's CreateTopics forwarded and done")
        assert "fw-carol" in admin.list_topics(timeout=10).topics
    finally:
        c.stop()
