"""`kavka server start --processes N` as an operator runs it: one config file, real processes,
confluent-kafka as the client, SIGTERM and a killed child. Other hosts are simulated by other
`--processes` groups with other --host-id on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_harness import free_port_block
from tests.wait import wait_until

KAVKA = [sys.executable, "-m", "kavka"]


class Group:
    """One `kavka server start --processes N --host-id H` and what it printed."""

    def __init__(self, config: Path, processes: int, host: str) -> None:
        self.proc = subprocess.Popen([*KAVKA, "server", "start", "--config", str(config), "--processes", str(processes),
                                      "--host-id", host], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, ls=lines: [ls.append(x) for x in s], daemon=True).start()

    def wait_ready(self) -> None:
        try:
            wait_until(lambda: any(x.startswith("KAVKA_READY") for x in self.out) or self.proc.poll() is not None,
                       timeout=120, message="the group's KAVKA_READY")
        except AssertionError:
            self.proc.kill()
            raise
        assert self.proc.poll() is None, "".join(self.err + self.out[-30:])

    def pids(self) -> dict[int, int]:
        """node id -> pid, from the `node N ready (pid P, ...)` lines."""
        return {int(m[1]): int(m[2]) for m in (re.match(r"node (\d+) ready \(pid (\d+)", x) for x in self.err) if m}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def _alive(pid: int) -> bool:
    """Running, and not a zombie (a child whose supervisor died waits for whoever adopts it to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _config(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _format(config: Path, processes: int, cluster_id: str) -> None:
    res = subprocess.run([*KAVKA, "storage", "format", "--config", str(config), "--processes", str(processes),
                          "--cluster-id", cluster_id], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("Formatting") == processes


def _cluster_id() -> str:
    return subprocess.run([*KAVKA, "storage", "random-uuid"], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def _brokers(bootstrap: str) -> dict[int, str]:
    out = subprocess.run([*KAVKA, "cluster", "status", "--bootstrap-server", bootstrap, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {b["id"]: b["rack"] for b in json.loads(out.stdout)["brokers"] if not b["fenced"]}


def test_three_processes_from_one_config_round_trip_and_sigterm(tmp_path: Path) -> None:
    base = free_port_block((0, 1, 2, 100))
    config = _config(tmp_path / "server.properties", {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{base},CONTROLLER://127.0.0.1:{base + 100}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{base + 100}",
        "log.dirs": str(tmp_path / "data"),
        "broker.rack": "/dc1/r1",
        "offsets.topic.replication.factor": "1",
    })
    _format(config, 3, _cluster_id())
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["node-1", "node-2", "node-3"]
    group = Group(config, 3, "host-a")
    try:
        group.wait_ready()
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert wait_until(lambda: _brokers(bootstrap) if len(_brokers(bootstrap)) == 3 else None, timeout=60,
                          message="three unfenced brokers") == {1: "/dc1/r1/host-a", 2: "/dc1/r1/host-a", 3: "/dc1/r1/host-a"}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=6, replication_factor=2)])["t"].result(60)
        leaders = wait_until(lambda: {p.leader for p in admin.list_topics("t", timeout=10).topics["t"].partitions.values()}
                             if all(p.leader >= 0 for p in admin.list_topics("t", timeout=10).topics["t"].partitions.values())
                             else None, timeout=60, message="every partition's leader")
        assert leaders == {1, 2, 3}, "the partitions lead on all three processes"
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{base + 2}", "acks": "all"})
        for n in range(600):
            producer.produce("t", value=b"v%d" % n, partition=n % 6)
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{base + 1}", "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["t"])
        got: set[bytes] = set()

        def read() -> bool:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
            return len(got) == 600

        wait_until(read, timeout=90, interval=0, message="every record back")
        consumer.close()
        assert got == {b"v%d" % n for n in range(600)}
        pids = group.pids()
        assert sorted(pids) == [1, 2, 3] and all(_alive(p) for p in pids.values())
        assert any(x.startswith("[node 2] ") for x in group.out), "each child's output, prefixed"
    finally:
        code = group.stop()
    assert code == 0, "".join(group.err)
    assert not any(_alive(p) for p in pids.values())
    assert [x for x in group.err if x.startswith("stopping node")] == [f"stopping node {i} ...\n" for i in (2, 3, 1)]
    # The brokers stopped first, each with a controlled shutdown the controller (node 1, still up) granted.
    for node in (2, 3):
        assert any(x.startswith(f"[node {node}] ") and f"the controller granted the controlled shutdown of broker {node}" in x
                   for x in group.out), node


def test_groups_on_three_hosts_keep_replicas_apart_and_a_dead_child_or_supervisor_stops_its_group(tmp_path: Path) -> None:
    a, b, c = (free_port_block((0, 1, 100)) for _ in range(3))
    voters = f"1@127.0.0.1:{a + 100}"
    common = {"controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters, "broker.rack": "/dc1/r1"}
    cluster_id = _cluster_id()
    configs = {
        "host-a": _config(tmp_path / "a.properties", {
            **common, "node.id": "1", "process.roles": "broker,controller", "log.dirs": str(tmp_path / "a"),
            "listeners": f"PLAINTEXT://127.0.0.1:{a},CONTROLLER://127.0.0.1:{a + 100}"}),
        "host-b": _config(tmp_path / "b.properties", {
            **common, "node.id": "11", "process.roles": "broker", "log.dirs": str(tmp_path / "b"),
            "listeners": f"PLAINTEXT://127.0.0.1:{b}"}),
        "host-c": _config(tmp_path / "c.properties", {
            **common, "node.id": "21", "process.roles": "broker", "log.dirs": str(tmp_path / "c"),
            "listeners": f"PLAINTEXT://127.0.0.1:{c}"}),
    }
    groups: dict[str, Group] = {}
    try:
        for host, config in configs.items():
            _format(config, 2, cluster_id)
            groups[host] = Group(config, 2, host)
        for g in groups.values():
            g.wait_ready()
        bootstrap = f"127.0.0.1:{a}"
        racks = wait_until(lambda: _brokers(bootstrap) if len(_brokers(bootstrap)) == 6 else None, timeout=90,
                           message="six unfenced brokers")
        host_of = {node: rack.rsplit("/", 1)[1] for node, rack in racks.items()}
        assert host_of == {1: "host-a", 2: "host-a", 11: "host-b", 12: "host-b", 21: "host-c", 22: "host-c"}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("spread", num_partitions=12, replication_factor=3)])["spread"].result(60)
        parts = wait_until(lambda: admin.list_topics("spread", timeout=10).topics["spread"].partitions, timeout=30,
                           message="the topic's metadata")
        assert len(parts) == 12
        for p in parts.values():
            assert sorted(host_of[r] for r in p.replicas) == ["host-a", "host-b", "host-c"], (p.id, p.replicas)

        # kill -9 of one child: its group stops the other and exits 1; the other hosts run on.
        pids = groups["host-c"].pids()
        os.kill(pids[22], signal.SIGKILL)
        assert groups["host-c"].proc.wait(90) == 1
        assert any("node 22 exited with -9; stopping the others" in x for x in groups["host-c"].err)
        assert not _alive(pids[21])
        assert groups["host-a"].proc.poll() is None and groups["host-b"].proc.poll() is None

        # kill -9 of a supervisor: the kernel sends its children SIGTERM (PR_SET_PDEATHSIG), and they stop.
        pids = groups["host-b"].pids()
        groups["host-b"].proc.kill()
        wait_until(lambda: not any(_alive(p) for p in pids.values()), timeout=90, message="host-b's brokers to exit")
        assert groups["host-a"].proc.poll() is None
    finally:
        codes = {host: g.stop() for host, g in sorted(groups.items(), key=lambda hg: hg[0] == "host-a")}
    assert codes["host-a"] == 0, codes


def test_refusals_name_the_key_and_start_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path / "server.properties", {
        "node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "controller.quorum.voters": "1@127.0.0.1:19093", "log.dirs": str(tmp_path / "data"),
    })
    for args, words in (
        (["--processes", "2"], "invalid config: listeners: --processes 2: port 19093 would be process 0's listener CONTROLLER"),
        (["--processes", "2", "--override", "controller.quorum.voters="],
         "invalid config: controller.quorum.voters: missing: with --processes 2"),
        (["--host-id", "h"], "--host-id is the host level of broker.rack for --processes"),
    ):
        res = subprocess.run([*KAVKA, "server", "start", "--config", str(config), *args], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode != 0 and words in res.stderr, (args, res.stderr)
        assert not (tmp_path / "data").exists()
