"""ControllerClient: the QuorumController's operations from any node (`node.controller`).

What every broker handler calls to change metadata. On the active controller it calls the local
`QuorumController`; anywhere else it sends the request (Kafka's own message, at the version in
`broker.controller_apis.RPCS`) to the raft leader's controller endpoint (its
`controller.quorum.voters` address), where `ControllerApis` answers it. It retries on
NOT_CONTROLLER or a lost connection until `timeout_s`, and -- for topic changes -- waits (bounded)
until this node's own image shows the change, so a client that creates a topic through this node
sees it here next (Kafka's brokers answer once the controller has committed; kavka's extra wait
saves clients a retry).

Errors a client sees are Kafka's: NOT_CONTROLLER only if no controller could be reached before the
deadline, REQUEST_TIMED_OUT if a commit did not come. Called on the event loop.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.allocate_producer_ids.v0 import request as apid_req
from kio.schema.alter_client_quotas.v1 import request as acq_req
from kio.schema.alter_configs.v2 import request as ac_req
from kio.schema.alter_partition.v3 import request as ap_req
from kio.schema.alter_partition_reassignments.v0 import request as apr_req
from kio.schema.alter_user_scram_credentials.v0 import request as auc_req
from kio.schema.assign_replicas_to_dirs.v0 import request as ard_req
from kio.schema.broker_heartbeat.v1 import request as bh_req
from kio.schema.broker_registration.v4 import request as br_req
from kio.schema.create_acls.v3 import request as ca_req
from kio.schema.create_partitions.v3 import request as cp_req
from kio.schema.create_topics.v7 import request as ct_req
from kio.schema.delete_acls.v3 import request as da_req
from kio.schema.delete_topics.v6 import request as dt_req
from kio.schema.describe_quorum.v2 import request as dq_req
from kio.schema.elect_leaders.v2 import request as el_req
from kio.schema.incremental_alter_configs.v1 import request as iac_req
from kio.schema.list_partition_reassignments.v0 import request as lpr_req

from kavka.authorizer import Acl, AclFilter
from kavka.broker.controller_apis import (
    RPCS,
    alter_partition_response,
    assign_replicas_to_dirs_response,
    by_dir_and_topic,
    kraft_version_request,
    kraft_version_response,
    voter_change_request,
    voter_change_response,
)
from kavka.broker.handlers import elect_leaders, reassignments
from kavka.broker.raft_driver import wall_clock_offset_ms
from kavka.client.async_channel import AsyncChannel
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.common import ConfigResourceType, ElectionType, ErrorCode, TopicPartition
from kavka.controller.acl_control import AclResult
from kavka.controller.quorum_controller import (
    HeartbeatReply,
    NotControllerError,
    QuorumController,
)
from kavka.controller.quota_control import QuotaAlteration, QuotaResult
from kavka.controller.results import (
    ApiResult,
    CreatedTopic,
    NewTopic,
    OngoingReassignment,
    ReassignmentResult,
    TopicElections,
)
from kavka.controller.scram_control import ScramDeletion, ScramUpsertion, UserResult
from kavka.metadata.image import MetadataImage, TopicImage
from kavka.metadata.loader import MetadataLoader
from kavka.protocol import kavka_schema as ks
from kavka.protocol.messages import uuid_from_str, uuid_to_str
from kavka.raft import codec
from kavka.replication.alter_partition import AlterPartitionItem

if TYPE_CHECKING:
    from kavka.raft.client import RaftClient

_TIMEOUT = datetime.timedelta(seconds=30)


class ControllerClient:
    """`node.controller`: the QuorumController's operations, from any node of the cluster."""

    def __init__(
        self,
        controller: QuorumController | None,
        loader: MetadataLoader,
        raft: RaftClient,
        *,
        node_id: int,
        cluster_id: str,
        voters: dict[int, tuple[str, int]],
        timeout_s: float = 30.0,
        propagation_timeout_s: float = 5.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.security = security  # the controller listener's TLS (kavka.client.security)
        self.qc: Any = controller  # None on a broker-only node: it is never the raft leader
        self.loader = loader
        self.raft = raft
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.timeout_s = timeout_s
        self.propagation_timeout_s = propagation_timeout_s
        self._channels: dict[int, AsyncChannel] = {}

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    # ---- routing ---------------------------------------------------------------------------

    async def _route(
        self,
        local: Callable[[], Any],
        request: Callable[[], Any],
        retry: Callable[[Any], bool],
        timeout_s: float | None = None,
    ) -> Any:
        """Run `local()` on the active controller, or send `request()` to it; the response entity."""
        loop = asyncio.get_running_loop()
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + timeout_s
        last: BaseException | None = None
        while True:
            leader = self.raft.leader_and_epoch().leader_id
            if leader == self.node_id:
                try:
                    return await local()
                except NotControllerError as e:
                    last = e  # leadership moved while we decided or committed: ask the next leader
            elif leader is not None and leader in self.voters:
                ch = self._channels.get(leader)
                if ch is None:
                    ch = self._channels[leader] = AsyncChannel(f"kavka-node-{self.node_id}", security=self.security)
                try:
                    req = request()
                    resp = await ch.call(self.voters[leader], req, RPCS[req.__api_key__][1], max(0.1, deadline - loop.time()))
                    if not retry(resp):
                        return resp
                    last = NotControllerError(f"node {leader} is not the active controller")
                except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError, ValueError) as e:
                    last = e
            left = deadline - loop.time()
            if left <= 0:
                if isinstance(last, TimeoutError):
                    raise last
                raise NotControllerError(f"no active controller answered in {timeout_s:.1f}s ({last!r})")
            # Wait for a (new) leader, or back off briefly before asking again.
            before = self.raft.leader_and_epoch()
            await self.loader.wait_for(lambda b=before: self.raft.leader_and_epoch() != b, min(left, 0.2))

    async def _await_image(self, condition: Callable[[MetadataImage], bool]) -> None:
        """Bounded wait until this node's image shows a change the controller committed."""
        await self.loader.wait_for(lambda: condition(self.loader.image), self.propagation_timeout_s)

    @staticmethod
    def _not_controller(codes: Sequence[int]) -> bool:
        return any(c == ErrorCode.not_controller for c in codes)

    # ---- operations (the QuorumController's signatures) -----------------------------------

    async def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False) -> list[CreatedTopic]:
        def request() -> Any:
            return ct_req.CreateTopicsRequest(
                topics=tuple(
                    ct_req.CreatableTopic(
                        name=t.name,
                        num_partitions=t.num_partitions,
                        replication_factor=t.replication_factor,
                        assignments=tuple(
                            ct_req.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(b))
                            for p, b in t.assignments.items()
                        ),
                        configs=tuple(ct_req.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()),
                    )
                    for t in topics
                ),
                timeout=_TIMEOUT,
                validate_only=validate_only,
            )

        async def local() -> Any:
            return await self.qc.create_topics(topics, validate_only=validate_only)

        resp = await self._route(local, request, lambda r: self._not_controller([t.error_code for t in r.topics]))
        if isinstance(resp, list):
            return resp
        out = [
            CreatedTopic(
                t.name,
                ApiResult(t.error_code, t.error_message),
                uuid_to_str(t.topic_id),
                t.num_partitions,
                t.replication_factor,
            )
            for t in resp.topics
        ]
        created = [c.name for c in out if c.result.ok and not validate_only]
        if created:
            await self._await_image(lambda img: all(n in img.topics_by_name for n in created))
        return out

    async def delete_topics(self, topics: Sequence[TopicImage]) -> None:
        if not topics:
            return

        def request() -> Any:
            return dt_req.DeleteTopicsRequest(
                topics=tuple(dt_req.DeleteTopicState(name=t.name, topic_id=uuid_from_str(t.topic_id)) for t in topics),
                timeout=_TIMEOUT,
            )

        async def local() -> Any:
            await self.qc.delete_topics(topics)

        resp = await self._route(local, request, lambda r: self._not_controller([t.error_code for t in r.responses]))
        if resp is None:
            return
        for r in resp.responses:
            if r.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_id):
                raise (TimeoutError if r.error_code == ErrorCode.request_timed_out else NotControllerError)(
                    r.error_message or str(r.error_code)
                )
        ids = {t.topic_id for t in topics}
        await self._await_image(lambda img: not ids & set(img.topics_by_id))

    async def create_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None, *, validate_only: bool
    ) -> ApiResult:
        def request() -> Any:
            return cp_req.CreatePartitionsRequest(
                topics=(
                    cp_req.CreatePartitionsTopic(
                        name=name,
                        count=count,
                        assignments=(
                            tuple(cp_req.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments)
                            if assignments
                            else None
                        ),
                    ),
                ),
                timeout=_TIMEOUT,
                validate_only=validate_only,
            )

        async def local() -> Any:
            return await self.qc.create_partitions(name, count, assignments, validate_only=validate_only)

        resp = await self._route(local, request, lambda r: self._not_controller([t.error_code for t in r.results]))
        if isinstance(resp, ApiResult):
            return resp
        [r] = resp.results
        result = ApiResult(r.error_code, r.error_message)
        if result.ok and not validate_only:
            await self._await_image(
                lambda img: name in img.topics_by_name and len(img.topics_by_name[name].partitions) >= count
            )
        return result

    async def create_replica_placement(
        self,
        num_partitions: int,
        replication_factor: int,
        *,
        force_simple: bool,
        node_ids: Sequence[int],
        timeout_s: float | None = None,
    ) -> tuple[ApiResult, list[list[int]]]:
        """CreateReplicaPlacement (KIP-879) answered by the active controller's placer."""

        def request() -> Any:
            return ks.CreateReplicaPlacementRequest(
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                force_simple_placement=force_simple,
                node_ids=tuple(node_ids),
                timeout=datetime.timedelta(seconds=timeout_s or self.timeout_s),
            )

        async def local() -> Any:
            return await self.qc.replica_placement(
                num_partitions, replication_factor, force_simple=force_simple, node_ids=node_ids
            )

        resp = await self._route(local, request, lambda r: self._not_controller([r.error_code]), timeout_s)
        if isinstance(resp, tuple):
            return resp
        return ApiResult(resp.error_code, resp.error_message), [list(p.replicas) for p in resp.partitions]

    async def alter_configs(
        self,
        resource_type: ConfigResourceType | int,  # a request's raw value passes through as is
        resource_name: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        incremental: bool,
        validate_only: bool,
    ) -> ApiResult:
        def request() -> Any:
            if incremental:
                return iac_req.IncrementalAlterConfigsRequest(
                    resources=(
                        iac_req.AlterConfigsResource(
                            resource_type=resource_type,
                            resource_name=resource_name,
                            configs=tuple(
                                iac_req.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops
                            ),
                        ),
                    ),
                    validate_only=validate_only,
                )
            return ac_req.AlterConfigsRequest(
                resources=(
                    ac_req.AlterConfigsResource(
                        resource_type=resource_type,
                        resource_name=resource_name,
                        configs=tuple(ac_req.AlterableConfig(name=n, value=v) for n, _op, v in ops),
                    ),
                ),
                validate_only=validate_only,
            )

        async def local() -> Any:
            return await self.qc.alter_configs(
                resource_type, resource_name, ops, incremental=incremental, validate_only=validate_only
            )

        resp = await self._route(local, request, lambda r: self._not_controller([x.error_code for x in r.responses]))
        if isinstance(resp, ApiResult):
            return resp
        [r] = resp.responses
        return ApiResult(r.error_code, r.error_message)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[UserResult]:
        """AlterUserScramCredentials on the active controller; then waits (bounded) until this node's
        image shows each change made, so a login or a describe through this node sees it next."""

        def request() -> Any:
            return auc_req.AlterUserScramCredentialsRequest(
                deletions=tuple(auc_req.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism) for d in deletions),
                upsertions=tuple(
                    auc_req.ScramCredentialUpsertion(
                        name=u.name, mechanism=u.mechanism, iterations=u.iterations, salt=u.salt, salted_password=u.salted_password
                    )
                    for u in upsertions
                ),
            )

        async def local() -> Any:
            return await self.qc.alter_user_scram_credentials(deletions, upsertions)

        resp = await self._route(local, request, lambda r: self._not_controller([x.error_code for x in r.results]))
        results = resp if isinstance(resp, list) else [UserResult(r.user, r.error_code, r.error_message) for r in resp.results]
        done = {r.user for r in results if r.error == ErrorCode.none}
        gone = {(d.mechanism, d.name) for d in deletions if d.name in done}
        added = {(u.mechanism, u.name): u.iterations for u in upsertions if u.name in done}

        def shown(image: MetadataImage) -> bool:
            return not (gone & image.scram.keys()) and all(
                k in image.scram and image.scram[k].iterations == i for k, i in added.items()
            )

        await self._await_image(shown)
        return results

    async def create_acls(self, acls: Sequence[Acl]) -> list[AclResult]:
        """CreateAcls on the active controller; then waits (bounded) until this node's image holds
        every ACL created, so a Describe or an authorization through this node sees them."""

        def request() -> Any:
            return ca_req.CreateAclsRequest(creations=tuple(
                ca_req.AclCreation(
                    resource_type=a.resource_type, resource_name=a.resource_name, resource_pattern_type=a.pattern_type,
                    principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type,
                )
                for a in acls
            ))

        async def local() -> Any:
            return await self.qc.create_acls(acls)

        resp = await self._route(local, request, lambda r: self._not_controller([x.error_code for x in r.results]))
        results = resp if isinstance(resp, list) else [AclResult(r.error_code, r.error_message) for r in resp.results]
        created = {a for a, r in zip(acls, results, strict=True) if r.error == ErrorCode.none}
        await self._await_image(lambda image: created <= set(image.acls.values()))
        return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclResult]:
        """DeleteAcls on the active controller; then waits (bounded) until this node's image no
        longer holds the ACLs it removed."""

        def request() -> Any:
            return da_req.DeleteAclsRequest(filters=tuple(
                da_req.DeleteAclsFilter(
                    resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                    pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                    operation=f.operation, permission_type=f.permission_type,
                )
                for f in filters
            ))

        async def local() -> Any:
            return await self.qc.delete_acls(filters)

        resp = await self._route(local, request, lambda r: self._not_controller([x.error_code for x in r.filter_results]))
        if isinstance(resp, list):
            results = resp
        else:
            results = [
                AclResult(r.error_code, r.error_message, tuple(
                    Acl(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)
                    for m in r.matching_acls))
                for r in resp.filter_results
            ]
        removed = {a for r in results for a in r.acls}
        await self._await_image(lambda image: not (removed & set(image.acls.values())))
        return results

    async def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *, validate_only: bool) -> list[QuotaResult]:
        """AlterClientQuotas on the active controller; then waits (bounded) until this node's image
        has caught up with the controller's, so a describe or the quota enforced here shows it next."""

        def request() -> Any:
            return acq_req.AlterClientQuotasRequest(
                entries=tuple(
                    acq_req.EntryData(
                        entity=tuple(acq_req.EntityData(entity_type=t, entity_name=n) for t, n in a.entity),
                        ops=tuple(acq_req.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in a.ops),
                    )
                    for a in alterations
                ),
                validate_only=validate_only,
            )

        async def local() -> Any:
            return await self.qc.alter_client_quotas(alterations, validate_only=validate_only)

        resp = await self._route(local, request, lambda r: self._not_controller([x.error_code for x in r.entries]))
        if isinstance(resp, list):
            results = resp
        else:
            results = [
                QuotaResult(tuple((e.entity_type, e.entity_name) for e in r.entity), r.error_code, r.error_message)
                for r in resp.entries
            ]
        if not validate_only and any(r.error == ErrorCode.none for r in results):
            wanted = _quota_state(alterations, results)
            await self._await_image(lambda image: all(
                {k: image.client_quotas.get(e, {}).get(k) for k in vals} == vals for e, vals in wanted.items()
            ))
        return results

    async def elect_leaders(
        self,
        election_type: ElectionType | int,  # a request's raw value passes through as is
        topic_partitions: Sequence[tuple[str, Sequence[int]]] | None,
        *,
        timeout_s: float | None = None,
    ) -> list[TopicElections]:
        """ElectLeaders on the active controller; once it answers, waits (bounded) until this node's
        image shows every election it made, so Metadata from this node names the new leaders."""
        before = self.loader.image

        async def local() -> Any:
            return await self.qc.elect_leaders(election_type, topic_partitions)

        def request() -> Any:
            return el_req.ElectLeadersRequest(
                election_type=election_type,
                topic_partitions=(
                    None
                    if topic_partitions is None
                    else tuple(el_req.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in topic_partitions)
                ),
                timeout=_TIMEOUT if timeout_s is None else datetime.timedelta(seconds=timeout_s),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        if isinstance(resp, list):
            return resp
        answer = elect_leaders.decode(resp)
        if answer.error == ErrorCode.request_timed_out:
            raise TimeoutError(next((p.message for t in answer.results for p in t.partitions if p.message), "timed out"))
        if answer.error != ErrorCode.none:
            raise NotControllerError(f"ElectLeaders failed on the controller: {answer.error.name}")
        elected = [
            TopicPartition(t.topic, p.partition)
            for t in answer.results
            for p in t.partitions
            if p.error == ErrorCode.none
        ]

        def epoch(img: MetadataImage, tp: TopicPartition) -> int:
            t = img.topics_by_name.get(tp.topic)
            reg = t.partitions.get(tp.partition) if t is not None else None
            return -1 if reg is None else reg.leader_epoch

        if elected:
            await self._await_image(lambda img: all(epoch(img, tp) > epoch(before, tp) for tp in elected))
        return list(answer.results)

    async def alter_partition_reassignments(
        self,
        topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]],
        *,
        timeout_s: float | None = None,
    ) -> list[tuple[str, list[ReassignmentResult]]]:
        """AlterPartitionReassignments on the active controller (committed when it answers)."""

        async def local() -> Any:
            return await self.qc.alter_partition_reassignments(topics)

        def request() -> Any:
            return apr_req.AlterPartitionReassignmentsRequest(
                timeout=_TIMEOUT if timeout_s is None else datetime.timedelta(seconds=timeout_s),
                topics=tuple(
                    apr_req.ReassignableTopic(
                        name=name,
                        partitions=tuple(
                            apr_req.ReassignablePartition(
                                partition_index=p, replicas=None if target is None else tuple(target)
                            )
                            for p, target in parts
                        ),
                    )
                    for name, parts in topics
                ),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        if isinstance(resp, list):
            return resp
        answer = reassignments.decode_alter(resp)
        self._raise_unavailable(answer.error, answer.message)
        return [(n, list(rs)) for n, rs in answer.results]

    async def list_partition_reassignments(
        self, topics: Sequence[tuple[str, Sequence[int]]] | None, *, timeout_s: float | None = None
    ) -> list[tuple[str, list[OngoingReassignment]]]:
        """ListPartitionReassignments on the active controller's image."""

        async def local() -> Any:
            return await self.qc.list_partition_reassignments(topics)

        def request() -> Any:
            return lpr_req.ListPartitionReassignmentsRequest(
                timeout=_TIMEOUT if timeout_s is None else datetime.timedelta(seconds=timeout_s),
                topics=None
                if topics is None
                else tuple(
                    lpr_req.ListPartitionReassignmentsTopics(name=n, partition_indexes=tuple(ps)) for n, ps in topics
                ),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        if isinstance(resp, list):
            return resp
        answer = reassignments.decode_list(resp)
        self._raise_unavailable(answer.error, answer.message)
        return [(n, list(ps)) for n, ps in answer.topics]

    @staticmethod
    def _raise_unavailable(error: ErrorCode, message: str | None) -> None:
        if error == ErrorCode.request_timed_out:
            raise TimeoutError(message or "timed out")
        if error != ErrorCode.none:
            raise NotControllerError(f"the controller answered {error.name}: {message}")

    async def allocate_producer_ids(self, broker_id: int, block_size: int = 1000) -> tuple[int, int]:
        async def local() -> Any:
            return await self.qc.allocate_producer_ids(broker_id, block_size)

        resp = await self._route(
            local,
            lambda: apid_req.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=-1),
            lambda r: r.error_code == ErrorCode.not_controller,
        )
        if isinstance(resp, tuple):
            return resp
        if resp.error_code != ErrorCode.none:
            raise TimeoutError(f"AllocateProducerIds failed: {resp.error_code}")
        return resp.producer_id_start, resp.producer_id_start + resp.producer_id_len

    async def change_raft_voters(self, req: Any) -> Any:
        """AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter v0 (KIP-853) on the active controller."""

        async def local() -> Any:
            return await voter_change_response(self.qc, req, self.cluster_id)

        moved = (ErrorCode.not_controller, ErrorCode.not_leader_or_follower)
        return await self._route(local, lambda: voter_change_request(req), lambda r: r.error_code in moved)

    async def update_kraft_version(self, level: int, validate_only: bool) -> tuple[ErrorCode, str | None]:
        """UpdateFeatures kraft.version (a static quorum made dynamic) on the active controller:
        (error, message)."""

        async def local() -> Any:
            return await kraft_version_response(self.qc, kraft_version_request(level, validate_only))

        resp = await self._route(local, lambda: kraft_version_request(level, validate_only),
                                 lambda r: r.results[0].error_code == ErrorCode.not_controller)
        return resp.results[0].error_code, resp.results[0].error_message

    async def describe_quorum(self) -> Any:
        """DescribeQuorumResponse v2 from the raft leader (as kafka-metadata-quorum.sh asks it)."""

        async def local() -> Any:
            return codec.encode_describe_quorum(self.raft.describe_quorum(), wall_clock_offset_ms())

        def request() -> Any:
            return dq_req.DescribeQuorumRequest(
                topics=(
                    dq_req.TopicData(
                        topic_name=codec.METADATA_TOPIC, partitions=(dq_req.PartitionData(partition_index=0),)
                    ),
                )
            )

        def not_leader(r: Any) -> bool:
            return any(p.error_code == ErrorCode.not_leader_or_follower for t in r.topics for p in t.partitions)

        return await self._route(local, request, not_leader)

    async def register_broker(
        self,
        *,
        broker_id: int,
        incarnation_id: str,
        endpoints: Sequence[tuple[str, str, int]],
        rack: str | None,
        log_dirs: Sequence[str],
        previous_broker_epoch: int = -1,
    ) -> int:
        """Register this broker (fenced); its broker epoch once this node's image shows it.
        `previous_broker_epoch`: the registration a clean shutdown ended (KIP-966), else -1."""

        async def local() -> Any:
            return await self.qc.register_broker(
                broker_id=broker_id, incarnation_id=incarnation_id, endpoints=endpoints, rack=rack, log_dirs=log_dirs,
                previous_broker_epoch=previous_broker_epoch,
            )

        def request() -> Any:
            return br_req.BrokerRegistrationRequest(
                broker_id=broker_id,
                cluster_id=self.cluster_id,
                incarnation_id=uuid_from_str(incarnation_id),
                listeners=tuple(
                    br_req.Listener(name=n, host=h, port=p, security_protocol=0) for n, h, p in endpoints
                ),
                features=(),
                rack=rack,
                log_dirs=tuple(uuid_from_str(d) for d in log_dirs),
                previous_broker_epoch=previous_broker_epoch,
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller)
        if isinstance(resp, int):
            return resp
        if resp.error_code != ErrorCode.none:
            raise RuntimeError(f"the controller refused this broker's registration: {ErrorCode(resp.error_code).name}")
        epoch = resp.broker_epoch
        await self._await_image(lambda img: broker_id in img.brokers and img.brokers[broker_id].epoch == epoch)
        return epoch

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem], timeout_s: float
    ) -> tuple[ErrorCode, dict[tuple[str, int], tuple[ErrorCode, int, int]]]:
        """Send a leader's ISR changes to the active controller: the top-level error and, per
        (topic id, partition), (error, leader epoch, partition epoch) after the change."""

        async def local() -> Any:
            error, results = await self.qc.alter_partition(broker_id, broker_epoch, items)
            return alter_partition_response(error, results)

        def request() -> Any:
            by_topic: dict[str, list[Any]] = {}
            for it in items:
                by_topic.setdefault(it.topic_id, []).append(
                    ap_req.PartitionData(
                        partition_index=it.partition,
                        leader_epoch=it.leader_epoch,
                        new_isr_with_epochs=tuple(ap_req.BrokerState(broker_id=b, broker_epoch=e) for b, e in it.new_isr),
                        partition_epoch=it.partition_epoch,
                    )
                )
            return ap_req.AlterPartitionRequest(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                topics=tuple(ap_req.TopicData(topic_id=uuid_from_str(t), partitions=tuple(ps)) for t, ps in by_topic.items()),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        out = {
            (uuid_to_str(t.topic_id) or "", p.partition_index): (ErrorCode(p.error_code), p.leader_epoch, p.partition_epoch)
            for t in resp.topics
            for p in t.partitions
        }
        return ErrorCode(resp.error_code), out

    async def broker_heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        want_fence: bool = False,
        want_shut_down: bool = False,
        offline_log_dirs: Sequence[str] = (),
        timeout_s: float,
    ) -> HeartbeatReply:
        async def local() -> Any:
            return await self.qc.broker_heartbeat(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                metadata_offset=metadata_offset,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
                offline_log_dirs=offline_log_dirs,
            )

        def request() -> Any:
            return bh_req.BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                current_metadata_offset=metadata_offset,
                want_fence=want_fence,
                want_shut_down=want_shut_down,
                offline_log_dirs=tuple(uuid_from_str(d) for d in offline_log_dirs),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        if isinstance(resp, HeartbeatReply):
            return resp
        return HeartbeatReply(ErrorCode(resp.error_code), resp.is_caught_up, resp.is_fenced, resp.should_shut_down)

    async def assign_replicas_to_dirs(
        self, *, broker_id: int, broker_epoch: int, assignments: Sequence[tuple[str, str, int]], timeout_s: float
    ) -> tuple[ErrorCode, dict[tuple[str, str, int], ErrorCode]]:
        """Send AssignReplicasToDirs (API 73) to the active controller: (directory id, topic id,
        partition) items; the top-level error and each item's."""

        async def local() -> Any:
            error, results = await self.qc.assign_replicas_to_dirs(broker_id, broker_epoch, assignments)
            return assign_replicas_to_dirs_response(error, results)

        def request() -> Any:
            return ard_req.AssignReplicasToDirsRequest(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                directories=tuple(
                    ard_req.DirectoryData(
                        id_=uuid_from_str(d),
                        topics=tuple(
                            ard_req.TopicData(
                                topic_id=uuid_from_str(t), partitions=tuple(ard_req.PartitionData(partition_index=p) for p, _ in ps)
                            )
                            for t, ps in topics.items()
                        ),
                    )
                    for d, topics in by_dir_and_topic([(d, t, p, None) for d, t, p in assignments]).items()
                ),
            )

        resp = await self._route(local, request, lambda r: r.error_code == ErrorCode.not_controller, timeout_s)
        out = {
            (uuid_to_str(d.id_), uuid_to_str(t.topic_id), p.partition_index): ErrorCode(p.error_code)
            for d in resp.directories
            for t in d.topics
            for p in t.partitions
        }
        return ErrorCode(resp.error_code), out


__all__ = ["ControllerClient"]


def _quota_state(alterations: Sequence[QuotaAlteration], results: Sequence[QuotaResult]) -> dict[Any, dict[str, float | None]]:
    """The quota values the successful alterations leave, by sorted entity (None: removed)."""
    done = {r.entity for r in results if r.error == ErrorCode.none}
    out: dict[Any, dict[str, float | None]] = {}
    for a in alterations:
        if a.entity in done:
            out.setdefault(tuple(sorted(a.entity)), {}).update(a.ops)
    return out
