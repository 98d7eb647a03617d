"""BrokerLifecycle: this broker's registration, heartbeats and controlled shutdown (Kafka's
BrokerLifecycleManager).

States, as Kafka's broker sees them:
- registered, fenced: after BrokerRegistration the controller keeps the broker fenced (not in
  Metadata, leading nothing) until a heartbeat reports a metadata offset at or past its own
  registration record; then it unfences it and elects it leader where it is the only live ISR
  member. `wait_unfenced` is what startup waits on before the broker announces itself ready.
- running: a heartbeat every `broker.heartbeat.interval.ms`; every 50 ms while fenced or shutting
  down; 200 ms after a heartbeat that got no answer (the controller fences a broker whose
  heartbeat connection closed and that is not heard from again within a second). A broker the controller fenced (its session expired, e.g. a long pause) asks to be
  unfenced again by its next heartbeat. STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED (the
  controller lost or replaced the registration) re-registers with a new incarnation.
- controlled shutdown (`controlled_shutdown`): heartbeats with want_shut_down; the controller
  moves every leadership away (a partition with no other live ISR member goes offline, leader -1,
  as in Kafka) and answers should_shut_down, fencing the broker; only then does the broker stop
  serving. Bounded: when no controller answers (the quorum is gone) it gives up and stops anyway,
  and the controller fences it when its session expires.
- a lapsed session (`broker.session_watch`): no heartbeat sent within the last
  `broker.session.timeout.ms` was answered, so the controller may have fenced this broker and
  elected leaders elsewhere, where this broker cannot read of it. It stops acting as a leader
  where another replica may have been elected (`on_lapse(True)`: ReplicaManager.set_leadership_lapsed) until a heartbeat is answered unfenced again and its metadata image shows it
  unfenced (`on_lapse(False)`).
- a failed log dir (KIP-858, `propagate_dir_failure`): the next heartbeat goes at once and every
  heartbeat from then on names the dir in OfflineLogDirs, so the controller moves the leaderships of
  its replicas away while this broker keeps serving its other dirs. If no heartbeat naming it is
  answered within `log.dir.failure.timeout.ms`, the broker shuts down (Kafka's
  BrokerLifecycleManager.propagateDirectoryFailure): its replicas there would otherwise stay led by
  a broker that cannot serve them.

Runs on the event loop; the controller calls go through ControllerClient (local on the active
controller, an RPC elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kavka.broker.session_watch import SessionWatch
from kavka.controller.quorum_controller import UNAVAILABLE, HeartbeatReply
from kavka.storage.meta_properties import generate_uuid

if TYPE_CHECKING:
    from kavka.broker.controller_client import ControllerClient

log = logging.getLogger("kavka.broker")

_FAST_S = 0.05  # heartbeat period while fenced or shutting down
_RETRY_S = 0.2  # after a heartbeat that got no answer


class BrokerLifecycle:
    def __init__(
        self,
        controller: ControllerClient,
        *,
        broker_id: int,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        register: Callable[[str], Awaitable[int]],
        dir_failure_timeout_ms: int = 30000,
        on_fatal: Callable[[str], None] | None = None,
        session_timeout_ms: int = 9000,
        image_unfenced: Callable[[], bool] = lambda: True,
        on_lapse: Callable[[bool], None] = lambda lapsed: None,
        now_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.interval_s = heartbeat_interval_ms / 1000
        self._metadata_offset = metadata_offset
        self._register = register  # (incarnation id) -> broker epoch
        self.epoch = -1
        self.fenced = True
        self._want_shut_down = False
        self._shut_down_granted = asyncio.Event()
        self._unfenced = asyncio.Event()
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.offline_dirs: list[str] = []  # directory ids, in the order they failed
        self.acked_offline_dirs: set[str] = set()  # named by a heartbeat the controller answered
        self._dir_failure_timeout_s = dir_failure_timeout_ms / 1000
        self._on_fatal = on_fatal
        self.session = SessionWatch(session_timeout_ms)
        self._image_unfenced = image_unfenced  # this broker, in this node's metadata image
        self._on_lapse = on_lapse
        self._now_ms = now_ms
        self._watch_task: asyncio.Task[None] | None = None

    def propagate_dir_failure(self, directory_id: str) -> None:
        """Report a failed log dir to the controller now; shut down if that takes too long."""
        if directory_id in self.offline_dirs:
            return
        self.offline_dirs.append(directory_id)
        self._kick.set()
        loop = asyncio.get_running_loop()
        loop.call_later(self._dir_failure_timeout_s, self._check_dir_failure_reported, directory_id)

    def _check_dir_failure_reported(self, directory_id: str) -> None:
        if directory_id in self.acked_offline_dirs or self._on_fatal is None:
            return
        self._on_fatal(
            f"the controller was not told that log dir {directory_id} failed within "
            f"log.dir.failure.timeout.ms={int(self._dir_failure_timeout_s * 1000)}"
        )

    async def register(self) -> int:
        """Register a new incarnation of this broker; returns its broker epoch."""
        self.epoch = await self._register(generate_uuid())
        self.fenced = True
        self._unfenced.clear()
        log.info("registered broker %d with broker epoch %d (fenced until caught up)", self.broker_id, self.epoch)
        return self.epoch

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="broker-heartbeat")
        self._watch_task = loop.create_task(self._watch(), name="broker-session-watch")

    async def wait_unfenced(self, timeout_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._unfenced.wait()
        return self._unfenced.is_set()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; True when it granted the shutdown."""
        if self._task is None or self._task.done():
            return False
        self._want_shut_down = True
        self._kick.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._shut_down_granted.wait()
        return self._shut_down_granted.is_set()

    async def stop(self) -> None:
        for task in (self._task, self._watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch(self) -> None:
        """Poll the session watch; tell `on_lapse` when this broker loses or regains its session."""
        lapsed = False
        while True:
            now = self._now_ms()
            if self.session.poll(now, image_unfenced=self._image_unfenced()) != lapsed:
                lapsed = self.session.lapsed
                if lapsed:
                    last = self.session.last_live_ms()
                    log.warning(
                        "broker %d stops acting as a leader: no heartbeat sent in the last %d ms was answered "
                        "(broker.session.timeout.ms=%d; last answered one sent %s ms ago), so the controller "
                        "may have fenced it", self.broker_id, self.session.session_timeout_ms,
                        self.session.session_timeout_ms, "?" if last is None else now - last,
                    )
                else:
                    log.info("broker %d leads again: the controller answered and its metadata (offset %d) shows "
                             "it unfenced", self.broker_id, self._metadata_offset())
                self._on_lapse(lapsed)
            await asyncio.sleep(max(self.session.next_deadline_ms(now) - now, 1) / 1000)

    async def _run(self) -> None:
        failures = 0
        while not self._shut_down_granted.is_set():
            reply = await self._beat()
            if reply is None:
                failures += 1
                if self._want_shut_down and failures >= 3:
                    log.warning("controlled shutdown: no controller answered; stopping without it")
                    self._shut_down_granted.set()
                    return
            else:
                failures = 0
                await self._handle(reply)
            period = _FAST_S if (self.fenced or self._want_shut_down) else self.interval_s
            if reply is None:
                # Beat again soon: the controller fences a broker whose heartbeat connection closed
                # and that is not heard from again within a second (controller.heartbeats).
                period = min(period, _RETRY_S)
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):  # not wait_for: 3.11's can lose a cancel
                    await self._kick.wait()

    async def _beat(self) -> HeartbeatReply | None:
        offline = list(self.offline_dirs)
        sent_ms = self._now_ms()
        try:
            reply = await self.controller.broker_heartbeat(
                broker_id=self.broker_id,
                broker_epoch=self.epoch,
                metadata_offset=self._metadata_offset(),
                want_shut_down=self._want_shut_down,
                offline_log_dirs=offline,
                timeout_s=max(self.interval_s, 1.0),
            )
            if reply.error == ErrorCode.none:
                # This node's own controller answered: as fresh as its quorum's last contact (an
                # active controller cut off from the other voters answers until it resigns).
                contact = reply.quorum_contact_ms
                self.session.answered(sent_ms if contact is None else min(sent_ms, contact), fenced=reply.is_fenced)
            if reply.error == ErrorCode.none and not set(offline) <= self.acked_offline_dirs:
                self.acked_offline_dirs.update(offline)
                log.info("the controller knows log dirs %s are offline", ", ".join(offline))
            return reply
        except UNAVAILABLE as e:
            log.debug("heartbeat not answered: %s", e)
            return None
        except (OSError, RuntimeError) as e:
            log.warning("heartbeat failed: %s", e)
            return None

    async def _handle(self, reply: HeartbeatReply) -> None:
        if reply.error in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            if self._want_shut_down:
                self._shut_down_granted.set()  # the controller no longer counts on this registration
                return
            log.warning("the controller answered %s: registering again", ErrorCode(reply.error).name)
            try:
                await self.register()
            except (*UNAVAILABLE, OSError, RuntimeError) as e:
                log.warning("registering again failed: %s", e)
            return
        if reply.error != ErrorCode.none:
            log.warning("heartbeat answered %s", ErrorCode(reply.error).name)
            return
        if reply.is_fenced != self.fenced:
            self.fenced = reply.is_fenced
            if self.fenced:
                log.warning("broker %d was fenced by the controller", self.broker_id)
                self._unfenced.clear()
            else:
                log.info("broker %d is unfenced", self.broker_id)
                self._unfenced.set()
        if reply.should_shut_down and self._want_shut_down:
            log.info("the controller granted the controlled shutdown of broker %d", self.broker_id)
            self._shut_down_granted.set()
