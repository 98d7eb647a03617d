"""DescribeLogDirs (API 35) and AlterReplicaLogDirs (API 34): JBOD (KIP-112, KIP-113).

DescribeLogDirs lists every log dir of this broker -- offline ones with
KAFKA_STORAGE_ERROR and no replicas -- with total and usable bytes (v4+) and,
per replica, its size, offset lag (for a future replica: how far behind the
current one it is) and the is-future flag. AlterReplicaLogDirs asks for
replicas to be moved to a dir: NONE once the move is under way (or the
replica is there already), LOG_DIR_NOT_FOUND for a path that is not a log
dir here, KAFKA_STORAGE_ERROR for an offline dir or replica, and
REPLICA_NOT_AVAILABLE for a replica this broker does not host yet -- the
wish is remembered and honoured when the replica is created, as in Kafka.

With tiered storage on, DescribeLogDirs adds one entry named
``remote:<remote.log.storage.manager.class.name>`` holding each tiered
partition's bytes in remote storage; the real dirs' sizes are local bytes only
(as in Kafka). It is not a log dir: AlterReplicaLogDirs to it is
LOG_DIR_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, make, nested
from kavka.replication.partition import TopicPartition

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def _replica_lag(node: BrokerNode, topic: str, partition: int) -> int:
    """Kafka's offsetLag of a current replica: how far its log end is behind the high watermark
    it knows (a follower that is catching up), never negative."""
    p = node.replica_manager.get_partition(topic, partition)
    return 0 if p is None else max(p.high_watermark - p.log_end_offset, 0)


def handle_describe_log_dirs(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    result_cls = nested(resp_cls, "DescribeLogDirsResult")
    topic_cls = nested(resp_cls, "DescribeLogDirsTopic")
    part_cls = nested(resp_cls, "DescribeLogDirsPartition")
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    results = []
    asked = None if wanted is None else [TopicPartition(t, p) for t, ps in wanted.items() for p in ps]
    for d in node.log_manager.describe_dirs(asked):
        by_topic: dict[str, list[Any]] = {}
        for r in d.replicas:
            if wanted is not None and r.partition not in wanted.get(r.topic, ()):
                continue
            by_topic.setdefault(r.topic, []).append(
                make(
                    part_cls,
                    partition_index=r.partition,
                    partition_size=r.size,
                    offset_lag=r.offset_lag if r.is_future else _replica_lag(node, r.topic, r.partition),
                    is_future_key=r.is_future,
                )
            )
        results.append(
            make(
                result_cls,
                error_code=ErrorCode.kafka_storage_error if d.error else ErrorCode.none,
                log_dir=str(d.path),
                topics=tuple(
                    make(topic_cls, name=name, partitions=tuple(parts))
                    for name, parts in sorted(by_topic.items())
                ),
                total_bytes=d.total_bytes,
                usable_bytes=d.usable_bytes,
            )
        )
    remote = _remote_tier(node, wanted, result_cls, topic_cls, part_cls)
    if remote is not None:
        results.append(remote)
    return make(resp_cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=tuple(results))


REMOTE_LOG_DIR_PREFIX = "remote:"


def _remote_tier(node: BrokerNode, wanted: dict[str, set[int]] | None, result_cls: Any, topic_cls: Any, part_cls: Any) -> Any:
    """Tiered storage (KIP-405): one more entry, ``remote:<remote.log.storage.manager.class.name>``,
    listing the bytes each tiered partition this broker leads has in remote storage (Kafka's
    DescribeLogDirs has no field for them). Its total and usable bytes are -1 (unknown)."""
    rlm = node.remote_log_manager
    if rlm is None:
        return None
    by_topic: dict[str, list[Any]] = {}
    for tp, part in sorted(node.replica_manager.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        if not part.log.config.remote_storage_enable or not part.is_leader:
            continue
        if wanted is not None and tp.partition not in wanted.get(tp.topic, ()):
            continue
        by_topic.setdefault(tp.topic, []).append(
            make(part_cls, partition_index=tp.partition, partition_size=rlm.remote_size(part), offset_lag=0, is_future_key=False)
        )
    return make(
        result_cls,
        error_code=ErrorCode.none,
        log_dir=REMOTE_LOG_DIR_PREFIX + node.config["remote.log.storage.manager.class.name"],
        topics=tuple(make(topic_cls, name=name, partitions=tuple(parts)) for name, parts in sorted(by_topic.items())),
        total_bytes=-1,
        usable_bytes=-1,
    )


def handle_alter_replica_log_dirs(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
    topic_cls = nested(resp_cls, "AlterReplicaLogDirTopicResult")
    part_cls = nested(resp_cls, "AlterReplicaLogDirPartitionResult")
    rm = node.replica_manager
    by_topic: dict[str, list[Any]] = {}
    for d in req.dirs:
        for t in d.topics:
            for partition in t.partitions:
                tp = TopicPartition(t.name, partition)
                error, start = rm.alter_replica_log_dir(tp, d.path, now_ms=node.now_ms())
                if start:
                    node.log_dir_movers.add(tp)
                by_topic.setdefault(t.name, []).append(
                    make(part_cls, partition_index=partition, error_code=error)
                )
    return make(
        resp_cls,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(topic_cls, topic_name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
