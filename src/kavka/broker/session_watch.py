"""SessionWatch: whether this broker may still act as a leader, judged from its own heartbeats.

The active controller fences a broker it has not heard from for `broker.session.timeout.ms` and
elects new leaders for its partitions. A broker cut off from the controller quorum but not from its
clients never hears of that fence (the records that say so are in the metadata log it cannot
fetch), so without this it kept answering Produce and Metadata as the leader until the network
healed: idempotent acks=all producers that reach it stalled, acks=1 writes were accepted and lost
at the heal. Kafka's brokers behave so; kavka's step down.

The rule mirrors the controller's own, from the broker's side: a heartbeat *sent* at `s` and
answered with the broker unfenced was received by the controller at or after `s`, so the
controller cannot fence this broker for a session timeout before `s + session`. Once the latest
such heartbeat was sent a whole session ago, the controller may have fenced it, and the broker
*lapses*: it stops acting as a leader (Produce answers NOT_LEADER_OR_FOLLOWER, Metadata shows its
partitions without a leader, LEADER_NOT_AVAILABLE) so clients look for the new leader elsewhere --
of the partitions where the controller may have elected one: some other ISR member stopped
fetching from it, or it is the ISR alone with other replicas (ReplicaManager.set_leadership_lapsed).
A quorum that lost its majority fences nobody, and the leaders whose followers fetch serve on.
A lapse therefore never comes later than the controller's fence. It never comes earlier than a
real loss of contact either: heartbeats go every `broker.heartbeat.interval.ms` (2 s of the 9 s
session by default, every 200 ms after one that got no answer), so a broker that reaches the
controller lapses only if no heartbeat of the last session got through.

A broker that itself did not run (its event loop stalled, the process was stopped) cannot have
heartbeated meanwhile, yet may not be fenced: the controller fences only after a whole session
too. So after such a gap (polls more than `STALL_GAP_MS` apart) the watch holds its judgement for
`STALL_HOLD_MS`, long enough for the heartbeat that was due during the gap to go out and be
answered. A broker frozen for longer than the session was fenced by the controller; it lapses
when the hold ends unless a heartbeat is answered unfenced meanwhile.

A lapsed broker resumes once a heartbeat sent after the lapse is answered unfenced (the
controller counts it live: it never fenced it, or fenced it and unfenced it again) *and* its own
metadata image shows it unfenced. If the controller fenced it, the image shows it fenced as soon
as the fence record arrives, and unfenced only once the later unfence record does, so by then the
leader changes that came with the fence are applied and it leads only what it still leads. What
stays open is the moment right after a heal before the metadata fetch brings the fence record:
the image is then as stale as any lagging broker's in Kafka; the followers have moved to the new
leader, so it cannot acknowledge an acks=all write, and its leader epoch is stale.
Before its first unfenced answer a broker is fenced by the controller anyway and leads nothing:
the watch is not armed.

Pure: the caller passes `now_ms` (a monotonic clock) and the offsets.
"""

from __future__ import annotations

# Polls further apart than this mean this broker did not run meanwhile (see the module doc).
STALL_GAP_MS = 500
# After such a gap the watch waits this long for a heartbeat round trip before it judges.
STALL_HOLD_MS = 1000


class SessionWatch:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.lapsed = False
        self._live_sent_ms: int | None = None  # send time of the latest heartbeat answered unfenced
        self._lapsed_at_ms = 0
        self._answered_since_lapse = False  # lapsed: a heartbeat sent since was answered unfenced
        self._last_poll_ms: int | None = None
        self._hold_until_ms = 0

    def answered(self, sent_ms: int, *, fenced: bool) -> None:
        """The controller answered a heartbeat sent at `sent_ms` without an error."""
        if fenced:
            return
        if self._live_sent_ms is None or sent_ms > self._live_sent_ms:
            self._live_sent_ms = sent_ms
        if self.lapsed and sent_ms >= self._lapsed_at_ms:
            self._answered_since_lapse = True

    def poll(self, now_ms: int, *, image_unfenced: bool) -> bool:
        """Update and return `lapsed`; `image_unfenced`: this broker's metadata image shows it unfenced."""
        last, self._last_poll_ms = self._last_poll_ms, now_ms
        if last is not None and now_ms - last > STALL_GAP_MS:
            self._hold_until_ms = now_ms + STALL_HOLD_MS
        if self.lapsed:
            if self._answered_since_lapse and image_unfenced:
                self.lapsed = False
        elif (
            self._live_sent_ms is not None
            and now_ms - self._live_sent_ms >= self.session_timeout_ms
            and now_ms >= self._hold_until_ms
        ):
            self.lapsed = True
            self._lapsed_at_ms = now_ms
            self._answered_since_lapse = False
        return self.lapsed

    def next_deadline_ms(self, now_ms: int) -> int:
        """When `poll` may change its answer next without an `answered` (at most 250 ms away,
        so that a stall shows as one)."""
        soon = now_ms + 250
        if self.lapsed or self._live_sent_ms is None:
            return soon
        return min(soon, max(self._live_sent_ms + self.session_timeout_ms, self._hold_until_ms))

    def last_live_ms(self) -> int | None:
        """When the latest heartbeat the controller answered unfenced was sent."""
        return self._live_sent_ms
