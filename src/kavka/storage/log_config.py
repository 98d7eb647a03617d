"""Per-topic log configuration (Kafka's ``LogConfig``), parsed once.

The broker builds it from the broker defaults and topic overrides; storage only
consumes it. Field names are Kafka's topic config names with dots turned into
underscores; defaults are Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms (7 days)
    segment_jitter_ms: int = 0  # segment.jitter.ms
    retention_ms: int = 604800000  # retention.ms; -1 = unlimited
    retention_bytes: int = -1  # retention.bytes; -1 = unlimited
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10485760  # segment.index.bytes
    max_message_bytes: int = 1048588  # max.message.bytes
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    preallocate: bool = False  # preallocate (ignored: files are append-only)
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long tombstones outlive compaction
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms: a dirty segment this old is cleaned whatever the ratio
    compression_type: str = "producer"  # compression.type: producer, uncompressed or a codec
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3600000  # message.timestamp.after.max.ms
    # Tiered storage (KIP-405, kavka.tiered): with remote_storage_enable the Log keeps uncopied
    # segments whatever the retention; local_retention_* (-2: follow retention_*) bound the local tier.
    remote_storage_enable: bool = False  # remote.storage.enable
    local_retention_ms: int = -2  # local.retention.ms
    local_retention_bytes: int = -2  # local.retention.bytes
    remote_log_copy_disable: bool = False  # remote.log.copy.disable
    remote_log_delete_on_disable: bool = False  # remote.log.delete.on.disable

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def segment_jitter_for(self, seed: int) -> int:
        """Roll jitter for one segment.

        Kafka draws ``abs(random) % min(segment.jitter.ms, segment.ms)``
        (``LogConfig.randomSegmentJitter``); storage takes no randomness, so
        the jitter is derived from a caller-supplied seed (the base offset).
        """
        if self.segment_jitter_ms <= 0:
            return 0
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return (seed * 2654435761) % bound if bound > 0 else 0
