"""Broker and topic configuration: Kafka's names, parsed once into typed values.

Behaviour as data: `BROKER_CONFIGS` and `TOPIC_CONFIGS` are tables of
`ConfigDef` (name, type, default, validator, dynamic, doc). A topic config's
effective value comes from, in order: the topic override, a dynamic
cluster-wide broker default, the static server.properties synonym, the
built-in default -- Kafka's precedence, reported back through DescribeConfigs
with the matching `ConfigSource`.

Unknown keys in server.properties are warned about and kept; a value that does
not parse or validate raises `ConfigError` naming the key.

This module imports nothing of kavka above `kavka.common`, `kavka.principal` (the pure parser of
`ssl.principal.mapping.rules`), `kavka.sasl` (the JAAS parser) and `kavka.protocol`: the rules that
belong to higher packages (the replica placer's name, controller/placement.py; a tiered topic's
configs, tiered/) are registered here by their owners when those are imported
(`register_validator`, `register_tiered_topic_rule`), so an entry point that parses a config imports
those owners first. A rule needed but never registered raises LookupError (a bug): no value is let
through unchecked.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import kavka.oauthbearer as oauthbearer
from kavka.common import ConfigSource, ConfigType
from kavka.oauthbearer import OAUTHBEARER
from kavka.principal import rules_problem
from kavka.sasl import PLAIN, PLAIN_LOGIN_MODULE, JaasError, PlainUsers, parse_jaas_config
from kavka.scram import MECHANISMS as SCRAM_MECHANISMS
from kavka.scram import SCRAM_LOGIN_MODULE

log = logging.getLogger("kavka.config")

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration value is missing, unparsable or out of range; names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


Validator = Callable[[Any], str | None]


class TieredTopicRule(Protocol):
    """Kafka's remote-storage checks of a topic's effective configs (strings): None or the message."""

    def __call__(self, configs: Mapping[str, str], *, system_enabled: bool) -> str | None: ...


# Rules registered by the packages that own them (see the module docstring).
_REGISTERED_VALIDATORS: dict[str, Validator] = {}
_TIERED_TOPIC_RULES: list[TieredTopicRule] = []


def register_validator(key: str, check: Validator) -> None:
    """`check` validates config `key`'s parsed value (its ConfigDef says `registered(key)`)."""
    _REGISTERED_VALIDATORS[key] = check


def register_tiered_topic_rule(rule: TieredTopicRule) -> None:
    """`rule` is the remote-storage check `validate_tiered_topic` applies (tiered storage owns it)."""
    _TIERED_TOPIC_RULES[:] = [rule]


def registered(key: str) -> Validator:
    """The validator `key`'s owner registers, looked up when a value is parsed."""

    def check(v: Any) -> str | None:
        validator = _REGISTERED_VALIDATORS.get(key)
        if validator is None:
            raise LookupError(f"no validator is registered for {key}: import its owner before parsing a config")
        return validator(v)

    return check


def at_least(n: float) -> Validator:
    return lambda v: None if v >= n else f"value must be at least {n}"


def between(lo: float, hi: float) -> Validator:
    return lambda v: None if lo <= v <= hi else f"value must be in [{lo}, {hi}]"


def one_of(*choices: str) -> Validator:
    return lambda v: None if v in choices else f"value must be one of {', '.join(choices)}"


def each_of(*choices: str) -> Validator:
    def check(v: list[str]) -> str | None:
        bad = [x for x in v if x not in choices]
        return f"unknown values {bad}; allowed: {', '.join(choices)}" if bad else None

    return check


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any
    doc: str = ""
    validator: Validator | None = None
    dynamic: bool = False  # may be changed at run time (broker configs)
    sensitive: bool = False
    # Accepted for compatibility with Kafka configs but without effect in kavka: why (README lists these).
    informational: str | None = None

    def parse(self, raw: Any) -> Any:
        """Parse a string (or already-typed value) into this config's type."""
        try:
            value = _parse(self.type, raw)
        except (TypeError, ValueError) as e:
            raise ConfigError(self.name, f"invalid value {self._shown(raw)}: {e}") from None
        if value is not None and self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(self.name, f"invalid value {self._shown(raw)}: {problem}")
        return value

    def render(self, value: Any) -> str | None:
        return render(self.type, value)

    def _shown(self, raw: Any) -> str:
        return "[hidden]" if self.sensitive else repr(raw)


def _parse(t: ConfigType, raw: Any) -> Any:
    if raw is None:
        return None
    if t in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        if isinstance(raw, bool):
            raise ValueError("not an integer")
        v = int(str(raw).strip())
        limit = {ConfigType.INT: 2**31, ConfigType.SHORT: 2**15, ConfigType.LONG: 2**63}[t]
        if not -limit <= v < limit:
            raise ValueError(f"out of range for {t.name.lower()}")
        return v
    if t is ConfigType.DOUBLE:
        return float(str(raw).strip())
    if t is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s not in ("true", "false"):
            raise ValueError("expected true or false")
        return s == "true"
    if t is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(x) for x in raw]
        s = str(raw).strip()
        return [x.strip() for x in s.split(",") if x.strip()] if s else []
    return str(raw).strip()


def render(t: ConfigType, value: Any) -> str | None:
    if value is None:
        return None
    if t is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if t is ConfigType.LIST:
        return ",".join(value)
    return str(value)


# --------------------------------------------------------------------------- topics

_I, _L, _S, _B, _D, _LST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    config: ConfigDef
    broker_synonym: str | None  # the server.properties key that sets the default


def _t(
    name: str,
    t: ConfigType,
    default: Any,
    synonym: str | None,
    doc: str,
    v: Validator | None = None,
    *,
    informational: str | None = None,
) -> TopicConfigDef:
    return TopicConfigDef(ConfigDef(name, t, default, doc, v, informational=informational), synonym)




def throttled_replicas(name: str) -> Validator:
    """Kafka's ThrottledReplicaListValidator: `*` alone, or [partitionId]:[brokerId] entries."""

    def check(v: list[str]) -> str | None:
        if v == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", x.strip()) for x in v):
            return None
        return (f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    return check
_TIERED_SYSTEM_KEY = "remote.log.storage.system.enable"


# KIP-392: the one ReplicaSelector kavka implements, under Kafka's class name (a Java class cannot be loaded).
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(v: str) -> str | None:
    if v in ("", RACK_AWARE_REPLICA_SELECTOR):
        return None
    return f"kavka cannot load Java classes; the supported selector is {RACK_AWARE_REPLICA_SELECTOR} (or leave it unset: consumers read from leaders only)"


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.config.name: d
    for d in [
        _t("cleanup.policy", _LST, ["delete"], "log.cleanup.policy", "delete and/or compact", each_of("delete", "compact")),
        _t("compression.type", _S, "producer", "compression.type", "final compression of the topic", one_of(*_COMPRESSION)),
        _t("delete.retention.ms", _L, 86400000, "log.cleaner.delete.retention.ms", "how long tombstones are kept", at_least(0)),
        _t("file.delete.delay.ms", _L, 60000, "log.segment.delete.delay.ms", "delay before a deleted file is removed", at_least(0)),
        _t("flush.messages", _L, LONG_MAX, "log.flush.interval.messages", "fsync after this many messages", at_least(1)),
        _t("flush.ms", _L, LONG_MAX, "log.flush.interval.ms", "fsync after this many ms", at_least(0)),
        _t("follower.replication.throttled.replicas", _LST, [], None,
           "replicas ([partition]:[broker], or *) whose fetches from the leader follower.replication.throttled.rate bounds while out of sync",
           throttled_replicas("follower.replication.throttled.replicas")),
        _t("index.interval.bytes", _I, 4096, "log.index.interval.bytes", "bytes between offset index entries", at_least(0)),
        _t("leader.replication.throttled.replicas", _LST, [], None,
           "replicas ([partition]:[broker], or *) whose leader sends out-of-sync followers at most leader.replication.throttled.rate",
           throttled_replicas("leader.replication.throttled.replicas")),
        _t("local.retention.bytes", _L, -2, "log.local.retention.bytes", "local tier retention bytes of a tiered topic (-2: retention.bytes)", at_least(-2)),
        _t("local.retention.ms", _L, -2, "log.local.retention.ms", "local tier retention ms of a tiered topic (-2: retention.ms)", at_least(-2)),
        _t("max.compaction.lag.ms", _L, LONG_MAX, "log.cleaner.max.compaction.lag.ms", "max time a message stays uncompacted", at_least(1)),
        _t("max.message.bytes", _I, 1048588, "message.max.bytes", "largest record batch size", at_least(0)),
        _t("message.timestamp.after.max.ms", _L, 3600000, "log.message.timestamp.after.max.ms", "max timestamp ahead of broker time", at_least(0)),
        _t("message.timestamp.before.max.ms", _L, LONG_MAX, "log.message.timestamp.before.max.ms", "max timestamp behind broker time", at_least(0)),
        _t("message.timestamp.type", _S, "CreateTime", "log.message.timestamp.type", "CreateTime or LogAppendTime", one_of("CreateTime", "LogAppendTime")),
        _t("min.cleanable.dirty.ratio", _D, 0.5, "log.cleaner.min.cleanable.ratio", "dirty ratio that triggers cleaning", between(0, 1)),
        _t("min.compaction.lag.ms", _L, 0, "log.cleaner.min.compaction.lag.ms", "min time a message stays uncompacted", at_least(0)),
        _t("min.insync.replicas", _I, 1, "min.insync.replicas", "replicas that must ack with acks=all", at_least(1)),
        _t("preallocate", _B, False, "log.preallocate", "preallocate segment files",
           informational="segments are written append-only and sized by what is written; nothing is preallocated"),
        _t("remote.log.copy.disable", _B, False, None, "stop copying segments to remote storage; remote data stays readable and expires (KIP-950)"),
        _t("remote.log.delete.on.disable", _B, False, None, "with remote.storage.enable=false: delete the topic's remote data (KIP-950)"),
        _t("remote.storage.enable", _B, False, None, "tier closed segments to remote storage (KIP-405)"),
        _t("retention.bytes", _L, -1, "log.retention.bytes", "max bytes per partition before deleting old segments"),
        _t("retention.ms", _L, 604800000, "log.retention.ms", "max age of a segment before it is deleted", at_least(-1)),
        _t("segment.bytes", _I, 1073741824, "log.segment.bytes", "segment file size", at_least(14)),
        _t("segment.index.bytes", _I, 10485760, "log.index.size.max.bytes", "max size of an offset index", at_least(4)),
        _t("segment.jitter.ms", _L, 0, "log.roll.jitter.ms", "random jitter on segment.ms", at_least(0)),
        _t("segment.ms", _L, 604800000, "log.roll.ms", "time after which a segment rolls", at_least(1)),
        _t("unclean.leader.election.enable", _B, False, "unclean.leader.election.enable", "elect a replica outside the ISR when no ISR member is alive (may lose committed records)"),
    ]
}


# --------------------------------------------------------------------------- broker


def _b(
    name: str,
    t: ConfigType,
    default: Any,
    doc: str = "",
    v: Validator | None = None,
    *,
    dynamic: bool = False,
    informational: str | None = None,
) -> ConfigDef:
    return ConfigDef(name, t, default, doc, v, dynamic, informational=informational)


_ONE_LOOP = "kavka serves every connection and request on one asyncio event loop per process"


def _bad_bootstrap_servers(values: list[str]) -> str | None:
    for v in values:
        host, colon, port = v.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            return f"invalid server {v!r}: expected host:port"
    return None


BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        _b("node.id", _I, -1, "this server's id", at_least(0)),
        _b("broker.id", _I, -1, "legacy alias of node.id"),
        _b("process.roles", _LST, ["broker", "controller"], "broker, controller or both", each_of("broker", "controller")),
        _b("controller.quorum.voters", _LST, [], "id@host:port of each voter"),
        _b("controller.quorum.bootstrap.servers", _LST, [], "host:port of controllers to find a dynamic quorum's leader through (KIP-853)",
           lambda v: _bad_bootstrap_servers(v)),
        _b("controller.listener.names", _LST, ["CONTROLLER"], "listeners that serve the KRaft RPCs and controller requests, not clients"),
        _b("controller.quorum.election.timeout.ms", _I, 1000, "wait this long (plus up to as much again, randomized) for a leader before standing", at_least(1)),
        _b("controller.quorum.election.backoff.max.ms", _I, 1000, "longest backoff before a new election after a lost one", at_least(0)),
        _b("controller.quorum.fetch.timeout.ms", _I, 2000, "a follower that heard nothing from its leader this long starts an election", at_least(1)),
        _b("controller.quorum.request.timeout.ms", _I, 2000, "a KRaft RPC unanswered this long is retried", at_least(1)),
        _b("controller.quorum.retry.backoff.ms", _I, 20, "pause before a failed KRaft RPC is retried", at_least(0)),
        _b("broker.session.timeout.ms", _I, 9000, "a broker whose heartbeats stop this long is fenced by the active controller", at_least(1)),
        _b("broker.heartbeat.interval.ms", _I, 2000, "time between a broker's heartbeats to the active controller", at_least(1)),
        _b("listeners", _LST, ["PLAINTEXT://127.0.0.1:9092"], "NAME://host:port, comma separated"),
        _b("advertised.listeners", _LST, None, "what clients are told; defaults to listeners"),
        _b("listener.security.protocol.map", _LST, None, "listener name to protocol"),
        _b("inter.broker.listener.name", _S, None, "listener followers fetch from (default: the first listener that is not a controller listener)"),
        _b("security.inter.broker.protocol", _S, "PLAINTEXT", "the inter-broker listener is the one named so (exclusive with "
           "inter.broker.listener.name; kavka's default, unset: the first listener that is not a controller listener)",
           one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
        _b("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", "SASL mechanism of kavka's connections to other brokers "
           "when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (PLAIN)"),
        _b("sasl.mechanism.controller.protocol", _S, "GSSAPI", "SASL mechanism of connections to controllers "
           "(a SASL controller listener is not supported by kavka yet)"),
        _b("broker.rack", _S, None, "rack of this broker (e.g. /dc1/rack2): reported in Metadata and DescribeCluster, used by rack-aware placement"),
        _b("replica.selector.class", ConfigType.CLASS, None, "KIP-392: how a leader picks a replica for a consumer's fetches (with client.rack); unset: the leader serves them", _replica_selector),
        _b("broker.replica.placer", _S, "striped", "replica placer of the controller (KIP-879): simple, striped, multi-level or an importable module:Class",
           registered("broker.replica.placer")),
        _b("log.dirs", _LST, None, "directories holding partition data"),
        _b("log.dir", _S, "/tmp/kavka-logs", "used when log.dirs is not set"),
        _b("metadata.log.dir", _S, None, "directory of the metadata log; defaults to the first log dir"),
        _b("metadata.log.max.record.bytes.between.snapshots", _L, 20971520, "write a metadata snapshot once this many bytes of metadata records were committed since the last one", at_least(1)),
        _b("metadata.log.max.snapshot.interval.ms", _L, 3600000, "write a metadata snapshot this long after the last one if records were committed since (0: never by time)", at_least(0)),
        _b("num.partitions", _I, 1, "partitions of an auto-created topic", at_least(1)),  # static, as in Kafka (read-only in DescribeConfigs)
        _b("default.replication.factor", _I, 1, "replication factor of a topic created without one (and of auto-created topics)", at_least(1)),
        _b("auto.create.topics.enable", _B, True, "create a topic on first Metadata/Produce"),
        _b("delete.topic.enable", _B, True, ""),
        _b("message.max.bytes", _I, 1048588, "largest record batch", at_least(0), dynamic=True),
        _b("socket.request.max.bytes", _I, 104857600, "largest request frame", at_least(1)),
        _b("socket.send.buffer.bytes", _I, 102400, "", at_least(-1), informational="the kernel's socket buffer sizes are kept (auto-tuned)"),
        _b("socket.receive.buffer.bytes", _I, 102400, "", at_least(-1), informational="the kernel's socket buffer sizes are kept (auto-tuned)"),
        _b("queued.max.requests", _I, 500, "requests read ahead per connection", at_least(1)),
        _b("num.network.threads", _I, 3, "accepted for compatibility", at_least(1), dynamic=True, informational=_ONE_LOOP),
        _b("num.io.threads", _I, 8, "accepted for compatibility", at_least(1), dynamic=True, informational=_ONE_LOOP),
        _b("num.recovery.threads.per.data.dir", _I, 1, "", at_least(1), dynamic=True, informational="logs are loaded one after another at startup: loading is Python work under one lock (the GIL), and threads measured no faster (docs/benchmarks.md, Scale)"),
        _b("log.segment.bytes", _I, 1073741824, "", at_least(14), dynamic=True),
        _b("log.roll.ms", _L, None, "", at_least(1), dynamic=True),
        _b("log.roll.hours", _I, 168, "", at_least(1)),
        _b("log.roll.jitter.ms", _L, None, "", at_least(0), dynamic=True),
        _b("log.roll.jitter.hours", _I, 0, "", at_least(0)),
        _b("log.retention.ms", _L, None, "", at_least(-1), dynamic=True),
        _b("log.retention.minutes", _I, None, "", at_least(-1)),
        _b("log.retention.hours", _I, 168, "", at_least(-1)),
        _b("log.retention.bytes", _L, -1, "", dynamic=True),
        _b("log.retention.check.interval.ms", _L, 300000, "", at_least(1)),
        _b("log.segment.delete.delay.ms", _L, 60000, "", at_least(0), dynamic=True),
        _b("log.flush.interval.messages", _L, LONG_MAX, "", at_least(1), dynamic=True),
        _b("log.flush.interval.ms", _L, None, "", at_least(0), dynamic=True),
        _b("log.flush.scheduler.interval.ms", _L, LONG_MAX, "", informational="time-based flushes follow flush.ms / log.flush.interval.ms directly"),
        _b("log.flush.offset.checkpoint.interval.ms", _I, 60000, "", at_least(0)),
        _b("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, "", at_least(0), informational="log-start-offset-checkpoint is written with the recovery-point checkpoint"),
        _b("replica.high.watermark.checkpoint.interval.ms", _L, 5000, "", at_least(1)),
        _b("log.index.interval.bytes", _I, 4096, "", at_least(0), dynamic=True),
        _b("log.index.size.max.bytes", _I, 10485760, "", at_least(4), dynamic=True),
        _b("log.cleanup.policy", _LST, ["delete"], "", each_of("delete", "compact"), dynamic=True),
        _b("background.threads", _I, 10, "worker threads for flushes, retention deletes, checkpoints and cleaning", at_least(1)),
        _b("log.cleaner.enable", _B, True, "run the log cleaner for cleanup.policy=compact topics"),
        _b("log.cleaner.backoff.ms", _L, 15000, "sleep between cleaner passes when nothing was cleaned", at_least(0)),
        _b("log.cleaner.delete.retention.ms", _L, 86400000, "", at_least(0), dynamic=True),
        _b("log.cleaner.min.cleanable.ratio", _D, 0.5, "", between(0, 1), dynamic=True),
        _b("log.cleaner.min.compaction.lag.ms", _L, 0, "", at_least(0), dynamic=True),
        _b("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, "", at_least(1), dynamic=True),
        _b("log.cleaner.dedupe.buffer.size", _L, 134217728, "memory of the cleaner's offset map (24 bytes a key)", at_least(1024 * 1024)),
        _b("log.cleaner.io.buffer.size", _I, 524288, "the cleaner's read + write buffers", at_least(1024)),
        _b("log.cleaner.io.buffer.load.factor", _D, 0.9, "how full the cleaner's offset map gets", between(0.01, 1)),
        _b("log.message.timestamp.type", _S, "CreateTime", "", one_of("CreateTime", "LogAppendTime"), dynamic=True),
        _b("log.message.timestamp.after.max.ms", _L, 3600000, "", at_least(0), dynamic=True),
        _b("log.message.timestamp.before.max.ms", _L, LONG_MAX, "", at_least(0), dynamic=True),
        _b("log.preallocate", _B, False, "", dynamic=True),
        _b("remote.log.storage.system.enable", _B, False, "tiered storage on this broker (KIP-405)"),
        _b("remote.log.storage.manager.class.name", _S, None, "the RemoteStorageManager: local, s3 or module:Class; configured by the rsm.config.* keys"),
        _b("remote.log.manager.task.interval.ms", _L, 30000, "how often the remote log manager copies and expires segments", at_least(1)),
        _b("remote.log.manager.copy.max.bytes.per.second", _L, LONG_MAX, "throttle of segment copies to remote storage", at_least(1), dynamic=True),
        _b("remote.log.manager.fetch.max.bytes.per.second", _L, LONG_MAX, "quota of reads from remote storage (KIP-956): over it, remote reads wait", at_least(1), dynamic=True),
        _b("remote.log.manager.fetch.quota.window.num", _I, 11, "samples of the remote fetch quota's rate", at_least(1)),
        _b("remote.log.manager.fetch.quota.window.size.seconds", _I, 1, "length of one sample of the remote fetch quota's rate", at_least(1)),
        _b("remote.log.reader.threads", _I, 10, "threads serving reads from remote storage", at_least(1)),
        _b("remote.log.metadata.topic.num.partitions", _I, 50, "partitions of __remote_log_metadata", at_least(1)),
        _b("remote.log.metadata.topic.replication.factor", _I, 3, "replicas of __remote_log_metadata (capped by the brokers registered when it is created)", at_least(1)),
        _b("log.local.retention.ms", _L, -2, "", at_least(-2), dynamic=True),
        _b("log.local.retention.bytes", _L, -2, "", at_least(-2), dynamic=True),
        _b("compression.type", _S, "producer", "", one_of(*_COMPRESSION), dynamic=True),
        _b("min.insync.replicas", _I, 1, "", at_least(1), dynamic=True),
        _b("unclean.leader.election.enable", _B, False, "", dynamic=True),
        _b("eligible.leader.replicas.enable", _B, True, "KIP-966: the controller keeps eligible leader replicas and elects one when the ISR is empty (Kafka 4.1 finalizes eligible.leader.replicas.version 1 in a new cluster)"),
        _b("auto.leader.rebalance.enable", _B, True, "the active controller moves leadership back to preferred replicas when a broker's leader imbalance exceeds leader.imbalance.per.broker.percentage"),
        _b("leader.imbalance.per.broker.percentage", _I, 10, "a broker's share of preferred partitions led by others (percent) above which the controller rebalances", at_least(0)),
        _b("leader.imbalance.check.interval.seconds", _L, 300, "how often the active controller checks the leader imbalance", at_least(1)),
        _b("offsets.topic.replication.factor", _I, 3, "replicas of __consumer_offsets (capped by the brokers registered when it is created)", at_least(1)),
        _b("offsets.topic.num.partitions", _I, 50, "", at_least(1)),
        _b("transaction.state.log.replication.factor", _I, 3, "replicas of __transaction_state (capped by the brokers registered when it is created)", at_least(1)),
        _b("transaction.state.log.min.isr", _I, 2, "min.insync.replicas of __transaction_state (capped by its replication factor when it is created)", at_least(1)),
        _b("transaction.state.log.num.partitions", _I, 50, "partitions of __transaction_state", at_least(1)),
        _b("transaction.state.log.segment.bytes", _I, 104857600, "segment.bytes of __transaction_state", at_least(1)),
        _b("transaction.max.timeout.ms", _I, 900000, "largest transaction.timeout.ms a producer may ask for", at_least(1)),
        _b("transactional.id.expiration.ms", _I, 604800000, "an idle transactional id is forgotten after this", at_least(1)),
        _b("transaction.partition.verification.enable", _B, True, "a partition leader asks the transaction coordinator before a transactional batch opens a transaction there (KIP-890 part 1)", dynamic=True),
        _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, "how often timed-out transactions are aborted and idle ids expired", at_least(1)),
        _b("group.initial.rebalance.delay.ms", _I, 3000, "", at_least(0)),
        _b("group.min.session.timeout.ms", _I, 6000, "smallest session.timeout.ms a member may ask for", at_least(1)),
        _b("group.max.session.timeout.ms", _I, 1800000, "largest session.timeout.ms a member may ask for", at_least(1)),
        _b("group.max.size", _I, 2147483647, "members per group", at_least(1)),
        _b("group.consumer.session.timeout.ms", _I, 45000, "KIP-848 member session timeout (the broker's, not the client's)", at_least(1)),
        _b("group.consumer.heartbeat.interval.ms", _I, 5000, "KIP-848 heartbeat interval given to members", at_least(1)),
        _b("group.consumer.max.size", _I, 2147483647, "members per KIP-848 consumer group", at_least(1)),
        _b("offsets.retention.ms", _L, 604800000, "committed offsets of an empty group expire after this", at_least(1)),
        _b("offsets.retention.check.interval.ms", _L, 600000, "how often expired offsets are removed", at_least(1)),
        _b("offset.metadata.max.bytes", _I, 4096, "largest metadata string of a committed offset", at_least(0)),
        _b("offsets.topic.segment.bytes", _I, 104857600, "segment.bytes of __consumer_offsets", at_least(1)),
        _b("replica.fetch.max.bytes", _I, 1048576, "bytes a follower asks per partition in one fetch (at least one batch is sent)", at_least(0)),
        _b("replica.fetch.response.max.bytes", _I, 10485760, "bytes a follower asks for in one fetch", at_least(0)),
        _b("replica.fetch.wait.max.ms", _I, 500, "how long a follower's fetch waits at the leader for new records", at_least(0)),
        _b("replica.fetch.min.bytes", _I, 1, "bytes a follower's fetch waits for", at_least(1)),
        _b("replica.fetch.backoff.ms", _I, 1000, "pause after a follower's fetch failed", at_least(0)),
        _b("replica.lag.time.max.ms", _L, 30000, "a follower not caught up with the leader this long leaves the ISR", at_least(1)),
        _b("replica.socket.timeout.ms", _I, 30000, "a follower's fetch unanswered this long is retried on a new connection", at_least(1)),
        _b("num.replica.fetchers", _I, 1, "fetcher connections per source broker", at_least(1)),
        _b("num.replica.alter.log.dirs.threads", _I, None, "movers of replicas between log dirs (default: one per log dir)", at_least(1)),
        _b("replica.alter.log.dirs.io.max.bytes.per.second", _L, LONG_MAX, "throttle of moves between log dirs (KIP-113)", at_least(1), dynamic=True),
        _b("log.dir.failure.timeout.ms", _L, 30000, "KIP-858: a broker that cannot report a failed log dir to the controller within this shuts down", at_least(1)),
        _b("leader.replication.throttled.rate", _L, LONG_MAX, "bytes/s a leader sends to the out-of-sync followers of leader.replication.throttled.replicas", at_least(0), dynamic=True),
        _b("follower.replication.throttled.rate", _L, LONG_MAX, "bytes/s a follower fetches for its out-of-sync follower.replication.throttled.replicas", at_least(0), dynamic=True),
        _b("replication.quota.window.num", _I, 11, "samples the replication throttles' rate is measured over", at_least(1)),
        _b("replication.quota.window.size.seconds", _I, 1, "length of one replication throttle sample", at_least(1)),
        _b("quota.window.num", _I, 11, "samples the client quotas' rates are measured over (KIP-13)", at_least(1)),
        _b("quota.window.size.seconds", _I, 1, "length of one client quota sample", at_least(1)),
        _b("log.dir.select.strategy", _S, "size", "where new replicas go: size (bytes used and free space) or partitions (fewest, Kafka's rule)", one_of("size", "partitions")),
        _b("metrics.prometheus.port", _I, -1, "port of the Prometheus /metrics endpoint: -1 off, 0 any free port", between(-1, 65535)),
        _b("metrics.prometheus.host", _S, "127.0.0.1", "address the Prometheus endpoint binds"),
        _b("kavka.test.fault.injection.enable", _B, False, "TEST ONLY: obey the KAVKA_TEST_CRASH_POINT / KAVKA_FAULT_* variables"),
        _b("fetch.max.bytes", _I, 57671680, "cap on a Fetch response", at_least(1024)),
        _b("max.incremental.fetch.session.cache.slots", _I, 1000, "", at_least(0), informational="fetches are sessionless (KIP-227 sessions are answered with session id 0)"),
        _b("connections.max.idle.ms", _L, 600000, "close a connection idle this long, on the controller listener too (-1 never)", at_least(-1)),
        _b("producer.id.expiration.ms", _I, 86400000, "forget an idempotent producer this long after its last batch (KIP-854)", at_least(1), dynamic=True),
        _b("producer.id.expiration.check.interval.ms", _I, 600000, "how often expired producer ids are removed", at_least(1)),
        _b("max.connections", _I, 2147483647, "open client connections; past it the listener stops accepting until one closes", at_least(0)),
        _b("request.timeout.ms", _I, 30000, "", informational="a client setting; the broker has no outbound requests to time out"),
    ]
}

# Security. TLS is served on client listeners whose protocol is SSL or SASL_SSL (the ssl.* keys
# below, global or per listener as listener.name.<name>.ssl.*; kavka.broker.tls builds the context),
# SASL/PLAIN on client listeners whose protocol is SASL_PLAINTEXT or SASL_SSL (sasl.enabled.mechanisms
# and listener.name.<name>.plain.sasl.jaas.config; kavka.broker.sasl_authenticator). Anything
# else security-related -- other SASL mechanisms, authorization, TLS or SASL between brokers or to
# the controller, JVM-only TLS knobs -- stops startup naming the key: serving plaintext on a port the operator believes is
# encrypted or authenticated is the one thing worse than not starting.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.", "delegation.token.")
_SECURITY_KEYS = frozenset({"principal.builder.class"})
# Quota settings kavka does not implement: a pluggable quota callback, the broker-wide connection
# rate (KIP-612; kavka enforces only the per-IP connection_creation_rate client quota).
_UNSUPPORTED_QUOTA_KEYS = frozenset({"client.quota.callback.class", "max.connection.creation.rate"})
# Authorization (docs/security.md "Authorization (ACLs)"): kavka.authorizer, Kafka's StandardAuthorizer.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, "kavka")
for _d in [
    _b("authorizer.class.name", _S, "", f"the authorizer: {STANDARD_AUTHORIZER} (or its alias kavka), ACLs in the "
       "metadata log; empty: none (every request allowed, ACL APIs answer SECURITY_DISABLED)", one_of("", *AUTHORIZER_CLASSES)),
    _b("super.users", _S, None, "principals allowed everything, separated by semicolons (User:admin;User:ops)"),
    _b("allow.everyone.if.no.acl.found", _B, False, "allow an action on a resource that has no ACL at all"),
]:
    BROKER_CONFIGS[_d.name] = _d
_SECURE_PROTOCOLS = frozenset({"SSL", "SASL_SSL", "SASL_PLAINTEXT"})
_KNOWN_PROTOCOLS = frozenset({"PLAINTEXT", *_SECURE_PROTOCOLS})
_SASL_PROTOCOLS = frozenset({"SASL_SSL", "SASL_PLAINTEXT"})
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
_PEM, _PKCS12, _JKS = "PEM", "PKCS12", "JKS"
JKS_CONVERSION = (
    "JKS keystores are not supported by kavka (it has no JVM); convert once with "
    "`keytool -importkeystore -srckeystore X.jks -destkeystore X.p12 -deststoretype PKCS12` "
    "and set the type to PKCS12, or use PEM"
)


def _enabled_protocols(v: list[str]) -> str | None:
    bad = [x for x in v if x not in TLS_PROTOCOLS]
    if bad:
        return (f"unknown or unsupported TLS protocols {bad}; kavka serves {', '.join(TLS_PROTOCOLS)} "
                "(TLSv1 and TLSv1.1 are refused by OpenSSL's default security level)")
    return None if v else "at least one protocol is needed"


def _endpoint_identification(v: str) -> str | None:
    # Incoming connections ignore it (as Kafka's server); kavka's own outgoing connections check
    # the peer's host name against its certificate with https.
    return None if v in ("", "https") else "only https (the default) or empty are known"


def _ssl(name: str, t: ConfigType, default: Any, doc: str, v: Validator | None = None, *, sensitive: bool = False) -> ConfigDef:
    return ConfigDef(name, t, default, doc, v, sensitive=sensitive)


_P = ConfigType.PASSWORD
SSL_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        _ssl("ssl.keystore.type", _S, _JKS, "PEM or PKCS12 (JKS, Kafka's default, is refused: convert it)", one_of(_PEM, _PKCS12, _JKS)),
        _ssl("ssl.keystore.location", _S, None, "the server's keystore file (PEM: certificate chain and private key)"),
        _ssl("ssl.keystore.password", _P, None, "password of a PKCS12 keystore", sensitive=True),
        _ssl("ssl.key.password", _P, None, "password of the private key of a PEM keystore (file or ssl.keystore.key)", sensitive=True),
        _ssl("ssl.keystore.certificate.chain", _P, None, "the server's certificate chain, inline PEM (ssl.keystore.type=PEM)", sensitive=True),
        _ssl("ssl.keystore.key", _P, None, "the server's private key, inline PEM (ssl.keystore.type=PEM)", sensitive=True),
        _ssl("ssl.truststore.type", _S, _JKS, "PEM or PKCS12 (JKS is refused: convert it)", one_of(_PEM, _PKCS12, _JKS)),
        _ssl("ssl.truststore.location", _S, None, "CA certificates that sign client certificates"),
        _ssl("ssl.truststore.password", _P, None, "password of a PKCS12 truststore", sensitive=True),
        _ssl("ssl.truststore.certificates", _P, None, "CA certificates, inline PEM (ssl.truststore.type=PEM)", sensitive=True),
        _ssl("ssl.client.auth", _S, "none", "none, requested or required: ask clients for a certificate", one_of("none", "requested", "required")),
        _ssl("ssl.enabled.protocols", _LST, list(TLS_PROTOCOLS), "TLS versions served", _enabled_protocols),
        _ssl("ssl.protocol", _S, "TLSv1.3", "the highest TLS version served (TLSv1.2 caps it)", one_of("TLS", *TLS_PROTOCOLS)),
        _ssl("ssl.cipher.suites", _LST, [], "TLS 1.2 cipher suites, OpenSSL names (empty: OpenSSL's defaults); TLS 1.3 suites are OpenSSL's"),
        _ssl("ssl.principal.mapping.rules", _S, "DEFAULT", "RULE:pattern/replacement/[LU],...,DEFAULT: a client certificate's DN to a user name",
             rules_problem),
        _ssl("ssl.endpoint.identification.algorithm", _S, "https",
             "https: kavka's outgoing connections check the peer's host name against its certificate; empty: they do not",
             _endpoint_identification),
    ]
}
BROKER_CONFIGS.update(SSL_CONFIGS)
# The keystore keys a broker reloads at run time, set per broker as listener.name.<name>.<key>
# (Kafka's DynamicListenerConfig; kavka.broker.tls). The truststore is read at startup only.
KEYSTORE_KEYS = frozenset(
    {"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
     "ssl.keystore.certificate.chain", "ssl.keystore.key"}
)
_LISTENER_SSL_RE = re.compile(r"^listener\.name\.(?P<listener>[^.]+)\.(?P<key>ssl\..+)$")

# SASL (PLAIN only). Kafka's default mechanism list is GSSAPI, which needs Kerberos: a SASL listener
# must name its mechanisms. The JAAS entry is read only in Kafka's broker form,
# listener.name.<name>.<mechanism>.sasl.jaas.config (JaasContext.loadServerContext ignores an
# unprefixed sasl.jaas.config on the broker side).
SASL_MECHANISMS_KEY = "sasl.enabled.mechanisms"
PLAIN_JAAS_KEY = "plain.sasl.jaas.config"
SUPPORTED_SASL_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
# listener.name.<name>.scram-sha-256.sasl.jaas.config: ScramLoginModule, whose username/password are
# the broker's own login for inter-broker SASL (kept on BrokerConfig.scram_login). The SCRAM users
# themselves are credentials in the metadata log (kavka.scram, metadata.records).
SCRAM_JAAS_KEYS = {m: f"{m.lower()}.sasl.jaas.config" for m in SCRAM_MECHANISMS}
SASL_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef(SASL_MECHANISMS_KEY, _LST, ["GSSAPI"], "SASL mechanisms served on SASL listeners (kavka: PLAIN, "
                  "SCRAM-SHA-256, SCRAM-SHA-512)"),
        ConfigDef(PLAIN_JAAS_KEY, _P, None, "a SASL listener's PlainLoginModule entry with its user_<name> passwords "
                  "(only as listener.name.<name>.plain.sasl.jaas.config)", sensitive=True),
        *(ConfigDef(key, _P, None, f"a SASL listener's ScramLoginModule entry for {m}: the broker's own username and "
                    f"password (only as listener.name.<name>.{key})", sensitive=True)
          for m, key in SCRAM_JAAS_KEYS.items()),
    ]
}
BROKER_CONFIGS[SASL_MECHANISMS_KEY] = SASL_CONFIGS[SASL_MECHANISMS_KEY]
# SASL/OAUTHBEARER (kavka.oauthbearer). The JAAS entry and the validator class only in Kafka's broker
# form, listener.name.<name>.oauthbearer.*; the JWKS validator's sasl.oauthbearer.* keys globally or
# as listener.name.<name>.oauthbearer.sasl.oauthbearer.* (Kafka's ConfigurationUtils looks up the
# mechanism-prefixed key first).
OAUTHBEARER_JAAS_KEY = "oauthbearer.sasl.jaas.config"
OAUTHBEARER_HANDLER_KEY = "oauthbearer.sasl.server.callback.handler.class"
OAUTHBEARER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("sasl.oauthbearer.jwks.endpoint.url", _S, None, "the JWKS of the JWT validator: a file: or http(s): URL"),
        ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", _L, 3600000, "how often an http(s) JWKS is fetched again", at_least(1)),
        ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _L, 100, "first wait before retrying a failed JWKS refresh", at_least(0)),
        ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _L, 10000, "how long a failed JWKS refresh is retried", at_least(0)),
        ConfigDef("sasl.oauthbearer.expected.audience", _LST, [], "a token's aud must name one of these (none set: a token with aud is refused)"),
        ConfigDef("sasl.oauthbearer.expected.issuer", _S, None, "a token's iss must be this"),
        ConfigDef("sasl.oauthbearer.clock.skew.seconds", _I, 30, "leeway for exp and nbf", at_least(0)),
        ConfigDef("sasl.oauthbearer.scope.claim.name", _S, "scope", "the claim holding a token's scope"),
        ConfigDef("sasl.oauthbearer.sub.claim.name", _S, "sub", "the claim holding a token's principal name"),
    ]
}
BROKER_CONFIGS.update(OAUTHBEARER_CONFIGS)
SASL_CONFIGS[OAUTHBEARER_JAAS_KEY] = ConfigDef(
    OAUTHBEARER_JAAS_KEY, _P, None, "a SASL listener's OAuthBearerLoginModule entry (unsecuredValidator* options)", sensitive=True)
SASL_CONFIGS[OAUTHBEARER_HANDLER_KEY] = ConfigDef(
    OAUTHBEARER_HANDLER_KEY, _S, None, "OAuthBearerValidatorCallbackHandler: validate JWTs against a JWKS (unset: unsecured tokens)",
    one_of(*sorted(oauthbearer.JWKS_VALIDATOR_CLASSES), oauthbearer.UNSECURED_VALIDATOR_CLASS))
SASL_CONFIGS.update({f"oauthbearer.{k}": d for k, d in OAUTHBEARER_CONFIGS.items()})
for _d in [
    _b("connections.max.reauth.ms", _L, 0, "KIP-368: a SASL session's lifetime; past it a connection that has not "
       "re-authenticated is closed at its next request (0: no limit)", at_least(0)),
    _b("connection.failed.authentication.delay.ms", _I, 100, "KIP-306: delay before answering and closing a "
       "failed SASL authentication", at_least(0)),
    _b("sasl.server.max.receive.size", _I, 524288, "the largest frame a SASL connection may send before it is "
       "authenticated", at_least(1)),
]:
    BROKER_CONFIGS[_d.name] = _d
_LISTENER_SASL_RE = re.compile(r"^listener\.name\.(?P<listener>[^.]+)\.(?P<key>" + "|".join(map(re.escape, SASL_CONFIGS)) + ")$")
_SASL_INTER_BROKER_KEYS = ("sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol")


def _security_refusal(key: str, raw: str) -> str | None:
    """Why a security-related key cannot be honoured, or None if kavka honours it (or it is not one)."""
    if key in SSL_CONFIGS:
        return None
    m = _LISTENER_SSL_RE.match(key)
    if m and m["key"] in SSL_CONFIGS:
        return None
    if key in (SASL_MECHANISMS_KEY, "sasl.server.max.receive.size", "security.inter.broker.protocol", *_SASL_INTER_BROKER_KEYS) or key in OAUTHBEARER_CONFIGS:
        return None  # honoured, or refused by _check_listener_security when they would have no effect
    if _LISTENER_SASL_RE.match(key):
        return None
    if key == "sasl.jaas.config" or (key.startswith("listener.name.") and key.endswith(".sasl.jaas.config")):
        # Never the value: it holds passwords.
        return ("this form is not supported by kavka: a broker's JAAS entry is read only as "
                "listener.name.<listener>.<mechanism>.sasl.jaas.config, mechanism plain, scram-sha-256, scram-sha-512 "
                "or oauthbearer (Kafka's broker ignores an unprefixed sasl.jaas.config)")
    if key.startswith("sasl.") or (key.startswith("listener.name.") and ".sasl." in key) or key.endswith(".sasl.enabled.mechanisms"):
        return ("this SASL setting is not supported by kavka (it serves SASL/PLAIN, SCRAM and OAUTHBEARER with the keys listed in "
                "docs/security.md; GSSAPI is not supported); remove the key")
    if key.startswith("ssl.") or m:
        return ("this TLS setting is not supported by kavka (it honours only the ssl.* keys listed in "
                "docs/security.md; JVM-specific and dynamic-reload keys have no meaning here); remove the key")
    if key in _UNSUPPORTED_QUOTA_KEYS or (key.startswith("listener.name.") and key.endswith(".max.connection.creation.rate")):
        return ("this quota setting is not supported by kavka (it enforces the client quotas of docs/security.md#quotas, "
                "set with kavka configs or AlterClientQuotas); remove the key (clients would not be limited)")
    if key.startswith(_SECURITY_PREFIXES) or key in _SECURITY_KEYS:
        return ("this security setting is not supported by kavka (it honours the ssl.*, sasl.* and security keys "
                "listed in docs/security.md); remove the key (clients would not be authenticated or authorized as asked)")
    return None


# --------------------------------------------------------------------------- parsing


_LISTENER_RE = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(key: str, values: Iterable[str]) -> list[Endpoint]:
    out = []
    for item in values:
        m = _LISTENER_RE.match(item)
        if not m:
            raise ConfigError(key, f"invalid listener {item!r}: expected NAME://host:port")
        port = int(m["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"invalid port in {item!r}")
        out.append(Endpoint(m["name"].upper(), m["host"].strip("[]"), port))
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise ConfigError(key, "each listener name may appear once")
    return out


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, \\ continuation."""
    props: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError("--config", f"cannot read {path}: {e.strerror}") from None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            props[line] = ""
            continue
        props[m[1]] = m[2]
    return props


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed, validated broker configuration (static part; dynamic overrides live in the metadata image)."""

    values: Mapping[str, Any]  # every BROKER_CONFIGS key -> typed value (defaults filled in)
    explicit: frozenset[str]  # keys set in server.properties / --override
    unknown: Mapping[str, str] = field(default_factory=dict)
    # listener.name.<name>.ssl.* -> typed value: a listener's own TLS settings (win over ssl.*).
    listener_ssl: Mapping[str, Any] = field(default_factory=dict)
    # listener.name.<name>.sasl.enabled.mechanisms / .plain.sasl.jaas.config -> typed value.
    listener_sasl: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def node_id(self) -> int:
        return self.values["node.id"]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def metadata_log_dir(self) -> Path:
        d = self.values["metadata.log.dir"]
        return Path(d) if d else self.log_dirs[0]

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners("listeners", self.values["listeners"])

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        adv = self.values["advertised.listeners"]
        return parse_listeners("advertised.listeners", adv) if adv else self.listeners

    def security_protocol(self, listener: str) -> str:
        """The protocol of a listener name (listener.security.protocol.map; Kafka's default map)."""
        return _protocol_map(self).get(listener.upper(), listener.upper() if listener.upper() in _KNOWN_PROTOCOLS else "PLAINTEXT")

    def ssl_listeners(self) -> list[Endpoint]:
        """The listeners that serve TLS (protocol SSL or SASL_SSL)."""
        return [ep for ep in self.listeners if self.security_protocol(ep.name) in ("SSL", "SASL_SSL")]

    def sasl_listeners(self) -> list[Endpoint]:
        """The listeners that authenticate with SASL (protocol SASL_PLAINTEXT or SASL_SSL)."""
        return [ep for ep in self.listeners if self.security_protocol(ep.name) in _SASL_PROTOCOLS]

    def sasl_key(self, listener: str, key: str) -> str:
        """The config key that sets `key` for `listener`: its own prefixed key if set."""
        own = f"listener.name.{listener.lower()}.{key}"
        return own if own in self.listener_sasl or key == PLAIN_JAAS_KEY else key

    def sasl_value(self, listener: str, key: str) -> Any:
        own = f"listener.name.{listener.lower()}.{key}"
        if own in self.listener_sasl:
            return self.listener_sasl[own]
        return None if key == PLAIN_JAAS_KEY else self.values[key]

    def plain_users(self, listener: str) -> PlainUsers:
        """The PLAIN users of a SASL listener (ConfigError naming the key, never showing its text)."""
        key = self.sasl_key(listener, PLAIN_JAAS_KEY)
        text = self.sasl_value(listener, PLAIN_JAAS_KEY)
        if not text:
            raise ConfigError(key, f"missing: SASL listener {listener} serves PLAIN and needs its users, e.g. "
                              'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="...";')
        try:
            return PlainUsers.from_jaas(parse_jaas_config(str(text)))
        except JaasError as e:
            raise ConfigError(key, f"invalid JAAS entry: {e}") from None

    def scram_login(self, listener: str, mechanism: str) -> tuple[str, str] | None:
        """The broker's own (username, password) from listener.name.<l>.<mechanism>.sasl.jaas.config
        (ScramLoginModule), for its outgoing SASL; None if unset. ConfigError naming the key."""
        key = f"listener.name.{listener.lower()}.{SCRAM_JAAS_KEYS[mechanism]}"
        text = self.listener_sasl.get(key)
        if not text:
            return None
        try:
            entry = parse_jaas_config(str(text))
        except JaasError as e:
            raise ConfigError(key, f"invalid JAAS entry: {e}") from None
        if entry.login_module != SCRAM_LOGIN_MODULE:
            raise ConfigError(key, f"the login module must be {SCRAM_LOGIN_MODULE} for {mechanism}")
        unknown = sorted(set(entry.options) - {"username", "password", "tokenauth"})
        if unknown:
            raise ConfigError(key, f"unknown ScramLoginModule option {unknown[0]} (it takes username and password)")
        if entry.options.get("tokenauth", "false").lower() == "true":
            raise ConfigError(key, "tokenauth=true: delegation tokens are not supported by kavka")
        if ("username" in entry.options) != ("password" in entry.options) or not entry.options.get("username", "x"):
            raise ConfigError(key, "ScramLoginModule needs both username and password (the broker's own login), or neither")
        if "username" not in entry.options:
            return None
        return entry.options["username"], entry.options["password"]

    def oauthbearer_setting(self, listener: str, key: str) -> tuple[str, Any]:
        """An OAUTHBEARER key's value for `listener` and the key that set it:
        listener.name.<name>.oauthbearer.<key> wins over <key> (Kafka's ConfigurationUtils)."""
        own = f"listener.name.{listener.lower()}.oauthbearer.{key}"
        if own in self.listener_sasl:
            return own, self.listener_sasl[own]
        return (key, self.values[key]) if key in OAUTHBEARER_CONFIGS else (own, None)

    def oauthbearer_uses_jwks(self, listener: str) -> bool:
        """True if the listener validates OAUTHBEARER tokens against a JWKS (KIP-768)."""
        return self.oauthbearer_setting(listener, "sasl.server.callback.handler.class")[1] in oauthbearer.JWKS_VALIDATOR_CLASSES

    def oauthbearer_validator(self, listener: str, clock: Callable[[], float] = time.time) -> tuple[
            oauthbearer.TokenValidator, oauthbearer.JwksSource | None]:
        """A SASL listener's OAUTHBEARER token validator and the JWKS source to start with it (None for the
        unsecured validator). ConfigError naming the key, never showing the JAAS text."""
        jaas_key, text = self.oauthbearer_setting(listener, "sasl.jaas.config")
        if not text:
            raise ConfigError(jaas_key, f"missing: SASL listener {listener} serves OAUTHBEARER and needs its login module, e.g. "
                              f"{oauthbearer.OAUTHBEARER_LOGIN_MODULE} required;")
        try:
            entry = parse_jaas_config(str(text))
        except JaasError as e:
            raise ConfigError(jaas_key, f"invalid JAAS entry: {e}") from None
        if entry.login_module != oauthbearer.OAUTHBEARER_LOGIN_MODULE:
            raise ConfigError(jaas_key, f"the login module must be {oauthbearer.OAUTHBEARER_LOGIN_MODULE} for OAUTHBEARER, "
                              f"not {entry.login_module}")
        try:
            if not self.oauthbearer_uses_jwks(listener):
                return oauthbearer.UnsecuredValidator.from_jaas(entry, clock), None
        except oauthbearer.OAuthBearerConfigError as e:
            raise ConfigError(jaas_key, f"option {e.key}: {e}") from None
        get = lambda k: self.oauthbearer_setting(listener, k)  # noqa: E731
        url_key, url = get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigError(url_key, f"missing: listener {listener} validates OAUTHBEARER tokens with "
                              "OAuthBearerValidatorCallbackHandler, which needs the JWKS (a file: or https: URL)")
        for k in ("sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name"):
            if not str(get(k)[1] or "").strip():
                raise ConfigError(get(k)[0], "must not be blank")
        config = oauthbearer.JwksValidatorConfig(
            jwks_url=url,
            refresh_ms=get("sasl.oauthbearer.jwks.endpoint.refresh.ms")[1],
            retry_backoff_ms=get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")[1],
            retry_backoff_max_ms=get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")[1],
            expected_audience=tuple(get("sasl.oauthbearer.expected.audience")[1] or ()),
            expected_issuer=get("sasl.oauthbearer.expected.issuer")[1] or None,
            clock_skew_s=get("sasl.oauthbearer.clock.skew.seconds")[1],
            scope_claim=str(get("sasl.oauthbearer.scope.claim.name")[1]).strip(),
            sub_claim=str(get("sasl.oauthbearer.sub.claim.name")[1]).strip(),
        )
        if config.retry_backoff_max_ms < config.retry_backoff_ms:
            max_key = get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")[0]
            raise ConfigError(max_key, f"{config.retry_backoff_max_ms} is less than sasl.oauthbearer.jwks.endpoint.retry.backoff.ms "
                              f"({config.retry_backoff_ms})")
        try:
            source = oauthbearer.jwks_source(config)
        except oauthbearer.OAuthBearerConfigError as e:
            raise ConfigError(url_key, str(e)) from None
        return oauthbearer.JwksValidator(config, source, clock), source

    def broker_login(self, listener: str, mechanism: str = PLAIN) -> tuple[str, str]:
        """The node's own login on `listener` for `mechanism`: what its connections to other nodes
        authenticate with -- PlainLoginModule's or ScramLoginModule's `username`/`password` options
        (listener.name.<l>.<mechanism>.sasl.jaas.config). ConfigError naming the key, never showing
        its text."""
        if mechanism in SCRAM_MECHANISMS:
            login = self.scram_login(listener, mechanism)
            if login is None:
                raise ConfigError(f"listener.name.{listener.lower()}.{SCRAM_JAAS_KEYS[mechanism]}",
                                  f"missing: kavka's connections through {listener} log in with {mechanism}, which needs the "
                                  f'node\'s own login, {SCRAM_LOGIN_MODULE} required username="..." password="...";')
            return login
        key = self.sasl_key(listener, PLAIN_JAAS_KEY)
        text = self.sasl_value(listener, PLAIN_JAAS_KEY)
        if not text:
            raise ConfigError(key, f"missing: kavka's connections through {listener} log in with its "
                              f'{PLAIN_LOGIN_MODULE} required username="..." password="...";')
        try:
            entry = parse_jaas_config(str(text))
        except JaasError as e:
            raise ConfigError(key, f"invalid JAAS entry: {e}") from None
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(key, f"the login module must be {PLAIN_LOGIN_MODULE} for PLAIN, not {entry.login_module}")
        username, password = entry.options.get("username"), entry.options.get("password")
        if not username or not password:
            raise ConfigError(key, f"kavka's own connections through {listener} log in with this entry: it needs the "
                              'node\'s own login, username="..." password="..." (what it authenticates to the others with)')
        return username, password

    def outgoing_inter_broker_listener(self) -> str | None:
        """The listener kavka's connections to other brokers use (None without the broker role):
        inter.broker.listener.name, else the listener named security.inter.broker.protocol if set,
        else the first listener that is not a controller listener (kavka's default)."""
        if "broker" not in self.values["process.roles"]:
            return None
        ibl = self.values["inter.broker.listener.name"]
        if ibl:
            return str(ibl).upper()
        if "security.inter.broker.protocol" in self.explicit:
            return str(self.values["security.inter.broker.protocol"]).upper()
        controllers = {n.upper() for n in self.values["controller.listener.names"]}
        first = next((ep for ep in self.listeners if ep.name not in controllers), None)
        return first.name if first is not None else None

    def outgoing_controller_listener(self) -> str | None:
        """The listener kavka's connections to controllers use (Kafka: the first of
        controller.listener.names), or None when this node talks to no other controller (a
        single-node quorum)."""
        names = self.values["controller.listener.names"]
        voters = parse_voters(self.values["controller.quorum.voters"])
        dynamic = bool(self.values["controller.quorum.bootstrap.servers"])
        if not names or (not set(voters) - {self.node_id} and not dynamic):
            return None
        return str(names[0]).upper()

    def ssl_key(self, listener: str, key: str) -> str:
        """The config key that sets `key` (an ssl.* name) for `listener`: its own prefixed key if set."""
        own = f"listener.name.{listener.lower()}.{key}"
        return own if own in self.listener_ssl else key

    def ssl_value(self, listener: str, key: str) -> Any:
        """`key`'s value for `listener`: listener.name.<name>.<key> wins over <key> (Kafka's rule)."""
        own = f"listener.name.{listener.lower()}.{key}"
        return self.listener_ssl[own] if own in self.listener_ssl else self.values[key]

    def ssl_explicit(self, listener: str, key: str) -> bool:
        return f"listener.name.{listener.lower()}.{key}" in self.listener_ssl or key in self.explicit

    def static_topic_default(self, topic_key: str) -> tuple[Any, ConfigSource]:
        """The broker-level default of a topic config and where it came from."""
        tdef = TOPIC_CONFIGS[topic_key]
        syn = tdef.broker_synonym
        if topic_key == "retention.ms":
            return self._retention_ms()
        if topic_key == "segment.ms":
            if "log.roll.ms" in self.explicit:
                return self.values["log.roll.ms"], ConfigSource.STATIC_BROKER_CONFIG
            if "log.roll.hours" in self.explicit:
                return self.values["log.roll.hours"] * 3600000, ConfigSource.STATIC_BROKER_CONFIG
            return tdef.config.default, ConfigSource.DEFAULT_CONFIG
        if topic_key == "flush.ms" and self.values["log.flush.interval.ms"] is None:
            return tdef.config.default, ConfigSource.DEFAULT_CONFIG
        if syn and syn in self.explicit:
            return self.values[syn], ConfigSource.STATIC_BROKER_CONFIG
        return tdef.config.default, ConfigSource.DEFAULT_CONFIG

    def _retention_ms(self) -> tuple[Any, ConfigSource]:
        # Kafka: log.retention.ms, else .minutes, else .hours (LogConfig).
        for key, scale in (("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", 3600000)):
            if key in self.explicit and self.values[key] is not None:
                v = self.values[key]
                return (v if v < 0 else v * scale), ConfigSource.STATIC_BROKER_CONFIG
        return TOPIC_CONFIGS["retention.ms"].config.default, ConfigSource.DEFAULT_CONFIG


def build_config(props: Mapping[str, str]) -> BrokerConfig:
    values: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    listener_ssl: dict[str, Any] = {}
    listener_sasl: dict[str, Any] = {}
    for key, raw in props.items():
        refusal = _security_refusal(key, raw)
        if refusal:
            raise ConfigError(key, refusal)
        ms = _LISTENER_SASL_RE.match(key)
        if ms:
            listener_sasl[f"listener.name.{ms['listener'].lower()}.{ms['key']}"] = _parse_as(SASL_CONFIGS[ms["key"]], key, raw)
            continue
        m = _LISTENER_SSL_RE.match(key)
        if m:
            d = SSL_CONFIGS[m["key"]]
            listener_ssl[f"listener.name.{m['listener'].lower()}.{m['key']}"] = _parse_as(d, key, raw)
            continue
        d = BROKER_CONFIGS.get(key)
        if d is None and key.startswith(RSM_CONFIG_PREFIX):
            unknown[key] = raw  # the RemoteStorageManager's own keys (remote.log.storage.manager.class.name)
            continue
        if d is None:
            unknown[key] = raw
            log.warning("unknown config %s=%s is ignored", key, raw)
            continue
        values[key] = d.parse(raw)
    explicit = frozenset(values)
    for key, d in BROKER_CONFIGS.items():
        values.setdefault(key, d.default)
    if values["node.id"] < 0:
        if values["broker.id"] >= 0:
            values["node.id"] = values["broker.id"]
        else:
            raise ConfigError("node.id", "missing: every kavka server needs a node.id >= 0")
    cfg = BrokerConfig(values=values, explicit=explicit, unknown=unknown, listener_ssl=listener_ssl, listener_sasl=listener_sasl)
    _check_listener_security(cfg)
    _check_authorizer(cfg)
    _check_roles(cfg)
    for key in sorted(explicit):
        reason = BROKER_CONFIGS[key].informational
        if reason:
            log.info("config %s is accepted but has no effect: %s", key, reason)
    if not cfg.log_dirs or any(not str(d) for d in cfg.log_dirs):
        raise ConfigError("log.dirs", "at least one directory is required")
    if values[_TIERED_SYSTEM_KEY] and not values["remote.log.storage.manager.class.name"]:
        raise ConfigError(
            "remote.log.storage.manager.class.name",
            f"required when {_TIERED_SYSTEM_KEY}=true: local, s3 or an importable module:Class",
        )
    if values["message.max.bytes"] > values["socket.request.max.bytes"]:
        raise ConfigError("message.max.bytes", "must not exceed socket.request.max.bytes")
    return cfg


def _parse_as(d: ConfigDef, key: str, raw: str) -> Any:
    """Parse a listener.name.<name>.ssl.* value with its ssl.* definition, naming the prefixed key."""
    try:
        return d.parse(raw)
    except ConfigError as e:
        raise ConfigError(key, str(e).split(": ", 1)[1]) from None


def _protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in cfg.values["listener.security.protocol.map"] or []:
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or proto.strip().upper() not in _KNOWN_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", f"invalid entry {item!r}: expected NAME:PROTOCOL")
        mapping[name.strip().upper()] = proto.strip().upper()
    return mapping


def _check_authorizer(cfg: BrokerConfig) -> None:
    """The authorizer's own keys have an effect only with an authorizer."""
    if cfg.values["authorizer.class.name"]:
        return
    for key in ("super.users", "allow.everyone.if.no.acl.found"):
        if key in cfg.explicit:
            raise ConfigError(key, "authorizer.class.name is not set, so this key would have no effect "
                              f"(set it to {STANDARD_AUTHORIZER} or kavka)")


def _check_listener_security(cfg: BrokerConfig) -> None:
    """Listeners' protocols (Kafka's listener.security.protocol.map rules) and the listeners kavka's
    own connections use: to brokers the inter-broker listener (SSL, SASL_PLAINTEXT or SASL_SSL with
    sasl.mechanism.inter.broker.protocol: PLAIN or SCRAM), to controllers the first controller listener
    (any protocol; SASL with sasl.mechanism.controller.protocol=PLAIN). Keys that would have no effect are refused."""
    _protocol_map(cfg)  # validates the map
    ssl_names = {ep.name for ep in cfg.ssl_listeners()}
    sasl_names = {ep.name for ep in cfg.sasl_listeners()}
    names = [n.upper() for n in cfg.values["controller.listener.names"]]
    first = names[0] if names else None
    for name in sorted((sasl_names & set(names)) - {first}):
        raise ConfigError(
            "controller.listener.names",
            f"{name} asks for {cfg.security_protocol(name)}, but kavka serves the KRaft RPCs on the first controller "
            f"listener ({first}) only, so SASL on {name} would have no effect; map it to PLAINTEXT or SSL",
        )
    ctl = cfg.outgoing_controller_listener()
    ctl_key = "sasl.mechanism.controller.protocol"
    if first is not None and cfg.security_protocol(first) in _SASL_PROTOCOLS and (first in sasl_names or ctl is not None):
        _check_sasl_mechanism(cfg, ctl_key, first, served=first in sasl_names, login=ctl is not None, what="controllers")
    elif ctl_key in cfg.explicit:
        raise ConfigError(ctl_key, f"the controller listener {first} is {cfg.security_protocol(first) if first else 'unset'}, "
                          "not SASL_PLAINTEXT or SASL_SSL, so this key would have no effect; remove it")
    sibp = "security.inter.broker.protocol"
    if sibp in cfg.explicit and cfg.values["inter.broker.listener.name"]:
        raise ConfigError(sibp, "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set (Kafka's rule)")
    if sibp in cfg.explicit and "broker" in cfg.values["process.roles"]:
        wanted = cfg.values[sibp].upper()
        if wanted not in {ep.name for ep in cfg.listeners}:
            raise ConfigError(sibp, f"{wanted}: the inter-broker listener is the listener named after the protocol, and "
                              f"no listener is named {wanted}; name one so or set inter.broker.listener.name")
    ibl = cfg.outgoing_inter_broker_listener()
    mech_key = "sasl.mechanism.inter.broker.protocol"
    if ibl is not None and cfg.security_protocol(ibl) in _SASL_PROTOCOLS:
        _check_sasl_mechanism(cfg, mech_key, ibl, served=True, login=True, what="inter-broker communication")
    elif mech_key in cfg.explicit:
        proto = cfg.security_protocol(ibl) if ibl else "none (no broker role)"
        raise ConfigError(mech_key, f"the inter-broker listener {ibl} is {proto}, not SASL_PLAINTEXT or SASL_SSL, "
                          "so this key would have no effect; remove it")
    outgoing_tls = {n for n in (ibl, ctl) if n is not None and cfg.security_protocol(n) in ("SSL", "SASL_SSL")}
    outgoing_sasl = {n for n in (ibl, ctl) if n is not None and cfg.security_protocol(n) in _SASL_PROTOCOLS}
    _check_ssl_keys(cfg, ssl_names | outgoing_tls)
    _check_sasl_keys(cfg, sasl_names, outgoing_sasl)


def _check_sasl_mechanism(cfg: BrokerConfig, key: str, listener: str, *, served: bool, login: bool, what: str) -> None:
    """The mechanism `key` names for a SASL listener kavka's own connections use (Kafka's rules)."""
    mechanism = cfg.values[key]
    # kavka's own connections log in with a password: PLAIN or SCRAM (no token provider for OAUTHBEARER).
    # SCRAM credentials live in the metadata log, which the quorum must already run to serve, so the
    # controller listener cannot use SCRAM (Kafka's KRaft rule too).
    allowed = (PLAIN,) if key == "sasl.mechanism.controller.protocol" else (PLAIN, *SCRAM_MECHANISMS)
    if mechanism not in allowed:
        unset = "" if key in cfg.explicit else " (Kafka's default, which needs Kerberos)"
        why = (" (SCRAM credentials are stored in the metadata log the controllers serve, so they cannot "
               "authenticate the quorum itself)" if mechanism in SCRAM_MECHANISMS else "")
        raise ConfigError(key, f"mechanism {mechanism}{unset} is not supported by kavka here{why}; the listener {listener} "
                          f"is {cfg.security_protocol(listener)}: set it to {' or '.join(allowed)}")
    if served:
        enabled = cfg.sasl_value(listener, SASL_MECHANISMS_KEY) or []
        if mechanism not in enabled:
            raise ConfigError(key, f"{mechanism} must be included in {cfg.sasl_key(listener, SASL_MECHANISMS_KEY)} "
                              f"when SASL is used for {what} (listener {listener})")
    if login:
        cfg.broker_login(listener, mechanism)


def _check_sasl_keys(cfg: BrokerConfig, sasl_names: set[str], outgoing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Every SASL key set has an effect; each SASL listener served serves only mechanisms kavka has,
    each with what it needs (PLAIN its users, OAUTHBEARER its validator); a listener only kavka's own
    connections use needs only the login."""
    for key in sorted(cfg.listener_sasl):
        listener = key.split(".")[2].upper()
        if listener not in sasl_names and not (listener in outgoing and key.endswith(PLAIN_JAAS_KEY)):
            raise ConfigError(key, f"{listener} is not a listener whose protocol is SASL_PLAINTEXT or SASL_SSL, so this key would have no effect")
    if not sasl_names:
        for key in sorted(cfg.explicit & {SASL_MECHANISMS_KEY, "sasl.server.max.receive.size"}):
            raise ConfigError(key, "no listener's protocol is SASL_PLAINTEXT or SASL_SSL, so this key would have no effect")
        if cfg.values["connections.max.reauth.ms"] > 0:
            raise ConfigError("connections.max.reauth.ms", "no listener's protocol is SASL_PLAINTEXT or SASL_SSL, so this key would have no effect")
    for name in sorted(sasl_names):
        key = cfg.sasl_key(name, SASL_MECHANISMS_KEY)
        mechanisms = list(cfg.sasl_value(name, SASL_MECHANISMS_KEY) or [])
        if not mechanisms:
            raise ConfigError(key, f"SASL listener {name} enables no mechanism; set it to some of {', '.join(SUPPORTED_SASL_MECHANISMS)}")
        for mechanism in mechanisms:
            if mechanism not in SUPPORTED_SASL_MECHANISMS:
                unset = "" if key in cfg.listener_sasl or key in cfg.explicit else " (Kafka's default, which needs Kerberos)"
                raise ConfigError(key, f"mechanism {mechanism}{unset} is not supported by kavka yet on listener {name}; "
                                  f"it serves {', '.join(SUPPORTED_SASL_MECHANISMS)}")
        if PLAIN in mechanisms:
            cfg.plain_users(name)
        if OAUTHBEARER in mechanisms:
            cfg.oauthbearer_validator(name)
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in mechanisms:
                cfg.scram_login(name, mechanism)
    for key in sorted(cfg.listener_sasl):
        listener, mechanism = key.split(".")[2].upper(), key.split(".")[3].upper()
        served = listener in sasl_names  # a listener only kavka's own connections use carries just their login
        if served and mechanism in SUPPORTED_SASL_MECHANISMS and mechanism not in (cfg.sasl_value(listener, SASL_MECHANISMS_KEY) or []):
            raise ConfigError(key, f"listener {listener} does not enable {mechanism} ({cfg.sasl_key(listener, SASL_MECHANISMS_KEY)}), "
                              "so this key would have no effect")
    _check_oauthbearer_keys(cfg, sasl_names)


_HTTP_JWKS_KEYS = frozenset({"sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
                             "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"})


def _check_oauthbearer_keys(cfg: BrokerConfig, sasl_names: set[str]) -> None:
    """The JWKS validator's keys have an effect only on listeners that use it (and refresh.ms only for an http(s) JWKS)."""
    jwks_listeners = [n for n in sorted(sasl_names)
                      if OAUTHBEARER in (cfg.sasl_value(n, SASL_MECHANISMS_KEY) or []) and cfg.oauthbearer_uses_jwks(n)]
    for key in sorted(cfg.listener_sasl):
        listener, _, rest = key[len("listener.name."):].partition(".")
        if rest.startswith("oauthbearer.sasl.oauthbearer.") and listener.upper() not in jwks_listeners:
            raise ConfigError(key, f"listener {listener.upper()} does not validate tokens against a JWKS (its "
                              f"oauthbearer.sasl.server.callback.handler.class is not OAuthBearerValidatorCallbackHandler), "
                              "so this key would have no effect")
        if rest.removeprefix("oauthbearer.") in _HTTP_JWKS_KEYS and not str(
                cfg.oauthbearer_setting(listener, "sasl.oauthbearer.jwks.endpoint.url")[1] or "").lower().startswith("http"):
            raise ConfigError(key, f"listener {listener.upper()} reads its JWKS from a file (read once, at startup), "
                              "so this key would have no effect")
    for key in sorted(cfg.explicit & OAUTHBEARER_CONFIGS.keys()):
        users = [n for n in jwks_listeners if cfg.oauthbearer_setting(n, key)[0] == key]
        if not users:
            raise ConfigError(key, "no SASL listener validates OAUTHBEARER tokens against a JWKS with this key "
                              "(listener.name.<name>.oauthbearer.sasl.server.callback.handler.class="
                              "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler), "
                              "so this key would have no effect")
        if key in _HTTP_JWKS_KEYS and not any(
                str(cfg.oauthbearer_setting(n, "sasl.oauthbearer.jwks.endpoint.url")[1] or "").lower().startswith("http") for n in users):
            raise ConfigError(key, "no listener using it fetches its JWKS over http(s) (a file: JWKS is read once, at startup), "
                              "so this key would have no effect")


def _check_ssl_keys(cfg: BrokerConfig, ssl_names: set[str]) -> None:
    """Every ssl.* key set has an effect (some SSL listener uses it); each SSL listener has a
    keystore kavka can read the type of (kavka.broker.tls reads the files at startup)."""
    for key in sorted(cfg.listener_ssl):
        listener = key.split(".")[2].upper()
        if listener not in ssl_names:
            raise ConfigError(key, f"{listener} is not a listener whose protocol is SSL, so this key would have no effect")
    if not ssl_names:
        for key in sorted(cfg.explicit & SSL_CONFIGS.keys()):
            raise ConfigError(key, "no listener's protocol is SSL, so this key would have no effect; add an SSL listener or remove it")
    for name in sorted(ssl_names):
        for store in ("keystore", "truststore"):
            type_key = f"ssl.{store}.type"
            location = cfg.ssl_value(name, f"ssl.{store}.location")
            kind = cfg.ssl_value(name, type_key)
            if location and kind == _JKS:
                default = "" if cfg.ssl_explicit(name, type_key) else " (Kafka's default)"
                raise ConfigError(cfg.ssl_key(name, type_key), f"JKS{default}: {JKS_CONVERSION}")


def parse_voters(values: Sequence[str]) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters: `id@host:port,...` -> {id: (host, port)} (ConfigError naming the key)."""
    out: dict[int, tuple[str, int]] = {}
    for voter in values:
        vid, sep, hostport = voter.strip().partition("@")
        host, colon, port = hostport.rpartition(":")
        if not sep or not vid.strip().isdigit() or not colon or not host or not port.isdigit():
            raise ConfigError("controller.quorum.voters", f"invalid voter {voter!r}: expected id@host:port")
        if int(vid) in out:
            raise ConfigError("controller.quorum.voters", f"voter id {vid} is listed twice")
        out[int(vid)] = (host.strip("[]"), int(port))
    return out


def _check_roles(cfg: BrokerConfig) -> None:
    """Refuse role and quorum settings that cannot work, naming the key (Kafka's KafkaConfig checks)."""
    roles = set(cfg.values["process.roles"])
    if not roles:
        raise ConfigError("process.roles", "(empty): a node needs the broker role, the controller role, or both")
    voters = parse_voters(cfg.values["controller.quorum.voters"])
    bootstrap = cfg.values["controller.quorum.bootstrap.servers"]
    names = [n.upper() for n in cfg.values["controller.listener.names"]]
    ctl = [e for e in cfg.listeners if e.name in names]
    if voters and bootstrap:
        raise ConfigError(
            "controller.quorum.bootstrap.servers",
            "set together with controller.quorum.voters: a quorum is static (voters) or dynamic (bootstrap servers, KIP-853)",
        )
    if "controller" in roles and bootstrap and not ctl:
        raise ConfigError("controller.listener.names", f"none of {names} is in listeners: a controller of a dynamic quorum needs its listener")
    if roles != {"broker", "controller"} and not voters and not bootstrap:
        raise ConfigError(
            "controller.quorum.voters",
            f"must list the controller quorum when process.roles={','.join(sorted(roles))} "
            "(only a combined broker,controller node may run as a quorum of one without it)",
        )
    if "controller" in roles and voters and cfg.node_id not in voters:
        raise ConfigError(
            "controller.quorum.voters",
            f"node.id {cfg.node_id} is not a voter: a node with the controller role must be one of {sorted(voters)}",
        )
    if roles == {"broker"}:
        if cfg.node_id in voters:
            raise ConfigError(
                "controller.quorum.voters",
                f"node.id {cfg.node_id} is a voter, but process.roles=broker: a voter needs the controller role",
            )
        if ctl:
            raise ConfigError(
                "listeners",
                f"{ctl[0].name} is a controller listener (controller.listener.names), but process.roles=broker",
            )
    if roles == {"controller"}:
        if not ctl:
            raise ConfigError("controller.listener.names", f"none of {names} is in listeners: a controller needs its listener")
        others = [e.name for e in cfg.listeners if e.name not in names]
        if others:
            raise ConfigError(
                "listeners",
                f"{others[0]} is not a controller listener: with process.roles=controller every listener "
                f"must be one of controller.listener.names {names}",
            )
    if "controller" in roles and set(voters) - {cfg.node_id}:
        if not ctl:
            raise ConfigError(
                "controller.listener.names",
                f"none of {names} is in listeners: a voter of a multi-node quorum needs a controller listener",
            )
        host, port = voters[cfg.node_id]
        if ctl[0].port not in (0, port):
            raise ConfigError(
                "controller.quorum.voters",
                f"this node's entry {cfg.node_id}@{host}:{port} does not match its controller listener {ctl[0]}",
            )
        if roles == {"broker", "controller"} and len(ctl) == len(cfg.listeners):
            raise ConfigError("listeners", "no listener for clients: every listener is a controller listener")
    if cfg.values["broker.heartbeat.interval.ms"] > cfg.values["broker.session.timeout.ms"]:
        raise ConfigError(
            "broker.heartbeat.interval.ms",
            f"{cfg.values['broker.heartbeat.interval.ms']} must be less than or equal to "
            f"broker.session.timeout.ms ({cfg.values['broker.session.timeout.ms']})",
        )
    ibl = cfg.values["inter.broker.listener.name"]
    if ibl and ibl.upper() not in {e.name for e in cfg.listeners}:
        raise ConfigError("inter.broker.listener.name", f"{ibl} is not a listener name in listeners")
    if ibl and ibl.upper() in {n.upper() for n in cfg.values["controller.listener.names"]}:
        raise ConfigError("inter.broker.listener.name", f"{ibl} is a controller listener: brokers cannot fetch from it")
    # Kafka's KafkaConfig checks of the follower's fetch settings.
    v = cfg.values
    if v["replica.fetch.wait.max.ms"] > v["replica.socket.timeout.ms"]:
        raise ConfigError("replica.socket.timeout.ms", "should always be at least replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")
    if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
        raise ConfigError("replica.fetch.wait.max.ms", "should always be less than or equal to replica.lag.time.max.ms to prevent frequent changes in ISR")


def informational_keys() -> dict[str, str]:
    """Every accepted key that has no effect, with the reason (the README's table)."""
    out = {k: d.informational for k, d in BROKER_CONFIGS.items() if d.informational}
    out.update({k: d.config.informational for k, d in TOPIC_CONFIGS.items() if d.config.informational})
    return out  # type: ignore[return-value]


def load_config(path: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
    props = read_properties(Path(path)) if path is not None else {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--override", f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return build_config(props)


RSM_CONFIG_PREFIX = "rsm.config."


def validate_tiered_topic(
    config: BrokerConfig, new: Mapping[str, str | None], old: Mapping[str, str] | None = None
) -> str | None:
    """Kafka's remote-storage checks of a topic's config (LogConfig.validateRemoteStorage*, KIP-950):
    None if acceptable, else the INVALID_CONFIG message. ``old`` / ``new`` are the topic's overrides
    after and before (``old`` None at creation); broker defaults fill in the rest. Called by the
    controller on CreateTopics and (Incremental)AlterConfigs."""
    if not _TIERED_TOPIC_RULES:
        raise LookupError("no tiered topic rule is registered: import tiered storage's rules first")
    rule = _TIERED_TOPIC_RULES[0]

    def effective(overrides: Mapping[str, str | None]) -> dict[str, str]:
        out = {}
        for key in ("remote.storage.enable", "cleanup.policy", "retention.ms", "retention.bytes",
                    "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable",
                    "remote.log.delete.on.disable"):
            if key in overrides and overrides[key] is not None:
                out[key] = str(overrides[key])
            else:
                d = TOPIC_CONFIGS[key].config
                out[key] = d.render(config.static_topic_default(key)[0]) or ""
        return out

    before, after = effective(old or {}), effective(new)
    was = before["remote.storage.enable"].lower() == "true"
    now = after["remote.storage.enable"].lower() == "true"
    if old is not None and was and not now and after["remote.log.delete.on.disable"].lower() != "true":
        return ("It is invalid to disable remote storage without deleting remote data. If you want to keep "
                "the remote data and turn to read only, please set `remote.storage.enable=true,"
                "remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote "
                "data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
    return rule(after, system_enabled=bool(config.values[_TIERED_SYSTEM_KEY]))


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic overrides (CreateTopics / AlterConfigs); unknown key -> ConfigError."""
    out: dict[str, Any] = {}
    for key, raw in configs.items():
        tdef = TOPIC_CONFIGS.get(key)
        if tdef is None:
            raise ConfigError(key, "unknown topic config")
        out[key] = None if raw is None else tdef.config.parse(raw)
    return out


# --------------------------------------------------------------------------- several brokers from one config

_HOST_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _shifted(eps: list[Endpoint], i: int, controller: bool, controller_names: set[str]) -> str:
    """Listeners of process i: each port + i (0 stays 0), the controller listeners only on a controller."""
    return ",".join(str(Endpoint(ep.name, f"[{ep.host}]" if ":" in ep.host else ep.host, ep.port + i if ep.port else 0))
                    for ep in eps if controller or ep.name not in controller_names)


def process_overrides(props: Mapping[str, str], processes: int, host: str) -> list[dict[str, str]]:
    """`kavka server start --processes N`: the keys each of N brokers on one host overrides in the one
    config `props` (server.properties with the command's --override applied). Process i (0-based):

    - `node.id` = the config's node.id + i (and `broker.id` likewise when it is set);
    - every listener's port + i, in `listeners` and `advertised.listeners` (port 0 stays 0), and
      `metrics.prometheus.port` + i when it is above 0;
    - each of `log.dirs` (or `log.dir`) and `metadata.log.dir` gets the subdirectory `node-<id>`;
    - `broker.rack` gets the host as its last level: `/dc/rack` -> `/dc/rack/<host>`, unset -> `/<host>`,
      so placement spreads replicas over hosts (docs/placement.md);
    - roles: with `process.roles=broker` every process is a broker. With `broker,controller` a
      process keeps the controller role only if its node id is in the static
      `controller.quorum.voters` (process 0's must be, as for any combined node); the others become
      `process.roles=broker` without the controller listeners.

    Refused, naming the key: a controller-only config (`process.roles`), a combined config with no
    voter list (each process would be a quorum of one, a cluster of its own) or a dynamic quorum
    (`controller.quorum.bootstrap.servers`), two processes on one port, and anything a derived
    process's own config check refuses (reported with the process)."""
    if not _HOST_ID_RE.match(host):
        raise ConfigError("--host-id", f"{host!r} is not a host name: letters, digits, '.', '-' and '_' (it becomes a "
                          "level of broker.rack)")
    base = build_config(props)
    roles = set(base.values["process.roles"])
    if "broker" not in roles:
        raise ConfigError("process.roles", "--processes starts brokers; a controller-only node is one process: start it "
                          "without --processes")
    combined = "controller" in roles
    if combined and processes > 1 and base.values["controller.quorum.bootstrap.servers"]:
        raise ConfigError("controller.quorum.bootstrap.servers", "--processes with a dynamic quorum (KIP-853) and the "
                          "controller role: use process.roles=broker for the processes (the controllers run on their "
                          "own), or a static controller.quorum.voters")
    voters = parse_voters(base.values["controller.quorum.voters"])
    if combined and processes > 1 and not voters:
        raise ConfigError("controller.quorum.voters", f"missing: with --processes {processes} and "
                          "process.roles=broker,controller, list the voters (e.g. only process 0's node id); without it "
                          "each process would be a quorum of one, a cluster of its own")
    controller_names = {n.upper() for n in base.values["controller.listener.names"]}
    own: dict[int, tuple[int, str]] = {}  # port -> (process, what)
    out: list[dict[str, str]] = []
    for i in range(processes):
        node = base.node_id + i
        controller = combined and node in voters

        o = {"node.id": str(node)}
        if "broker.id" in base.explicit:
            o["broker.id"] = str(node)
        o["listeners"] = _shifted(base.listeners, i, controller, controller_names)
        if base.values["advertised.listeners"]:
            o["advertised.listeners"] = _shifted(base.advertised_listeners, i, controller, controller_names)
        if combined:
            o["process.roles"] = "broker,controller" if controller else "broker"
        o["log.dirs"] = ",".join(str(d / f"node-{node}") for d in base.log_dirs)
        if base.values["metadata.log.dir"]:
            o["metadata.log.dir"] = str(Path(base.values["metadata.log.dir"]) / f"node-{node}")
        rack = base.values["broker.rack"]
        o["broker.rack"] = f"{rack.rstrip('/')}/{host}" if rack else f"/{host}"
        ports = [(ep.port + i, f"listener {ep.name}", "listeners") for ep in base.listeners
                 if ep.port and (controller or ep.name not in controller_names)]
        metrics = base.values["metrics.prometheus.port"]
        if metrics > 0:
            o["metrics.prometheus.port"] = str(metrics + i)
            ports.append((metrics + i, "metrics.prometheus.port", "metrics.prometheus.port"))
        for port, what, key in ports:
            if port > 65535:
                raise ConfigError(key, f"--processes {processes}: process {i}'s {what} would be on port {port}, above 65535")
            if port in own:
                j, other = own[port]
                raise ConfigError(key, f"--processes {processes}: port {port} would be process {j}'s {other} and process "
                                  f"{i}'s {what} (process i listens on each port + i): space the ports at least "
                                  f"{processes} apart")
            own[port] = (i, what)
        try:
            build_config({**props, **o})
        except ConfigError as e:
            raise ConfigError(e.key, f"process {i} (node.id {node}): {str(e).split(': ', 1)[1]}") from None
        out.append(o)
    return out
