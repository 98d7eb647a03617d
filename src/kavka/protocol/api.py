"""The API registry: which Kafka APIs and versions kavka speaks, as data.

`SUPPORTED` maps api key -> (min_version, max_version). The ranges are the
versions kavka implements correctly, clipped to what kio carries schemas for.
ApiVersions advertises exactly this table, and the server refuses anything
outside it (Kafka closes the connection for a request it cannot parse).
Schemas and "is this version flexible" come from kio (generated from Kafka's
own message JSON), looked up once and cached; versions older than kio carries
(Kafka 4 dropped them, KIP-896) come from protocol.legacy_schema, generated
from Kafka 3.9's JSON by scripts/gen_legacy_schemas.py.
"""

from __future__ import annotations

import importlib
from enum import IntEnum
from functools import cache
from importlib.resources import files

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import schema_name_map

from kavka.protocol import kavka_schema
from kavka.protocol.legacy import LEGACY_PRODUCE_VERSIONS
from kavka.protocol.widened_schema import WIDENED


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    UPDATE_FEATURES = 57
    DESCRIBE_TOPIC_PARTITIONS = 75
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    CREATE_REPLICA_PLACEMENT = kavka_schema.CREATE_REPLICA_PLACEMENT  # kavka's own (KIP-879): protocol.kavka_schema


# Upper bounds: Produce v12+ and Fetch v18 change semantics kavka does not
# implement yet (Produce v13 addresses topics by id only, KIP-516 follow-up;
# Metadata v13 adds a top-level error); ApiVersions v4 is the newest kio has.
# Group APIs: OffsetCommit v9 / OffsetFetch v9 carry KIP-848 member epochs
# (ConsumerGroupHeartbeat groups); ListGroups stops before v5 (type filter).
_WANTED: dict[ApiKey, tuple[int, int]] = {
    # v0-v2: see protocol.legacy; v12 (Kafka 4.0) is v11 for a transactions-v2 producer (the leader
    # adds the partition to the transaction); v13 (topic ids) is not served
    ApiKey.PRODUCE: (0, 12),
    ApiKey.FETCH: (0, 17),  # v0-v3: down-converted to message format v0/v1
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.API_VERSIONS: (0, 4),
    # Served by broker.sasl_authenticator on SASL listeners; elsewhere answered ILLEGAL_SASL_STATE.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # KIP-98 (broker.handlers.transactions). AddPartitionsToTxn v4-v5 (batched, verify-only,
    # KIP-890 part 1) are the broker-to-broker form (ClusterAction); EndTxn v5 and TxnOffsetCommit
    # v5 are transactions v2 (KIP-890 part 2).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    # Answered by the group coordinator (broker.handlers.groups); v3 adds KIP-447's generation checks.
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.END_TXN: (0, 5),
    # Kafka 3.9 answers v0-v1; v0 (not flexible) from protocol.legacy_schema; kio's v2 (Kafka 4.0,
    # TransactionVersion) is not served.
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    # KIP-664 (broker.handlers.transaction_ops); ListTransactions v2 (TransactionalIdPattern) is
    # Kafka 4.0's.
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    # KIP-853 (broker.handlers.quorum, controller_apis.voter_change_response): v0 only.
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # KIP-554: SCRAM credentials in the metadata log (controller.scram_control).
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # ACLs in the metadata log (controller.acl_control, broker.handlers.acls), Kafka 3.9's versions;
    # v0 (no pattern type: LITERAL) from protocol.legacy_schema.
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # KIP-546: client quotas in the metadata log (controller.quota_control).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    # v1 adds MemberType (Kafka 4.0).
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # KIP-584 (broker.handlers.features): kavka's feature levels are fixed; v2 answers with the
    # first error only.
    ApiKey.UPDATE_FEATURES: (0, 2),
    # KIP-966's paged Metadata (broker.handlers.metadata), with each partition's ELR.
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.CREATE_REPLICA_PLACEMENT: (0, 0),
    # v1 (KIP-860, Kafka 4.0) adds AllowReplicationFactorChange; 3.9 answers v0 only.
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}


def _api_name(key: int) -> str:
    from kio.schema.index import api_key_map

    return api_key_map[key]


def kio_versions(key: int) -> list[int]:
    own = [v for k, v in kavka_schema.SCHEMAS if k == key]
    if own:  # kavka's own APIs: their schemas are in protocol.kavka_schema, not kio
        return own
    return [v for v in schema_name_map[_api_name(key)] if isinstance(v, int)]


def _legacy_module(key: int, version: int, kind: str) -> object | None:
    """The generated module (protocol.legacy_schema) for a version below kio's, if there is one."""
    if (key, version) in kavka_schema.SCHEMAS or version >= min(kio_versions(key)):
        return None
    try:
        return importlib.import_module(f"kavka.protocol.legacy_schema.{_api_name(key)}.v{version}.{kind}")
    except ModuleNotFoundError:
        return None


def _legacy_schema(key: int, version: int, kind: str) -> type | None:
    mod = _legacy_module(key, version, kind)
    if mod is None:
        return None
    for obj in vars(mod).values():
        if isinstance(obj, type) and obj.__module__ == mod.__name__ and str(getattr(obj, "__type__", "")).endswith(kind):
            return obj
    return None


def _has_legacy(key: int, version: int) -> bool:
    """Whether protocol.legacy_schema has both modules of (key, version), without importing them:
    every process that speaks the protocol builds `SUPPORTED` (a Spark connector's per-query
    source process among them), and importing the legacy modules, a few hundred dataclasses,
    was most of this module's import time. They are loaded on first use (`request_schema`)."""
    if version >= min(kio_versions(key)):
        return False
    folder = files("kavka.protocol.legacy_schema").joinpath(_api_name(key), f"v{version}")
    return all(folder.joinpath(f"{kind}.py").is_file() for kind in ("request", "response"))


def _clip(key: ApiKey, wanted: tuple[int, int]) -> tuple[int, int]:
    have = kio_versions(key)
    have += [v for v in range(wanted[0], min(have)) if _has_legacy(key, v)]
    if key == ApiKey.PRODUCE:
        have += list(LEGACY_PRODUCE_VERSIONS)  # decoded as v3 (protocol.legacy)
    lo, hi = max(wanted[0], min(have)), min(wanted[1], max(have))
    if lo > hi:
        raise RuntimeError(f"kio has no schema for {key.name} in {wanted}")
    return lo, hi


SUPPORTED: dict[int, tuple[int, int]] = {int(k): _clip(k, v) for k, v in _WANTED.items()}

# kavka's own APIs, and the KIP-511 client software name they are advertised to (broker.apis).
OWN_API_KEYS = frozenset(k for k, _ in kavka_schema.SCHEMAS)

OWN_CLIENT_SOFTWARE_NAME = "kavka"


def is_supported(api_key: int, api_version: int) -> bool:
    rng = SUPPORTED.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]


@cache
def request_schema(api_key: int, api_version: int) -> type:
    own = kavka_schema.SCHEMAS.get((api_key, api_version))
    if own is not None:
        return own[0]
    return _legacy_schema(api_key, api_version, "request") or load_request_schema(api_key, api_version)


@cache
def response_schema(api_key: int, api_version: int) -> type:
    own = kavka_schema.SCHEMAS.get((api_key, api_version))
    if own is not None:
        return own[1]
    widened = WIDENED.get((api_key, api_version, "response"))
    if widened is not None:
        return widened
    return _legacy_schema(api_key, api_version, "response") or load_response_schema(api_key, api_version)


@cache
def is_flexible(api_key: int, api_version: int) -> bool:
    if api_key == ApiKey.PRODUCE and api_version in LEGACY_PRODUCE_VERSIONS:
        return False
    return bool(request_schema(api_key, api_version).__flexible__)


def response_header_flexible(api_key: int, api_version: int) -> bool:
    # ApiVersions responses always use header v0 (KIP-511).
    return api_key != ApiKey.API_VERSIONS and is_flexible(api_key, api_version)
