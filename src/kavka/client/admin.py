"""`AdminClient`: Kafka's admin operations over blocking connections.

Each method picks the highest version of its API both sides speak, builds the
request with `requests` (kio class of that version), sends it, and turns the
answer into frozen dataclasses. Any per-topic, per-partition or per-resource
error code raises `KafkaError` with Kafka's error name; the rest of a
multi-topic answer is lost then, as with Kafka's ``all().get()``.

Routing: cluster-wide requests (Metadata, CreateTopics, DeleteTopics,
CreatePartitions, topic configs) go to any bootstrap broker -- KRaft brokers
forward controller work; ListOffsets and DeleteRecords go to each
partition's leader; broker configs go to that broker. Connections are opened
on first use and kept until `close()`. One thread owns a client.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, u16

from kavka.authorizer import Acl, AclFilter
from kavka.client import requests
from kavka.client.connection import BlockingConnection, parse_host_port
from kavka.client.errors import (
    LEADER_MAY_HAVE_MOVED,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    raise_for_error,
)
from kavka.client.security import PLAINTEXT, ClientSecurity
from kavka.common import AclOperation, AclPermissionType, PatternType, ResourceType
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import ZERO_UUID, uuid_from_str, uuid_to_str

DEFAULT_TIMEOUT_MS = 30_000

# DescribeConfigs v1+ config_source (Kafka's DescribeConfigsResponse.ConfigSource).
CONFIG_SOURCES: Mapping[int, str] = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
# DescribeConfigs v3+ config_type (KIP-569).
CONFIG_TYPES: Mapping[int, str] = {
    0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT",
    5: "LONG", 6: "DOUBLE", 7: "LIST", 8: "CLASS", 9: "PASSWORD",
}  # fmt: skip


# ---------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    path: str
    error_code: int  # 56 KAFKA_STORAGE_ERROR for an offline dir
    total_bytes: int
    usable_bytes: int
    replicas: tuple[ReplicaLogDirInfo, ...]


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions (KIP-464)
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> broker ids


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: str | None
    num_partitions: int  # -1: the broker default, when a < v5 answer does not say
    replication_factor: int


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: str | None
    is_internal: bool
    partition_count: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: str | None = None  # e.g. LEADER_NOT_AVAILABLE; informational, not raised


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str | None
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive value
    source: str  # a CONFIG_SOURCES name
    is_read_only: bool
    is_sensitive: bool
    is_default: bool
    documentation: str | None = None
    config_type: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = ()


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class VoterState:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str | None = None  # KIP-853: the replica's metadata log dir (a dynamic quorum)


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[VoterState, ...]
    observers: tuple[VoterState, ...] = ()  # broker-only nodes following the metadata log
    # KIP-853: each voter's endpoints (listener name, host, port), by node id (a dynamic quorum)
    endpoints: Mapping[int, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)


# ---------------------------------------------------------------------- client


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers; Kafka's admin ProducerState).
    coordinator_epoch -1: no marker seen; current_txn_start_offset -1: no open transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int  # the broker that listed it


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions (Kafka's TransactionDescription); start_time_ms -1: none running."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[tuple[str, int], ...]


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` -> addresses; ValueError on a bad one."""
    addresses = [parse_host_port(a) for a in bootstrap.split(",") if a.strip()]
    if not addresses:
        raise ValueError("no bootstrap servers given")
    return addresses


class AdminClient:
    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kavka-cli",
        timeout_s: float = 30,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security  # TLS and SASL of every connection (kavka.client.security)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], BlockingConnection] = {}
        self._bootstrap_conn: BlockingConnection | None = None
        self._brokers: dict[int, BrokerInfo] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._bootstrap_conn = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ topics

    def list_topics(self, include_internal: bool = False) -> list[TopicListing]:
        resp = self._metadata(None)
        out = [
            TopicListing(
                t.name, _topic_id(t), bool(getattr(t, "is_internal", False)), len(t.partitions)
            )
            for t in resp.topics
            if t.error_code == 0 and (include_internal or not getattr(t, "is_internal", False))
        ]
        return sorted(out, key=lambda t: t.name)

    def describe_topics(
        self, names: Sequence[str] | None = None, *, include_internal: bool = True
    ) -> list[TopicDescription]:
        """Leaders, replicas and ISR of `names` (every topic when None), sorted by name.

        A topic that does not exist raises KafkaError UNKNOWN_TOPIC_OR_PARTITION.
        """
        resp = self._metadata(names)
        out = []
        for t in resp.topics:
            raise_for_error(t.error_code, resource=t.name)
            is_internal = bool(getattr(t, "is_internal", False))
            if names is None and is_internal and not include_internal:
                continue
            parts = tuple(
                sorted(
                    (
                        PartitionInfo(
                            partition=p.partition_index,
                            leader=p.leader_id,
                            leader_epoch=getattr(p, "leader_epoch", -1),
                            replicas=tuple(p.replica_nodes),
                            isr=tuple(p.isr_nodes),
                            offline_replicas=tuple(getattr(p, "offline_replicas", ())),
                            error=KafkaError(p.error_code).name if p.error_code else None,
                        )
                        for p in t.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            out.append(TopicDescription(t.name, _topic_id(t), is_internal, parts))
        if names is not None:
            order = {n: i for i, n in enumerate(names)}
            return sorted(out, key=lambda t: order.get(t.name, len(order)))
        return sorted(out, key=lambda t: t.name)

    def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        validate_only: bool = False,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> list[CreatedTopic]:
        new_topics = list(new_topics)
        conn = self._any()
        version = conn.pick_version(ApiKey.CREATE_TOPICS)
        req = requests.create_topics(
            version,
            [
                (t.name, t.num_partitions, t.replication_factor, t.configs, t.assignments)
                for t in new_topics
            ],
            validate_only=validate_only,
            timeout_ms=timeout_ms,
        )
        resp = conn.send(req)
        asked = {t.name: t for t in new_topics}
        out = []
        for t in resp.topics:
            raise_for_error(t.error_code, t.error_message, resource=t.name)
            # Before v5 the answer has no counts: report what was asked for.
            spec = asked.get(t.name, NewTopic(t.name))
            out.append(
                CreatedTopic(
                    name=t.name,
                    topic_id=_topic_id(t),
                    num_partitions=getattr(t, "num_partitions", spec.num_partitions),
                    replication_factor=getattr(t, "replication_factor", spec.replication_factor),
                )
            )
        return out

    def delete_topics(self, names: Sequence[str], timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        conn = self._any()
        version = conn.pick_version(ApiKey.DELETE_TOPICS)
        resp = conn.send(requests.delete_topics(version, list(names), timeout_ms=timeout_ms))
        for r in resp.responses:
            raise_for_error(r.error_code, getattr(r, "error_message", None), resource=r.name)

    def create_partitions(
        self,
        totals: Mapping[str, int],
        validate_only: bool = False,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Grow each topic to `totals[name]` partitions."""
        conn = self._any()
        version = conn.pick_version(ApiKey.CREATE_PARTITIONS)
        resp = conn.send(
            requests.create_partitions(
                version, totals, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )
        for r in resp.results:
            raise_for_error(r.error_code, r.error_message, resource=r.name)

    def create_replica_placement(
        self,
        num_partitions: int,
        replication_factor: int,
        *,
        force_simple: bool = False,
        node_ids: Sequence[int] = (),
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> list[list[int]]:
        """Where the cluster's replica placer would put a topic (kavka's CreateReplicaPlacement, KIP-879)."""
        import datetime

        from kavka.protocol.kavka_schema import CreateReplicaPlacementRequest

        conn = self._any()
        conn.pick_version(ApiKey.CREATE_REPLICA_PLACEMENT)  # KafkaProtocolError against a broker without it
        resp = conn.send(
            CreateReplicaPlacementRequest(
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                force_simple_placement=force_simple,
                node_ids=tuple(node_ids),
                timeout=datetime.timedelta(milliseconds=timeout_ms),
            )
        )
        raise_for_error(resp.error_code, resp.error_message)
        return [list(p.replicas) for p in resp.partitions]

    # ------------------------------------------------------------------ configs

    def describe_configs(
        self,
        resource_type: str,
        name: str,
        include_synonyms: bool = False,
        *,
        include_documentation: bool = True,
        keys: Sequence[str] | None = None,
    ) -> list[ConfigEntry]:
        """Every config of a topic or broker (or only `keys`), sorted by name."""
        rtype = requests.resource_type_code(resource_type)
        conn = self._for_resource(rtype, name)
        version = conn.pick_version(ApiKey.DESCRIBE_CONFIGS)
        resp = conn.send(
            requests.describe_configs(
                version,
                [(rtype, name)],
                keys=keys,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
        entries: list[ConfigEntry] = []
        for r in resp.results:
            raise_for_error(r.error_code, r.error_message, resource=r.resource_name)
            entries.extend(_config_entry(c) for c in r.configs)
        return sorted(entries, key=lambda e: e.name)

    def incremental_alter_configs(
        self,
        resource_type: str,
        name: str,
        set: Mapping[str, str] | None = None,  # noqa: A002 - kafka-configs.sh's vocabulary
        delete: Sequence[str] = (),
        *,
        append: Mapping[str, str] | None = None,
        subtract: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        rtype = requests.resource_type_code(resource_type)
        ops: list[tuple[str, int, str | None]] = [
            (k, requests.OP_SET, v) for k, v in (set or {}).items()
        ]
        ops += [(k, requests.OP_DELETE, None) for k in delete]
        ops += [(k, requests.OP_APPEND, v) for k, v in (append or {}).items()]
        ops += [(k, requests.OP_SUBTRACT, v) for k, v in (subtract or {}).items()]
        conn = self._for_resource(rtype, name)
        version = conn.pick_version(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        resp = conn.send(
            requests.incremental_alter_configs(
                version, rtype, name, ops, validate_only=validate_only
            )
        )
        for r in resp.responses:
            raise_for_error(r.error_code, r.error_message, resource=r.resource_name)

    # ------------------------------------------------------------------ offsets

    def list_offsets(
        self, specs: Mapping[tuple[str, int], str | int], *, isolation_level: int = 0
    ) -> dict[tuple[str, int], ListOffsetsResult]:
        """Offsets per partition; spec: earliest, latest, max-timestamp, earliest-local, latest-tiered or a
        timestamp (ms)."""
        wanted = {tp: requests.offset_spec_timestamp(s) for tp, s in specs.items()}

        def send(conn: BlockingConnection, part: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, Any]]:
            version = conn.pick_version(ApiKey.LIST_OFFSETS)
            for ts in part.values():
                need = requests.OFFSET_SPEC_MIN_VERSION.get(ts, 0)
                if version < need:
                    raise KafkaProtocolError(
                        f"ListOffsets v{need}+ is needed for this offset spec; the broker speaks v{version}"
                    )
            resp = conn.send(requests.list_offsets(version, part, isolation_level=isolation_level))
            return {
                (t.name, p.partition_index): (
                    p.error_code,
                    ListOffsetsResult(offset=p.offset, timestamp=p.timestamp, leader_epoch=getattr(p, "leader_epoch", -1)),
                )
                for t in resp.topics
                for p in t.partitions
            }

        return self._to_leaders(wanted, send)

    def delete_records(
        self, offsets: Mapping[tuple[str, int], int], timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[tuple[str, int], int]:
        """Delete records below each offset; returns each partition's new low watermark."""

        def send(conn: BlockingConnection, part: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, Any]]:
            version = conn.pick_version(ApiKey.DELETE_RECORDS)
            resp = conn.send(requests.delete_records(version, part, timeout_ms=timeout_ms))
            return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions}

        return self._to_leaders(dict(offsets), send)

    def _to_leaders(
        self,
        wanted: dict[tuple[str, int], int],
        send: Callable[[BlockingConnection, dict[tuple[str, int], int]], dict[tuple[str, int], tuple[int, Any]]],
    ) -> dict[tuple[str, int], Any]:
        """Send each partition's entry to its leader; as Kafka's admin client, a partition whose
        leader moved or died (a leader error, a closed connection) or whose new leader cannot tell
        its offsets yet (OFFSET_NOT_AVAILABLE) is retried against fresh metadata until the
        client's timeout. Other errors raise at once."""
        deadline = time.monotonic() + self.timeout_s
        out: dict[tuple[str, int], Any] = {}
        pending = wanted
        for attempt in itertools.count():
            retry: dict[tuple[str, int], int] = {}
            last: Exception | None = None
            try:
                groups = self._by_leader(pending)
            except KafkaConnectionError as e:
                groups, retry, last = {}, dict(pending), e
            except KafkaError as e:
                if e.code != ErrorCode.leader_not_available:
                    raise
                groups, retry, last = {}, dict(pending), e
            for conn, part in groups.items():
                try:
                    answers = send(conn, part)
                except KafkaConnectionError as e:
                    retry.update(part)
                    last = e
                    continue
                for tp, (code, result) in answers.items():
                    # OFFSET_NOT_AVAILABLE: ListOffsets to a new leader whose high watermark has
                    # not caught up with its epoch's start yet; Kafka's admin client retries it.
                    if code in LEADER_MAY_HAVE_MOVED or code == ErrorCode.offset_not_available:
                        retry[tp] = part[tp]
                        last = KafkaError(code, resource=f"{tp[0]}-{tp[1]}")
                        continue
                    raise_for_error(code, resource=f"{tp[0]}-{tp[1]}")
                    out[tp] = result
            if not retry:
                return out
            if time.monotonic() > deadline:
                assert last is not None
                raise last
            time.sleep(min(0.05 * 2**attempt, 1.0))
            pending = retry
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ groups

    def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Groups on every broker (each coordinates its own share), as kafka-consumer-groups.sh --list."""
        self._metadata([])
        out: dict[str, GroupListing] = {}
        for b in self._brokers.values():
            conn = self._connect(b.host, b.port)
            resp = conn.send(requests.list_groups(conn.pick_version(ApiKey.LIST_GROUPS), states))
            raise_for_error(resp.error_code)
            for g in resp.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type, getattr(g, "group_state", ""))
        return sorted(out.values(), key=lambda g: g.group_id)

    def describe_group(self, group: str) -> GroupDescription:
        conn = self._coordinator(group)
        resp = conn.send(requests.describe_groups(conn.pick_version(ApiKey.DESCRIBE_GROUPS), [group]))
        d = resp.groups[0]
        raise_for_error(d.error_code, resource=group)
        members = tuple(
            GroupMember(m.member_id, m.group_instance_id if hasattr(m, "group_instance_id") else None,
                        m.client_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment))
            for m in d.members
        )
        return GroupDescription(d.group_id, d.group_state, d.protocol_type, d.protocol_data, members)

    def list_group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Committed offsets of every partition the group has committed."""
        conn = self._coordinator(group)
        version = conn.pick_version(ApiKey.OFFSET_FETCH)
        resp = conn.send(requests.offset_fetch(version, group, None if version >= 2 else []))
        if version >= 8:
            g = resp.groups[0]
            raise_for_error(g.error_code, resource=group)
            topics = g.topics
        else:
            raise_for_error(getattr(resp, "error_code", 0), resource=group)
            topics = resp.topics
        out: dict[tuple[str, int], int] = {}
        for t in topics:
            for p in t.partitions:
                raise_for_error(p.error_code, resource=f"{t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return dict(sorted(out.items()))

    def alter_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit `offsets` for an inactive group (generation -1, no member: Kafka's admin commit)."""
        conn = self._coordinator(group)
        resp = conn.send(requests.offset_commit(conn.pick_version(ApiKey.OFFSET_COMMIT), group, dict(offsets)))
        for t in resp.topics:
            for p in t.partitions:
                raise_for_error(p.error_code, resource=f"{group} {t.name}-{p.partition_index}")

    def delete_groups(self, groups: Sequence[str]) -> dict[str, int]:
        """Error code per group (0: deleted)."""
        out: dict[str, int] = {}
        for group in groups:
            conn = self._coordinator(group)
            resp = conn.send(requests.delete_groups(conn.pick_version(ApiKey.DELETE_GROUPS), [group]))
            for r in resp.results:
                out[r.group_id] = int(r.error_code)
        return out

    def _coordinator(self, group: str) -> BlockingConnection:
        conn = self._any()
        version = conn.pick_version(ApiKey.FIND_COORDINATOR)
        resp = conn.send(requests.find_coordinator(version, group))
        c = resp.coordinators[0] if version >= 4 else resp
        raise_for_error(c.error_code, getattr(c, "error_message", None), resource=group)
        return self._connect(c.host, c.port)

    # ------------------------------------------------------------------ transactions (KIP-664)

    def describe_producers(
        self, partitions: Sequence[tuple[str, int]], *, broker_id: int | None = None
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """Active producers of each partition, from its leader (or from the replica on `broker_id`:
        a follower answers from the batches it replicated, as in Kafka)."""

        def send(conn: BlockingConnection, part: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, Any]]:
            resp = conn.send(requests.describe_producers(conn.pick_version(ApiKey.DESCRIBE_PRODUCERS), part))
            return {
                (t.name, p.partition_index): (p.error_code, [
                    ProducerState(int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                                  int(s.last_timestamp), int(s.coordinator_epoch), int(s.current_txn_start_offset))
                    for s in p.active_producers])
                for t in resp.topics
                for p in t.partitions
            }

        wanted = {tp: 0 for tp in partitions}
        if broker_id is None:
            return self._to_leaders(wanted, send)
        out = {}
        for tp, (code, states) in send(self._node(broker_id), wanted).items():
            raise_for_error(code, resource=f"{tp[0]}-{tp[1]}")
            out[tp] = states
        return out

    def list_transactions(
        self, *, states: Sequence[str] = (), producer_ids: Sequence[int] = (), duration_ms: int = -1
    ) -> list[TransactionListing]:
        """Transactions on every broker (each coordinates its own share of ids), merged, as Kafka's
        Admin.listTransactions; `duration_ms` >= 0 needs ListTransactions v1."""
        self._metadata([])
        out: list[TransactionListing] = []
        for node_id, b in sorted(self._brokers.items()):
            conn = self._connect(b.host, b.port)
            version = conn.pick_version(ApiKey.LIST_TRANSACTIONS)
            if duration_ms >= 0 and version < 1:
                raise KafkaProtocolError(f"broker {node_id} cannot filter transactions by duration (ListTransactions v0)")
            resp = conn.send(requests.list_transactions(version, states=states, producer_ids=producer_ids,
                                                        duration_ms=duration_ms))
            raise_for_error(resp.error_code, resource=f"broker {node_id}")
            out += [TransactionListing(t.transactional_id, int(t.producer_id), t.transaction_state, node_id)
                    for t in resp.transaction_states]
        return sorted(out, key=lambda t: t.transactional_id)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The coordinator's view of one transactional id (FindCoordinator key_type 1, then
        DescribeTransactions); TRANSACTIONAL_ID_NOT_FOUND raises."""
        conn, coordinator = self._find_coordinator(transactional_id, requests.TRANSACTION_KEY_TYPE)
        resp = conn.send(requests.describe_transactions(conn.pick_version(ApiKey.DESCRIBE_TRANSACTIONS),
                                                        [transactional_id]))
        d = resp.transaction_states[0]
        raise_for_error(d.error_code, resource=transactional_id)
        start_ms = int(d.transaction_start_time)  # an int64 (protocol.widened_schema)
        return TransactionDescription(
            transactional_id, coordinator, d.transaction_state, int(d.producer_id), int(d.producer_epoch),
            int(d.transaction_timeout.total_seconds() * 1000), start_ms if start_ms >= 0 else -1,
            tuple((t.topic, int(p)) for t in d.topics for p in t.partitions))

    def abort_transaction(
        self, topic: str, partition: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an ABORT marker for `producer_id` on one partition, through its leader (Kafka's
        Admin.abortTransaction: WriteTxnMarkers, which needs ClusterAction on the Cluster)."""

        def send(conn: BlockingConnection, part: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, Any]]:
            resp = conn.send(requests.write_txn_markers(
                conn.pick_version(ApiKey.WRITE_TXN_MARKERS), producer_id=producer_id, producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch, commit=False, partitions=part))
            return {(t.name, p.partition_index): (p.error_code, None)
                    for m in resp.markers for t in m.topics for p in t.partitions}

        self._to_leaders({(topic, partition): 0}, send)

    def _find_coordinator(self, key: str, key_type: int) -> tuple[BlockingConnection, int]:
        conn = self._any()
        version = conn.pick_version(ApiKey.FIND_COORDINATOR)
        if key_type != requests.GROUP_KEY_TYPE and version < 1:
            raise KafkaProtocolError("FindCoordinator v1+ is needed for a transactional id")
        resp = conn.send(requests.find_coordinator(version, key, key_type))
        c = resp.coordinators[0] if version >= 4 else resp
        raise_for_error(c.error_code, getattr(c, "error_message", None), resource=key)
        return self._connect(c.host, c.port), int(c.node_id)

    # ------------------------------------------------------------------ cluster

    def describe_quorum(self) -> QuorumDescription:
        """DescribeQuorum v2 (what `kafka-metadata-quorum.sh describe` shows); any node relays it."""
        from kio.schema.describe_quorum.v2 import request as dq

        conn = self._any()
        resp = conn.send(
            dq.DescribeQuorumRequest(
                topics=(dq.TopicData(topic_name="__cluster_metadata", partitions=(dq.PartitionData(partition_index=0),)),)
            )
        )
        raise_for_error(resp.error_code, resp.error_message)
        [topic] = resp.topics
        [part] = topic.partitions
        raise_for_error(part.error_code, part.error_message)
        def states(replicas: Any) -> tuple[VoterState, ...]:
            return tuple(
                VoterState(
                    v.replica_id,
                    v.log_end_offset,
                    v.last_fetch_timestamp,
                    v.last_caught_up_timestamp,
                    uuid_to_str(v.replica_directory_id) if v.replica_directory_id and v.replica_directory_id.int else None,
                )
                for v in replicas
            )

        endpoints = {int(n.node_id): tuple((x.name, x.host, int(x.port)) for x in n.listeners) for n in resp.nodes}
        return QuorumDescription(
            part.leader_id,
            part.leader_epoch,
            part.high_watermark,
            states(part.current_voters),
            states(part.observers),
            endpoints,
        )

    def add_raft_voter(
        self, node_id: int, directory_id: str, endpoints: Sequence[tuple[str, str, int]], *, timeout_ms: int = 30_000
    ) -> None:
        """AddRaftVoter v0 (KIP-853, kafka-metadata-quorum add-controller); any node relays it to the
        active controller, which answers once the new voter set commits."""
        from kio.schema.add_raft_voter.v0 import request as arv

        resp = self._any().send(
            arv.AddRaftVoterRequest(
                cluster_id=None,
                timeout=datetime.timedelta(milliseconds=timeout_ms),
                voter_id=i32(node_id),
                voter_directory_id=uuid_from_str(directory_id),
                listeners=tuple(arv.Listener(name=n, host=h, port=u16(p)) for n, h, p in endpoints),
            )
        )
        raise_for_error(resp.error_code, resp.error_message)

    def remove_raft_voter(self, node_id: int, directory_id: str) -> None:
        """RemoveRaftVoter v0 (KIP-853, kafka-metadata-quorum remove-controller)."""
        from kio.schema.remove_raft_voter.v0 import request as rrv

        resp = self._any().send(
            rrv.RemoveRaftVoterRequest(
                cluster_id=None, voter_id=i32(node_id), voter_directory_id=uuid_from_str(directory_id)
            )
        )
        raise_for_error(resp.error_code, resp.error_message)

    def describe_cluster(self, *, controllers: bool = False) -> ClusterDescription:
        """The brokers and the controller id; with `controllers` (bootstrap addresses on the
        controllers' listener, KIP-919) the controllers and the active one."""
        resp = self.send_any(
            lambda conn: requests.describe_cluster(conn.pick_version(ApiKey.DESCRIBE_CLUSTER), controllers=controllers)
            if int(ApiKey.DESCRIBE_CLUSTER) in conn.broker_versions
            else None
        )
        if resp is None and controllers:
            raise KafkaConnectionError("the bootstrap controller does not answer DescribeCluster (KIP-919)")
        if resp is not None:
            raise_for_error(resp.error_code, resp.error_message)
            brokers = tuple(
                BrokerInfo(b.broker_id, b.host, b.port, b.rack, bool(getattr(b, "is_fenced", False))) for b in resp.brokers
            )
            return ClusterDescription(resp.cluster_id, resp.controller_id, _sorted_brokers(brokers))
        md = self._metadata([])  # brokers only
        brokers = tuple(
            BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in md.brokers
        )
        return ClusterDescription(
            getattr(md, "cluster_id", None),
            getattr(md, "controller_id", -1),
            _sorted_brokers(brokers),
        )

    # ------------------------------------------------------------------ SCRAM users (KIP-554)

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None) -> dict[str, list[tuple[str, int]]]:
        """Each user's SCRAM credentials as [(mechanism name, iterations)]: every user with one
        (users None), or the named ones (KafkaError RESOURCE_NOT_FOUND for a user without)."""
        from kio.schema.describe_user_scram_credentials.v0 import request as duc_req

        from kavka.scram import BY_TYPE

        req = duc_req.DescribeUserScramCredentialsRequest(
            users=None if users is None else tuple(duc_req.UserName(name=u) for u in users)
        )
        resp = self.send_any(lambda conn: req)
        raise_for_error(resp.error_code, resp.error_message)
        out: dict[str, list[tuple[str, int]]] = {}
        for r in resp.results:
            raise_for_error(r.error_code, r.error_message, resource=r.user)
            out[r.user] = [(BY_TYPE[c.mechanism].name if c.mechanism in BY_TYPE else str(c.mechanism), c.iterations)
                           for c in r.credential_infos]
        return out

    def alter_user_scram_credentials(
        self,
        upsertions: Sequence[tuple[str, str, int, bytes, bytes]] = (),
        deletions: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Upsert (user, mechanism name, iterations, salt, salted password) and delete (user,
        mechanism name) credentials; KafkaError for the first user refused."""
        from kio.schema.alter_user_scram_credentials.v0 import request as auc_req

        from kavka.scram import MECHANISMS

        def mech(name: str) -> int:
            return MECHANISMS[name].type if name in MECHANISMS else 0  # 0: Kafka's UNKNOWN

        req = auc_req.AlterUserScramCredentialsRequest(
            deletions=tuple(auc_req.ScramCredentialDeletion(name=u, mechanism=mech(m)) for u, m in deletions),
            upsertions=tuple(
                auc_req.ScramCredentialUpsertion(name=u, mechanism=mech(m), iterations=i, salt=salt, salted_password=sp)
                for u, m, i, salt, sp in upsertions
            ),
        )
        resp = self.send_any(lambda conn: req)
        for r in resp.results:
            raise_for_error(r.error_code, r.error_message, resource=r.user)

    def create_acls(self, acls: Sequence[Acl]) -> list[tuple[int, str | None]]:
        """CreateAcls (API 30): (error code, message) per binding, in order."""
        from kio.schema.create_acls.v3 import request as ca_req

        req = ca_req.CreateAclsRequest(creations=tuple(
            ca_req.AclCreation(
                resource_type=a.resource_type, resource_name=a.resource_name, resource_pattern_type=a.pattern_type,
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type,
            )
            for a in acls
        ))
        resp = self.send_any(lambda conn: req)
        return [(r.error_code, r.error_message) for r in resp.results]

    def describe_acls(self, acl_filter: AclFilter) -> list[Acl]:
        """DescribeAcls (API 29): the ACLs the filter matches; KafkaError on a refusal."""
        from kio.schema.describe_acls.v3 import request as da_req

        f = acl_filter
        req = da_req.DescribeAclsRequest(
            resource_type_filter=f.resource_type, resource_name_filter=f.resource_name, pattern_type_filter=f.pattern_type,
            principal_filter=f.principal, host_filter=f.host, operation=f.operation, permission_type=f.permission_type,
        )
        resp = self.send_any(lambda conn: req)
        raise_for_error(resp.error_code, resp.error_message)
        return [
            _acl(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in resp.resources
            for a in r.acls
        ]

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[Acl]]:
        """DeleteAcls (API 31): the ACLs each filter deleted; KafkaError for the first refused."""
        from kio.schema.delete_acls.v3 import request as dl_req

        req = dl_req.DeleteAclsRequest(filters=tuple(
            dl_req.DeleteAclsFilter(
                resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                operation=f.operation, permission_type=f.permission_type,
            )
            for f in filters
        ))
        resp = self.send_any(lambda conn: req)
        out = []
        for r in resp.filter_results:
            raise_for_error(r.error_code, r.error_message)
            out.append([
                _acl(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)
                for m in r.matching_acls
            ])
        return out

    # ------------------------------------------------------------------ client quotas (KIP-546)

    def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], *, strict: bool = True
    ) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """DescribeClientQuotas: (entity, {key: value}) for each entity matching the filter
        components (entity type, match type 0 exact / 1 default / 2 specified, match)."""
        from kio.schema.describe_client_quotas.v1 import request as dcq_req

        req = dcq_req.DescribeClientQuotasRequest(
            components=tuple(dcq_req.ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components),
            strict=strict,
        )
        resp = self.send_any(lambda conn: req)
        raise_for_error(resp.error_code, resp.error_message)
        return [
            (tuple((e.entity_type, e.entity_name) for e in entry.entity), {v.key: v.value for v in entry.values})
            for entry in resp.entries or ()
        ]

    def alter_client_quotas(
        self,
        entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float | None]]]],
        *,
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas: for each (entity, ops), set each (key, value) or remove (key, None);
        KafkaError for the first entity refused."""
        from kio.schema.alter_client_quotas.v1 import request as acq_req

        req = acq_req.AlterClientQuotasRequest(
            entries=tuple(
                acq_req.EntryData(
                    entity=tuple(acq_req.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                    ops=tuple(acq_req.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops),
                )
                for entity, ops in entries
            ),
            validate_only=validate_only,
        )
        resp = self.send_any(lambda conn: req)
        for r in resp.entries:
            name = ",".join(f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}" for e in r.entity)
            raise_for_error(r.error_code, r.error_message, resource=name)

    def elect_leaders(
        self,
        election_type: int,
        partitions: Sequence[tuple[str, int]] | None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """ElectLeaders (0 preferred, 1 unclean) through any broker (it forwards to the controller):
        (error code, message) per partition; `partitions` None elects wherever needed (partitions
        that needed no election are then left out). A top-level error raises KafkaError."""
        conn = self._any()
        version = conn.pick_version(ApiKey.ELECT_LEADERS)
        if version == 0 and election_type != 0:
            raise KafkaProtocolError("this broker's ElectLeaders v0 knows only preferred elections")
        resp = conn.send(requests.elect_leaders(version, election_type, partitions, timeout_ms=timeout_ms))
        out = {
            (t.topic, p.partition_id): (int(p.error_code), p.error_message)
            for t in resp.replica_election_results
            for p in t.partition_result
        }
        top = int(getattr(resp, "error_code", 0))
        if top and not out:
            raise_for_error(top)
        return out

    # ------------------------------------------------------------------ reassignments (KIP-455)

    def alter_partition_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None], timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """AlterPartitionReassignments through any broker (it forwards to the controller): per
        partition a target replica list, or None to cancel; (error code, message) per partition.
        A top-level error raises KafkaError."""
        import datetime

        from kio.schema.alter_partition_reassignments.v0 import request as req

        conn = self._any()
        conn.pick_version(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), target in targets.items():
            by_topic.setdefault(topic, []).append(
                req.ReassignablePartition(partition_index=partition, replicas=None if target is None else tuple(target))
            )
        resp = conn.send(
            req.AlterPartitionReassignmentsRequest(
                timeout=datetime.timedelta(milliseconds=timeout_ms),
                topics=tuple(req.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            )
        )
        raise_for_error(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): (int(p.error_code), p.error_message)
            for t in resp.responses
            for p in t.partitions
        }

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each partition that is moving,
        of the given partitions or (None) of every topic."""
        import datetime

        from kio.schema.list_partition_reassignments.v0 import request as req

        conn = self._any()
        conn.pick_version(ApiKey.LIST_PARTITION_REASSIGNMENTS)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = tuple(
                req.ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()
            )
        resp = conn.send(
            req.ListPartitionReassignmentsRequest(timeout=datetime.timedelta(milliseconds=timeout_ms), topics=topics)
        )
        raise_for_error(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for t in resp.topics
            for p in t.partitions
        }

    # ------------------------------------------------------------------ log dirs (KIP-113)

    def describe_log_dirs(
        self,
        broker_ids: Sequence[int] | None = None,
        topics: Sequence[str] | None = None,
        partitions: Mapping[str, Sequence[int]] | None = None,
    ) -> dict[int, list[LogDirInfo]]:
        """Every log dir of each broker (all brokers by default), like kafka-log-dirs.sh; only
        the replicas of `topics` (all their partitions) or of `partitions` (topic -> partitions)
        if given."""
        if broker_ids is None:
            self._metadata([])
            broker_ids = sorted(self._brokers)
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {t: list(ps) for t, ps in partitions.items()}
        elif topics is not None:
            wanted = {}
            for d in self.describe_topics(list(topics)):
                wanted[d.name] = [p.partition for p in d.partitions]
        out: dict[int, list[LogDirInfo]] = {}
        for broker_id in broker_ids:
            conn = self._node(broker_id)
            resp = conn.send(requests.describe_log_dirs(conn.pick_version(ApiKey.DESCRIBE_LOG_DIRS), wanted))
            raise_for_error(getattr(resp, "error_code", 0))
            out[broker_id] = [
                LogDirInfo(
                    path=r.log_dir,
                    error_code=int(r.error_code),
                    total_bytes=getattr(r, "total_bytes", -1),
                    usable_bytes=getattr(r, "usable_bytes", -1),
                    replicas=tuple(
                        ReplicaLogDirInfo(t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                        for t in r.topics
                        for p in t.partitions
                    ),
                )
                for r in resp.results
            ]
        return out

    def alter_replica_log_dirs(
        self, moves: Mapping[tuple[int, str, int], str]
    ) -> dict[tuple[int, str, int], int]:
        """Move replicas (broker, topic, partition) -> absolute log dir; returns each error code."""
        by_broker: dict[int, dict[tuple[str, int], str]] = {}
        for (broker_id, topic, partition), path in moves.items():
            by_broker.setdefault(broker_id, {})[(topic, partition)] = path
        out: dict[tuple[int, str, int], int] = {}
        for broker_id, part in by_broker.items():
            conn = self._node(broker_id)
            version = conn.pick_version(ApiKey.ALTER_REPLICA_LOG_DIRS)
            resp = conn.send(requests.alter_replica_log_dirs(version, part))
            for t in resp.results:
                for p in t.partitions:
                    out[(broker_id, t.topic_name, p.partition_index)] = int(p.error_code)
        return out

    # ------------------------------------------------------------------ routing

    def _any(self) -> BlockingConnection:
        """A live connection to some bootstrap broker, trying each in order."""
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return self._bootstrap_conn
        failures = []
        for host, port in self.bootstrap:
            try:
                self._bootstrap_conn = self._connect(host, port)
                return self._bootstrap_conn
            except KafkaConnectionError as e:
                failures.append(str(e))
        raise KafkaConnectionError("; ".join(failures))

    def _connect(self, host: str, port: int) -> BlockingConnection:
        conn = self._conns.get((host, port))
        if conn is None or conn.closed:
            conn = BlockingConnection(
                host, port, client_id=self.client_id, timeout_s=self.timeout_s, security=self.security
            )
            self._conns[(host, port)] = conn
        return conn

    def node_connection(self, node_id: int) -> BlockingConnection:
        """The (cached) connection to broker `node_id`, for requests routed to a leader."""
        return self._node(node_id)

    def _node(self, node_id: int) -> BlockingConnection:
        if node_id not in self._brokers:
            self._metadata([])
        b = self._brokers.get(node_id)
        if b is None:
            raise KafkaError(
                8, message=f"broker {node_id} is not in the cluster metadata"
            )  # BROKER_NOT_AVAILABLE
        return self._connect(b.host, b.port)

    def _for_resource(self, rtype: int, name: str) -> BlockingConnection:
        # A broker's own configs are served by that broker; "" is the cluster default.
        if rtype == requests.RESOURCE_TYPES["broker"] and name:
            try:
                return self._node(int(name))
            except ValueError:
                raise ValueError(f"a broker is named by its node id, not {name!r}") from None
        return self._any()

    def _by_leader(
        self, wanted: Mapping[tuple[str, int], int]
    ) -> dict[BlockingConnection, dict[tuple[str, int], int]]:
        topics = sorted({t for t, _ in wanted})
        leaders: dict[tuple[str, int], int] = {}
        for desc in self.describe_topics(topics):
            for p in desc.partitions:
                leaders[(desc.name, p.partition)] = p.leader
        groups: dict[BlockingConnection, dict[tuple[str, int], int]] = {}
        for tp, value in wanted.items():
            if tp not in leaders:
                raise KafkaError(3, resource=f"{tp[0]}-{tp[1]}")  # UNKNOWN_TOPIC_OR_PARTITION
            if leaders[tp] < 0:
                raise KafkaError(5, resource=f"{tp[0]}-{tp[1]}")  # LEADER_NOT_AVAILABLE
            groups.setdefault(self._node(leaders[tp]), {})[tp] = value
        return groups

    def send_any(self, build: Callable[[BlockingConnection], Any]) -> Any:
        """Send the request `build(conn)` makes for some bootstrap broker's connection (None: send
        nothing, return None). The broker may have died since its connection was opened: the
        failed send closes it, and the next try goes to the next bootstrap server that answers."""
        for attempt in range(len(self.bootstrap) + 1):
            conn = self._any()
            request = build(conn)
            if request is None:
                return None
            try:
                return conn.send(request)
            except KafkaConnectionError:
                if attempt == len(self.bootstrap):
                    raise
        raise AssertionError("unreachable")

    def _metadata(self, names: Sequence[str] | None) -> Any:
        def build(conn: BlockingConnection) -> Any:
            version = conn.pick_version(ApiKey.METADATA)
            if names is not None and not names and version == 0:
                raise KafkaProtocolError("Metadata v0 cannot ask for brokers only")
            return requests.metadata(version, names)

        resp = self.send_any(build)
        self._brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
            for b in resp.brokers
        }
        return resp


def _topic_id(entity: Any) -> str | None:
    tid = getattr(entity, "topic_id", None)
    return None if tid is None or tid == ZERO_UUID else uuid_to_str(tid)


def _sorted_brokers(brokers: tuple[BrokerInfo, ...]) -> tuple[BrokerInfo, ...]:
    return tuple(sorted(brokers, key=lambda b: b.node_id))


def _config_entry(c: Any) -> ConfigEntry:
    if hasattr(c, "config_source"):
        source = CONFIG_SOURCES.get(c.config_source, "UNKNOWN")
        is_default = source == "DEFAULT_CONFIG"
    else:  # v0: only a default flag
        is_default = bool(c.is_default)
        source = "DEFAULT_CONFIG" if is_default else "UNKNOWN"
    ctype = getattr(c, "config_type", None)
    return ConfigEntry(
        name=c.name,
        value=c.value,
        source=source,
        is_read_only=bool(c.read_only),
        is_sensitive=bool(c.is_sensitive),
        is_default=is_default,
        documentation=getattr(c, "documentation", None),
        config_type=CONFIG_TYPES.get(ctype, "UNKNOWN") if ctype is not None else None,
        synonyms=tuple(
            ConfigSynonym(s.name, s.value, CONFIG_SOURCES.get(s.source, "UNKNOWN"))
            for s in getattr(c, "synonyms", ())
        ),
    )


def _acl(rt: int, name: str, pt: int, principal: str, host: str, op: int, perm: int) -> Acl:
    """An Acl from a response's codes; a code this client does not know is UNKNOWN."""

    def enum(cls: Any, code: int) -> Any:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    return Acl(enum(ResourceType, rt), name, enum(PatternType, pt), principal, host, enum(AclOperation, op),
               enum(AclPermissionType, perm))
