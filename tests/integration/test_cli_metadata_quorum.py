"""`kavka metadata-quorum` (kafka-metadata-quorum.sh) against real processes: a dynamic quorum grown
from one controller to two with `add-controller` (the joiner's own server config) and shrunk back
with `remove-controller`, `describe --status` and `--replication` showing each step; and Kafka's
own kafka-metadata-quorum (4.4, from its jars) adding and removing a kavka controller."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kio.schema.api_versions.v2 import request as av2
from kio.schema.describe_cluster.v1 import request as dc

from kavka.common import ErrorCode
from tests.broker_harness import KAVKA
from tests.integration.test_dynamic_quorum import _Quorum
from tests.java_deps import run_kafka_tool
from tests.raw_client import RawClient


def _quorum_cli(q: _Quorum, via: int, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*KAVKA, "metadata-quorum", "--bootstrap-server", q.nodes[via].bootstrap]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def _status(q: _Quorum, via: int) -> dict[str, str]:
    res = _quorum_cli(q, via, "describe", "--status")
    assert res.returncode == 0, res.stderr
    return {k: v.strip() for k, v in (line.split(":", 1) for line in res.stdout.splitlines() if ":" in line)}


def _add_once_caught_up(add: Callable[[], subprocess.CompletedProcess[str]], timed_out: Callable[[str], bool], *,
                        timeout: float, pause: float = 0.5) -> subprocess.CompletedProcess[str]:
    """`add()`, an add-controller, again until it succeeds: the active controller refuses with a
    timeout until the joiner has caught up as an observer; any other error fails at once. Not
    `wait_until`, which would take any error for "not yet"."""
    deadline = time.monotonic() + timeout
    while (added := add()).returncode != 0:
        assert timed_out(added.stderr), added.stderr
        assert time.monotonic() < deadline, added.stderr
        time.sleep(pause)
    return added


def _request_timed_out(stderr: str) -> bool:
    """kavka's metadata-quorum refused with REQUEST_TIMED_OUT (the joiner has not caught up yet)."""
    return "REQUEST_TIMED_OUT" in stderr.upper() or "timed out" in stderr


def test_grow_and_shrink_a_quorum_with_the_metadata_quorum_command(tmp_path: Path) -> None:
    q = _Quorum(tmp_path)
    try:
        for i in (1, 2):
            q.nodes[i].format(q.cluster_id)
            q.nodes[i].start()
        d1, d2 = _dir(q, 1), _dir(q, 2)
        status = _status(q, 2)
        assert status["ClusterId"] == q.cluster_id and status["LeaderId"] == "1"
        assert status["CurrentVoters"] == f'[{{"id": 1, "directoryId": "{d1}", "endpoints": ["CONTROLLER://127.0.0.1:{q.ctl[1]}"]}}]'
        assert '"id": 2' in status["CurrentObservers"]
        assert int(status["HighWatermark"]) > 0 and status["MaxFollowerLag"] == "0"

        # add-controller reads node 2's own server config (Kafka's --command-config): its id, the
        # directory id of its metadata log dir and its controller endpoint.
        config = str(q.nodes[2].config_file)
        dry = _quorum_cli(q, 1, "--command-config", config, "add-controller", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        expected = f"controller 2 with directory id {d2} and endpoints: CONTROLLER://127.0.0.1:{q.ctl[2]}"
        assert dry.stdout.strip() == f"DRY RUN of adding {expected}"
        assert _voter_ids(q) == [1]  # a dry run changes nothing
        added = _add_once_caught_up(lambda: _quorum_cli(q, 1, "--command-config", config, "add-controller"),
                                    _request_timed_out, timeout=30)
        assert added.stdout.strip() == f"Added {expected}"

        rows = json.loads(_quorum_cli(q, 2, "describe", "--replication", "--json").stdout)
        assert [(r["NodeId"], r["DirectoryId"], r["Status"]) for r in rows] == [(1, d1, "Leader"), (2, d2, "Follower")]
        assert all(r["LogEndOffset"] > 0 and r["LastFetchTimestamp"] > 0 for r in rows)
        table = _quorum_cli(q, 2, "describe", "--replication", "--human-readable")
        assert table.returncode == 0 and "ms ago" in table.stdout and "Follower" in table.stdout, table
        for column in ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"):
            assert column in table.stdout

        # remove-controller through node 2 (relayed to the active controller, node 1).
        removed = _quorum_cli(q, 2, "remove-controller", "--controller-id", "2", "--controller-directory-id", d2)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.strip() == f"Removed KRaft controller 2 with directory id {d2}"
        assert _voter_ids(q) == [1]
        wrong = _quorum_cli(q, 1, "remove-controller", "-i", "1", "-d", d2)  # the directory id must match
        assert wrong.returncode == 1 and "VOTER_NOT_FOUND" in wrong.stderr.upper(), wrong.stderr

        # Kafka's usage errors.
        assert _quorum_cli(q, 1, "describe").returncode == 2
        assert _quorum_cli(q, 1, "describe", "--status", "--replication").returncode == 2
        assert _quorum_cli(q, 1, "add-controller").returncode == 1  # no controller config
    finally:
        for n in q.nodes.values():
            n.kill()


def test_kafkas_metadata_quorum_tool_adds_and_removes_a_kavka_controller(tmp_path: Path) -> None:
    q = _Quorum(tmp_path)
    tool = "org.apache.kafka.tools.MetadataQuorumCommand"
    try:
        for i in (1, 2):
            q.nodes[i].format(q.cluster_id)
            q.nodes[i].start()
        d2 = _dir(q, 2)
        added = _add_once_caught_up(
            lambda: run_kafka_tool(tool, "--bootstrap-server", q.nodes[1].bootstrap, "--command-config",
                                   str(q.nodes[2].config_file), "add-controller"),
            lambda stderr: "TimeoutException" in stderr or "timed out" in stderr,
            timeout=60, pause=0,  # a JVM's start is pause enough
        )
        assert added.stdout.strip() == (
            f"Added controller 2 with directory id {d2} and endpoints: CONTROLLER://127.0.0.1:{q.ctl[2]}"
        )
        assert _voter_ids(q) == [1, 2]
        removed = run_kafka_tool(tool, "--bootstrap-server", q.nodes[2].bootstrap, "remove-controller",
                                 "--controller-id", "2", "--controller-directory-id", d2)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout.strip() == f"Removed KRaft controller 2 with directory id {d2}"
        assert _voter_ids(q) == [1]
    finally:
        for n in q.nodes.values():
            n.kill()


def _dir(q: _Quorum, i: int) -> str:
    from kavka.storage.meta_properties import read_meta_properties

    return read_meta_properties(q.nodes[i].log_dirs[0]).directory_id


def _voter_ids(q: _Quorum) -> list[int]:
    rows = json.loads(_quorum_cli(q, 1, "describe", "--replication", "--json").stdout)
    return [r["NodeId"] for r in rows if r["Status"] != "Observer"]


def test_bootstrap_controller_talks_to_the_controllers_directly(tmp_path: Path) -> None:
    """--bootstrap-controller (KIP-919), kavka's and Kafka's tool alike, given a controller that is
    not the active one: DescribeCluster on the controller listener names the active controller,
    which answers DescribeQuorum, AddRaftVoter and RemoveRaftVoter; `kafka-features
    --bootstrap-controller describe` reads the controller's ApiVersions."""
    q = _Quorum(tmp_path)
    tool = "org.apache.kafka.tools.MetadataQuorumCommand"
    try:
        for i in (1, 2):
            q.nodes[i].format(q.cluster_id)
            q.nodes[i].start()
        d1, d2 = _dir(q, 1), _dir(q, 2)
        via = f"127.0.0.1:{q.ctl[2]}"  # node 2: an observer, not the active controller

        def kavka(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*KAVKA, "metadata-quorum", "--bootstrap-controller", via, *args],
                                  capture_output=True, text=True, timeout=60)

        status = kavka("describe", "--status")
        assert status.returncode == 0, status.stderr
        fields = {k: v.strip() for k, v in (line.split(":", 1) for line in status.stdout.splitlines())}
        assert fields["ClusterId"] == q.cluster_id and fields["LeaderId"] == "1"
        assert json.loads(fields["CurrentVoters"]) == [
            {"id": 1, "directoryId": d1, "endpoints": [f"CONTROLLER://127.0.0.1:{q.ctl[1]}"]}]
        assert json.loads(fields["CurrentObservers"]) == [{"id": 2, "directoryId": d2}]
        kafka = run_kafka_tool(tool, "--bootstrap-controller", via, "describe", "--status")
        assert kafka.returncode == 0 and f"ClusterId:              {q.cluster_id}" in kafka.stdout, kafka.stdout + kafka.stderr
        assert "LeaderId:               1" in kafka.stdout
        features = run_kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-controller", via, "describe")
        assert features.returncode == 0 and re.search(r"Feature: kraft.version\s.*FinalizedVersionLevel: 1", features.stdout), features

        # add-controller through the controllers, kavka's tool; remove-controller, Kafka's.
        config = str(q.nodes[2].config_file)
        _add_once_caught_up(lambda: kavka("--command-config", config, "add-controller"), _request_timed_out, timeout=30)
        rows = json.loads(kavka("describe", "--replication", "--json").stdout)
        assert [(r["NodeId"], r["Status"]) for r in rows] == [(1, "Leader"), (2, "Follower")]
        kafka = run_kafka_tool(tool, "--bootstrap-controller", via, "describe", "--replication")
        assert kafka.returncode == 0 and "Follower" in kafka.stdout, kafka.stdout + kafka.stderr
        removed = run_kafka_tool(tool, "--bootstrap-controller", via, "remove-controller",
                                 "--controller-id", "2", "--controller-directory-id", d2)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert _voter_ids(q) == [1]

        # Kafka's answers on the controller listener: the broker endpoint type is refused, and a
        # client's older ApiVersions (request header v1) gets its own version's answer.
        with RawClient(q.ctl[2]) as c:
            brokers = c.call(60, 1, dc.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1))
            old = c.call(18, 2, av2.ApiVersionsRequest())
        assert brokers.error_code is ErrorCode.mismatched_endpoint_type and brokers.brokers == ()
        assert old.error_code is ErrorCode.none and {k.api_key for k in old.api_keys} == {18, 55, 60, 80, 81}

        both = kavka("--bootstrap-server", q.nodes[1].bootstrap, "describe", "--status")
        assert both.returncode == 2 and "Only one of --bootstrap-server or --bootstrap-controller" in both.stderr
    finally:
        for n in q.nodes.values():
            n.kill()
