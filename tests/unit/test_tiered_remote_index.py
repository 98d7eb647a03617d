"""The seed's remote index: entry bytes, corruption detection, and lookups that land on the right
bytes of a real segment file."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kavka.protocol.records import build_batch, iter_batches
from kavka.tiered.api import (
    InvalidStateTransitionError,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kavka.tiered.remote_index import (
    CorruptRemoteIndexError,
    RemoteLogIndexEntry,
    build_remote_indexes,
    decode_entries,
    decode_entry,
    lookup_offset,
    lookup_timestamp,
    make_rdi,
)

i64 = st.integers(-(2**63), 2**63 - 1)


@given(i64, i64, i64, i64, st.integers(0, 2**31 - 1), st.binary(max_size=64))
def test_entry_round_trips(first: int, last: int, fts: int, lts: int, n: int, rdi: bytes) -> None:
    e = RemoteLogIndexEntry(first, last, fts, lts, n, rdi)
    raw = e.encode()
    assert struct.unpack_from(">hh", raw) == (0, len(raw) - 4)  # magic, length
    assert decode_entry(raw, 0) == (e, len(raw))


def test_entry_layout_is_the_seeds() -> None:
    sid = uuid.UUID(int=1)
    raw = RemoteLogIndexEntry(5, 9, 100, 200, 300, make_rdi(sid, 42)).encode()
    magic, length, _crc, first, last, fts, lts, dlen, rlen = struct.unpack_from(">hhiqqqqih", raw)
    assert (magic, first, last, fts, lts, dlen, rlen) == (0, 5, 9, 100, 200, 300, 24)
    assert length == 4 + 8 * 4 + 4 + 2 + 24
    entry, _ = decode_entry(raw, 0)
    assert (entry.segment_id, entry.position) == (sid, 42)


@pytest.mark.parametrize("flip", [5, 10, 20, 40, 48])
def test_corruption_is_detected(flip: int) -> None:
    raw = bytearray(RemoteLogIndexEntry(5, 9, 100, 200, 300, b"abc").encode())
    raw[flip] ^= 0xFF
    with pytest.raises(CorruptRemoteIndexError):
        decode_entry(bytes(raw), 0)


def test_bad_magic_and_truncation_are_detected() -> None:
    raw = RemoteLogIndexEntry(5, 9, 100, 200, 300, b"abc").encode()
    with pytest.raises(CorruptRemoteIndexError, match="magic"):
        decode_entry(b"\x00\x01" + raw[2:], 0)
    with pytest.raises(CorruptRemoteIndexError):
        decode_entry(raw[:-1], 0)


def test_lookups_over_a_real_segment(tmp_path: Path) -> None:
    base = 1000
    batches = []
    offset = base
    for i in range(200):
        n = 1 + i % 4
        recs = [(10_000 + i * 10 + j, f"k{offset + j}".encode(), b"v" * 50, []) for j in range(n)]
        batches.append(build_batch(recs, base_offset=offset))
        offset += n
    last_offset = offset - 1
    seg = tmp_path / f"{base:020d}.log"
    seg.write_bytes(b"".join(batches))
    sid = uuid.uuid4()
    paths = build_remote_indexes(seg, base_offset=base, segment_id=sid, out_dir=tmp_path,
                                 interval_bytes=1000)
    assert paths.remote_offset_index.name == f"{base:020d}.remoteOffsetIndex"
    log_index = paths.remote_log_index.read_bytes()
    off_index = paths.remote_offset_index.read_bytes()
    entries = [e for _, e in decode_entries(log_index)]
    assert 5 < len(entries) < 200  # sparse: runs of batches, not one per batch
    assert len(off_index) == 8 * len(entries)
    assert entries[0].first_offset == base and entries[-1].last_offset == last_offset
    assert sum(e.data_length for e in entries) == seg.stat().st_size
    data = seg.read_bytes()
    for target in range(base, last_offset + 1):
        e = lookup_offset(off_index, log_index, base_offset=base, target_offset=target)
        assert e is not None and e.first_offset <= target <= e.last_offset
        assert e.segment_id == sid
        chunk = data[e.position:e.position + e.data_length]
        heads = [h for _, h in iter_batches(chunk)]
        assert heads[0].base_offset == e.first_offset
        assert heads[-1].base_offset + heads[-1].last_offset_delta == e.last_offset
    assert lookup_offset(off_index, log_index, base_offset=base, target_offset=last_offset + 1) is None
    assert lookup_offset(off_index, log_index, base_offset=base, target_offset=0) == entries[0]

    time_index = paths.remote_time_index.read_bytes()
    first_ts = 10_000
    assert lookup_timestamp(time_index, base_offset=base, target_timestamp=first_ts) == base
    ts = 10_000 + 150 * 10
    found = lookup_timestamp(time_index, base_offset=base, target_timestamp=ts)
    holder = next(e for e in entries if e.first_offset == found)
    assert holder.last_timestamp >= ts
    earlier = [e for e in entries if e.first_offset < found]
    assert all(e.last_timestamp < ts for e in earlier)
    assert lookup_timestamp(time_index, base_offset=base, target_timestamp=10**9) is None


def test_state_transitions_are_kafkas() -> None:
    S = RemoteLogSegmentState
    md = RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TopicIdPartition(uuid.uuid4(), "t", 0)),
        start_offset=0, end_offset=9, max_timestamp_ms=0, broker_id=1, event_timestamp_ms=0,
        segment_size_in_bytes=10)
    assert md.state is S.COPY_SEGMENT_STARTED
    done = md.with_state(S.COPY_SEGMENT_FINISHED, 1)
    with pytest.raises(InvalidStateTransitionError):
        done.with_state(S.COPY_SEGMENT_STARTED, 2)
    with pytest.raises(InvalidStateTransitionError):
        done.with_state(S.DELETE_SEGMENT_FINISHED, 2)
    gone = done.with_state(S.DELETE_SEGMENT_STARTED, 2).with_state(S.DELETE_SEGMENT_FINISHED, 3)
    assert gone.state is S.DELETE_SEGMENT_FINISHED and gone.event_timestamp_ms == 3
    # a copy that died half way is deleted without ever having been readable
    md.with_state(S.DELETE_SEGMENT_STARTED, 1)
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadata(segment_id=md.segment_id, start_offset=5, end_offset=4,
                                 max_timestamp_ms=0, broker_id=1, event_timestamp_ms=0,
                                 segment_size_in_bytes=1)
