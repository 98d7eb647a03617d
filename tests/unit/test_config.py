import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The rules these tests exercise belong to placement and tiered storage, which register them with
# kavka.config when imported (config imports nothing of kavka above kavka.common and kavka.protocol).
import kavka.controller.placement  # noqa: F401
import kavka.tiered.remote_log_rules  # noqa: F401
from kavka import config as config_module
from kavka.config import (
    ConfigError,
    ConfigSource,
    build_config,
    informational_keys,
    load_config,
    registered,
    validate_tiered_topic,
    validate_topic_configs,
)


def test_defaults_and_kafka_names(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnode.id=3\nlog.dirs=/a,/b\nlisteners=PLAINTEXT://127.0.0.1:9999\nlog.retention.hours=2\n")
    c = load_config(f)
    assert c.node_id == 3
    assert [str(p) for p in c.log_dirs] == ["/a", "/b"]
    assert c.listeners[0].port == 9999
    assert c.static_topic_default("retention.ms") == (7200000, ConfigSource.STATIC_BROKER_CONFIG)
    assert c.static_topic_default("segment.bytes") == (1073741824, ConfigSource.DEFAULT_CONFIG)


def test_invalid_value_names_the_key():
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", "log.segment.bytes": "lots"})
    assert e.value.key == "log.segment.bytes"
    assert "log.segment.bytes" in str(e.value)


def test_out_of_range_and_missing_node_id():
    with pytest.raises(ConfigError, match="num.partitions"):
        build_config({"node.id": "1", "num.partitions": "0"})
    with pytest.raises(ConfigError, match="node.id"):
        build_config({})
    with pytest.raises(ConfigError, match="listeners"):
        build_config({"node.id": "1", "listeners": "nonsense"})


def test_unknown_key_warns_and_is_kept(caplog):
    c = build_config({"node.id": "1", "frobnicate.level": "9"})
    assert c.unknown == {"frobnicate.level": "9"}
    assert "frobnicate.level" in caplog.text


def test_overrides_win(tmp_path):
    f = tmp_path / "s.properties"
    f.write_text("node.id=1\nnum.partitions=2\n")
    assert load_config(f, ["num.partitions=5"])["num.partitions"] == 5
    with pytest.raises(ConfigError, match="--override"):
        load_config(f, ["oops"])


def test_topic_config_validation():
    assert validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": 1000,
        "cleanup.policy": ["compact", "delete"],
    }
    with pytest.raises(ConfigError, match="no.such"):
        validate_topic_configs({"no.such": "1"})
    with pytest.raises(ConfigError, match="message.timestamp.type"):
        validate_topic_configs({"message.timestamp.type": "Wallclock"})


@pytest.mark.parametrize(
    ("props", "key"),
    [
        # A SASL inter-broker listener needs sasl.mechanism.inter.broker.protocol: Kafka's default, GSSAPI, needs Kerberos.
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}, "sasl.mechanism.inter.broker.protocol"),
        # A SASL listener must name its mechanisms: Kafka's default, GSSAPI, needs Kerberos.
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
          "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"}, "sasl.enabled.mechanisms"),
        ({"listeners": "EXTERNAL://127.0.0.1:9093", "listener.security.protocol.map": "EXTERNAL:SASL_SSL"},
         "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.enabled.mechanisms"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "sasl.mechanism.inter.broker.protocol"),
        ({"listener.name.external.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.external.sasl.enabled.mechanisms"),
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name"),
        ({"super.users": "User:admin"}, "super.users"),
        ({"allow.everyone.if.no.acl.found": "true"}, "allow.everyone.if.no.acl.found"),
        ({"authorizer.class.name": "kavka", "allow.everyone.if.no.acl.found": "maybe"}, "allow.everyone.if.no.acl.found"),
    ],
)
def test_security_settings_stop_startup_naming_the_key(props, key):
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", **props})
    assert e.value.key == key
    assert any(w in str(e.value) for w in ("not supported", "no effect", "must be one of", "invalid value"))


@pytest.mark.parametrize("cls", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kavka"])
def test_the_standard_authorizer_is_accepted_with_its_keys(cls):
    c = build_config({"node.id": "1", "authorizer.class.name": cls, "super.users": "User:admin;User:ops",
                      "allow.everyone.if.no.acl.found": "true"})
    assert c.values["authorizer.class.name"] == cls
    assert c.values["super.users"] == "User:admin;User:ops"
    assert c.values["allow.everyone.if.no.acl.found"] is True
    assert build_config({"node.id": "1"}).values["authorizer.class.name"] == ""


def test_plaintext_spelled_out_is_accepted():
    c = build_config(
        {
            "node.id": "1",
            "listeners": "INTERNAL://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "security.inter.broker.protocol": "PLAINTEXT",
        }
    )
    assert c.listeners[0].name == "INTERNAL"
    assert c.outgoing_inter_broker_listener() == "PLAINTEXT"  # the listener named after the protocol (Kafka's rule)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        # A broker-only or controller-only node must be told where the quorum is.
        ({"process.roles": "broker"}, "controller.quorum.voters"),
        ({"process.roles": "controller"}, "controller.quorum.voters"),
        ({"process.roles": ""}, "process.roles"),
        # A combined node must be a voter; a multi-voter quorum needs the controller listener, at its address.
        ({"controller.quorum.voters": "2@127.0.0.1:9093,3@127.0.0.1:9094"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094"}, "controller.listener.names"),
        (
            {
                "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094",
                "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095",
            },
            "controller.quorum.voters",
        ),
        ({"controller.quorum.voters": "1@127.0.0.1:9093,1@127.0.0.1:9094"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "x@y"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "1@host"}, "controller.quorum.voters"),
        # KIP-853: a dynamic quorum's bootstrap servers, not with static voters, and a controller listener.
        (
            {"controller.quorum.bootstrap.servers": "127.0.0.1:9093", "controller.quorum.voters": "1@127.0.0.1:9093"},
            "controller.quorum.bootstrap.servers",
        ),
        ({"controller.quorum.bootstrap.servers": "no-port"}, "controller.quorum.bootstrap.servers"),
        ({"controller.quorum.bootstrap.servers": "127.0.0.1:9093"}, "controller.listener.names"),
        ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ],
)
def test_cluster_settings_this_release_cannot_honour_are_refused(props, key):
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", **props})
    assert e.value.key == key


def test_a_voter_of_a_three_node_quorum_is_accepted():
    c = build_config(
        {
            "node.id": "2",
            "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094",
            "controller.quorum.election.timeout.ms": "500",
        }
    )
    assert c["controller.quorum.election.timeout.ms"] == 500


def test_single_voter_naming_itself_is_accepted():
    c = build_config({"node.id": "4", "controller.quorum.voters": "4@127.0.0.1:9093", "process.roles": "controller,broker"})
    assert c.node_id == 4


def test_informational_keys_are_logged_and_listed(caplog):
    caplog.set_level("INFO", logger="kavka.config")
    build_config({"node.id": "1", "num.io.threads": "16", "broker.rack": "/dc1/r1"})
    assert "num.io.threads is accepted but has no effect" in caplog.text
    assert "broker.rack" not in caplog.text  # rack-aware placement uses it
    keys = informational_keys()
    assert "num.io.threads" in keys and "preallocate" in keys
    # A key that acts is never listed as informational.
    assert "segment.bytes" not in keys and "min.insync.replicas" not in keys and "broker.rack" not in keys


def test_tiered_topic_configs_follow_kafkas_checks():
    off = build_config({"node.id": "1"})
    on = build_config({"node.id": "1", "remote.log.storage.system.enable": "true",
                       "remote.log.storage.manager.class.name": "local", "rsm.config.dir": "/tmp/x"})
    assert validate_topic_configs({"remote.storage.enable": "true"}) == {"remote.storage.enable": True}
    assert "disabled in the broker" in validate_tiered_topic(off, {"remote.storage.enable": "true"})
    assert validate_tiered_topic(on, {"remote.storage.enable": "true", "local.retention.ms": "1000"}) is None
    assert "compacted" in validate_tiered_topic(on, {"remote.storage.enable": "true", "cleanup.policy": "compact"})
    assert "retention.ms" in validate_tiered_topic(on, {"remote.storage.enable": "true", "retention.ms": "10", "local.retention.ms": "20"})
    # the broker default (log.retention.bytes) is the total retention a topic override must not exceed
    small = build_config({"node.id": "1", "remote.log.storage.system.enable": "true",
                          "remote.log.storage.manager.class.name": "local", "log.retention.bytes": "100"})
    assert "retention.bytes" in validate_tiered_topic(small, {"remote.storage.enable": "true", "local.retention.bytes": "200"})
    # KIP-950: off again only with remote.log.delete.on.disable
    was = {"remote.storage.enable": "true"}
    assert "remote.log.delete.on.disable" in validate_tiered_topic(on, {"remote.storage.enable": "false"}, was)
    assert validate_tiered_topic(on, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}, was) is None
    assert validate_tiered_topic(on, {}, None) is None  # a plain topic


def test_tiered_broker_configs():
    with pytest.raises(ConfigError, match="remote.log.storage.manager.class.name"):
        build_config({"node.id": "1", "remote.log.storage.system.enable": "true"})
    assert build_config({"node.id": "1", "remote.log.manager.fetch.max.bytes.per.second": "1000"})[
        "remote.log.manager.fetch.max.bytes.per.second"] == 1000
    with pytest.raises(ConfigError, match="remote.log.manager.fetch.quota.window.num"):
        build_config({"node.id": "1", "remote.log.manager.fetch.quota.window.num": "0"})
    c = build_config({"node.id": "1", "remote.log.storage.system.enable": "true",
                      "remote.log.storage.manager.class.name": "s3", "rsm.config.s3.bucket": "b"})
    assert c.unknown == {"rsm.config.s3.bucket": "b"}  # handed to the plugin, not warned about
    assert c["remote.log.manager.task.interval.ms"] == 30000


def test_the_placer_name_is_checked_by_placements_registered_rule():
    with pytest.raises(ConfigError) as e:
        build_config({"node.id": "1", "broker.replica.placer": "round-robin"})
    assert e.value.key == "broker.replica.placer"
    assert str(e.value) == (
        "broker.replica.placer: invalid value 'round-robin': "
        "must be one of simple, striped, multi-level or an importable module:Class"
    )
    assert build_config({"node.id": "1", "broker.replica.placer": "pkg.mod:Placer"})["broker.replica.placer"] == "pkg.mod:Placer"


def test_config_imports_nothing_of_kavka_above_common_and_protocol():
    tree = ast.parse(Path(config_module.__file__).read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    ]
    kavka = {m for m in imported if m and m.split(".")[0] == "kavka"}
    # kavka.principal (the SSL principal mapping rules), kavka.sasl (the JAAS parser), kavka.scram (the SCRAM
    # mechanisms) and kavka.oauthbearer (OAUTHBEARER's validators, built from config) are security modules below protocol.
    assert kavka and all(m in ("kavka.common", "kavka.principal", "kavka.sasl", "kavka.scram", "kavka.oauthbearer", "kavka.protocol")
                         or m.startswith("kavka.protocol.") for m in kavka), kavka


def test_a_rule_nobody_registered_is_a_bug_not_a_pass():
    with pytest.raises(LookupError, match="no.such.key"):
        registered("no.such.key")("anything")


def test_storage_format_checks_the_placer_in_a_fresh_process(tmp_path):
    """The entry point imports the rule's owner before parsing: nothing else has imported it here."""
    f = tmp_path / "server.properties"
    f.write_text(f"node.id=1\nlog.dirs={tmp_path / 'a'}\nbroker.replica.placer=round-robin\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-c", "from kavka.cli.main import cli; cli()", "storage", "format", "--config", str(f)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert res.returncode != 0
    assert "broker.replica.placer: invalid value 'round-robin': must be one of" in res.stderr + res.stdout
    assert not (tmp_path / "a").exists()
