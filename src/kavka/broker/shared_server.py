"""SharedServer and ControllerServer: the parts of a node its roles share, and the controller role.

Kafka's SharedServer and ControllerServer. Whatever `process.roles` says, a node has the
`SharedServer`: the metadata log (`raft.file_log`, under `metadata.log.dir`) and its quorum-state,
the raft client, the `RaftDriver` that moves its messages over the controller listener, the
`MetadataLoader` that turns committed records into the node's MetadataImage and publishes it,
and the `ControllerClient` through which every metadata change goes to the active controller. A
node whose roles include `controller` also has a `ControllerServer`: the QuorumController that
decides on the loader's image, the ControllerApis that serve the controller listener, and the
controller's periodic work (broker sessions, the automatic leader rebalance). The broker role's
parts are built by BrokerNode (broker/node.py), which owns both of these.

Order: `open()` opens the metadata log and builds every part (no sockets); `start()` starts the
raft driver; `stop()` fails the controller's waiting operations and stops the driver; `close()`
closes the controller client's connections and the metadata log, last.

Event-loop thread only.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.update_raft_voter.v0 import request as urv_req

from kavka.broker.controller_apis import RPCS, ControllerApis
from kavka.broker.controller_client import ControllerClient
from kavka.broker.raft_driver import RaftDriver
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.config import BrokerConfig, parse_voters
from kavka.controller.quorum_controller import NotControllerError, QuorumController
from kavka.metadata.bootstrap import BOOTSTRAP_FILE, read_bootstrap
from kavka.metadata.loader import MetadataLoader, Publisher
from kavka.metadata.records import MetadataRecordError
from kavka.protocol.messages import uuid_from_str
from kavka.raft.bootstrap import read_quorum_bootstrap
from kavka.raft.client import RaftClient, RaftConfig
from kavka.raft.file_log import FileReplicatedLog, NoSnapshotError
from kavka.raft.snapshot import CorruptSnapshotError
from kavka.raft.state import FileQuorumStateStore
from kavka.raft.voters import SUPPORTED_KRAFT_VERSIONS, VoterEndpoint, VoterNode, VoterSet
from kavka.storage.meta_properties import read_meta_properties

log = logging.getLogger(__name__)


class StartupError(RuntimeError):
    """The node cannot start; the message says why and names what to fix."""


class ControllerServer:
    """The controller role: the QuorumController, the APIs of the controller listener, and the
    controller's periodic work."""

    def __init__(
        self, config: BrokerConfig, raft: RaftClient, loader: MetadataLoader, *, cluster_id: str,
        clock: Callable[[], float], wakeup: Callable[[], None],
    ) -> None:
        self.config = config
        try:
            bootstrap = read_bootstrap(config.metadata_log_dir)
        except (CorruptSnapshotError, MetadataRecordError) as e:
            raise StartupError(f"{config.metadata_log_dir / BOOTSTRAP_FILE} is not readable bootstrap metadata: {e}; "
                               "format the node again") from None
        self.quorum_controller = QuorumController(config, raft, loader, clock=clock, wakeup=wakeup, bootstrap_records=bootstrap)
        self.apis = ControllerApis(self.quorum_controller, cluster_id=cluster_id)

    def periodic_tasks(self) -> list[tuple[int, Callable[[], Any], str]]:
        """(interval ms, function, name) of the controller's periodic work; each acts only on the
        active controller."""
        c = self.config
        qc = self.quorum_controller
        return [
            # Fence brokers whose heartbeats stopped (broker.session.timeout.ms).
            (min(250, c["broker.session.timeout.ms"] // 4), qc.fence_stale_brokers, "broker-sessions"),
            # Preferred leaders back every leader.imbalance.check.interval.seconds (the controller
            # keeps the schedule on its own clock; this only asks whether a check is due).
            (min(1000, int(c["leader.imbalance.check.interval.seconds"]) * 1000), qc.maybe_balance_leaders, "leader-balance"),
        ]

    def stop(self) -> None:
        self.quorum_controller.fail_pending("this node is shutting down")


class SharedServer:
    """The metadata log, raft, the metadata loader and the controller client: every node's."""

    def __init__(
        self, config: BrokerConfig, *, cluster_id: str, clock: Callable[[], float],
        controller_security: ClientSecurity = PLAINTEXT, listener_tls: Mapping[str, Any] | None = None,
        listener_sasl: Mapping[str, Any] | None = None,
        cluster_action: Callable[[str, str], bool] | None = None,
    ) -> None:
        # (principal, host) -> may ClusterAction on the Cluster: the controller listener's check.
        self.cluster_action = cluster_action
        self.listener_sasl = dict(listener_sasl or {})  # SASL listeners' ListenerSasl: the controller listener's, if SASL
        self.config = config
        self.controller_security = controller_security  # how this node reaches the controllers' listener
        self.listener_tls = dict(listener_tls or {})  # SSL listeners' ListenerTls: the controller listener's, if SSL
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self._clock = clock
        roles = set(config["process.roles"])
        self.is_broker = "broker" in roles
        self.is_controller = "controller" in roles
        # KIP-853: controller.quorum.bootstrap.servers under ids -2, -3, ... (as Kafka numbers them);
        # the raft driver adds the voters' addresses to this same map as it learns them. This node
        # is not among them: a broker-only node of a dynamic quorum must not count itself a voter
        # (it would stand for election in a quorum of itself and a bootstrap server).
        self.dynamic_quorum = bool(config["controller.quorum.bootstrap.servers"])
        self.voters = parse_voters(config["controller.quorum.voters"])
        if not self.voters and not self.dynamic_quorum:
            self.voters = {self.node_id: ("127.0.0.1", 0)}  # a combined node alone, its own quorum
        for i, server in enumerate(config["controller.quorum.bootstrap.servers"]):
            host, _, port = server.strip().rpartition(":")
            self.voters[-2 - i] = (host.strip("[]"), int(port))
        self.controller_server: ControllerServer | None = None  # where process.roles has controller

    def open(self, publishers: list[Publisher]) -> None:
        """Open the metadata log and build the parts; `publishers` get every published image."""
        c = self.config
        self._open_raft()
        # The metadata plane, on every node: committed records -> the image -> the publishers.
        self.metadata_loader = MetadataLoader(
            self.raft,
            snapshot_bytes=int(c["metadata.log.max.record.bytes.between.snapshots"]),
            snapshot_interval_ms=int(c["metadata.log.max.snapshot.interval.ms"]),
            clock=self._clock,
            write_snapshot=lambda *a: self.raft_driver.write_snapshot(*a),
        )
        for publisher in publishers:
            self.metadata_loader.add_publisher(publisher)
        if self.is_controller:
            self.controller_server = ControllerServer(
                c, self.raft, self.metadata_loader, cluster_id=self.cluster_id, clock=self._clock,
                wakeup=lambda: self.raft_driver.wakeup(),
            )
        ctl = self.controller_listener()
        self.raft_driver = RaftDriver(
            self.raft,
            host=ctl.host if ctl else "127.0.0.1",
            port=ctl.port if ctl else 0,
            peers=self.voters,
            listen=ctl is not None and self.is_controller,
            after_poll=self._after_poll,
            # A broker-only node is an observer of the quorum: it answers no controller requests.
            controller_apis=self.controller_server.apis if self.controller_server else None,
            rpc_schemas=RPCS,
            security=self.controller_security,
            server_tls=self.listener_tls.get(ctl.name) if ctl is not None else None,
            server_sasl=self.listener_sasl.get(ctl.name) if ctl is not None else None,
            cluster_action=self.cluster_action,
            connections_max_idle_ms=c["connections.max.idle.ms"],
        )
        if self.controller_server is not None:
            driver = self.raft_driver
            self.controller_server.quorum_controller.refused_peers = lambda: driver.refused
        if ctl is not None:
            self.raft_driver.listener_name = ctl.name
        if ctl is not None and self.raft.kraft_version >= 1:
            self.raft_driver.advertised = (ctl.name, ctl.host or "127.0.0.1", ctl.port)
        # What every handler calls: local on the active controller, an RPC to it elsewhere.
        self.controller = ControllerClient(
            self.quorum_controller,
            self.metadata_loader,
            self.raft,
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            voters=self.voters,
            security=self.controller_security,
        )

    def controller_endpoints(self) -> tuple[VoterEndpoint, ...]:
        """This controller's endpoints as a voter lists them (KIP-853): each of
        controller.listener.names, advertised if `advertised.listeners` names it, an empty host
        as localhost -- what `kavka metadata-quorum add-controller` sends for it."""
        names = [n.upper() for n in self.config["controller.listener.names"]]
        found = {e.name: e for e in self.config.listeners}
        if self.config.values["advertised.listeners"]:
            found.update({e.name: e for e in self.config.advertised_listeners})
        return tuple(VoterEndpoint(found[n].name, found[n].host or "localhost", found[n].port) for n in names if n in found)

    def update_voter_period_ms(self) -> int:
        """How often a voter checks that the voter set lists its endpoints: Kafka's FollowerState
        updateVoterPeriodMs, three fetch timeouts (a few rounds of Fetch first)."""
        return 3 * int(self.config["controller.quorum.fetch.timeout.ms"])

    async def update_voter_endpoints(self) -> None:
        """KIP-853: a voter whose entry in the voter set lists other endpoints than its own (it
        restarted on another controller-listener address) sends UpdateRaftVoter to the leader, as
        Kafka's KafkaRaftClient does every updateVoterPeriodMs until the set is right. The leader
        checks it (same id and directory id, no other change in flight, kraft.version 1) and
        commits a new VotersRecord; until then other nodes may reach this one at its old address."""
        raft = self.raft
        directory = raft.config.directory_id
        if raft.kraft_version < 1 or directory is None:
            return
        me = VoterNode(self.node_id, directory, self.controller_endpoints())
        if not me.endpoints or not raft.voter_set().needs_update(me):
            return
        req = urv_req.UpdateRaftVoterRequest(
            cluster_id=self.cluster_id,
            current_leader_epoch=raft.leader_and_epoch().epoch,
            voter_id=self.node_id,
            voter_directory_id=uuid_from_str(directory),
            listeners=tuple(urv_req.Listener(name=e.name, host=e.host, port=e.port) for e in me.endpoints),
            k_raft_version_feature=urv_req.KRaftVersionFeature(
                min_supported_version=SUPPORTED_KRAFT_VERSIONS[0], max_supported_version=SUPPORTED_KRAFT_VERSIONS[-1]
            ),
        )
        listed = raft.voter_set().get(self.node_id)
        try:
            resp = await self.controller.change_raft_voters(req)
        except (OSError, TimeoutError, RuntimeError, NotControllerError) as e:
            log.info("UpdateRaftVoter (this voter's endpoints %s) not answered: %s; trying again", me.endpoints, e)
            return
        log.info("UpdateRaftVoter: the voter set listed this voter at %s; asked for %s: %s",
                 listed.endpoints if listed else (), me.endpoints, resp.error_code.name)

    @property
    def quorum_controller(self) -> QuorumController | None:
        return self.controller_server.quorum_controller if self.controller_server else None

    def _after_poll(self) -> None:
        self.metadata_loader.after_poll()  # publish first: the controller's waiters read the image
        if self.controller_server is not None:
            self.controller_server.quorum_controller.after_poll()

    def controller_listener(self) -> Any:
        """The listener of `controller.listener.names` the raft driver serves, or None."""
        names = {n.upper() for n in self.config["controller.listener.names"]}
        ctl = [e for e in self.config.listeners if e.name in names]
        if not ctl or (self.is_broker and len(ctl) == len(self.config.listeners)):
            return None  # a sole voter may name its only listener CONTROLLER and serve clients on it
        return ctl[0]

    def _open_raft(self) -> None:
        """The metadata log, its quorum-state and the raft client (no I/O beyond the files)."""
        c = self.config
        voters = tuple(sorted(self.voters))
        try:
            self.metadata_log = FileReplicatedLog.open(c.metadata_log_dir, now_ms=int(self._clock() * 1000))
        except NoSnapshotError as e:
            raise StartupError(f"metadata.log.dir: {e}") from None
        store = FileQuorumStateStore(self.metadata_log.log.dir / "quorum-state", voters)
        stored = store.stored_voters()
        bootstrap_voters, formatted_dynamic = self._quorum_bootstrap(voters)
        # kraft.version 1 from the start for a node formatted so, or reaching the quorum through
        # bootstrap servers (a broker-only node has no bootstrap checkpoint): it learns the voters
        # from the leader's log, and asks the bootstrap servers until then.
        dynamic = formatted_dynamic or self.dynamic_quorum
        if stored is not None and stored != voters and not dynamic:
            self.metadata_log.close()
            raise StartupError(
                f"controller.quorum.voters lists voters {list(voters)} but this node's quorum-state "
                f"({store.path}) was written by the quorum {list(stored)}: a voter set cannot change "
                "by editing the config (upgrade to a dynamic quorum, kafka-features upgrade --feature "
                "kraft.version=1, then add and remove controllers with kavka metadata-quorum)"
            )
        self.raft = RaftClient(
            RaftConfig(
                node_id=self.node_id,
                voters=voters,
                cluster_id=self.cluster_id,
                # Sent with every Fetch (KIP-853 ReplicaDirectoryId) even by a static quorum's
                # voters: the leader that upgrades kraft.version names each voter by its disk.
                directory_id=self._directory_id(),
                bootstrap_voters=bootstrap_voters,
                dynamic=dynamic,
                election_timeout_ms=c["controller.quorum.election.timeout.ms"],
                election_backoff_max_ms=c["controller.quorum.election.backoff.max.ms"],
                fetch_timeout_ms=c["controller.quorum.fetch.timeout.ms"],
                request_timeout_ms=c["controller.quorum.request.timeout.ms"],
                retry_backoff_ms=c["controller.quorum.retry.backoff.ms"],
            ),
            self.metadata_log,
            store,
            random.Random(),
            now_ms=int(time.monotonic() * 1000),
            # the driver's clock is the event loop's, time.monotonic()
            wall_clock_offset_ms=int(time.time() * 1000) - int(time.monotonic() * 1000),
        )

    def _directory_id(self) -> str | None:
        """The directory id of the metadata log dir (None in a meta.properties without one)."""
        try:
            return read_meta_properties(self.config.metadata_log_dir).directory_id or None
        except (OSError, ValueError, RuntimeError):
            return None

    def _quorum_bootstrap(self, voters: tuple[int, ...]) -> tuple[VoterSet | None, bool]:
        """KIP-853: the bootstrap checkpoint's voter set (None: a static quorum, or a node that
        joins) and whether the node was formatted for a dynamic quorum. A quorum of several voters
        needs controller.quorum.bootstrap.servers to reach them."""
        c = self.config
        try:
            bootstrap = read_quorum_bootstrap(c.metadata_log_dir)
        except CorruptSnapshotError as e:
            raise StartupError(f"metadata.log.dir: the bootstrap checkpoint is unreadable: {e}") from None
        if bootstrap is None:
            return None, False
        standalone = bootstrap.voters is not None and bootstrap.voters.ids == (self.node_id,)
        if not standalone and not c["controller.quorum.bootstrap.servers"]:
            raise StartupError(
                "metadata.log.dir was formatted for a dynamic controller quorum of several voters "
                "(--initial-controllers or --no-initial-controllers): set "
                "controller.quorum.bootstrap.servers to reach its controllers"
            )
        return bootstrap.voters, True

    async def start(self, on_stopped: Callable[[Any], None]) -> None:
        """Start the raft driver; `on_stopped(task)` when it ends."""
        await self.raft_driver.start()
        self.raft_driver.task.add_done_callback(on_stopped)

    async def wait_caught_up(self, timeout_s: float) -> bool:
        """Until the metadata log is caught up and replayed (raft's metadata_ready); False at the deadline."""
        return await self.metadata_loader.wait_for(self.raft.metadata_ready, timeout_s)

    async def stop(self) -> None:
        if self.controller_server is not None:
            self.controller_server.stop()
        await self.raft_driver.stop()

    def close(self) -> None:
        self.controller.close()
        self.metadata_log.close()
