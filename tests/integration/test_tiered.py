"""Tiered storage (KIP-405) on a real broker process, driven by unmodified clients.

A topic with remote.storage.enable=true and a small local.retention.bytes is produced past its
local retention: closed segments are copied to remote storage (the ``local`` backend, a directory)
and deleted locally, and every record is still read from offset 0 -- keys, values, headers,
timestamps, offsets -- by confluent-kafka and kafka-python. A restart loses no remote state
(__remote_log_metadata is replayed); total retention deletes remote segments and moves the log
start offset; a kill -9 between a copy and its COPY_SEGMENT_FINISHED leaves no half-visible segment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

from kavka.protocol import api
from kavka.protocol.messages import make, nested
from tests.broker_harness import BrokerProcess
from tests.integration.helpers import (
    assert_same_records,
    ck_admin,
    ck_list_offset,
    ck_produce_samples,
    ck_producer,
    ck_read_to_end,
    ck_wait_topic,
    kafka_error_code,
    partition_dir,
    recent_base_ts,
    sample_records,
)
from tests.wait import wait_until

EARLIEST_LOCAL, LATEST_TIERED = -4, -5


def tiered_broker(root: Path, remote: Path, **extra: str) -> BrokerProcess:
    return BrokerProcess(
        root,
        overrides={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "local",
            "rsm.config.dir": str(remote),
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "3",
            **extra,
        },
    )


TIERED = {
    "remote.storage.enable": "true",
    "segment.bytes": "4096",
    "local.retention.bytes": "4096",
    "retention.ms": "-1",
}


def list_offset(broker: BrokerProcess, topic: str, timestamp: int, partition: int = 0) -> tuple[int, int]:
    """ListOffsets v9 (the version with -4 / -5) for one partition: (error code, offset)."""
    cls = api.request_schema(2, 9)
    topic_cls, part_cls = nested(cls, "ListOffsetsTopic"), nested(cls, "ListOffsetsPartition")
    req = make(
        cls,
        replica_id=-1,
        isolation_level=0,
        topics=(make(topic_cls, name=topic, partitions=(make(part_cls, partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),),
    )
    from tests.raw_client import raw_call

    resp = raw_call(broker, 2, 9, req)
    part = resp.topics[0].partitions[0]
    return part.error_code, part.offset


def local_logs(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted(partition_dir(broker.log_dirs[0], topic).glob("*.log"))


def remote_segments(remote: Path, topic: str) -> list[Path]:
    return sorted(p for d in remote.glob(f"{topic}-0-*") for p in d.glob("*.log"))


def produce_past_local_retention(broker: BrokerProcess, topic: str, n: int = 400) -> list:
    admin = ck_admin(broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, config=TIERED)])[topic].result(15)
    ck_wait_topic(admin, topic, 1)
    samples = sample_records(n, base_ts=recent_base_ts())
    offsets = ck_produce_samples(ck_producer(broker.bootstrap, {"linger.ms": 0, "batch.num.messages": 5}), topic, samples)
    assert [o for _, o in offsets] == list(range(n))
    # local retention: only copied segments go, so the local log start offset moving past 0
    # proves both the copy and the local delete
    wait_until(lambda: list_offset(broker, topic, EARLIEST_LOCAL)[1] > 0 and len(local_logs(broker, topic)) <= 3,
               timeout=60, message="copied segments to leave local disk")
    return samples


def test_tiered_topic_reads_every_record_from_offset_zero(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote).start()
    try:
        topic = "tiered-read"
        samples = produce_past_local_retention(b, topic)
        local_start = list_offset(b, topic, EARLIEST_LOCAL)[1]
        assert list_offset(b, topic, -2) == (0, 0)  # the log start offset stays: data is remote
        err, tiered = list_offset(b, topic, LATEST_TIERED)
        assert err == 0 and local_start - 1 <= tiered < len(samples)
        assert remote_segments(remote, topic), "no segment in remote storage"
        # confluent-kafka from offset 0: the head comes from remote storage
        got = ck_read_to_end(b.bootstrap, topic)
        assert_same_records(got, samples)
        # small fetches cross every remote segment boundary
        got = ck_read_to_end(b.bootstrap, topic, conf={"fetch.max.bytes": 1024, "message.max.bytes": 1000, "max.partition.fetch.bytes": 700})
        assert_same_records(got, samples)
        # a timestamp in the remote range is found in remote storage
        tp_offset = ck_list_offset(ck_admin(b.bootstrap), topic, 0, OffsetSpec.for_timestamp(samples[5].timestamp))
        assert tp_offset == 5
        # DescribeLogDirs and `kavka topics describe`: local vs remote bytes
        from tests.integration.test_cli_topics import kavka_json

        [desc] = kavka_json(b, "topics", "describe", "--topic", topic)
        [p0] = desc["partitions"]
        local_size = sum(f.stat().st_size for f in local_logs(b, topic))
        assert p0["local_bytes"] == local_size and p0["remote_bytes"] >= 4096, p0
        remote_bytes = sum(f.stat().st_size for f in remote_segments(remote, topic))
        assert p0["remote_bytes"] == remote_bytes
        from kavka.client.admin import AdminClient as KavkaAdmin

        with KavkaAdmin(b.bootstrap) as ka:
            [ka_dirs] = ka.describe_log_dirs(topics=[topic]).values()
            names = [d.path for d in ka_dirs]
            assert names[-1] == "remote:local" and names[0] == str(b.log_dirs[0])
            assert ka.alter_replica_log_dirs({(1, topic, 0): "remote:local"})[(1, topic, 0)] == 57  # LOG_DIR_NOT_FOUND
        # kafka-python, also from 0
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            recs = []
            while len(recs) < len(samples):
                batch = c.poll(timeout_ms=2000)
                if not batch:
                    break
                recs.extend(batch.get(tp, []))
        finally:
            c.close()
        assert [r.offset for r in recs] == list(range(len(samples)))
        for r, s in zip(recs, samples, strict=True):
            assert (r.key, r.value, r.timestamp) == (s.key, s.value, s.timestamp)
            assert tuple(r.headers) == s.headers
    finally:
        assert b.stop() == 0, b.log_text()


def test_restart_keeps_remote_state(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote).start()
    topic = "tiered-restart"
    try:
        samples = produce_past_local_retention(b, topic, 300)
        local_start = list_offset(b, topic, EARLIEST_LOCAL)[1]
        tiered = list_offset(b, topic, LATEST_TIERED)[1]
    finally:
        assert b.stop() == 0, b.log_text()
    b.start()
    try:
        assert list_offset(b, topic, -2) == (0, 0)
        assert list_offset(b, topic, EARLIEST_LOCAL)[1] >= local_start
        assert list_offset(b, topic, LATEST_TIERED)[1] >= tiered
        assert "remote log metadata events replayed" in b.log_text()
        assert_same_records(ck_read_to_end(b.bootstrap, topic), samples)
    finally:
        assert b.stop() == 0, b.log_text()


def test_total_retention_deletes_remote_segments_and_moves_log_start(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote).start()
    topic = "tiered-expire"
    try:
        samples = produce_past_local_retention(b, topic, 400)
        before = len(remote_segments(remote, topic))
        assert before >= 2
        admin = ck_admin(b.bootstrap)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.bytes", "12288", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)

        def remote_by_base() -> list[tuple[int, int]]:
            """(base offset, bytes) of each remote segment, oldest first (a segment file opens
            with its first batch's base offset)."""
            return sorted((int.from_bytes(f.read_bytes()[:8], "big"), f.stat().st_size)
                          for f in remote_segments(remote, topic))

        def settled() -> bool:
            # Kafka's size rule: the oldest remote segment goes while the total (remote bytes plus
            # bytes only on local disk, above the highest tiered offset) stays at or above
            # retention.bytes without it. The log start offset moves before each remote delete, so
            # once the files show the rule holds, the log start offset is final.
            tiered = list_offset(b, topic, LATEST_TIERED)[1]
            local_only = sum(f.stat().st_size for f in local_logs(b, topic) if int(f.stem) > tiered)
            segs = remote_by_base()
            over = sum(size for _, size in segs) + local_only - 12288
            return not segs or over - segs[0][1] < 0

        wait_until(settled, timeout=60, message="total retention to delete remote segments")
        assert len(remote_segments(remote, topic)) < before
        start = list_offset(b, topic, -2)[1]
        assert 0 < start < len(samples)
        assert start == remote_by_base()[0][0]  # moved to the first remote segment left
        got = ck_read_to_end(b.bootstrap, topic)
        assert got[0].offset == list_offset(b, topic, -2)[1]
        assert_same_records(got, samples[got[0].offset:], first_offset=got[0].offset)
        # deleting the topic deletes its remote data too
        admin.delete_topics([topic])[topic].result(15)
        wait_until(lambda: not remote_segments(remote, topic), timeout=30, message="a deleted topic's remote segments to go")
        # logged once the last DELETE_SEGMENT_FINISHED is committed, a moment after the files go
        wait_until(lambda: "remote segments of deleted topic" in b.log_text(), timeout=10,
                   message="the deleted topic's remote clean-up to be logged")
    finally:
        assert b.stop() == 0, b.log_text()


def test_kill_during_copy_leaves_no_half_visible_segment(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote, **{"kavka.test.fault.injection.enable": "true"})
    b.start(env={"KAVKA_TEST_CRASH_POINT": "tiered-copy-before-finished"})
    topic = "tiered-kill"
    admin = ck_admin(b.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, config=TIERED)])[topic].result(15)
    samples = sample_records(200, base_ts=recent_base_ts())
    ck_produce_samples(ck_producer(b.bootstrap, {"linger.ms": 0, "batch.num.messages": 5}), topic, samples)
    # the first copy reaches remote storage, then the broker dies before COPY_SEGMENT_FINISHED
    wait_until(lambda: not b.alive(), timeout=60, message="the broker to die at the crash point")
    assert remote_segments(remote, topic), "the copy did not reach remote storage before the kill"
    first_local = min(int(p.stem) for p in local_logs(b, topic))
    assert first_local == 0  # nothing was deleted locally: the segment was never marked copied
    b.start()
    try:
        # the restarted broker deletes the orphan and copies again; every record is read
        wait_until(lambda: list_offset(b, topic, EARLIEST_LOCAL)[1] > 0, timeout=60,
                   message="the segment to be copied again and leave local disk")
        assert_same_records(ck_read_to_end(b.bootstrap, topic), samples)
        assert "deleting unfinished remote segment" in b.log_text()
    finally:
        assert b.stop() == 0, b.log_text()


INVALID = [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, "compacted"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "local.retention.ms"),
    ({"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "2000"}, "local.retention.bytes"),
    ({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "local.retention.ms": "1000"}, "identical"),
]


def test_invalid_tiered_topic_configs_are_refused(tmp_path: Path) -> None:
    b = tiered_broker(tmp_path / "b", tmp_path / "remote").start()
    try:
        admin = ck_admin(b.bootstrap)
        for configs, message in INVALID:
            with pytest.raises(Exception) as e:
                admin.create_topics([NewTopic("bad", 1, 1, config=configs)])["bad"].result(15)
            assert kafka_error_code(e.value) == 40, (configs, e.value)  # INVALID_CONFIG
            assert message in str(e.value), (configs, e.value)
        # (Incremental)AlterConfigs runs the same checks
        admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])["compacted"].result(15)
        res = ConfigResource(ConfigResource.Type.TOPIC, "compacted", incremental_configs=[
            ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(Exception) as e2:
            admin.incremental_alter_configs([res])[res].result(15)
        assert kafka_error_code(e2.value) == 40 and "compacted" in str(e2.value), e2.value
        # turning tiering off without remote.log.delete.on.disable is refused (KIP-950)
        admin.create_topics([NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true"})])["tiered"].result(15)
        off = ConfigResource(ConfigResource.Type.TOPIC, "tiered", incremental_configs=[
            ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(Exception) as e3:
            admin.incremental_alter_configs([off])[off].result(15)
        assert kafka_error_code(e3.value) == 40 and "remote.log.delete.on.disable" in str(e3.value), e3.value
    finally:
        assert b.stop() == 0, b.log_text()


def test_tiered_topic_refused_when_the_broker_has_no_tiering(broker, topic_name) -> None:
    admin = ck_admin(broker.bootstrap)
    with pytest.raises(Exception) as e:
        admin.create_topics([NewTopic(topic_name, 1, 1, config={"remote.storage.enable": "true"})])[topic_name].result(15)
    assert kafka_error_code(e.value) == 40
    assert "Tiered Storage functionality is disabled in the broker" in str(e.value)



def test_s3_backend_behind_a_flaky_proxy(tmp_path: Path) -> None:
    """The same path against moto's S3 server, every third upload and read answered HTTP 500 by a
    proxy: botocore's retries hide the faults, nothing is lost."""
    boto3 = pytest.importorskip("boto3")
    from tests.s3_server import FaultProxy, MotoServer, aws_test_env

    with aws_test_env():
        server = MotoServer()
        server.start()
        proxy = FaultProxy(server.port, fail_every=3)
        proxy.start()
        try:
            boto3.client("s3", region_name="us-east-1", endpoint_url=server.url).create_bucket(Bucket="tiered")
            b = BrokerProcess(tmp_path / "b", overrides={
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "s3",
                "rsm.config.s3.bucket": "tiered",
                "rsm.config.s3.prefix": "kavka/",
                "rsm.config.s3.region": "us-east-1",
                "rsm.config.s3.endpoint.url": proxy.url,
                "remote.log.manager.task.interval.ms": "200",
                "log.retention.check.interval.ms": "200",
                "remote.log.metadata.topic.num.partitions": "3",
            })
            b.start(env={k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
            try:
                topic = "tiered-s3"
                samples = produce_past_local_retention(b, topic, 300)
                assert_same_records(ck_read_to_end(b.bootstrap, topic), samples)
                keys = [o["Key"] for o in boto3.client("s3", region_name="us-east-1", endpoint_url=server.url)
                        .list_objects_v2(Bucket="tiered", Prefix=f"kavka/{topic}-0-").get("Contents", [])]
                assert any(k.endswith(".log") for k in keys) and any(k.endswith(".remoteLogIndex") for k in keys)
                assert proxy.injected["write"] > 0 and proxy.injected["read"] > 0, proxy.injected
            finally:
                assert b.stop() == 0, b.log_text()
        finally:
            proxy.stop()
            server.stop()


def test_copy_throttle_holds_back_the_next_copy(tmp_path: Path) -> None:
    """remote.log.manager.copy.max.bytes.per.second: after one 4 KiB segment at 100 B/s the next
    copy waits ~40 s, so closed segments stay local, uncopied (and undeleted)."""
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote, **{"remote.log.manager.copy.max.bytes.per.second": "100"}).start()
    try:
        topic = "tiered-throttle"
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1, config=TIERED)])[topic].result(15)
        samples = sample_records(300, base_ts=recent_base_ts())
        ck_produce_samples(ck_producer(b.bootstrap, {"linger.ms": 0, "batch.num.messages": 5}), topic, samples)
        assert len(local_logs(b, topic)) >= 4
        wait_until(lambda: remote_segments(remote, topic), timeout=30, message="the first copy")
        # the next pass finds the second segment and waits for the quota instead of copying it
        wait_until(lambda: "copy throttled" in b.log_text(), timeout=30, message="the throttle to hold a copy back")
        assert len(remote_segments(remote, topic)) == 1 and b.log_text().count("copied segment") == 1
        assert len(local_logs(b, topic)) >= 4  # nothing uncopied left local disk
        assert_same_records(ck_read_to_end(b.bootstrap, topic), samples)
    finally:
        assert b.stop() == 0, b.log_text()


def test_disable_with_delete_on_disable_deletes_remote_data(tmp_path: Path) -> None:
    """KIP-950: remote.storage.enable=false with remote.log.delete.on.disable=true deletes the
    topic's remote segments and moves the log start offset to the local log start offset."""
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote).start()
    try:
        topic = "tiered-off"
        samples = produce_past_local_retention(b, topic, 300)
        local_start = list_offset(b, topic, EARLIEST_LOCAL)[1]
        admin = ck_admin(b.bootstrap)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("remote.log.delete.on.disable", "true", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)
        wait_until(lambda: not remote_segments(remote, topic), timeout=30, message="remote data to be deleted")
        start = wait_until(lambda: list_offset(b, topic, -2)[1] or None, timeout=30, message="the log start offset to move")
        # no local segment goes once tiering is off (retention.ms=-1): the local start is final
        assert start == list_offset(b, topic, EARLIEST_LOCAL)[1] >= local_start
        assert list_offset(b, topic, LATEST_TIERED)[1] == -1
        got = ck_read_to_end(b.bootstrap, topic)
        assert_same_records(got, samples[start:], first_offset=start)
    finally:
        assert b.stop() == 0, b.log_text()


def raw_fetch(broker: BrokerProcess, topic: str, offsets: dict[int, int], partition_max_bytes: int = 1 << 20):
    """One Fetch v12 for several partitions of ``topic``: {partition: (error, records bytes)}."""
    import datetime

    from tests.raw_client import raw_call

    cls = api.request_schema(1, 12)
    topic_cls, part_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    parts = tuple(make(part_cls, partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1,
                       log_start_offset=-1, partition_max_bytes=partition_max_bytes) for p, o in offsets.items())
    req = make(cls, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1,
               max_bytes=50 << 20, isolation_level=0, session_id=0, session_epoch=-1,
               topics=(make(topic_cls, topic=topic, partitions=parts),), forgotten_topics_data=(), rack_id="")
    resp = raw_call(broker, 1, 12, req)
    return {p.partition_index: (p.error_code, bytes(p.records or b"")) for t in resp.responses for p in t.partitions}


def test_one_fetch_reads_many_partitions_from_remote_storage(tmp_path: Path) -> None:
    from kavka.protocol.records import iter_records

    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote).start()
    try:
        topic = "tiered-many"
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(topic, 3, 1, config=TIERED)])[topic].result(15)
        ck_wait_topic(admin, topic, 3)
        producer = ck_producer(b.bootstrap, {"linger.ms": 0, "batch.num.messages": 5})
        sent = {p: sample_records(200, base_ts=recent_base_ts()) for p in range(3)}
        for p, samples in sent.items():
            ck_produce_samples(producer, topic, samples, partition=p)
        wait_until(lambda: all(list_offset(b, topic, EARLIEST_LOCAL, p)[1] > 0 for p in range(3)),
                   timeout=60, message="every partition's head to leave local disk")
        got = raw_fetch(b, topic, {0: 0, 1: 0, 2: 0})
        for p in range(3):
            err, data = got[p]
            assert err == 0, (p, err)
            recs = list(iter_records(data))
            assert recs and recs[0].offset == 0, p  # from remote storage: offset 0 is not on local disk
            assert [r.value for r in recs] == [s.value for s in sent[p][:len(recs)]]
        # a fetch offset in the middle of a remote batch: whole batches, the batch holding it first
        err, data = raw_fetch(b, topic, {1: 7})[1]
        recs = list(iter_records(data))
        assert err == 0 and recs[0].offset <= 7 < recs[-1].offset
        # every partition read to the end through one consumer (librdkafka fetches them together)
        by_p: dict[int, list] = {0: [], 1: [], 2: []}
        for r in ck_read_to_end(b.bootstrap, topic, (0, 1, 2)):
            by_p[r.partition].append(r)
        for p in range(3):
            assert_same_records(by_p[p], sent[p], partition=p)
    finally:
        assert b.stop() == 0, b.log_text()


def test_a_blocked_remote_read_stalls_nothing_else(tmp_path: Path) -> None:
    """The Fetch handler awaits remote reads in the reader's pool: while a remote segment read is
    held (tests.tiered_plugins, below the process boundary), the broker still answers Metadata,
    produces and local reads -- ordering, not wall-clock thresholds -- and the held Fetch then
    completes with the right records."""
    import threading

    from kavka.protocol.records import iter_records

    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote, **{
        "remote.log.storage.manager.class.name": "tests.tiered_plugins:BlockingReadsRemoteStorageManager"}).start()
    try:
        topic, other = "tiered-slow", "plain"
        samples = produce_past_local_retention(b, topic, 300)
        (remote / "block-reads").touch()
        result: dict[int, tuple[int, bytes]] = {}
        t = threading.Thread(target=lambda: result.update(raw_fetch(b, topic, {0: 0})), daemon=True)
        t.start()
        wait_until(lambda: (remote / "read-blocked").exists(), timeout=30, message="the remote read to block")
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(other, 1, 1)])[other].result(15)
        more = sample_records(20, base_ts=recent_base_ts())
        ck_produce_samples(ck_producer(b.bootstrap), other, more)
        assert_same_records(ck_read_to_end(b.bootstrap, other), more)
        assert (remote / "read-blocked").exists() and t.is_alive()  # still held all along
        (remote / "block-reads").unlink()
        t.join(30)
        err, data = result[0]
        recs = list(iter_records(data))
        assert err == 0 and recs[0].offset == 0
        assert [r.value for r in recs] == [s.value for s in samples[:len(recs)]]
    finally:
        (remote / "block-reads").unlink(missing_ok=True)
        assert b.stop() == 0, b.log_text()


def test_remote_fetch_quota_holds_back_remote_reads(tmp_path: Path) -> None:
    """remote.log.manager.fetch.max.bytes.per.second (KIP-956): once the bytes read from remote
    storage are over the quota, a fetch of remote-only data gets no records and no error (it waits
    like a fetch with too little data); reading the remote part of the log then takes at least
    the time the quota implies, and every record still arrives."""
    from kavka.protocol.records import iter_records

    quota, windows = 4000, 2  # bytes/s; 2 samples of 1 s: the rate is measured over 1 to 2 s
    remote = tmp_path / "remote"
    b = tiered_broker(tmp_path / "b", remote, **{
        "remote.log.manager.fetch.max.bytes.per.second": str(quota),
        "remote.log.manager.fetch.quota.window.num": str(windows),
        "remote.log.manager.fetch.quota.window.size.seconds": "1",
    }).start()
    try:
        topic = "tiered-fetch-quota"
        samples = produce_past_local_retention(b, topic, n=600)
        local_start = list_offset(b, topic, EARLIEST_LOCAL)[1]
        got: list = []
        remote_bytes = largest = throttled = 0
        offset, started = 0, time.monotonic()
        deadline = started + 90
        while offset < local_start:
            assert time.monotonic() < deadline, f"remote part not read in 90 s (at offset {offset} of {local_start})"
            err, data = raw_fetch(b, topic, {0: offset}, partition_max_bytes=4096)[0]
            assert err == 0, err
            if not data:
                throttled += 1  # held back by the quota: no records, no error
                continue
            remote_bytes += len(data)
            largest = max(largest, len(data))
            recs = [r for r in iter_records(data) if r.offset >= offset]
            got.extend(recs)
            offset = recs[-1].offset + 1
        elapsed = time.monotonic() - started
        assert throttled > 0
        # Reads start only while the rate over the last 1-2 s is under the quota, so in `elapsed`
        # seconds at most quota * (elapsed + 2 windows) bytes plus one read can have been read.
        assert remote_bytes - largest <= quota * (elapsed + windows), (remote_bytes, elapsed)
        assert remote_bytes > 3 * quota  # the bound above says something: over 3 s of quota read
        assert [r.offset for r in got] == list(range(len(got)))
        assert [r.value for r in got] == [s.value for s in samples[:len(got)]]
        assert_same_records(ck_read_to_end(b.bootstrap, topic), samples)  # a client reads through the quota
    finally:
        assert b.stop() == 0, b.log_text()
