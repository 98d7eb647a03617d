"""Dynamic configs: AlterConfigs and IncrementalAlterConfigs decided (Kafka's ConfigurationControlManager).

`ConfigurationControlManager` validates a request's config changes for one resource -- a topic,
a broker, or the cluster-wide broker default (resource name "") -- against the config tables in
kavka.config and the current MetadataImage, and returns the ConfigRecords that carry them out
(a record with value None deletes an override). Error codes and messages follow Kafka's. Only
dynamic broker configs may change; a topic's remote-storage settings pass Kafka's tiered checks
(config.validate_tiered_topic, KIP-405 and KIP-950).

Pure: image in, records and result out, never writes. Called on the active controller's event loop,
under the QuorumController's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

# Imported for its registration: config.validate_tiered_topic applies the rule tiered storage owns.
import kavka.tiered.remote_log_rules  # noqa: F401
from kavka.common import AlterConfigOpType, ConfigResourceType
from kavka.config import (
    BROKER_CONFIGS,
    KEYSTORE_KEYS,
    SSL_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_tiered_topic,
)
from kavka.controller.results import ApiResult
from kavka.metadata.image import MetadataImage
from kavka.metadata.records import ConfigRecord


class ConfigurationControlManager:
    """AlterConfigs and IncrementalAlterConfigs: image in, ConfigRecords and a result out."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def alter_configs(
        self,
        image: MetadataImage,
        resource_type: ConfigResourceType,
        resource_name: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        incremental: bool,
    ) -> tuple[list[Any], ApiResult]:
        """ops: (name, op, value); op 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (KIP-339).

        The legacy AlterConfigs (incremental=False) replaces the resource's
        whole set of overrides with the given ones, as Kafka does.
        """
        if resource_type == ConfigResourceType.TOPIC:
            if resource_name not in image.topics_by_name:
                return [], ApiResult(ErrorCode.unknown_topic_or_partition, f"Topic {resource_name} does not exist.")
            defs = {k: d.config for k, d in TOPIC_CONFIGS.items()}
        elif resource_type == ConfigResourceType.BROKER:
            if resource_name not in ("",) and resource_name != str(self.config.node_id):
                if not resource_name.isdigit() or int(resource_name) not in image.brokers:
                    return [], ApiResult(ErrorCode.invalid_request, f"Unexpected broker id {resource_name}")
            defs = BROKER_CONFIGS
        else:
            return [], ApiResult(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")
        current = dict(image.configs.get((resource_type, resource_name), {}))
        new = dict(current) if incremental else {}
        for name, op, value in ops:
            d = defs.get(name)
            keystore = _keystore_key(name) if resource_type == ConfigResourceType.BROKER else None
            if keystore is not None:
                # A listener's keystore is reloaded per broker (Kafka's DynamicListenerConfig); the
                # broker that takes the request has checked that the new keystore loads.
                if resource_name == "":
                    return [], ApiResult(
                        ErrorCode.invalid_request,
                        f"Cannot update these configs at default cluster level, broker id must be specified: [{name}]",
                    )
                d = SSL_CONFIGS[keystore]
            elif resource_type == ConfigResourceType.BROKER and name.startswith("listener.name.") and (".ssl." in name or ".sasl." in name):
                # Kafka reloads a listener's truststore and JAAS users dynamically; kavka reads them at startup only.
                return [], ApiResult(ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{name}]")
            if d is None:
                return [], ApiResult(ErrorCode.invalid_config, f"Unknown {'topic' if resource_type == ConfigResourceType.TOPIC else 'broker'} config name: {name}")
            if resource_type == ConfigResourceType.BROKER and not d.dynamic and keystore is None:
                return [], ApiResult(ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{name}]")
            try:
                if op == AlterConfigOpType.DELETE:
                    new.pop(name, None)
                    continue
                if op in (AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
                    if d.type.name != "LIST":
                        return [], ApiResult(ErrorCode.invalid_config, f"Config {name} is not a list: {op} is not allowed")
                    # With no override the list starts from the config's default, as Kafka's
                    # ConfigurationControlManager.getParts does (APPEND compact to a topic's
                    # default cleanup.policy gives "delete,compact").
                    cur_list = d.parse(new.get(name)) if name in new else list(d.default or [])
                    items = d.parse(value)
                    if op == AlterConfigOpType.APPEND:
                        merged = cur_list + [x for x in items if x not in cur_list]
                    else:
                        merged = [x for x in cur_list if x not in items]
                    new[name] = d.render(d.parse(merged)) or ""
                    continue
                if op != AlterConfigOpType.SET:
                    return [], ApiResult(ErrorCode.invalid_request, f"Unknown config operation {op}")
                if value is None:
                    new.pop(name, None)
                    continue
                new[name] = d.render(d.parse(value)) or ""
            except ConfigError as e:
                return [], ApiResult(ErrorCode.invalid_config, str(e))
        if resource_type == ConfigResourceType.TOPIC:
            problem = validate_tiered_topic(self.config, new, current)
            if problem:
                return [], ApiResult(ErrorCode.invalid_config, problem)
        records: list[Any] = []
        for name in sorted(set(current) | set(new)):
            if current.get(name) != new.get(name):
                records.append(ConfigRecord(resource_type, resource_name, name, new.get(name)))
        return records, ApiResult()


def _keystore_key(name: str) -> str | None:
    """The ssl.* key of a dynamic `listener.name.<l>.ssl.keystore...` config, else None."""
    parts = name.split(".", 3)
    if len(parts) == 4 and parts[0] == "listener" and parts[1] == "name" and parts[3] in KEYSTORE_KEYS:
        return parts[3]
    return None
