"""ControllerApis: the controller listener's answers to the requests other nodes send the active
controller, and the table of those RPCs (`RPCS`).

Kafka 4 brokers never change metadata themselves: they send BrokerRegistration, BrokerHeartbeat,
AlterPartition, AssignReplicasToDirs and AllocateProducerIds to the active controller, and
forward admin requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
AlterUserScramCredentials) to
it. kavka does the same over the controller listener (the one the raft RPCs use), with Kafka's own
request messages at the fixed versions in `RPCS`; `broker.controller_client.ControllerClient` is
the sending side.

`ControllerApis` (served by `RaftDriver`) answers them, always with the local QuorumController: a
node that is not the active controller answers NOT_CONTROLLER and the sender tries again with the
leader it learns next. Its api key -> handler table, built in `__init__`, is the one place that
says what the listener answers; it names exactly the keys of `RPCS`. The response builders for
AlterPartition and AssignReplicasToDirs are shared with ControllerClient's local path, so a caller
on the active controller reads the same answer a remote one does.

Called on the event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from kio.schema.add_raft_voter.v1 import request as arv_req
from kio.schema.add_raft_voter.v1 import response as arv_resp
from kio.schema.allocate_producer_ids.v0 import request as apid_req
from kio.schema.allocate_producer_ids.v0 import response as apid_resp
from kio.schema.alter_client_quotas.v1 import request as acq_req
from kio.schema.alter_client_quotas.v1 import response as acq_resp
from kio.schema.alter_configs.v2 import request as ac_req
from kio.schema.alter_configs.v2 import response as ac_resp
from kio.schema.alter_partition.v3 import request as ap_req
from kio.schema.alter_partition.v3 import response as ap_resp
from kio.schema.alter_partition_reassignments.v0 import request as apr_req
from kio.schema.alter_partition_reassignments.v0 import response as apr_resp
from kio.schema.alter_user_scram_credentials.v0 import request as auc_req
from kio.schema.alter_user_scram_credentials.v0 import response as auc_resp
from kio.schema.assign_replicas_to_dirs.v0 import request as ard_req
from kio.schema.assign_replicas_to_dirs.v0 import response as ard_resp
from kio.schema.broker_heartbeat.v1 import request as bh_req
from kio.schema.broker_heartbeat.v1 import response as bh_resp
from kio.schema.broker_registration.v4 import request as br_req
from kio.schema.broker_registration.v4 import response as br_resp
from kio.schema.create_acls.v3 import request as ca_req
from kio.schema.create_acls.v3 import response as ca_resp
from kio.schema.create_partitions.v3 import request as cp_req
from kio.schema.create_partitions.v3 import response as cp_resp
from kio.schema.create_topics.v7 import request as ct_req
from kio.schema.create_topics.v7 import response as ct_resp
from kio.schema.delete_acls.v3 import request as da_req
from kio.schema.delete_acls.v3 import response as da_resp
from kio.schema.delete_topics.v6 import request as dt_req
from kio.schema.delete_topics.v6 import response as dt_resp
from kio.schema.describe_quorum.v2 import request as dq_req
from kio.schema.describe_quorum.v2 import response as dq_resp
from kio.schema.elect_leaders.v2 import request as el_req
from kio.schema.elect_leaders.v2 import response as el_resp
from kio.schema.incremental_alter_configs.v1 import request as iac_req
from kio.schema.incremental_alter_configs.v1 import response as iac_resp
from kio.schema.list_partition_reassignments.v0 import request as lpr_req
from kio.schema.list_partition_reassignments.v0 import response as lpr_resp
from kio.schema.remove_raft_voter.v0 import request as rrv_req
from kio.schema.remove_raft_voter.v0 import response as rrv_resp
from kio.schema.update_features.v1 import request as uf_req
from kio.schema.update_features.v1 import response as uf_resp
from kio.schema.update_raft_voter.v0 import request as urv_req
from kio.schema.update_raft_voter.v0 import response as urv_resp

from kavka.broker.handlers import acls as acl_handlers
from kavka.broker.handlers import configs, elect_leaders, reassignments, topics
from kavka.broker.handlers import quotas as quota_handlers
from kavka.broker.handlers import scram as scram_handlers
from kavka.broker.handlers.placement import placement_response
from kavka.broker.raft_driver import wall_clock_offset_ms
from kavka.common import ErrorCode
from kavka.controller.quorum_controller import (
    UNAVAILABLE,
    HeartbeatReply,
    QuorumController,
    unavailable_result,
)
from kavka.protocol import api
from kavka.protocol import kavka_schema as ks
from kavka.protocol.messages import (
    NO_THROTTLE,
    field_names,
    make,
    nested,
    uuid_from_str,
    uuid_to_str,
)
from kavka.raft import codec
from kavka.raft.voters import VoterEndpoint, VoterNode
from kavka.replication.alter_partition import AlterPartitionItem

_NO_THROTTLE = datetime.timedelta(0)

# api key -> (request class, response class), the versions kavka nodes speak to each other.
RPCS: dict[int, tuple[type, type]] = {
    req.__api_key__: (req, resp)
    for req, resp in (
        (ct_req.CreateTopicsRequest, ct_resp.CreateTopicsResponse),
        (dt_req.DeleteTopicsRequest, dt_resp.DeleteTopicsResponse),
        (ac_req.AlterConfigsRequest, ac_resp.AlterConfigsResponse),
        (cp_req.CreatePartitionsRequest, cp_resp.CreatePartitionsResponse),
        (iac_req.IncrementalAlterConfigsRequest, iac_resp.IncrementalAlterConfigsResponse),
        (br_req.BrokerRegistrationRequest, br_resp.BrokerRegistrationResponse),
        (bh_req.BrokerHeartbeatRequest, bh_resp.BrokerHeartbeatResponse),
        (dq_req.DescribeQuorumRequest, dq_resp.DescribeQuorumResponse),
        (apid_req.AllocateProducerIdsRequest, apid_resp.AllocateProducerIdsResponse),
        (ap_req.AlterPartitionRequest, ap_resp.AlterPartitionResponse),
        (el_req.ElectLeadersRequest, el_resp.ElectLeadersResponse),
        (ard_req.AssignReplicasToDirsRequest, ard_resp.AssignReplicasToDirsResponse),
        (apr_req.AlterPartitionReassignmentsRequest, apr_resp.AlterPartitionReassignmentsResponse),
        (lpr_req.ListPartitionReassignmentsRequest, lpr_resp.ListPartitionReassignmentsResponse),
        (ks.CreateReplicaPlacementRequest, ks.CreateReplicaPlacementResponse),
        (auc_req.AlterUserScramCredentialsRequest, auc_resp.AlterUserScramCredentialsResponse),
        (ca_req.CreateAclsRequest, ca_resp.CreateAclsResponse),
        (da_req.DeleteAclsRequest, da_resp.DeleteAclsResponse),
        (acq_req.AlterClientQuotasRequest, acq_resp.AlterClientQuotasResponse),
        (arv_req.AddRaftVoterRequest, arv_resp.AddRaftVoterResponse),
        (rrv_req.RemoveRaftVoterRequest, rrv_resp.RemoveRaftVoterResponse),
        (urv_req.UpdateRaftVoterRequest, urv_resp.UpdateRaftVoterResponse),
        (uf_req.UpdateFeaturesRequest, uf_resp.UpdateFeaturesResponse),
    )
}
VOTER_CHANGES = (arv_req.AddRaftVoterRequest, rrv_req.RemoveRaftVoterRequest, urv_req.UpdateRaftVoterRequest)

# KIP-919: what a Kafka admin client with bootstrap.controllers (kafka-metadata-quorum
# --bootstrap-controller, kafka-features --bootstrap-controller) sends straight to the controllers,
# with the versions served: api key -> (min, max). ApiVersions and DescribeCluster (endpoint type
# controller: the voters and the active controller) at any of them; DescribeQuorum, AddRaftVoter and
# RemoveRaftVoter by the same handlers as the RPCS (AddRaftVoter v0 too).
_DESCRIBE_CLUSTER, _API_VERSIONS = 60, 18
DIRECT_APIS: dict[int, tuple[int, int]] = {
    _API_VERSIONS: api.SUPPORTED[_API_VERSIONS],
    _DESCRIBE_CLUSTER: (1, api.SUPPORTED[_DESCRIBE_CLUSTER][1]),
    dq_req.DescribeQuorumRequest.__api_key__: (2, 2),
    arv_req.AddRaftVoterRequest.__api_key__: (0, 1),
    rrv_req.RemoveRaftVoterRequest.__api_key__: (0, 0),
}
_CONTROLLER_ENDPOINT = 2  # DescribeCluster's EndpointType: 1 brokers, 2 controllers


def _voter(req: Any) -> VoterNode:
    directory = uuid_to_str(req.voter_directory_id) if req.voter_directory_id and req.voter_directory_id.int else None
    listeners = getattr(req, "listeners", ())
    return VoterNode(int(req.voter_id), directory, tuple(VoterEndpoint(x.name, x.host, int(x.port)) for x in listeners))


def voter_change_request(req: Any) -> Any:
    """The RPC entity of a voter change (AddRaftVoter v1, the others v0), to relay to the active
    controller: the broker hands its handler a read-only view (protocol.versions.VersionView),
    which kio cannot encode."""
    if req.__api_key__ == arv_req.AddRaftVoterRequest.__api_key__:
        return arv_req.AddRaftVoterRequest(
            cluster_id=req.cluster_id, timeout=req.timeout, voter_id=req.voter_id,
            voter_directory_id=req.voter_directory_id,
            listeners=tuple(arv_req.Listener(name=x.name, host=x.host, port=x.port) for x in req.listeners),
            ack_when_committed=_ack_when_committed(req),
        )
    if req.__api_key__ == rrv_req.RemoveRaftVoterRequest.__api_key__:
        return rrv_req.RemoveRaftVoterRequest(
            cluster_id=req.cluster_id, voter_id=req.voter_id, voter_directory_id=req.voter_directory_id
        )
    feature = req.k_raft_version_feature
    return urv_req.UpdateRaftVoterRequest(
        cluster_id=req.cluster_id, current_leader_epoch=req.current_leader_epoch, voter_id=req.voter_id,
        voter_directory_id=req.voter_directory_id,
        listeners=tuple(urv_req.Listener(name=x.name, host=x.host, port=x.port) for x in req.listeners),
        k_raft_version_feature=urv_req.KRaftVersionFeature(
            min_supported_version=feature.min_supported_version, max_supported_version=feature.max_supported_version
        ),
    )


def _ack_when_committed(req: Any) -> bool:
    """AddRaftVoter v1's AckWhenCommitted (v0: true, its only behaviour)."""
    return bool(getattr(req, "ack_when_committed", True))


async def voter_change_response(qc: QuorumController, req: Any, cluster_id: str) -> Any:
    """KIP-853: AddRaftVoter (v0-v1), RemoveRaftVoter or UpdateRaftVoter (v0) on the active
    controller, answered once the change commits (AddRaftVoter v1 with AckWhenCommitted false: once
    the new voter set is in the leader's log, and so in force); the raft core's checks give Kafka's
    error codes."""
    raft = qc.raft
    voter = _voter(req)
    if req.cluster_id is not None and req.cluster_id != cluster_id:
        error = ErrorCode.inconsistent_cluster_id
    elif req.__api_key__ == arv_req.AddRaftVoterRequest.__api_key__:
        error = await qc.change_voters(lambda: raft.add_voter(voter), wait_commit=_ack_when_committed(req))
    elif req.__api_key__ == rrv_req.RemoveRaftVoterRequest.__api_key__:
        error = await qc.change_voters(lambda: raft.remove_voter(voter.node_id, voter.directory_id))
    else:
        error = await qc.change_voters(lambda: raft.update_voter(voter))
    message = None if error == ErrorCode.none else _VOTER_ERRORS.get(error, error.name)
    if req.__api_key__ == urv_req.UpdateRaftVoterRequest.__api_key__:
        leader = raft.leader_and_epoch()
        return urv_resp.UpdateRaftVoterResponse(
            throttle_time=_NO_THROTTLE,
            error_code=error,
            current_leader=urv_resp.CurrentLeader(
                leader_id=leader.leader_id if leader.leader_id is not None else -1,
                leader_epoch=leader.epoch,
                host="",
                port=-1,
            ),
        )
    add = req.__api_key__ == arv_req.AddRaftVoterRequest.__api_key__
    resp_cls = arv_resp.AddRaftVoterResponse if add else rrv_resp.RemoveRaftVoterResponse
    return resp_cls(throttle_time=_NO_THROTTLE, error_code=error, error_message=message)


KRAFT_VERSION = "kraft.version"


def kraft_version_request(level: int, validate_only: bool) -> uf_req.UpdateFeaturesRequest:
    """UpdateFeatures v1 for kraft.version alone: what a node relays to the active controller (the
    other features are answered where the request arrives: their levels are fixed by the code)."""
    return uf_req.UpdateFeaturesRequest(
        feature_updates=(uf_req.FeatureUpdateKey(feature=KRAFT_VERSION, max_version_level=level),),
        validate_only=validate_only,
    )


def _static_voter_endpoints(config: Any) -> dict[int, tuple[VoterEndpoint, ...]]:
    """Where each voter of controller.quorum.voters listens, named as this node's controller
    listener (the endpoints the VotersRecord of an upgrade carries)."""
    from kavka.config import parse_voters

    names = config["controller.listener.names"]
    listener = str(names[0]).upper() if names else "CONTROLLER"
    return {vid: (VoterEndpoint(listener, host, port),) for vid, (host, port) in
            parse_voters(config["controller.quorum.voters"]).items()}


async def kraft_version_response(qc: QuorumController, req: Any) -> uf_resp.UpdateFeaturesResponse:
    """UpdateFeatures on the active controller, as a node relays it: kraft.version (Kafka 4.1), the
    raft core's upgrade_kraft_version, answered once its control batch commits. Each update first
    passes the checks a broker makes before relaying (handlers.features, Kafka's
    FeatureControlManager's), so what no kavka node relays -- another feature, a level beyond the
    supported ones -- gets Kafka's error and is never written."""
    from kavka.broker.handlers import features

    results = []
    for u in req.feature_updates:
        level = int(u.max_version_level)
        error, message = features.update_error(qc.config.node_id, u.feature, level, int(u.upgrade_type), qc.config,
                                               qc.raft.kraft_version)
        if error == ErrorCode.none and u.feature == KRAFT_VERSION:
            error, message = await _upgrade_kraft_version(qc, level, bool(req.validate_only))
        results.append(uf_resp.UpdatableFeatureResult(
            feature=u.feature, error_code=error, error_message=None if error == ErrorCode.none else message))
    return uf_resp.UpdateFeaturesResponse(
        throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=tuple(results))


async def _upgrade_kraft_version(qc: QuorumController, level: int, validate_only: bool) -> tuple[ErrorCode, str | None]:
    message: str | None = None

    def change() -> tuple[ErrorCode, int]:
        nonlocal message
        error, message, offset = qc.raft.upgrade_kraft_version(
            level, _static_voter_endpoints(qc.config), validate_only=validate_only)
        return error, offset

    error = await qc.change_voters(change)
    if error == ErrorCode.not_leader_or_follower:
        error = ErrorCode.not_controller
    return error, message


_VOTER_ERRORS = {
    ErrorCode.unsupported_version: "the quorum is static (kraft.version 0): its voters are controller.quorum.voters",
    ErrorCode.request_timed_out: "the leader has not committed its epoch yet, another voter change is in flight, "
    "the new voter has not caught up as an observer, or the change did not commit in time",
    ErrorCode.duplicate_voter: "the node is already a voter",
    ErrorCode.voter_not_found: "no voter has this id and directory id",
    ErrorCode.invalid_request: "the last voter of a quorum cannot be removed",
    ErrorCode.inconsistent_cluster_id: "the request names another cluster id",
}

# A handler takes the request and the connection it came over (heartbeats remember it).
Handler = Callable[[Any, Hashable | None], Awaitable[Any]]


class ControllerApis:
    """Answers the RPCS on the controller listener with the local QuorumController."""

    def __init__(self, controller: QuorumController, *, cluster_id: str) -> None:
        self.qc = controller
        self.cluster_id = cluster_id
        # The one place that says which RPCs the controller listener answers (the keys of RPCS).
        self.handlers: dict[int, Handler] = {
            ct_req.CreateTopicsRequest.__api_key__: self.handle_create_topics,
            dt_req.DeleteTopicsRequest.__api_key__: self.handle_delete_topics,
            cp_req.CreatePartitionsRequest.__api_key__: self.handle_create_partitions,
            ks.CreateReplicaPlacementRequest.__api_key__: self.handle_create_replica_placement,
            ac_req.AlterConfigsRequest.__api_key__: self.handle_alter_configs,
            iac_req.IncrementalAlterConfigsRequest.__api_key__: self.handle_incremental_alter_configs,
            br_req.BrokerRegistrationRequest.__api_key__: self.handle_broker_registration,
            bh_req.BrokerHeartbeatRequest.__api_key__: self.handle_broker_heartbeat,
            dq_req.DescribeQuorumRequest.__api_key__: self.handle_describe_quorum,
            ap_req.AlterPartitionRequest.__api_key__: self.handle_alter_partition,
            ard_req.AssignReplicasToDirsRequest.__api_key__: self.handle_assign_replicas_to_dirs,
            el_req.ElectLeadersRequest.__api_key__: self.handle_elect_leaders,
            apr_req.AlterPartitionReassignmentsRequest.__api_key__: self.handle_alter_partition_reassignments,
            lpr_req.ListPartitionReassignmentsRequest.__api_key__: self.handle_list_partition_reassignments,
            apid_req.AllocateProducerIdsRequest.__api_key__: self.handle_allocate_producer_ids,
            auc_req.AlterUserScramCredentialsRequest.__api_key__: self.handle_alter_user_scram_credentials,
            ca_req.CreateAclsRequest.__api_key__: self.handle_create_acls,
            da_req.DeleteAclsRequest.__api_key__: self.handle_delete_acls,
            acq_req.AlterClientQuotasRequest.__api_key__: self.handle_alter_client_quotas,
            **{cls.__api_key__: self.handle_voter_change for cls in VOTER_CHANGES},
            uf_req.UpdateFeaturesRequest.__api_key__: self.handle_update_features,
        }

    async def handle(self, api_key: int, req: Any, connection: Hashable | None = None) -> Any:
        """Answer one request; `connection` identifies the connection it came over (heartbeats
        remember it, so a broker whose connection closes is fenced soon: controller.heartbeats)."""
        return await self.handlers[api_key](req, connection)

    def connection_lost(self, connection: Hashable) -> None:
        self.qc.broker_connection_lost(connection)

    async def handle_create_topics(self, req: ct_req.CreateTopicsRequest, _connection: Hashable | None) -> Any:
        results = await topics.create_topics(self.qc, topics.new_topics(req), validate_only=req.validate_only)
        return ct_resp.CreateTopicsResponse(
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                ct_resp.CreatableTopicResult(
                    name=r.name,
                    topic_id=uuid_from_str(r.topic_id),
                    error_code=r.result.error,
                    error_message=r.result.message,
                    topic_config_error_code=0,
                    num_partitions=r.num_partitions,
                    replication_factor=r.replication_factor,
                    configs=None,
                )
                for r in results
            ),
        )

    async def handle_delete_topics(self, req: dt_req.DeleteTopicsRequest, _connection: Hashable | None) -> Any:
        image = self.qc.image
        topics = [image.topics_by_id.get(uuid_to_str(t.topic_id)) for t in req.topics]
        error, message = ErrorCode.none, None
        try:
            await self.qc.delete_topics([t for t in topics if t is not None])
        except UNAVAILABLE as e:
            failed = unavailable_result(e)
            error, message = failed.error, failed.message
        return dt_resp.DeleteTopicsResponse(
            throttle_time=_NO_THROTTLE,
            responses=tuple(
                dt_resp.DeletableTopicResult(
                    name=t.name,
                    topic_id=t.topic_id,
                    error_code=error if found is not None else ErrorCode.unknown_topic_id,
                    error_message=message,
                )
                for t, found in zip(req.topics, topics, strict=True)
            ),
        )

    async def handle_create_partitions(self, req: cp_req.CreatePartitionsRequest, _connection: Hashable | None) -> Any:
        results = tuple(
            cp_resp.CreatePartitionsTopicResult(name=name, error_code=r.error, error_message=r.message)
            for name, r in await topics.create_partitions(self.qc, req)
        )
        return cp_resp.CreatePartitionsResponse(throttle_time=_NO_THROTTLE, results=results)

    async def handle_create_replica_placement(self, req: ks.CreateReplicaPlacementRequest, _connection: Hashable | None) -> Any:
        try:
            result, assignment = await self.qc.replica_placement(
                req.num_partitions, req.replication_factor, force_simple=req.force_simple_placement, node_ids=list(req.node_ids)
            )
        except UNAVAILABLE as e:
            result, assignment = unavailable_result(e), []
        return placement_response(result, assignment)

    async def _alter(self, req: Any, *, incremental: bool, mod: Any) -> Any:
        out = tuple(
            mod.AlterConfigsResourceResponse(
                error_code=res.error,
                error_message=res.message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r, res in await configs.alter_resources(self.qc, req, incremental=incremental)
        )
        cls = mod.IncrementalAlterConfigsResponse if incremental else mod.AlterConfigsResponse
        return cls(throttle_time=_NO_THROTTLE, responses=out)

    async def handle_alter_configs(self, req: Any, _connection: Hashable | None) -> Any:
        return await self._alter(req, incremental=False, mod=ac_resp)

    async def handle_incremental_alter_configs(self, req: Any, _connection: Hashable | None) -> Any:
        return await self._alter(req, incremental=True, mod=iac_resp)

    async def handle_alter_user_scram_credentials(self, req: Any, _connection: Hashable | None) -> Any:
        return await scram_handlers.alter_user_scram_credentials(self.qc, req)

    async def handle_create_acls(self, req: Any, _connection: Hashable | None) -> Any:
        acls = [acl_handlers.creation_acl(c) for c in req.creations]
        return acl_handlers.create_acls_response(ca_resp.CreateAclsResponse, await acl_handlers.create_acls(self.qc, acls))

    async def handle_delete_acls(self, req: Any, _connection: Hashable | None) -> Any:
        filters = [acl_handlers.request_filter(f) for f in req.filters]
        return acl_handlers.delete_acls_response(da_resp.DeleteAclsResponse, await acl_handlers.delete_acls(self.qc, filters))

    async def handle_alter_client_quotas(self, req: Any, _connection: Hashable | None) -> Any:
        return await quota_handlers.alter_client_quotas(self.qc, req)

    async def handle_broker_registration(self, req: br_req.BrokerRegistrationRequest, _connection: Hashable | None) -> Any:
        if req.cluster_id != self.cluster_id:
            return br_resp.BrokerRegistrationResponse(
                throttle_time=_NO_THROTTLE, error_code=ErrorCode.inconsistent_cluster_id, broker_epoch=-1
            )
        try:
            epoch = await self.qc.register_broker(
                broker_id=req.broker_id,
                incarnation_id=uuid_to_str(req.incarnation_id) or "",
                endpoints=[(li.name, li.host, li.port) for li in req.listeners],
                rack=req.rack,
                log_dirs=[uuid_to_str(d) for d in req.log_dirs if d is not None],
                previous_broker_epoch=req.previous_broker_epoch,
            )
        except UNAVAILABLE as e:
            return br_resp.BrokerRegistrationResponse(
                throttle_time=_NO_THROTTLE, error_code=unavailable_result(e).error, broker_epoch=-1
            )
        return br_resp.BrokerRegistrationResponse(throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, broker_epoch=epoch)

    async def handle_broker_heartbeat(self, req: bh_req.BrokerHeartbeatRequest, connection: Hashable | None) -> Any:
        try:
            r = await self.qc.broker_heartbeat(
                broker_id=req.broker_id,
                broker_epoch=req.broker_epoch,
                metadata_offset=req.current_metadata_offset,
                want_fence=req.want_fence,
                want_shut_down=req.want_shut_down,
                connection=connection,
                offline_log_dirs=[uuid_to_str(d) for d in req.offline_log_dirs if d is not None],
            )
        except UNAVAILABLE as e:
            r = HeartbeatReply(unavailable_result(e).error)
        return bh_resp.BrokerHeartbeatResponse(
            throttle_time=_NO_THROTTLE,
            error_code=r.error,
            is_caught_up=r.is_caught_up,
            is_fenced=r.is_fenced,
            should_shut_down=r.should_shut_down,
        )

    async def handle_voter_change(self, req: Any, _connection: Hashable | None) -> Any:
        return await voter_change_response(self.qc, req, self.cluster_id)

    async def handle_update_features(self, req: Any, _connection: Hashable | None) -> Any:
        """kraft.version, relayed by ControllerClient.update_kraft_version."""
        return await kraft_version_response(self.qc, req)

    # ---- KIP-919: an admin client's requests straight to the controllers ----------------------

    def serves_directly(self, api_key: int, api_version: int) -> bool:
        """An admin client's request this listener answers (DIRECT_APIS), at this version; a
        too-new ApiVersions is answered too (KIP-511: with its own range, to retry at)."""
        lo, hi = DIRECT_APIS.get(api_key, (1, 0))
        return lo <= api_version <= hi or (api_key == _API_VERSIONS and api_version > hi)

    async def handle_direct(self, api_key: int, api_version: int, req: Any, listener: str, *, sasl: bool = False) -> Any:
        """The response entity, at the request's version, to a DIRECT_APIS request; `sasl`: the
        listener authenticates with SASL (its ApiVersions then names SaslHandshake and
        SaslAuthenticate, which Kafka's clients look up there before they log in)."""
        if api_key == _API_VERSIONS:
            return self._api_versions(api_version, sasl=sasl)
        if api_key == _DESCRIBE_CLUSTER:
            return self._describe_cluster(api_version, req, listener)
        resp = await self.handle(api_key, req)
        cls = api.response_schema(api_key, api_version)
        if isinstance(resp, cls):
            return resp
        # AddRaftVoter v0: v1's response fields, the same ones
        return make(cls, **{name: getattr(resp, name) for name in field_names(cls)})

    def _api_versions(self, version: int, *, sasl: bool = False) -> Any:
        from kavka.broker.handlers import features

        hi = DIRECT_APIS[_API_VERSIONS][1]
        served = {**DIRECT_APIS, **({k: api.SUPPORTED[k] for k in (api.ApiKey.SASL_HANDSHAKE, api.ApiKey.SASL_AUTHENTICATE)} if sasl else {})}
        error = ErrorCode.unsupported_version if version > hi else ErrorCode.none
        cls = api.response_schema(_API_VERSIONS, min(version, hi) if error == ErrorCode.none else 0)
        av = nested(cls, "ApiVersion")
        keys = tuple(av(api_key=k, min_version=lo, max_version=top) for k, (lo, top) in sorted(served.items())
                     if error == ErrorCode.none or k == _API_VERSIONS)
        return make(cls, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE,
                    **features.api_versions_features(cls, self.qc.image.offset, version, self.qc.raft.kraft_version,
                                                      self.qc.config))

    def _controller_nodes(self, listener: str) -> list[tuple[int, str, int]]:
        """(id, host, port) of each voter on `listener`: the voter set's endpoints (a dynamic
        quorum), else controller.quorum.voters."""
        from kavka.config import parse_voters

        out = []
        for n in self.qc.raft.voter_set().voters:
            ep = next((e for e in n.endpoints if e.name == listener), None)
            if ep is not None:
                out.append((n.node_id, ep.host, ep.port))
        if not out:
            out = [(vid, host, port) for vid, (host, port) in parse_voters(self.qc.config["controller.quorum.voters"]).items()]
        return sorted(out)

    def _describe_cluster(self, version: int, req: Any, listener: str) -> Any:
        """Kafka's ControllerApis.handleDescribeCluster: the controllers and the active one."""
        cls = api.response_schema(_DESCRIBE_CLUSTER, version)
        broker_cls = nested(cls, "DescribeClusterBroker")
        error, message, nodes = ErrorCode.none, None, []
        if req.endpoint_type not in (1, _CONTROLLER_ENDPOINT):
            error, message = ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {req.endpoint_type}"
        elif req.endpoint_type != _CONTROLLER_ENDPOINT:
            error = ErrorCode.mismatched_endpoint_type
            message = "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
        else:
            nodes = self._controller_nodes(listener)
        leader = self.qc.raft.leader_and_epoch().leader_id
        extra = {"is_fenced": False} if "is_fenced" in field_names(broker_cls) else {}
        return make(
            cls, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
            endpoint_type=_CONTROLLER_ENDPOINT, cluster_id=self.cluster_id,
            controller_id=leader if leader is not None and any(n[0] == leader for n in nodes) else -1,
            brokers=tuple(broker_cls(broker_id=i, host=h, port=p, rack=None, **extra) for i, h, p in nodes),
            cluster_authorized_operations=-(2**31),
        )

    async def handle_describe_quorum(self, req: Any, _connection: Hashable | None) -> Any:
        return codec.encode_describe_quorum(self.qc.raft.describe_quorum(), wall_clock_offset_ms())

    async def handle_alter_partition(self, req: ap_req.AlterPartitionRequest, _connection: Hashable | None) -> Any:
        items = [
            AlterPartitionItem(
                uuid_to_str(t.topic_id) or "",
                p.partition_index,
                p.leader_epoch,
                p.partition_epoch,
                tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs),
            )
            for t in req.topics
            for p in t.partitions
        ]
        try:
            error, results = await self.qc.alter_partition(req.broker_id, req.broker_epoch, items)
        except UNAVAILABLE as e:
            error, results = unavailable_result(e).error, []
        return alter_partition_response(error, results)

    async def handle_assign_replicas_to_dirs(self, req: ard_req.AssignReplicasToDirsRequest, _connection: Hashable | None) -> Any:
        items = [
            (uuid_to_str(d.id_), uuid_to_str(t.topic_id), p.partition_index)
            for d in req.directories
            for t in d.topics
            for p in t.partitions
        ]
        try:
            error, results = await self.qc.assign_replicas_to_dirs(req.broker_id, req.broker_epoch, items)
        except UNAVAILABLE as e:
            error, results = unavailable_result(e).error, []
        return assign_replicas_to_dirs_response(error, results)

    async def handle_elect_leaders(self, req: el_req.ElectLeadersRequest, _connection: Hashable | None) -> Any:
        answer = await elect_leaders.elect_leaders(self.qc, req.election_type, elect_leaders.requested(req))
        return elect_leaders.encode(el_resp.ElectLeadersResponse, answer)

    async def handle_alter_partition_reassignments(self, req: apr_req.AlterPartitionReassignmentsRequest, _connection: Hashable | None) -> Any:
        answer = await reassignments.alter(self.qc, reassignments.targets(req))
        return reassignments.encode_alter(apr_resp.AlterPartitionReassignmentsResponse, answer)

    async def handle_list_partition_reassignments(self, req: lpr_req.ListPartitionReassignmentsRequest, _connection: Hashable | None) -> Any:
        answer = await reassignments.list_ongoing(self.qc, reassignments.wanted(req))
        return reassignments.encode_list(lpr_resp.ListPartitionReassignmentsResponse, answer)

    async def handle_allocate_producer_ids(self, req: apid_req.AllocateProducerIdsRequest, _connection: Hashable | None) -> Any:
        try:
            start, end = await self.qc.allocate_producer_ids(req.broker_id)
        except UNAVAILABLE as e:
            return apid_resp.AllocateProducerIdsResponse(
                throttle_time=_NO_THROTTLE, error_code=unavailable_result(e).error, producer_id_start=-1, producer_id_len=0
            )
        return apid_resp.AllocateProducerIdsResponse(
            throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, producer_id_start=start, producer_id_len=end - start
        )


def alter_partition_response(error: ErrorCode, results: Sequence[tuple[AlterPartitionItem, ErrorCode, Any]]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for item, perr, reg in results:
        by_topic.setdefault(item.topic_id, []).append(
            ap_resp.PartitionData(
                partition_index=item.partition,
                error_code=perr,
                leader_id=reg.leader if reg is not None else -1,
                leader_epoch=reg.leader_epoch if reg is not None else -1,
                isr=tuple(reg.isr) if reg is not None else (),
                partition_epoch=reg.partition_epoch if reg is not None else -1,
            )
        )
    return ap_resp.AlterPartitionResponse(
        throttle_time=_NO_THROTTLE,
        error_code=error,
        topics=tuple(ap_resp.TopicData(topic_id=uuid_from_str(tid), partitions=tuple(ps)) for tid, ps in by_topic.items()),
    )


def by_dir_and_topic(items: Sequence[tuple[str, str, int, Any]]) -> dict[str, dict[str, list[tuple[int, Any]]]]:
    out: dict[str, dict[str, list[tuple[int, Any]]]] = {}
    for d, t, p, extra in items:
        out.setdefault(d, {}).setdefault(t, []).append((p, extra))
    return out


def assign_replicas_to_dirs_response(error: ErrorCode, results: Sequence[tuple[str, str, int, ErrorCode]]) -> Any:
    return ard_resp.AssignReplicasToDirsResponse(
        throttle_time=_NO_THROTTLE,
        error_code=error,
        directories=tuple(
            ard_resp.DirectoryData(
                id_=uuid_from_str(d),
                topics=tuple(
                    ard_resp.TopicData(
                        topic_id=uuid_from_str(t),
                        partitions=tuple(ard_resp.PartitionData(partition_index=p, error_code=e) for p, e in ps),
                    )
                    for t, ps in topics.items()
                ),
            )
            for d, topics in by_dir_and_topic(results).items()
        ),
    )


__all__ = ["RPCS", "ControllerApis", "alter_partition_response", "assign_replicas_to_dirs_response", "by_dir_and_topic"]
