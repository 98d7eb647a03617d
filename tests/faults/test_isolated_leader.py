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

import sys
from collections import Counter
from pathlib import Path

import pytest

from kavka.testing.netns import FAST_FAILOVER, netns_unavailable_reason
from tests.faults.netns_run import AckGapsRun

_REASON = netns_unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"no network namespaces here: {_REASON}")

GROUPS = "0;1"  # one producer per partition
FAULT_S = 20.0
SESSION_S = int(FAST_FAILOVER["broker.session.timeout.ms"]) / 1000
# The step-down comes a session after the last heartbeat answered (0.5 s apart) -- for the active
# controller's node, after the quorum's last contact -- then the client's metadata refresh and
# retry; the rest is slack for two loaded cores.
RECOVERY_S = SESSION_S + 5.0


def _quorum_leader(run: AckGapsRun) -> int:
    code = ("import sys; from kavka.client.admin import AdminClient; "
            "print(AdminClient(sys.argv[1]).describe_quorum().leader_id)")
    return int(run.client([sys.executable, "-c", code, run.cluster.bootstrap], timeout=60).strip())


@pytest.mark.parametrize("case", ["broker", "controller"])
def test_a_leader_cut_off_from_the_quorum_steps_down_and_its_clients_move_on(tmp_path: Path, case: str) -> None:
    with AckGapsRun(tmp_path, 4, voters=3) as run:
        cut_node = 4 if case == "broker" else _quorum_leader(run)
        others = [i for i in (1, 2, 3, 4) if i != cut_node]
        followers = [i for i in others if i <= 3][:2]  # voters: they stay in the majority
        assignment = f"{cut_node}:{followers[0]}:{followers[1]},{followers[0]}:{followers[1]}:{cut_node}"
        run.tool("create", "t", assignment)
        run.produce("t", GROUPS, FAULT_S + 15, started_bytes=10_000)  # both producers acknowledging
        cut, healed = run.cut([cut_node], others, FAULT_S)
        acked = run.acknowledged(timeout=120)

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
        log = "".join(run.cluster.nodes[cut_node].output)
        assert f"broker {cut_node} stops acting as a leader" in log, run.cluster.nodes[cut_node].tail()
        assert f"broker {cut_node} leads again" in log, run.cluster.nodes[cut_node].tail()

        got = Counter((e["p"], e["v"]) for e in run.read("t"))
        missing = [(e["p"], e["v"]) for e in acked if got[(e["p"], e["v"])] == 0]
        twice = [k for k, n in got.items() if n > 1]
        assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {missing[:5]}"
        assert not twice, f"{len(twice)} records read more than once, e.g. {twice[:5]}"
