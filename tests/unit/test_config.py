import pytest

from kavka.config import (
    ConfigError,
    ConfigSource,
    build_config,
    load_config,
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
