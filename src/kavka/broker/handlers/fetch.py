"""Fetch (API 1): consumers read committed records, with long-poll.

For each requested partition: check it exists (by name, or by topic id from
v13 on), fence stale or future leader epochs (KIP-320), range-check the fetch
offset, then read whole batches from fetch_offset up to the high watermark,
within partition_max_bytes and the response's max_bytes (the first batch is
always returned even if larger, KIP-74, so a consumer can make progress).
Record bytes are not copied through kio's encoder: the response is a
SplicedResponse whose record chunks go to the socket as they were read
(protocol.splice). If fewer than min_bytes are ready and nothing failed, the request waits in the
ReplicaManager's purgatory until one of its partitions changes or max_wait,
then reads again.

Followers (a replica id in the request: `ReplicaState` from v15): the leader
first checks the follower's last fetched epoch against its epoch cache and
answers a diverging epoch when they disagree (KIP-320); otherwise it reads up
to the log end offset, not the high watermark, and records the follower's
position (which may move the high watermark or propose an ISR expansion,
`Partition.fetch_for_follower`). A follower's long-poll wakes on appends; a
consumer's on moves of the high watermark, when records become visible. A
fetch from an earlier incarnation of the broker (its replica epoch below the
registered broker epoch) is answered NOT_LEADER_OR_FOLLOWER and counts for
nothing.

Reading from followers (KIP-392): a consumer's Fetch v11+ may be served by any replica, bounded
by that replica's high watermark (a follower's is the leader's as last received); an offset above
a follower's log end is OFFSET_OUT_OF_RANGE, after which the client asks the leader again. With
`replica.selector.class` set, the leader answers a consumer that sent its rack with
`preferred_read_replica` and no records when the selector picks another replica
(kavka.replication.replica_selector). Consumer fetches before v11 and ListOffsets stay
leader-only. A partition this broker does not host but the cluster has is
NOT_LEADER_OR_FOLLOWER (the client's metadata is stale), as Kafka answers. Record bytes sent to
consumers are counted per topic (BytesOutPerSec).

Tiered storage (KIP-405): a partition whose fetch offset is at or above the
log start offset but below the local log start offset is read from remote
storage (kavka.tiered.rlm). Every such partition of one Fetch is read in
parallel in the remote reader's bounded pool while the event loop awaits it;
then the whole response is built with those bytes (cut at a batch boundary to
the response's remaining max_bytes, at least one batch for the first
partition with data). A Fetch with remote partitions does not long-poll.

Fetch v0-v3 predate record batches: their records are down-converted to
message format v0/v1 (protocol.message_format), uncompressed.

Fetch sessions (KIP-227): kavka answers every full fetch with session id 0,
which the protocol defines as "no session created"; clients then keep
sending full fetches. An incremental fetch for a session kavka does not know
gets FETCH_SESSION_ID_NOT_FOUND, as Kafka answers for an evicted session.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.broker.handlers.errors import error_for
from kavka.delayed import Delayed
from kavka.protocol import api, fetch_wire
from kavka.protocol.message_format import down_convert
from kavka.protocol.messages import NO_THROTTLE, make, nested, uuid_to_str
from kavka.protocol.splice import SplicedResponse
from kavka.replication.partition import Partition, PartitionError, TopicPartition
from kavka.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ClientMetadata,
    preferred_read_replica,
    replica_selector,
)
from kavka.storage.errors import OffsetOutOfRangeError

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def _resolve_topics(node: BrokerNode, req: Any, by_id: bool) -> list[tuple[Any, str | None, Any]]:
    """(request topic entry, topic name or None, response topic key)."""
    out = []
    image = node.image
    for t in req.topics:
        if by_id:
            ti = image.topics_by_id.get(uuid_to_str(t.topic_id))
            out.append((t, ti.name if ti else None, t.topic_id))
        else:
            out.append((t, t.topic, t.topic))
    return out


def handle_fetch(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    if req.session_id != 0 or req.session_epoch > 0:  # before v7: 0 and -1 (protocol.versions)
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.fetch_session_id_not_found,
                    session_id=0, responses=())
    by_id = ctx.api_version >= 13
    topics = _resolve_topics(node, req, by_id)
    replica_id = req.replica_state.replica_id if ctx.api_version >= 15 else req.replica_id
    follower = replica_id >= 0
    if follower and ctx.api_version >= 15 and _stale_replica(node, replica_id, req.replica_state.replica_epoch):
        # A fetch from an earlier incarnation of that broker (KIP-903): it must not move the high watermark.
        return _read_all(node, ctx, req, topics, resp_cls, replica_id, stale_replica=True)[0]
    remote_plan, throttled = ({}, frozenset()) if follower else _remote_plan(node, topics)
    if remote_plan:
        return _read_with_remote(node, ctx, req, topics, resp_cls, remote_plan, throttled)
    result, total, errors = _read_all(node, ctx, req, topics, resp_cls, replica_id, throttled=throttled)
    wait_ms = int(req.max_wait.total_seconds() * 1000)

    def done(res: SplicedResponse) -> SplicedResponse:
        return res if follower else _count_bytes_out(node, topics, res)

    if total >= req.min_bytes or errors or wait_ms <= 0 or not topics:
        return done(result)

    tps = [TopicPartition(name, p.partition) for t, name, _ in topics if name for p in t.partitions]
    return _park(node, tps, follower, wait_ms / 1000, lambda: _read_all(node, ctx, req, topics, resp_cls, replica_id, throttled=throttled), req.min_bytes, done)


def _park(
    node: BrokerNode, tps: list[TopicPartition], follower: bool, wait_s: float,
    read: Any, min_bytes: int, done: Any,
) -> _DelayedFetch:
    """The long-poll (Kafka's DelayedFetch): answered by the first read, at a change to
    one of `tps` (an append for a follower, a high-watermark move for a consumer), that has
    `min_bytes` or an error, or by the read at `wait_s`. Registered now, so a change before the
    server's next turn is not missed; the read runs in the purgatory's callback, and the server
    writes the answer there too (kavka.delayed)."""
    return _DelayedFetch(node.replica_manager, tps, follower, wait_s, read, min_bytes, done)


class _DelayedFetch(Delayed[Any]):
    """One parked Fetch; it lets go of its registration and read when it ends (kavka.delayed)."""

    __slots__ = ("_rm", "_tps", "_follower", "_read", "_min_bytes", "_done", "_reg")

    def __init__(self, rm: Any, tps: list[TopicPartition], follower: bool, wait_s: float, read: Any, min_bytes: int, done: Any) -> None:
        super().__init__(wait_s)
        self._rm, self._tps, self._follower = rm, tps, follower
        self._read, self._min_bytes, self._done = read, min_bytes, done
        self._reg: Any = None
        self._watch()

    def _watch(self) -> None:
        self._reg = self._rm.on_change(self._tps, self._changed, follower=self._follower)

    def _changed(self) -> None:
        self._attempt(False)

    def _expire(self) -> None:
        self._attempt(True)

    def _attempt(self, final: bool) -> None:
        read, done = self._read, self._done
        if read is None or self.future.done():
            return
        try:
            res, tot, errs = read()
            if tot >= self._min_bytes or errs or final:
                self._resolve(done(res))
                return
        except Exception as e:  # noqa: BLE001 -- the request fails (its connection closes), not the waker
            self._fail(e)
            return
        self._watch()

    def _release(self) -> None:
        if self._reg is not None:
            self._reg.cancel()
            self._reg = None
        self._read = self._done = self._rm = None


def _isr_eligible(node: BrokerNode, replica_id: int, replica_epoch: int) -> bool:
    """May the leader propose this follower for the ISR (Kafka's isReplicaIsrEligible): unfenced, not
    in controlled shutdown, and -- when its fetch says -- of the broker epoch the metadata holds."""
    b = node.image.brokers.get(replica_id)
    return b is not None and b.usable and (replica_epoch < 0 or b.epoch == replica_epoch)


def _stale_replica(node: BrokerNode, replica_id: int, replica_epoch: int) -> bool:
    b = node.image.brokers.get(replica_id)
    return b is None or (replica_epoch >= 0 and replica_epoch < b.epoch)


def _remote_plan(
    node: BrokerNode, topics: list[tuple[Any, str | None, Any]]
) -> tuple[dict[tuple[str, int], Any], frozenset[tuple[str, int]]]:
    """The partitions of this Fetch to read from remote storage, with what to read; and those
    that would be but the remote fetch quota is used up (KIP-956: answered with no records and
    no error, so the fetch waits like one with too little data and the consumer asks again)."""
    rlm = getattr(node, "remote_log_manager", None)
    if rlm is None:
        return {}, frozenset()
    from kavka.tiered.remote_reader import RemoteFetch

    rm = node.replica_manager
    plan: dict[tuple[str, int], Any] = {}
    throttled: set[tuple[str, int]] = set()
    throttle_ms: int | None = None
    for t, name, _ in topics:
        if name is None:
            continue
        for fp in t.partitions:
            p = rm.get_partition(name, fp.partition)
            if p is None or not p.is_leader or p.offline:
                continue
            lg = p.log
            if lg.log_start_offset <= fp.fetch_offset < lg.local_log_start_offset:
                md = rlm.segment_for(p, fp.fetch_offset)
                if md is not None:
                    if throttle_ms is None:
                        throttle_ms = rlm.fetch_throttle_ms()
                    if throttle_ms > 0:
                        throttled.add((name, fp.partition))
                        rlm.remote_fetches_throttled += 1
                        continue
                    plan[(name, fp.partition)] = RemoteFetch(md, fp.fetch_offset, fp.partition_max_bytes, min_one_message=True)
    return plan, frozenset(throttled)


async def _read_with_remote(
    node: BrokerNode, ctx: RequestContext, req: Any, topics: list[tuple[Any, str | None, Any]], resp_cls: type,
    plan: dict[tuple[str, int], Any], throttled: frozenset[tuple[str, int]] = frozenset(),
) -> Any:
    keys = list(plan)
    results = await node.remote_log_manager.read([plan[k] for k in keys])
    resp = _read_all(node, ctx, req, topics, resp_cls, remote=dict(zip(keys, results, strict=True)), throttled=throttled)[0]
    return _count_bytes_out(node, topics, resp)


def _maybe_moved_to_tiered_storage(node: BrokerNode, p: Any, fetch_offset: int, last_fetched_epoch: int) -> None:
    """KIP-405 follower fetch: a follower asking for an offset that only remote storage holds
    (at or above the log start offset, below the local log start offset of a tiered topic) is
    answered OFFSET_MOVED_TO_TIERED_STORAGE, as Kafka's leader does (ReplicaManager.readFromLog);
    it rebuilds its epochs and producer state from remote storage and fetches the local tail
    (tiered.follower) instead of having the leader read remote segments for it."""
    lg = p.log
    if getattr(node, "remote_log_manager", None) is None or not lg.config.remote_storage_enable or not p.is_leader:
        return
    if lg.log_start_offset <= fetch_offset < lg.local_log_start_offset:
        from kavka.replication.replica_state import diverging_epoch

        if diverging_epoch(lg.leader_epoch_cache, fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                           log_end_offset=lg.log_end_offset, log_start_offset=lg.log_start_offset) is not None:
            return  # a diverging epoch is answered first (KIP-320), as for any follower fetch
        raise PartitionError(
            ErrorCode.offset_moved_to_tiered_storage,
            f"offset {fetch_offset} of {p.tp} is in tiered storage (local log start {lg.local_log_start_offset})",
        )


def _cut(records: bytes, limit: int, min_one: bool) -> bytes:
    """Whole batches of ``records`` within ``limit`` bytes (at least one if ``min_one``)."""
    from kavka.protocol.records import iter_batches

    end = 0
    for pos, h in iter_batches(records):
        if pos + h.size_in_bytes > limit and not (min_one and end == 0):
            break
        end = pos + h.size_in_bytes
    return records[:end]


def _read_all(
    node: BrokerNode,
    ctx: RequestContext,
    req: Any,
    topics: list[tuple[Any, str | None, Any]],
    resp_cls: type,
    replica_id: int = -1,
    remote: dict[tuple[str, int], bytes | BaseException] | None = None,
    *,
    stale_replica: bool = False,
    throttled: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[Any, int, bool]:
    rm = node.replica_manager
    now_ms = node.now_ms()
    quotas = getattr(node, "replication_quotas", None) if replica_id >= 0 else None
    now_s = time.monotonic()
    remaining = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
    remaining = min(remaining, node.config["fetch.max.bytes"])
    total = 0
    any_error = False
    min_one = True
    out_topics = []
    spliced = SplicedResponse(None, api.is_flexible(ctx.api_key, ctx.api_version))
    read_committed = req.isolation_level == 1
    eligible = replica_id >= 0 and _isr_eligible(node, replica_id, req.replica_state.replica_epoch if ctx.api_version >= 15 else -1)
    for t, name, key in topics:
        parts = []
        for fp in t.partitions:
            error = ErrorCode.none
            hw = lso = start = -1
            records = b""
            diverging = None
            preferred = NO_PREFERRED_REPLICA
            p = rm.get_partition(name, fp.partition) if name is not None else None
            if p is None:
                error = _missing_partition_error(node, ctx, name, fp.partition)
            elif replica_id >= 0:
                # A follower's fetch (Kafka's replica fetcher): everything up to the log end.
                hw, start = p.high_watermark, p.log_start_offset
                lso = hw
                try:
                    if stale_replica:
                        raise PartitionError(ErrorCode.not_leader_or_follower, f"fetch from a stale or unknown broker {replica_id}")
                    _maybe_moved_to_tiered_storage(node, p, fp.fetch_offset, getattr(fp, "last_fetched_epoch", -1))
                    # Replication throttle (replication.quota): an out-of-sync follower of a throttled
                    # partition gets no records while the leader quota is exceeded.
                    throttled = quotas is not None and quotas.leader_throttled(node.image, name, fp.partition)
                    hold = throttled and replica_id not in p.isr and quotas.leader.is_exceeded(now_s)
                    r = p.fetch_for_follower(
                        replica_id,
                        fetch_offset=fp.fetch_offset,
                        last_fetched_epoch=getattr(fp, "last_fetched_epoch", -1),
                        current_leader_epoch=fp.current_leader_epoch,
                        max_bytes=max(min(fp.partition_max_bytes, remaining), 0),
                        min_one_message=min_one,
                        now_ms=now_ms,
                        log_start_offset=getattr(fp, "log_start_offset", -1),
                        hold_back=hold,
                        isr_eligible=eligible,
                    )
                    rm.propose(p, r.proposal)
                    hw = lso = r.high_watermark
                    start = r.log_start_offset
                    if r.diverging is not None:
                        any_error = True  # answered at once, as Kafka does
                        diverging = (r.diverging.epoch, r.diverging.end_offset)
                    elif r.data is not None:
                        records = r.data.records
                        if throttled:
                            quotas.leader.record(len(records), now_s)
                except Exception as e:
                    error, _msg = error_for(e)
            else:
                hw = p.high_watermark
                lso = hw  # no transactions yet: the last stable offset is the high watermark
                start = p.log_start_offset
                try:
                    p.check_online()
                    p.check_leader_epoch(fp.current_leader_epoch)
                    if not p.is_leader and ctx.api_version < 11:
                        # Before v11 a consumer sends no client metadata and reads from leaders only (KIP-392).
                        raise PartitionError(ErrorCode.not_leader_or_follower)
                    limit = min(fp.partition_max_bytes, remaining)
                    upper = lso if read_committed else hw
                    if fp.fetch_offset < start or fp.fetch_offset > p.log_end_offset:
                        raise OffsetOutOfRangeError(
                            f"fetch offset {fp.fetch_offset} is outside [{start}, {p.log_end_offset}] of {name}-{fp.partition}"
                        )
                    if not p.is_leader and fp.fetch_offset < p.log.local_log_start_offset:
                        # Only leaders read tiered storage (kavka.tiered): the client goes back to the leader.
                        raise PartitionError(ErrorCode.not_leader_or_follower, "remote reads are served by the leader")
                    fetched = remote.get((name, fp.partition)) if remote is not None and name is not None else None
                    if isinstance(fetched, BaseException):
                        raise fetched
                    if fetched is None and p.is_leader and (name, fp.partition) not in throttled:
                        preferred = _preferred_read_replica(node, ctx, req, p, fetch_offset=fp.fetch_offset, now_ms=now_ms)
                        any_error |= preferred != NO_PREFERRED_REPLICA  # answered at once, with no records, as Kafka does
                    if fetched is None and (name, fp.partition) in throttled:
                        pass  # remote fetch quota used up: no records, no error (KIP-956)
                    elif fetched is not None:
                        records = _cut(fetched, max(limit, 0), min_one)
                        if ctx.api_version < 4:
                            records = down_convert(records, 0 if ctx.api_version < 2 else 1)
                    elif fp.fetch_offset < upper and preferred == NO_PREFERRED_REPLICA:
                        data = p.read_records(
                            fp.fetch_offset,
                            max_bytes=max(limit, 0),
                            max_offset=upper,
                            min_one_message=min_one,
                        )
                        records = data.records
                        if ctx.api_version < 4:
                            # Message format v0 (Fetch v0-v1) or v1 (v2-v3): protocol.message_format.
                            records = down_convert(records, 0 if ctx.api_version < 2 else 1)
                except Exception as e:
                    error, _msg = error_for(e)
            if error != ErrorCode.none:
                any_error = True
            n = len(records)
            if n:
                min_one = False
                remaining -= n
                total += n
                if name is not None:
                    spliced.topic_bytes[name] = spliced.topic_bytes.get(name, 0) + n
            parts.append((fp.partition, error, hw, lso, start, diverging, None if not read_committed else (),
                          preferred, records))
        out_topics.append((key, parts))
    if ctx.api_version >= fetch_wire.FIRST_FLEXIBLE:
        # The hot path (every follower's fetch, clients' v12+): encoded by hand, record chunks
        # not copied (protocol.fetch_wire).
        spliced.buffers = fetch_wire.encode_response(ctx.api_version, out_topics)
        return spliced, total, any_error
    topic_cls = nested(resp_cls, "FetchableTopicResponse")
    part_cls = nested(resp_cls, "PartitionData")
    spliced.entity = make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            make(topic_cls, **{"topic_id" if by_id_key(ctx) else "topic": key}, partitions=tuple(
                make(
                    part_cls,
                    partition_index=index,
                    error_code=error,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=aborted,
                    preferred_read_replica=preferred,
                    records=spliced.add(records) if records else records,
                )
                for index, error, hw, lso, start, _diverging, aborted, preferred, records in parts
            ))
            for key, parts in out_topics
        ),
    )
    return spliced, total, any_error


def by_id_key(ctx: RequestContext) -> bool:
    return ctx.api_version >= 13


# ---------------------------------------------------------------- KIP-392: reading from followers


def _missing_partition_error(node: BrokerNode, ctx: RequestContext, name: str | None, partition: int) -> ErrorCode:
    """A partition this broker does not host: NOT_LEADER_OR_FOLLOWER when the cluster has it (the
    client's metadata is stale, e.g. it was sent to a replica that has since moved away), else
    unknown -- Kafka's ReplicaManager.getPartitionOrError."""
    if name is None:
        return ErrorCode.unknown_topic_id if ctx.api_version >= 13 else ErrorCode.unknown_topic_or_partition
    t = node.image.topics_by_name.get(name)
    if t is not None and partition in t.partitions:
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_topic_or_partition


def _preferred_read_replica(
    node: BrokerNode, ctx: RequestContext, req: Any, p: Partition, *, fetch_offset: int, now_ms: int
) -> int:
    """The replica a consumer's fetch (v11+, with client metadata) should read from instead of this
    leader, chosen by `replica.selector.class`; NO_PREFERRED_REPLICA when it should read here."""
    if ctx.api_version < 11:
        return NO_PREFERRED_REPLICA
    selector = replica_selector(node.config["replica.selector.class"])
    if selector is None:
        return NO_PREFERRED_REPLICA
    client = ClientMetadata(req.rack_id or "", ctx.client_id or "", ctx.peer)
    return preferred_read_replica(selector, p, client=client, brokers=node.image.brokers, fetch_offset=fetch_offset, now_ms=now_ms)


def _count_bytes_out(node: BrokerNode, topics: list[tuple[Any, str | None, Any]], resp: SplicedResponse) -> SplicedResponse:
    """Add the record bytes a consumer fetch's response carries to each topic's BytesOutPerSec
    (Kafka counts followers' fetches apart, as ReplicationBytesOutPerSec; kavka does not count those)."""
    counts = node.replica_manager.bytes_out
    for name, n in resp.topic_bytes.items():
        counts[name] = counts.get(name, 0) + n
    return resp
