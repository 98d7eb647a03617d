"""Remote log metadata events and cache, the remote log manager's decisions, and epoch lineage.
The seeded simulation of these decisions is tests/simulation/test_tiered_simulation.py."""

from __future__ import annotations

import uuid

import pytest

from kavka.tiered.api import (
    InvalidStateTransitionError,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from kavka.tiered.metadata import (
    RemoteLogMetadataCache,
    RemoteLogSegmentMetadataUpdate,
    RemoteMetadataError,
    decode_event,
    encode_event,
)
from kavka.tiered.remote_log_rules import (
    LocalSegmentView,
    TieredTopicConfig,
    local_segments_to_delete,
    remote_segments_to_delete,
    segments_to_copy,
    validate_tiered_topic_config,
)

S = RemoteLogSegmentState
TP = TopicIdPartition(uuid.UUID(int=99), "tiered", 2)


def seg_md(start: int, end: int, *, size: int = 100, max_ts: int = 0) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TP), start_offset=start, end_offset=end,
        max_timestamp_ms=max_ts, broker_id=1, event_timestamp_ms=5,
        segment_size_in_bytes=size, segment_leader_epochs={0: start, 3: start + 1})


def update(md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
           ) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(segment_id=md.segment_id, state=state,
                                          event_timestamp_ms=7, broker_id=1)


def test_events_round_trip() -> None:
    md = seg_md(10, 19, size=1234, max_ts=99)
    assert decode_event(encode_event(md)) == md
    up = update(md, S.COPY_SEGMENT_FINISHED)
    assert decode_event(encode_event(up), {TP.topic_id: TP.topic}) == up
    with pytest.raises(RemoteMetadataError):
        decode_event(encode_event(md)[:-3])
    with pytest.raises(RemoteMetadataError):
        decode_event(b"\x00\x07" + encode_event(md)[2:])


def test_cache_follows_kafkas_states() -> None:
    cache = RemoteLogMetadataCache()
    a, b = seg_md(0, 9), seg_md(10, 19)
    cache.replay([a, b, update(a, S.COPY_SEGMENT_FINISHED)])
    assert [m.segment_id for m in cache.readable()] == [a.segment_id]
    assert [m.segment_id for m in cache.unfinished()] == [b.segment_id]  # a copy that died
    assert cache.highest_offset_in_remote_storage == 9
    assert cache.segment_for_offset(5).segment_id == a.segment_id
    assert cache.segment_for_offset(10) is None  # b is not readable
    with pytest.raises(InvalidStateTransitionError):
        cache.apply(update(a, S.COPY_SEGMENT_STARTED))
    with pytest.raises(RemoteMetadataError):
        cache.apply(update(seg_md(0, 1), S.COPY_SEGMENT_FINISHED))  # unknown segment
    with pytest.raises(RemoteMetadataError):
        cache.apply(a)  # added twice
    cache.replay([update(a, S.DELETE_SEGMENT_STARTED)])
    assert cache.readable() == [] and cache.highest_offset_in_remote_storage == -1
    cache.replay([update(a, S.DELETE_SEGMENT_FINISHED), update(b, S.DELETE_SEGMENT_STARTED),
                  update(b, S.DELETE_SEGMENT_FINISHED)])
    assert list(cache.unfinished()) == []


def view(base: int, last: int, size: int = 100, ts: int = 0) -> LocalSegmentView:
    return LocalSegmentView(base_offset=base, last_offset=last, size_in_bytes=size,
                            largest_timestamp_ms=ts)


def test_copy_candidates_never_include_the_active_segment_or_unstable_data() -> None:
    local = [view(0, 9), view(10, 19), view(20, 29), view(30, 35)]  # the last is active
    assert segments_to_copy(local, highest_copied_offset=-1, last_stable_offset=36) == local[:3]
    assert segments_to_copy(local, highest_copied_offset=9, last_stable_offset=36) == local[1:3]
    # an open transaction holds the last stable offset at 25: segment 20..29 must wait
    assert segments_to_copy(local, highest_copied_offset=-1, last_stable_offset=25) == local[:2]
    assert segments_to_copy(local[-1:], highest_copied_offset=-1, last_stable_offset=36) == []


def test_local_retention_deletes_only_copied_segments() -> None:
    cfg = TieredTopicConfig(remote_storage_enable=True, retention_ms=-1, local_retention_ms=1000)
    local = [view(0, 9, ts=0), view(10, 19, ts=0), view(20, 29, ts=5000), view(30, 31, ts=5000)]
    out = local_segments_to_delete(local, config=cfg, highest_copied_offset=9, now_ms=4000)
    assert out == local[:1]  # 10..19 is old enough but not copied
    out = local_segments_to_delete(local, config=cfg, highest_copied_offset=29, now_ms=4000)
    assert out == local[:2]  # 20..29 is copied but within local.retention.ms
    by_size = TieredTopicConfig(remote_storage_enable=True, retention_ms=-1,
                                local_retention_bytes=100)
    assert local_segments_to_delete(local, config=by_size, highest_copied_offset=29,
                                    now_ms=0) == local[:3]
    follow = TieredTopicConfig(remote_storage_enable=True, retention_ms=10_000)
    assert local_segments_to_delete(local, config=follow, highest_copied_offset=29,
                                    now_ms=4000) == []


def test_total_retention_moves_the_log_start_offset() -> None:
    remote = [seg_md(0, 9, max_ts=0), seg_md(10, 19, max_ts=0), seg_md(20, 29, max_ts=9000)]
    cfg = TieredTopicConfig(remote_storage_enable=True, retention_ms=5000)
    exp = remote_segments_to_delete(remote, config=cfg, log_start_offset=0, local_only_bytes=0,
                                    now_ms=10_000)
    assert exp.delete == remote[:2] and exp.new_log_start_offset == 20
    by_size = TieredTopicConfig(remote_storage_enable=True, retention_ms=-1, retention_bytes=200)
    exp = remote_segments_to_delete(remote, config=by_size, log_start_offset=0,
                                    local_only_bytes=100, now_ms=0)
    assert exp.delete == remote[:2] and exp.new_log_start_offset == 20
    # DeleteRecords moved the log start offset past the first segment
    keep = TieredTopicConfig(remote_storage_enable=True, retention_ms=-1)
    exp = remote_segments_to_delete(remote, config=keep, log_start_offset=12,
                                    local_only_bytes=0, now_ms=0)
    assert exp.delete == remote[:1] and exp.new_log_start_offset == 12


@pytest.mark.parametrize(("configs", "system", "error"), [
    ({}, False, None),
    ({"remote.storage.enable": "true"}, True, None),
    ({"remote.storage.enable": "true"}, False, "Tiered Storage functionality is disabled"),
    ({"remote.storage.enable": "true", "cleanup.policy": "compact,delete"}, True,
     "unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"},
     True, "local.retention.ms: Value must not be more than retention.ms property value: 1000"),
    ({"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "-1"},
     True, "Value must not be -1 as retention.bytes value is set as 1000"),
    ({"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "99"},
     True, None),
    ({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
      "local.retention.ms": "99"}, True, "must be set to the identical value"),
])
def test_topic_config_validation_is_kafkas(configs: dict[str, str], system: bool,
                                           error: str | None) -> None:
    got = validate_tiered_topic_config(configs, system_enabled=system)
    if error is None:
        assert got is None
    else:
        assert got is not None and error in got


# ---- epoch lineage (unclean elections): remote_log_manager.within_leader_epochs


def lineage_md(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        segment_id=RemoteLogSegmentId.generate(TP), start_offset=start, end_offset=end, max_timestamp_ms=0,
        broker_id=1, event_timestamp_ms=5, segment_size_in_bytes=100, segment_leader_epochs=epochs)


def test_a_segment_copied_past_an_unclean_elections_divergence_is_off_the_lineage() -> None:
    from kavka.tiered.remote_log_rules import unreferenced_segments, within_leader_epochs

    # The old leader (epoch 1) copied [0, 49] and [50, 99]; the new leader was elected uncleanly
    # with only [0, 49] of epoch 1: its lineage is epoch 1 from 0, epoch 2 from 50.
    lineage = [(1, 0), (2, 50)]
    first, diverged = lineage_md(0, 49, {1: 0}), lineage_md(50, 99, {1: 50})
    assert within_leader_epochs(first, lineage)
    assert not within_leader_epochs(diverged, lineage)  # epoch 1 went on past 49 there
    # what the new leader copies of its own history is on it
    assert within_leader_epochs(lineage_md(50, 120, {2: 50}), lineage, log_end_offset=130)
    assert not within_leader_epochs(lineage_md(50, 120, {2: 50}), lineage, log_end_offset=120)  # not below the log end
    # a segment spanning the epoch change, as this leader wrote it
    assert within_leader_epochs(lineage_md(40, 60, {1: 40, 2: 50}), lineage)
    assert not within_leader_epochs(lineage_md(40, 60, {1: 40, 2: 55}), lineage)  # epoch 2 began elsewhere
    assert not within_leader_epochs(lineage_md(40, 60, {1: 40, 3: 50}), lineage)  # an epoch this leader never had
    assert not within_leader_epochs(lineage_md(130, 140, {4: 130}), lineage)  # beyond the lineage's last epoch
    # epochs with no records are ignored on both sides (Kafka's filtered maps)
    assert within_leader_epochs(lineage_md(40, 60, {1: 40, 4: 50}), [(1, 0), (2, 50), (3, 50), (4, 50)])
    assert within_leader_epochs(lineage_md(0, 49, {1: 0}), [(0, 0), (1, 0), (2, 50)])
    # no lineage to judge by: every segment counts
    assert within_leader_epochs(diverged, [])
    # segments whose epochs all precede the lineage (retention moved its start past them)
    assert unreferenced_segments([first, lineage_md(60, 70, {2: 60})], [(2, 55)]) == [first]


def test_an_older_leaders_overlapping_segment_stays_valid_after_the_log_start_moves() -> None:
    from kavka.tiered.remote_log_rules import within_leader_epochs

    # Kafka's example: the cache was {5: 10, 7: 15, 9: 100}; segment 2 (from a later leader)
    # overlaps segment 1; once segment 1 is deleted the log start is 51 and the cache starts there.
    lineage = [(5, 10), (7, 15), (9, 100)]
    seg1 = lineage_md(5, 50, {5: 10, 7: 15})
    seg2 = lineage_md(14, 150, {5: 14, 7: 15, 9: 100})
    assert within_leader_epochs(seg1, lineage) and within_leader_epochs(seg2, lineage)
    assert within_leader_epochs(seg2, [(7, 51), (9, 100)])
    assert not within_leader_epochs(lineage_md(14, 150, {5: 14, 7: 16, 9: 100}), lineage)  # epoch 7 began elsewhere
