"""Transactions and tiered storage (KIP-405 with KIP-98) on the ``s3`` backend against moto's S3
server: a transactional topic whose segments are copied to remote storage with their ``.txnindex``
and deleted locally; a read_committed consumer from offset 0 gets only the committed records (the
fetch served from remote storage lists the aborted transactions from the remote txn indexes, as
Kafka's RemoteLogManager.collectAbortedTransactions does), a read_uncommitted one gets all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.broker_harness import BrokerProcess
from tests.integration.helpers import CK_COMMON, ck_admin, ck_create_topic, ck_read_to_end, unique
from tests.integration.test_tiered import EARLIEST_LOCAL, TIERED, list_offset
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def s3_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, object]]:
    boto3 = pytest.importorskip("boto3")
    from tests.s3_server import MotoServer, aws_test_env

    with aws_test_env():  # the broker inherits these fake credentials
        server = MotoServer()
        server.start()
        b = None
        try:
            s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=server.url)
            s3.create_bucket(Bucket="tiered")
            b = BrokerProcess(tmp_path / "b", overrides={
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "s3",
                "rsm.config.s3.bucket": "tiered",
                "rsm.config.s3.prefix": "kavka/",
                "rsm.config.s3.region": "us-east-1",
                "rsm.config.s3.endpoint.url": server.url,
                "remote.log.manager.task.interval.ms": "200",
                "log.retention.check.interval.ms": "200",
                "remote.log.metadata.topic.num.partitions": "3",
            }).start()
            yield b, s3
        finally:
            if b is not None:
                b.stop()
            server.stop()


def test_read_committed_from_remote_storage_skips_aborted_transactions(s3_broker) -> None:  # noqa: ANN001
    b, s3 = s3_broker
    topic = unique("ttx")
    ck_create_topic(ck_admin(b.bootstrap), topic, config=TIERED)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("txid"), "linger.ms": 5, **CK_COMMON})
    p.init_transactions(30)
    committed: list[bytes] = []
    every: list[bytes] = []
    aborted_first: list[int] = []
    offsets: list[int] = []
    for t in range(30):
        p.begin_transaction()
        values = [f"t{t}-{i}".encode().ljust(120, b".") for i in range(8)]
        for v in values:
            p.produce(topic, value=v, on_delivery=lambda err, msg: offsets.append(msg.offset()))
        p.flush(30)
        if t % 3 == 1:
            aborted_first.append(min(offsets[-8:]))
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
        every += values
    # Several aborted transactions are in remote storage only: the local log starts past them.
    wait_until(lambda: list_offset(b, topic, EARLIEST_LOCAL)[1] > aborted_first[3], timeout=90,
               message="segments holding aborted transactions to be tiered and deleted locally")
    assert list_offset(b, topic, -2) == (0, 0)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="tiered", Prefix=f"kavka/{topic}-0-").get("Contents", [])]
    assert any(k.endswith(".txnindex") for k in keys), keys  # uploaded with their segments

    got = ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_committed"})
    assert [r.value for r in got] == committed
    got = ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_uncommitted"})
    assert [r.value for r in got] == every
    # Small fetches: each remote read's aborted list covers just what it returned.
    got = ck_read_to_end(b.bootstrap, topic, conf={"isolation.level": "read_committed", "fetch.max.bytes": 1000, "message.max.bytes": 1000,
                                                   "max.partition.fetch.bytes": 1000})
    assert [r.value for r in got] == committed
