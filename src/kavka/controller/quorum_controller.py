"""QuorumController: the controller's operations, committed through the raft metadata quorum.

It composes the control managers, as Kafka's QuorumController does:
`replication` (ReplicationControlManager: topics, partitions, ISR,
reassignments, elections, directories), `cluster` (ClusterControlManager:
broker registration and states) and `configuration`
(ConfigurationControlManager: dynamic configs); it owns what they must not
(the lock, the commit, broker sessions).

Every change goes the same way: a manager decides (pure: image in, records
and results out) -> the records are appended to the raft log as one
batch (atomic) -> the caller awaits their commit (the raft high watermark
passing the batch's last offset) -> its result is returned. Nothing is
applied before it is committed: the image is rebuilt only from committed
records, the same way on every node (`handle_commit`, this object is the
raft client's listener), so the image is always a function of the log.

Operations run one at a time (an asyncio lock), each deciding on the image
that includes every earlier operation's records, so two CreateTopics for one
name can never both succeed. An operation needs this node to be the raft
leader *and* caught up (its own epoch's LeaderChange record committed, so
the image holds everything earlier leaders committed): elsewhere it raises
`NotControllerError` (Kafka's NOT_CONTROLLER). A commit that does not come
within `timeout_s` raises `TimeoutError` (REQUEST_TIMED_OUT); one lost to a
leader change raises NotControllerError. The lock is held until the records
are committed (or leadership is lost), whatever happens to the caller: an
operation runs in a task of its own, which neither the caller's cancellation
(a client that closed its connection) nor its timeout ends -- releasing the
lock with appended but uncommitted records would let the next operation decide
on an image without them (two `__consumer_offsets` topics, once). A lost
leadership ends the wait (raft's check-quorum resigns a leader cut off from
the majority), and so does `timeout_s` (a stopping node), so the lock is
never held for long. An operation lost to a
leader change raises NotControllerError (the records may still commit under
the next leader, as in Kafka: a retried CreateTopics then answers
TOPIC_ALREADY_EXISTS).

The image it decides on is the node's MetadataLoader's (kavka.metadata.loader): the loader
replays every committed record, publishes the new image after each raft poll, and writes the
snapshots; `after_poll` (called by the driver after the loader's) completes the waiting operations
whose records the loader has applied. A QuorumController exists only on nodes whose
`process.roles` has `controller`; it is a raft listener only to hear leadership changes (which
fail the operations waiting for a commit that can no longer come).

Runs on the event-loop thread (the raft driver's).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from kavka.authorizer import Acl, AclFilter
from kavka.common import BrokerControlState, ConfigResourceType, ElectionType
from kavka.config import BrokerConfig
from kavka.controller import acl_control
from kavka.controller.cluster_control import ClusterControlManager
from kavka.controller.configuration_control import ConfigurationControlManager
from kavka.controller.heartbeats import CONNECTION_LOSS_GRACE_MS, BrokerSessions
from kavka.controller.liveness_probe import hold_probe
from kavka.controller.quota_control import QuotaAlteration, QuotaResult, alter_client_quotas
from kavka.controller.replication_control import ReplicationControlManager
from kavka.controller.results import (
    ApiResult,
    CreatedTopic,
    NewTopic,
    OngoingReassignment,
    ReassignmentResult,
    TopicElections,
)
from kavka.controller.scram_control import (
    ScramDeletion,
    ScramUpsertion,
    UserResult,
    alter_credentials,
)
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage, TopicImage
from kavka.metadata.loader import MetadataLoader
from kavka.raft.api import NotLeaderError, SnapshotId
from kavka.raft.client import RaftClient
from kavka.replication.alter_partition import AlterPartitionItem
from kavka.storage.meta_properties import generate_uuid

log = logging.getLogger("kavka.controller")

T = TypeVar("T")


# New Fetch requests (counted on arrival) from a broker's node since its heartbeat connection
# closed that prove the node alive: two, since one may have been on its way when it died. A live
# follower long-polls (fetch_max_wait_ms 500), so it sends two within the 1 s grace unless very
# loaded; then it is fenced as before and unfenced at its next heartbeat.
FETCHES_PROVING_LIFE = 2

class NotControllerError(Exception):
    """This node is not the active (caught-up leader) controller (Kafka's NOT_CONTROLLER)."""


# What a controller operation may raise besides a bug: the handler answers it per item.
UNAVAILABLE = (NotControllerError, TimeoutError)


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    """BrokerHeartbeatResponse's fields."""

    error: ErrorCode = ErrorCode.none
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    # Not on the wire: an answer given in this process (a combined node's own broker) is only as
    # fresh as the quorum's last contact with this controller (RaftClient.quorum_contact_ms).
    quorum_contact_ms: int | None = None


def unavailable_result(e: BaseException) -> ApiResult:
    """Kafka's answer when the controller could not decide or commit: NOT_CONTROLLER or REQUEST_TIMED_OUT."""
    code = ErrorCode.not_controller if isinstance(e, NotControllerError) else ErrorCode.request_timed_out
    return ApiResult(code, str(e) or type(e).__name__)


def _consume_exception(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class QuorumController:
    def __init__(
        self,
        config: BrokerConfig,
        raft: RaftClient,
        loader: MetadataLoader,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        wakeup: Callable[[], None] = lambda: None,
        timeout_s: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        bootstrap_records: Sequence[Any] = (),
    ) -> None:
        self.config = config
        self._monotonic = monotonic
        self.sessions = BrokerSessions(config["broker.session.timeout.ms"])
        self.raft = raft
        # The transport's peers whose controller listener refused a connection, with the raft
        # epoch it happened in (broker.raft_driver); see controller.heartbeats.
        self.refused_peers: Callable[[], Mapping[int, int]] = dict
        self._probes: dict[int, asyncio.Task[None]] = {}  # broker -> its held probe (_start_probe)
        # broker -> the Fetch requests its node had sent this raft leader when its heartbeat
        # connection closed; FETCHES_PROVING_LIFE more since, and it is alive
        self._fetches_at_loss: dict[int, int] = {}
        self._clock = clock
        self._wakeup = wakeup
        self.timeout_s = timeout_s
        rng = rng or random.Random()
        self.replication = ReplicationControlManager(
            config, new_uuid=generate_uuid, start_index=lambda n: rng.randrange(max(n, 1))
        )
        self.cluster = ClusterControlManager(self.replication)
        self.configuration = ConfigurationControlManager(config)
        self.loader = loader
        # Written with the first records of a new cluster (metadata.bootstrap: --add-scram users).
        self.bootstrap_records: list[Any] = list(bootstrap_records)
        self._lock = asyncio.Lock()
        self._stopped: str | None = None  # fail_pending(): the raft driver is stopping
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        # Automatic preferred-leader rebalance: the next check, on the monotonic clock; None
        # until this node is the active controller (the first check is one interval after).
        self._next_balance_ms: int | None = None
        raft.register_listener(self)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def image(self) -> MetadataImage:
        """The image operations decide on: the node's loader's, every committed record in it."""
        return self.loader.image

    # ---- raft listener: leadership only (the records are the loader's) -------------------

    def handle_commit(self, base_offset: int, epoch: int, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
        pass

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: Any) -> None:
        pass

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if leader_id is not None:
            log.info("metadata quorum leader: node %d in epoch %d", leader_id, epoch)
        if leader_id != self.raft.node_id:
            self.sessions.deactivate()
            for _, fut in self._waiters:
                if not fut.done():
                    fut.set_exception(NotControllerError(f"leadership moved to {leader_id} in epoch {epoch}"))
            self._waiters.clear()

    def fail_pending(self, reason: str) -> None:
        """This node is stopping its raft driver: operations waiting for a commit that can no
        longer come end now (NotControllerError) and release the lock, so handlers still being
        served do not wait out `timeout_s`."""
        self._stopped = reason  # and operations from now on are refused
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(NotControllerError(reason))
        self._waiters.clear()

    def after_poll(self) -> None:
        """After the loader published what the last poll committed: complete the operations it covered."""
        if self._waiters:
            applied = self.loader.applied_offset
            done = [w for w in self._waiters if w[0] <= applied]
            if done:
                self._waiters = [w for w in self._waiters if w[0] > applied]
                for _, fut in done:
                    if not fut.done():
                        fut.set_result(None)

    # ---- readiness -------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """Leader with its own epoch's first record committed (and so replayed)."""
        return self.raft.leader_ready()

    @property
    def applied_offset(self) -> int:
        return self.loader.applied_offset

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `condition()` holds after some poll; False at the deadline."""
        return await self.loader.wait_for(condition, timeout_s)

    # ---- operations ------------------------------------------------------------------------

    async def _run(self, decide: Callable[[MetadataImage], tuple[Sequence[Any], T]]) -> T:
        task = asyncio.ensure_future(self._run_exclusive(decide))
        task.add_done_callback(_consume_exception)  # the caller may be gone when it ends
        # Not wait_for: Python 3.11's returns the result when the task ends in the same loop
        # iteration as the caller's cancellation, losing the cancel (a raft driver's stop() then
        # waited forever on a connection handler that went back to reading).
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(task)
        except TimeoutError:
            raise TimeoutError(f"the metadata operation did not commit in {self.timeout_s:.0f}s") from None

    async def _run_exclusive(self, decide: Callable[[MetadataImage], tuple[Sequence[Any], T]]) -> T:
        async with self._lock:
            if self._stopped is not None:
                raise NotControllerError(self._stopped)
            if not self.raft.leader_ready():
                if self.raft.leader_and_epoch().leader_id != self.raft.node_id:
                    raise NotControllerError(f"the active controller is {self.raft.leader_and_epoch().leader_id}")
                # Elected, but its epoch's first record is not committed yet: wait briefly.
                if not await self.wait_for(self.raft.leader_ready, min(self.timeout_s, 5.0)):
                    raise NotControllerError("this controller has not caught up with the metadata log")
            image = self.image
            records, result = decide(image)
            if records and image.offset < 0 and self.bootstrap_records:
                # The first records ever written: the bootstrap metadata (`kavka storage format
                # --add-scram`) go first, in the same batch, as Kafka's first controller writes them.
                records = [*self.bootstrap_records, *records]
            if records:
                await self._commit(records)
            return result

    async def _commit(self, records: Sequence[Any]) -> None:
        try:
            last = self.raft.append([mr.encode(r) for r in records], now_ms=self._now_ms())
        except NotLeaderError as e:
            raise NotControllerError(str(e)) from None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((last, fut))
        self._wakeup()
        # Committed, failed by a leader change (handle_leader_change), or -- a quorum that stalls,
        # a node stopping its raft driver -- given up after timeout_s, releasing the lock.
        try:
            async with asyncio.timeout(self.timeout_s):
                await fut
        except TimeoutError:
            raise TimeoutError(f"metadata records up to offset {last} not committed in {self.timeout_s:.0f}s") from None

    # ---- KIP-853: voter changes ------------------------------------------------------------

    async def change_voters(self, change: Callable[[], tuple[ErrorCode, int]], *, wait_commit: bool = True) -> ErrorCode:
        """AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter: `change()` is the raft core's
        add_voter/remove_voter/update_voter (its checks and error codes, on the core's own clock:
        never this controller's wall clock); the answer comes once
        the VotersRecord commits (REQUEST_TIMED_OUT if it does not within the operation timeout).
        Under the operation lock, so it never interleaves with a metadata operation's decision."""
        async with self._lock:
            if self._stopped is not None:
                raise NotControllerError(self._stopped)
            error, offset = change()
            epoch = self.raft.leader_and_epoch().epoch
            self._wakeup()
        if error != ErrorCode.none or offset < 0 or not wait_commit:
            return error

        def outcome() -> ErrorCode | None:
            # Our record, not merely the offset: a new leader may have written another one there
            # (our uncommitted change truncated away), and its commit must not answer for ours.
            entry = self.raft.log.read(offset, 1) if offset >= self.raft.log.start_offset else []
            if not entry or entry[0].epoch != epoch:
                return ErrorCode.not_leader_or_follower  # lost with our leadership
            return ErrorCode.none if self.raft.high_watermark > offset else None

        if not await self.wait_for(lambda: outcome() is not None, self.timeout_s):
            return ErrorCode.request_timed_out
        result = outcome()
        return ErrorCode.request_timed_out if result is None else result

    # ---- brokers: registration, heartbeats, fencing, controlled shutdown ---------------------

    def _session_ms(self) -> int:
        return int(self._monotonic() * 1000)

    def _ensure_sessions(self) -> None:
        if not self.sessions.active:
            # Brokers on the other voter nodes must show they are alive within the activation
            # grace (controller.heartbeats): a live voter fetches from this new leader at once.
            voters = set(self.raft.voters) - {self.raft.node_id}
            self.sessions.activate(self.image.brokers, self._session_ms(), must_confirm=voters)
            log.info("active controller in epoch %d: brokers on nodes %s must show they are alive within %d ms",
                     self.raft.leader_and_epoch().epoch, sorted(voters), self.sessions.activation_grace_ms)
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass  # no event loop: a test driving the controller's decisions alone
            else:
                for broker_id in sorted(voters & set(self.image.brokers)):
                    self._start_probe(broker_id)
        self.sessions.confirm(self.raft.fetched_this_epoch())
        epoch = self.raft.leader_and_epoch().epoch
        self.sessions.refused(n for n, e in self.refused_peers().items() if e == epoch)

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
        """Register (fenced) and return the broker epoch (the offset of its RegisterBrokerRecord)."""

        def decide(image: MetadataImage) -> tuple[list[Any], None]:
            records = self.cluster.register_broker(
                image,
                broker_id=broker_id,
                incarnation_id=incarnation_id,
                endpoints=tuple(tuple(e) for e in endpoints),  # type: ignore[misc]
                rack=rack,
                log_dirs=tuple(log_dirs),
                previous_broker_epoch=previous_broker_epoch,
            )
            return records, None

        await self._run(decide)
        self._ensure_sessions()
        self.sessions.touch(broker_id, self._session_ms())
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.incarnation_id != incarnation_id:
            raise NotControllerError(f"broker {broker_id}'s registration was replaced while it committed")
        return reg.epoch

    async def broker_heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        want_fence: bool = False,
        want_shut_down: bool = False,
        connection: Hashable | None = None,
        offline_log_dirs: Sequence[str] = (),
    ) -> HeartbeatReply:
        """Kafka's BrokerHeartbeat: renews the session, and may fence, unfence or shut down the broker.
        `connection` identifies the connection it came over (None: this process), see heartbeats."""

        def decide(image: MetadataImage) -> tuple[list[Any], HeartbeatReply | BrokerControlState]:
            b = image.brokers.get(broker_id)
            if b is None:
                return [], HeartbeatReply(ErrorCode.broker_id_not_registered)
            if b.epoch != broker_epoch:
                return [], HeartbeatReply(ErrorCode.stale_broker_epoch)
            self._ensure_sessions()
            self.sessions.touch(broker_id, self._session_ms(), connection)
            # KIP-858: offline dirs first; the state change is decided on the image they leave.
            dir_records = self.replication.directories_offline(image, broker_id, offline_log_dirs)
            if dir_records:
                log.warning(
                    "broker %d reports log dirs %s offline: %d partition changes",
                    broker_id, ", ".join(offline_log_dirs), len(dir_records) - 1,
                )
                delta = MetadataDelta(image)
                for r in dir_records:
                    delta.replay(r, image.offset)
                image = delta.apply()
            state = self.cluster.next_broker_state(
                image, broker_id, metadata_offset=metadata_offset, want_fence=want_fence, want_shut_down=want_shut_down
            )
            records = dir_records + self.cluster.broker_state_records(image, broker_id, state)
            if records:
                log.info("broker %d (epoch %d): %s", broker_id, broker_epoch, state.value.lower().replace("_", " "))
            return records, state

        state = await self._run(decide)
        if isinstance(state, HeartbeatReply):
            return state
        b = self.image.brokers[broker_id]
        return HeartbeatReply(
            ErrorCode.none,
            is_caught_up=metadata_offset >= b.epoch,
            is_fenced=b.fenced,
            should_shut_down=state == BrokerControlState.SHUTDOWN_NOW,
            quorum_contact_ms=self.raft.quorum_contact_ms(),
        )

    def broker_connection_lost(self, connection: Hashable) -> None:
        """A connection brokers heartbeat over closed (controller listener); see heartbeats."""
        if not self.sessions.active:
            return
        for broker_id in self.sessions.connection_lost(connection, self._session_ms()):
            self._fetches_at_loss[broker_id] = self.raft.fetch_requests_from(broker_id)
            log.info("broker %d: its heartbeat connection closed", broker_id)
            self._start_probe(broker_id)

    def _start_probe(self, broker_id: int) -> None:
        """A held probe (controller.liveness_probe) of the broker's listener -- the address other
        brokers reach it at (this node's inter-broker listener), else its first -- while a short
        rule waits on it: refused or reset, it is fenced at the next check; taken and kept open,
        it is alive (paused or busy) and left to its session; not taken within the grace, the
        grace decides."""
        b = self.image.brokers.get(broker_id)
        if b is None or not b.endpoints:
            return
        ibl = self.config.outgoing_inter_broker_listener()
        _, host, port = next((e for e in b.endpoints if e[0] == ibl), b.endpoints[0])
        if not host:
            return
        sessions = self.sessions
        sessions.probe_started(broker_id)

        def dead() -> None:
            if sessions.awaits(broker_id):
                log.info("broker %d: its listener %s:%d refuses or resets connections", broker_id, host, port)
            sessions.probe_dead(broker_id)

        task = asyncio.get_running_loop().create_task(hold_probe(
            host, port, connect_timeout_s=CONNECTION_LOSS_GRACE_MS / 1000, max_hold_s=sessions.session_timeout_ms / 1000,
            still_needed=lambda: sessions.active and sessions.awaits(broker_id),
            on_taken=lambda: sessions.probe_taken(broker_id), on_refused=dead, on_reset=dead,
            on_unreachable=lambda: sessions.probe_ended(broker_id),
        ))
        old = self._probes.pop(broker_id, None)
        if old is not None:
            old.cancel()  # its callbacks run in it: cancelled, it reports nothing more
        self._probes[broker_id] = task

        def ended(t: asyncio.Task[None]) -> None:
            if self._probes.get(broker_id) is t:
                del self._probes[broker_id]
                sessions.probe_ended(broker_id)

        task.add_done_callback(ended)

    async def fence_stale_brokers(self) -> list[int]:
        """Fence every unfenced broker whose session expired (called periodically; active controller only)."""
        if not self.is_active:
            return []
        self._ensure_sessions()
        fenced = []
        now = self._session_ms()
        self.sessions.checked(now)
        for broker_id in self.sessions.expired(self.image, now):

            def decide(image: MetadataImage, broker_id: int = broker_id) -> tuple[list[Any], bool]:
                self.sessions.confirm(self.raft.fetched_this_epoch())
                if self.sessions.lost_connection(broker_id) and self.raft.fetch_requests_from(broker_id) >= (
                    self._fetches_at_loss.get(broker_id, 0) + FETCHES_PROVING_LIFE
                ):
                    self.sessions.fetching([broker_id])
                if broker_id not in self.sessions.expired(image, self._session_ms()):
                    return [], False  # a heartbeat came while we waited for the lock
                return self.cluster.broker_state_records(image, broker_id, BrokerControlState.FENCED), True

            try:
                lost = self.sessions.lost_connection(broker_id)
                silent = self.sessions.unconfirmed(broker_id)
                refused = self.sessions.refused_connection(broker_id)
                dead = self.sessions.refuses_connections(broker_id)
                if await self._run(decide):
                    last = self.sessions.last_contact_ms(broker_id)
                    if refused:
                        log.warning("fenced broker %d: its node refused this new active controller's connection "
                                    "(nothing listens on its controller listener) and has not fetched from it",
                                    broker_id)
                        fenced.append(broker_id)
                        continue
                    if silent:
                        log.warning("fenced broker %d: its node neither heartbeated nor fetched from this new active "
                                    "controller within %d ms of its activation", broker_id,
                                    self.sessions.activation_grace_ms)
                        fenced.append(broker_id)
                        continue
                    if lost:
                        log.warning("fenced broker %d: its heartbeat connection closed and it did not heartbeat "
                                    "again (last heartbeat %s ms ago)%s", broker_id,
                                    "?" if last is None else self._session_ms() - last,
                                    "; its listener refuses connections" if dead else "")
                        fenced.append(broker_id)
                        continue
                    log.warning(
                        "fenced broker %d: no heartbeat for %s ms (broker.session.timeout.ms=%d)",
                        broker_id,
                        "?" if last is None else self._session_ms() - last,
                        self.sessions.session_timeout_ms,
                    )
                    fenced.append(broker_id)
            except UNAVAILABLE:
                break
        return fenced

    async def allocate_producer_ids(self, broker_id: int, block_size: int = 1000) -> tuple[int, int]:
        """A fresh block [start, end) of producer ids (Kafka's AllocateProducerIds, KIP-730)."""

        def decide(image: MetadataImage) -> tuple[list[Any], tuple[int, int]]:
            start = image.next_producer_id
            return [mr.ProducerIdsRecord(broker_id, start + block_size)], (start, start + block_size)

        return await self._run(decide)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> tuple[ErrorCode, list[tuple[AlterPartitionItem, ErrorCode, Any]]]:
        """AlterPartition from a partition leader: a top-level error, and per partition its error and
        its registration after the change (committed before this returns)."""

        def decide(image: MetadataImage) -> tuple[list[Any], Any]:
            b = image.brokers.get(broker_id)
            if b is None or (broker_epoch >= 0 and b.epoch != broker_epoch):
                return [], (ErrorCode.stale_broker_epoch, [])
            records: list[Any] = []
            out = []
            for item in items:
                recs, error, reg = self.replication.alter_partition(
                    image,
                    broker_id=broker_id,
                    broker_epoch=broker_epoch,
                    topic_id=item.topic_id,
                    partition=item.partition,
                    leader_epoch=item.leader_epoch,
                    partition_epoch=item.partition_epoch,
                    new_isr=item.new_isr,
                )
                records.extend(recs)
                out.append((item, error, reg))
            return records, (ErrorCode.none, out)

        return await self._run(decide)

    async def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int, assignments: Sequence[tuple[str, str, int]]
    ) -> tuple[ErrorCode, list[tuple[str, str, int, ErrorCode]]]:
        """AssignReplicasToDirs (API 73, KIP-858): (directory id, topic id, partition) items from a
        broker; the top-level error and each item's, once the changes are committed."""

        def decide(image: MetadataImage) -> tuple[list[Any], Any]:
            records, error, results = self.replication.assign_replicas_to_dirs(
                image, broker_id=broker_id, broker_epoch=broker_epoch, assignments=assignments
            )
            return records, (error, results)

        return await self._run(decide)

    async def elect_leaders(
        self, election_type: ElectionType, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[TopicElections]:
        """ElectLeaders (API 43): the elections committed, then each partition's result."""
        return await self._run(lambda image: self.replication.elect_leaders(image, election_type, topic_partitions))

    async def maybe_balance_leaders(self, now_ms: int | None = None) -> int:
        """The automatic preferred-leader rebalance, polled periodically on every controller (Kafka's
        leader imbalance check): on the active controller, every
        `leader.imbalance.check.interval.seconds`, elect preferred leaders for the brokers whose
        imbalance exceeds `leader.imbalance.per.broker.percentage`. Returns how many partitions
        changed leader. `now_ms` is the monotonic clock (injected; defaults to the controller's)."""
        if not self.config["auto.leader.rebalance.enable"]:
            return 0
        if not self.is_active:
            self._next_balance_ms = None
            return 0
        now = self._session_ms() if now_ms is None else now_ms
        interval_ms = int(self.config["leader.imbalance.check.interval.seconds"]) * 1000
        if self._next_balance_ms is None:
            self._next_balance_ms = now + interval_ms
            return 0
        if now < self._next_balance_ms:
            return 0
        percentage = int(self.config["leader.imbalance.per.broker.percentage"])

        def decide(image: MetadataImage) -> tuple[list[Any], tuple[int, bool, dict[int, float]]]:
            imbalance = self.replication.imbalanced_brokers(image, percentage)
            records, more = self.replication.balance_leaders(image, percentage=percentage)
            return records, (len(records), more, imbalance)

        try:
            elected, more, imbalance = await self._run(decide)
        except UNAVAILABLE:
            return 0
        # A capped pass goes on at the next poll; otherwise wait a whole interval.
        self._next_balance_ms = now if more else now + interval_ms
        if elected:
            log.info(
                "leader imbalance %s above leader.imbalance.per.broker.percentage=%d: "
                "elected the preferred leader of %d partitions",
                ", ".join(f"broker {b} {r:.0%}" for b, r in imbalance.items()),
                percentage,
                elected,
            )
        return elected

    async def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False) -> list[CreatedTopic]:
        return await self._run(lambda image: self.replication.create_topics(image, topics, validate_only=validate_only))

    async def delete_topics(self, topics: Sequence[TopicImage]) -> None:
        def decide(image: MetadataImage) -> tuple[list[Any], None]:
            live = [t for t in topics if t.topic_id in image.topics_by_id]
            return self.replication.delete_topics(image, live), None

        await self._run(decide)

    async def create_partitions(
        self, name: str, count: int, assignments: Sequence[Sequence[int]] | None, *, validate_only: bool
    ) -> ApiResult:
        def decide(image: MetadataImage) -> tuple[list[Any], ApiResult]:
            records, result = self.replication.create_partitions(image, name, count, assignments)
            return (records if result.ok and not validate_only else []), result

        return await self._run(decide)

    async def replica_placement(
        self, num_partitions: int, replication_factor: int, *, force_simple: bool, node_ids: Sequence[int]
    ) -> tuple[ApiResult, list[list[int]]]:
        """CreateReplicaPlacement (KIP-879): the placer's answer on the current image; writes nothing."""

        def decide(image: MetadataImage) -> tuple[list[Any], tuple[ApiResult, list[list[int]]]]:
            return [], self.replication.replica_placement(
                image, num_partitions, replication_factor, force_simple=force_simple, node_ids=node_ids
            )

        return await self._run(decide)

    async def alter_configs(
        self,
        resource_type: ConfigResourceType,
        resource_name: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        incremental: bool,
        validate_only: bool,
    ) -> ApiResult:
        def decide(image: MetadataImage) -> tuple[list[Any], ApiResult]:
            records, result = self.configuration.alter_configs(image, resource_type, resource_name, ops, incremental=incremental)
            if not result.ok or validate_only:
                return [], result
            return [*records, *self.replication.clear_elr_on_min_isr_change(image, records)], result

        return await self._run(decide)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[UserResult]:
        """AlterUserScramCredentials (API 51, KIP-554): the records committed, then each user's result."""
        return await self._run(lambda image: alter_credentials(image, deletions, upsertions))

    async def create_acls(self, acls: Sequence[Acl]) -> list[acl_control.AclResult]:
        """CreateAcls (API 30): the new ACLs committed, then each binding's result."""
        return await self._run(lambda image: acl_control.create_acls(image, acls, generate_uuid))

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[acl_control.AclResult]:
        """DeleteAcls (API 31): the matched ACLs removed, then each filter's result."""
        return await self._run(lambda image: acl_control.delete_acls(image, filters))

    async def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], *, validate_only: bool) -> list[QuotaResult]:
        """AlterClientQuotas (API 49, KIP-546): the records committed (none if validate_only), then
        each entity's result."""

        def decide(image: MetadataImage) -> tuple[list[Any], list[QuotaResult]]:
            records, results = alter_client_quotas(image, alterations)
            return ([] if validate_only else records), results

        return await self._run(decide)

    async def alter_partition_reassignments(
        self, topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]
    ) -> list[tuple[str, list[ReassignmentResult]]]:
        """AlterPartitionReassignments (API 45): the changes committed, then each partition's result."""
        return await self._run(lambda image: self.replication.alter_partition_reassignments(image, topics))

    async def list_partition_reassignments(
        self, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[tuple[str, list[OngoingReassignment]]]:
        """ListPartitionReassignments (API 46), on the active controller's image."""
        return await self._run(lambda image: ([], self.replication.list_partition_reassignments(image, topics)))
