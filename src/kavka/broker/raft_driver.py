"""An asyncio network driver for RaftClient: KRaft RPCs over TCP, Kafka framing, kio messages.

Theory of operation. One task per driver feeds the sans-I/O core: it waits
until the core's next deadline or until a message arrives, calls
`client.poll(now_ms, inbound)`, and sends what the core returned. Requests go
out on one connection per peer voter (opened on demand, dropped on any error:
the core retries by its own timers); the peer's responses come back on it and
are paired with their request by correlation id (the core's own ids). Inbound
requests arrive on this driver's listener; the core's answer is written back
on the connection the request came in on, keyed by (sender, correlation id).
The sender of a request is the node id it names (candidate, leader or replica
id), as in Kafka. A malformed frame closes that one connection (a WARNING); so does a handler's
error, logged at ERROR with its traceback, as on client listeners. A raft request that parses but
is not about __cluster_metadata-0 gets Kafka's top-level error instead (codec.refusal).

The core never fsyncs: when a poll says the metadata log needs a flush, the
driver begins it here, runs the fsync on a worker thread, ends it back on the
loop and polls again (one flush at a time; a failed fsync stops the driver,
and with it the node, as Kafka halts on a metadata log I/O error). Snapshots
are written the same way (`write_snapshot`).

Owned by the node (broker/node.py), which starts it after storage is open
and stops it last; `after_poll` (the controller's) runs after every poll.
A node whose only voter is itself opens no listener. Called from one event
loop.

Security: the controller listener serves TLS when its protocol is SSL or SASL_SSL (`server_tls`,
the listener's ListenerTls from kavka.broker.tls, its context read per accept so a reloaded
keystore serves new connections; `ssl.client.auth=required` makes it mutual TLS), and SASL when it
is SASL_PLAINTEXT or SASL_SSL (`server_sasl`: kavka.broker.sasl_authenticator's state machine sees
every frame first, as on client listeners). The connections to peer voters go through `security`
(kavka.client.security: the same listener's client side, the node's own login), renewed before a
SASL session's lifetime ends. A failed TLS handshake or login, either way, closes that connection
and is logged (outgoing: once per peer until an answer comes); the core retries by its timers.

Authorization (Kafka's ControllerApis: ClusterAction on the Cluster for every RPC there): with
`cluster_action` (principal, host) -> allowed, given when an authorizer is configured, a
connection's principal -- SASL's, else the client certificate's mapped DN, else User:ANONYMOUS --
must hold ClusterAction on the Cluster (super.users or an ACL; the nodes' own principal must). A
refused controller request is answered with its error response, CLUSTER_AUTHORIZATION_FAILED
(api_authorization.denied_response); a refused KRaft RPC closes the connection. Both are logged
on the authorizer log. The forwarded client requests were authorized on the broker that received
them, as their client's principal (Kafka's Envelope: ClusterAction for the broker here).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

from kavka.authorizer import CLUSTER_NAME
from kavka.broker.api_authorization import denied_response
from kavka.broker.authorization import DENIALS, api_name
from kavka.broker.sasl_authenticator import (
    Close,
    Failed,
    ListenerSasl,
    RawToken,
    Respond,
    SaslServerAuthenticator,
    Serve,
    Succeeded,
)
from kavka.broker.tls import peer_principal
from kavka.client.security import PLAINTEXT, ClientSecurity, open_async
from kavka.common import AclOperation, ResourceType
from kavka.principal import ANONYMOUS
from kavka.protocol import api
from kavka.protocol.framing import (
    decode_body,
    encode_entity,
    encode_request,
    encode_response,
    peek_request_header,
    read_request_header,
)
from kavka.protocol.messages import nested
from kavka.raft import codec
from kavka.raft import messages as m
from kavka.raft import snapshot as raft_snapshot
from kavka.raft.api import SnapshotId
from kavka.raft.client import RaftClient

log = logging.getLogger("kavka.raft")
_I32 = struct.Struct(">i")
_MAX_FRAME = 64 * 1024 * 1024
_REQUEST_SCHEMAS = {cls.__api_key__: cls for cls in codec.API_VERSIONS}
_API_VERSIONS = 18
_CLIENT_ID = "kavka-raft"
_TLS_HANDSHAKE_TIMEOUT_S = 10.0


def _sender(msg: m.Message) -> int:
    if isinstance(msg, m.VoteRequest):
        return msg.candidate_id
    if isinstance(msg, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        return msg.leader_id
    if isinstance(msg, m.FetchRequest | m.FetchSnapshotRequest):
        return msg.replica_id
    raise TypeError(type(msg).__name__)


async def _read_frame(reader: asyncio.StreamReader, max_size: int = _MAX_FRAME) -> bytes:
    (size,) = _I32.unpack(await reader.readexactly(4))
    if size < 0 or size > max_size:
        raise ValueError(f"frame of {size} bytes")
    return await reader.readexactly(size)


class RaftDriver:
    def __init__(
        self,
        client: RaftClient,
        *,
        host: str,
        port: int,
        peers: dict[int, tuple[str, int]],
        listen: bool = True,
        after_poll: Callable[[], None] = lambda: None,
        controller_apis: Any = None,
        rpc_schemas: dict[int, tuple[type, type]] | None = None,
        security: ClientSecurity = PLAINTEXT,
        server_tls: Any = None,
        server_sasl: ListenerSasl | None = None,
        cluster_action: Callable[[str, str], bool] | None = None,
        connections_max_idle_ms: int = -1,
    ) -> None:
        self.idle_ms = connections_max_idle_ms  # an inbound connection idle this long is closed (-1 never)
        self._idle_since: dict[asyncio.StreamWriter, float] = {}  # inbound connections waiting for a request
        self.cluster_action = cluster_action  # (principal, host) -> may ClusterAction; None: no authorizer
        self.server_sasl = server_sasl  # the controller listener's SASL settings (SASL_PLAINTEXT / SASL_SSL), or None
        self.security = security  # how this node reaches its peers' controller listener
        self.server_tls = server_tls  # the controller listener's ListenerTls (SSL), or None
        self._peer_failure: dict[int, str] = {}  # peer -> the last connection failure logged
        # peer -> the raft epoch in which a connection to it was last refused (no process listens
        # on its controller listener: it died), until a connection opens again; the active
        # controller fences such a node's broker without waiting out the activation grace
        # (controller.heartbeats).
        self.refused: dict[int, int] = {}
        self._renew_at: dict[int, float] = {}  # peer -> loop time to reconnect by (its SASL session lifetime)
        self._tls_sock: socket.socket | None = None  # the controller listener's socket when it serves TLS
        self.controller_apis = controller_apis  # answers other Kafka requests on this listener
        self._rpc_schemas = rpc_schemas or {}
        self.client = client
        self.host = host
        self.port = port
        # Node id -> (host, port). KIP-853: shared with the node's ControllerClient and filled in as
        # this driver learns voters' endpoints (the voter set in force, a FetchResponse's
        # NodeEndpoints naming the leader); a dynamic quorum's bootstrap servers have ids below -1.
        self.peers = peers
        self.advertised: tuple[str, str, int] | None = None  # (listener, host, port) sent as NodeEndpoints
        self.listener_name = "CONTROLLER"  # the controller listener this driver serves (DescribeCluster names it)
        self._voter_set_seen: Any = None
        self.listen = listen
        self._after_poll = after_poll
        self._inbox: asyncio.Queue[m.Envelope | None] = asyncio.Queue()
        self._server: asyncio.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._inbound: set[asyncio.StreamWriter] = set()  # accepted connections, closed by stop()
        self._out: dict[int, asyncio.StreamWriter] = {}
        self._pending: dict[int, tuple[int, m.Message]] = {}  # correlation id -> (peer, request)
        self._answer_to: dict[tuple[int, int], asyncio.StreamWriter] = {}
        self._flushing = False
        self._flush_error: BaseException | None = None

    async def start(self) -> None:
        if self.listen:
            if self.server_tls is not None:
                await self._start_tls_server()
            else:
                self._server = await asyncio.start_server(self._serve, self.host, self.port)
                self.port = self._server.sockets[0].getsockname()[1]
        self._task = asyncio.create_task(self._run(), name="raft-driver")

    async def _start_tls_server(self) -> None:
        """The controller listener with TLS: accept here and hand each socket to its own handshake
        task with the listener's current context (a reloaded keystore serves the next accept), as
        kavka.broker.server does; a failed handshake is one WARNING line and that connection."""
        loop = asyncio.get_running_loop()
        sock = socket.create_server((self.host, self.port), reuse_port=False)
        sock.setblocking(False)
        self._tls_sock = sock
        self.port = sock.getsockname()[1]
        self._spawn(self._accept_tls(sock, loop))

    async def _accept_tls(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stopping:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as e:
                if self._stopping:
                    return
                log.error("controller listener: accept failed (%s); retrying in 100 ms", e)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            self._spawn(self._tls_handshake(conn, peer, loop))

    async def _tls_handshake(self, conn: socket.socket, peer: Any, loop: asyncio.AbstractEventLoop) -> None:
        assert self.server_tls is not None
        reader = asyncio.StreamReader(limit=2**16)
        protocol = asyncio.StreamReaderProtocol(reader, self._serve)
        try:
            await loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self.server_tls.context, ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S
            )
        except ssl.SSLError as e:  # Kafka logs "Failed authentication with ... (SSL handshake failed)"
            log.warning("closing connection from %s:%s on the controller listener: TLS handshake failed (%s)",
                        peer[0], peer[1], e.reason or e)
            conn.close()
        except (TimeoutError, OSError) as e:
            log.info("closing connection from %s:%s on the controller listener: TLS handshake not completed (%s)",
                     peer[0], peer[1], str(e) or type(e).__name__)
            conn.close()

    @property
    def task(self) -> asyncio.Task[None]:
        assert self._task is not None, "not started"
        return self._task

    def wakeup(self) -> None:
        """Poll the core soon (the controller appended and wants its records flushed and sent)."""
        self._inbox.put_nowait(None)

    def _maybe_flush(self, needed: bool) -> None:
        if not needed or self._flushing:
            return
        ticket = self.client.log.begin_flush()
        if ticket is None:
            return
        self._flushing = True
        self._spawn(self._flush(ticket))

    async def _flush(self, ticket: Any) -> None:
        ok = False
        try:
            await asyncio.to_thread(ticket.run)
            ok = True
        except OSError as e:
            log.error("flushing the metadata log failed: %s", e)
            self._flush_error = e
        finally:
            self.client.log.end_flush(ticket, ok=ok)
            self._flushing = False
            self.wakeup()

    def write_snapshot(
        self,
        snapshot_id: SnapshotId,
        make_records: Callable[[], list[tuple[bytes | None, bytes | None]]],
        done: Callable[[SnapshotId, bool], None],
    ) -> None:
        """Serialise, encode and write a prepared snapshot on a worker thread, then freeze it here."""
        self._spawn(self._write_snapshot(snapshot_id, make_records, done))

    async def _write_snapshot(
        self,
        snapshot_id: SnapshotId,
        make_records: Callable[[], list[tuple[bytes | None, bytes | None]]],
        done: Callable[[SnapshotId, bool], None],
    ) -> None:
        log_ = self.client.log
        last_timestamp = raft_snapshot.last_contained_timestamp(log_, snapshot_id)  # read here, not on the worker
        voters = self.client.voter_set_at(snapshot_id.end_offset)  # KIP-853: the set in force there

        def work() -> None:
            data = raft_snapshot.encode(snapshot_id, make_records(), last_contained_timestamp_ms=last_timestamp,
                                        voters=voters)
            log_.write_snapshot(snapshot_id, data)

        try:
            await asyncio.to_thread(work)
        except Exception:  # noqa: BLE001 -- the log itself is fine; the next snapshot tries again
            log.exception("writing metadata snapshot %s failed", raft_snapshot.file_name(snapshot_id))
            done(snapshot_id, False)
            return
        self.client.snapshot_frozen(snapshot_id)
        done(snapshot_id, True)

    def poll_now(self) -> None:
        """One synchronous poll with no inbound messages (startup of the sole voter)."""
        result = self.client.poll(self._now_ms())
        for env in result.outbound:
            self._dispatch(env)
        self._maybe_flush(result.flush_needed)
        self._after_poll()

    async def stop(self) -> None:
        # Fixed order: stop polling, stop accepting, close connections, then their tasks.
        self._stopping = True  # a connection accepted from here on is closed by its handler at once
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._server is not None:
            self._server.close()
        for w in list(self._out.values()) + list(self._answer_to.values()) + list(self._inbound):
            w.close()  # an inbound connection's handler then reads EOF, even if a cancel is lost
        while self._tasks:  # a handler that started meanwhile is in the next round
            for t in list(self._tasks):
                t.cancel()
            await asyncio.wait(list(self._tasks), timeout=1.0)  # rounds: a swallowed cancel is repeated
        if self._tls_sock is not None:
            self._tls_sock.close()  # after its accept task is cancelled
        if self._server is not None:
            # Waits for every accepted connection's transport to close; bounded, so a peer's
            # connection accepted in the last moment cannot hold the node's shutdown.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _now_ms(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    async def _run(self) -> None:
        inbound: list[m.Envelope] = []
        while True:
            if self._flush_error is not None:
                raise self._flush_error
            try:
                result = self.client.poll(self._now_ms(), inbound)
            except Exception:
                # A bug in the core, or the metadata log's disk failing: nothing safe to do
                # but stop this node (the node's fatal handler is told by after_poll's owner).
                log.exception("raft poll failed")
                raise
            inbound = []
            self._learn_voter_endpoints()
            for env in result.outbound:
                self._dispatch(env)
            self._maybe_flush(result.flush_needed)
            self._after_poll()
            self._close_idle()
            wait_s = max(0.0, (result.next_deadline_ms - self._now_ms()) / 1000)
            got: m.Envelope | None = None
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancel that
            # arrives as the inbox yields an item, and stop() would then wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait_s, 1.0)):
                    got = await self._inbox.get()
            if got is not None:
                inbound.append(got)
            while not self._inbox.empty():
                got = self._inbox.get_nowait()
                if got is not None:
                    inbound.append(got)

    # ---- outbound ------------------------------------------------------------------------

    def _dispatch(self, env: m.Envelope) -> None:
        if isinstance(
            env.message,
            m.VoteResponse
            | m.BeginQuorumEpochResponse
            | m.EndQuorumEpochResponse
            | m.FetchResponse
            | m.FetchSnapshotResponse,
        ):
            writer = self._answer_to.pop((env.dst, env.correlation_id), None)
            if writer is None or writer.is_closing():
                return
            entity = codec.encode(env.message, destination=env.dst)
            if isinstance(env.message, m.FetchResponse) and self.advertised is not None and env.message.leader_id == self.client.node_id:
                # KIP-853 (Fetch v17+ NodeEndpoints): where the leader listens, for an observer that
                # found it through a bootstrap server and knows no voter set yet.
                _name, host, port = self.advertised
                entity = dataclasses.replace(entity, node_endpoints=(_node_endpoint(entity, self.client.node_id, host, port),))
            body = encode_entity(entity)
            writer.write(_I32.pack(4 + 1 + len(body)) + _I32.pack(env.correlation_id) + b"\x00" + body)
            if writer in self._idle_since:  # answered: idle from now
                self._idle_since[writer] = asyncio.get_running_loop().time()
            return
        writer = self._out.get(env.dst)
        renew_at = self._renew_at.get(env.dst)
        if writer is not None and renew_at is not None and asyncio.get_running_loop().time() >= renew_at:
            # KIP-368: a new, freshly authenticated connection before the peer's session ends
            writer.close()
            del self._out[env.dst]
            writer = None
        if writer is None or writer.is_closing():
            self._spawn(self._connect_and_send(env))
            return
        self._send(writer, env)

    def _close_idle(self) -> None:
        """Kafka's SocketServer closes a connection idle for connections.max.idle.ms on every
        listener, this one included: here an inbound connection that has sent no whole request for
        that long and awaits no answer (a peer that stopped mid-frame, or never sent one). Its
        handler then reads EOF and ends."""
        if self.idle_ms < 0 or not self._idle_since:
            return
        now = asyncio.get_running_loop().time()
        awaited = set(self._answer_to.values())
        for writer, since in list(self._idle_since.items()):
            if now - since >= self.idle_ms / 1000 and writer not in awaited:
                del self._idle_since[writer]
                log.info("closing connection from %s on the controller listener: idle for over %d ms "
                         "(connections.max.idle.ms)", writer.get_extra_info("peername"), self.idle_ms)
                writer.close()

    def _learn_voter_endpoints(self) -> None:
        """KIP-853: the addresses of the voters in force, on this node's controller listener."""
        voters = self.client.voter_set()
        if voters is self._voter_set_seen:
            return
        self._voter_set_seen = voters
        for n in voters.voters:
            ep = next((e for e in n.endpoints if e.name == self.security.listener), None) or (n.endpoints[0] if n.endpoints else None)
            if ep is not None and n.node_id != self.client.node_id:
                self.peers[n.node_id] = (ep.host, ep.port)

    def _unreachable(self, peer: int) -> None:
        """Tell the core (a follower then stands soon instead of waiting out its fetch timeout)."""
        if not self._stopping:
            self.client.peer_unreachable(peer, self._now_ms())
            self.wakeup()

    def _send(self, writer: asyncio.StreamWriter, env: m.Envelope) -> None:
        entity = codec.encode(env.message, destination=env.dst)
        self._pending[env.correlation_id] = (env.dst, env.message)
        writer.write(
            encode_request(
                api_key=entity.__api_key__,
                api_version=entity.__version__,
                correlation_id=env.correlation_id,
                client_id=_CLIENT_ID,
                body=encode_entity(entity),
                flexible=True,
            )
        )

    async def _connect_and_send(self, env: m.Envelope) -> None:
        peer = env.dst
        if peer not in self.peers:
            return
        existing = self._out.get(peer)
        if existing is not None and not existing.is_closing():
            self._send(existing, env)
            return
        host, port = self.peers[peer]
        try:
            reader, writer, session = await open_async(host, port, self.security, client_id=_CLIENT_ID)
        except (OSError, EOFError, asyncio.IncompleteReadError) as e:
            if isinstance(e, ConnectionRefusedError):
                self.refused[peer] = self.client.epoch
            if isinstance(e, ConnectionError) and not isinstance(e, ConnectionRefusedError | ConnectionResetError):
                # a TLS or SASL refusal: say so once per peer, not at every retry of the core's timers
                if self._peer_failure.get(peer) != str(e):
                    self._peer_failure[peer] = str(e)
                    log.warning("cannot connect to voter %d at %s:%d: %s; retrying", peer, host, port, e)
            self._unreachable(peer)
            return  # the core retries by its timers
        self._out[peer] = writer
        self.refused.pop(peer, None)
        if session.lifetime_ms > 0:
            self._renew_at[peer] = asyncio.get_running_loop().time() + 0.9 * session.lifetime_ms / 1000
        else:
            self._renew_at.pop(peer, None)
        self._send(writer, env)
        self._spawn(self._read_responses(peer, reader, writer))

    async def _read_responses(self, peer: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered = False
        try:
            while True:
                frame = await _read_frame(reader)
                (corr,) = _I32.unpack_from(frame, 0)
                pending = self._pending.pop(corr, None)
                if pending is None:
                    continue
                _dst, request = pending
                schema = codec.RESPONSE_SCHEMA[type(codec.encode(request, destination=peer))]
                # Response header v1: correlation id + empty tagged fields.
                entity = decode_body(schema, frame, 5)
                for ep in getattr(entity, "node_endpoints", ()):
                    if int(ep.node_id) != self.client.node_id:
                        self.peers[int(ep.node_id)] = (ep.host, int(ep.port))
                msg = codec.decode(entity, request=request)
                self._inbox.put_nowait(m.Envelope(peer, self.client.node_id, corr, msg))
                answered = True
                if self._peer_failure.pop(peer, None) is not None:  # an answer: the connection works
                    log.info("connected to voter %d again", peer)
        except (OSError, EOFError, asyncio.IncompleteReadError, ValueError) as e:
            if not answered and self.security.ssl_context is not None and not self._stopping:
                # With TLS 1.3 a peer that refuses this node's certificate does so after the
                # handshake, and asyncio reports only the closed connection.
                why = f"closed before answering ({type(e).__name__}): did it refuse this node's certificate? see its log"
                if self._peer_failure.get(peer) != why:
                    self._peer_failure[peer] = why
                    log.warning("connection to voter %d on listener %s: %s; retrying", peer, self.security.listener, why)
        finally:
            if self._out.get(peer) is writer:
                del self._out[peer]
                self._unreachable(peer)  # closed by the peer's side, not replaced by us
            writer.close()

    async def _serve_controller_rpc(self, header: Any, frame: bytes, writer: asyncio.StreamWriter) -> None:
        """A controller request from another node (broker.controller_client), answered in order."""
        req_cls, _resp_cls = self._rpc_schemas[header.api_key]
        if header.api_version != req_cls.__version__:
            raise ValueError(f"api {header.api_key} v{header.api_version} is not spoken between kavka nodes")
        request = decode_body(req_cls, frame, header.header_size)
        try:
            body = encode_entity(await self.controller_apis.handle(header.api_key, request, connection=writer))
        except Exception as e:
            raise _HandlerError(header.api_key) from e
        writer.write(_I32.pack(4 + 1 + len(body)) + _I32.pack(header.correlation_id) + b"\x00" + body)
        await writer.drain()

    async def _serve_direct(self, header: Any, frame: bytes, writer: asyncio.StreamWriter, *, denied: bool = False) -> None:
        """KIP-919: an admin client's request straight to this controller (ControllerApis.DIRECT_APIS),
        at its own version, answered with the response header that version takes; `denied`: with
        CLUSTER_AUTHORIZATION_FAILED."""
        key, version = header.api_key, header.api_version
        # A too-new ApiVersions is answered from its header alone (KIP-511); any other body must
        # decode, as Kafka parses every request before it answers (a malformed one: closed).
        too_new = key == _API_VERSIONS and version > api.SUPPORTED[_API_VERSIONS][1]
        request = None if too_new else decode_body(api.request_schema(key, version), frame, header.header_size)
        try:
            if denied:
                response = denied_response(key, api.response_schema(key, version), request)
            else:
                response = await self.controller_apis.handle_direct(key, version, request, self.listener_name,
                                                                    sasl=self.server_sasl is not None)
            body = encode_entity(response)
        except Exception as e:
            raise _HandlerError(key) from e
        tagged = b"\x00" if key != _API_VERSIONS and api.response_header_flexible(key, version) else b""
        writer.write(_I32.pack(4 + len(tagged) + len(body)) + _I32.pack(header.correlation_id) + tagged + body)
        await writer.drain()

    async def _refuse_controller_rpc(self, header: Any, frame: bytes, writer: asyncio.StreamWriter) -> None:
        req_cls, resp_cls = self._rpc_schemas[header.api_key]
        if header.api_version != req_cls.__version__:
            raise ValueError(f"api {header.api_key} v{header.api_version} is not spoken between kavka nodes")
        request = decode_body(req_cls, frame, header.header_size)
        body = encode_entity(denied_response(header.api_key, resp_cls, request))
        writer.write(_I32.pack(4 + 1 + len(body)) + _I32.pack(header.correlation_id) + b"\x00" + body)
        await writer.drain()

    # ---- inbound -------------------------------------------------------------------------

    async def _authenticate(self, auth: SaslServerAuthenticator, frame: bytes, writer: asyncio.StreamWriter) -> str:
        """SASL on the controller listener, as kavka.broker.server does on client listeners (the
        same state machine): "serve" the frame as usual, it was "answered", or the connection is "closed"."""
        peer = writer.get_extra_info("peername") or ("?", 0)
        who = f"{peer[0]}:{peer[1]}"
        action = auth.on_frame(frame, int(asyncio.get_running_loop().time() * 1000))
        if isinstance(action, Serve):
            # Before authentication only ApiVersions gets here: answered where the listener serves
            # admin clients (KIP-919; Kafka's clients ask it before SaslHandshake).
            if auth.authenticated or self.controller_apis is not None:
                return "serve"
            action = Close("ApiVersions is not served on the controller listener")
        if isinstance(action, Close):
            log.warning("closing connection from %s on the controller listener: %s", who, action.reason)
            writer.close()
            return "closed"
        if isinstance(action, Failed):
            log.info("failed SASL authentication from %s on %s (user %r): %s", who, auth.settings.listener, action.user, action.reason)
            await asyncio.sleep(auth.settings.failed_delay_ms / 1000)  # KIP-306: the answer and the close wait
            if action.reply is not None:
                self._write_reply(writer, action.reply)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return "closed"
        reply = action.reply if isinstance(action, Succeeded) else action
        if isinstance(action, Succeeded):
            log.debug("SASL authentication from %s on %s: principal %s", who, auth.settings.listener, action.principal)
        self._write_reply(writer, reply)
        return "answered"

    @staticmethod
    def _write_reply(writer: asyncio.StreamWriter, reply: Respond | RawToken) -> None:
        if isinstance(reply, RawToken):
            writer.write(_I32.pack(len(reply.token)) + reply.token)
        else:
            writer.write(encode_response(reply.correlation_id, encode_entity(reply.response), flexible_header=reply.flexible))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._inbound.add(writer)
        auth = SaslServerAuthenticator(self.server_sasl) if self.server_sasl is not None else None
        principal = ANONYMOUS
        peername = writer.get_extra_info("peername") or ("?", 0)
        host = str(peername[0])
        try:
            if self.server_tls is not None:
                principal = peer_principal(self.server_tls, writer.get_extra_info("ssl_object"))
            while True:
                self._idle_since[writer] = asyncio.get_running_loop().time()
                if auth is not None and not auth.authenticated:
                    # sasl.server.max.receive.size: a stranger cannot make the node buffer more
                    frame = await _read_frame(reader, self.server_sasl.max_receive_size)  # type: ignore[union-attr]
                else:
                    frame = await _read_frame(reader)
                self._idle_since.pop(writer, None)  # served now: not idle while its handler runs
                if auth is not None:
                    outcome = await self._authenticate(auth, frame, writer)
                    if outcome == "closed":
                        return
                    if outcome == "answered":
                        continue
                    principal = auth.principal or principal
                api_key, api_version, _ = peek_request_header(frame)  # a frame shorter than that: closed
                direct = self.controller_apis is not None and self.controller_apis.serves_directly(api_key, api_version)
                if direct and api_key == _API_VERSIONS:
                    # Request header v1 below v3, v2 from v3; a too-new one may have any, and is
                    # answered from its correlation id alone (KIP-511).
                    too_new = api_version > api.SUPPORTED[_API_VERSIONS][1]
                    header = _bare_header(frame) if too_new else read_request_header(frame, flexible=api_version >= 3)
                else:  # the RPCS, the raft RPCs and the other DIRECT_APIS all have flexible versions only
                    header = read_request_header(frame, flexible=True)
                # ApiVersions is answered to anyone (Kafka never authorizes it).
                if api_key != _API_VERSIONS and self.cluster_action is not None and not self.cluster_action(principal, host):
                    DENIALS.denied(principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME,
                                   api_name(header.api_key))
                    if direct:
                        await self._serve_direct(header, frame, writer, denied=True)
                        continue
                    if header.api_key in self._rpc_schemas and self.controller_apis is not None:
                        await self._refuse_controller_rpc(header, frame, writer)
                        continue
                    return  # a KRaft RPC from a principal that may not take part: closed
                if direct:
                    await self._serve_direct(header, frame, writer)
                    continue
                if header.api_key in self._rpc_schemas and self.controller_apis is not None:
                    await self._serve_controller_rpc(header, frame, writer)
                    continue
                schema = _REQUEST_SCHEMAS.get(header.api_key)
                if schema is None or header.api_version != schema.__version__:
                    raise ValueError(f"api {header.api_key} v{header.api_version} is not a KRaft RPC here")
                entity = decode_body(schema, frame, header.header_size)
                try:
                    msg = codec.decode(entity)
                except ValueError as e:
                    refusal = codec.refusal(entity, self.client.config.cluster_id)
                    if refusal is None:
                        raise
                    log.warning("refusing a request from %s on the controller listener: %s (%s)",
                                writer.get_extra_info("peername"), e, refusal.error_code.name.upper())
                    body = encode_entity(refusal)
                    writer.write(_I32.pack(4 + 1 + len(body)) + _I32.pack(header.correlation_id) + b"\x00" + body)
                    await writer.drain()
                    continue
                src = _sender(msg)
                self._answer_to[(src, header.correlation_id)] = writer
                self._inbox.put_nowait(m.Envelope(src, self.client.node_id, header.correlation_id, msg))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the peer went away
        except _HandlerError as e:  # this node's bug, not the peer's bytes: with its traceback
            log.error("error in the %s handler for %s on the controller listener; closing its connection",
                      api_name(e.api_key), writer.get_extra_info("peername"), exc_info=e.__cause__)
        except Exception as e:  # noqa: BLE001 -- a peer's bad bytes close this connection only
            log.warning("closing a controller-listener connection from %s: %s", writer.get_extra_info("peername"), e)
        except asyncio.CancelledError:
            pass  # stop(): asyncio's server callback would log a cancelled handler as an error
        finally:
            writer.close()
            self._inbound.discard(writer)
            self._idle_since.pop(writer, None)
            if self.controller_apis is not None:
                self.controller_apis.connection_lost(writer)  # a broker heartbeating over it may be dead
            if task is not None:
                self._tasks.discard(task)


class _HandlerError(Exception):
    """A controller-listener handler raised (or answered what does not encode): logged at ERROR
    with the cause's traceback, as a client listener logs its handlers' errors, and the connection
    closed; a request that does not decode is the peer's fault, a WARNING."""

    def __init__(self, api_key: int) -> None:
        super().__init__(api_key)
        self.api_key = api_key


@dataclasses.dataclass(frozen=True, slots=True)
class _BareHeader:
    """The fields of a request header a too-new ApiVersions is answered from (KIP-511)."""

    api_key: int
    api_version: int
    correlation_id: int
    header_size: int


def _bare_header(frame: bytes) -> _BareHeader:
    key, version, correlation_id = peek_request_header(frame)
    return _BareHeader(key, version, correlation_id, len(frame))


def _node_endpoint(entity: Any, node_id: int, host: str, port: int) -> Any:
    cls = nested(type(entity), "NodeEndpoint")
    return cls(node_id=node_id, host=host, port=port)


def wall_clock_offset_ms() -> int:
    """Wall-clock milliseconds minus the raft core's clock (the event loop's, RaftDriver._now_ms):
    what turns the core's timestamps into the epoch milliseconds DescribeQuorum reports."""
    return int(time.time() * 1000) - int(asyncio.get_running_loop().time() * 1000)
