"""`kavka server start --processes N`: what each of N brokers derives from the one config
(kavka.config.process_overrides), the combinations it refuses naming the key, and that with the
host as the last level of broker.rack every built-in rack-aware placer keeps a partition's replicas
on different hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kavka.config import ConfigError, build_config, process_overrides
from kavka.controller.placement import (
    ClusterView,
    MultiLevelPlacer,
    PlacementSpec,
    StripedPlacer,
    rack_path,
)

BROKER = {
    "node.id": "10",
    "process.roles": "broker",
    "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9192",
    "advertised.listeners": "PLAINTEXT://kafka1.example:9092,INTERNAL://127.0.0.1:9192",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9300",
    "log.dirs": "/data/a,/data/b",
    "metadata.log.dir": "/meta",
    "broker.rack": "/dc1/r2",
    "metrics.prometheus.port": "9400",
}

COMBINED = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:9193",
    "log.dir": "/data",
}


def test_each_broker_gets_its_id_ports_dirs_and_host_level_rack() -> None:
    out = process_overrides(BROKER, 3, "host-a")
    assert [o["node.id"] for o in out] == ["10", "11", "12"]
    assert out[2]["listeners"] == "PLAINTEXT://127.0.0.1:9094,INTERNAL://127.0.0.1:9194"
    assert out[2]["advertised.listeners"] == "PLAINTEXT://kafka1.example:9094,INTERNAL://127.0.0.1:9194"
    assert out[1]["log.dirs"] == "/data/a/node-11,/data/b/node-11"
    assert out[1]["metadata.log.dir"] == "/meta/node-11"
    assert {o["broker.rack"] for o in out} == {"/dc1/r2/host-a"}
    assert [o["metrics.prometheus.port"] for o in out] == ["9400", "9401", "9402"]
    assert all("process.roles" not in o for o in out)
    # Each derived config is one kavka starts as it is.
    cfg = build_config({**BROKER, **out[2]})
    assert (cfg.node_id, [e.port for e in cfg.listeners], cfg.log_dirs) == (12, [9094, 9194], [Path("/data/a/node-12"), Path("/data/b/node-12")])


def test_a_rackless_config_gets_the_host_as_its_rack() -> None:
    props = {k: v for k, v in BROKER.items() if k != "broker.rack"}
    assert process_overrides(props, 1, "h1")[0]["broker.rack"] == "/h1"


def test_combined_config_only_voters_keep_the_controller_role() -> None:
    out = process_overrides(COMBINED, 3, "h")
    assert [o["process.roles"] for o in out] == ["broker,controller", "broker", "broker"]
    assert out[0]["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193"
    assert out[1]["listeners"] == "PLAINTEXT://127.0.0.1:9093"  # no controller listener
    assert out[2]["log.dirs"] == "/data/node-3"
    # Every process a voter: the voters' controller ports are the derived ones.
    props = {**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
             "controller.quorum.voters": "1@127.0.0.1:9192,2@127.0.0.1:9193"}
    assert [o["process.roles"] for o in process_overrides(props, 2, "h")] == ["broker,controller"] * 2


@pytest.mark.parametrize(
    ("change", "processes", "key", "words"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094"}, 3, "listeners", "port 9094"),
        ({"metrics.prometheus.port": "9091"}, 2, "metrics.prometheus.port", "port 9092"),
        ({"listeners": "PLAINTEXT://127.0.0.1:65535,INTERNAL://127.0.0.1:9192"}, 2, "listeners", "above 65535"),
        ({"controller.quorum.voters": "11@127.0.0.1:9300"}, 2, "controller.quorum.voters", "process 1 (node.id 11)"),
        ({"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9300", "node.id": "1",
          "inter.broker.listener.name": ""}, 2, "process.roles", "controller-only"),
    ],
)
def test_refusals_name_the_key(change: dict[str, str], processes: int, key: str, words: str) -> None:
    props = {k: v for k, v in {**BROKER, **change}.items() if v}
    with pytest.raises(ConfigError) as e:
        process_overrides(props, processes, "h")
    assert e.value.key == key
    assert words in str(e.value)


def test_combined_refusals() -> None:
    # Process 1's client port would be process 0's controller port.
    props = {**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
             "controller.quorum.voters": "1@127.0.0.1:9093"}
    with pytest.raises(ConfigError) as e:
        process_overrides(props, 2, "h")
    assert e.value.key == "listeners" and "process 0's listener CONTROLLER and process 1's listener PLAINTEXT" in str(e.value)
    with pytest.raises(ConfigError) as e:
        process_overrides({k: v for k, v in COMBINED.items() if k != "controller.quorum.voters"}, 2, "h")
    assert e.value.key == "controller.quorum.voters" and "a cluster of its own" in str(e.value)
    # A voter whose derived controller port is not its entry's.
    props = {**COMBINED, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
             "controller.quorum.voters": "1@127.0.0.1:9192,2@127.0.0.1:9200"}
    with pytest.raises(ConfigError) as e:
        process_overrides(props, 2, "h")
    assert e.value.key == "controller.quorum.voters" and "process 1 (node.id 2)" in str(e.value)
    with pytest.raises(ConfigError) as e:
        process_overrides(COMBINED, 2, "a/b")
    assert e.value.key == "--host-id"


def _racks(hosts: dict[str, str], per_host: int) -> dict[int, str]:
    """Broker ids as --processes derives them: host k's group starts at node.id 10*k + 1."""
    out = {}
    for k, (host, rack) in enumerate(hosts.items()):
        cfg = {**BROKER, "node.id": str(10 * k + 1), "broker.rack": rack, "controller.quorum.voters": "99@127.0.0.1:9300"}
        for o in process_overrides(cfg, per_host, host):
            out[int(o["node.id"])] = o["broker.rack"]
    return out


@pytest.mark.parametrize("placer", [StripedPlacer(), MultiLevelPlacer()], ids=["striped", "multi-level"])
def test_no_two_replicas_of_a_partition_share_a_host(placer: StripedPlacer | MultiLevelPlacer) -> None:
    racks = _racks({"ha": "/dc1/r1", "hb": "/dc1/r1", "hc": "/dc1/r2", "hd": "/dc1/r2"}, 4)
    for rf in (2, 3, 4):
        spec = PlacementSpec(num_partitions=48, replication_factor=rf, seed=7, topic="t")
        for replicas in placer.place(spec, ClusterView(racks=racks), sorted(racks)):
            hosts = [rack_path(racks[b])[-1] for b in replicas]
            assert len(set(hosts)) == rf, (rf, replicas, hosts)


def test_multi_level_spreads_racks_before_hosts() -> None:
    racks = _racks({"ha": "/dc1/r1", "hb": "/dc1/r1", "hc": "/dc1/r2", "hd": "/dc1/r2"}, 2)
    spec = PlacementSpec(num_partitions=24, replication_factor=2, seed=3, topic="t")
    for replicas in MultiLevelPlacer().place(spec, ClusterView(racks=racks), sorted(racks)):
        assert len({rack_path(racks[b])[:2] for b in replicas}) == 2, replicas
