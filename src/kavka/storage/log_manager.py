"""LogManager: every partition log on this broker, across its log dirs (JBOD).

Owns, per log dir: the ``.lock`` file, the clean-shutdown marker
``.kafka_cleanshutdown`` (written last on a clean shutdown, deleted once the
logs are loaded, so its absence at start means "recover"), and the three
offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``). Owns the
``Log`` objects in ``<topic>-<partition>`` dirs; finishes deletes of
``*-delete`` dirs at start; leaves ``*-future`` / ``*-stray`` dirs alone
(KIP-113 moves are not handled here yet). ``__cluster_metadata-0`` belongs to
the raft layer and is skipped, as Kafka's LogManager skips it.

Partitions are keyed by ``(topic, partition)`` tuples. The high watermark
belongs to the broker's Partition: it is passed in to checkpoint and to
retention. Called from the broker's event-loop thread only.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from kavka.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from kavka.storage.errors import CorruptCheckpointError, LogDirLockedError
from kavka.storage.log import (
    Log,
    parse_partition_dir_name,
    parse_special_dir_name,
    partition_dir_name,
)
from kavka.storage.log_config import LogConfig

log = logging.getLogger("kavka.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
METADATA_TOPIC = "__cluster_metadata"

TopicPartitionKey = tuple[str, int]


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path] | list[str],
        *,
        default_config: LogConfig,
        now_ms: int,
        config_for_topic: Callable[[str], LogConfig] | None = None,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._config_for_topic = config_for_topic
        self._now_ms = now_ms
        self._logs: dict[TopicPartitionKey, Log] = {}
        self._lock_fds: list[int] = []
        self.had_clean_shutdown = True
        self._shut_down = False
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._lock(d)
        for d in self.log_dirs:
            clean = (d / CLEAN_SHUTDOWN_FILE).exists()
            self.had_clean_shutdown = self.had_clean_shutdown and clean
            self._load_dir(d, clean_shutdown=clean, now_ms=now_ms)
        # Remove the markers only after loading: a crash from here on must
        # be seen as unclean by the next start.
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                marker.unlink()
                fsync_dir(d)

    # ------------------------------------------------------------------ startup

    def _lock(self, d: Path) -> None:
        fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            for other in self._lock_fds:
                os.close(other)
            self._lock_fds = []
            raise LogDirLockedError(
                f"log dir {d} is locked by another process (is another broker running?)"
            ) from None
        self._lock_fds.append(fd)

    def _read_checkpoint(self, path: Path) -> dict[TopicPartitionKey, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except (CorruptCheckpointError, OSError) as exc:
            # Kafka logs and falls back to empty: full recovery, log start
            # offsets from the segments.
            log.warning("%s; ignoring it", exc)
            return {}

    def _config(self, topic: str) -> LogConfig:
        if self._config_for_topic is not None:
            return self._config_for_topic(topic)
        return self.default_config

    def _load_dir(self, d: Path, *, clean_shutdown: bool, now_ms: int) -> None:
        recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            special = parse_special_dir_name(child.name)
            if special is not None:
                if special[2] == "delete":
                    log.info("finishing the delete of %s", child)
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    log.info("leaving %s alone (%s replica)", child, special[2])
                continue
            try:
                tp = parse_partition_dir_name(child.name)
            except ValueError:
                log.warning("ignoring %s: not a <topic>-<partition> dir", child)
                continue
            if tp[0] == METADATA_TOPIC:
                continue
            if tp in self._logs:
                raise RuntimeError(
                    f"duplicate log directories for {child.name}: {self._logs[tp].dir} and {child}"
                )
            self._logs[tp] = Log.open(
                child,
                self._config(tp[0]),
                topic_id=None,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_start_offsets.get(tp, 0),
                clean_shutdown=clean_shutdown,
                now_ms=now_ms,
            )

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        result: dict[Path, list[Log]] = {d: [] for d in self.log_dirs}
        for lg in self._logs.values():
            result.setdefault(lg.dir.parent, []).append(lg)
        return result

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        *,
        topic_id: str | None,
        config: LogConfig | None = None,
        now_ms: int | None = None,
    ) -> Log:
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        # Fewest partitions first (Kafka's nextLogDirs); size-aware placement
        # comes later.
        by_dir = self.logs_by_dir()
        target = min(self.log_dirs, key=lambda d: (len(by_dir.get(d, [])), self.log_dirs.index(d)))
        lg = Log.open(
            target / partition_dir_name(topic, partition),
            config or self._config(topic),
            topic_id=topic_id,
            recovery_point=0,
            log_start_offset=0,
            clean_shutdown=True,
            now_ms=self._now_ms if now_ms is None else now_ms,
        )
        self._logs[(topic, partition)] = lg
        log.info("created log for %s-%d in %s", topic, partition, target)
        return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        lg = self._logs.pop((topic, partition), None)
        if lg is None:
            return False
        lg.delete()
        log.info("deleted log for %s-%d", topic, partition)
        return True

    # ------------------------------------------------------------------ checkpoints

    def _write_per_dir(self, name: str, values: Mapping[TopicPartitionKey, int]) -> None:
        for d, logs in self.logs_by_dir().items():
            if d not in self.log_dirs:
                continue
            entries = {
                lg.topic_partition: values[lg.topic_partition]
                for lg in logs
                if lg.topic_partition in values
            }
            OffsetCheckpointFile(d / name).write(entries)

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(
            RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in self._logs.items()}
        )

    def checkpoint_log_start_offsets(self) -> None:
        self._write_per_dir(
            LOG_START_OFFSET_CHECKPOINT,
            {tp: lg.log_start_offset for tp, lg in self._logs.items()},
        )

    def checkpoint_high_watermarks(self, hw_by_tp: Mapping[TopicPartitionKey, int]) -> None:
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT, hw_by_tp)

    def read_high_watermarks(self) -> dict[TopicPartitionKey, int]:
        result: dict[TopicPartitionKey, int] = {}
        for d in self.log_dirs:
            result.update(self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
        return result

    # ------------------------------------------------------------------ background work

    def cleanup_logs(self, now_ms: int, hw_by_tp: Mapping[TopicPartitionKey, int]) -> int:
        """Retention for every log whose high watermark is known."""
        self._now_ms = now_ms
        total = 0
        for tp, lg in list(self._logs.items()):
            hw = hw_by_tp.get(tp)
            if hw is None:
                continue
            total += lg.delete_retention_segments(now_ms, high_watermark=hw)
        return total

    def clean_logs(self, now_ms: int, hw_by_tp: Mapping[TopicPartitionKey, int]) -> int:
        """One log-cleaner pass over every compacted log that is due; returns logs cleaned.

        The first dirty offset of each log lives in its dir's ``cleaner-offset-checkpoint``
        (Kafka's file), written after the pass, so a crash mid-pass cleans again.
        """
        from kavka.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, maybe_clean

        self._now_ms = now_ms
        cleaned = 0
        for d, logs in self.logs_by_dir().items():
            if d not in self.log_dirs or not any(lg.config.compact_enabled for lg in logs):
                continue
            checkpoint = self._read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
            changed = False
            for lg in logs:
                hw = hw_by_tp.get(lg.topic_partition)
                if hw is None or not lg.config.compact_enabled:
                    continue
                result = maybe_clean(
                    lg, first_dirty_offset=checkpoint.get(lg.topic_partition, 0), high_watermark=hw, now_ms=now_ms
                )
                if result is not None:
                    checkpoint[lg.topic_partition] = result.first_uncleanable_offset
                    changed = True
                    cleaned += 1
            if changed:
                live = {lg.topic_partition for lg in logs}
                OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write(
                    {tp: o for tp, o in checkpoint.items() if tp in live}
                )
        return cleaned

    def flush_dirty(self, now_ms: int) -> int:
        """flush.ms and deferred post-roll flushes; returns logs flushed."""
        self._now_ms = now_ms
        return sum(1 for lg in list(self._logs.values()) if lg.maybe_flush(now_ms))

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the marker."""
        if self._shut_down:
            return
        for lg in self._logs.values():
            lg.flush()
            lg.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for d in self.log_dirs:
            fd = os.open(d / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.fsync(fd)
            os.close(fd)
            fsync_dir(d)
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds = []
        self._shut_down = True
