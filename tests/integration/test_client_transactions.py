"""kavka's own client producer in transactional mode (the Spark exactly-once sink's writer)
against a real broker process; an unmodified confluent-kafka consumer judges what is visible."""

from __future__ import annotations

import pytest

from kavka.client.producer import Producer, ProducerConfig, ProducerFencedError
from tests.integration.helpers import ck_admin, ck_create_topic, ck_read_to_end, unique
from tests.wait import wait_until

pytestmark = pytest.mark.timeout(120)


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    recs = ck_read_to_end(bootstrap, topic, (0, 1), conf={"isolation.level": isolation})
    return sorted(r.value for r in recs if r.value is not None)


@pytest.fixture
def topic(broker) -> str:  # noqa: ANN001
    name = unique("ctx")
    ck_create_topic(ck_admin(broker.bootstrap), name, partitions=2)
    return name


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer(bootstrap, ProducerConfig(transactional_id=txn_id, request_timeout_ms=20_000))


def test_commit_and_abort(broker, topic):  # noqa: ANN001
    with _producer(broker.bootstrap, unique("txid")) as p:
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"c%d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"a%d" % i, partition=i % 2)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.commit_transaction()  # an empty transaction: nothing to end
        p.begin_transaction()
        p.send(topic, b"z", partition=1)
        p.commit_transaction()
    committed = [b"c0", b"c1", b"c2", b"c3", b"z"]
    assert _values(broker.bootstrap, topic, "read_committed") == committed
    assert _values(broker.bootstrap, topic, "read_uncommitted") == sorted(
        committed + [b"a0", b"a1", b"a2", b"a3"]
    )


def test_a_second_producer_with_the_same_id_fences_the_first(broker, topic):  # noqa: ANN001
    txn_id = unique("txid")
    first = _producer(broker.bootstrap, txn_id)
    try:
        first.begin_transaction()
        first.send(topic, b"zombie", partition=0)
        first.flush()
        with _producer(broker.bootstrap, txn_id) as second:  # aborts the open one, bumps the epoch
            assert second.producer_epoch > first.producer_epoch
            with pytest.raises(ProducerFencedError):
                first.commit_transaction()
            second.begin_transaction()
            second.send(topic, b"second", partition=1)
            second.commit_transaction()
    finally:
        first.admin.close()
    wait_until(lambda: _values(broker.bootstrap, topic, "read_committed") == [b"second"],
               timeout=20, message="only the second producer's record is committed")
    assert _values(broker.bootstrap, topic, "read_uncommitted") == [b"second", b"zombie"]


def test_fetcher_read_committed_drops_aborted_batches(broker, topic):  # noqa: ANN001
    from kavka.client.fetcher import Fetcher

    with _producer(broker.bootstrap, unique("txid")) as p:
        for t in range(3):
            p.begin_transaction()
            p.send(topic, b"v%d" % t, partition=0)
            if t == 1:
                p.flush()
                p.abort_transaction()
            else:
                p.commit_transaction()
    # Six offsets: three data records, three markers.
    with Fetcher(broker.bootstrap, isolation_level=1, timeout_s=10) as f:
        raw = f.fetch(topic, 0, 0)
        assert raw.last_stable_offset == 6
        assert len(raw.aborted) == 1  # the broker lists the aborted transaction...
        values = [v for cols in f.read_range(topic, 0, 0, 6) for v in cols.values]
        assert values == [b"v0", b"v2"]  # ...and the fetcher leaves its batch out
    with Fetcher(broker.bootstrap, timeout_s=10) as f:
        values = [v for cols in f.read_range(topic, 0, 0, 6) for v in cols.values]
        assert values == [b"v0", b"v1", b"v2"]  # read_uncommitted: no marker rows
