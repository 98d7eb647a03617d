"""The controller listener is authorized (Kafka's ControllerApis: ClusterAction on the Cluster).

A controller-only node and a broker-only node with `authorizer.class.name=kavka` and a PLAINTEXT
controller listener, so the broker's principal there is User:ANONYMOUS. Without `super.users` (or
an ACL) the controller refuses the broker's KRaft Fetch of the metadata log (it closes the
connection; a controller RPC such as BrokerRegistration would get CLUSTER_AUTHORIZATION_FAILED) and
logs the denial on `kavka.authorizer`, so the broker never catches up nor registers; with
`super.users=User:ANONYMOUS` (tests/integration/test_acls.py's broker-only test) it does.
"""

from __future__ import annotations

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
    finally:
        c.stop()
