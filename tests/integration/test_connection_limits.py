"""Bounded connections (issue 10 item 5): connections.max.idle.ms and max.connections.

Raw sockets speak ApiVersions to a private broker: an idle connection is
closed by the broker after connections.max.idle.ms while a busy one stays;
past max.connections a new client is not accepted (Kafka's Acceptor blocks:
the client waits in the listen backlog) until an open connection closes.
"""

from __future__ import annotations

import socket
import time

from tests.integration.test_protocol_robustness import _closed_by_peer, _recv_frame, _request

_AV = {"client_software_name": "raw", "client_software_version": "1"}


def _open(b) -> socket.socket:  # noqa: ANN001
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _ask(s: socket.socket, corr: int, timeout: float = 10.0) -> bytes:
    s.settimeout(timeout)
    s.sendall(_request(18, 3, corr, **_AV))
    return _recv_frame(s)


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker_factory):
    b = broker_factory(overrides={"connections.max.idle.ms": "1000"}).start()
    idle, busy = _open(b), _open(b)
    try:
        assert _ask(idle, 1) and _ask(busy, 1)
        started = time.monotonic()
        corr = 2
        # The busy connection talks every 200 ms for 3 s; the idle one says nothing.
        while time.monotonic() - started < 3.0:
            assert _ask(busy, corr), "a busy connection was cut"
            corr += 1
            time.sleep(0.2)
        assert _closed_by_peer(idle, timeout=10), "the idle connection is still open"
        assert _ask(busy, corr), "the busy connection was closed with the idle one"
        assert "connections.max.idle.ms" in b.log_text()
    finally:
        idle.close()
        busy.close()
    assert b.stop() == 0


def test_max_connections_holds_new_clients_until_one_closes(broker_factory):
    b = broker_factory(overrides={"max.connections": "2"}).start()
    first, second = _open(b), _open(b)
    third = None
    try:
        assert _ask(first, 1) and _ask(second, 1)
        third = socket.create_connection(("127.0.0.1", b.port), timeout=10)  # lands in the backlog
        third.sendall(_request(18, 3, 7, **_AV))
        third.settimeout(1.5)
        try:
            data = third.recv(4)
        except TimeoutError:
            data = None
        assert data is None, f"a connection past max.connections was served or closed ({data!r})"
        assert _ask(first, 2) and _ask(second, 2), "the open connections stopped being served"
        first.close()
        third.settimeout(10)
        assert _recv_frame(third), "the waiting client was not served once a slot freed"
    finally:
        for s in (first, second, third):
            if s is not None:
                s.close()
    assert b.stop() == 0


def test_idle_and_connection_limits_are_validated(broker_factory):
    import pytest

    for key, value in (("max.connections", "-1"), ("connections.max.idle.ms", "-2")):
        bad = broker_factory(overrides={key: value})
        with pytest.raises(RuntimeError, match=key):
            bad.start(timeout=30)
