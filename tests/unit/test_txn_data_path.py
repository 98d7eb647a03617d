"""Transactions on the data path (KIP-98), through a ReplicaManager over a real LogManager: the
coordinator's markers, the last stable offset in Fetch responses, read_committed fetches with
their aborted transactions (the hand-encoded v12+ response and kio's v9-v11 one), ListOffsets
latest under read_committed."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kavka.broker.handlers.fetch import fetch
from kavka.broker.handlers.offsets import handle_list_offsets
from kavka.common import ErrorCode, TopicPartition
from kavka.metadata.image import MetadataImage, PartitionRegistration
from kavka.protocol import api
from kavka.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from kavka.protocol.messages import make, nested
from kavka.protocol.records import build_batch, iter_batches
from kavka.replication.replica_manager import PartitionResponse, ReplicaManager
from kavka.storage.log_config import LogConfig
from tests.unit.test_data_path import NOW, TP, _ctx, _fetched, _manager
from tests.unit.test_data_path import _fetch_request as _replica_fetch_request

ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


def _fetch_request(offset: int, *, isolation_level: int, version: int = 12) -> Any:
    cls = api.request_schema(1, version)
    topic_cls, part_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    return make(cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
                max_bytes=1 << 20, isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                topics=(make(topic_cls, topic=TP.topic, partitions=(make(
                    part_cls, partition=TP.partition, current_leader_epoch=-1, fetch_offset=offset,
                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=())


def _append(rm: ReplicaManager, batch: bytes) -> PartitionResponse:
    out = rm.append_records([(TP, batch)], required_acks=1, timeout_s=1.0, respond=lambda r: r)
    assert isinstance(out, dict)
    return out[TP]


def _txn(pid: int, seq: int, n: int = 2) -> bytes:
    return build_batch([(NOW, None, b"t%d" % i) for i in range(n)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


def _marker(rm: ReplicaManager, kind: ControlRecordType, pid: int, *, epoch: int = 0,
            partitions: tuple[TopicPartition, ...] = (TP,)) -> dict[TopicPartition, PartitionResponse]:
    out = rm.append_end_txn_markers(partitions, kind, producer_id=pid, producer_epoch=epoch,
                                    coordinator_epoch=0, timeout_s=1.0, respond=lambda r: r)
    assert isinstance(out, dict)  # one replica: acks=all is answered at once
    return out


def _offsets(records: bytes | None) -> list[int]:
    return [h.base_offset for _, h in iter_batches(records or b"")]


def test_markers_move_the_last_stable_offset_in_fetch_responses(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path)
        assert _append(rm, build_batch([(NOW, None, b"p")])).base_offset == 0
        assert _append(rm, _txn(5, 0)).base_offset == 1  # 1..2, open
        assert _append(rm, build_batch([(NOW, None, b"q")])).base_offset == 3
        p = rm.partitions[TP]
        assert (p.high_watermark, p.last_stable_offset) == (4, 1)

        uncommitted = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, isolation_level=0)))
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (4, 1)
        assert _offsets(uncommitted.records) == [0, 1, 3]
        assert uncommitted.aborted_transactions is None

        committed = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, isolation_level=1)))
        assert committed.last_stable_offset == 1
        assert _offsets(committed.records) == [0]  # nothing at or past the LSO
        assert committed.aborted_transactions == ()

        assert _marker(rm, COMMIT, 5)[TP].base_offset == 4
        assert (p.high_watermark, p.last_stable_offset) == (5, 5)
        committed = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(0, isolation_level=1)))
        assert _offsets(committed.records) == [0, 1, 3, 4]
        assert committed.aborted_transactions == ()

    asyncio.run(run())


def test_read_committed_lists_the_aborted_transactions_it_returns(tmp_path: Path) -> None:
    async def run() -> None:
        rm = _manager(tmp_path)
        _append(rm, _txn(5, 0))  # 0..1
        _append(rm, _txn(6, 0))  # 2..3
        _marker(rm, ABORT, 5)  # 4
        _marker(rm, COMMIT, 6)  # 5
        _append(rm, _txn(7, 0))  # 6..7
        _marker(rm, ABORT, 7)  # 8
        for version in (12, 11, 9):
            got = _fetched(fetch(rm, MetadataImage(), _ctx(1, version), _fetch_request(0, isolation_level=1,
                                                                                     version=version)), version)
            assert got.last_stable_offset == 9
            pairs = [(a.producer_id, a.first_offset) for a in got.aborted_transactions]
            assert pairs == [(5, 0), (7, 6)], version
        got = _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _fetch_request(5, isolation_level=1)))
        assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == [(7, 6)]

    asyncio.run(run())


def test_a_fenced_marker_is_refused_and_clients_may_not_write_markers(tmp_path: Path) -> None:
    rm = _manager(tmp_path)
    _append(rm, build_batch([(NOW, None, b"t")], producer_id=5, producer_epoch=3, base_sequence=0,
                            is_transactional=True))
    assert _marker(rm, ABORT, 5, epoch=2)[TP].error == ErrorCode.invalid_producer_epoch
    client_marker = build_end_txn_marker_batch(COMMIT, producer_id=5, producer_epoch=3, coordinator_epoch=0,
                                               timestamp_ms=NOW)
    assert _append(rm, client_marker).error == ErrorCode.invalid_record
    missing = _marker(rm, COMMIT, 5, epoch=3, partitions=(TP, TopicPartition("other", 0)))
    assert missing[TopicPartition("other", 0)].error == ErrorCode.unknown_topic_or_partition
    assert dataclasses.replace(missing[TP], base_offset=0).error == ErrorCode.none
    assert rm.partitions[TP].last_stable_offset == rm.partitions[TP].high_watermark == 2


def _list_latest_answer(rm: ReplicaManager, *, isolation_level: int, timestamp: int = -1,
                        version: int = 5) -> tuple[int, int]:
    """(error code, offset) of a client's ListOffsets (LATEST unless `timestamp` says otherwise)."""
    # The request as the server hands it to the handler (protocol.versions fills fields a version lacks).
    part = SimpleNamespace(partition_index=TP.partition, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1)
    req = SimpleNamespace(replica_id=-1, isolation_level=isolation_level,
                          topics=(SimpleNamespace(name=TP.topic, partitions=(part,)),))
    node = SimpleNamespace(replica_manager=rm, remote_log_manager=None, authorizer=lambda: None)
    resp = handle_list_offsets(node, _ctx(2, version), req)  # type: ignore[arg-type]
    [answer] = resp.topics[0].partitions
    return answer.error_code, answer.offset


def _list_latest(rm: ReplicaManager, *, isolation_level: int) -> int:
    error, offset = _list_latest_answer(rm, isolation_level=isolation_level)
    assert error == ErrorCode.none
    return offset


def test_a_new_leader_lists_no_end_offset_until_its_high_watermark_reaches_its_epoch_start(tmp_path: Path) -> None:
    """Kafka's Partition.fetchOffsetForTimestamp: a client's ListOffsets to a leader whose high
    watermark is still below the log end offset it had when it became leader gets the retriable
    OFFSET_NOT_AVAILABLE, never an end offset below records already acknowledged (the Java
    client's listOffsets right after a reassignment read 0 for a partition of 20 records)."""
    rm = _manager(tmp_path, replicas=(1, 2))
    _append(rm, build_batch([(NOW, None, b"a"), (NOW, None, b"b")]))  # acks=1: the follower has not fetched
    assert _list_latest_answer(rm, isolation_level=0) == (ErrorCode.none, 0)  # this epoch started at 0
    reg = PartitionRegistration(0, (1, 2), (1, 2), 1, 1, 1)  # elected again, a new epoch
    rm.apply_partition(TP, topic_id="AAAAAAAAAAAAAAAAAAAAAw", registration=reg, config=LogConfig(), min_insync_replicas=1)
    assert rm.partitions[TP].leader_epoch_start_offset == 2 and rm.partitions[TP].high_watermark == 0
    for isolation in (0, 1):
        assert _list_latest_answer(rm, isolation_level=isolation)[0] == ErrorCode.offset_not_available
    # Before v5 (no OFFSET_NOT_AVAILABLE yet) Kafka answers LEADER_NOT_AVAILABLE, also retriable.
    assert _list_latest_answer(rm, isolation_level=0, version=4)[0] == ErrorCode.leader_not_available
    # A record found by timestamp that is not fetchable yet: the same error; the earliest: no error.
    assert _list_latest_answer(rm, isolation_level=0, timestamp=NOW)[0] == ErrorCode.offset_not_available
    assert _list_latest_answer(rm, isolation_level=0, timestamp=-3)[0] == ErrorCode.offset_not_available
    assert _list_latest_answer(rm, isolation_level=0, timestamp=-2) == (ErrorCode.none, 0)

    async def follower_fetch() -> None:  # the follower says it holds both records
        _fetched(fetch(rm, MetadataImage(), _ctx(1, 12), _replica_fetch_request(2, replica_id=2)))

    asyncio.run(follower_fetch())
    assert _list_latest_answer(rm, isolation_level=0) == (ErrorCode.none, 2)
    assert _list_latest_answer(rm, isolation_level=0, timestamp=NOW) == (ErrorCode.none, 0)


def test_list_offsets_latest_is_the_lso_for_read_committed(tmp_path: Path) -> None:
    rm = _manager(tmp_path)
    _append(rm, build_batch([(NOW, None, b"p")]))  # 0
    _append(rm, _txn(5, 0))  # 1..2, open
    assert _list_latest(rm, isolation_level=0) == 3
    assert _list_latest(rm, isolation_level=1) == 1
    _marker(rm, ABORT, 5)
    assert _list_latest(rm, isolation_level=1) == _list_latest(rm, isolation_level=0) == 4
