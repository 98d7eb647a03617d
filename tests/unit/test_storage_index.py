"""OffsetIndex / TimeIndex: floor lookups, ordering, file format, truncation."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kavka.storage.errors import CorruptIndexError, InvalidOffsetError
from kavka.storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


def test_offset_index_floor_lookup_and_file_format(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_index_size=1024)
    assert idx.lookup(150) == OffsetPosition(100, 0)  # empty: base offset, position 0
    for off, pos in [(110, 4096), (120, 8200), (135, 12400)]:
        idx.append(off, pos)
    assert idx.lookup(99) == OffsetPosition(100, 0)
    assert idx.lookup(109) == OffsetPosition(100, 0)
    assert idx.lookup(110) == OffsetPosition(110, 4096)
    assert idx.lookup(134) == OffsetPosition(120, 8200)
    assert idx.lookup(10**9) == OffsetPosition(135, 12400)
    with pytest.raises(InvalidOffsetError):
        idx.append(135, 13000)
    idx.flush()
    raw = path.read_bytes()
    assert raw == struct.pack(">iiiiii", 10, 4096, 20, 8200, 35, 12400)
    again = OffsetIndex(path, 100, max_index_size=1024)
    assert again.entries == 3 and again.lookup(125) == OffsetPosition(120, 8200)


def test_offset_index_truncate_and_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=8 * 4)
    for i in range(4):
        idx.append(i * 10, i * 100)
    assert idx.is_full
    with pytest.raises(InvalidOffsetError):
        idx.append(100, 1000)
    idx.flush()
    idx.truncate_to(20)  # removes entries >= 20
    assert idx.entries == 2 and idx.last_offset == 10
    assert (tmp_path / "0.index").stat().st_size == 16
    idx.truncate_to(5)
    assert idx.entries == 1


def test_offset_index_bad_length_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, max_index_size=1024)


def test_offset_index_out_of_order_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">iiii", 10, 100, 5, 200))
    idx = OffsetIndex(path, 0, max_index_size=1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()


def test_time_index_lookup_and_format(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    idx = TimeIndex(path, 50, max_index_size=12 * 10)
    assert idx.lookup(5) == TimestampOffset(-1, 50)
    idx.maybe_append(1000, 55)
    idx.maybe_append(1000, 57)  # same timestamp: not added
    idx.maybe_append(2000, 60)
    assert idx.entries == 2
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(3000, 58)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(1500, 70)
    assert idx.lookup(999) == TimestampOffset(-1, 50)
    assert idx.lookup(1999) == TimestampOffset(1000, 55)
    assert idx.lookup(5000) == TimestampOffset(2000, 60)
    idx.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 10)
    again = TimeIndex(path, 50, max_index_size=120)
    assert again.last_entry == TimestampOffset(2000, 60)
    again.truncate_to(60)
    assert again.last_entry == TimestampOffset(1000, 55)


def test_time_index_keeps_one_slot_free(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=12 * 3)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(3, 3)
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_an_index_without_a_file_is_created_by_its_first_entries_or_on_demand(tmp_path: Path, cls) -> None:
    path = tmp_path / "00000000000000000100.idx"
    idx = cls(path, 100, max_index_size=1024, create=False)
    assert (idx.entries, idx.on_disk) == (0, False)
    idx.flush()
    idx.close()
    assert not path.exists()  # nothing to write: no file
    idx.create_file()
    assert path.exists() and path.stat().st_size == 0 and idx.on_disk
    path.unlink()
    idx = cls(path, 100, max_index_size=1024, create=False)
    if cls is OffsetIndex:
        idx.append(105, 64)
    else:
        idx.maybe_append(1_000, 105)
    idx.flush(fsync=False)
    assert path.stat().st_size == idx.entry_size and idx.on_disk
    assert cls(path, 100, max_index_size=1024, create=False).entries == 1
