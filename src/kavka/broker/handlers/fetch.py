"""Fetch (API 1): decode the request, read through the ReplicaManager, encode the response.

The reading itself -- consumers up to the high watermark (read_committed ones up to the last
stable offset, KIP-98), followers up to the log end with their
positions recorded (high watermark, ISR expansion), KIP-320 epoch checks, KIP-392 reads from
followers, the replication throttle, tiered-storage reads and the long poll in the purgatory -- is
`ReplicaManager.fetch_messages` (kavka.replication.replica_manager). This handler:

- answers an incremental fetch for a session with FETCH_SESSION_ID_NOT_FOUND (KIP-227: kavka
  answers every full fetch with session id 0, "no session created", so clients keep sending full
  fetches; an incremental one names a session kavka does not know, as Kafka answers for an
  evicted session);
- resolves topic ids (v13+) to names (an unknown id is answered UNKNOWN_TOPIC_ID);
- gives the ReplicaManager the request's parameters (`FetchParams`: the replica id and epoch of a
  follower, from v15 its ReplicaState; client metadata from v11, without which a consumer reads
  from leaders only);
- encodes the answer: v12+ by hand without copying record bytes (protocol.fetch_wire, the path
  every follower and current client takes), older versions through kio with the records spliced
  in (protocol.splice); Fetch v0-v3 predate record batches, so their records are down-converted
  to message format v0/v1, uncompressed (protocol.message_format); from v4 each partition
  carries the last stable offset and, for read_committed, its aborted transactions;
- counts the record bytes sent to consumers per topic (BytesOutPerSec; Kafka counts followers'
  fetches apart, as ReplicationBytesOutPerSec, which kavka does not).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import Checker, checker
from kavka.common import AclOperation, ErrorCode, IsolationLevel, ResourceType, TopicPartition
from kavka.protocol import api, fetch_wire
from kavka.protocol.message_format import down_convert
from kavka.protocol.messages import NO_THROTTLE, make, nested, uuid_to_str
from kavka.protocol.splice import SplicedResponse
from kavka.replication.replica_manager import (
    FetchInfo,
    FetchParams,
    FetchPartitionData,
    ReplicaManager,
)
from kavka.replication.replica_selector import ClientMetadata

if TYPE_CHECKING:
    from kavka.broker.client_quotas import ClientQuotas
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def handle_fetch(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    return fetch(node.replica_manager, node.image, ctx, req, node.client_quotas, check=checker(node, ctx))


def _denied(params: FetchParams, infos: list[FetchInfo], check: Checker) -> set[int]:
    """Indexes of the partitions this fetch may not read (Kafka's KafkaApis.handleFetchRequest): a
    follower needs ClusterAction on the cluster for all; a consumer Read on each topic."""
    if params.is_from_follower:
        if check(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return set()
        return set(range(len(infos)))
    allowed: dict[str, bool] = {}
    out = set()
    for i, (tp, _fp) in enumerate(infos):
        if tp is None:
            continue  # an unknown topic id: UNKNOWN_TOPIC_ID, as before authorization in Kafka
        ok = allowed.get(tp.topic)
        if ok is None:
            ok = allowed[tp.topic] = check(AclOperation.READ, ResourceType.TOPIC, tp.topic)
        if not ok:
            out.add(i)
    return out


# As Kafka's KafkaApis answers a partition it refuses before reading: an empty aborted list.
_UNAUTHORIZED = FetchPartitionData(ErrorCode.topic_authorization_failed, -1, -1, -1, None, (), -1, b"")


def fetch(rm: ReplicaManager, image: Any, ctx: RequestContext, req: Any, quotas: ClientQuotas | None = None, *,
          check: Checker | None = None) -> Any:
    """The handler on its narrow inputs: the replica manager, the metadata image (topic ids), the
    client quotas (a consumer's fetches count against its consumer_byte_rate; a follower's never)
    and, with an authorizer, the request's checker (broker.authorization)."""
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    if req.session_id != 0 or req.session_epoch > 0:  # before v7: 0 and -1 (protocol.versions)
        return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.fetch_session_id_not_found,
                    session_id=0, responses=())
    v = ctx.api_version
    by_id = v >= 13
    keys: list[tuple[Any, int]] = []  # per topic entry: (response key, number of partitions)
    infos: list[FetchInfo] = []
    for t in req.topics:
        if by_id:
            ti = image.topics_by_id.get(uuid_to_str(t.topic_id))
            name, key = (ti.name if ti else None), t.topic_id
        else:
            name, key = t.topic, t.topic
        keys.append((key, len(t.partitions)))
        infos.extend((TopicPartition(name, fp.partition) if name is not None else None, fp) for fp in t.partitions)
    replica_id = req.replica_state.replica_id if v >= 15 else req.replica_id
    params = FetchParams(
        replica_id=replica_id,
        replica_epoch=req.replica_state.replica_epoch if v >= 15 else -1,
        max_wait_ms=int(req.max_wait.total_seconds() * 1000),
        min_bytes=req.min_bytes,
        max_bytes=req.max_bytes,
        isolation_level=IsolationLevel.READ_COMMITTED if req.isolation_level == IsolationLevel.READ_COMMITTED else IsolationLevel.READ_UNCOMMITTED,
        client_metadata=ClientMetadata(req.rack_id or "", ctx.client_id or "", ctx.peer) if v >= 11 and replica_id < 0 else None,
    )
    count = None if params.is_from_follower else rm.bytes_out
    if quotas is not None and not params.is_from_follower:
        # Kafka caps a response at what the consumer quota admits in its window (getMaxValueInQuotaWindow).
        cap = quotas.max_fetch_bytes(ctx.principal, ctx.client_id)
        if cap is not None and cap < params.max_bytes:
            params = replace(params, max_bytes=cap)
    else:
        quotas = None
    denied = set() if check is None else _denied(params, infos, check)

    def respond(results: list[FetchPartitionData]) -> Any:
        if denied:  # the partitions not read answer TOPIC_AUTHORIZATION_FAILED, in request order
            it = iter(results)
            results = [_UNAUTHORIZED if i in denied else next(it) for i in range(len(infos))]
        if quotas is not None:
            nbytes = sum(len(r.records) for r in results if r.records)
            throttle_ms = quotas.record_fetch(ctx.principal, ctx.client_id, nbytes)
            if throttle_ms > 0:
                # Over quota: Kafka answers an empty response carrying the throttle time
                # (FetchContext.getThrottledResponse); the bytes were not sent, so not counted.
                if ctx.api_version == 0 and ctx.mute is not None:
                    ctx.mute(throttle_ms)  # Fetch v0 has no throttle time to carry: muted all the same
                return make(resp_cls, throttle_time=timedelta(milliseconds=throttle_ms), error_code=ErrorCode.none,
                            session_id=0, responses=())
        return _encode(ctx, resp_cls, keys, infos, results, count)

    readable = [info for i, info in enumerate(infos) if i not in denied] if denied else infos
    if not readable:
        return respond([])
    return rm.fetch_messages(params, readable, respond)


def _encode(
    ctx: RequestContext, resp_cls: type, keys: list[tuple[Any, int]], infos: list[FetchInfo],
    results: list[FetchPartitionData], bytes_out: dict[str, int] | None,
) -> SplicedResponse:
    v = ctx.api_version
    spliced = SplicedResponse(None, api.is_flexible(ctx.api_key, v))
    out_topics = []
    i = 0
    for key, n in keys:
        parts = []
        for (tp, fp), r in zip(infos[i:i + n], results[i:i + n], strict=True):
            records = r.records
            if records and v < 4:
                # Message format v0 (Fetch v0-v1) or v1 (v2-v3): protocol.message_format.
                records = down_convert(records, 0 if v < 2 else 1)
            if records and tp is not None:
                spliced.topic_bytes[tp.topic] = spliced.topic_bytes.get(tp.topic, 0) + len(records)
            parts.append((fp.partition, r.error, r.high_watermark, r.last_stable_offset, r.log_start_offset,
                          r.diverging_epoch, r.aborted_transactions, r.preferred_read_replica, records))
        out_topics.append((key, parts))
        i += n
    if bytes_out is not None:
        for name, nbytes in spliced.topic_bytes.items():
            bytes_out[name] = bytes_out.get(name, 0) + nbytes
    if v >= fetch_wire.FIRST_FLEXIBLE:
        # The hot path (every follower's fetch, clients' v12+): encoded by hand, record chunks
        # not copied (protocol.fetch_wire).
        spliced.buffers = fetch_wire.encode_response(v, out_topics)
        return spliced
    topic_cls = nested(resp_cls, "FetchableTopicResponse")
    part_cls = nested(resp_cls, "PartitionData")
    # Fetch v4+ carries aborted transactions (KIP-98); earlier versions have no such field.
    aborted_cls = nested(resp_cls, "AbortedTransaction") if v >= 4 else None

    def aborted_entities(aborted: Any) -> Any:
        if aborted is None or aborted_cls is None:
            return aborted
        return tuple(make(aborted_cls, producer_id=pid, first_offset=first) for pid, first in aborted)
    spliced.entity = make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            make(topic_cls, **{"topic_id" if v >= 13 else "topic": key}, partitions=tuple(
                make(
                    part_cls,
                    partition_index=index,
                    error_code=error,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=aborted_entities(aborted),
                    preferred_read_replica=preferred,
                    records=spliced.add(records) if records else records,
                )
                for index, error, hw, lso, start, _diverging, aborted, preferred, records in parts
            ))
            for key, parts in out_topics
        ),
    )
    return spliced
