"""Replica fetchers: followers pull their partitions from the leaders (Kafka's ReplicaFetcherThread).

`ReplicaFetcherManager` keeps one `ReplicaFetcher` per (source broker, fetcher id):
a partition this broker follows goes to the fetcher for its leader and
`hash(partition) % num.replica.fetchers` (Kafka's rule), and moves when the
metadata names another leader. Each fetcher is one asyncio task with one
connection to the leader's inter-broker listener, sending Fetch v15 as a
replica (ReplicaState: this broker's id and broker epoch) for all of its
partitions at once:

- each partition's fetch offset is its log end offset and its last fetched
  epoch the latest epoch in its leader-epoch cache, so the leader can answer a
  *diverging epoch* (KIP-320) and the follower truncates there before fetching
  again -- never by high watermark alone;
- the batches are appended as sent (`Log.append_as_follower`: CRC checked, no
  re-encoding) and the leader's high watermark and log start offset are taken;
- the leader long-polls the request (`replica.fetch.wait.max.ms`,
  `replica.fetch.min.bytes`), so an idle cluster does not spin; a partition
  that joins the fetcher while its fetch is parked (a new follower, a new
  leader epoch, a replica rebuilt from tiered storage) does not wait for it:
  the parked fetch is superseded by one that asks for it too, sent at once on
  the fetcher's second connection (`ReplicaFetcher._supersede`);
- OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405: the offset is only in remote
  storage) starts a task that asks the leader its earliest local offset and
  has tiered storage rebuild the replica's epochs and producer state there
  (tiered.follower); the partition is fetched again from that offset;
- an error on one partition (a newer leader epoch, storage) backs that
  partition off for `replica.fetch.backoff.ms` until metadata moves it; a lost
  connection backs off the whole fetcher and reconnects.

The per-partition steps -- what a fetch asks (`fetch_position`), whether an answer still applies
(`answer_is_current`) and applying it (`apply_partition_response`) -- are plain functions of the
Partition, so the seeded replication simulation (kavka.testing.replication_simulation) runs the
same code as this loop.

Called on the event loop; appends run there too, as produce appends do.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.client.async_channel import AsyncChannel
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.protocol import fetch_wire
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import uuid_from_str, uuid_to_str
from kavka.replication.partition import Partition, PartitionError, TopicPartition
from kavka.replication.quota import ReplicationQuotas
from kavka.replication.replica_manager import ReplicaManager
from kavka.replication.replica_state import DivergingEpoch

log = logging.getLogger("kavka.replication.fetcher")

_METADATA_WAIT = frozenset(
    {
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
    }
)


FETCH_VERSION = 15  # ReplicaState (KIP-903), topic ids; encoded and decoded by hand (protocol.fetch_wire)


def _decode_response(frame: memoryview, pos: int) -> Any:
    return fetch_wire.decode_response(frame, pos, FETCH_VERSION)


# Topic ids between the metadata's strings and the wire's UUIDs, once per topic rather than per fetch.
_topic_uuid = functools.lru_cache(maxsize=4096)(uuid_from_str)
_topic_id_str = functools.lru_cache(maxsize=4096)(uuid_to_str)


def _drop_answer(call: asyncio.Task[Any]) -> None:
    """The end of a superseded fetch: its answer or failure is not used."""
    if not call.cancelled():
        call.exception()


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The follower's fetch configs (Kafka's names)."""

    max_bytes: int = 1048576  # replica.fetch.max.bytes, per partition
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms
    num_fetchers: int = 1  # num.replica.fetchers


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    delayed_until: float = 0.0  # loop time


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What a follower's fetch asks for one partition: its log end offset, the epoch of its last
    record (KIP-320: the leader answers a diverging epoch if its log disagrees) and its log start."""

    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


def fetch_position(p: Partition) -> FetchPosition:
    """The follower's side of the next fetch of `p` (pure: read from the partition, nothing changed)."""
    return FetchPosition(p.log_end_offset, p.last_fetched_epoch, p.log_start_offset)


def answer_is_current(p: Partition, *, fetch_offset: int, sent_leader_epoch: int, leader_epoch: int) -> bool:
    """May a fetch answer be applied to `p`: it still follows in the leader epoch the fetch was
    sent for (`leader_epoch`: the fetcher's current one), and its log end is the offset fetched."""
    return not p.is_leader and leader_epoch == sent_leader_epoch and p.log_end_offset == fetch_offset


class FetchApplied(enum.Enum):
    """What applying one partition's fetch answer did (`apply_partition_response`)."""

    APPENDED = "appended"  # records (if any) appended, the leader's high watermark and log start taken
    TRUNCATED_ON_DIVERGENCE = "truncated on a diverging epoch"
    RESTARTED_AT_LOG_START = "restarted at the leader's log start offset"
    TRUNCATED_TO_HIGH_WATERMARK = "truncated to the leader's high watermark"
    NOT_APPLIED = "not applied"  # an error the caller handles (back off, tiered storage)


def apply_partition_response(p: Partition, pd: Any, fetch_offset: int, *, now_ms: int) -> FetchApplied:
    """Apply the leader's answer for one partition to the follower `p` (Kafka's
    AbstractFetcherThread.processFetchRequest, one partition): truncate at a diverging epoch
    (KIP-320), else append the batches as sent and take the leader's high watermark and log start
    offset; on OFFSET_OUT_OF_RANGE restart at the leader's log start or truncate to its high
    watermark. `pd` has the FetchResponse partition's fields (error_code, diverging_epoch with
    epoch and end_offset or None, records, high_watermark, log_start_offset). Raises
    PartitionError from the partition; NOT_APPLIED leaves any other error to the caller. The
    replica fetcher and the replication simulation (kavka.testing.replication_simulation) both
    apply answers through here."""
    err = ErrorCode(pd.error_code)
    if err == ErrorCode.none:
        div = pd.diverging_epoch
        if div is not None and (div.epoch >= 0 or div.end_offset >= 0):
            p.truncate_on_divergence(DivergingEpoch(div.epoch, div.end_offset), now_ms=now_ms)
            return FetchApplied.TRUNCATED_ON_DIVERGENCE
        if pd.records:
            p.append_as_follower(pd.records, now_ms=now_ms)
        p.update_follower_state(leader_high_watermark=pd.high_watermark, leader_log_start_offset=pd.log_start_offset)
        return FetchApplied.APPENDED
    if err == ErrorCode.offset_out_of_range:
        if pd.log_start_offset >= 0 and fetch_offset < pd.log_start_offset:
            p.restart_at(pd.log_start_offset, now_ms=now_ms)
            return FetchApplied.RESTARTED_AT_LOG_START
        if pd.high_watermark >= 0 and pd.high_watermark < fetch_offset:
            # Above the leader's log end (only without an epoch to compare): keep what is
            # committed, fetch the rest again.
            p.truncate_to(pd.high_watermark, now_ms=now_ms)
            return FetchApplied.TRUNCATED_TO_HIGH_WATERMARK
    return FetchApplied.NOT_APPLIED


class ReplicaFetcherManager:
    def __init__(
        self,
        *,
        node_id: int,
        replica_manager: ReplicaManager,
        endpoint: Callable[[int], tuple[str, int] | None],
        broker_epoch: Callable[[], int],
        settings: FetcherSettings,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.security = security  # the inter-broker listener's TLS and SASL (kavka.client.security)
        self.rm = replica_manager
        self.endpoint = endpoint
        self.broker_epoch = broker_epoch
        self.settings = settings
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int]] = {}
        self._started = False
        # KIP-405 follower fetch (tiered.remote_log_manager.RemoteLogManager.build_remote_log_aux_state), set by
        # the broker when tiered storage is on: (partition, leader's local log start offset,
        # leader's log start offset) -> the offset to fetch from next.
        self.remote_log_aux_state: Callable[..., Awaitable[int]] | None = None
        # Replication throttle (replication.quota), set by the broker: the follower quota and the
        # image whose topic configs name the throttled replicas.
        self.quotas: ReplicationQuotas | None = None
        self.image: Callable[[], Any] = lambda: None

    def _key(self, tp: TopicPartition, leader: int) -> tuple[int, int]:
        # Stable across processes (str hash is salted): crc32 of the name, as Kafka uses the hash.
        return leader, (zlib.crc32(tp.topic.encode()) * 31 + tp.partition) % self.settings.num_fetchers

    def update(self, p: Partition) -> None:
        """Follow `p` from its leader, or stop fetching it (it leads, has no leader, or is offline)."""
        tp = p.tp
        if p.is_leader or p.leader < 0 or p.leader == self.node_id or p.offline:
            self.remove(tp)
            return
        key = self._key(tp, p.leader)
        old = self._assigned.get(tp)
        if old is not None and old != key:
            self.remove(tp)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self, *key)
            if self._started:
                fetcher.start()
        fetcher.add(tp, p.leader_epoch)
        self._assigned[tp] = key

    def remove(self, tp: TopicPartition) -> None:
        key = self._assigned.pop(tp, None)
        if key is None:
            return
        fetcher = self.fetchers.get(key)
        if fetcher is not None:
            fetcher.partitions.pop(tp, None)

    def start(self) -> None:
        self._started = True
        for f in self.fetchers.values():
            f.start()

    async def stop(self) -> None:
        self._started = False
        for f in list(self.fetchers.values()):
            await f.stop()

    def lag(self) -> dict[TopicPartition, int]:
        """Followed partition -> how far this replica is behind the leader's high watermark it last saw."""
        out = {}
        for tp in self._assigned:
            p = self.rm.partitions.get(tp)
            if p is not None:
                out[tp] = max(0, p.high_watermark - p.log_end_offset)
        return out


class ReplicaFetcher:
    """One connection to one leader, fetching a set of partitions in a loop."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int) -> None:
        self.m = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self.task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._channel = AsyncChannel(f"kavka-replica-{manager.node_id}", security=manager.security)
        # Used while a superseded fetch is still out on `_channel` (`_supersede`).
        self._spare_channel = AsyncChannel(f"kavka-replica-{manager.node_id}", security=manager.security)
        self._answered: asyncio.Future[None] | None = None  # set when the fetch in flight answers or is superseded
        self._in_flight: dict[TopicPartition, tuple[int, int]] | None = None  # what it asked
        self._superseded: asyncio.Task[Any] | None = None
        self._failing = False
        self._rebuilds: dict[TopicPartition, asyncio.Task[None]] = {}

    @property
    def name(self) -> str:
        return f"ReplicaFetcher-{self.fetcher_id}-{self.leader_id}"

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        st = self.partitions.get(tp)
        if st is None or st.leader_epoch != leader_epoch:
            self.partitions[tp] = _FetchState(leader_epoch)
        self._wake(tp)

    def _wake(self, tp: TopicPartition) -> None:
        """`tp` was added, changed epoch or became ready again (a tiered rebuild ended):
        fetch it now. If the fetch in flight does not ask for it as it now stands, that fetch may
        be parked at the leader for up to `replica.fetch.wait.max.ms` (the leader's other
        partitions idle): it is superseded (`_supersede`) rather than waited for."""
        self._wakeup.set()
        answered, sent, st = self._answered, self._in_flight, self.partitions.get(tp)
        if answered is None or answered.done() or sent is None or st is None:
            return
        if st.delayed_until <= asyncio.get_running_loop().time() and sent.get(tp, (0, None))[1] != st.leader_epoch:
            answered.set_result(None)

    def _supersede(self, call: asyncio.Task[Any]) -> None:
        """Leave the fetch in flight to finish on its connection, its answer unused, and send the
        next one on the fetcher's second connection at once. Kafka's fetcher thread waits for the
        parked fetch; here a partition that joins (a new follower, a replica rebuilt from tiered
        storage) starts fetching without that wait. The next fetch asks again for everything the
        superseded one asked, at the same offsets, so dropping its answer loses nothing; had the
        leader already sent it, `answer_is_current` would refuse a second copy of the same records
        anyway. At most one fetch is superseded at a time: an older one still out is cancelled,
        which closes its connection (reopened on the next use)."""
        if self._superseded is not None and not self._superseded.done():
            self._superseded.cancel()
        call.add_done_callback(_drop_answer)
        self._superseded = call
        self._channel, self._spare_channel = self._spare_channel, self._channel

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        for t in list(self._rebuilds.values()):
            t.cancel()
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("%s failed", self.name)
        self._close()

    def _close(self) -> None:
        if self._superseded is not None:
            self._superseded.cancel()
        self._channel.close()
        self._spare_channel.close()

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = self.m.settings.backoff_ms / 1000
        while True:
            now = loop.time()
            ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until <= now}
            if not ready:
                self._wakeup.clear()
                waits = [st.delayed_until - now for st in self.partitions.values()]
                try:
                    async with asyncio.timeout(min(waits) if waits else None):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
                continue
            addr = self.m.endpoint(self.leader_id)
            request, sent = self._build(ready)
            if addr is None or request is None:
                q = self.m.quotas
                # Everything ready is throttled: wait until the follower quota allows again.
                pause = min(backoff, max(q.follower.wait_s(time.monotonic()), 0.01)) if q is not None and sent is None else backoff
                await asyncio.sleep(pause)
                continue
            s = self.m.settings
            call = loop.create_task(self._channel.call_raw(
                addr, ApiKey.FETCH, FETCH_VERSION, request, _decode_response,
                (s.socket_timeout_ms + s.wait_max_ms) / 1000,
            ))
            answered = self._answered = loop.create_future()
            call.add_done_callback(lambda _t, f=answered: f.done() or f.set_result(None))
            self._in_flight = sent
            try:
                await answered
            except asyncio.CancelledError:
                call.cancel()
                raise
            finally:
                self._answered = None
                self._in_flight = None
            if not call.done():
                self._supersede(call)
                continue
            try:
                resp = call.result()
            except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError, ConnectionError, ValueError) as e:
                self._close()
                if not self._failing:
                    log.warning("%s: fetch from broker %d at %s:%d failed: %r; retrying every %.1fs",
                                self.name, self.leader_id, *addr, e, backoff)
                    self._failing = True
                await asyncio.sleep(backoff)
                continue
            if self._failing:
                log.info("%s: fetching from broker %d again", self.name, self.leader_id)
                self._failing = False
            if resp.error_code != ErrorCode.none:
                log.warning("%s: fetch answered %s", self.name, ErrorCode(resp.error_code).name)
                await asyncio.sleep(backoff)
                continue
            self._process(resp, sent)

    def _build(self, ready: dict[TopicPartition, _FetchState]) -> tuple[Any, dict[TopicPartition, tuple[int, int]]]:
        """The Fetch request, and what was asked per partition: (fetch offset, leader epoch)."""
        s = self.m.settings
        topics: dict[str, list[Any]] = {}
        sent: dict[TopicPartition, tuple[int, int]] = {}
        q, image, now = self.m.quotas, self.m.image(), time.monotonic()
        held = False
        for tp, st in ready.items():
            p = self.m.rm.partitions.get(tp)
            if p is None or p.is_leader or p.offline:
                continue
            if (
                q is not None
                and self.m.node_id not in p.isr
                and q.follower_throttled(image, tp.topic, tp.partition)
                and q.follower.is_exceeded(now)
            ):
                held = True  # Kafka's shouldFollowerThrottle: left out of this request
                continue
            pos = fetch_position(p)
            sent[tp] = (pos.fetch_offset, st.leader_epoch)
            topics.setdefault(p.topic_id, []).append(
                (tp.partition, st.leader_epoch, pos.fetch_offset, pos.last_fetched_epoch, pos.log_start_offset, s.max_bytes)
            )
        if not sent:
            return None, (None if held else sent)  # type: ignore[return-value]
        req = fetch_wire.encode_request(
            FETCH_VERSION,
            replica_id=self.m.node_id,
            replica_epoch=self.m.broker_epoch(),
            max_wait_ms=s.wait_max_ms,
            min_bytes=s.min_bytes,
            max_bytes=s.response_max_bytes,
            topics=[(_topic_uuid(tid), parts) for tid, parts in topics.items()],
        )
        return req, sent

    # ------------------------------------------------------------------ response

    def _process(self, resp: Any, sent: dict[TopicPartition, tuple[int, int]]) -> None:
        rm = self.m.rm
        loop = asyncio.get_running_loop()
        backoff = self.m.settings.backoff_ms / 1000
        now_ms = rm.now_ms()
        by_id: dict[tuple[str, int], TopicPartition] = {}
        for tp in sent:
            p = rm.partitions.get(tp)
            if p is not None:
                by_id[(p.topic_id, tp.partition)] = tp
        for t in resp.responses:
            tid = _topic_id_str(t.topic_id)
            for pd in t.partitions:
                tp = by_id.get((tid, pd.partition_index))
                if tp is None:
                    continue
                p = rm.partitions.get(tp)
                st = self.partitions.get(tp)
                fetch_offset, epoch = sent[tp]
                if p is None or st is None or not answer_is_current(p, fetch_offset=fetch_offset, sent_leader_epoch=epoch,
                                                                      leader_epoch=st.leader_epoch):
                    continue  # the partition changed while the fetch was out: its answer is stale
                try:
                    self._apply(p, pd, fetch_offset, now_ms)
                except PartitionError as e:
                    # A leader epoch ahead of or behind ours settles with the next metadata; others are worth a warning.
                    level = logging.INFO if e.error in _METADATA_WAIT else logging.WARNING
                    log.log(level, "%s: %s: %s", self.name, tp, e)
                    # The leader has not applied the new epoch yet: it will in a moment.
                    pause = min(backoff, 0.05) if e.error == ErrorCode.unknown_leader_epoch else backoff
                    st.delayed_until = loop.time() + pause
                except Exception as e:  # a corrupt batch, an unexpected offset: log it and back off
                    log.error("%s: cannot apply the leader's records to %s: %r", self.name, tp, e)
                    st.delayed_until = loop.time() + backoff

    def _apply(self, p: Partition, pd: Any, fetch_offset: int, now_ms: int) -> None:
        before = p.log_end_offset
        applied = apply_partition_response(p, pd, fetch_offset, now_ms=now_ms)
        if applied is FetchApplied.TRUNCATED_ON_DIVERGENCE:
            div = pd.diverging_epoch
            log.info("%s: truncated %s from %d to %d (the leader's epoch %d ends at %d)",
                     self.name, p.tp, before, p.log_end_offset, div.epoch, div.end_offset)
        elif applied is FetchApplied.RESTARTED_AT_LOG_START:
            log.info("%s: %s restarts at the leader's log start offset %d", self.name, p.tp, pd.log_start_offset)
        elif applied is FetchApplied.TRUNCATED_TO_HIGH_WATERMARK:
            log.info("%s: %s truncates to the leader's high watermark %d", self.name, p.tp, pd.high_watermark)
        elif applied is FetchApplied.APPENDED and pd.records:
            q = self.m.quotas
            if q is not None and q.follower_throttled(self.m.image(), p.tp.topic, p.tp.partition):
                q.follower.record(len(pd.records), time.monotonic())
        elif applied is FetchApplied.NOT_APPLIED:
            err = ErrorCode(pd.error_code)
            if err == ErrorCode.offset_moved_to_tiered_storage and self._maybe_rebuild_from_tiered(p, pd):
                return
            raise PartitionError(err, f"the leader answered {err.name}")

    # ------------------------------------------------------------------ KIP-405 follower fetch

    def _maybe_rebuild_from_tiered(self, p: Partition, pd: Any) -> bool:
        """The leader answered OFFSET_MOVED_TO_TIERED_STORAGE: rebuild the replica's epochs and
        producer state from remote storage in a task of its own (the partition is not fetched
        meanwhile) and fetch only the local tail after it. False without tiered storage here."""
        if self.m.remote_log_aux_state is None:
            return False
        st = self.partitions.get(p.tp)
        if st is None:
            return True
        running = self._rebuilds.get(p.tp)
        if running is None or running.done():
            st.delayed_until = float("inf")
            self._rebuilds[p.tp] = asyncio.get_running_loop().create_task(
                self._rebuild_from_tiered(p.tp, st, pd.log_start_offset), name=f"{self.name}-tiered-{p.tp}")
        return True

    async def _rebuild_from_tiered(self, tp: TopicPartition, st: _FetchState, leader_log_start_offset: int) -> None:
        loop = asyncio.get_running_loop()
        backoff = self.m.settings.backoff_ms / 1000
        try:
            local_start = await self._fetch_earliest_local_offset(tp, st.leader_epoch)
            p = self.m.rm.partitions.get(tp)
            aux = self.m.remote_log_aux_state
            if p is None or p.is_leader or p.leader_epoch != st.leader_epoch or aux is None:
                return  # the partition moved meanwhile: the next metadata decides
            if p.log_end_offset < local_start:  # else the leader's local log reaches us again
                await aux(p, leader_local_log_start_offset=local_start, leader_log_start_offset=leader_log_start_offset)
            st.delayed_until = 0.0
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("%s: %s: rebuilding from tiered storage failed: %r; retrying in %.1fs", self.name, tp, e, backoff)
            st.delayed_until = loop.time() + backoff
        finally:
            if st.delayed_until == float("inf"):  # returned early: fetch again after a pause
                st.delayed_until = loop.time() + backoff
            self._rebuilds.pop(tp, None)
            self._wake(tp)

    async def _fetch_earliest_local_offset(self, tp: TopicPartition, leader_epoch: int) -> int:
        """ListOffsets v8 with timestamp -4 (EARLIEST_LOCAL, KIP-405) as this replica, to the leader."""
        from kavka.protocol import api
        from kavka.protocol.messages import make, nested

        addr = self.m.endpoint(self.leader_id)
        if addr is None:
            raise OSError(f"broker {self.leader_id} has no endpoint")
        cls = api.request_schema(2, 8)
        req = make(
            cls,
            replica_id=self.m.node_id,
            isolation_level=0,
            topics=(make(nested(cls, "ListOffsetsTopic"), name=tp.topic, partitions=(
                make(nested(cls, "ListOffsetsPartition"), partition_index=tp.partition,
                     current_leader_epoch=leader_epoch, timestamp=-4),)),),
        )
        channel = AsyncChannel(f"kavka-replica-{self.m.node_id}", security=self.m.security)
        try:
            resp = await channel.call(addr, req, api.response_schema(2, 8), self.m.settings.socket_timeout_ms / 1000)
        finally:
            channel.close()
        part = resp.topics[0].partitions[0]
        if part.error_code != ErrorCode.none:
            raise PartitionError(ErrorCode(part.error_code), f"ListOffsets -4 answered {ErrorCode(part.error_code).name}")
        return int(part.offset)
