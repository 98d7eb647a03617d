"""TransactionCoordinatorManager on the event loop with a fake replica manager: records reach
`__transaction_state` and replies wait for them, markers go to local leaders through
append_end_txn_markers and to other leaders through `remote_markers`, and a new manager loading
the partition's records finds the transaction complete."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.coordinator.transaction import TxnConfig
from kavka.coordinator.txn_manager import TransactionCoordinatorManager
from kavka.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from kavka.coordinator.txn_state import TxnState
from kavka.protocol.control_records import ControlRecordType
from kavka.protocol.records import iter_records
from kavka.replication.partition import TopicPartition
from kavka.replication.replica_manager import PartitionResponse

CONFIG = TxnConfig(transaction_state_log_num_partitions=1)
STATE_TP = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
LOCAL, REMOTE = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class _Info:
    last_offset: int


@dataclass
class _Log:
    records: list[Any] = field(default_factory=list)

    def replay_records(self) -> list[Any]:
        return list(self.records)


@dataclass
class _Part:
    is_leader: bool
    leader_epoch: int = 3
    log: _Log = field(default_factory=_Log)

    def append_records_to_leader(self, batch: bytes, *, required_acks: int, now_ms: int) -> _Info:
        assert required_acks == -1
        self.log.records.extend(iter_records(batch))
        return _Info(len(self.log.records) - 1)


class _ReplicaManager:
    def __init__(self, state: _Part) -> None:
        self.parts = {STATE_TP: state, LOCAL: _Part(True), REMOTE: _Part(False)}
        self.markers: list[tuple[list[TopicPartition], ControlRecordType, int, int]] = []

    @property
    def partitions(self) -> dict[TopicPartition, _Part]:
        return self.parts

    def get_partition(self, topic: str, partition: int) -> _Part | None:
        return self.parts.get(TopicPartition(topic, partition))

    def notify_append(self, tp: TopicPartition) -> None:
        pass

    async def wait_for_acks(self, waits: list[tuple[TopicPartition, int]], timeout_s: float) -> dict:
        return {tp: ErrorCode.none for tp, _ in waits}

    def append_end_txn_markers(self, partitions, control_type, *, producer_id, producer_epoch,  # noqa: ANN001
                               coordinator_epoch, timeout_s, respond):  # noqa: ANN001
        self.markers.append((list(partitions), control_type, producer_id, coordinator_epoch))
        return respond({tp: PartitionResponse() for tp in partitions})


def _manager(rm: _ReplicaManager, remote: list) -> TransactionCoordinatorManager:  # noqa: ANN001
    async def remote_markers(m, tps):  # noqa: ANN001, ANN202
        remote.append((m.commit, tps))
        return {tp: ErrorCode.none for tp in tps}

    async def create(_n: int) -> None:
        pass

    return TransactionCoordinatorManager(config=CONFIG, replica_manager=rm, create_topic=create,  # type: ignore[arg-type]
                                         now_ms=lambda: 1_000, remote_markers=remote_markers)


def test_a_transaction_commits_through_the_manager_and_reloads() -> None:
    async def run() -> None:
        state = _Part(True)
        rm = _ReplicaManager(state)
        remote: list = []
        m = _manager(rm, remote)
        m.sync_leadership()
        m.reserve_producer_id(42)
        r = await m.call(lambda rid, now: m.core.handle_init_producer_id(rid, "tx", 60_000, now))
        assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 42, 0)
        r = await m.call(lambda rid, now: m.core.handle_add_partitions(rid, "tx", 42, 0, [LOCAL, REMOTE], now))
        assert r.error == ErrorCode.none
        r = await m.call(lambda rid, now: m.core.handle_end_txn(rid, "tx", 42, 0, True, now))
        assert r.error == ErrorCode.none
        for _ in range(50):  # the markers and the Complete record follow the reply
            await asyncio.sleep(0.01)
            meta = m.core.metadata("tx")
            if meta is not None and meta.state == TxnState.COMPLETE_COMMIT:
                break
        assert rm.markers == [([LOCAL], ControlRecordType.COMMIT, 42, 3)]
        assert remote == [(True, [REMOTE])]
        assert m.core.metadata("tx").state == TxnState.COMPLETE_COMMIT
        await m.stop()

        again = _manager(_ReplicaManager(state), [])
        again.sync_leadership()
        meta = again.core.metadata("tx")
        assert meta is not None and (meta.state, meta.producer_id) == (TxnState.COMPLETE_COMMIT, 42)
        await again.stop()

    asyncio.run(run())


def test_markers_failing_remotely_are_resent() -> None:
    async def run() -> None:
        rm = _ReplicaManager(_Part(True))
        calls: list = []

        async def flaky(m, tps):  # noqa: ANN001, ANN202
            calls.append(tps)
            err = ErrorCode.not_leader_or_follower if len(calls) == 1 else ErrorCode.none
            return {tp: err for tp in tps}

        async def create(_n: int) -> None:
            pass

        m = TransactionCoordinatorManager(config=CONFIG, replica_manager=rm, create_topic=create,  # type: ignore[arg-type]
                                          now_ms=lambda: 1_000, remote_markers=flaky)
        m.start()
        m.sync_leadership()
        m.reserve_producer_id(7)
        await m.call(lambda rid, now: m.core.handle_init_producer_id(rid, "tx", 60_000, now))
        await m.call(lambda rid, now: m.core.handle_add_partitions(rid, "tx", 7, 0, [REMOTE], now))
        await m.call(lambda rid, now: m.core.handle_end_txn(rid, "tx", 7, 0, False, now))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if m.core.metadata("tx").state == TxnState.COMPLETE_ABORT:
                break
        assert m.core.metadata("tx").state == TxnState.COMPLETE_ABORT
        assert len(calls) >= 2
        await m.stop()

    asyncio.run(run())
