"""Topics, partitions and their replicas: the controller's decisions about them (Kafka's ReplicationControlManager).

`ReplicationControlManager` owns every decision that writes a TopicRecord, PartitionRecord,
RemoveTopicRecord or PartitionChangeRecord: CreateTopics, CreatePartitions, DeleteTopics,
CreateReplicaPlacement (KIP-879), a leader's AlterPartition (ISR changes, KIP-497/841/903),
AlterPartitionReassignments and ListPartitionReassignments (KIP-455), ElectLeaders (KIP-183,
KIP-460), the automatic preferred-leader rebalance, the partition changes when a broker is fenced,
unfenced or shuts down (for the ClusterControlManager), and the directories' partition changes
(KIP-858: offline dirs, AssignReplicasToDirs). Error codes and messages follow Kafka's.

Pure: image in, records and results out; it never writes anything itself (the QuorumController
commits what it returns). Uuids and the seed of a CreateReplicaPlacement come from injected
callables (a topic's placement seed is derived from its name: placement.topic_seed). Replicas are
placed by the `broker.replica.placer` loaded here, on the controller only (KIP-879). Called on the
active controller's event loop, under the QuorumController's lock.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

# Imported for its registration: config.validate_tiered_topic applies the rule tiered storage owns.
import kavka.tiered.remote_log_rules  # noqa: F401
from kavka.common import ConfigResourceType, DirectoryId, ElectionType
from kavka.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_tiered_topic,
    validate_topic_configs,
)
from kavka.controller import directories, partition_change
from kavka.controller.placement import (
    ClusterView,
    PlacementError,
    PlacementSpec,
    ReplicaPlacer,
    SimplePlacer,
    load_placer,
    run_placer,
    topic_seed,
)
from kavka.controller.results import (
    ApiResult,
    CreatedTopic,
    NewTopic,
    OngoingReassignment,
    PartitionElection,
    ReassignmentResult,
    TopicElections,
)
from kavka.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kavka.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

log = logging.getLogger("kavka.controller")

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Kafka's ApiError(Errors.X) messages for the per-partition election errors.
_ELECTION_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "The preferred leader was not available.",
    ErrorCode.eligible_leaders_not_available: "Eligible topic partition leaders are not available.",
}
# Kafka's QuorumController caps one rebalance pass (maxElectionsPerImbalance) and reschedules
# at once when the cap was reached; kavka's QuorumController runs the next pass at its next poll.
MAX_ELECTIONS_PER_IMBALANCE = 1000


def validate_topic_name(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}"
    if not _LEGAL_TOPIC.match(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def _change_record(topic_id: str, old: PartitionRegistration, new: PartitionRegistration) -> PartitionChangeRecord | None:
    if new.leader == old.leader and new.isr == old.isr and new.elr == old.elr and new.last_known_elr == old.last_known_elr:
        return None
    if new.leader >= 0 and new.leader != old.leader and new.leader not in old.isr:
        log.warning(
            "unclean leader election for partition %d of topic id %s: broker %d was not in the ISR %s "
            "and leads now; records only the ISR had are lost (unclean.leader.election.enable)",
            old.partition_id, topic_id, new.leader, list(old.isr),
        )
    return PartitionChangeRecord(
        topic_id,
        old.partition_id,
        leader=new.leader if new.leader != old.leader else None,
        isr=tuple(new.isr) if new.isr != old.isr else None,
        eligible_leader_replicas=new.elr if new.elr != old.elr else None,
        last_known_elr=new.last_known_elr if new.last_known_elr != old.last_known_elr else None,
    )


def _assignment(reg: PartitionRegistration) -> partition_change.Assignment:
    return partition_change.Assignment(
        reg.replicas, reg.isr, reg.leader, reg.removing_replicas, reg.adding_replicas
    )


def _assignment_record(
    topic_id: str, old: PartitionRegistration, new: partition_change.Assignment
) -> tuple[PartitionChangeRecord | None, PartitionRegistration]:
    """The PartitionChangeRecord that takes `old` to `new` (None if nothing changes) and the
    registration after it, as MetadataDelta.replay will compute it."""
    leader: int | None = new.leader if new.leader != old.leader else None
    if leader is None and not set(old.replicas) <= set(new.replicas):
        # PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: replicas that
        # leave are fenced by a new leader epoch, even when the leader stays.
        leader = old.leader
    replicas = new.replicas if new.replicas != old.replicas else None
    # KIP-966: a replica that leaves the assignment leaves the ELR and the last-known ELR.
    elr = tuple(r for r in old.elr if r in new.replicas)
    last_known_elr = tuple(r for r in old.last_known_elr if r in new.replicas)
    directories = None
    if replicas is not None and old.directories:
        by_broker = dict(zip(old.replicas, old.directories, strict=False))
        directories = tuple(by_broker.get(r, DirectoryId.UNASSIGNED) for r in new.replicas)
    rec = PartitionChangeRecord(
        topic_id,
        old.partition_id,
        leader=leader,
        isr=new.isr if new.isr != old.isr else None,
        replicas=replicas,
        directories=directories,
        removing_replicas=new.removing if new.removing != old.removing_replicas else None,
        adding_replicas=new.adding if new.adding != old.adding_replicas else None,
        eligible_leader_replicas=elr if elr != old.elr else None,
        last_known_elr=last_known_elr if last_known_elr != old.last_known_elr else None,
    )
    if all(
        getattr(rec, f) is None
        for f in ("leader", "isr", "replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr")
    ):
        return None, old
    after = dataclasses.replace(
        old,
        replicas=new.replicas,
        isr=new.isr,
        leader=new.leader,
        removing_replicas=new.removing,
        adding_replicas=new.adding,
        elr=elr,
        last_known_elr=last_known_elr,
        directories=old.directories if directories is None else directories,
        leader_epoch=old.leader_epoch + (1 if leader is not None else 0),
        partition_epoch=old.partition_epoch + 1,
    )
    return rec, after


class ReplicationControlManager:
    """Topics, partitions, ISR, reassignments, elections, directories: image in, records and results out."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        new_uuid: Callable[[], str],
        start_index: Callable[[int], int] = lambda n: 0,
        placer: ReplicaPlacer | None = None,
    ) -> None:
        self.config = config
        self._new_uuid = new_uuid
        self._start_index = start_index
        # KIP-879: the placer is loaded here, on the controller only. A plugin that cannot be loaded
        # fails each placement with its reason (INVALID_REPLICA_ASSIGNMENT) instead of the controller.
        self._placer_name = config["broker.replica.placer"] if placer is None else type(placer).__name__
        self._placer: ReplicaPlacer = placer or SimplePlacer()
        self._placer_problem: PlacementError | None = None
        if placer is None:
            try:
                self._placer = load_placer(self._placer_name)
            except PlacementError as e:
                log.error("%s", e)
                self._placer_problem = e

    def place_replicas(
        self, image: MetadataImage, spec: PlacementSpec, broker_ids: Sequence[int]
    ) -> list[list[int]]:
        """The configured placer's checked answer for the spec; PlacementError (with its Kafka code) if none."""
        if self._placer_problem is not None and not spec.force_simple:
            raise self._placer_problem
        view = ClusterView(
            racks={b: r.rack for b, r in image.brokers.items()},
            assignments={
                name: [t.partitions[p].replicas for p in sorted(t.partitions)]
                for name, t in image.topics_by_name.items()
            },
        )
        return run_placer(self._placer, self._placer_name, spec, view, broker_ids)

    def replica_placement(
        self, image: MetadataImage, num_partitions: int, replication_factor: int, *, force_simple: bool, node_ids: Sequence[int]
    ) -> tuple[ApiResult, list[list[int]]]:
        """CreateReplicaPlacement (KIP-879): the placer's answer for a would-be topic; creates nothing."""
        if num_partitions <= 0:
            return ApiResult(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."), []
        if replication_factor <= 0:
            return ApiResult(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."), []
        unknown = [b for b in node_ids if b not in image.brokers]
        if unknown:
            return ApiResult(ErrorCode.invalid_replica_assignment, f"Broker {unknown[0]} is not registered."), []
        brokers = sorted(set(node_ids)) if node_ids else image.usable_brokers()
        spec = PlacementSpec(num_partitions, replication_factor, force_simple=force_simple, seed=self._start_index(len(brokers)))
        try:
            return ApiResult(), self.place_replicas(image, spec, brokers)
        except PlacementError as e:
            return ApiResult(e.code, str(e)), []

    # ------------------------------------------------------------------ topics

    def create_topics(
        self, image: MetadataImage, topics: Sequence[NewTopic], *, validate_only: bool
    ) -> tuple[list[Any], list[CreatedTopic]]:
        records: list[Any] = []
        results: list[CreatedTopic] = []
        names = [t.name for t in topics]
        taken = {_collision_key(n): n for n in image.topics_by_name}
        for t in topics:
            if names.count(t.name) > 1:
                results.append(CreatedTopic(t.name, ApiResult(ErrorCode.invalid_request, "Duplicate topic name.")))
                continue
            res = self._create_one(image, t, taken)
            if isinstance(res, CreatedTopic):
                results.append(res)
                continue
            recs, created = res
            taken[_collision_key(t.name)] = t.name
            if not validate_only:
                records.extend(recs)
            results.append(created)
        return records, results

    def _create_one(
        self, image: MetadataImage, t: NewTopic, taken: dict[str, str]
    ) -> CreatedTopic | tuple[list[Any], CreatedTopic]:
        def fail(code: ErrorCode, msg: str) -> CreatedTopic:
            return CreatedTopic(t.name, ApiResult(code, msg))

        problem = validate_topic_name(t.name)
        if problem:
            return fail(ErrorCode.invalid_topic_exception, problem)
        if t.name in image.topics_by_name:
            return fail(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
        other = taken.get(_collision_key(t.name))
        if other is not None:
            return fail(
                ErrorCode.invalid_topic_exception,
                f"Topic '{t.name}' collides with existing topic: {other}",
            )
        try:
            overrides = validate_topic_configs(t.configs)
        except ConfigError as e:
            return fail(ErrorCode.invalid_config, str(e))
        problem = validate_tiered_topic(self.config, t.configs)
        if problem:
            return fail(ErrorCode.invalid_config, problem)
        brokers = image.usable_brokers()  # Kafka places replicas on unfenced brokers only
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return fail(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                )
            parts = sorted(t.assignments)
            if parts != list(range(len(parts))):
                return fail(ErrorCode.invalid_replica_assignment, "Partitions should be a consecutive 0-based integer sequence")
            assignment = [list(t.assignments[p]) for p in parts]
            for reps in assignment:
                if not reps or len(set(reps)) != len(reps):
                    return fail(ErrorCode.invalid_replica_assignment, f"Invalid replica assignment {reps}")
                missing = [r for r in reps if r not in image.brokers]
                if missing:
                    return fail(ErrorCode.invalid_replica_assignment, f"The manual partition assignment includes broker {missing[0]}, but no such broker is registered.")
            rf = len(assignment[0])
        else:
            num = t.num_partitions if t.num_partitions != -1 else self.config["num.partitions"]
            rf = t.replication_factor if t.replication_factor != -1 else self.config["default.replication.factor"]
            if num <= 0:
                return fail(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                return fail(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value.")
            if rf > len(brokers):
                return fail(
                    ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {len(brokers)} broker(s) are registered and unfenced.",
                )
            try:
                spec = PlacementSpec(num, rf, seed=topic_seed(t.name), topic=t.name)
                assignment = self.place_replicas(image, spec, brokers)
            except PlacementError as e:
                return fail(e.code, str(e))
        topic_id = self._new_uuid()
        records: list[Any] = [TopicRecord(t.name, topic_id)]
        for key, value in sorted(t.configs.items()):
            if value is not None:
                records.append(ConfigRecord(ConfigResourceType.TOPIC, t.name, key, TOPIC_CONFIGS[key].config.render(overrides[key])))
        usable = set(brokers)
        for p, reps in enumerate(assignment):
            # Kafka's ReplicationControlManager: the ISR is the replicas that are unfenced now,
            # and the first of them leads.
            isr = tuple(r for r in reps if r in usable)
            if not isr:
                return fail(
                    ErrorCode.invalid_replica_assignment,
                    f"All brokers specified in the partition assignment for partition {p} are fenced or in controlled shutdown.",
                )
            records.append(
                PartitionRecord(
                    topic_id, p, tuple(reps), isr, isr[0], 0, 0,
                    directories=directories.default_directories(image.brokers, reps),
                )
            )
        return records, CreatedTopic(t.name, ApiResult(), topic_id, len(assignment), rf)

    def delete_topics(self, image: MetadataImage, topics: Sequence[TopicImage]) -> list[Any]:
        return [RemoveTopicRecord(t.topic_id) for t in topics]

    def create_partitions(
        self,
        image: MetadataImage,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
    ) -> tuple[list[Any], ApiResult]:
        t = image.topics_by_name.get(name)
        if t is None:
            return [], ApiResult(ErrorCode.unknown_topic_or_partition, None)  # no message, as Kafka answers
        current = len(t.partitions)
        if count < current:
            return [], ApiResult(ErrorCode.invalid_partitions, f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            return [], ApiResult(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
        rf = len(t.partitions[0].replicas) if t.partitions else 1
        added = count - current
        if assignments:
            if len(assignments) != added:
                return [], ApiResult(ErrorCode.invalid_replica_assignment, f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided.")
            new = [list(a) for a in assignments]
            for reps in new:
                if any(r not in image.brokers for r in reps) or len(set(reps)) != len(reps) or len(reps) != rf:
                    return [], ApiResult(ErrorCode.invalid_replica_assignment, f"Invalid replica assignment {reps}")
        else:
            brokers = image.usable_brokers()
            if rf > len(brokers):
                return [], ApiResult(ErrorCode.invalid_replication_factor, f"Unable to replicate the partition {rf} time(s): only {len(brokers)} broker(s) are registered and unfenced.")
            try:
                spec = PlacementSpec(added, rf, start_partition=current, seed=topic_seed(name), topic=name)
                new = self.place_replicas(image, spec, brokers)
            except PlacementError as e:
                return [], ApiResult(e.code, str(e))
        usable = set(image.usable_brokers())
        recs = []
        for i, r in enumerate(new):
            isr = tuple(b for b in r if b in usable)
            if not isr:
                return [], ApiResult(
                    ErrorCode.invalid_replica_assignment,
                    f"All brokers specified in the partition assignment for partition {current + i} are fenced or in controlled shutdown.",
                )
            recs.append(
                PartitionRecord(
                    t.topic_id, current + i, tuple(r), isr, isr[0], 0, 0,
                    directories=directories.default_directories(image.brokers, r),
                )
            )
        return recs, ApiResult()

    # ------------------------------------------------------------------ brokers' partitions

    def leave_partitions(self, image: MetadataImage, broker_id: int, *, unclean_shutdown: bool = False) -> list[Any]:
        """The partition changes when a broker is fenced, shuts down or registers again (Kafka's
        handleBrokerFenced, handleBrokerInControlledShutdown, handleBrokerUncleanShutdown): the
        broker leaves every ISR (without ELR, unless it is the last member; with ELR, into the ELR
        when the ISR falls below min ISR) and every leadership moves to a live ISR member -- with
        the ISR empty, a live ELR member; with unclean election on, any live replica --, or the
        partition goes offline (leader -1) until one returns. `unclean_shutdown` (it registers
        again after an unclean shutdown, KIP-966): it leaves every ELR too."""
        live = [b for b in image.usable_brokers() if b != broker_id]
        records: list[Any] = []
        change = partition_change.on_broker_unclean_shutdown if unclean_shutdown else partition_change.on_broker_fenced
        for t in image.topics_by_id.values():
            unclean: bool | None = None
            for reg in t.partitions.values():
                if broker_id in reg.isr or reg.leader == broker_id or (unclean_shutdown and broker_id in reg.elr):
                    if unclean is None:
                        unclean = self.unclean_election(image, t.name)
                    new = change(reg, broker_id, live=live, unclean=unclean, elr_min_isr=self.elr_min_isr(image, t))
                    rec = _change_record(t.topic_id, reg, new)
                    if rec is not None:
                        records.append(rec)
        return records

    def handle_broker_unfenced(self, image: MetadataImage, broker_id: int) -> list[Any]:
        """The partition changes when a fenced broker is unfenced (Kafka's handleBrokerUnfenced): each
        offline partition it can lead -- it is in the ISR, or unclean election is on and it is a
        replica -- with its replica's directory online, elects a leader again."""
        b = image.brokers[broker_id]
        records: list[Any] = []
        live = set(image.usable_brokers()) | {broker_id}
        for t in image.topics_by_id.values():
            for reg in t.partitions.values():
                unclean = reg.leader == -1 and broker_id in reg.replicas and self.unclean_election(image, t.name)
                eligible = broker_id in reg.isr or (
                    not reg.isr and (broker_id in reg.elr or (not reg.elr and reg.last_known_elr == (broker_id,)))
                )
                if reg.leader == -1 and (eligible or unclean) and directories.replica_online(reg, b):
                    new = partition_change.on_broker_unfenced(
                        reg, live=live, unclean=unclean, elr_min_isr=self.elr_min_isr(image, t)
                    )
                    rec = _change_record(t.topic_id, reg, new)
                    if rec is not None:
                        records.append(rec)
        return records

    @staticmethod
    def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
        return any(reg.leader == broker_id for t in image.topics_by_id.values() for reg in t.partitions.values())

    def unclean_election(self, image: MetadataImage, topic: str) -> bool:
        """unclean.leader.election.enable for `topic`: its override, else the cluster-wide dynamic
        broker default, else this controller's static config (Kafka's order)."""
        raw = image.topic_configs(topic).get("unclean.leader.election.enable")
        if raw is None:
            raw = image.configs.get((ConfigResourceType.BROKER, ""), {}).get("unclean.leader.election.enable")
        if raw is None:
            return bool(self.config["unclean.leader.election.enable"])
        return raw.strip().lower() == "true"

    @property
    def elr_enabled(self) -> bool:
        """KIP-966's eligible leader replicas (eligible.leader.replicas.enable)."""
        return bool(self.config["eligible.leader.replicas.enable"])

    def elr_min_isr(self, image: MetadataImage, topic: TopicImage) -> int | None:
        """The min ISR the ELR rules use for `topic` (Kafka's getTopicEffectiveMinIsr): its
        min.insync.replicas (override, else the cluster-wide dynamic default, else this
        controller's static config), capped by its replication factor; None when ELR is off."""
        if not self.elr_enabled:
            return None
        raw = image.topic_configs(topic.name).get("min.insync.replicas")
        if raw is None:
            raw = image.configs.get((ConfigResourceType.BROKER, ""), {}).get("min.insync.replicas")
        min_isr = int(raw) if raw is not None else int(self.config["min.insync.replicas"])
        first = topic.partitions.get(0)
        return min(min_isr, len(first.replicas)) if first is not None else min_isr

    def clear_elr_on_min_isr_change(self, image: MetadataImage, records: Sequence[Any]) -> list[Any]:
        """Config records that change min.insync.replicas -- of a topic, or the cluster-wide default
        (every topic) -- clear the ELR and last-known ELR of the partitions concerned (Kafka 4.1,
        KIP-966): who is eligible was decided against the old minimum."""
        topics: set[str] = set()
        for r in records:
            if isinstance(r, ConfigRecord) and r.name == "min.insync.replicas":
                if r.resource_type == ConfigResourceType.TOPIC:
                    topics.add(r.resource_name)
                elif r.resource_type == ConfigResourceType.BROKER and r.resource_name == "":
                    topics.update(image.topics_by_name)
        out: list[Any] = []
        for name in sorted(topics):
            t = image.topics_by_name.get(name)
            for pid in sorted(t.partitions) if t is not None else ():
                reg = t.partitions[pid]  # type: ignore[union-attr]
                if reg.elr or reg.last_known_elr:
                    out.append(PartitionChangeRecord(
                        t.topic_id, pid,  # type: ignore[union-attr]
                        eligible_leader_replicas=() if reg.elr else None,
                        last_known_elr=() if reg.last_known_elr else None,
                    ))
        return out

    # ------------------------------------------------------------------ AlterPartition (ISR)

    def alter_partition(
        self,
        image: MetadataImage,
        *,
        broker_id: int,
        broker_epoch: int,
        topic_id: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[tuple[int, int]],
    ) -> tuple[list[Any], ErrorCode, PartitionRegistration | None]:
        """A leader's AlterPartition for one partition (Kafka's ReplicationControlManager.alterPartition,
        KIP-497, KIP-841, KIP-903): the records, the partition's error, and its registration after.

        `new_isr` is (broker id, broker epoch) pairs; an epoch of -1 is not checked. A member that is
        fenced, shutting down, or registered with another epoch than the leader saw is INELIGIBLE_REPLICA.
        """
        t = image.topics_by_id.get(topic_id)
        if t is None:
            return [], ErrorCode.unknown_topic_id, None
        reg = t.partitions.get(partition)
        if reg is None:
            return [], ErrorCode.unknown_topic_or_partition, None
        for member, epoch in new_isr:
            b = image.brokers.get(member)
            if member not in reg.isr and (b is None or (epoch >= 0 and b.epoch != epoch)):
                return [], ErrorCode.ineligible_replica, reg
        error, new = partition_change.alter_partition(
            reg,
            leader_id=broker_id,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            new_isr=tuple(m for m, _ in new_isr),
            live=image.usable_brokers(),
            elr_min_isr=self.elr_min_isr(image, t),
        )
        if error != ErrorCode.none:
            return [], error, reg
        if reg.reassigning:
            # PartitionChangeBuilder.completeReassignmentIfNeeded: the ISR this leader proposes may
            # be the one that holds every target replica.
            a = partition_change.maybe_complete(dataclasses.replace(_assignment(reg), isr=new.isr))
            if not a.removing and not a.adding:
                a = partition_change.elect_for(a, live=image.usable_brokers())
                log.info("reassignment of partition %d of topic id %s completed: replicas %s", partition, topic_id, list(a.replicas))
            rec, after = _assignment_record(topic_id, reg, a)
            return ([rec] if rec is not None else []), ErrorCode.none, after
        rec = _change_record(topic_id, reg, new)
        if rec is None:
            return [], ErrorCode.none, reg
        return [rec], ErrorCode.none, new  # type: ignore[return-value]

    # ------------------------------------------------------------------ reassignments (KIP-455)

    def alter_partition_reassignments(
        self, image: MetadataImage, topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]
    ) -> tuple[list[Any], list[tuple[str, list[ReassignmentResult]]]]:
        """AlterPartitionReassignments (Kafka's ReplicationControlManager.alterPartitionReassignments):
        per partition a target replica list, or None to cancel the reassignment in progress. Returns
        the records (one PartitionChangeRecord per partition that changes) and each partition's result."""
        records: list[Any] = []
        out: list[tuple[str, list[ReassignmentResult]]] = []
        live = image.usable_brokers()
        for name, parts in topics:
            results = []
            for pid, target in parts:
                error, message, rec = self._reassign_one(image, name, pid, target, live)
                if rec is not None:
                    records.append(rec)
                results.append(ReassignmentResult(pid, error, message))
            out.append((name, results))
        return records, out

    def _reassign_one(
        self, image: MetadataImage, name: str, pid: int, target: Sequence[int] | None, live: Sequence[int]
    ) -> tuple[ErrorCode, str | None, PartitionChangeRecord | None]:
        t = image.topics_by_name.get(name)
        if t is None:
            return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}.", None
        reg = t.partitions.get(pid)
        if reg is None:
            return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{pid}.", None
        if target is None:
            if not reg.reassigning:
                return ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.", None
            a, unclean = partition_change.revert(_assignment(reg))
            allowed = self.unclean_election(image, name)
            if unclean and not allowed:
                return (
                    ErrorCode.invalid_replica_assignment,
                    f"Unable to revert partition assignment for {name}:{pid} because it would require an unclean leader election.",
                    None,
                )
            a = partition_change.elect_for(a, live=live)
            if a.leader == -1 and allowed:
                first = next((r for r in a.replicas if r in live), -1)
                if first != -1:
                    a = dataclasses.replace(a, leader=first, isr=(first,))
            log.info("reassignment of %s-%d cancelled: back to replicas %s", name, pid, list(a.replicas))
        else:
            target = list(target)
            if not target:
                return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list.", None
            seen: set[int] = set()
            for b in sorted(target):
                if b not in image.brokers:
                    return (
                        ErrorCode.invalid_replica_assignment,
                        f"The manual partition assignment includes broker {b}, but no such broker is registered.",
                        None,
                    )
                if b in seen:
                    return (
                        ErrorCode.invalid_replica_assignment,
                        f"The manual partition assignment includes the broker {b} more than once.",
                        None,
                    )
                seen.add(b)
            moving = partition_change.reassignment_target(reg.replicas, target)
            a = dataclasses.replace(moving, isr=reg.isr, leader=reg.leader)
            done = partition_change.maybe_complete(a)  # nothing to catch up: done at once
            a = partition_change.elect_for(done, live=live) if done is not a else a
            log.info(
                "reassignment of %s-%d to %s: replicas %s, adding %s, removing %s",
                name, pid, target, list(a.replicas), list(a.adding), list(a.removing),
            )
        rec, _ = _assignment_record(t.topic_id, reg, a)
        return ErrorCode.none, None, rec

    def list_partition_reassignments(
        self, image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[tuple[str, list[OngoingReassignment]]]:
        """ListPartitionReassignments: the partitions with a reassignment in progress, of every topic
        (None) or of the named partitions; unknown names and idle partitions are left out (Kafka)."""
        wanted: Sequence[tuple[str, Sequence[int]]]
        if topics is None:
            wanted = [(n, sorted(image.topics_by_name[n].partitions)) for n in sorted(image.topics_by_name)]
        else:
            wanted = topics
        out = []
        for name, pids in wanted:
            t = image.topics_by_name.get(name)
            if t is None:
                continue
            ongoing = []
            for pid in pids:
                reg = t.partitions.get(pid)
                if reg is not None and reg.reassigning:
                    ongoing.append(OngoingReassignment(pid, reg.replicas, reg.adding_replicas, reg.removing_replicas))
            if ongoing:
                out.append((name, ongoing))
        return out

    # ------------------------------------------------------------------ elections

    def elect_leaders(
        self,
        image: MetadataImage,
        election_type: ElectionType,
        topic_partitions: Sequence[tuple[str, Sequence[int]]] | None,
    ) -> tuple[list[Any], list[TopicElections]]:
        """ElectLeaders (Kafka's ReplicationControlManager.electLeaders): the records and, per topic,
        each partition's result. `topic_partitions` None means every partition of every topic;
        then, as Kafka does, partitions whose election was not needed are left out of the answer
        (their topic is still listed). The caller has checked `election_type` is one of ElectionType."""
        live = set(image.usable_brokers())
        records: list[Any] = []
        out: list[TopicElections] = []
        if topic_partitions is None:
            for name in sorted(image.topics_by_name):
                t = image.topics_by_name[name]
                results = []
                for p in sorted(t.partitions):
                    r = self._elect_one(image, name, p, election_type, live, records)
                    if r.error != ErrorCode.election_not_needed:
                        results.append(r)
                out.append(TopicElections(name, tuple(results)))
            return records, out
        for name, partitions in topic_partitions:
            out.append(
                TopicElections(
                    name, tuple(self._elect_one(image, name, p, election_type, live, records) for p in partitions)
                )
            )
        return records, out

    def _elect_one(
        self, image: MetadataImage, topic: str, partition: int, election_type: ElectionType, live: set[int], records: list[Any]
    ) -> PartitionElection:
        t = image.topics_by_name.get(topic)
        if t is None:
            return PartitionElection(partition, ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}")
        reg = t.partitions.get(partition)
        if reg is None:
            return PartitionElection(
                partition, ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
            )
        elr_min_isr = self.elr_min_isr(image, t)
        if election_type == ElectionType.UNCLEAN:
            error, new = partition_change.elect_unclean(reg, live=live, elr_min_isr=elr_min_isr)
        else:
            error, new = partition_change.elect_preferred(reg, live=live, elr_min_isr=elr_min_isr)
        if error != ErrorCode.none:
            return PartitionElection(partition, error, _ELECTION_MESSAGES.get(error))
        rec = _change_record(t.topic_id, reg, new)
        if rec is None:  # nothing would change: Kafka's builder returns no record
            error = (
                ErrorCode.eligible_leaders_not_available
                if election_type == ElectionType.UNCLEAN
                else ErrorCode.preferred_leader_not_available
            )
            return PartitionElection(partition, error, _ELECTION_MESSAGES[error])
        records.append(rec)
        return PartitionElection(partition, ErrorCode.none, None)

    def imbalanced_brokers(self, image: MetadataImage, percentage: int) -> dict[int, float]:
        """Per broker, the share of the partitions it is the preferred replica of that another broker
        (or nobody) leads -- only brokers above `percentage` percent (the leader imbalance ratio
        of Kafka's KafkaController.checkAndTriggerAutoLeaderRebalance)."""
        preferred: dict[int, int] = {}
        not_led: dict[int, int] = {}
        for t in image.topics_by_id.values():
            for reg in t.partitions.values():
                b = partition_change.preferred_replica(reg)
                if b == -1:
                    continue
                preferred[b] = preferred.get(b, 0) + 1
                if reg.leader != b:
                    not_led[b] = not_led.get(b, 0) + 1
        ratios = {b: not_led.get(b, 0) / n for b, n in preferred.items()}
        return {b: r for b, r in sorted(ratios.items()) if r * 100 > percentage}

    def balance_leaders(
        self, image: MetadataImage, *, percentage: int, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
    ) -> tuple[list[Any], bool]:
        """The automatic preferred-leader rebalance (auto.leader.rebalance.enable): for every broker
        whose leader imbalance ratio exceeds `percentage` percent, move leadership back to it on each
        of its preferred partitions where it is live and in the ISR. Returns the records and whether
        the cap was reached (more may be due at once)."""
        brokers = self.imbalanced_brokers(image, percentage)
        if not brokers:
            return [], False
        live = set(image.usable_brokers())
        records: list[Any] = []
        for t in image.topics_by_id.values():
            for reg in t.partitions.values():
                b = partition_change.preferred_replica(reg)
                if b not in brokers or b not in live or reg.leader == b or b not in reg.isr:
                    continue
                error, new = partition_change.elect_preferred(reg, live=live, elr_min_isr=self.elr_min_isr(image, t))
                if error != ErrorCode.none or new.leader != b:
                    continue
                rec = _change_record(t.topic_id, reg, new)
                if rec is not None:
                    records.append(rec)
                    if len(records) >= max_elections:
                        return records, True
        return records, False

    # ------------------------------------------------------------------ directories (KIP-858)

    def directories_offline(self, image: MetadataImage, broker_id: int, offline: Sequence[str]) -> list[Any]:
        """A heartbeat reported `offline` dirs (Kafka's ReplicationControlManager.handleDirectoriesOffline):
        the registration drops them, and each of the broker's replicas in them leaves its ISR (unless
        it is the last member) and its leadership moves, with the fencing rules. Nothing when every
        reported dir is already known offline (heartbeats repeat the list until the broker restarts)."""
        b = image.brokers.get(broker_id)
        if b is None:
            return []
        gone = directories.new_offline_dirs(b, offline)
        if not gone:
            return []
        records: list[Any] = [
            BrokerRegistrationChangeRecord(
                broker_id, b.epoch, log_dirs=tuple(d for d in b.log_dirs if d not in gone)
            )
        ]
        live = [x for x in image.usable_brokers() if x != broker_id]
        for t in image.topics_by_id.values():
            unclean: bool | None = None
            for reg in t.partitions.values():
                if broker_id not in reg.replicas or directories.directory_of(reg, broker_id) not in gone:
                    continue
                if unclean is None:
                    unclean = self.unclean_election(image, t.name)
                new = partition_change.on_broker_fenced(
                    reg, broker_id, live=live, unclean=unclean, elr_min_isr=self.elr_min_isr(image, t)
                )
                rec = _change_record(t.topic_id, reg, new)
                if rec is not None:
                    records.append(rec)
        return records

    def assign_replicas_to_dirs(
        self,
        image: MetadataImage,
        *,
        broker_id: int,
        broker_epoch: int,
        assignments: Sequence[tuple[str, str, int]],
    ) -> tuple[list[Any], ErrorCode, list[tuple[str, str, int, ErrorCode]]]:
        """AssignReplicasToDirs (API 73, Kafka's handleAssignReplicasToDirs): the broker says which
        dir holds each of its replicas; `assignments` is (directory id, topic id, partition).
        Returns the records, the top-level error and per item its error. A replica reported in a dir
        the broker does not list online is handled as if that dir had just failed."""
        b = image.brokers.get(broker_id)
        if b is None:
            return [], ErrorCode.broker_id_not_registered, []
        if broker_epoch != b.epoch:
            return [], ErrorCode.stale_broker_epoch, []
        records: list[Any] = []
        results: list[tuple[str, str, int, ErrorCode]] = []
        changed: dict[tuple[str, int], PartitionRegistration] = {}
        for dir_id, topic_id, partition in assignments:
            t = image.topics_by_id.get(topic_id)
            if t is None:
                results.append((dir_id, topic_id, partition, ErrorCode.unknown_topic_id))
                continue
            reg = changed.get((topic_id, partition)) or t.partitions.get(partition)
            if reg is None:
                results.append((dir_id, topic_id, partition, ErrorCode.unknown_topic_or_partition))
                continue
            if broker_id not in reg.replicas:
                results.append((dir_id, topic_id, partition, ErrorCode.not_leader_or_follower))
                continue
            results.append((dir_id, topic_id, partition, ErrorCode.none))
            if directories.directory_of(reg, broker_id) == dir_id:
                continue
            new_dirs = directories.with_directory(reg, broker_id, dir_id)
            changed[(topic_id, partition)] = replace(reg, directories=new_dirs)
            records.append(PartitionChangeRecord(topic_id, partition, directories=new_dirs))
            if dir_id not in b.log_dirs and dir_id not in DirectoryId.RESERVED:
                # Kafka: an assignment to a dir that is not online takes the replica offline.
                unclean = self.unclean_election(image, t.name)
                live = [x for x in image.usable_brokers() if x != broker_id]
                new = partition_change.on_broker_fenced(
                    reg, broker_id, live=live, unclean=unclean, elr_min_isr=self.elr_min_isr(image, t)
                )
                rec = _change_record(topic_id, reg, new)
                if rec is not None:
                    records.append(rec)
        return records, ErrorCode.none, results
