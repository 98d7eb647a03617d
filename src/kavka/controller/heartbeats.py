"""Broker sessions on the active controller (Kafka's BrokerHeartbeatManager, the timing half).

Every broker heartbeats the active controller each `broker.heartbeat.interval.ms`
(BrokerHeartbeat); a broker that is not fenced and has not been heard from for
`broker.session.timeout.ms` is fenced: it leaves every ISR it is not the last member of,
its leaderships move (or the partition goes offline, leader -1) and it disappears from
Metadata. The decisions themselves (which records) are ClusterControlManager's.

A broker whose heartbeat connection closes (its process died: a kill -9 closes its
sockets) and that does not heartbeat again on a new connection within
`CONNECTION_LOSS_GRACE_MS` is fenced then, without waiting out the session: the
session timeout stays the bound for what closes nothing (a frozen or unplugged
machine), and a broker that is merely slow keeps its connection and is never fenced
by this. Sooner still when the broker's own listener refuses a connection the controller opens to it
right after the loss (`probe_dead`): nothing listens there, so the process is gone (a
live process's listening socket takes connections even while it is frozen or busy); it is
fenced at the next check. A loss only counts for the connection the broker's latest heartbeat came on,
so an old connection closing after the broker moved to a new one changes nothing; a
combined node heartbeating its own controller has no connection (`connection=None`).

Session times are not metadata: they live only in the active controller's memory, on
a monotonic clock. A controller that becomes active gives every registered broker a
fresh session (Kafka does the same), so a failover never fences a healthy broker that
was heartbeating the previous controller. Kafka stops there, and so a broker that died
with the old controller (a combined node: the partition leader's node was also the
active controller) stays unfenced, and its partitions leaderless, for a whole session
after the election. kavka adds the activation check: a broker on a node that is a
*quorum voter* must show it is alive within `ACTIVATION_GRACE_MS` of the activation --
a heartbeat to this controller, or its node's raft Fetch from this leader (`confirm`):
a live voter fetches from a new leader within a round trip of its BeginQuorumEpoch,
and a majority of voters have fetched before the controller is active at all -- or it
is fenced then. Sooner still when its node *refused* this leader's connection in this epoch (the
BeginQuorumEpoch a new leader sends every voter: `refused`, from the transport) and has not
fetched since: nothing listens on its controller listener, so its process is gone -- a live
process's listening socket takes connections even while it is frozen or busy, the kernel
answering for it -- and it is fenced at the first check instead of after the grace (kill -9 of
the node that was both the partition leader and the active controller: about 1 s less).
Brokers on observer nodes (broker-only) find a new leader more slowly
(their raft client asks voters at random, `controller.quorum.request.timeout.ms`
apart), so they keep the whole fresh session, as in Kafka; so does this node's own
broker. A broker fenced wrongly (a voter frozen for longer than the grace exactly
across a controller change) asks to be unfenced by its next heartbeat, as after any
fence.

Both short rules hold off for a broker whose process shows it is there: the controller keeps a
probe connection to the broker's listener open while a short rule waits on it
(controller.liveness_probe: `probe_started`, `probe_taken`, `probe_dead`, `probe_ended`). A
listener that takes it and keeps it -- the kernel of a live process does, even while the process
is stopped or busy -- vouches for the broker (`vouched`), which is then left to its session
timeout: a broker paused for 4 s across a controller change, or one that gave up its heartbeat
connection after a stall and is slow to come back, is not fenced. A probe refused, or reset by a
dying process's listening socket as it closes (the race of a kill -9: its heartbeat socket
closes a moment before its listener), fences at the next check; one not taken within the grace
(a machine cut off from the network answers nothing) leaves the grace to decide.

Both short rules judge what this controller has read, so they pause after this controller
itself did not run for a while (`checked`: its checks, every 250 ms at most, came more than
`STALL_GAP_MS` apart, as when its event loop stalls on a loaded machine): heartbeats and fetches
that arrived meanwhile are still unread in its sockets. They apply again `STALL_HOLD_MS` after
such a gap; the session timeout applies throughout. (CI saw a loaded controller's loop stop for
a second right after a live broker's heartbeat connection closed, and fence it on waking.)
Pure: the caller passes `now_ms`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from kavka.metadata.image import MetadataImage

# A broker retries a failed heartbeat within a fraction of this (broker.lifecycle), so only a
# broker that cannot reach the controller again for a whole second is fenced by a lost connection.
CONNECTION_LOSS_GRACE_MS = 1000
# A broker on a voter node that neither heartbeats this new active controller nor fetches the
# metadata log from it within this long of its activation is fenced (see the module doc).
ACTIVATION_GRACE_MS = 1000
# Checks further apart than this mean this controller did not run meanwhile (see the module doc);
# the short rules then wait this long for it to read what arrived.
STALL_GAP_MS = 500
STALL_HOLD_MS = 500


class BrokerSessions:
    def __init__(self, session_timeout_ms: int, activation_grace_ms: int = ACTIVATION_GRACE_MS) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.activation_grace_ms = min(activation_grace_ms, session_timeout_ms)
        self._last_ms: dict[int, int] = {}
        self._unconfirmed: set[int] = set()  # held to the activation grace, not heard from yet
        self._refused: set[int] = set()  # unconfirmed, and their node refused this leader's connection
        self._active_since_ms: int | None = None
        self._connection: dict[int, Hashable] = {}  # broker -> the connection of its latest heartbeat
        self._lost_ms: dict[int, int] = {}  # broker -> when that connection closed
        self._dead: set[int] = set()  # lost, and their listener refused a connection since
        # controller.liveness_probe: brokers whose node a held probe is connecting to, and those
        # whose node took it and keeps it open (a live process, perhaps paused or busy)
        self._probing: set[int] = set()
        self._held: set[int] = set()
        self._last_check_ms: int | None = None
        self._short_rules_from_ms = 0  # the short rules wait until then after a stall

    def activate(self, broker_ids: Iterable[int], now_ms: int, *, must_confirm: Iterable[int] = ()) -> None:
        """This node just became the active controller: every broker starts a fresh session, and
        those in `must_confirm` (brokers on the other voter nodes) must be heard from within
        `activation_grace_ms` (a heartbeat, or `confirm`)."""
        self._active_since_ms = now_ms
        self._last_check_ms = None
        self._last_ms = dict.fromkeys(broker_ids, now_ms)
        self._unconfirmed = set(must_confirm) & set(self._last_ms)
        self._refused.clear()

    def checked(self, now_ms: int) -> None:
        """This controller checks its sessions now (periodically); after a gap longer than
        `STALL_GAP_MS` since the last check the short rules wait `STALL_HOLD_MS`."""
        if self._last_check_ms is not None and now_ms - self._last_check_ms > STALL_GAP_MS:
            self._short_rules_from_ms = now_ms + STALL_HOLD_MS
        self._last_check_ms = now_ms

    def confirm(self, broker_ids: Iterable[int]) -> None:
        """These brokers' nodes fetched the metadata log from this leader: they are alive."""
        ids = set(broker_ids)
        self._unconfirmed -= ids
        self._refused -= ids

    def refused(self, broker_ids: Iterable[int]) -> None:
        """These brokers' nodes refused a connection from this leader in its epoch: those still
        to confirm they are alive are fenced at the next check, without the rest of the grace."""
        self._refused.update(b for b in broker_ids if b in self._unconfirmed)

    def refused_connection(self, broker_id: int) -> bool:
        return broker_id in self._refused

    def unconfirmed(self, broker_id: int) -> bool:
        """Held to the activation grace and not heard from since the activation."""
        return broker_id in self._unconfirmed

    def awaits(self, broker_id: int) -> bool:
        """A short rule waits on this broker: it must confirm it is alive after the activation, or
        heartbeat again after its heartbeat connection closed (what a held probe is for)."""
        return broker_id in self._unconfirmed or broker_id in self._lost_ms

    def probe_started(self, broker_id: int) -> None:
        """A held probe (controller.liveness_probe) connects to the broker's listener: the short
        rules wait for its outcome (its connect is bounded by the grace)."""
        self._probing.add(broker_id)

    def probe_taken(self, broker_id: int) -> None:
        """The probe's connection was taken and is held open: a process listens there, alive even
        if paused or busy, so the short rules leave this broker to its session timeout for as
        long as the connection stays open."""
        self._probing.discard(broker_id)
        self._held.add(broker_id)

    def probe_dead(self, broker_id: int) -> None:
        """The probe was refused, or its connection reset or closed by the peer: nothing listens
        there any more (a dying process resets what its listening socket had queued). A broker a
        short rule waits on is fenced at the next check."""
        self._probing.discard(broker_id)
        self._held.discard(broker_id)
        if broker_id in self._unconfirmed:
            self._refused.add(broker_id)
        if broker_id in self._lost_ms:
            self._dead.add(broker_id)

    def probe_ended(self, broker_id: int) -> None:
        """The probe did not connect in time (a node cut off answers nothing: the short rules
        apply), or is no longer needed."""
        self._probing.discard(broker_id)
        self._held.discard(broker_id)

    def vouched(self, broker_id: int) -> bool:
        return broker_id in self._held or broker_id in self._probing

    def deactivate(self) -> None:
        self._active_since_ms = None
        self._probing.clear()
        self._held.clear()
        self._last_ms.clear()
        self._unconfirmed.clear()
        self._refused.clear()
        self._connection.clear()
        self._lost_ms.clear()
        self._dead.clear()

    @property
    def active(self) -> bool:
        return self._active_since_ms is not None

    def touch(self, broker_id: int, now_ms: int, connection: Hashable | None = None) -> None:
        """A heartbeat from `broker_id`, over `connection` (None: in-process)."""
        self._last_ms[broker_id] = now_ms
        self._unconfirmed.discard(broker_id)
        self._refused.discard(broker_id)
        self._lost_ms.pop(broker_id, None)
        self._dead.discard(broker_id)
        if connection is None:
            self._connection.pop(broker_id, None)
        else:
            self._connection[broker_id] = connection

    def connection_lost(self, connection: Hashable, now_ms: int) -> list[int]:
        """`connection` closed; the brokers whose latest heartbeat came over it."""
        lost = [b for b, c in self._connection.items() if c == connection]
        for b in lost:
            del self._connection[b]
            self._lost_ms[b] = now_ms
        return lost

    def fetching(self, broker_ids: Iterable[int]) -> None:
        """These brokers' nodes have been fetching the metadata log from this controller since
        their heartbeat connection closed: alive, so the closed connection is no reason to fence
        them (a loaded broker can take longer than CONNECTION_LOSS_GRACE_MS to heartbeat again;
        its session timeout still applies)."""
        for b in broker_ids:
            self._lost_ms.pop(b, None)
            self._dead.discard(b)

    def refuses_connections(self, broker_id: int) -> bool:
        return broker_id in self._dead

    def lost_connection(self, broker_id: int) -> bool:
        """The broker's heartbeat connection closed and it has not heartbeated since."""
        return broker_id in self._lost_ms

    def last_contact_ms(self, broker_id: int) -> int | None:
        return self._last_ms.get(broker_id)

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers (shutting down or not) whose session ran out, whose heartbeat
        connection closed `CONNECTION_LOSS_GRACE_MS` ago without a heartbeat since, or that were
        to confirm they are alive within `activation_grace_ms` of the activation and did not (or
        whose node refused this leader's connection before they did);
        oldest contact first."""
        if self._active_since_ms is None:
            return []
        out = []
        short_rules = now_ms >= self._short_rules_from_ms
        for b in image.brokers.values():
            if b.fenced:
                continue
            last = self._last_ms.get(b.broker_id, self._active_since_ms)
            lost = self._lost_ms.get(b.broker_id)
            # A held probe's open connection (or its connect still in flight) vouches for the
            # process: the short rules' grace then does not fence it; its session still does.
            vouched = self.vouched(b.broker_id)
            silent = b.broker_id in self._unconfirmed and (
                b.broker_id in self._refused
                or (now_ms - self._active_since_ms >= self.activation_grace_ms and not vouched)
            )
            if now_ms - last > self.session_timeout_ms or (
                short_rules and (silent or (lost is not None and (
                    b.broker_id in self._dead or (now_ms - lost >= CONNECTION_LOSS_GRACE_MS and not vouched))))
            ):
                out.append((last, b.broker_id))
        return [b for _, b in sorted(out)]
