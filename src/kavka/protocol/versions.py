"""Version-independent reading of decoded requests: one default per field a version lacks.

kio decodes each request version into its own dataclass, and a field exists
only in the versions that carry it (Fetch `session_id` from v7, JoinGroup
`group_instance_id` from v5, ...). Handlers serve many versions with one body,
so reading such a field must not depend on the version. `with_defaults` wraps
a decoded request so that every field any version of that API has can be
read; a field the negotiated version lacks reads as its default, decided here
and nowhere else:

1. the default Kafka's message JSON gives the field (kio carries it as the
   dataclass default) in any version that has it -- e.g. Fetch
   `session_epoch` -1, Metadata `allow_auto_topic_creation` true;
2. otherwise null for a nullable field, the empty array for an array, and
   the type's zero (0, "", zero UUID, no records) -- Kafka's implicit
   defaults.

The wrapper is only put where needed: an entity whose class already has every
field of every version is returned as it is (so the newest versions pay
nothing). Nested entities (a Fetch partition, an OffsetCommit partition) are
matched across versions by class name. Wrapped entities are read-only views;
the handlers never build new requests from them.

Called by the wire server after decoding; pure, safe from any thread.
"""

from __future__ import annotations

import sys
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.primitive import Records


def _field_default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    if is_optional(f):
        return None
    kind = classify_field(f)
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return ()
    if isinstance(kind, PrimitiveField):
        if isinstance(kind.type_, type) and issubclass(kind.type_, Records):
            return None
        if kind.type_ is bool:
            return False
        return get_implicit_default(kind.type_)
    if isinstance(kind, EntityField):
        return kind.type_(**{n.name: _field_default(n) for n in fields(kind.type_)})
    raise TypeError(f"no default for field {f.name}")  # pragma: no cover - kio has no other kinds


def _has_explicit_default(f: Field[Any]) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING


@cache
def _request_classes(api_key: int) -> dict[str, list[type]]:
    """Class name -> that class in every request version kio carries for `api_key`."""
    out: dict[str, list[type]] = {}
    from kavka.protocol import api

    versions = api.kio_versions(api_key)  # kio's, or kavka's own (protocol.kavka_schema)
    lo, _hi = api.SUPPORTED.get(api_key, (min(versions), 0))
    for v in sorted(set(versions) | set(range(lo, min(versions)))):
        module = sys.modules[api.request_schema(api_key, v).__module__]
        for name, obj in vars(module).items():
            if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == module.__name__:
                out.setdefault(name, []).append(obj)
    return out


@cache
def defaults_for(api_key: int, class_name: str) -> dict[str, Any]:
    """Every field any version of this (nested) request entity has -> its default.

    An explicit default from Kafka's JSON wins over the implicit one, whichever
    version declares it (newest first).
    """
    explicit: dict[str, Any] = {}
    implicit: dict[str, Any] = {}
    for cls in reversed(_request_classes(api_key).get(class_name, [])):
        for f in fields(cls):
            if _has_explicit_default(f):
                explicit.setdefault(f.name, _field_default(f))
            else:
                implicit.setdefault(f.name, _field_default(f))
    return implicit | explicit


@cache
def _plan(api_key: int, cls: type) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """(defaults of the fields `cls` lacks, names of its nested-entity fields needing views) or None if none."""
    own = {f.name for f in fields(cls)}
    missing = {k: v for k, v in defaults_for(api_key, cls.__name__).items() if k not in own}
    nested: list[str] = []
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            if _needs_view(api_key, kind.type_):
                nested.append(f.name)
    if not missing and not nested:
        return None
    return missing, tuple(nested)


@cache
def _needs_view(api_key: int, cls: type) -> bool:
    return _plan(api_key, cls) is not None


class VersionView:
    """A read-only view of a decoded request entity with defaults for the fields its version lacks."""

    __slots__ = ("_entity", "_missing", "_wrapped")

    def __init__(self, api_key: int, entity: Any, missing: dict[str, Any], nested: tuple[str, ...]) -> None:
        self._entity = entity
        self._missing = missing
        wrapped: dict[str, Any] = {}
        for name in nested:
            value = getattr(entity, name)
            if isinstance(value, tuple):
                wrapped[name] = tuple(with_defaults(api_key, v) for v in value)
            elif value is not None:
                wrapped[name] = with_defaults(api_key, value)
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        wrapped = self._wrapped
        if name in wrapped:
            return wrapped[name]
        try:
            return getattr(self._entity, name)
        except AttributeError:
            missing = self._missing
            if name in missing:
                return missing[name]
            raise

    def __repr__(self) -> str:
        return f"VersionView({self._entity!r})"


def with_defaults(api_key: int, entity: Any) -> Any:
    """`entity` itself if its version has every field, else a VersionView of it."""
    plan = _plan(api_key, type(entity))
    if plan is None:
        return entity
    return VersionView(api_key, entity, plan[0], plan[1])
