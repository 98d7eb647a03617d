"""Options of the `kavka` data source, parsed once into typed values.

The names and meanings are those of Spark's Kafka connector
(``spark-sql-kafka-0-10``), so a job moves between the two by changing the
format name. Spark hands a data source its options as a case-insensitive map
with lower-cased keys and string values; every error here is a ValueError
whose message starts with the option's name as users spell it, so the
message Spark shows points at the culprit.

Security: `kafka.security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) with the Java
client's `kafka.ssl.*` truststore, keystore and protocol keys and `kafka.sasl.mechanism` (PLAIN,
SCRAM-SHA-256/512) / `kafka.sasl.jaas.config`, parsed by kavka.client_properties (the kavka CLI's
`--command-config` keys); any other `kafka.ssl.*` or `kafka.sasl.*` option is refused naming it.
They are kept as strings (`ClientSettings.security`, left out of every repr) and turned into a
`ClientSecurity` once per process: on the driver to check them, again on each executor (an
SSLContext does not pickle), so the files they name must be readable on every executor, as with
Spark's own connector.

Offsets JSON follows Spark: ``{"topic": {"0": 23, "1": -2}}`` where -2 means
earliest and -1 latest; timestamps JSON ``{"topic": {"0": 1700000000000}}``.
Pure functions; called on the driver (and the results pickled to tasks).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import kavka.client_properties as properties
from kavka.client.connection import parse_host_port
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.protocol.compression import CODEC_NAMES

EARLIEST = -2
LATEST = -1

# kafka.* settings the connector's client understands; other kafka.* keys are
# consumer/producer tuning for the JVM client that has no meaning here and are
# ignored (the JVM client also only warns about unknown settings).
CLIENT_SETTINGS = {
    "kafka.client.id",
    "kafka.request.timeout.ms",
    "kafka.fetch.max.bytes",
    "kafka.max.partition.fetch.bytes",
    "kafka.fetch.max.wait.ms",
    "kafka.isolation.level",
    "kafka.acks",
    "kafka.enable.idempotence",
    "kafka.compression.type",
    "kafka.batch.size",
    "kafka.delivery.timeout.ms",
    "kafka.transaction.timeout.ms",
    *(f"kafka.{k}" for k in sorted(properties.SECURITY_KEYS)),
}
# Settings Spark's connector refuses because it manages them itself. (kafka.group.id
# is accepted and ignored: the source assigns partitions and needs no group.)
REFUSED_SETTINGS = {
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.key.deserializer": "keys are always returned as binary",
    "kafka.value.deserializer": "values are always returned as binary",
    "kafka.key.serializer": "write a binary or string key column",
    "kafka.value.serializer": "write a binary or string value column",
    "kafka.enable.auto.commit": "the source never commits offsets",
    "kafka.interceptor.classes": "there are no JVM interceptors",
}

Offsets = Mapping[str, Mapping[int, int]]  # topic -> partition -> offset (or EARLIEST/LATEST)


class OptionError(ValueError):
    """A missing, conflicting or malformed option; the message names it."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    bootstrap_servers: str
    client_id: str = "kavka-spark"
    request_timeout_ms: int = 30_000
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 8 * 1024 * 1024
    fetch_max_wait_ms: int = 500
    # 0 read_uncommitted (Spark's default), 1 read_committed: read below the LSO only and
    # leave out records of aborted transactions.
    isolation_level: int = 0
    # The security properties without their `kafka.` prefix, sorted; secrets among them, so never
    # in a repr (Spark logs and plan strings show reprs).
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def client_security(self) -> ClientSecurity:
        """The TLS context and SASL login of this source's or sink's connections."""
        return _client_security(self.security) if self.security else PLAINTEXT


@functools.lru_cache(maxsize=16)
def _client_security(props: tuple[tuple[str, str], ...]) -> ClientSecurity:
    try:
        return properties.client_security(dict(props), who="the kavka Spark connector")
    except properties.CommandConfigError as e:
        raise OptionError(f"kafka.{e}") from None  # "kafka.<key>: <why>", never a secret


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: a keyword, per-partition offsets, or timestamps."""

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: Offsets = field(default_factory=dict)  # kind == "offsets" or "timestamps"
    timestamp: int = -1  # kind == "timestamp": one timestamp for every partition


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: ClientSettings
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False

    def topic_matches(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return self.assign is not None and topic in self.assign


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: ClientSettings
    topic: str | None = None
    acks: int = -1
    enable_idempotence: bool = True
    compression: int = 0
    batch_max_bytes: int = 512 * 1024
    delivery_timeout_ms: int = 120_000
    # kavka.sink.semantics=exactly_once: one transaction per task with a progress record
    # (kavka.spark.sink); at_least_once (the default) is Spark's Kafka sink's behaviour.
    exactly_once: bool = False
    transaction_timeout_ms: int = 60_000


# ---------------------------------------------------------------------- parsing


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    client = _client_settings(opts)
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        how = "none was given" if not chosen else f"got {', '.join(_spell(k) for k in chosen)}"
        raise OptionError(
            f"subscribe, subscribePattern, assign: exactly one of these options must be set; {how}"
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("subscribe: no topic given (a comma-separated list of topics)")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise OptionError("subscribePattern: the pattern is empty")
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"subscribePattern: {pattern!r} is not a valid regex: {e}") from None
    else:
        assign = _assign(opts["assign"])

    starting = _offset_spec(opts, "starting", default="latest" if streaming else "earliest")
    if streaming:
        for k in ("endingoffsets", "endingoffsetsbytimestamp"):
            if k in opts:
                raise OptionError(f"{_spell(k)}: not supported by streaming queries (batch only)")
        ending = OffsetSpec("latest")
    else:
        if "endingtimestamp" in opts:
            ts = _timestamp(opts["endingtimestamp"], "endingTimestamp")
            ending = OffsetSpec("timestamp", timestamp=ts)
        else:
            ending = _offset_spec(opts, "ending", default="latest")
        if ending.kind == "earliest":
            raise OptionError("endingOffsets: earliest is not allowed for a batch query's end")
        if ending.kind == "offsets" and any(
            o == EARLIEST for parts in ending.offsets.values() for o in parts.values()
        ):
            raise OptionError("endingOffsets: -2 (earliest) is not allowed for a batch query's end")
        if starting.kind == "latest":
            raise OptionError("startingOffsets: latest is not allowed for a batch query's start")
        if starting.kind == "offsets" and any(
            o == LATEST for parts in starting.offsets.values() for o in parts.values()
        ):
            raise OptionError("startingOffsets: -1 (latest) is not allowed for a batch query's start")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}"
        )
    max_per_trigger = _positive_int(opts, "maxoffsetspertrigger")
    min_partitions = _positive_int(opts, "minpartitions")
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,  # type: ignore[arg-type]
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=min_partitions,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    client = _client_settings(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic: the topic name is empty")
    acks_raw = opts.get("kafka.acks", "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1}.get(acks_raw)
    if acks is None:
        raise OptionError(
            f"kafka.acks: expected all, -1 or 1, got {acks_raw!r} (acks=0 is not supported: "
            "without an answer a retried batch cannot be told from a delivered one)"
        )
    codec_raw = opts.get("kafka.compression.type", "none").strip().lower()
    codes = {name: code for code, name in CODEC_NAMES.items()}
    if codec_raw not in codes:
        raise OptionError(
            f"kafka.compression.type: expected one of {', '.join(codes)}, got {codec_raw!r}"
        )
    semantics = opts.get("kavka.sink.semantics", "at_least_once").strip().lower().replace("-", "_")
    if semantics not in ("at_least_once", "exactly_once"):
        raise OptionError(
            f"kavka.sink.semantics: expected at_least_once or exactly_once, got {semantics!r}"
        )
    exactly_once = semantics == "exactly_once"
    if exactly_once and (acks != -1 or not _bool(opts, "kafka.enable.idempotence", True)):
        raise OptionError(
            "kavka.sink.semantics: exactly_once writes transactionally, which needs kafka.acks=all "
            "and kafka.enable.idempotence=true"
        )
    return SinkOptions(
        client=client,
        exactly_once=exactly_once,
        transaction_timeout_ms=_positive_int(opts, "kafka.transaction.timeout.ms") or 60_000,
        topic=topic.strip() if topic else None,
        acks=acks,
        enable_idempotence=_bool(opts, "kafka.enable.idempotence", True),
        compression=codes[codec_raw],
        batch_max_bytes=_positive_int(opts, "kafka.batch.size") or 512 * 1024,
        delivery_timeout_ms=_positive_int(opts, "kafka.delivery.timeout.ms") or 120_000,
    )


# ---------------------------------------------------------------------- helpers

_SPELLING = {
    k.lower(): k
    for k in (
        "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss", "includeHeaders", "topic",
    )
}  # fmt: skip


def _spell(key: str) -> str:
    """An option's name as Spark's documentation spells it."""
    return _SPELLING.get(key, key)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _client_settings(opts: Mapping[str, str]) -> ClientSettings:
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise OptionError(
            "kafka.bootstrap.servers: this option is required (host:port[,host:port...])"
        )
    for address in servers.split(","):
        if not address.strip():
            continue
        try:
            parse_host_port(address)
        except ValueError as e:
            raise OptionError(f"kafka.bootstrap.servers: {e}") from None
    for key, why in REFUSED_SETTINGS.items():
        if key in opts:
            raise OptionError(f"{key}: not supported; {why}")
    security: dict[str, str] = {}
    for key in sorted(opts):
        if not key.startswith("kafka."):
            continue
        name = key.removeprefix("kafka.")
        if name in properties.SECURITY_KEYS:
            security[name] = opts[key].strip() if name not in properties.SECRET_KEYS else opts[key]
        elif name.startswith(("ssl.", "sasl.")):
            raise OptionError(
                f"{key}: not supported by this connector (it honours kafka.security.protocol, "
                "kafka.ssl.truststore.*, kafka.ssl.keystore.*, kafka.ssl.key.password, "
                "kafka.ssl.endpoint.identification.algorithm, kafka.ssl.enabled.protocols, kafka.ssl.protocol, "
                "kafka.ssl.cipher.suites, kafka.sasl.mechanism and kafka.sasl.jaas.config)"
            )
    if set(security) <= {"security.protocol"} and security.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        security = {}  # plain PLAINTEXT: nothing to build
    settings = ClientSettings(
        bootstrap_servers=servers,
        client_id=opts.get("kafka.client.id", "kavka-spark"),
        request_timeout_ms=_positive_int(opts, "kafka.request.timeout.ms") or 30_000,
        fetch_max_bytes=_positive_int(opts, "kafka.fetch.max.bytes") or 50 * 1024 * 1024,
        max_partition_fetch_bytes=_positive_int(opts, "kafka.max.partition.fetch.bytes")
        or 8 * 1024 * 1024,
        fetch_max_wait_ms=_positive_int(opts, "kafka.fetch.max.wait.ms") or 500,
        isolation_level=_isolation_level(opts),
        security=tuple(sorted(security.items())),
    )
    settings.client_security()  # checked on the driver: a bad option fails the query at once
    return settings


def _isolation_level(opts: Mapping[str, str]) -> int:
    raw = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    levels = {"read_uncommitted": 0, "read_committed": 1}
    if raw not in levels:
        raise OptionError(
            f"kafka.isolation.level: expected read_uncommitted or read_committed, got {raw!r}"
        )
    return levels[raw]


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts:
        return None
    raw = opts[key].strip()
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"{_spell(key)}: expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"{_spell(key)}: expected a positive integer, got {value}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in opts:
        return default
    raw = opts[key].strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"{_spell(key)}: expected true or false, got {opts[key]!r}")
    return raw == "true"


def _timestamp(raw: str, name: str) -> int:
    try:
        ts = int(raw.strip())
    except ValueError:
        raise OptionError(f"{name}: expected a timestamp in milliseconds, got {raw!r}") from None
    if ts < 0:
        raise OptionError(f"{name}: a timestamp must be >= 0, got {ts}")
    return ts


def _json_object(raw: str, name: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"{name}: malformed JSON ({e.msg} at character {e.pos}): {raw!r}") from None
    if not isinstance(value, dict):
        raise OptionError(f"{name}: expected a JSON object, got {raw!r}")
    return value


def _assign(raw: str) -> dict[str, tuple[int, ...]]:
    """``{"topicA": [0, 1], "topicB": [2, 4]}``."""
    value = _json_object(raw, "assign")
    out: dict[str, tuple[int, ...]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise OptionError(
                f"assign: partitions of topic {topic!r} must be a list of partition numbers, "
                f"got {json.dumps(parts)}"
            )
        out[topic] = tuple(sorted(set(parts)))
    if not out:
        raise OptionError("assign: no topic partitions given")
    return out


def _partition_map(raw: str, name: str, *, timestamps: bool) -> dict[str, dict[int, int]]:
    value = _json_object(raw, name)
    out: dict[str, dict[int, int]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise OptionError(
                f"{name}: expected {{\"{topic}\": {{\"partition\": offset}}}}, got {json.dumps(parts)}"
            )
        per: dict[int, int] = {}
        for p, o in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise OptionError(
                    f"{name}: partition {p!r} of topic {topic!r} is not a number"
                ) from None
            if not isinstance(o, int) or isinstance(o, bool):
                raise OptionError(
                    f"{name}: the value for {topic}-{partition} must be an integer, got {json.dumps(o)}"
                )
            lowest = 0 if timestamps else EARLIEST
            if o < lowest:
                raise OptionError(
                    f"{name}: {o} for {topic}-{partition} is invalid "
                    + ("(a timestamp is >= 0)" if timestamps else "(-2 earliest, -1 latest, or >= 0)")
                )
            per[partition] = o
        out[topic] = per
    return out


def _offset_spec(opts: Mapping[str, str], side: str, *, default: str) -> OffsetSpec:
    """Spark's precedence: <side>Timestamp, then <side>OffsetsByTimestamp, then <side>Offsets."""
    ts_key, by_ts_key, off_key = f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if ts_key in opts:
        return OffsetSpec("timestamp", timestamp=_timestamp(opts[ts_key], _spell(ts_key)))
    if by_ts_key in opts:
        return OffsetSpec(
            "timestamps", offsets=_partition_map(opts[by_ts_key], _spell(by_ts_key), timestamps=True)
        )
    raw = opts.get(off_key, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())  # type: ignore[arg-type]
    if not raw.startswith("{"):
        raise OptionError(
            f"{_spell(off_key)}: expected earliest, latest or a JSON object like "
            f'{{"topic": {{"0": 23}}}}, got {raw!r}'
        )
    return OffsetSpec("offsets", offsets=_partition_map(raw, _spell(off_key), timestamps=False))
