"""The RemoteStorageManager contract, run against every built-in backend: ``local`` (a directory)
and ``s3`` (boto3 against moto's S3 server, a subprocess on loopback), the latter also behind a
proxy that fails every third upload and read with HTTP 500 (retried by the backend, never a gap).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kavka.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
    TopicIdPartition,
)
from kavka.tiered.backends import PluginLoadError, load_remote_storage_manager, rsm_configs
from kavka.tiered.remote_index import build_remote_indexes
from tests.s3_server import FaultProxy, MotoServer, aws_test_env
from tests.unit.tiered_segments import write_segment

boto3 = pytest.importorskip("boto3")

TP = TopicIdPartition(uuid.UUID(int=7), "orders", 3)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoServer]:
    with aws_test_env():
        server = MotoServer()
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(params=["local", "s3", "s3-flaky"])
def rsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RemoteStorageManager]:
    if request.param == "local":
        m = load_remote_storage_manager(
            "local", rsm_configs({"rsm.config.dir": str(tmp_path / "remote")}))
        yield m
        m.close()
        return
    server: MotoServer = request.getfixturevalue("moto_server")
    proxy = FaultProxy(server.port, fail_every=3 if request.param == "s3-flaky" else 0)
    proxy.start()
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    with aws_test_env():
        boto3.client("s3", region_name="us-east-1", endpoint_url=server.url).create_bucket(
            Bucket=bucket)
        m = load_remote_storage_manager("s3", {
            "s3.bucket": bucket, "s3.prefix": "kavka/", "s3.region": "us-east-1",
            "s3.endpoint.url": proxy.url, "s3.multipart.threshold.bytes": str(5 << 20),
        })
        m.proxy = proxy  # type: ignore[attr-defined]
        try:
            yield m
        finally:
            m.close()
            proxy.stop()
    if request.param == "s3-flaky":
        # faults really happened (every third upload and every third read), yet the test passed
        assert proxy.injected["write"] > 0, proxy.injected
        if proxy.seen["read"] >= 3:
            assert proxy.injected["read"] > 0, proxy.injected


def segment_data(directory: Path, base_offset: int = 100, batches: int = 20,
                 value_size: int = 100, segment_uuid: uuid.UUID | None = None
                 ) -> tuple[LogSegmentData, dict[IndexType | None, bytes]]:
    log_path, _ = write_segment(directory, base_offset, batches, value_size)
    stem = directory / f"{base_offset:020d}"
    for suffix in (".index", ".timeindex", ".snapshot"):
        Path(str(stem) + suffix).write_bytes(os.urandom(64))
    idx = build_remote_indexes(log_path, base_offset=base_offset,
                               segment_id=segment_uuid or uuid.uuid4(), out_dir=directory)
    data = LogSegmentData(
        log_segment=log_path, offset_index=Path(str(stem) + ".index"),
        time_index=Path(str(stem) + ".timeindex"), transaction_index=None,
        producer_snapshot_index=Path(str(stem) + ".snapshot"),
        leader_epoch_index=b"0\n1\n0 100\n", remote_log_index=idx.remote_log_index,
        remote_offset_index=idx.remote_offset_index, remote_time_index=idx.remote_time_index)
    expected: dict[IndexType | None, bytes] = {
        k: (v if isinstance(v, bytes) else v.read_bytes()) for k, v in data.files().items()}
    return data, expected


def metadata(segment_id: RemoteLogSegmentId, size: int, start: int = 100, end: int = 159
             ) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=segment_id, start_offset=start, end_offset=end, max_timestamp_ms=0,
        broker_id=1, event_timestamp_ms=0, segment_size_in_bytes=size,
        segment_leader_epochs={0: start})


def test_copy_then_fetch_segment_ranges_and_every_index(rsm: RemoteStorageManager,
                                                        tmp_path: Path) -> None:
    data, expected = segment_data(tmp_path / "seg")
    seg = expected[None]
    md = metadata(RemoteLogSegmentId.generate(TP), len(seg))
    rsm.copy_log_segment_data(md, data)
    assert rsm.fetch_log_segment(md, 0) == seg
    assert rsm.fetch_log_segment(md, 17, 4000) == seg[17:4001]  # end is inclusive, as Kafka's
    assert rsm.fetch_log_segment(md, len(seg) - 5) == seg[-5:]
    assert rsm.fetch_log_segment(md, len(seg) + 10) == b""
    for t, content in expected.items():
        if t is not None:
            assert rsm.fetch_index(md, t) == content, t
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(md, IndexType.TRANSACTION)  # the segment had none
    with pytest.raises(ValueError):
        rsm.fetch_log_segment(md, 10, 5)


def test_copy_is_idempotent_and_ids_are_unique_per_copy(rsm: RemoteStorageManager,
                                                        tmp_path: Path) -> None:
    data, expected = segment_data(tmp_path / "seg")
    a = metadata(RemoteLogSegmentId.generate(TP), len(expected[None]))
    b = metadata(RemoteLogSegmentId.generate(TP), len(expected[None]))
    assert a.segment_id != b.segment_id
    rsm.copy_log_segment_data(a, data)
    rsm.copy_log_segment_data(a, data)  # a retried copy of one id
    rsm.copy_log_segment_data(b, data)  # a second copy of the same local segment
    rsm.delete_log_segment_data(a)
    assert rsm.fetch_log_segment(b, 0) == expected[None]
    assert rsm.fetch_index(b, IndexType.REMOTE_LOG_INDEX) == expected[IndexType.REMOTE_LOG_INDEX]
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_log_segment(a, 0)


def test_delete_is_idempotent(rsm: RemoteStorageManager, tmp_path: Path) -> None:
    data, expected = segment_data(tmp_path / "seg")
    md = metadata(RemoteLogSegmentId.generate(TP), len(expected[None]))
    rsm.copy_log_segment_data(md, data)
    rsm.delete_log_segment_data(md)
    rsm.delete_log_segment_data(md)
    rsm.delete_log_segment_data(metadata(RemoteLogSegmentId.generate(TP), 1))  # never copied
    for t in [None, *IndexType]:
        with pytest.raises(RemoteResourceNotFoundError):
            if t is None:
                rsm.fetch_log_segment(md, 0)
            else:
                rsm.fetch_index(md, t)


def test_partitions_do_not_collide(rsm: RemoteStorageManager, tmp_path: Path) -> None:
    seg_id = uuid.uuid4()
    other = TopicIdPartition(TP.topic_id, TP.topic, TP.partition + 1)
    d1, e1 = segment_data(tmp_path / "p1")
    d2, e2 = segment_data(tmp_path / "p2")
    m1 = metadata(RemoteLogSegmentId(TP, seg_id), len(e1[None]))
    m2 = metadata(RemoteLogSegmentId(other, seg_id), len(e2[None]))
    rsm.copy_log_segment_data(m1, d1)
    rsm.copy_log_segment_data(m2, d2)
    assert rsm.fetch_log_segment(m1, 0) == e1[None]
    assert rsm.fetch_log_segment(m2, 0) == e2[None]


def test_concurrent_copies_and_reads(rsm: RemoteStorageManager, tmp_path: Path) -> None:
    # Backends are called from the remote log manager's worker threads.
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            data, expected = segment_data(tmp_path / f"seg{i}", base_offset=1000 * i)
            md = metadata(RemoteLogSegmentId.generate(TP), len(expected[None]),
                          1000 * i, 1000 * i + 59)
            rsm.copy_log_segment_data(md, data)
            assert rsm.fetch_log_segment(md, 0) == expected[None]
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_large_segment_round_trips(rsm: RemoteStorageManager, tmp_path: Path) -> None:
    # 12 MiB: over the 5 MiB multipart threshold the s3 fixtures configure.
    data, expected = segment_data(tmp_path / "big", batches=40, value_size=100_000)
    seg = expected[None]
    assert len(seg) > 11 << 20
    md = metadata(RemoteLogSegmentId.generate(TP), len(seg), 100, 219)
    rsm.copy_log_segment_data(md, data)
    assert rsm.fetch_log_segment(md, 0) == seg
    assert rsm.fetch_log_segment(md, 6 << 20, (6 << 20) + 999) == seg[6 << 20:(6 << 20) + 1000]
    proxy = getattr(rsm, "proxy", None)
    if proxy is not None:
        assert any("?uploads" in p for p in proxy.paths), "no multipart upload was started"
        assert any("partNumber=" in p for p in proxy.paths)


def test_loader_refuses_unknown_and_non_plugins(tmp_path: Path) -> None:
    with pytest.raises(PluginLoadError, match="remote.log.storage.manager.class.name"):
        load_remote_storage_manager("nope", {})
    with pytest.raises(PluginLoadError, match="does not implement"):
        load_remote_storage_manager("pathlib:PurePath", {})
    with pytest.raises(ValueError, match="rsm.config.dir"):
        load_remote_storage_manager("local", {})
    with pytest.raises(ValueError, match="rsm.config.s3.bucket"):
        load_remote_storage_manager("s3", {})
    m = load_remote_storage_manager(
        "kavka.tiered.backends.local_dir:LocalDirRemoteStorageManager", {"dir": str(tmp_path)})
    assert isinstance(m, RemoteStorageManager)
