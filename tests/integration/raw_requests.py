"""Raw Kafka requests built from a schema with minimal content, for the sweep and the fuzzer.

`minimal(cls)` fills a kio (or protocol.legacy_schema) request class: one
element in every array (so per-entry fields are exercised), the field's
default where it has one, otherwise the type's zero; strings name the topic
TOPIC. `request_bytes(key, version, corr)` frames it for the wire.
"""

from __future__ import annotations

import uuid
from dataclasses import MISSING, fields, is_dataclass
from datetime import timedelta
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.primitive import Records

from kavka.protocol import api, legacy
from kavka.protocol.framing import encode_entity, encode_request

TOPIC = "conformance"
# Values that make a minimal request one a client could really send.
_OVERRIDES: dict[str, Any] = {
    "acks": 1,  # acks=0 is never answered
    "partition_max_bytes": 1024,
    "max_bytes": 1024,
    "partition_index": 0,
    "partition": 0,
}


def _zero(f: Any) -> Any:
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return (minimal(kind.type_),)
    if isinstance(kind, EntityField):
        return minimal(kind.type_)
    if is_optional(f):
        return None
    if isinstance(kind, PrimitiveTupleField):
        return (_zero_primitive(kind.type_),)
    assert isinstance(kind, PrimitiveField)
    return _zero_primitive(kind.type_)


def _zero_primitive(t: type) -> Any:
    if isinstance(t, type) and issubclass(t, Records):
        return None
    if t is uuid.UUID:
        return uuid.UUID(int=0)
    if isinstance(t, type) and issubclass(t, timedelta):
        return timedelta(0)
    if t is bool:
        return False
    if isinstance(t, type) and issubclass(t, str):
        return TOPIC
    if isinstance(t, type) and issubclass(t, bytes):
        return b""
    if isinstance(t, type) and issubclass(t, float):
        return 0.0
    return 0


def minimal(cls: type) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if f.name in _OVERRIDES:
            kwargs[f.name] = _OVERRIDES[f.name]
        elif isinstance(kind, PrimitiveTupleField | EntityTupleField) and not is_optional(f):
            kwargs[f.name] = _zero(f)  # one element, so per-entry fields are exercised
        elif f.default is not MISSING and not is_dataclass(f.default):
            kwargs[f.name] = f.default
        else:
            kwargs[f.name] = _zero(f)
    return cls(**kwargs)


def request_bytes(key: int, version: int, corr: int) -> bytes:
    if key == api.ApiKey.PRODUCE and version in legacy.LEGACY_PRODUCE_VERSIONS:
        # v0-v2 share v3's layout without the leading transactional_id (null: 2 bytes).
        body = encode_entity(minimal(api.request_schema(key, 3)))[2:]
    else:
        body = encode_entity(minimal(api.request_schema(key, version)))
    return encode_request(api_key=key, api_version=version, correlation_id=corr, client_id="conformance", body=body,
                          flexible=api.is_flexible(key, version))


