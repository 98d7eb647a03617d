"""Three RaftDrivers on loopback sockets in one event loop elect a leader and commit over real TCP."""

from __future__ import annotations

import asyncio
import random

from kavka.broker.raft_driver import RaftDriver
from kavka.raft.client import RaftClient, RaftConfig
from kavka.raft.state import EpochState, MemoryQuorumStateStore
from kavka.testing import MemoryLog

VOTERS = (1, 2, 3)


async def _wait_for(cond, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.01)


async def _cluster() -> None:
    peers: dict[int, tuple[str, int]] = {}
    drivers: list[RaftDriver] = []
    for node_id in VOTERS:
        config = RaftConfig(
            node_id=node_id,
            voters=VOTERS,
            cluster_id="driver-test",
            # Kafka's fetch timeout, so a loaded machine's event-loop stalls do not cost the leader.
            election_timeout_ms=500,
            fetch_timeout_ms=2000,
            fetch_max_wait_ms=100,
        )
        now = int(asyncio.get_running_loop().time() * 1000)
        client = RaftClient(config, MemoryLog(), MemoryQuorumStateStore(), random.Random(node_id), now_ms=now)
        drivers.append(RaftDriver(client, host="127.0.0.1", port=0, peers=peers))
    try:
        for d in drivers:
            await d.start()
            peers[d.client.node_id] = ("127.0.0.1", d.port)

        def leaders() -> list[RaftDriver]:
            return [d for d in drivers if d.client.state is EpochState.LEADER]

        await _wait_for(lambda: len(leaders()) == 1)
        leader = leaders()[0].client
        now = int(asyncio.get_running_loop().time() * 1000)
        last = leader.append([(b"k", b"v1"), (None, b"v2")], now_ms=now)
        await _wait_for(lambda: all(d.client.high_watermark > last for d in drivers))
        logs = [d.client.log.read(0, 100) for d in drivers]
        assert logs[0] == logs[1] == logs[2]
        assert [(e.key, e.value) for e in logs[0] if not e.control] == [(b"k", b"v1"), (None, b"v2")]
        assert all(d.client.leader_and_epoch() == leader.leader_and_epoch() for d in drivers)

        # Garbage on a controller listener closes that connection only; the quorum goes on.
        for d in drivers:
            reader, writer = await asyncio.open_connection("127.0.0.1", d.port)
            writer.write(b"\x00\x00\x00\x0chello, raft!" + b"\x00\x00\x00\x02\xff\xff")
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed by the driver
            writer.close()
        now = int(asyncio.get_running_loop().time() * 1000)
        last = leader.append([(b"k", b"v3")], now_ms=now)
        await _wait_for(lambda: all(d.client.high_watermark > last for d in drivers))
    finally:
        for d in drivers:
            await d.stop()


def test_three_drivers_elect_a_leader_and_commit_over_tcp() -> None:
    asyncio.run(_cluster())
