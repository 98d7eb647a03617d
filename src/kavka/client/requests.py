"""Request builders for the admin APIs, one small function per API (sans-I/O).

Each takes the negotiated version and plain Python values and returns the kio
request entity *of that version*. Fields come and go between versions; the
builders pass every field any version has and `protocol.messages.make` keeps
only those `dataclasses.fields()` lists for the chosen class, the way Kafka's
generated ``write(version)`` skips absent fields. A field a version requires
but we did not pass fails loudly (TypeError) in tests, not on the wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from kavka.client.negotiation import request_class
from kavka.common import AlterConfigOpType, ConfigResourceType
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested

# DescribeConfigs / AlterConfigs resource types (Kafka's ConfigResource.Type).
RESOURCE_TYPES: Mapping[str, int] = {
    "topic": ConfigResourceType.TOPIC, "broker": ConfigResourceType.BROKER, "broker_logger": ConfigResourceType.BROKER_LOGGER,
}
# IncrementalAlterConfigs config_operation (KIP-339).
OP_SET, OP_DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
OP_APPEND, OP_SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
# ListOffsets special timestamps (KIP-734 max-timestamp, v7; KIP-405 earliest-local, v8).
OFFSET_SPECS: Mapping[str, int] = {
    "latest": -1,
    "earliest": -2,
    "max-timestamp": -3,
    "earliest-local": -4,  # KIP-405: the first offset still on local disk
    "latest-tiered": -5,  # KIP-1005: the highest offset copied to remote storage (-1: none)
}
OFFSET_SPEC_MIN_VERSION: Mapping[int, int] = {-3: 7, -4: 8, -5: 9}


def resource_type_code(resource_type: str | int) -> int:
    if isinstance(resource_type, int):
        return resource_type
    try:
        return RESOURCE_TYPES[resource_type.lower().rstrip("s")]
    except KeyError:
        raise ValueError(
            f"unknown resource type {resource_type!r}: expected topic or broker"
        ) from None


def offset_spec_timestamp(spec: str | int) -> int:
    """ "earliest" | "latest" | "max-timestamp" | "earliest-local" | "latest-tiered" | a timestamp in ms."""
    if isinstance(spec, bool):
        raise ValueError(f"invalid offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"a timestamp must be >= 0, got {spec}")
        return spec
    try:
        return OFFSET_SPECS[spec]
    except KeyError:
        raise ValueError(
            f"invalid offset spec {spec!r}: expected {', '.join(OFFSET_SPECS)} or a timestamp"
        ) from None


def _ms(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


def metadata(version: int, topics: Sequence[str] | None) -> Any:
    """Metadata for `topics`, or for every topic when None (v0 spells "all" as an empty list)."""
    cls = request_class(ApiKey.METADATA, version)
    if topics is None:
        wanted: tuple[Any, ...] | None = () if version == 0 else None
    else:
        topic_cls = nested(cls, "MetadataRequestTopic")
        wanted = tuple(make(topic_cls, name=t, topic_id=None) for t in topics)
    return make(
        cls,
        topics=wanted,
        allow_auto_topic_creation=False,  # describing must never create (v4+)
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def create_topics(
    version: int,
    topics: Iterable[
        tuple[str, int, int, Mapping[str, str | None], Mapping[int, Sequence[int]] | None]
    ],
    *,
    validate_only: bool,
    timeout_ms: int,
) -> Any:
    """`topics`: (name, num_partitions, replication_factor, configs, assignments|None);
    -1 partitions / replication factor means the broker default (v4+, KIP-464)."""
    cls = request_class(ApiKey.CREATE_TOPICS, version)
    topic_cls = nested(cls, "CreatableTopic")
    assign_cls = nested(cls, "CreatableReplicaAssignment")
    cfg_cls = nested(cls, "CreatableTopicConfig")
    entities = tuple(
        make(
            topic_cls,
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            assignments=tuple(
                make(assign_cls, partition_index=p, broker_ids=tuple(ids))
                for p, ids in sorted((assignments or {}).items())
            ),
            configs=tuple(make(cfg_cls, name=k, value=v) for k, v in configs.items()),
        )
        for name, num_partitions, replication_factor, configs, assignments in topics
    )
    return make(cls, topics=entities, timeout=_ms(timeout_ms), validate_only=validate_only)


def delete_topics(version: int, names: Sequence[str], *, timeout_ms: int) -> Any:
    cls = request_class(ApiKey.DELETE_TOPICS, version)
    if version >= 6:  # topics by name or id (KIP-516)
        state_cls = nested(cls, "DeleteTopicState")
        return make(
            cls,
            topics=tuple(make(state_cls, name=n, topic_id=None) for n in names),
            timeout=_ms(timeout_ms),
        )
    return make(cls, topic_names=tuple(names), timeout=_ms(timeout_ms))


def create_partitions(
    version: int, totals: Mapping[str, int], *, validate_only: bool, timeout_ms: int
) -> Any:
    cls = request_class(ApiKey.CREATE_PARTITIONS, version)
    topic_cls = nested(cls, "CreatePartitionsTopic")
    return make(
        cls,
        topics=tuple(make(topic_cls, name=n, count=c, assignments=None) for n, c in totals.items()),
        timeout=_ms(timeout_ms),
        validate_only=validate_only,
    )


def describe_configs(
    version: int,
    resources: Sequence[tuple[int, str]],
    *,
    keys: Sequence[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> Any:
    cls = request_class(ApiKey.DESCRIBE_CONFIGS, version)
    res_cls = nested(cls, "DescribeConfigsResource")
    return make(
        cls,
        resources=tuple(
            make(
                res_cls,
                resource_type=rtype,
                resource_name=name,
                configuration_keys=tuple(keys) if keys is not None else None,
            )
            for rtype, name in resources
        ),
        include_synonyms=include_synonyms,
        include_documentation=include_documentation,
    )


def incremental_alter_configs(
    version: int,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> Any:
    """`ops`: (config name, OP_SET|OP_DELETE|OP_APPEND|OP_SUBTRACT, value)."""
    cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
    res_cls = nested(cls, "AlterConfigsResource")
    cfg_cls = nested(cls, "AlterableConfig")
    resource = make(
        res_cls,
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(make(cfg_cls, name=k, config_operation=op, value=v) for k, op, v in ops),
    )
    return make(cls, resources=(resource,), validate_only=validate_only)


def list_offsets(
    version: int, wanted: Mapping[tuple[str, int], int], *, isolation_level: int = 0
) -> Any:
    """`wanted`: (topic, partition) -> timestamp (or a special value from OFFSET_SPECS)."""
    cls = request_class(ApiKey.LIST_OFFSETS, version)
    topic_cls = nested(cls, "ListOffsetsTopic")
    part_cls = nested(cls, "ListOffsetsPartition")
    return make(
        cls,
        replica_id=-1,  # a consumer, not a follower
        isolation_level=isolation_level,
        topics=tuple(
            make(
                topic_cls,
                name=topic,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=p,
                        current_leader_epoch=-1,
                        timestamp=ts,
                        max_num_offsets=1,
                    )
                    for p, ts in parts
                ),
            )
            for topic, parts in _by_topic(wanted).items()
        ),
    )


def delete_records(version: int, wanted: Mapping[tuple[str, int], int], *, timeout_ms: int) -> Any:
    """`wanted`: (topic, partition) -> offset before which records are deleted (-1: the high watermark)."""
    cls = request_class(ApiKey.DELETE_RECORDS, version)
    topic_cls = nested(cls, "DeleteRecordsTopic")
    part_cls = nested(cls, "DeleteRecordsPartition")
    return make(
        cls,
        topics=tuple(
            make(
                topic_cls,
                name=topic,
                partitions=tuple(make(part_cls, partition_index=p, offset=o) for p, o in parts),
            )
            for topic, parts in _by_topic(wanted).items()
        ),
        timeout=_ms(timeout_ms),
    )


def describe_cluster(version: int, *, controllers: bool = False) -> Any:
    return make(
        request_class(ApiKey.DESCRIBE_CLUSTER, version),
        include_cluster_authorized_operations=False,
        endpoint_type=2 if controllers else 1,  # KIP-919: the controllers, asked on their listener; else brokers
        include_fenced_brokers=True,  # v2 (KIP-1073): fenced brokers too, marked
    )


def _by_topic(wanted: Mapping[tuple[str, int], int]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), value in wanted.items():
        out.setdefault(topic, []).append((partition, value))
    for parts in out.values():
        parts.sort()
    return out


def describe_log_dirs(version: int, wanted: Mapping[str, Sequence[int]] | None) -> Any:
    cls = request_class(ApiKey.DESCRIBE_LOG_DIRS, version)
    topic_cls = nested(cls, "DescribableLogDirTopic")
    topics = None if wanted is None else tuple(
        make(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in sorted(wanted.items())
    )
    return make(cls, topics=topics)


def alter_replica_log_dirs(version: int, moves: Mapping[tuple[str, int], str]) -> Any:
    cls = request_class(ApiKey.ALTER_REPLICA_LOG_DIRS, version)
    dir_cls = nested(cls, "AlterReplicaLogDir")
    topic_cls = nested(cls, "AlterReplicaLogDirTopic")
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in moves.items():
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    return make(
        cls,
        dirs=tuple(
            make(
                dir_cls,
                path=path,
                topics=tuple(make(topic_cls, name=t, partitions=tuple(sorted(ps))) for t, ps in sorted(topics.items())),
            )
            for path, topics in sorted(by_dir.items())
        ),
    )


def elect_leaders(
    version: int, election_type: int, partitions: Sequence[tuple[str, int]] | None, *, timeout_ms: int
) -> Any:
    """ElectLeaders (API 43); `partitions` None asks for every partition (KIP-460)."""
    cls = request_class(ApiKey.ELECT_LEADERS, version)
    topic_cls = nested(cls, "TopicPartitions")
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = tuple(make(topic_cls, topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
    return make(cls, election_type=election_type, topic_partitions=topics, timeout=_ms(timeout_ms))


# ------------------------------------------------------------------ groups


def list_groups(version: int, states: Sequence[str] = ()) -> Any:
    return make(request_class(ApiKey.LIST_GROUPS, version), states_filter=tuple(states), types_filter=())


def describe_groups(version: int, groups: Sequence[str]) -> Any:
    return make(
        request_class(ApiKey.DESCRIBE_GROUPS, version),
        groups=tuple(groups),
        include_authorized_operations=False,
    )


def delete_groups(version: int, groups: Sequence[str]) -> Any:
    return make(request_class(ApiKey.DELETE_GROUPS, version), groups_names=tuple(groups))


def offset_fetch(version: int, group: str, partitions: Sequence[tuple[str, int]] | None) -> Any:
    """Committed offsets of `group` for `partitions` (None: every partition it has committed)."""
    cls = request_class(ApiKey.OFFSET_FETCH, version)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions or ():
        by_topic.setdefault(t, []).append(p)
    if version >= 8:
        group_cls = nested(cls, "OffsetFetchRequestGroup")
        topic_cls = nested(cls, "OffsetFetchRequestTopics")
        topics = None if partitions is None else tuple(
            make(topic_cls, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()
        )
        return make(cls, groups=(make(group_cls, group_id=group, member_id=None, member_epoch=-1, topics=topics),),
                    require_stable=False)
    topic_cls = nested(cls, "OffsetFetchRequestTopic")
    topics = None if partitions is None else tuple(
        make(topic_cls, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()
    )
    return make(cls, group_id=group, topics=topics, require_stable=False)


def offset_commit(
    version: int,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> Any:
    """Commit `offsets` ((topic, partition) -> offset); generation -1 and no member: a simple (admin) commit."""
    cls = request_class(ApiKey.OFFSET_COMMIT, version)
    topic_cls = nested(cls, "OffsetCommitRequestTopic")
    part_cls = nested(cls, "OffsetCommitRequestPartition")
    return make(
        cls,
        group_id=group,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        retention_time=timedelta(milliseconds=-1),
        topics=tuple(
            make(
                topic_cls,
                name=topic,
                partitions=tuple(
                    make(part_cls, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                         committed_metadata="", commit_timestamp=-1)
                    for p, o in parts
                ),
            )
            for topic, parts in _by_topic(offsets).items()
        ),
    )


GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1  # FindCoordinator key_type (v1+)


def find_coordinator(version: int, group: str, key_type: int = GROUP_KEY_TYPE) -> Any:
    return make(
        request_class(ApiKey.FIND_COORDINATOR, version),
        key=group,
        key_type=key_type,
        coordinator_keys=(group,),
    )


def describe_producers(version: int, partitions: Iterable[tuple[str, int]]) -> Any:
    cls = request_class(ApiKey.DESCRIBE_PRODUCERS, version)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return make(cls, topics=tuple(make(nested(cls, "TopicRequest"), name=t, partition_indexes=tuple(ps))
                                  for t, ps in by_topic.items()))


def describe_transactions(version: int, transactional_ids: Sequence[str]) -> Any:
    return make(request_class(ApiKey.DESCRIBE_TRANSACTIONS, version), transactional_ids=tuple(transactional_ids))


def list_transactions(
    version: int, *, states: Sequence[str] = (), producer_ids: Sequence[int] = (), duration_ms: int = -1
) -> Any:
    return make(request_class(ApiKey.LIST_TRANSACTIONS, version), state_filters=tuple(states),
                producer_id_filters=tuple(producer_ids), duration_filter=duration_ms,
                transactional_id_pattern=None)


def write_txn_markers(
    version: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
    partitions: Iterable[tuple[str, int]],
) -> Any:
    cls = request_class(ApiKey.WRITE_TXN_MARKERS, version)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    topics = tuple(make(nested(cls, "WritableTxnMarkerTopic"), name=t, partition_indexes=tuple(ps))
                   for t, ps in by_topic.items())
    marker = make(nested(cls, "WritableTxnMarker"), producer_id=producer_id, producer_epoch=producer_epoch,
                  transaction_result=commit, topics=topics, coordinator_epoch=coordinator_epoch,
                  transaction_version=0)
    return make(cls, markers=(marker,))
