"""What each API kavka serves needs from the authorizer: Kafka's "Operations and Resources on
Protocols" table as data, beside the API table (broker.apis).

`NEEDS` maps every key of `KafkaApis._table` to an `ApiAuthorization` (a unit test asserts none is
missing), in one of three kinds:

- `NONE`: not authorized at all (ApiVersions, SaslHandshake, SaslAuthenticate: they come before
  or without a principal, as in Kafka).
- `CLUSTER`: a single action on the one Cluster resource, checked by `KafkaApis` BEFORE the
  handler runs; a refusal is answered with `denied_response` (the API's error response for the
  whole request, CLUSTER_AUTHORIZATION_FAILED on the top-level error code and on every item the
  response lists per request item, as Kafka's `getErrorResponse`), and the handler never runs.
- `RESOURCE`: per item (topic, group, transactional id, config resource) with the declared
  operation, checked inside the handler (Kafka answers those per item); `alternative` is a
  Cluster-level operation that grants the same thing for every item (CreateTopics: Create on the
  Cluster; InitProducerId: IdempotentWrite on the Cluster), `error` the code an item refused gets.

Verified against Kafka 3.9's KafkaApis.scala / AuthHelper.scala and AuthorizerIntegrationTest's
`requestKeyToError`. The authorization matrix test (tests/integration/test_authorization_matrix.py)
is generated from this table. Pure data and pure builders; no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from kavka.common import AclOperation, ErrorCode, ResourceType
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import nested


class Checked(enum.Enum):
    NONE = "none"
    CLUSTER = "cluster"  # before the handler, on the whole request
    RESOURCE = "resource"  # inside the handler, per item


@dataclass(frozen=True, slots=True)
class ApiAuthorization:
    checked: Checked
    operation: AclOperation | None = None
    resource_type: ResourceType | None = None
    error: ErrorCode = ErrorCode.none
    # A Cluster-level operation that, when allowed, stands for the per-item one on every item.
    alternative: AclOperation | None = None
    # Further per-item needs once the first is met (OffsetCommit: Read on each topic after Read on
    # the Group, refused with TOPIC_AUTHORIZATION_FAILED; AddOffsetsToTxn and TxnOffsetCommit:
    # Read on the Group after Write on the TransactionalId, GROUP_AUTHORIZATION_FAILED).
    also: tuple[tuple[AclOperation, ResourceType], ...] = ()


_NONE = ApiAuthorization(Checked.NONE)


def _cluster(op: AclOperation) -> ApiAuthorization:
    return ApiAuthorization(Checked.CLUSTER, op, ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed)


def _topic(op: AclOperation, alternative: AclOperation | None = None) -> ApiAuthorization:
    return ApiAuthorization(Checked.RESOURCE, op, ResourceType.TOPIC, ErrorCode.topic_authorization_failed, alternative)


def _group(op: AclOperation, topic_op: AclOperation | None = None) -> ApiAuthorization:
    also = () if topic_op is None else ((topic_op, ResourceType.TOPIC),)
    return ApiAuthorization(Checked.RESOURCE, op, ResourceType.GROUP, ErrorCode.group_authorization_failed, also=also)


R, W, C, D, A, DESC = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                       AclOperation.ALTER, AclOperation.DESCRIBE)

NEEDS: dict[int, ApiAuthorization] = {
    ApiKey.API_VERSIONS: _NONE,
    ApiKey.SASL_HANDSHAKE: _NONE,
    ApiKey.SASL_AUTHENTICATE: _NONE,
    # Topic data path. Fetch from a follower (replica_id >= 0) needs ClusterAction on the Cluster
    # instead, as does OffsetForLeaderEpoch from a replica; a transactional Produce first needs
    # Write on its TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    ApiKey.PRODUCE: _topic(W),
    ApiKey.FETCH: _topic(R),
    ApiKey.LIST_OFFSETS: _topic(DESC),
    ApiKey.METADATA: _topic(DESC),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _topic(DESC),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _topic(DESC),
    ApiKey.DELETE_RECORDS: _topic(D),
    # Groups. OffsetCommit then needs Read on each topic, OffsetFetch Describe, OffsetDelete Read.
    ApiKey.FIND_COORDINATOR: _group(DESC),  # key_type 1: Describe on the TransactionalId
    ApiKey.JOIN_GROUP: _group(R),
    ApiKey.SYNC_GROUP: _group(R),
    ApiKey.HEARTBEAT: _group(R),
    ApiKey.LEAVE_GROUP: _group(R),
    ApiKey.OFFSET_COMMIT: _group(R, R),
    ApiKey.OFFSET_FETCH: _group(DESC, DESC),
    ApiKey.DESCRIBE_GROUPS: _group(DESC),
    ApiKey.DELETE_GROUPS: _group(D),
    ApiKey.OFFSET_DELETE: _group(D, R),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _group(R),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _group(DESC),
    # ListGroups never fails for want of an ACL: Describe on the Cluster lists every group, else
    # only the groups the principal may Describe (Kafka's ListGroups filtering).
    ApiKey.LIST_GROUPS: ApiAuthorization(Checked.RESOURCE, DESC, ResourceType.GROUP, ErrorCode.none, DESC),
    # Idempotent producers: IdempotentWrite on the Cluster, or Write on any topic (Kafka 3.x);
    # transactional ones: Write on the TransactionalId.
    ApiKey.INIT_PRODUCER_ID: ApiAuthorization(Checked.RESOURCE, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                              ErrorCode.cluster_authorization_failed),
    # Transactions: Write on the TransactionalId (AddPartitionsToTxn then Write on each topic).
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiAuthorization(Checked.RESOURCE, W, ResourceType.TRANSACTIONAL_ID,
                                                   ErrorCode.transactional_id_authorization_failed,
                                                   also=((W, ResourceType.TOPIC),)),
    # AddOffsetsToTxn and TxnOffsetCommit then Read on the Group (TxnOffsetCommit: and on each topic).
    ApiKey.ADD_OFFSETS_TO_TXN: ApiAuthorization(Checked.RESOURCE, W, ResourceType.TRANSACTIONAL_ID,
                                                ErrorCode.transactional_id_authorization_failed,
                                                also=((R, ResourceType.GROUP),)),
    ApiKey.TXN_OFFSET_COMMIT: ApiAuthorization(Checked.RESOURCE, W, ResourceType.TRANSACTIONAL_ID,
                                               ErrorCode.transactional_id_authorization_failed,
                                               also=((R, ResourceType.GROUP), (R, ResourceType.TOPIC))),
    ApiKey.END_TXN: ApiAuthorization(Checked.RESOURCE, W, ResourceType.TRANSACTIONAL_ID,
                                     ErrorCode.transactional_id_authorization_failed),
    # Inter-broker: the transaction coordinator asks a partition leader to write markers.
    ApiKey.WRITE_TXN_MARKERS: _cluster(AclOperation.CLUSTER_ACTION),
    # KIP-664. DescribeProducers: Read on each topic. ListTransactions is never refused: it leaves
    # out the ids the principal may not Describe (Kafka's handleListTransactionsRequest).
    ApiKey.DESCRIBE_PRODUCERS: _topic(R),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiAuthorization(Checked.RESOURCE, DESC, ResourceType.TRANSACTIONAL_ID,
                                                   ErrorCode.transactional_id_authorization_failed),
    ApiKey.LIST_TRANSACTIONS: ApiAuthorization(Checked.RESOURCE, DESC, ResourceType.TRANSACTIONAL_ID, ErrorCode.none),
    ApiKey.CREATE_TOPICS: _topic(C, alternative=C),
    ApiKey.DELETE_TOPICS: _topic(D),
    ApiKey.CREATE_PARTITIONS: _topic(A),
    # Config resources: Topic for a topic, Cluster for a broker or broker logger.
    ApiKey.DESCRIBE_CONFIGS: _topic(AclOperation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CONFIGS: _topic(AclOperation.ALTER_CONFIGS),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _topic(AclOperation.ALTER_CONFIGS),
    # Cluster-wide administration.
    ApiKey.DESCRIBE_ACLS: _cluster(DESC),
    ApiKey.CREATE_ACLS: _cluster(A),
    ApiKey.DELETE_ACLS: _cluster(A),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(AclOperation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster(AclOperation.ALTER_CONFIGS),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(DESC),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(A),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _cluster(A),
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(DESC),
    ApiKey.DESCRIBE_QUORUM: _cluster(DESC),
    # KIP-853: Alter on the Cluster (Kafka's ControllerApis; UpdateRaftVoter is ClusterAction there,
    # sent by a controller itself).
    ApiKey.ADD_RAFT_VOTER: _cluster(A),
    ApiKey.REMOVE_RAFT_VOTER: _cluster(A),
    ApiKey.UPDATE_RAFT_VOTER: _cluster(AclOperation.CLUSTER_ACTION),
    ApiKey.ELECT_LEADERS: _cluster(A),
    ApiKey.UPDATE_FEATURES: _cluster(A),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(A),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(DESC),
    # DescribeCluster never fails for want of an ACL (Kafka's computeDescribeClusterResponse): only
    # its KIP-430 cluster_authorized_operations is 0 without Describe on the Cluster.
    ApiKey.DESCRIBE_CLUSTER: ApiAuthorization(Checked.RESOURCE, DESC, ResourceType.CLUSTER, ErrorCode.none),
    ApiKey.CREATE_REPLICA_PLACEMENT: _cluster(A),
}


# -- the error response for a whole request ------------------------------------------------------

def _zero(f: Any) -> Any:
    kind = classify_field(f)
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return ()
    if is_optional(f):
        return None
    if isinstance(kind, EntityField):
        return _empty(kind.type_)
    t = kind.type_
    if isinstance(t, type) and issubclass(t, timedelta):
        return timedelta(0)
    if t is bool:
        return False
    if isinstance(t, type) and issubclass(t, str):
        return ""
    if isinstance(t, type) and issubclass(t, bytes):
        return b""
    if isinstance(t, type) and issubclass(t, float):
        return 0.0
    return 0


def _empty(cls: type, **given: Any) -> Any:
    """An instance of a kio entity with `given` fields (those it has) and every other field empty."""
    return cls(**{f.name: given[f.name] if f.name in given else _zero(f) for f in fields(cls)})


def _item(resp_cls: type, name: str, error: ErrorCode, **given: Any) -> Any:
    return _empty(nested(resp_cls, name), error_code=error, error_message=None, **given)


# Responses that answer per request item (no top-level error code, or not only one): the items.
_PER_ITEM: dict[int, Callable[[type, Any, ErrorCode], dict[str, Any]]] = {
    ApiKey.CREATE_ACLS: lambda cls, req, e: {
        "results": tuple(_item(cls, "AclCreationResult", e) for _ in req.creations)},
    ApiKey.DELETE_ACLS: lambda cls, req, e: {
        "filter_results": tuple(_item(cls, "DeleteAclsFilterResult", e) for _ in req.filters)},
    ApiKey.ALTER_CLIENT_QUOTAS: lambda cls, req, e: {
        "entries": tuple(_item(cls, "EntryData", e, entity=tuple(
            _empty(nested(cls, "EntityData"), entity_type=d.entity_type, entity_name=d.entity_name)
            for d in entry.entity)) for entry in req.entries)},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda cls, req, e: {
        "results": tuple(_item(cls, "AlterUserScramCredentialsResult", e, user=u)
                         for u in dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))},
    ApiKey.ALTER_REPLICA_LOG_DIRS: lambda cls, req, e: {
        "results": tuple(_empty(nested(cls, "AlterReplicaLogDirTopicResult"), topic_name=t.name, partitions=tuple(
            _empty(nested(cls, "AlterReplicaLogDirPartitionResult"), partition_index=p, error_code=e)
            for p in t.partitions)) for d in req.dirs for t in d.topics)},
    ApiKey.WRITE_TXN_MARKERS: lambda cls, req, e: {
        "markers": tuple(_empty(nested(cls, "WritableTxnMarkerResult"), producer_id=m.producer_id, topics=tuple(
            _empty(nested(cls, "WritableTxnMarkerTopicResult"), name=t.name, partitions=tuple(
                _empty(nested(cls, "WritableTxnMarkerPartitionResult"), partition_index=p, error_code=e)
                for p in t.partition_indexes)) for t in m.topics)) for m in req.markers)},
    ApiKey.ELECT_LEADERS: lambda cls, req, e: {
        "replica_election_results": tuple(_empty(nested(cls, "ReplicaElectionResult"), topic=t.topic, partition_result=tuple(
            _empty(nested(cls, "PartitionResult"), partition_id=p, error_code=e, error_message=None)
            for p in t.partitions)) for t in (req.topic_partitions or ()))},
}


def denied_response(key: int, resp_cls: type, request: Any, error: ErrorCode = ErrorCode.cluster_authorization_failed) -> Any:
    """The API's answer to a whole request refused with `error`: the top-level error code when the
    response has one, and `error` on every item the response lists per request item."""
    given: dict[str, Any] = {"error_code": error, "error_message": None}
    if key in _PER_ITEM:
        given.update(_PER_ITEM[key](resp_cls, request, error))
    return _empty(resp_cls, **given)
