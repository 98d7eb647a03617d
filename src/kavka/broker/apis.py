"""KafkaApis: the API-key -> handler table, and the ApiVersions answer derived from it.

One module per API family under `handlers/`; each handler takes
(node, ctx, request) and returns the response entity (or an awaitable of it,
or None for Produce acks=0). The table here is the single place that says
which APIs kavka serves; ApiVersions advertises exactly the versions in
`protocol.api.SUPPORTED` for the keys that have a handler. What each API needs from the
authorizer is declared beside it (broker.api_authorization.NEEDS, one entry per key here); an API
whose need is a single action on the Cluster is checked here, before its handler runs.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.authorizer import CLUSTER_NAME
from kavka.broker import authorization
from kavka.broker.api_authorization import NEEDS, ApiAuthorization, Checked, denied_response
from kavka.broker.handlers import (
    acls,
    configs,
    coordinator,
    elect_leaders,
    features,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    placement,
    produce,
    producer_ids,
    quorum,
    quotas,
    reassignments,
    sasl,
    scram,
    topics,
    transaction_ops,
    transactions,
)
from kavka.common import ResourceType
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import NO_THROTTLE, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import Handler, RequestContext


class KafkaApis:
    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self._table = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: metadata.handle_metadata,
            ApiKey.DESCRIBE_CLUSTER: metadata.handle_describe_cluster,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: metadata.handle_describe_topic_partitions,
            ApiKey.UPDATE_FEATURES: features.handle_update_features,
            ApiKey.SASL_HANDSHAKE: sasl.handle_sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: sasl.handle_sasl_authenticate,
            ApiKey.PRODUCE: produce.handle_produce,
            ApiKey.FETCH: fetch.handle_fetch,
            ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: offsets.handle_offset_for_leader_epoch,
            ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
            ApiKey.FIND_COORDINATOR: coordinator.handle_find_coordinator,
            ApiKey.JOIN_GROUP: groups.handle_join_group,
            ApiKey.SYNC_GROUP: groups.handle_sync_group,
            ApiKey.HEARTBEAT: groups.handle_heartbeat,
            ApiKey.LEAVE_GROUP: groups.handle_leave_group,
            ApiKey.OFFSET_COMMIT: groups.handle_offset_commit,
            ApiKey.OFFSET_FETCH: groups.handle_offset_fetch,
            ApiKey.LIST_GROUPS: groups.handle_list_groups,
            ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
            ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
            ApiKey.OFFSET_DELETE: groups.handle_offset_delete,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: groups.handle_consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: groups.handle_consumer_group_describe,
            ApiKey.INIT_PRODUCER_ID: producer_ids.handle_init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
            ApiKey.TXN_OFFSET_COMMIT: groups.handle_txn_offset_commit,
            ApiKey.END_TXN: transactions.handle_end_txn,
            ApiKey.WRITE_TXN_MARKERS: transactions.handle_write_txn_markers,
            ApiKey.DESCRIBE_PRODUCERS: transaction_ops.handle_describe_producers,
            ApiKey.DESCRIBE_TRANSACTIONS: transaction_ops.handle_describe_transactions,
            ApiKey.LIST_TRANSACTIONS: transaction_ops.handle_list_transactions,
            ApiKey.CREATE_TOPICS: topics.handle_create_topics,
            ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
            ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
            ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram.handle_describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram.handle_alter_user_scram_credentials,
            ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
            ApiKey.CREATE_ACLS: acls.handle_create_acls,
            ApiKey.DELETE_ACLS: acls.handle_delete_acls,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas.handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: quotas.handle_alter_client_quotas,
            ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter_replica_log_dirs,
            ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
            ApiKey.DESCRIBE_QUORUM: quorum.handle_describe_quorum,
            ApiKey.ADD_RAFT_VOTER: quorum.handle_raft_voter_change,
            ApiKey.REMOVE_RAFT_VOTER: quorum.handle_raft_voter_change,
            ApiKey.UPDATE_RAFT_VOTER: quorum.handle_raft_voter_change,
            ApiKey.ELECT_LEADERS: elect_leaders.handle_elect_leaders,
            ApiKey.CREATE_REPLICA_PLACEMENT: placement.handle_create_replica_placement,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list_partition_reassignments,
        }

    def handlers(self) -> dict[int, Handler]:
        out: dict[int, Handler] = {}
        for key, fn in self._table.items():
            handler: Handler = fn if fn == self.handle_api_versions else partial(fn, self.node)
            need = NEEDS[key]
            if need.checked is Checked.CLUSTER:
                handler = partial(self._cluster_checked, need, handler)
            out[int(key)] = handler
        return out

    def _cluster_checked(self, need: ApiAuthorization, handler: Handler, ctx: RequestContext, request: Any) -> Any:
        """An API whose need is one action on the Cluster (api_authorization.Checked.CLUSTER):
        refused before its handler runs, with the API's error response for the whole request."""
        check = authorization.checker(self.node, ctx)
        assert need.operation is not None
        if check is None or check(need.operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return handler(ctx, request)
        resp_cls = api.response_schema(ctx.api_key, ctx.api_version)
        return denied_response(ctx.api_key, resp_cls, request, need.error)

    def api_versions_response(self, version: int, error: ErrorCode = ErrorCode.none, *, own_apis: bool = False) -> Any:
        cls = api.response_schema(ApiKey.API_VERSIONS, version)
        av = nested(cls, "ApiVersion")
        keys = tuple(
            av(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(api.SUPPORTED.items())
            if k in self._table and (own_apis or k not in api.OWN_API_KEYS)
            # KIP-511: a too-new ApiVersions is answered with ApiVersions' own range only, so the
            # client retries at a version both speak (Kafka's ApiVersionsRequest.getErrorResponse).
            and (error != ErrorCode.unsupported_version or k == ApiKey.API_VERSIONS)
        )
        return make(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE,
                    **features.api_versions_features(cls, self.node.image.offset, version,
                                                      self.node.shared.raft.kraft_version, self.node.config))

    def handle_api_versions(self, ctx: RequestContext, request: Any) -> Any:
        # KIP-511 fields (client_software_name/version, v3+) are informational, except that kavka's own
        # APIs (key 1000, protocol.kavka_schema) are listed only for kavka's own client: kafka-python
        # maps every advertised key through its ApiKey enum and fails on one it does not know.
        own = getattr(request, "client_software_name", None) == api.OWN_CLIENT_SOFTWARE_NAME
        return self.api_versions_response(ctx.api_version, own_apis=own)
