"""A leader cut off from the other nodes but not from its clients steps down within a session.

Four namespaced nodes: 1-3 the controller quorum (combined nodes), 4 broker-only. Partition 0 is
led by the node that is cut off; partition 1 is healthy and led elsewhere. The cut node is cut
from the other nodes for FAULT_S while the client still reaches every node (blackhole routes
between the nodes' namespaces, never towards the client's: kavka.testing.netns). Two cases:

- `broker`: node 4, broker-only, leads partition 0. The controller fences it when its session
  (3 s here) runs out and elects node 1 or 2.
- `controller`: the node that leads partition 0 is also the active controller. The others elect
  a new leader once they miss it for controller.quorum.fetch.timeout.ms (2 s), whose activation
  check fences its broker a second later; it resigns the raft leadership later still (check
  quorum: 1.5 fetch timeouts without a majority), answering its own broker's heartbeats until
  then, so its broker dates those answers by the quorum's last contact
  (RaftClient.quorum_contact_ms) and steps down a session after the cut all the same.

Either way the cut node hears nothing of its fencing, and before issue 29's step-down kept
answering Produce and Metadata as the leader until the heal, so partition 0's idempotent acks=all
producer waited the whole fault (Kafka's brokers do the same). Now it stops acting as a leader
once no heartbeat it sent within a session was answered (broker.session_watch) and its followers
stopped fetching from it (they cannot reach it either) for replica.lag.time.max.ms (3 s too):
its Produce answers NOT_LEADER_OR_FOLLOWER, its Metadata shows partition 0 leaderless, and the
producer finds the new leader through the other nodes. The next acknowledged record comes a few seconds after
the cut, long before the heal, and every acknowledged record is read back exactly once
afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kavka.testing.netns import FAST_FAILOVER, NetnsCluster, netns_unavailable_reason

_REASON = netns_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces here: {_REASON}")

TOOL = [sys.executable, str(Path(__file__).with_name("ack_gaps.py"))]
GROUPS = "0;1"  # one producer per partition
FAULT_S = 20.0
SESSION_S = int(FAST_FAILOVER["broker.session.timeout.ms"]) / 1000
# The step-down comes a session after the last heartbeat answered (0.5 s apart) -- for the active
# controller's node, after the quorum's last contact -- then the client's metadata refresh and
# retry; the rest is slack for two loaded cores.
RECOVERY_S = SESSION_S + 5.0


def _quorum_leader(cluster: NetnsCluster) -> int:
    code = ("import sys; from kavka.client.admin import AdminClient; "
            "print(AdminClient(sys.argv[1]).describe_quorum().leader_id)")
    res = subprocess.run(cluster.client_argv([sys.executable, "-c", code, cluster.bootstrap]),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return int(res.stdout.strip())


@pytest.mark.parametrize("case", ["broker", "controller"])
def test_a_leader_cut_off_from_the_quorum_steps_down_and_its_clients_move_on(tmp_path: Path, case: str) -> None:
    cluster = NetnsCluster(tmp_path, 4, voters=3)
    producer = None
    try:
        cluster.start()
        cut_node = 4 if case == "broker" else _quorum_leader(cluster)
        others = [i for i in (1, 2, 3, 4) if i != cut_node]
        followers = [i for i in others if i <= 3][:2]  # voters: they stay in the majority
        assignment = f"{cut_node}:{followers[0]}:{followers[1]},{followers[0]}:{followers[1]}:{cut_node}"
        res = subprocess.run(cluster.client_argv([*TOOL, "create", cluster.bootstrap, "t", assignment]),
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        acks = tmp_path / "acks.jsonl"
        producer = subprocess.Popen(cluster.client_argv(
            [*TOOL, "produce", cluster.bootstrap, "t", str(acks), GROUPS, str(FAULT_S + 15)]))
        deadline = time.monotonic() + 60
        while not (acks.exists() and acks.stat().st_size > 10_000):  # both producers acknowledging
            assert time.monotonic() < deadline and producer.poll() is None, "the producers never got going"
            time.sleep(0.1)
        cut = time.time()
        cluster.switch.partition([cut_node], others)
        time.sleep(FAULT_S)  # the fault's length, not a wait for an outcome
        cluster.switch.heal()
        healed = time.time()
        assert producer.wait(timeout=120) == 0
        lines = [json.loads(line) for line in acks.read_text().splitlines()]
        assert lines[-1].get("done") and lines[-1]["undelivered"] == 0, lines[-1]
        acked = [e for e in lines if "p" in e and "err" not in e]

        after_cut = sorted(e["t"] for e in acked if e["p"] == 0 and e["t"] > cut)
        # The first acknowledgement after the stall that the cut began: partition 0 stalls (the
        # fault bites), then resumes on the new leader well before the heal.
        times = [cut, *after_cut]
        gaps = [(b - a, b) for a, b in zip(times, times[1:], strict=False) if a < healed]
        stall, resumed = max(gaps)
        print(f"{case}: partition 0: no acknowledgement for {stall:.2f} s after the cut; resumed {resumed - cut:.2f} s "
              f"after it, the heal came {healed - cut:.2f} s after it")
        assert stall >= SESSION_S - 1.0, f"the fault did not stall partition 0: was node {cut_node} its leader?"
        assert resumed - cut < RECOVERY_S, (stall, resumed - cut)
        assert resumed < healed - 5.0
        log = "".join(cluster.nodes[cut_node].output)
        assert f"broker {cut_node} stops acting as a leader" in log, cluster.nodes[cut_node].tail()
        assert f"broker {cut_node} leads again" in log, cluster.nodes[cut_node].tail()

        read = tmp_path / "read.jsonl"
        res = subprocess.run(cluster.client_argv([*TOOL, "read", cluster.bootstrap, "t", str(read)]),
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        got = Counter((e["p"], e["v"]) for e in map(json.loads, read.read_text().splitlines()) if "v" in e)
        missing = [(e["p"], e["v"]) for e in acked if got[(e["p"], e["v"])] == 0]
        twice = [k for k, n in got.items() if n > 1]
        assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {missing[:5]}"
        assert not twice, f"{len(twice)} records read more than once, e.g. {twice[:5]}"
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait(10)
        cluster.close()
