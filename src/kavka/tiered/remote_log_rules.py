"""The remote log manager's decisions, as pure functions (Kafka's RemoteLogManager copy and
expiration tasks, KIP-405 and KIP-950), with the topic-config rules they rely on.

Everything here takes values and returns values: no clock (``now_ms`` is passed), no I/O, no
threads. The task that owns the background work (tiered.remote_log_manager.RemoteLogManager: the
leader's copy task, its expiration task) calls these, performs what they return through a
RemoteStorageManager and records each state change as a metadata event (metadata.py); a seeded
simulation in the tests checks the invariants below over random produce / copy / retention
schedules. Local retention is the exception: ``local_segments_to_delete`` states the rule for
the simulation, while the broker applies it in storage (unified_log.Log.delete_retention_segments,
given ``highest_offset_in_remote``), since storage never imports tiered.

Invariants:

* Copy: only closed segments whose every offset is below the last stable offset are candidates --
  never the active segment -- in base-offset order, each starting above the highest offset already
  in remote storage (KIP-405 "copying segments to remote storage").
* Local retention: a local segment is deleted only if it is wholly copied (its last offset <=
  highest offset in remote storage) and it breaches local.retention.ms or local.retention.bytes
  (-2 = follow retention.ms / retention.bytes). The local log start offset moves; the log start
  offset does not. So no offset at or above the log start offset is ever in neither tier.
* Total retention: remote segments breaching retention.ms (max timestamp) or retention.bytes
  (remote plus local-only bytes over the limit, oldest first), or wholly below the log start
  offset, are deleted; the log start offset moves past the last deleted one (both tiers: a local
  copy of deleted data goes too, by the local "log start offset breach" pass).
* Epoch lineage (after an unclean election): a remote segment counts -- for reads, for the
  highest copied offset the next copy starts after, for total retention -- only if its leader
  epochs lie on the current leader's epoch lineage (``within_leader_epochs``, Kafka's
  isRemoteSegmentWithinLeaderEpochs): a segment the old leader copied past the point where the
  new leader's history diverged is never read, and the new leader copies its own records for
  that range. Segments whose epochs all precede the lineage's earliest epoch are unreferenced and
  deleted (``unreferenced_segments``).
* remote.log.copy.disable (KIP-950): the copy task does not call ``segments_to_copy``; remote data
  stays readable and expires; ``validate_tiered_topic_config`` then requires local and total
  retention to be identical, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kavka.config import register_tiered_topic_rule
from kavka.tiered.api import RemoteLogSegmentMetadata

FOLLOW_RETENTION = -2  # local.retention.ms / local.retention.bytes: use retention.*


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalSegmentView:
    """What the planner needs of a local segment."""

    base_offset: int
    last_offset: int  # inclusive; base_offset - 1 when empty
    size_in_bytes: int
    largest_timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TieredTopicConfig:
    remote_storage_enable: bool = False
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    local_retention_ms: int = FOLLOW_RETENTION
    local_retention_bytes: int = FOLLOW_RETENTION
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == FOLLOW_RETENTION \
            else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == FOLLOW_RETENTION \
            else self.local_retention_bytes


def validate_tiered_topic_config(configs: Mapping[str, str], *, system_enabled: bool
                                 ) -> str | None:
    """None if the topic configs are acceptable, else the INVALID_CONFIG message Kafka gives
    (LogConfig.validateRemoteStorage*, validateRetentionConfigsWhenRemoteCopyDisabled). Values
    are the already type-checked strings."""
    def flag(key: str) -> bool:
        return configs.get(key, "false").strip().lower() == "true"

    if not flag("remote.storage.enable"):
        return None
    if not system_enabled:
        return ("Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage.")
    if "compact" in configs.get("cleanup.policy", "delete").lower():
        return "Remote log storage is unsupported for the compacted topics"
    values: dict[str, int] = {}
    for local_key, total_key, default in (("local.retention.bytes", "retention.bytes", "-1"),
                                          ("local.retention.ms", "retention.ms", "604800000")):
        local = int(configs.get(local_key, str(FOLLOW_RETENTION)))
        total = int(configs.get(total_key, default))
        values[local_key], values[total_key] = local, total
        if total == -1 or local == FOLLOW_RETENTION:
            continue
        if local == -1:
            return (f"Invalid value {local} for configuration {local_key}: Value must not be -1 "
                    f"as {total_key} value is set as {total}.")
        if local > total:
            return (f"Invalid value {local} for configuration {local_key}: Value must not be more "
                    f"than {total_key} property value: {total}")
    if flag("remote.log.copy.disable"):
        for local_key, total_key in (("local.retention.bytes", "retention.bytes"),
                                     ("local.retention.ms", "retention.ms")):
            if values[local_key] != FOLLOW_RETENTION and values[local_key] != values[total_key]:
                return (f"When `remote.log.copy.disable` is set to true, the `{local_key}` and "
                        f"`{total_key}` must be set to the identical value because there will be "
                        "no more logs copied to the remote storage.")
    return None


register_tiered_topic_rule(validate_tiered_topic_config)  # kavka.config cannot import tiered/


def segments_to_copy(local: Sequence[LocalSegmentView], *, highest_copied_offset: int,
                     last_stable_offset: int) -> list[LocalSegmentView]:
    """Closed segments not yet copied, wholly below the last stable offset, oldest first. The last
    element of ``local`` is the active segment and is never returned."""
    out = []
    for seg in local[:-1]:
        if seg.last_offset < seg.base_offset:  # empty
            continue
        if seg.last_offset <= highest_copied_offset:
            continue
        if seg.last_offset >= last_stable_offset:
            break
        out.append(seg)
    return out


def local_segments_to_delete(local: Sequence[LocalSegmentView], *, config: TieredTopicConfig,
                             highest_copied_offset: int, now_ms: int) -> list[LocalSegmentView]:
    """A prefix of the closed local segments: copied and past local retention."""
    retention_ms = config.effective_local_retention_ms
    retention_bytes = config.effective_local_retention_bytes
    over = sum(s.size_in_bytes for s in local) - retention_bytes if retention_bytes >= 0 else 0
    out: list[LocalSegmentView] = []
    for seg in local[:-1]:
        if seg.last_offset > highest_copied_offset:
            break
        by_time = retention_ms >= 0 and now_ms - seg.largest_timestamp_ms > retention_ms
        by_size = retention_bytes >= 0 and over - seg.size_in_bytes >= 0
        if not (by_time or by_size):
            break
        over -= seg.size_in_bytes
        out.append(seg)
    return out


@dataclass(frozen=True, slots=True)
class Expiration:
    delete: list[RemoteLogSegmentMetadata]
    new_log_start_offset: int


def remote_segments_to_delete(remote: Sequence[RemoteLogSegmentMetadata], *,
                              config: TieredTopicConfig, log_start_offset: int,
                              local_only_bytes: int, now_ms: int) -> Expiration:
    """Oldest-first prefix of the readable remote segments past total retention.
    ``local_only_bytes`` is the size of local data not yet in remote storage (it counts towards
    retention.bytes, as Kafka's onlyLocalLogSegmentsSize)."""
    total = sum(m.segment_size_in_bytes for m in remote) + local_only_bytes
    over = total - config.retention_bytes if config.retention_bytes >= 0 else 0
    out: list[RemoteLogSegmentMetadata] = []
    for m in sorted(remote, key=lambda m: m.start_offset):
        below_start = m.end_offset < log_start_offset
        by_time = config.retention_ms >= 0 and now_ms - m.max_timestamp_ms > config.retention_ms
        by_size = config.retention_bytes >= 0 and over - m.segment_size_in_bytes >= 0
        if not (below_start or by_time or by_size):
            break
        over -= m.segment_size_in_bytes
        out.append(m)
    # Total retention covers both tiers: data past the deleted segments' end goes from the log
    # even where a local copy is still on disk (Kafka moves the log start offset to the next
    # remote segment; the local "log start offset breach" pass then drops the local copy).
    if not out:
        return Expiration(out, log_start_offset)
    return Expiration(out, max(log_start_offset, max(m.end_offset for m in out) + 1))


def _epochs_with_records(epochs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(epoch, start offset) pairs by epoch, without epochs that hold no records (an epoch whose
    next epoch starts at the same offset), as Kafka's buildFilteredLeaderEpochMap."""
    ordered = sorted(epochs)
    return [e for i, e in enumerate(ordered) if i + 1 == len(ordered) or ordered[i + 1][1] != e[1]]


def within_leader_epochs(md: RemoteLogSegmentMetadata, lineage: Sequence[tuple[int, int]],
                         log_end_offset: int | None = None) -> bool:
    """Whether remote segment ``md`` lies on ``lineage`` -- the leader's (epoch, start offset)
    entries -- so its records are the leader's (Kafka's isRemoteSegmentWithinLeaderEpochs):

    - its last epoch is within the lineage's range, and from its first epoch the lineage knows
      on, every epoch of the segment is in the lineage;
    - that first epoch starts inside the segment no earlier than in the lineage (unless it is the
      lineage's first epoch: earlier data may have been deleted);
    - each epoch's successor is the same in both (a segment whose epoch went on where the lineage
      moved to another epoch diverged), and the segment's last epoch ends no later than the
      lineage's next epoch begins;
    - with ``log_end_offset``, it ends below the log end offset.

    A lineage with no epochs (a log that has none) cannot judge: every segment counts."""
    lin = _epochs_with_records(lineage)
    seg = _epochs_with_records(list(md.segment_leader_epochs.items()))
    if not lin or not seg:
        return True
    lin_start = dict(lin)
    lin_index = {e: i for i, (e, _) in enumerate(lin)}
    last_epoch = seg[-1][0]
    if last_epoch < lin[0][0] or last_epoch > lin[-1][0]:
        return False
    first = next((e for e, _ in seg if e >= lin[0][0]), None)
    if first is None:
        return False
    for i, (epoch, offset) in enumerate(seg):
        if epoch < first:
            continue
        j = lin_index.get(epoch)
        if j is None:
            return False
        if epoch == first and j > 0 and offset < lin_start[epoch]:
            return False
        if epoch == last_epoch:
            if j + 1 < len(lin) and md.end_offset > lin[j + 1][1] - 1:
                return False
        elif j + 1 >= len(lin) or lin[j + 1] != seg[i + 1]:
            return False
    return log_end_offset is None or md.end_offset < log_end_offset


def unreferenced_segments(remote: Sequence[RemoteLogSegmentMetadata],
                          lineage: Sequence[tuple[int, int]]) -> list[RemoteLogSegmentMetadata]:
    """Segments whose every epoch precedes the lineage's earliest epoch: no leader will read or
    count them again (an unclean election left them behind); Kafka's expiration deletes them."""
    if not lineage:
        return []
    earliest = min(e for e, _ in lineage)
    return [m for m in remote if m.segment_leader_epochs and all(e < earliest for e in m.segment_leader_epochs)]
