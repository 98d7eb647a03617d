"""Failover as a user sees it (issue 29 item 1), on real processes, a few kills per case.

An idempotent acks=all confluent-kafka producer writes to an RF=3, min.insync.replicas=2 topic
throughout; a node is killed -9 (or stopped gracefully); every acknowledged record must then be
read back exactly once, at the offset it was acknowledged with, and no live broker may have been
fenced. The time bounds are generous (a loaded 2-core machine) but fail on Kafka's behaviour,
where a broker that dies with the active controller stays unfenced for a whole
broker.session.timeout.ms (9 s) after the election; `python -m bench.failover` measures the
figures (20 kills per case).
"""

from __future__ import annotations

import re
import signal
import time

import pytest
from bench.failover import (
    Load,
    cluster_for,
    create_topic,
    dedicated_controller_kill,
    kill_and_measure,
    pick,
    read_back,
)

from kavka.client.admin import AdminClient
from tests.broker_harness import Cluster
from tests.wait import wait_until

# Kafka's behaviour (a fresh 9 s session for the dead broker) cannot meet it; kavka's median is ~4 s.
PRODUCE_BOUND_S = 8.0
METADATA_BOUND_S = 8.0


def _fenced_lines(c: Cluster, since: dict[int, int]) -> list[tuple[int, str]]:
    """(broker id, line) of every 'fenced broker N' the controllers logged after `since` (line counts)."""
    out = []
    for i, n in c.nodes.items():
        for line in n.output[since.get(i, 0):]:
            m = re.search(r"fenced broker (\d+)", line)
            if m:
                out.append((int(m.group(1)), line.strip()))
    return out


def _stepped_down(c: Cluster, since: dict[int, int]) -> list[str]:
    """Every 'stops acting as a leader' (broker.session_watch) any node logged after `since`."""
    return [line.strip() for i, n in c.nodes.items() for line in n.output[since.get(i, 0):]
            if "stops acting as a leader" in line]


def _marks(c: Cluster) -> dict[int, int]:
    return {i: len(n.output) for i, n in c.nodes.items()}


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory):
    c = cluster_for("leader+controller", tmp_path_factory.mktemp("failover")).start(timeout=90)
    yield c
    c.stop()
    for n in c.nodes.values():
        n.kill()


@pytest.mark.parametrize("case", ["leader+controller", "leader", "controller"])
def test_kill_9_fails_over_fast_and_loses_no_acknowledged_record(combined: Cluster, case: str) -> None:
    for k in range(2 if case == "leader+controller" else 1):
        marks = _marks(combined)
        r = kill_and_measure(combined, case, k)  # reads every acked record back (exactly once)
        assert r.produce_s < PRODUCE_BOUND_S, f"{case}: next ack {r.produce_s:.1f} s after the kill"
        if case == "controller":
            assert r.metadata_s is not None and r.metadata_s < METADATA_BOUND_S, f"CreateTopics after {r.metadata_s:.1f} s"
        wrong = [line for b, line in _fenced_lines(combined, marks) if b != r.victim]
        assert not wrong, f"a live broker was fenced: {wrong}"
        # Every survivor reached a controller within its session: none stepped down.
        assert not _stepped_down(combined, marks)


def test_a_clean_shutdown_of_the_leaders_node_gives_the_producer_no_error(combined: Cluster) -> None:
    r = kill_and_measure(combined, "clean", 0)
    assert r.producer_errors == 0
    assert r.produce_s < PRODUCE_BOUND_S


def test_a_broker_paused_for_less_than_its_session_under_load_is_not_fenced(combined: Cluster) -> None:
    victim, replicas = pick(combined, "leader")  # the partition leader, not the active controller
    topic = f"fo-pause-{int(time.time() * 1000)}"
    create_topic(combined, topic, replicas)
    marks = _marks(combined)
    load = Load(combined.bootstrap, topic).start()
    admin = AdminClient(",".join(n.bootstrap for i, n in combined.nodes.items() if i != victim))
    try:
        wait_until(lambda: len(load.acked) >= 50, 30)
        combined.nodes[victim].proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 4.0:  # broker.session.timeout.ms is 9 s
                fenced = {b.node_id for b in admin.describe_cluster().brokers if b.fenced}
                assert victim not in fenced, f"paused broker {victim} fenced after {time.monotonic() - t0:.1f} s"
                time.sleep(0.2)
        finally:
            combined.nodes[victim].proc.send_signal(signal.SIGCONT)
        n = len(load.acked)
        wait_until(lambda: len(load.acked) > n + 50, 30)
    finally:
        load.stop()
        admin.close()
    assert not _fenced_lines(combined, marks)
    # Nor did it step down on waking (broker.session_watch holds for the heartbeat due then).
    assert not _stepped_down(combined, marks)
    read_back(combined, load)


def test_dedicated_controllers_broker_kill_and_active_controller_kill() -> None:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="kavka-failover-dedicated-") as d:
        c = cluster_for("dedicated", Path(d)).start(timeout=90)
        try:
            marks = _marks(c)
            r = kill_and_measure(c, "dedicated", 0)
            assert r.produce_s < PRODUCE_BOUND_S
            s = dedicated_controller_kill(c, 0)
            assert s < METADATA_BOUND_S, f"CreateTopics after {s:.1f} s"
            wrong = [line for b, line in _fenced_lines(c, marks) if b != r.victim]
            assert not wrong, f"a live broker was fenced: {wrong}"
        finally:
            c.stop()
            for n in c.nodes.values():
                n.kill()
