"""Effective configuration: static server.properties + dynamic configs from the metadata image.

Kafka's precedence, for a topic config: the topic's override
(DYNAMIC_TOPIC_CONFIG) > a dynamic per-broker value (DYNAMIC_BROKER_CONFIG) >
a dynamic cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG) >
server.properties (STATIC_BROKER_CONFIG) > the built-in default
(DEFAULT_CONFIG). Dynamic values are records in the metadata log, so they
persist and replay like everything else. Pure given (config, image).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kavka.config import (
    BROKER_CONFIGS,
    SASL_CONFIGS,
    SSL_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigSource,
)
from kavka.metadata.image import MetadataImage
from kavka.storage.log_config import LogConfig


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    definition: ConfigDef
    value: Any
    source: ConfigSource
    synonyms: tuple[Synonym, ...]

    @property
    def rendered(self) -> str | None:
        return self.definition.render(self.value)


def _dynamic_broker(image: MetadataImage, node_id: int, key: str) -> tuple[str, ConfigSource] | None:
    per_broker = image.broker_configs(node_id)
    if key in per_broker:
        return per_broker[key], ConfigSource.DYNAMIC_BROKER_CONFIG
    cluster = image.broker_configs(None)
    if key in cluster:
        return cluster[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return None


class ConfigResolver:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def broker(self, image: MetadataImage, key: str) -> ResolvedConfig:
        d = BROKER_CONFIGS[key]
        synonyms: list[Synonym] = []
        dyn_b = image.broker_configs(self.config.node_id)
        dyn_c = image.broker_configs(None)
        if key in dyn_b:
            synonyms.append(Synonym(key, dyn_b[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key in dyn_c:
            synonyms.append(Synonym(key, dyn_c[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if key in self.config.explicit:
            synonyms.append(Synonym(key, d.render(self.config[key]), ConfigSource.STATIC_BROKER_CONFIG))
        synonyms.append(Synonym(key, d.render(d.default), ConfigSource.DEFAULT_CONFIG))
        top = synonyms[0]
        value = d.parse(top.value) if top.source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) else (
            self.config[key] if top.source == ConfigSource.STATIC_BROKER_CONFIG else d.default
        )
        return ResolvedConfig(d, value, top.source, tuple(synonyms))

    def listener_ssl(self, image: MetadataImage | None = None) -> dict[str, ResolvedConfig]:
        """The listener.name.<name>.ssl.* and SASL keys (sasl.enabled.mechanisms, plain.sasl.jaas.config)
        set in server.properties (static: read at startup only), and this broker's dynamic keystore
        keys (listener.name.<name>.ssl.keystore.*, reloaded by kavka.broker.tls) from `image`."""
        out = {}
        items = [(k, v, SSL_CONFIGS) for k, v in self.config.listener_ssl.items()]
        items += [(k, v, SASL_CONFIGS) for k, v in self.config.listener_sasl.items()]
        dynamic = {k: v for k, v in (image.broker_configs(self.config.node_id) if image is not None else {}).items()
                   if k.startswith("listener.name.")}
        for key in dynamic.keys() - {k for k, _, _ in items}:
            items.append((key, None, SSL_CONFIGS))
        for key, value, table in sorted(items, key=lambda kv: kv[0]):
            d = table[key.split(".", 3)[3]]
            synonyms = [Synonym(key, dynamic[key], ConfigSource.DYNAMIC_BROKER_CONFIG)] if key in dynamic else []
            if key in self.config.listener_ssl or key in self.config.listener_sasl:
                synonyms.append(Synonym(key, d.render(value), ConfigSource.STATIC_BROKER_CONFIG))
            top = synonyms[0]
            out[key] = ResolvedConfig(d, d.parse(top.value) if key in dynamic else value, top.source, tuple(synonyms))
        return out

    def broker_value(self, image: MetadataImage, key: str) -> Any:
        return self.broker(image, key).value

    def topic(self, image: MetadataImage, topic: str, key: str) -> ResolvedConfig:
        tdef = TOPIC_CONFIGS[key]
        d = tdef.config
        synonyms: list[Synonym] = []
        overrides = image.topic_configs(topic)
        if key in overrides:
            synonyms.append(Synonym(key, overrides[key], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        syn = tdef.broker_synonym
        if syn is not None:
            dyn = _dynamic_broker(image, self.config.node_id, syn)
            if dyn is not None:
                synonyms.append(Synonym(syn, dyn[0], dyn[1]))
        static_value, static_source = self.config.static_topic_default(key)
        if static_source == ConfigSource.STATIC_BROKER_CONFIG and syn is not None:
            synonyms.append(Synonym(syn, d.render(static_value), ConfigSource.STATIC_BROKER_CONFIG))
        # Kafka lists a broker synonym's default only when that broker key has one: retention.ms's
        # log.retention.ms, segment.ms's log.roll.ms, flush.ms's log.flush.interval.ms and
        # segment.jitter.ms's log.roll.jitter.ms default to null (the topic default comes from
        # another key or a constant), so those answer with no DEFAULT_CONFIG synonym.
        default = Synonym(syn or key, d.render(d.default), ConfigSource.DEFAULT_CONFIG)
        if syn is None or syn not in BROKER_CONFIGS or BROKER_CONFIGS[syn].default is not None:
            synonyms.append(default)
        top = synonyms[0] if synonyms else default
        if top.source == ConfigSource.STATIC_BROKER_CONFIG:
            value = static_value
        elif top.source == ConfigSource.DEFAULT_CONFIG:
            value = d.default
        else:
            value = d.parse(top.value)
        return ResolvedConfig(d, value, top.source, tuple(synonyms))

    def topic_values(self, image: MetadataImage, topic: str) -> dict[str, Any]:
        return {k: self.topic(image, topic, k).value for k in TOPIC_CONFIGS}

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        v = self.topic_values(image, topic)
        return LogConfig(
            segment_bytes=v["segment.bytes"],
            segment_ms=v["segment.ms"],
            segment_jitter_ms=v["segment.jitter.ms"],
            retention_ms=v["retention.ms"],
            retention_bytes=v["retention.bytes"],
            index_interval_bytes=v["index.interval.bytes"],
            segment_index_bytes=v["segment.index.bytes"],
            max_message_bytes=v["max.message.bytes"],
            flush_messages=v["flush.messages"],
            flush_ms=v["flush.ms"],
            message_timestamp_type=v["message.timestamp.type"],
            cleanup_policy=tuple(v["cleanup.policy"]),
            file_delete_delay_ms=v["file.delete.delay.ms"],
            preallocate=v["preallocate"],
            delete_retention_ms=v["delete.retention.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
            min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            compression_type=v["compression.type"],
            message_timestamp_before_max_ms=v["message.timestamp.before.max.ms"],
            message_timestamp_after_max_ms=v["message.timestamp.after.max.ms"],
            remote_storage_enable=v["remote.storage.enable"],
            local_retention_ms=v["local.retention.ms"],
            local_retention_bytes=v["local.retention.bytes"],
            remote_log_copy_disable=v["remote.log.copy.disable"],
            remote_log_delete_on_disable=v["remote.log.delete.on.disable"],
        )
