"""Version-agnostic construction of kio message entities.

kio generates one frozen dataclass per message *version*; fields come and go
between versions. Handlers build responses once, by field name, and `make`
drops the names the negotiated version does not carry -- so one handler
serves every version, and what a version lacks is simply not sent (as Kafka's
generated `write(version)` does). Also Kafka's Uuid <-> `uuid.UUID`.
"""

from __future__ import annotations

import base64
import sys
import uuid
from dataclasses import fields
from datetime import timedelta
from functools import cache
from typing import Any

ZERO_UUID = uuid.UUID(int=0)
NO_THROTTLE = timedelta(0)


@cache
def field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def make(cls: type, **kwargs: Any) -> Any:
    names = field_names(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


@cache
def nested(entity_cls: type, name: str) -> type:
    """A nested entity class from the module that defines `entity_cls` (same version)."""
    return getattr(sys.modules[entity_cls.__module__], name)


def has_field(entity: Any, name: str) -> bool:
    return name in field_names(type(entity))


def uuid_to_str(u: uuid.UUID | None) -> str:
    """Kafka's Uuid.toString(): base64url of the 16 bytes, no padding."""
    b = (u or ZERO_UUID).bytes
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def uuid_from_str(s: str | None) -> uuid.UUID:
    if not s:
        return ZERO_UUID
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
