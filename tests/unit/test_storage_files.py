"""Checkpoint files, partition.metadata, meta.properties, leader epoch cache."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kavka.storage.checkpoints import OffsetCheckpointFile, PartitionMetadataFile
from kavka.storage.errors import CorruptCheckpointError
from kavka.storage.leader_epoch import EpochEntry, LeaderEpochFileCache
from kavka.storage.meta_properties import (
    InvalidMetaPropertiesError,
    MetaProperties,
    generate_uuid,
    is_valid_uuid,
    read_meta_properties,
    write_meta_properties,
)


def test_offset_checkpoint_round_trip_and_format(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    assert f.read() == {}
    f.write({("a.b-c_d", 0): 10, ("a.b-c_d", 1): 0, ("z", 3): 99})
    assert f.path.read_text() == "0\n3\na.b-c_d 0 10\na.b-c_d 1 0\nz 3 99\n"
    assert f.read() == {("a.b-c_d", 0): 10, ("a.b-c_d", 1): 0, ("z", 3): 99}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt 0\n", "0\n1\nt zero 1\n"],
)
def test_corrupt_checkpoint_names_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as err:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(err.value)


def test_partition_metadata(tmp_path: Path) -> None:
    pmf = PartitionMetadataFile(tmp_path)
    tid = generate_uuid()
    pmf.write(tid)
    assert (tmp_path / "partition.metadata").read_text() == f"version: 0\ntopic_id: {tid}"
    assert pmf.read() == tid
    (tmp_path / "partition.metadata").write_text("version: 1\ntopic_id: x")
    with pytest.raises(CorruptCheckpointError):
        pmf.read()


def test_generate_uuid_is_kafka_style() -> None:
    ids = {generate_uuid() for _ in range(200)}
    assert len(ids) == 200
    for u in ids:
        assert len(u) == 22 and "=" not in u and not u.startswith("-")
        assert is_valid_uuid(u)
        assert len(base64.urlsafe_b64decode(u + "==")) == 16
    assert not is_valid_uuid("short")


def test_meta_properties_round_trip(tmp_path: Path) -> None:
    props = MetaProperties(cluster_id=generate_uuid(), node_id=3, directory_id=generate_uuid())
    write_meta_properties(tmp_path, props)
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#")
    assert f"cluster.id={props.cluster_id}\n" in text and "node.id=3\n" in text
    assert "version=1\n" in text
    assert read_meta_properties(tmp_path) == props


def test_meta_properties_reads_kafka_written_file(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Jan 01 00:00:00 UTC 2025\nnode.id=1\n"
        "directory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    )
    props = read_meta_properties(tmp_path)
    assert props == MetaProperties(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=1, directory_id="J8aAPcfLQt2bqs1JT_rMgQ"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("cluster.id=x\nnode.id=1\n", "no version"),
        ("version=7\n", "unsupported version"),
        ("version=1\ncluster.id=x\n", "requires node.id"),
        ("version=1\nnode.id=one\ncluster.id=x\n", "not an int"),
        ("version=1\nnode.id=1\n", "requires cluster.id"),
        ("version=1\nnode.id=1\ncluster.id=x\ndirectory.id=nope\n", "not a Uuid"),
    ],
)
def test_meta_properties_errors_name_dir_and_reason(tmp_path: Path, text: str, reason: str) -> None:
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(InvalidMetaPropertiesError) as err:
        read_meta_properties(tmp_path)
    assert str(tmp_path) in str(err.value) and reason in str(err.value)
    assert isinstance(err.value, ValueError)


def test_meta_properties_missing_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_meta_properties(tmp_path)


def test_leader_epoch_assign_and_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache.load(path)
    assert cache.latest_epoch is None
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: no change
    cache.assign(2, 10)
    cache.assign(4, 30)
    assert path.read_text() == "0\n3\n0 0\n2 10\n4 30\n"
    assert LeaderEpochFileCache.load(path).epoch_entries() == cache.epoch_entries()
    assert cache.epoch_for_offset(15) == 2
    # A lower epoch or earlier offset truncates the conflicting tail.
    cache.assign(3, 20)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(3, 20)]
    cache.assign(5, 15)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(5, 15)]
    cache.assign(-1, 100)  # ignored
    assert cache.latest_epoch == 5


def test_leader_epoch_end_offset_for() -> None:
    cache = LeaderEpochFileCache(None)
    for e, o in [(1, 0), (3, 10), (6, 25)]:
        cache.assign(e, o)
    leo = 40
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.end_offset_for(6, leo) == (6, 40)  # current epoch ends at LEO
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(2, leo) == (1, 10)  # unknown epoch between: floor epoch
    assert cache.end_offset_for(3, leo) == (3, 25)
    assert cache.end_offset_for(5, leo) == (3, 25)
    assert cache.end_offset_for(0, leo) == (0, 0)  # below every epoch
    assert cache.end_offset_for(7, leo) == (-1, -1)  # above every epoch
    assert LeaderEpochFileCache(None).end_offset_for(3, leo) == (-1, -1)


def test_leader_epoch_truncation() -> None:
    cache = LeaderEpochFileCache(None)
    for e, o in [(1, 0), (3, 10), (6, 25)]:
        cache.assign(e, o)
    cache.truncate_from_end(25)
    assert cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(3, 10)]
    cache.truncate_from_end(100)
    assert len(cache) == 2
    cache.truncate_from_start(12)
    assert cache.epoch_entries() == [EpochEntry(3, 12)]
    cache.truncate_from_start(5)
    assert cache.epoch_entries() == [EpochEntry(3, 12)]


def test_leader_epoch_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n3\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochFileCache.load(path)


def test_leader_epoch_load_truncation_is_deferred_and_unchanged_state_is_not_rewritten(tmp_path: Path) -> None:
    """Startup cost: an empty epoch (epoch, log end) is dropped on load and re-added by the
    leader; neither step may rewrite (fsync) the file, and the file stays truthful."""
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache.load(path)
    cache.assign(0, 0)
    cache.assign(3, 10)
    before = path.stat()
    reloaded = LeaderEpochFileCache.load(path)
    reloaded.truncate_from_end(10, flush=False)  # what Log.open does with log end 10
    assert reloaded.epoch_entries() == [EpochEntry(0, 0)]
    reloaded.assign(3, 10)  # the leader takes over again at the log end
    assert reloaded.epoch_entries() == [EpochEntry(0, 0), EpochEntry(3, 10)]
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "file was rewritten"
    # A real change is written, and a deferred truncation reaches the file with it.
    reloaded.truncate_from_end(10, flush=False)
    reloaded.assign(4, 10)
    assert LeaderEpochFileCache.load(path).epoch_entries() == [EpochEntry(0, 0), EpochEntry(4, 10)]
