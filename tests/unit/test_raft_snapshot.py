"""Metadata snapshots: the .checkpoint format, the image as records, and the controller's trigger and load."""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kavka.config import build_config
from kavka.controller.quorum_controller import QuorumController
from kavka.controller.results import NewTopic
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.loader import MetadataLoader
from kavka.metadata.snapshot import image_records
from kavka.protocol.records import decode_batch, iter_batches
from kavka.raft import snapshot as snapshots
from kavka.raft.api import SnapshotId
from kavka.raft.client import RaftClient, RaftConfig
from kavka.raft.state import MemoryQuorumStateStore
from kavka.testing import MemoryLog

SID = SnapshotId(1234, 7)


def test_file_name_is_kafkas() -> None:
    assert snapshots.file_name(SID) == "00000000000000001234-0000000007.checkpoint"
    assert snapshots.parse_file_name("00000000000000001234-0000000007.checkpoint") == SID
    assert snapshots.parse_file_name("00000000000000001234-0000000007.checkpoint.part") is None
    assert snapshots.parse_file_name("00000000000000000000.log") is None


def test_round_trip_and_kafka_layout() -> None:
    records = [(b"k%d" % i, b"v" * (i % 7)) for i in range(1500)] + [(None, b"x"), (b"y", None)]
    data = snapshots.encode(SID, records, last_contained_timestamp_ms=99)
    assert snapshots.decode(data) == records
    batches = [decode_batch(data, pos) for pos, _ in iter_batches(data)]
    # Header batch, data batches, footer batch; offsets dense from 0; every batch in the snapshot's epoch.
    first, last = batches[0], batches[-1]
    assert first[0].is_control and first[0].base_offset == 0 and len(first[1]) == 1
    assert struct.unpack(">hh", first[1][0].key) == (0, 3)  # ControlRecordType SNAPSHOT_HEADER
    assert struct.unpack_from(">hq", first[1][0].value) == (0, 99)  # Version, LastContainedLogTimestamp
    assert last[0].is_control and struct.unpack(">hh", last[1][0].key) == (0, 4)  # SNAPSHOT_FOOTER
    assert all(h.partition_leader_epoch == 7 for h, _ in batches)
    offsets = [r.offset for _, recs in batches for r in recs]
    assert offsets == list(range(len(records) + 2))


@pytest.mark.parametrize("cut", [1, 10, 61, 200])
def test_a_torn_snapshot_is_corrupt(cut: int) -> None:
    data = snapshots.encode(SID, [(b"k", b"v" * 100)] * 3)
    with pytest.raises(snapshots.CorruptSnapshotError):
        snapshots.decode(data[:-cut])


def test_a_snapshot_without_footer_or_with_a_flipped_bit_is_corrupt() -> None:
    data = snapshots.encode(SID, [(b"k", b"v")] * 3)
    footer_pos = [pos for pos, _ in iter_batches(data)][-1]
    with pytest.raises(snapshots.CorruptSnapshotError, match="Footer"):
        snapshots.decode(data[:footer_pos])
    flipped = bytearray(data)
    flipped[footer_pos - 2] ^= 1
    with pytest.raises(snapshots.CorruptSnapshotError):
        snapshots.decode(bytes(flipped))


def test_write_is_atomic_and_a_part_file_is_deleted_on_scan(tmp_path: Path) -> None:
    path = snapshots.write(tmp_path, SID, snapshots.encode(SID, []))
    assert path.name == snapshots.file_name(SID) and not list(tmp_path.glob("*.part"))
    torn = tmp_path / "00000000000000002000-0000000007.checkpoint.part"
    torn.write_bytes(b"half")
    assert [sid for sid, _ in snapshots.scan(tmp_path)] == [SID]
    assert not torn.exists()


def _sample_image() -> MetadataImage:
    recs = [
        mr.RegisterBrokerRecord(1, "inc1", (("PLAINTEXT", "h", 9001),), "/dc/r1", ("dirA",)),
        mr.RegisterBrokerRecord(2, "inc2", (("PLAINTEXT", "h", 9002),)),
        mr.BrokerRegistrationChangeRecord(2, 1, fenced=False),  # broker 2 unfenced, 1 stays fenced
        mr.TopicRecord("t", "tid1"),
        mr.PartitionRecord("tid1", 0, (1, 2), (1, 2), 1),
        mr.PartitionRecord("tid1", 1, (2, 1), (2,), 2, directories=("dirA", "dirB")),
        mr.PartitionChangeRecord("tid1", 1, leader=1, isr=(1,)),
        mr.TopicRecord("gone", "tid2"),
        mr.ConfigRecord(2, "gone", "retention.ms", "5"),
        mr.RemoveTopicRecord("tid2"),
        mr.ConfigRecord(2, "t", "cleanup.policy", "compact"),
        mr.ConfigRecord(4, "", "log.retention.ms", "100"),
        mr.ProducerIdsRecord(1, 3000),
    ]
    d = MetadataDelta(MetadataImage())
    for i, r in enumerate(recs):
        d.replay(r, i)
    return d.apply()


def test_image_records_rebuild_the_image() -> None:
    image = _sample_image()
    d = MetadataDelta(MetadataImage())
    for r in image_records(image):
        d.replay(mr.decode(*mr.encode(r)), image.offset)
    back = d.apply()
    assert dict(back.brokers) == dict(image.brokers)  # epochs and fencing survive
    assert [b.fenced for _, b in sorted(back.brokers.items())] == [True, False]
    assert {k: dict(v.partitions) for k, v in back.topics_by_name.items()} == {
        k: dict(v.partitions) for k, v in image.topics_by_name.items()
    }
    assert back.topics_by_name["t"].partitions[1].leader_epoch == 1  # epochs survive
    assert {k: dict(v) for k, v in back.configs.items()} == {k: dict(v) for k, v in image.configs.items()}
    assert back.next_producer_id == 3000
    assert image_records(back) == image_records(image)


# ---- the controller: trigger and load, over a one-voter RaftClient on a MemoryLog ------------


def _controller(log: MemoryLog, **props: str) -> tuple[RaftClient, QuorumController]:
    config = build_config({"node.id": "1", **props})
    raft = RaftClient(
        RaftConfig(node_id=1, voters=(1,), cluster_id="c" * 22),
        log,
        MemoryQuorumStateStore(),
        random.Random(1),
        now_ms=0,
    )
    loader = MetadataLoader(
        raft,
        snapshot_bytes=int(config["metadata.log.max.record.bytes.between.snapshots"]),
        snapshot_interval_ms=int(config["metadata.log.max.snapshot.interval.ms"]),
    )
    return raft, QuorumController(config, raft, loader, timeout_s=5)


async def _drive(raft: RaftClient, qc: QuorumController, stop: asyncio.Event) -> None:
    now = 0
    while not stop.is_set():
        now += 1
        if raft.poll(now).flush_needed:
            raft.log.flush()
            raft.poll(now)
        qc.loader.after_poll()
        qc.after_poll()
        await asyncio.sleep(0.001)


async def _run_with(raft: RaftClient, qc: QuorumController, coro_fn) -> None:  # type: ignore[no-untyped-def]
    stop = asyncio.Event()
    task = asyncio.create_task(_drive(raft, qc, stop))
    try:
        assert await qc.wait_for(raft.leader_ready, 5)
        await coro_fn()
    finally:
        stop.set()
        await task


def test_controller_snapshots_every_n_bytes_and_a_restart_loads_it(caplog: pytest.LogCaptureFixture) -> None:
    log = MemoryLog()
    raft, qc = _controller(log, **{"metadata.log.max.record.bytes.between.snapshots": "2000"})

    async def create() -> None:
        epoch = await qc.register_broker(broker_id=1, incarnation_id="inc-1", endpoints=[("PLAINTEXT", "h", 9092)], rack=None, log_dirs=[])
        assert not (await qc.broker_heartbeat(broker_id=1, broker_epoch=epoch, metadata_offset=epoch)).is_fenced
        for i in range(30):
            [created] = await qc.create_topics([NewTopic(f"topic-{i}", 2, 1, configs={"retention.ms": str(i + 1)})])
            assert created.result.ok, created

    asyncio.run(_run_with(raft, qc, create))
    latest = log.latest_snapshot_id
    assert latest is not None and len(log.snapshots) == 2  # the newest and the one before
    assert log.start_offset == latest.end_offset > 0  # the log below it is gone
    before = qc.image

    # A restart: a fresh raft client and controller over the same (crashed) log.
    log.crash()
    raft2, qc2 = _controller(log, **{"metadata.log.max.record.bytes.between.snapshots": "2000"})
    with caplog.at_level(logging.INFO, logger="kavka.metadata"):
        asyncio.run(_run_with(raft2, qc2, lambda: asyncio.sleep(0)))
    name = snapshots.file_name(latest)[: -len(".checkpoint")]
    assert any(f"loaded metadata snapshot {name} (" in r.getMessage() for r in caplog.records)
    assert set(qc2.image.topics_by_name) == set(before.topics_by_name) and len(before.topics_by_name) == 30
    assert qc2.image.topic_configs("topic-29") == {"retention.ms": "30"}


def test_no_snapshot_below_the_threshold() -> None:
    log = MemoryLog()
    raft, qc = _controller(log)  # Kafka's default: 20 MiB between snapshots

    async def create() -> None:
        epoch = await qc.register_broker(broker_id=1, incarnation_id="inc-1", endpoints=[("PLAINTEXT", "h", 9092)], rack=None, log_dirs=[])
        assert not (await qc.broker_heartbeat(broker_id=1, broker_epoch=epoch, metadata_offset=epoch)).is_fenced
        [created] = await qc.create_topics([NewTopic("a", 1, 1)])
        assert created.result.ok, created

    asyncio.run(_run_with(raft, qc, create))
    assert log.latest_snapshot_id is None and log.start_offset == 0


def test_a_caller_cancelled_mid_commit_keeps_the_lock_until_its_records_commit() -> None:
    """A client that closes its connection cancels its CreateTopics while the records are
    appended but not committed; the next CreateTopics of the same name must still see them
    (it once decided on the older image and created the topic a second time)."""
    raft, qc = _controller(MemoryLog())

    async def run() -> None:
        paused = [False]
        stop = asyncio.Event()

        async def drive() -> None:
            now = 0
            while not stop.is_set():
                if not paused[0]:
                    now += 1
                    if raft.poll(now).flush_needed:
                        raft.log.flush()
                        raft.poll(now)
                    qc.loader.after_poll()
                    qc.after_poll()
                await asyncio.sleep(0.001)

        driver = asyncio.create_task(drive())
        try:
            assert await qc.wait_for(raft.leader_ready, 5)
            epoch = await qc.register_broker(broker_id=1, incarnation_id="inc-1", endpoints=[("PLAINTEXT", "h", 9092)],
                                             rack=None, log_dirs=[])
            await qc.broker_heartbeat(broker_id=1, broker_epoch=epoch, metadata_offset=epoch)
            paused[0] = True  # nothing commits from here on
            appended = raft.log.end_offset
            first = asyncio.ensure_future(qc.create_topics([NewTopic("__consumer_offsets", 3, 1)]))
            while raft.log.end_offset == appended:  # its records are in the log, not committed
                await asyncio.sleep(0)
            first.cancel()
            second = asyncio.ensure_future(qc.create_topics([NewTopic("__consumer_offsets", 3, 1)]))
            for _ in range(20):
                await asyncio.sleep(0)  # the cancellation lands; the second may decide now
            paused[0] = False
            [created] = await second
            assert created.result.error == ErrorCode.topic_already_exists, created
            assert [t.name for t in qc.image.topics_by_id.values()] == ["__consumer_offsets"]
        finally:
            stop.set()
            await driver

    asyncio.run(run())
