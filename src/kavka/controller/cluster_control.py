"""Brokers: registration and the fenced / unfenced / controlled-shutdown states (Kafka's ClusterControlManager).

`ClusterControlManager` decides what a broker's RegisterBroker and heartbeats write: a broker
registers fenced (a new incarnation replaces the old registration, whose leaderships end first),
is unfenced once its heartbeat shows it caught up with its own registration, and goes through
controlled shutdown until it leads nothing (Kafka's BrokerHeartbeatManager.calculateNextBrokerState).
The BrokerRegistrationChangeRecords are its own; the partition changes each state brings (the
broker leaves ISRs and leaderships, or offline partitions elect it again) are the
ReplicationControlManager's, which it is given.

Sessions (who heartbeats in time) are heartbeats.py's; this module only decides. Pure: image in,
records out, never writes. Called on the active controller's event loop, under the
QuorumController's lock.
"""

from __future__ import annotations

from typing import Any

from kavka.common import BrokerControlState
from kavka.controller.replication_control import ReplicationControlManager
from kavka.metadata.image import MetadataImage
from kavka.metadata.records import BrokerRegistrationChangeRecord, RegisterBrokerRecord


class ClusterControlManager:
    """Broker registration and states; the partition changes they bring are `replication`'s."""

    def __init__(self, replication: ReplicationControlManager) -> None:
        self.replication = replication

    def register_broker(
        self,
        image: MetadataImage,
        *,
        broker_id: int,
        incarnation_id: str,
        endpoints: tuple[tuple[str, str, int], ...],
        rack: str | None,
        log_dirs: tuple[str, ...],
        previous_broker_epoch: int = -1,
    ) -> list[Any]:
        """A broker (re)registers, fenced until its heartbeat shows it caught up (Kafka's
        ClusterControlManager.registerBroker). The same incarnation again is a retry: no change.
        A new incarnation replaces the old registration, whose leaderships end first. It follows a
        clean shutdown when it names the epoch of the registration it replaces (KIP-966's
        `isCleanShutdown`); otherwise it may have lost records it had not flushed, and it leaves
        every ELR too (Kafka's handleBrokerUncleanShutdown)."""
        current = image.brokers.get(broker_id)
        if current is not None and current.incarnation_id == incarnation_id:
            return []
        clean = current is not None and previous_broker_epoch >= 0 and current.epoch == previous_broker_epoch
        records: list[Any] = (
            self.replication.leave_partitions(image, broker_id, unclean_shutdown=not clean) if current is not None else []
        )
        records.append(RegisterBrokerRecord(broker_id, incarnation_id, endpoints, rack, log_dirs))
        return records

    def next_broker_state(
        self,
        image: MetadataImage,
        broker_id: int,
        *,
        metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
    ) -> BrokerControlState:
        """Kafka's BrokerHeartbeatManager.calculateNextBrokerState, without its lowest-active-offset wait."""
        b = image.brokers[broker_id]
        # Scanning every partition for its leaderships is paid only by a broker shutting down,
        # not by every routine heartbeat.
        if b.in_controlled_shutdown:
            return self._shutting_down(image, broker_id)
        if b.fenced:
            if want_shut_down:
                return BrokerControlState.SHUTDOWN_NOW
            if not want_fence and metadata_offset >= b.epoch:
                return BrokerControlState.UNFENCED  # caught up with its own registration
            return BrokerControlState.FENCED
        if want_fence:
            return BrokerControlState.SHUTDOWN_NOW if want_shut_down else BrokerControlState.FENCED
        if want_shut_down:
            return self._shutting_down(image, broker_id)
        return BrokerControlState.UNFENCED

    def _shutting_down(self, image: MetadataImage, broker_id: int) -> BrokerControlState:
        """A broker in controlled shutdown may go once it leads nothing."""
        if self.replication.has_leaderships(image, broker_id):
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.SHUTDOWN_NOW

    def broker_state_records(self, image: MetadataImage, broker_id: int, state: BrokerControlState) -> list[Any]:
        """The records that move a broker into `state`: its registration change, and the partition
        changes of Kafka's ReplicationControlManager handleBrokerFenced / handleBrokerUnfenced /
        handleBrokerInControlledShutdown, in Kafka's order."""
        b = image.brokers[broker_id]
        if state in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
            if b.fenced and not b.in_controlled_shutdown:
                return []
            records = self.replication.leave_partitions(image, broker_id)
            records.append(BrokerRegistrationChangeRecord(broker_id, b.epoch, fenced=True, in_controlled_shutdown=False))
            return records
        if state == BrokerControlState.UNFENCED:
            if not b.fenced:
                return []
            records = [BrokerRegistrationChangeRecord(broker_id, b.epoch, fenced=False)]
            return records + self.replication.handle_broker_unfenced(image, broker_id)
        if state == BrokerControlState.CONTROLLED_SHUTDOWN:
            records = [] if b.in_controlled_shutdown else [
                BrokerRegistrationChangeRecord(broker_id, b.epoch, in_controlled_shutdown=True)
            ]
            return records + self.replication.leave_partitions(image, broker_id)
        return []

