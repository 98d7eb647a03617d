"""Transactions with Apache Kafka's Java client, unmodified, on three real brokers (RF=3, min ISR
2): the 4.4 client uses transactions v2 (KIP-890 part 2) because kavka finalizes
`transaction.version` 2, the 3.9 client uses v1. The same program (tests/java/src/TxnProbe.java)
runs N transactions with both: three records each over two partitions, every third aborted, the
others committed with their consumer offsets (sendOffsetsToTransaction). Checked: a
read_committed consumer reads exactly the committed records with keys and headers, the group's
offset is the last committed transaction's, and the producer epoch kavka's coordinator holds
shows which protocol ran: one bump per transaction under v2, none under v1."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from kavka.client.admin import AdminClient
from tests.broker_harness import KAVKA, Cluster
from tests.integration.helpers import ck_admin, ck_create_topic, ck_read_to_end, unique
from tests.java_deps import client_classpath, java, probe_classes

pytestmark = pytest.mark.timeout(240)

COUNT = 9  # 6 committed, 3 aborted


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("javatxn"), 3, overrides={
        "transaction.state.log.num.partitions": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "offsets.topic.num.partitions": "3",
    }).start()
    try:
        yield c
    finally:
        c.stop()


def _describe(bootstrap: str, txn_id: str) -> dict:
    r = subprocess.run([*KAVKA, "transactions", "describe", "--bootstrap-server", bootstrap,
                        "--transactional-id", txn_id, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("version", ["3.9.2", "4.4.0"])
def test_java_transactions_commit_abort_and_offsets(cluster: Cluster, version: str) -> None:
    topic, txn_id, group = unique("jtx"), unique("jtxid"), unique("jtxg")
    ck_create_topic(ck_admin(cluster.bootstrap), topic, partitions=2, replication_factor=3)
    cp = f"{probe_classes(version)}{os.pathsep}{client_classpath(version)}"  # tests/java/src, compiled once
    r = subprocess.run([java(), "-cp", cp, "TxnProbe", cluster.bootstrap, topic, txn_id, str(COUNT), group],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines[-1] == {"done": COUNT}, r.stdout
    txns = lines[:-1]
    committed = [t["txn"] for t in txns if t["committed"]]
    assert committed == [i for i in range(COUNT) if i % 3 != 2]

    got = ck_read_to_end(cluster.bootstrap, topic, [0, 1], conf={"isolation.level": "read_committed"})
    want = sorted(f"txn-{i}-{j}" for i in committed for j in range(3))
    assert sorted(rec.value.decode() for rec in got) == want
    for rec in got:
        i = int(rec.value.decode().split("-")[1])
        assert rec.key == f"k{i}".encode() and dict(rec.headers) == {"txn": str(i).encode()}
        assert [rec.partition, rec.offset] in next(t["offsets"] for t in txns if t["txn"] == i)
    everything = ck_read_to_end(cluster.bootstrap, topic, [0, 1], conf={"isolation.level": "read_uncommitted"})
    assert len(everything) == 3 * COUNT  # aborted data is in the log, and hidden from read_committed

    admin = AdminClient(cluster.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)
    finally:
        admin.close()
    assert offsets == {(topic, 0): committed[-1] + 1}  # the aborted transactions' offsets were dropped

    d = _describe(cluster.bootstrap, txn_id)
    assert d["state"] in ("CompleteCommit", "CompleteAbort")
    # transactions v2 bumps the epoch at every EndTxn (commit or abort); v1 keeps the one
    # initTransactions gave
    assert d["producer_epoch"] == (COUNT if version.startswith("4.") else 0), d


@pytest.mark.parametrize("version", ["3.9.2", "4.4.0"])
def test_java_zombie_is_fenced_and_writes_nothing_visible(cluster: Cluster, version: str) -> None:
    """Kafka's testFencingOnCommit with the Java client: a second instance with the same
    transactional.id fences the first, whose commit fails (ProducerFencedException, or
    InvalidProducerEpochException for its send: v2's bumped epoch) and whose records are aborted:
    read_committed sees only the second instance's record."""
    topic, txn_id = unique("jfence"), unique("jfenceid")
    ck_create_topic(ck_admin(cluster.bootstrap), topic, partitions=2, replication_factor=3)
    cp = f"{probe_classes(version)}{os.pathsep}{client_classpath(version)}"
    r = subprocess.run([java(), "-cp", cp, "TxnProbe", cluster.bootstrap, topic, txn_id, "fence"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    out = {k: v for line in r.stdout.splitlines() if line.startswith("{") for k, v in json.loads(line).items()}
    assert out["zombie"] in ("ProducerFencedException", "InvalidProducerEpochException"), out
    assert out["second"] == "committed"
    committed = ck_read_to_end(cluster.bootstrap, topic, [0, 1], conf={"isolation.level": "read_committed"})
    assert [(rec.key, rec.value) for rec in committed] == [(b"second", b"second-0")]
    everything = ck_read_to_end(cluster.bootstrap, topic, [0, 1], conf={"isolation.level": "read_uncommitted"})
    assert {b"second-0", b"zombie-0"} <= {rec.value for rec in everything}  # the zombie's: written, then aborted
