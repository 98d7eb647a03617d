"""Client quotas: AlterClientQuotas decided and DescribeClientQuotas answered (KIP-546), as Kafka's
ClientQuotaControlManager and ClientQuotasImage.describe do.

A quota entity is one or two (entity type, entity name) pairs, sorted by type; a name of None is
that type's default (`--entity-default`). Allowed combinations: user, client-id, user+client-id,
or ip alone. Keys per entity (Kafka's QuotaConfig):

    user / client-id   producer_byte_rate (LONG), consumer_byte_rate (LONG),
                       request_percentage (DOUBLE), controller_mutation_rate (DOUBLE)
    ip                 connection_creation_rate (INT)

kavka enforces all five: the user/client-id ones in broker.client_quotas (request_percentage
through broker.server, controller_mutation_rate in broker.mutation_quota), connection_creation_rate
in broker.server's accept loop.

`alter_client_quotas` validates each entry with Kafka's errors and messages (all INVALID_REQUEST):
an empty entity, an unknown or repeated entity type, an empty name, ip combined with user or
client-id, an entity or key given twice, an unknown key, a value <= 0, a fractional value for an
integral key. It returns ClientQuotaRecords (only for values that change; a removal only of a key
that is set) and one result per entity; the records of one request commit together.
`describe_client_quotas` filters the image's entities with Kafka's EXACT / DEFAULT / SPECIFIED
components and `strict` flag. (Which quota applies to a client: kavka.quota.quota_entity_for.)
Pure: image in, records and results out; any thread.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode

from kavka.metadata.image import MetadataImage, QuotaEntity
from kavka.metadata.records import ClientQuotaRecord

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> Kafka's ConfigDef type (decides the integral check)
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
_MAX = {"INT": 2**31 - 1, "LONG": 2**63 - 1}


class MatchType(IntEnum):
    """DescribeClientQuotasRequest ComponentData.MatchType."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity as sent (pairs in request order) and its ops as
    (key, value or None to remove)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class QuotaResult:
    entity: tuple[tuple[str, str | None], ...]
    error: ErrorCode = ErrorCode.none
    message: str | None = None


class QuotaFilterError(ValueError):
    """A DescribeClientQuotas filter Kafka refuses; `error` is the code to answer."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def entity_str(entity: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ClientQuotaEntity.toString: ClientQuotaEntity(entries={user=alice, client-id=null})."""
    inner = ", ".join(f"{t}={n if n is not None else 'null'}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _invalid(entity: tuple[tuple[str, str | None], ...], message: str) -> QuotaResult:
    return QuotaResult(entity, ErrorCode.invalid_request, message)


def _validate_entity(entity: tuple[tuple[str, str | None], ...]) -> tuple[QuotaEntity | None, str | None, dict[str, str]]:
    """(the sorted entity, None, its allowed keys) or (None, Kafka's message, {})."""
    if not entity:
        return None, "Invalid empty client quota entity", {}
    seen: dict[str, str | None] = {}
    for t, n in entity:
        if t in seen:
            return None, f"Invalid client quota entity, duplicate entity entry {t}", {}
        if t not in ENTITY_TYPES:
            return None, f"Unhandled client quota entity type: {t}", {}
        seen[t] = n
        if n is not None and not n:
            return None, f"Empty {t} not supported", {}
    if IP in seen:
        if len(seen) > 1:
            return None, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", {}
        if not _valid_ip(seen[IP]):
            return None, f"{seen[IP]} is not a valid IP or resolvable host.", {}
        keys = IP_KEYS
    else:
        keys = USER_CLIENT_KEYS
    return tuple(sorted(seen.items())), None, keys


def _valid_ip(name: str | None) -> bool:
    # Kafka resolves host names here (InetAddress.getByName); a pure core does no I/O, so kavka
    # takes IP literals only.
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _check_value(keys: Mapping[str, str], key: str, value: float) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:  # NaN too
        return f"Quota {key} must be greater than 0"
    if kind in _MAX:
        # Kafka compares as doubles (`value > Long.MAX_VALUE`): 2^63, the double nearest the
        # largest LONG, is accepted.
        if value > float(_MAX[kind]):
            return f"Proposed value for {key} is too large for {'an INT' if kind == 'INT' else 'a LONG'}."
        if math.isinf(value) or abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{key} cannot be a fractional value."
    return None


def alter_client_quotas(
    image: MetadataImage, alterations: Sequence[QuotaAlteration]
) -> tuple[list[ClientQuotaRecord], list[QuotaResult]]:
    """AlterClientQuotas: the records to commit and one result per entry, in request order."""
    records: list[ClientQuotaRecord] = []
    results: dict[QuotaEntity | tuple[tuple[str, str | None], ...], QuotaResult] = {}
    for alt in alterations:
        sorted_entity, error, keys = _validate_entity(alt.entity)
        key = sorted_entity if sorted_entity is not None else alt.entity
        if key in results:
            results[key] = _invalid(alt.entity, f"Ignoring duplicate entity {entity_str(alt.entity)}")
            continue
        if error is not None or sorted_entity is None:
            results[key] = _invalid(alt.entity, error or "Invalid empty client quota entity")
            continue
        ops: dict[str, float | None] = {}
        for k, v in alt.ops:
            if k in ops:
                error = f"Duplicate quota key {k} not updating quota for this entity {entity_str(alt.entity)}"
                break
            ops[k] = v
        current = image.client_quotas.get(sorted_entity, {})
        new: list[ClientQuotaRecord] = []
        for k, v in ops.items():
            if error is not None:
                break
            if v is None:
                if k in current:
                    new.append(ClientQuotaRecord(sorted_entity, k, 0.0, remove=True))
                continue
            error = _check_value(keys, k, v)
            if error is None and current.get(k) != v:
                new.append(ClientQuotaRecord(sorted_entity, k, float(v)))
        if error is not None:
            results[key] = _invalid(alt.entity, error)
            continue
        records.extend(new)
        results[key] = QuotaResult(alt.entity)
    return records, list(results.values())


def describe_client_quotas(
    image: MetadataImage, components: Sequence[tuple[str, int, str | None]], *, strict: bool
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """DescribeClientQuotas: the entities matching the filter (entity type, match type, match),
    each with its quota values. Raises QuotaFilterError for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaFilterError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise QuotaFilterError(
                ErrorCode.invalid_request, f"Entity type {entity_type} cannot appear more than once in the filter."
            )
        if entity_type not in ENTITY_TYPES:
            raise QuotaFilterError(ErrorCode.unsupported_version, f"Unsupported entity type {entity_type}")
        if match_type == MatchType.EXACT:
            if match is None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MatchType.DEFAULT:
            if match is not None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MatchType.SPECIFIED:
            if match is not None:
                raise QuotaFilterError(ErrorCode.invalid_request, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(entity_type)
        else:
            raise QuotaFilterError(ErrorCode.invalid_request, f"Unknown match type {match_type}")
    named = exact.keys() | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaFilterError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        )
    out = []
    for entity, values in sorted(image.client_quotas.items(), key=lambda e: repr(e[0])):
        as_map = dict(entity)
        if strict and len(as_map) != len(named):
            continue
        if any(t not in as_map or as_map[t] != n for t, n in exact.items()):
            continue
        if any(t not in as_map for t in specified):
            continue
        out.append((entity, values))
    return out
