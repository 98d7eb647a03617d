"""__transaction_state records: golden bytes written by hand from Kafka's TransactionLogKey.json
and TransactionLogValue.json (not produced by the encoder), then decode and round trip."""

from __future__ import annotations

import pytest

from kavka.common import TopicPartition as TP
from kavka.coordinator.records import RecordFormatError
from kavka.coordinator.txn_records import (
    TxnLogValue,
    key_bytes,
    read_key,
    read_value,
    replay,
    transaction_partition_for,
    value_bytes,
)

KEY_GOLDEN = bytes.fromhex("0000" "0003" "747831")  # v0, int16 len 3, "tx1"

VALUE = TxnLogValue(
    producer_id=5,
    producer_epoch=2,
    transaction_timeout_ms=60000,
    transaction_status=1,  # Ongoing
    partitions=frozenset({TP("t", 1), TP("t", 0)}),
    last_update_timestamp_ms=1000,
    start_timestamp_ms=900,
)

V0_GOLDEN = bytes.fromhex(
    "0000"  # version 0
    "0000000000000005"  # producer_id
    "0002"  # producer_epoch
    "0000ea60"  # timeout 60000
    "01"  # status Ongoing
    "00000001"  # 1 topic
    "0001" "74"  # "t"
    "00000002" "00000000" "00000001"  # [0, 1]
    "00000000000003e8"  # last update 1000
    "0000000000000384"  # start 900
)

V1_GOLDEN = bytes.fromhex(
    "0001"
    "0000000000000005"
    "0002"
    "0000ea60"
    "01"
    "02"  # compact array: 1 topic
    "02" "74"  # compact string "t"
    "03" "00000000" "00000001"  # compact array of 2
    "00"  # PartitionsSchema tagged fields: none
    "00000000000003e8"
    "0000000000000384"
    "00"  # no tagged fields (all defaults)
)

V1_TAGGED_GOLDEN = V1_GOLDEN[:-1] + bytes.fromhex(
    "03"  # three tagged fields
    "00" "08" "0000000000000004"  # tag 0 previous_producer_id = 4
    "01" "08" "0000000000000006"  # tag 1 next_producer_id = 6
    "02" "02" "0002"  # tag 2 client_transaction_version = 2
)


def test_key_golden() -> None:
    assert key_bytes("tx1") == KEY_GOLDEN
    assert read_key(KEY_GOLDEN) == "tx1"


def test_value_v0_golden() -> None:
    assert value_bytes(VALUE, version=0) == V0_GOLDEN
    assert read_value(V0_GOLDEN) == VALUE


def test_value_v1_golden() -> None:
    assert value_bytes(VALUE, version=1) == V1_GOLDEN
    assert read_value(V1_GOLDEN) == VALUE


def test_value_v1_tagged_fields_golden() -> None:
    v = VALUE
    tagged = TxnLogValue(
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        transaction_timeout_ms=v.transaction_timeout_ms,
        transaction_status=v.transaction_status,
        partitions=v.partitions,
        last_update_timestamp_ms=v.last_update_timestamp_ms,
        start_timestamp_ms=v.start_timestamp_ms,
        previous_producer_id=4,
        next_producer_id=6,
        client_transaction_version=2,
    )
    assert value_bytes(tagged, version=1) == V1_TAGGED_GOLDEN
    assert read_value(V1_TAGGED_GOLDEN) == tagged
    # v0 has no room for them: they are dropped, as Kafka does below transaction.version 1
    assert value_bytes(tagged, version=0) == V0_GOLDEN


def test_unknown_tag_is_skipped() -> None:
    raw = V1_GOLDEN[:-1] + bytes.fromhex("01" "07" "02" "abcd")
    assert read_value(raw) == VALUE


def test_empty_writes_null_partitions() -> None:
    empty = TxnLogValue(7, 0, 1000, 0, frozenset(), 5, -1)
    v0 = value_bytes(empty, version=0)
    assert v0[2 + 8 + 2 + 4 + 1 :][:4] == bytes.fromhex("ffffffff")
    v1 = value_bytes(empty, version=1)
    assert v1[2 + 8 + 2 + 4 + 1] == 0  # compact null
    assert read_value(v0) == empty and read_value(v1) == empty
    with pytest.raises(ValueError):
        value_bytes(TxnLogValue(7, 0, 1000, 0, frozenset({TP("t", 0)}), 5, -1))


def test_tombstone_and_replay() -> None:
    assert read_value(None) is None
    k = key_bytes("a")
    later = TxnLogValue(5, 3, 60000, 4, frozenset({TP("t", 0)}), 2000, 900)
    assert replay([(k, value_bytes(VALUE)), (k, value_bytes(later, version=1))]) == {"a": later}
    assert replay([(k, value_bytes(VALUE)), (k, None)]) == {}


def test_malformed() -> None:
    with pytest.raises(RecordFormatError):
        read_value(V0_GOLDEN[:-1])
    with pytest.raises(RecordFormatError):
        read_value(V0_GOLDEN + b"\x00")
    with pytest.raises(RecordFormatError):
        read_value(b"\x00\x02" + V0_GOLDEN[2:])
    with pytest.raises(RecordFormatError):
        read_key(b"\x00\x01\x00\x00")


def test_partition_for_matches_kafka_hash() -> None:
    # Java: "tx1".hashCode() == 116*31*31 + 120*31 + 49 == 115245
    assert transaction_partition_for("tx1", 50) == 115245 % 50 == 45
