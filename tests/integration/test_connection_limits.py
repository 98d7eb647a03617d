"""Bounded connections (issue 10 item 5): connections.max.idle.ms and max.connections.

Raw sockets speak ApiVersions to a private broker: an idle connection is
closed by the broker after connections.max.idle.ms while a busy one stays;
past max.connections a new client is not accepted (Kafka's Acceptor blocks:
the client waits in the listen backlog) until an open connection closes.
"""

from __future__ import annotations

import time

from tests.raw_client import RawClient

_AV = {"client_software_name": "raw", "client_software_version": "1"}


def _ask(c: RawClient, corr: int, timeout: float = 10.0) -> bytes:
    c.sock.settimeout(timeout)
    c.send(18, 3, correlation_id=corr, **_AV)
    return c.read_frame()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(broker_factory):
    b = broker_factory(overrides={"connections.max.idle.ms": "1000"}).start()
    idle, busy = RawClient(b.port), RawClient(b.port)
    try:
        assert _ask(idle, 1) and _ask(busy, 1)
        started = time.monotonic()
        corr = 2
        # The busy connection talks every 200 ms for 3 s; the idle one says nothing.
        while time.monotonic() - started < 3.0:
            assert _ask(busy, corr), "a busy connection was cut"
            corr += 1
            time.sleep(0.2)
        assert idle.closed_by_peer(timeout=10), "the idle connection is still open"
        assert _ask(busy, corr), "the busy connection was closed with the idle one"
        assert "connections.max.idle.ms" in b.log_text()
    finally:
        idle.close()
        busy.close()
    assert b.stop() == 0


def test_max_connections_holds_new_clients_until_one_closes(broker_factory):
    b = broker_factory(overrides={"max.connections": "2"}).start()
    first, second = RawClient(b.port), RawClient(b.port)
    third = None
    try:
        assert _ask(first, 1) and _ask(second, 1)
        third = RawClient(b.port)  # lands in the backlog
        third.send(18, 3, correlation_id=7, **_AV)
        third.sock.settimeout(1.5)
        try:
            data = third.sock.recv(4)
        except TimeoutError:
            data = None
        assert data is None, f"a connection past max.connections was served or closed ({data!r})"
        assert _ask(first, 2) and _ask(second, 2), "the open connections stopped being served"
        first.close()
        third.sock.settimeout(10)
        assert third.read_frame(), "the waiting client was not served once a slot freed"
    finally:
        for c in (first, second, third):
            if c is not None:
                c.close()
    assert b.stop() == 0


def test_idle_and_connection_limits_are_validated(broker_factory):
    import pytest

    for key, value in (("max.connections", "-1"), ("connections.max.idle.ms", "-2")):
        bad = broker_factory(overrides={key: value})
        with pytest.raises(RuntimeError, match=key):
            bad.start(timeout=30)
