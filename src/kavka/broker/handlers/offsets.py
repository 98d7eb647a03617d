"""ListOffsets (API 2), OffsetForLeaderEpoch (API 23), DeleteRecords (API 21).

ListOffsets special timestamps (KIP-734, KIP-405): -2 earliest (log start
offset), -1 latest (high watermark; the last stable offset under
read_committed), -3 the record with the largest timestamp, -4 the earliest
offset on local disk (the local log start offset, KIP-405), -5 the latest
tiered offset (the highest offset copied to remote storage; -1 when none, or
for a topic that is not tiered). A positive timestamp finds the first offset
whose timestamp is at least that, among committed records; on a tiered topic
remote storage is searched first, in the remote reader's pool while the event
loop awaits it (Kafka's asyncOffsetRead).

Authorization (Kafka's KafkaApis): ListOffsets needs Describe on each topic, DeleteRecords Delete;
OffsetForLeaderEpoch needs ClusterAction on the Cluster (a replica; not logged when missing) or
else Describe on each topic. A refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.authorization import checker
from kavka.common import AclOperation, IsolationLevel, ResourceType
from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested
from kavka.replication.errors import error_for
from kavka.replication.partition import PartitionError

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


def _leader(node: BrokerNode, topic: str, partition: int, current_leader_epoch: int) -> Any:
    p = node.replica_manager.get_partition(topic, partition)
    if p is None:
        raise PartitionError(ErrorCode.unknown_topic_or_partition)
    p.check_online()
    p.check_leader_epoch(current_leader_epoch)
    if not p.is_leader:
        raise PartitionError(ErrorCode.not_leader_or_follower)
    return p


def _topic_check(node: BrokerNode, ctx: RequestContext, op: AclOperation) -> Any:
    """topic -> None, raising TOPIC_AUTHORIZATION_FAILED when the principal may not `op` it."""
    check = checker(node, ctx)

    def require(topic: str) -> None:
        if check is not None and not check(op, ResourceType.TOPIC, topic):
            raise PartitionError(ErrorCode.topic_authorization_failed)

    return require


def _epoch(e: int | None) -> int:
    return -1 if e is None else e


def _epoch_at(p: Any, offset: int) -> int:
    return _epoch(p.log.leader_epoch_cache.epoch_for_offset(offset))


def handle_list_offsets(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    rlm = node.remote_log_manager
    wanted = []
    if rlm is not None:
        for t in req.topics:
            for rp in t.partitions:
                p = node.replica_manager.get_partition(t.name, rp.partition_index)
                if rp.timestamp >= 0 and p is not None and p.is_leader and p.log.config.remote_storage_enable:
                    wanted.append((t.name, rp.partition_index, p, rp.timestamp))
    if not wanted:
        return _list_offsets(node, ctx, req, {})

    async def with_remote() -> Any:
        found: dict[tuple[str, int], tuple[int, int, int] | None] = {}
        for name, index, p, ts in wanted:
            found[(name, index)] = await rlm.record_for_timestamp(p, ts)
        return _list_offsets(node, ctx, req, found)

    return with_remote()


def _list_offsets(node: BrokerNode, ctx: RequestContext, req: Any, remote: dict[tuple[str, int], tuple[int, int, int] | None]) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "ListOffsetsTopicResponse")
    part_cls = nested(resp_cls, "ListOffsetsPartitionResponse")
    read_committed = req.isolation_level == IsolationLevel.READ_COMMITTED
    require = _topic_check(node, ctx, AclOperation.DESCRIBE)
    # Kafka checks the epoch start offset only for a client's request (replica id -1) from v1 on.
    from_client = ctx.api_version >= 1 and req.replica_id == -1
    not_available = ErrorCode.offset_not_available if ctx.api_version >= 5 else ErrorCode.leader_not_available
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            error, ts, offset, epoch = ErrorCode.none, -1, -1, -1
            try:
                require(t.name)
                p = _leader(node, t.name, rp.partition_index, rp.current_leader_epoch)
                # Kafka's Partition.fetchOffsetForTimestamp: a new leader whose high watermark has
                # not yet reached its epoch's start offset (its followers have not fetched from it
                # yet) would answer an end offset below records already acknowledged; a client
                # gets the retriable OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before) for
                # LATEST, and for a timestamp whose record is not fetchable yet.
                start = p.leader_epoch_start_offset
                lagging = from_client and start is not None and p.high_watermark < start
                # Kafka's lastFetchableOffset: nothing at or past it is visible to this consumer.
                fetchable = p.last_stable_offset if read_committed else p.high_watermark
                target = rp.timestamp
                if target == EARLIEST:
                    offset = p.log_start_offset
                    epoch = _epoch_at(p, offset)
                elif target == EARLIEST_LOCAL:
                    offset = p.log.local_log_start_offset
                    epoch = _epoch_at(p, offset)
                elif target == LATEST:
                    if lagging:
                        raise PartitionError(not_available)
                    offset = fetchable
                    epoch = p.leader_epoch
                elif target == MAX_TIMESTAMP:
                    found = p.log.max_timestamp_offset()
                    if lagging and found is not None and found.offset >= fetchable:
                        raise PartitionError(not_available)
                    if found is not None and found.offset < fetchable:
                        offset, ts, epoch = found.offset, found.timestamp, _epoch(found.leader_epoch)
                elif target == LATEST_TIERED:
                    if p.log.config.remote_storage_enable:
                        offset = p.log.highest_offset_in_remote
                        epoch = _epoch_at(p, offset) if offset >= 0 else -1
                elif target >= 0 and remote.get((t.name, rp.partition_index)) is not None:
                    ts, offset, epoch = remote[(t.name, rp.partition_index)]  # type: ignore[misc]
                    if offset >= fetchable:
                        ts, offset, epoch = -1, -1, -1
                elif target >= 0:
                    found = p.log.fetch_offset_by_timestamp(target)
                    if lagging and found is not None and found.offset >= fetchable:
                        raise PartitionError(not_available)
                    if found is not None and found.offset < fetchable:
                        offset, ts, epoch = found.offset, found.timestamp, _epoch(found.leader_epoch)
                else:
                    # A special timestamp kavka's versions do not define (-6, KIP-1023's earliest
                    # pending upload, is ListOffsets v11's): Kafka 4.4 answers it, and -7, with
                    # UNSUPPORTED_VERSION at the versions kavka serves (the oracle's
                    # list_offsets_unknown_special_timestamp).
                    error = ErrorCode.unsupported_version
            except Exception as e:
                error, _m = error_for(e)
            parts.append(
                make(
                    part_cls,
                    partition_index=rp.partition_index,
                    error_code=error,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                    # v0: the offset found, as a list of at most max_num_offsets (the
                    # segment base offsets Kafka adds after it are not listed).
                    old_style_offsets=(offset,) if offset >= 0 and rp.max_num_offsets > 0 else (),
                )
            )
        topics.append(make(topic_cls, name=t.name, partitions=tuple(parts)))
    return make(resp_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_offset_for_leader_epoch(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "OffsetForLeaderTopicResult")
    part_cls = nested(resp_cls, "EpochEndOffset")
    replica = checker(node, ctx, log_denials=False)
    if replica is None or replica(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        def require(_topic: str) -> None:
            return None
    else:
        require = _topic_check(node, ctx, AclOperation.DESCRIBE)
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            error, epoch, end = ErrorCode.none, -1, -1
            try:
                require(t.topic)
                p = _leader(node, t.topic, rp.partition, rp.current_leader_epoch)
                epoch, end = p.log.leader_epoch_cache.end_offset_for(rp.leader_epoch, p.log_end_offset)
            except Exception as e:
                error, _m = error_for(e)
            parts.append(make(part_cls, error_code=error, partition=rp.partition, leader_epoch=epoch, end_offset=end))
        topics.append(make(topic_cls, topic=t.topic, partitions=tuple(parts)))
    return make(resp_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_delete_records(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "DeleteRecordsTopicResult")
    part_cls = nested(resp_cls, "DeleteRecordsPartitionResult")
    require = _topic_check(node, ctx, AclOperation.DELETE)
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            error, low = ErrorCode.none, -1
            try:
                require(t.name)
                p = _leader(node, t.name, rp.partition_index, -1)
                if not p.log.config.delete_enabled:
                    # Kafka's Partition.deleteRecordsOnLeader: a compact-only topic keeps its records.
                    raise PartitionError(
                        ErrorCode.policy_violation,
                        f"Records of partition {t.name}-{rp.partition_index} can not be deleted due to the configured policy",
                    )
                target = p.high_watermark if rp.offset == -1 else rp.offset
                if target < 0 or target > p.high_watermark:
                    raise PartitionError(
                        ErrorCode.offset_out_of_range,
                        f"cannot delete records of {t.name}-{rp.partition_index} before {target}: high watermark is {p.high_watermark}",
                    )
                p.log.maybe_increment_log_start_offset(target, "DeleteRecords")
                low = p.log_start_offset
            except Exception as e:
                error, _m = error_for(e)
            parts.append(make(part_cls, partition_index=rp.partition_index, low_watermark=low, error_code=error))
        topics.append(make(topic_cls, name=t.name, partitions=tuple(parts)))
    return make(resp_cls, throttle_time=NO_THROTTLE, topics=tuple(topics))
