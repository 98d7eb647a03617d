"""LogManager: every partition log on this broker, across its log dirs (JBOD).

Owns, per log dir: the ``.lock`` file, the clean-shutdown marker
``.kafka_cleanshutdown`` (written last on a clean shutdown, deleted once the
logs are loaded, so its absence at start means "recover"; it holds the broker
epoch the broker shut down with, as Kafka's CleanShutdownFileHandler writes it,
``{"version":0,"brokerEpoch":N}``, which the next registration names: KIP-966's
clean-shutdown detection), and the three
offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``). Owns the
``Log`` objects in ``<topic>-<partition>`` dirs and the future logs of
replicas being moved between dirs (``<topic>-<partition>.<hex>-future``,
KIP-113); finishes deletes of ``*-delete`` dirs at start; leaves ``*-stray``
dirs alone. ``__cluster_metadata-0`` belongs to the raft layer and is
skipped, as Kafka's LogManager skips it.

KIP-113 crash recovery, applied at start once every dir is loaded: a future
whose current log exists is loaded as a future (the owner resumes the move);
a future without a current log is promoted (renamed to ``<topic>-<partition>``)
because the swap renames the source to ``-delete`` *before* it renames the
future, and fsyncs the future first; ``-delete`` dirs are removed.

KIP-112: an OSError on a dir (reported by a caller through
`handle_io_error`, or met here in a checkpoint, flush or retention pass)
marks that dir offline exactly once: its logs are closed and forgotten, the
reason is logged with the gauge ``OfflineLogDirectoryCount``, and the
``on_dir_failure`` listener is told which partitions went with it. Offline
dirs are skipped by every later pass and get no clean-shutdown marker, so
they are recovered after the restart that brings them back.

Placement of new replicas (`select_log_dir`, a pure function):
``log.dir.select.strategy=size`` (default) picks the dir whose projected
share of its room is lowest -- bytes used by logs there plus one mean-sized
partition per hosted partition, over bytes used plus free bytes -- so disks
of different sizes fill evenly and a burst of new partitions still spreads;
``partitions`` is Kafka's rule (fewest partitions).

Partitions are keyed by `kavka.common.TopicPartition` (equal to the plain
``(topic, partition)`` tuples callers may pass). The high watermark
belongs to the broker's Partition: it is passed in to checkpoint and to
retention. Called from the broker's event-loop thread only; the slow parts of
background passes (fsyncs, unlinks, checkpoint writes, cleaning) are yielded as
steps for a worker thread (see "background work" below), never run here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kavka.common import TopicPartition
from kavka.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    fsync_dir,
    write_all_atomically,
)
from kavka.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanAbortedError,
    CleanerConfig,
    Steps,
    clean_log_steps,
    drive_inline,
)
from kavka.storage.errors import (
    CorruptCheckpointError,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogDirLockedError,
    LogDirNotFoundError,
)
from kavka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry
from kavka.storage.local_log import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    FlushJob,
    parse_partition_dir_name,
    parse_special_dir_name,
    partition_dir_name,
)
from kavka.storage.log_config import LogConfig
from kavka.storage.unified_log import Log

log = logging.getLogger("kavka.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
METADATA_TOPIC = "__cluster_metadata"
MAX_PREFERRED_DIRS = 10_000


@dataclass(frozen=True, slots=True)
class DirStats:
    """What placement looks at for one online log dir."""

    partitions: int
    used_bytes: int  # bytes of logs (current and future) in the dir
    usable_bytes: int  # free bytes on its filesystem for an unprivileged writer


def select_log_dir(stats: Sequence[DirStats], strategy: str) -> int:
    """Index of the dir a new replica goes to; ties go to the earlier dir."""
    if not stats:
        raise ValueError("no log dir to choose from")
    if strategy == "partitions":
        return min(range(len(stats)), key=lambda i: (stats[i].partitions, i))
    total_parts = sum(s.partitions for s in stats)
    mean = max(sum(s.used_bytes for s in stats) // total_parts, 1) if total_parts else 1

    def projected(i: int) -> tuple[float, int, int]:
        s = stats[i]
        room = s.used_bytes + s.usable_bytes
        load = s.used_bytes + (s.partitions + 1) * mean
        return (load / room if room > 0 else float("inf"), s.partitions, i)

    return min(range(len(stats)), key=projected)


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int  # for a future replica: how far it is behind the current one
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: Path
    directory_id: str | None
    error: str | None  # the reason it went offline, None while online
    total_bytes: int  # -1 when offline
    usable_bytes: int
    replicas: tuple[ReplicaInfo, ...]


def _no_crash(step: str) -> None:
    return None


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path] | list[str],
        *,
        default_config: LogConfig,
        now_ms: int,
        config_for_topic: Callable[[str], LogConfig] | None = None,
        dir_ids: Mapping[Path, str] | None = None,
        offline_at_start: Mapping[Path, str] | None = None,
        select_strategy: str = "size",
        on_dir_failure: Callable[[Path, str, list[TopicPartition]], None] | None = None,
        cleaner_config: CleanerConfig | None = None,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.cleaner_config = cleaner_config or CleanerConfig()
        self._cleaning: set[TopicPartition] = set()  # logs a cleaner pass is working on
        self.dir_ids = {Path(k): v for k, v in (dir_ids or {}).items()}
        self.select_strategy = select_strategy
        self.on_dir_failure = on_dir_failure
        self.default_config = default_config
        self._config_for_topic = config_for_topic
        self._now_ms = now_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        # The logs that may want a flush (see `flush_dirty_steps`); a superset, never fewer.
        self._flush_candidates: set[TopicPartition] = set()
        self.offline_dirs: dict[Path, str] = {}
        self._offline_partitions: dict[TopicPartition, Path] = {}
        # AlterReplicaLogDirs for replicas not created yet (REPLICA_NOT_AVAILABLE).
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self._pending_deletes: list[Path] = []
        self._batch_depth = 0  # placement_batch
        self._batch_stats: dict[Path, DirStats] | None = None
        self._unwritten: list[tuple[Log, bool]] = []  # logs with writes held by a batch; partition.metadata too?
        self._created: dict[Path, list[str]] = {}  # a batch's new logs by dir, logged at its end
        self._in_flight: list[_BackgroundWrite] = []  # oldest first
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None  # one thread: writes land in order
        self._lock_fds: list[int] = []
        self.had_clean_shutdown = True
        # The broker epoch every log dir's marker names (Kafka's readBrokerEpochFromCleanShutdownFiles):
        # -1 unless every dir is online and names the same one.
        self.previous_broker_epoch = -1
        self._shut_down = False
        for d, reason in (offline_at_start or {}).items():
            self.mark_dir_offline(Path(d), reason)
        for d in self.online_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                self._lock(d)
            except LogDirLockedError:
                raise
            except OSError as e:
                self.mark_dir_offline(d, f"cannot open: {e}")
        clean_by_dir: dict[Path, bool] = {}
        futures: list[tuple[TopicPartition, Path]] = []
        for d in self.online_dirs:
            try:
                clean = (d / CLEAN_SHUTDOWN_FILE).exists()
                clean_by_dir[d] = clean
                self.had_clean_shutdown = self.had_clean_shutdown and clean
                futures += self._load_dir(d, clean_shutdown=clean, now_ms=now_ms)
            except OSError as e:
                self.mark_dir_offline(d, f"cannot load: {e}")
        self._load_futures(futures, clean_by_dir, now_ms)
        self.previous_broker_epoch = self._read_marker_epochs()
        if not self.online_dirs:
            raise KafkaStorageError(
                "every log dir is offline: "
                + "; ".join(f"{d}: {r}" for d, r in self.offline_dirs.items())
            )
        # Remove the markers only after loading: a crash from here on must
        # be seen as unclean by the next start.
        for d in self.online_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            try:
                if marker.exists():
                    marker.unlink()
                    fsync_dir(d)
            except OSError as e:
                self.mark_dir_offline(d, f"cannot remove {marker.name}: {e}")

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

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
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

    def _load_dir(
        self, d: Path, *, clean_shutdown: bool, now_ms: int
    ) -> list[tuple[TopicPartition, Path]]:
        """Load current logs; return the future dirs found (handled once all dirs are loaded)."""
        recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        futures: list[tuple[TopicPartition, Path]] = []
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            special = parse_special_dir_name(child.name)
            if special is not None:
                if special[2] == "delete":
                    log.info("finishing the delete of %s", child)
                    shutil.rmtree(child, ignore_errors=True)
                elif special[2] == "future":
                    futures.append((TopicPartition(special[0], special[1]), child))
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
            self._watch_flushes(tp, self._logs[tp])
        return futures

    def _load_futures(
        self,
        futures: list[tuple[TopicPartition, Path]],
        clean_by_dir: Mapping[Path, bool],
        now_ms: int,
    ) -> None:
        """KIP-113 recovery: resume (current and future both present) or promote (future only)."""
        for tp, path in futures:
            d = path.parent
            if d in self.offline_dirs:
                continue
            if tp in self._future_logs:
                log.warning("ignoring %s: %s already holds the future replica", path, self._future_logs[tp].dir)
                continue
            if tp not in self._logs and self.offline_dirs:
                # The current replica may be on the failed dir: only a
                # restart with every dir readable may decide.
                log.warning("leaving %s alone while a log dir is offline", path)
                continue
            clean = clean_by_dir.get(d, False)
            if tp in self._logs:
                current = self._logs[tp]
                self._future_logs[tp] = Log.open(
                    path,
                    self._config(tp[0]),
                    topic_id=None,
                    recovery_point=0,
                    log_start_offset=current.log_start_offset,
                    clean_shutdown=clean,
                    now_ms=now_ms,
                )
                log.info("resuming the move of %s-%d to %s", tp[0], tp[1], d)
            else:
                target = d / partition_dir_name(*tp)
                os.replace(path, target)
                fsync_dir(d)
                log.info("promoting %s to %s (its source was renamed for deletion)", path, target)
                self._logs[tp] = Log.open(
                    target,
                    self._config(tp[0]),
                    topic_id=None,
                    recovery_point=0,
                    log_start_offset=0,
                    clean_shutdown=clean,
                    now_ms=now_ms,
                )
                self._watch_flushes(tp, self._logs[tp])

    # ------------------------------------------------------------------ dirs

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    @property
    def offline_log_directory_count(self) -> int:
        """Kafka's ``OfflineLogDirectoryCount`` gauge."""
        return len(self.offline_dirs)

    def dir_containing(self, path: Path | str) -> Path | None:
        p = os.path.abspath(path)
        for d in sorted(self.log_dirs, key=lambda x: -len(str(x))):
            root = os.path.abspath(d)
            if p == root or p.startswith(root + os.sep):
                return d
        return None

    def dir_of(self, topic: str, partition: int) -> Path | None:
        lg = self._logs.get((topic, partition))
        if lg is not None:
            return lg.dir.parent
        return self._offline_partitions.get((topic, partition))

    def directory_id(self, d: Path) -> str | None:
        return self.dir_ids.get(d)

    def directory_id_of(self, topic: str, partition: int) -> str | None:
        """KIP-858: the directory.id of the dir holding this replica (None if not hosted)."""
        d = self.dir_of(topic, partition)
        return None if d is None else self.dir_ids.get(d)

    def handle_io_error(self, path: Path | str | None, exc: BaseException) -> Path | None:
        """An OSError met on ``path``: take its log dir offline (KIP-112). Returns the dir."""
        d = self.dir_containing(path) if path is not None else None
        if d is not None:
            self.mark_dir_offline(d, f"{type(exc).__name__}: {exc}")
        return d

    def mark_dir_offline(self, d: Path, reason: str) -> None:
        if d in self.offline_dirs or d not in self.log_dirs:
            return
        self.offline_dirs[d] = reason
        lost: list[TopicPartition] = []
        for tp, lg in list(self._logs.items()):
            if lg.dir.parent == d:
                del self._logs[tp]
                self._offline_partitions[tp] = d
                lost.append(tp)
                _close_quietly(lg)
        for tp, fut in list(self._future_logs.items()):
            # A move stops if its source or its destination fails; the
            # future dir stays for the next start to resume or drop.
            if fut.dir.parent == d or tp in self._offline_partitions:
                del self._future_logs[tp]
                _close_quietly(fut)
        log.error(
            "log dir %s is offline: %s; its %d replicas answer KAFKA_STORAGE_ERROR until a restart "
            "with the disk repaired (OfflineLogDirectoryCount=%d)",
            d,
            reason,
            len(lost),
            len(self.offline_dirs),
        )
        if self.on_dir_failure is not None:
            self.on_dir_failure(d, reason, lost)

    def _dir_stats(self, dirs: list[Path]) -> list[DirStats]:
        """Stats of `dirs`, in one pass over the logs (sizes are summed from every segment)."""
        counts = {d: 0 for d in dirs}
        used = {d: 0 for d in dirs}
        for lg in [*self._logs.values(), *self._future_logs.values()]:
            d = lg.dir.parent
            if d in counts:
                counts[d] += 1
                used[d] += lg.size_in_bytes
        return [DirStats(counts[d], used[d], shutil.disk_usage(d).free) for d in dirs]

    @contextlib.contextmanager
    def placement_batch(self, *, background: bool = False) -> Iterator[None]:
        """Apply (part of) a metadata delta's replicas together: new logs placed on stats taken
        once, the small files of new and changed logs written together when the batch (each
        level, if nested) ends. Held by the broker's metadata publisher for one slice of work,
        which runs without yielding to the event loop: nothing reads the files meanwhile.

        Placement: each one adds an empty partition to its dir's count, which is all that
        creating an empty log changes, so a batch spreads as one-by-one placement would, without
        walking every log of the broker once per new replica (quadratic in a CreateTopics of
        thousands of partitions). The stats are dropped when the outermost batch ends.

        Files: a new log's ``partition.metadata`` and ``leader-epoch-checkpoint`` (its leader
        epoch, assigned as the replica is applied) cost two atomic writes with four fsyncs one
        log at a time, and every replica of a restarted broker rewrites its leader epoch (the
        controller bumps it); here they are written for the whole batch at once
        (`checkpoints.write_all_atomically`), with one fsync of each log dir for the new partition
        dirs. A crash before that leaves each file as it was (missing for a new log), never torn:
        the topic id comes back from the metadata (`get_or_create_log`), a new log's epochs from
        its segments (it is in no recovery-point checkpoint, so it is recovered from offset 0),
        and an existing log's new epoch is assigned again by the next leader election.

        ``background=True`` (in a running event loop): the batch's files are written on a thread
        of their own while the caller goes on (`_write_in_background`); the metadata publisher
        applies the next slice of a large delta meanwhile instead of waiting for the fsyncs."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if not self._batch_depth:
                self._batch_stats = None
            self._log_created()
            self._write_batched(background=background)

    def batch_epoch_writes(self, lg: Log) -> None:
        """In a batch, hold `lg`'s leader epoch writes until the batch ends (no-op outside one)."""
        if self._batch_depth and not lg.leader_epoch_cache.deferred:
            lg.leader_epoch_cache.deferred = True
            self._unwritten.append((lg, False))

    def _write_batched(self, *, background: bool = False) -> None:
        pending, self._unwritten = self._unwritten, []
        if background:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                background = False
        by_dir: dict[Path, tuple[dict[Path, bytes], list[tuple[Log, list[EpochEntry] | None, bool]]]] = {}
        for lg, metadata in pending:
            epochs = lg.leader_epoch_cache.take_deferred(keep_deferred=background)
            tp = lg.topic_partition
            if self._logs.get(tp) is not lg:
                lg.leader_epoch_cache.deferred = False
                continue  # deleted, or its dir went offline, since it was created
            files, written = by_dir.setdefault(lg.dir.parent, ({}, []))
            metadata = metadata and lg.topic_id is not None
            if metadata:
                files[lg.dir / PARTITION_METADATA_FILE] = PartitionMetadataFile.text(lg.topic_id)
            if epochs is not None:
                files[lg.dir / LEADER_EPOCH_CHECKPOINT] = epochs[0]
            written.append((lg, None if epochs is None else epochs[1], metadata))
        if not by_dir:
            return
        if background:
            self._write_in_background(loop, by_dir)
            return
        errors = _write_dirs({d: files for d, (files, _) in by_dir.items()})
        for d, (_, written) in by_dir.items():
            error = errors.get(d)
            if error is not None:
                self.handle_io_error(getattr(error, "filename", None) or d, error)
                continue
            for lg, entries, _ in written:
                if entries is not None:
                    lg.leader_epoch_cache.written(entries)

    def _write_in_background(
        self,
        loop: asyncio.AbstractEventLoop,
        by_dir: dict[Path, tuple[dict[Path, bytes], list[tuple[Log, list[EpochEntry] | None, bool]]]],
    ) -> None:
        """Write a batch's files on the writer thread; the event loop goes on meanwhile.

        Order: one thread writes the batches in the order they were handed over, and a log's
        leader epoch cache stays deferred until its write has landed (`_finish_background`), so
        no other write of that file starts meanwhile: a change to the cache in between waits
        and is written after it. A log deleted or moved while its files are written waits for
        that write first (`settle_writes`)."""
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kavka-checkpoints")
        jobs = {d: files for d, (files, _) in by_dir.items()}
        bg = _BackgroundWrite({d: written for d, (_, written) in by_dir.items()}, self._writer.submit(_write_dirs, jobs))
        self._in_flight.append(bg)

        def landed(_f: concurrent.futures.Future[dict[Path, OSError]]) -> None:
            # A loop already closed has had this write settled by shutdown (`settle_writes`).
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._finish_background, bg)

        bg.future.add_done_callback(landed)

    def settle_writes(self) -> None:
        """Wait for the batches being written in the background and take their results (before a
        log's dir is renamed or removed, and at shutdown). Blocks the caller: rare, and short."""
        for bg in list(self._in_flight):
            with contextlib.suppress(Exception):
                bg.future.result()
            self._finish_background(bg)

    def _finish_background(self, bg: _BackgroundWrite) -> None:
        if bg.finished:
            return
        bg.finished = True
        self._in_flight.remove(bg)
        try:
            errors = bg.future.result()
        except Exception as e:  # not an OSError of a file: the writer itself failed
            errors = {d: e for d in bg.written}
        for d, written in bg.written.items():
            error = errors.get(d)
            if error is not None and any(self._logs.get(lg.topic_partition) is lg for lg, _, _ in written):
                log.warning("writing the new logs' files in %s failed (%s): writing them one by one", d, error)
            for lg, entries, metadata in written:
                current = self._logs.get(lg.topic_partition) is lg
                if error is None:
                    if entries is not None:
                        lg.leader_epoch_cache.written(entries)
                    continue
                # Some of the dir's files may not have landed. A log deleted or moved meanwhile
                # needs none; the others are written now, one by one, where a disk error
                # takes its dir offline as any write's does.
                if not current:
                    lg.leader_epoch_cache.deferred = False
                    continue
                try:
                    if metadata and lg.topic_id is not None:
                        PartitionMetadataFile(lg.dir).write(lg.topic_id)
                    lg.leader_epoch_cache.rewrite_after_failed_write()
                except OSError as e:
                    self.handle_io_error(getattr(e, "filename", None) or lg.dir, e)

    def _select_dir(self, tp: TopicPartition) -> Path:
        preferred = self._preferred_dirs.pop(tp, None)
        if preferred is not None and preferred not in self.offline_dirs:
            return preferred
        online = self.online_dirs
        if len(online) == 1:
            return online[0]  # nothing to choose: no stats to gather
        stats = self._batch_stats
        if stats is None or list(stats) != online:
            stats = {}
            try:
                stats = dict(zip(online, self._dir_stats(online), strict=True))
            except OSError:
                for d in online:  # find which dir failed
                    try:
                        stats[d] = self._dir_stats([d])[0]
                    except OSError as e:
                        self.mark_dir_offline(d, f"cannot stat: {e}")
            if self._batch_depth:
                self._batch_stats = stats
        if not stats:
            raise KafkaStorageError(f"no online log dir for {tp[0]}-{tp[1]}")
        candidates = list(stats)
        chosen = candidates[select_log_dir(list(stats.values()), self.select_strategy)]
        if self._batch_depth and self._batch_stats is stats:
            s = stats[chosen]
            stats[chosen] = DirStats(s.partitions + 1, s.used_bytes, s.usable_bytes)
        return chosen

    def describe_dirs(self, partitions: Iterable[TopicPartition] | None = None) -> list[LogDirDescription]:
        """Each log dir, with its replicas: all of them, or those of `partitions` only (looked up,
        not found by walking every log: DescribeLogDirs for a few topics on a broker of 10,000)."""
        if partitions is None:
            current = sorted(self._logs.items())
            future = sorted(self._future_logs.items())
        else:
            wanted = sorted(set(partitions))
            current = [(tp, lg) for tp in wanted if (lg := self._logs.get(tp)) is not None]
            future = [(tp, lg) for tp in wanted if (lg := self._future_logs.get(tp)) is not None]
        out = []
        for d in self.log_dirs:
            reason = self.offline_dirs.get(d)
            if reason is None:
                try:
                    st = os.statvfs(d)
                except OSError as e:
                    self.mark_dir_offline(d, f"cannot stat: {e}")
                    reason = self.offline_dirs.get(d)
            if reason is not None:
                out.append(LogDirDescription(d, self.dir_ids.get(d), reason, -1, -1, ()))
                continue
            replicas = [
                ReplicaInfo(tp[0], tp[1], lg.size_in_bytes, 0, False)
                for tp, lg in current
                if lg.dir.parent == d
            ]
            for tp, fut in future:
                if fut.dir.parent == d:
                    cur = self._logs.get(tp)
                    lag = max(cur.log_end_offset - fut.log_end_offset, 0) if cur else 0
                    replicas.append(ReplicaInfo(tp[0], tp[1], fut.size_in_bytes, lag, True))
            out.append(
                LogDirDescription(
                    d,
                    self.dir_ids.get(d),
                    None,
                    st.f_blocks * st.f_frsize,
                    st.f_bavail * st.f_frsize,
                    tuple(replicas),
                )
            )
        return out

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._offline_partitions

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        """Every log by its log dir. Periodic passes call this over every log of the broker, so the
        dir is found from the path's cached string (`Path.parent` builds and hashes a new path:
        15% of a busy node's loop with 10,000 logs)."""
        result: dict[Path, list[Log]] = {d: [] for d in self.online_dirs}
        by_name: dict[str, list[Log]] = {str(d): logs for d, logs in result.items()}
        dirname = os.path.dirname
        for lg in self._logs.values():
            name = dirname(str(lg.dir))
            logs = by_name.get(name)
            if logs is None:
                logs = by_name[name] = result.setdefault(Path(name), [])
            logs.append(lg)
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
            self.batch_epoch_writes(existing)
            if config is not None:
                existing.update_config(config)
            if existing.topic_id is None and topic_id is not None:
                # Created in a batch that a crash cut short (see placement_batch): Kafka's
                # assignTopicId.
                try:
                    PartitionMetadataFile(existing.dir).write(topic_id)
                except OSError as e:
                    self.handle_io_error(existing.dir, e)
                    raise KafkaStorageError(f"cannot write the topic id of {topic}-{partition}: {e}") from e
                existing.topic_id = topic_id
                log.info("%s-%d had no partition.metadata: topic id %s written", topic, partition, topic_id)
            return existing
        offline_dir = self._offline_partitions.get((topic, partition))
        if offline_dir is not None:
            raise KafkaStorageError(f"{topic}-{partition} is on offline log dir {offline_dir}")
        target = self._select_dir(TopicPartition(topic, partition))
        batched = self._batch_depth > 0
        try:
            lg = Log.open(
                target / partition_dir_name(topic, partition),
                config or self._config(topic),
                topic_id=None if batched else topic_id,
                recovery_point=0,
                log_start_offset=0,
                clean_shutdown=True,
                now_ms=self._now_ms if now_ms is None else now_ms,
            )
        except OSError as e:
            self.handle_io_error(target, e)
            raise KafkaStorageError(f"cannot create {topic}-{partition} in {target}: {e}") from e
        if batched:
            if lg.topic_id is not None and topic_id is not None and lg.topic_id != topic_id:
                _close_quietly(lg)
                raise InconsistentTopicIdError(f"{lg.dir} has topic id {lg.topic_id}, expected {topic_id}")
            metadata = lg.topic_id is None and topic_id is not None
            if metadata:
                lg.topic_id = topic_id
            lg.leader_epoch_cache.deferred = True
            self._unwritten.append((lg, metadata))
        self._logs[TopicPartition(topic, partition)] = lg
        self._watch_flushes(TopicPartition(topic, partition), lg)
        if batched:
            self._created.setdefault(target, []).append(f"{topic}-{partition}")
        else:
            log.info(
                "created log for %s-%d in %s (directory.id %s)",
                topic, partition, target, self.dir_ids.get(target, "unknown"),
            )
        return lg

    def _log_created(self) -> None:
        """A batch's new logs, one INFO line per log dir naming them all: a line per log (as
        Kafka writes) cost the event loop a fifth of its time creating 10,000 partitions here,
        most of it the write of each line to the broker's stderr."""
        created, self._created = self._created, {}
        for d, names in created.items():
            log.info(
                "created %d log%s in %s (directory.id %s): %s",
                len(names), "" if len(names) == 1 else "s", d, self.dir_ids.get(d, "unknown"), ", ".join(names),
            )

    def delete_log(self, topic: str, partition: int) -> bool:
        tp = TopicPartition(topic, partition)
        self._preferred_dirs.pop(tp, None)
        self._offline_partitions.pop(tp, None)
        self.abort_future_log(tp)
        lg = self._logs.get(tp)
        if lg is None:
            return False
        if self._in_flight:
            self.settle_writes()  # its files may be being written: not into a renamed dir
        del self._logs[tp]
        try:
            lg.delete()
        except OSError as e:
            self.handle_io_error(lg.dir, e)
        log.info("deleted log for %s-%d", topic, partition)
        return True

    # ------------------------------------------------------------------ replica moves (KIP-113)

    def prefer_log_dir(self, tp: TopicPartition, d: Path) -> None:
        """Remember where a replica that does not exist yet should be created."""
        d = self._known_online_dir(d)
        if tp not in self._preferred_dirs and len(self._preferred_dirs) >= MAX_PREFERRED_DIRS:
            # Requests name arbitrary partitions: forget the oldest wish, not the broker's memory.
            del self._preferred_dirs[next(iter(self._preferred_dirs))]
        self._preferred_dirs[tp] = d

    def _known_online_dir(self, d: Path | str) -> Path:
        for known in self.log_dirs:
            if os.path.abspath(known) == os.path.abspath(d):
                if known in self.offline_dirs:
                    raise KafkaStorageError(f"log dir {known} is offline")
                return known
        raise LogDirNotFoundError(f"{d} is not a log dir of this broker")

    def future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tp)

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def create_future_log(self, tp: TopicPartition, dest: Path | str, *, now_ms: int) -> Log | None:
        """Start a move of ``tp`` to ``dest``; None if it already lives there."""
        dest = self._known_online_dir(dest)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"{tp[0]}-{tp[1]} has no online replica to move")
        existing = self._future_logs.get(tp)
        if existing is not None:
            if existing.dir.parent == dest:
                return existing
            self.abort_future_log(tp)
        if current.dir.parent == dest:
            return None
        path = dest / f"{partition_dir_name(*tp)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        try:
            fut = Log.open(
                path,
                current.config,
                topic_id=current.topic_id,
                recovery_point=0,
                log_start_offset=current.log_start_offset,
                clean_shutdown=True,
                now_ms=now_ms,
            )
            fsync_dir(dest)
        except OSError as e:
            self.handle_io_error(dest, e)
            raise KafkaStorageError(f"cannot create {path}: {e}") from e
        self._future_logs[tp] = fut
        log.info("moving %s-%d from %s to %s", tp[0], tp[1], current.dir.parent, dest)
        return fut

    def abort_future_log(self, tp: TopicPartition) -> None:
        fut = self._future_logs.pop(tp, None)
        if fut is not None:
            try:
                fut.delete()
            except OSError as e:
                self.handle_io_error(fut.dir, e)

    def replace_current_with_future(
        self, tp: TopicPartition, *, now_ms: int, crash_point: Callable[[str], None] = _no_crash
    ) -> Log:
        """The swap at the end of a move; the caller holds the partition (event-loop thread).

        Order (what `_load_futures` relies on): fsync the future; rename the
        source to ``-delete``; rename the future to ``<topic>-<partition>``;
        reopen it. The ``-delete`` dir is left for `take_pending_deletes`.
        """
        src = self._logs[tp]
        fut = self._future_logs[tp]
        if fut.log_end_offset != src.log_end_offset:
            raise RuntimeError(
                f"future log of {tp[0]}-{tp[1]} is at {fut.log_end_offset}, not {src.log_end_offset}"
            )
        src_dir, dest_dir = src.dir.parent, fut.dir.parent
        log_start = max(src.log_start_offset, fut.log_start_offset)
        if self._in_flight:
            self.settle_writes()  # the source's files may be being written: not into a renamed dir
        try:
            fut.flush()
            fut.close()
            src.flush()
            src.close()
        except OSError as e:
            self.handle_io_error(getattr(e, "filename", None), e)
            raise KafkaStorageError(f"move of {tp[0]}-{tp[1]} failed: {e}") from e
        crash_point("caught-up")
        doomed = src.dir.with_name(f"{partition_dir_name(*tp)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        current = dest_dir / partition_dir_name(*tp)
        try:
            os.replace(src.dir, doomed)
        except OSError as e:
            self.mark_dir_offline(src_dir, f"rename of {src.dir} failed: {e}")
            raise KafkaStorageError(f"move of {tp[0]}-{tp[1]} failed: {e}") from e
        fsync_dir(src_dir)
        crash_point("source-renamed")
        try:
            os.replace(fut.dir, current)
            fsync_dir(dest_dir)
        except OSError as e:
            self.mark_dir_offline(dest_dir, f"rename of {fut.dir} failed: {e}")
            raise KafkaStorageError(f"move of {tp[0]}-{tp[1]} failed: {e}") from e
        crash_point("future-promoted")
        del self._future_logs[tp]
        new = Log.open(
            current,
            src.config,
            topic_id=src.topic_id,
            recovery_point=fut.log_end_offset,
            log_start_offset=fut.log_start_offset,
            clean_shutdown=True,
            now_ms=now_ms,
        )
        # DeleteRecords or retention moved the source's start during the copy.
        new.maybe_increment_log_start_offset(log_start, "replica moved between log dirs")
        # An epoch that starts at the log end (a leader epoch with no batch
        # yet) is in the source's cache only; Log.open drops such entries.
        latest = new.leader_epoch_cache.latest_epoch
        for entry in src.leader_epoch_cache.epoch_entries():
            if latest is None or entry.epoch > latest:
                new.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        self._logs[tp] = new
        self._watch_flushes(tp, new)
        self._pending_deletes.append(doomed)
        log.info("moved %s-%d from %s to %s", tp[0], tp[1], src_dir, dest_dir)
        return new

    def take_pending_deletes(self) -> list[Path]:
        """``-delete`` dirs left by swaps; the caller removes them off the event loop."""
        out, self._pending_deletes = self._pending_deletes, []
        return out

    # ------------------------------------------------------------------ checkpoints

    def _write_per_dir_steps(self, name: str, values: Mapping[TopicPartition, int]) -> Steps[None]:
        """Entries are taken here; the files are written (tmp, fsync, rename) by a worker."""
        writes: list[tuple[Path, dict[TopicPartition, int]]] = []
        for d, logs in self.logs_by_dir().items():
            if d not in self.log_dirs or d in self.offline_dirs:
                continue
            entries = {
                lg.topic_partition: values[lg.topic_partition]
                for lg in logs
                if lg.topic_partition in values
            }
            writes.append((d, entries))
        if not writes:
            return
        errors: dict[Path, OSError] = yield lambda: _write_checkpoints(name, writes)
        for d, e in errors.items():
            self.mark_dir_offline(d, f"cannot write {name}: {e}")

    def checkpoint_recovery_points_steps(self) -> Steps[None]:
        yield from self._write_per_dir_steps(
            RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in self._logs.items()}
        )

    def checkpoint_log_start_offsets_steps(self) -> Steps[None]:
        yield from self._write_per_dir_steps(
            LOG_START_OFFSET_CHECKPOINT,
            {tp: lg.log_start_offset for tp, lg in self._logs.items()},
        )

    def checkpoint_high_watermarks_steps(self, hw_by_tp: Mapping[TopicPartition, int]) -> Steps[None]:
        yield from self._write_per_dir_steps(REPLICATION_OFFSET_CHECKPOINT, dict(hw_by_tp))

    def checkpoint_recovery_points(self) -> None:
        drive_inline(self.checkpoint_recovery_points_steps())

    def checkpoint_log_start_offsets(self) -> None:
        drive_inline(self.checkpoint_log_start_offsets_steps())

    def checkpoint_high_watermarks(self, hw_by_tp: Mapping[TopicPartition, int]) -> None:
        drive_inline(self.checkpoint_high_watermarks_steps(hw_by_tp))

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for d in self.online_dirs:
            result.update(self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
        return result

    # ------------------------------------------------------------------ background work
    #
    # Each pass is a generator of steps (storage.cleaner.Steps): the bookkeeping runs where
    # it is driven (the event loop), each yielded callable -- fsyncs, unlinks, checkpoint
    # writes, reading and writing segments for the cleaner -- on a worker thread of the
    # broker's StorageIoManager, its result (or OSError) sent back. The sync names drive
    # the same steps inline (shutdown, tests).

    def cleanup_logs_steps(self, now_ms: int, hw_by_tp: Mapping[TopicPartition, int]) -> Steps[int]:
        """Retention for every log whose high watermark is known; old files are unlinked by a worker.
        A log being cleaned is skipped this time (Kafka pauses retention during cleaning too)."""
        self._now_ms = now_ms
        total = 0
        unlinks: list[tuple[Log, list[Path]]] = []
        for tp, lg in list(self._logs.items()):
            hw = hw_by_tp.get(tp)
            if hw is None or self._logs.get(tp) is not lg or tp in self._cleaning:
                continue
            lg.deferred_unlinks = []
            try:
                total += lg.delete_retention_segments(now_ms, high_watermark=hw)
            except OSError as e:
                self.handle_io_error(lg.dir, e)
            finally:
                if lg.deferred_unlinks:
                    unlinks.append((lg, lg.deferred_unlinks))
                lg.deferred_unlinks = None
        if unlinks:
            failed: list[tuple[Path, OSError]] = yield lambda: _unlink_all(unlinks)
            for d, e in failed:
                self.handle_io_error(d, e)
        return total

    def cleanup_logs(self, now_ms: int, hw_by_tp: Mapping[TopicPartition, int]) -> int:
        return drive_inline(self.cleanup_logs_steps(now_ms, hw_by_tp))

    def clean_logs_steps(self, now_ms: int, hw_by_tp: Mapping[TopicPartition, int]) -> Steps[int]:
        """One log-cleaner pass over every compacted log that is due; returns logs cleaned.

        The first dirty offset of each log lives in its dir's ``cleaner-offset-checkpoint``
        (Kafka's file), written after the pass, so a crash mid-pass cleans again.
        """
        self._now_ms = now_ms
        cleaned = 0
        for d, logs in self.logs_by_dir().items():
            if d not in self.log_dirs or not any(lg.config.compact_enabled for lg in logs):
                continue
            checkpoint = self._read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
            changed = False
            for lg in logs:
                tp = lg.topic_partition
                hw = hw_by_tp.get(tp)
                if hw is None or not lg.config.compact_enabled or self._logs.get(tp) is not lg:
                    continue
                self._cleaning.add(tp)
                try:
                    result = yield from clean_log_steps(
                        lg,
                        first_dirty_offset=checkpoint.get(tp, lg.log_start_offset),
                        high_watermark=hw,
                        now_ms=now_ms,
                        cleaner=self.cleaner_config,
                    )
                except CleanAbortedError as e:
                    log.info("cleaning stopped: %s", e)
                    continue
                except OSError as e:
                    if self._logs.get(tp) is not lg or isinstance(e, FileNotFoundError):
                        # Deleted, moved or truncated under the pass: not the disk's fault.
                        log.info("cleaning of %s stopped: %s", lg.dir.name, e)
                    else:
                        self.handle_io_error(lg.dir, e)
                    continue
                finally:
                    self._cleaning.discard(tp)
                if result is not None:
                    checkpoint[tp] = result.end_offset
                    changed = True
                    cleaned += 1
            if changed and d not in self.offline_dirs:
                live = {lg.topic_partition for lg in logs}
                entries = {tp: o for tp, o in checkpoint.items() if tp in live}
                errors: dict[Path, OSError] = yield lambda d=d, entries=entries: _write_checkpoints(
                    CLEANER_OFFSET_CHECKPOINT, [(d, entries)]
                )
                for bad, e in errors.items():
                    self.mark_dir_offline(bad, f"cannot write {CLEANER_OFFSET_CHECKPOINT}: {e}")
        return cleaned

    def clean_logs(self, now_ms: int, hw_by_tp: Mapping[TopicPartition, int]) -> int:
        return drive_inline(self.clean_logs_steps(now_ms, hw_by_tp))

    def _watch_flushes(self, tp: TopicPartition, lg: Log) -> None:
        """`lg` is the log of `tp` now: its wish for a flush puts it in the flush pass."""
        lg.on_flush_wanted(functools.partial(self._flush_candidates.add, tp))
        if lg.flush_wanted:
            self._flush_candidates.add(tp)

    def flush_dirty_steps(self, now_ms: int) -> Steps[int]:
        """flush.ms and deferred post-roll flushes, the fsyncs on a worker; returns logs flushed.

        The pass visits the logs that told they want a flush (an unflushed append, a roll), not
        every log: once a second it walked every idle log of the broker too (14% of a cluster
        node's event loop with 20,000 logs). A log stays a candidate until it has nothing left to
        flush, due or not."""
        self._now_ms = now_ms
        candidates = list(self._flush_candidates)
        try:
            flushed = yield from self._flush_candidates_steps(candidates, now_ms)
        finally:
            for tp in candidates:
                lg = self._logs.get(tp)
                if lg is None or not lg.flush_wanted:
                    self._flush_candidates.discard(tp)
        return flushed

    def _flush_candidates_steps(self, candidates: list[TopicPartition], now_ms: int) -> Steps[int]:
        jobs: list[tuple[Log, FlushJob]] = []
        for tp in candidates:
            lg = self._logs.get(tp)
            if lg is None:
                continue  # deleted, or its dir went offline
            try:
                job = lg.prepare_maybe_flush(now_ms)
            except OSError as e:
                self.handle_io_error(lg.dir, e)
                continue
            if job is not None:
                jobs.append((lg, job))
        if not jobs:
            return 0
        outcome: list[OSError | None] = []
        try:
            outcome = yield lambda: _run_flush_jobs([j for _, j in jobs])
        finally:
            for k, (lg, job) in enumerate(jobs):
                job.close()  # no-op after run; closes the descriptors if the step never ran
                lg.complete_flush(job, ok=k < len(outcome) and outcome[k] is None)
        flushed = 0
        for (lg, _), error in zip(jobs, outcome, strict=True):
            if error is not None:
                self.handle_io_error(lg.dir, error)
            else:
                flushed += 1
        return flushed

    def flush_dirty(self, now_ms: int) -> int:
        return drive_inline(self.flush_dirty_steps(now_ms))

    def _read_marker_epochs(self) -> int:
        if self.offline_dirs:
            return -1
        epochs = set()
        for d in self.online_dirs:
            try:
                content = json.loads((d / CLEAN_SHUTDOWN_FILE).read_text())
                epochs.add(int(content["brokerEpoch"]) if content.get("version") == 0 else -1)
            except (OSError, ValueError, TypeError, KeyError, AttributeError):
                return -1
        return epochs.pop() if len(epochs) == 1 else -1

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, write checkpoints, then the marker (online dirs only), naming
        `broker_epoch`, the registration this clean shutdown ends."""
        if self._shut_down:
            return
        self.settle_writes()
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None
        self._write_batched()
        for lg in [*self._logs.values(), *self._future_logs.values()]:
            try:
                lg.flush()
                lg.close()
            except OSError as e:
                self.handle_io_error(lg.dir, e)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for d in self.online_dirs:
            try:
                fd = os.open(d / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode())
                os.fsync(fd)
                os.close(fd)
                fsync_dir(d)
            except OSError as e:
                log.error("cannot write the clean-shutdown marker of %s: %s", d, e)
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds = []
        self._shut_down = True


def _close_quietly(lg: Log) -> None:
    for segment in lg.segments:
        with contextlib.suppress(OSError):
            segment.close_handles()


def _write_checkpoints(name: str, writes: list[tuple[Path, dict[TopicPartition, int]]]) -> dict[Path, OSError]:
    """Worker: write one checkpoint file per dir; the errors, by dir."""
    errors: dict[Path, OSError] = {}
    for d, entries in writes:
        try:
            OffsetCheckpointFile(d / name).write(entries)
        except OSError as e:
            errors[d] = e
    return errors


def _unlink_all(unlinks: list[tuple[Log, list[Path]]]) -> list[tuple[Path, OSError]]:
    """Worker: unlink the ``.deleted`` files retention left; the errors, by partition dir."""
    failed: list[tuple[Path, OSError]] = []
    for lg, paths in unlinks:
        for p in paths:
            try:
                p.unlink(missing_ok=True)
            except OSError as e:
                failed.append((lg.dir, e))
                break
    return failed


def _run_flush_jobs(jobs: list[FlushJob]) -> list[OSError | None]:
    """Worker: every job's fsyncs; one log's error does not stop the others."""
    out: list[OSError | None] = []
    for job in jobs:
        try:
            job.run()
            out.append(None)
        except OSError as e:
            out.append(e)
    return out


@dataclass(eq=False)
class _BackgroundWrite:
    """One batch handed to the writer thread: each dir's logs and what their files hold."""

    written: dict[Path, list[tuple[Log, list[EpochEntry] | None, bool]]]
    future: concurrent.futures.Future[dict[Path, OSError]]
    finished: bool = False


def _write_dirs(jobs: dict[Path, dict[Path, bytes]]) -> dict[Path, OSError]:
    """The writer thread's work: each dir's files (`write_all_atomically`); the dirs that failed."""
    errors: dict[Path, OSError] = {}
    for d, files in jobs.items():
        try:
            write_all_atomically(files, dirs=[d])
        except OSError as e:
            errors[d] = e
    return errors
