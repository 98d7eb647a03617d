"""Request bodies written from a request class's fields, with a chosen fate for each length.

Independent of protocol.guard, so it can be the oracle for it: each
length-prefixed field (array, string, bytes, records, KIP-893 nullable struct)
is written valid (one element per array, strings "t", bytes empty), null, with
a negative length other than -1, or with a length beyond the frame;
fixed-size fields are zeros; a flexible struct writes all its tagged fields.
Nullability is the kio annotation's (`nullable`). `Body.forbidden` lists the choices
the schema forbids: a decoder must refuse the body exactly when it is non-empty.
Used by tests/unit/test_decoder_nullability.py and the broker fuzzer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from enum import Enum
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

from kavka.protocol import api
from kavka.protocol.framing import uvarint

ADVERTISED: list[tuple[int, int]] = [(k, v) for k, (lo, hi) in sorted(api.SUPPORTED.items()) for v in range(lo, hi + 1)]
_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "timedelta_i32": 4,
          "int64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16}
_OVERLONG = 30_000  # more than any body here, and still a valid int16 string length


def nullable(f: Any) -> bool:
    """Whether a kio field may be null: its annotation is `X | None`. Not kio's `is_optional`,
    which for an array asks whether its elements are: BrokerRegistration's LogDirs
    (`tuple[uuid.UUID | None, ...]`) is a non-nullable array, in Kafka's schema and protocol.guard."""
    return get_origin(f.type) in (UnionType, Union) and NoneType in get_args(f.type)


class Fate(Enum):
    VALID = "valid"
    NULL = "null"
    NEGATIVE = "negative"  # a length below -1 (non-flexible encodings only: compact lengths are unsigned)
    OVERLONG = "overlong"  # a length beyond the end of the frame


# pick(where, nullable, flexible) -> the fate of one length-prefixed field
Pick = Callable[[str, bool, bool], Fate]


class Body:
    """Writes a body for a request class, asking `pick` the fate of each length-prefixed field."""

    def __init__(self, pick: Pick) -> None:
        self.pick = pick
        self.forbidden: list[str] = []  # the forbidden choices made, by field

    def entity(self, cls: type) -> bytes:
        flexible = bool(cls.__flexible__)
        out: list[bytes] = []
        tagged: list[tuple[int, bytes]] = []
        for f in fields(cls):
            data = self._field(cls, f, flexible)
            tag = f.metadata.get("tag")
            if tag is None:
                out.append(data)
            else:
                tagged.append((int(tag), data))
        if flexible:
            out.append(uvarint(len(tagged)))
            for tag, data in sorted(tagged):
                out += [uvarint(tag), uvarint(len(data)), data]
        return b"".join(out)

    def _fate(self, where: str, nullable: bool, flexible: bool) -> Fate:
        fate = self.pick(where, nullable, flexible)
        if fate is Fate.NEGATIVE and flexible:
            fate = Fate.NULL
        if fate is not Fate.VALID and not (fate is Fate.NULL and nullable):
            self.forbidden.append(f"{fate.value} {where}")
        return fate

    def _field(self, cls: type, f: Any, flexible: bool) -> bytes:
        where = f"{cls.__name__}.{f.name}"
        kind = classify_field(f)
        may_be_null = nullable(f)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            fate = self._fate(where, may_be_null, flexible)
            if fate is Fate.VALID:
                elem = self.entity(kind.type_) if isinstance(kind, EntityTupleField) else self._primitive(f, flexible)
                return self._length(1, flexible, 4) + elem
            return self._length(self._bad_length(fate, 1_000_000), flexible, 4)
        if isinstance(kind, EntityField):
            if not may_be_null:
                return self.entity(kind.type_)
            fate = self._fate(where, True, flexible)  # KIP-893: int8 marker -1 or 1
            if fate is Fate.VALID:
                return b"\x01" + self.entity(kind.type_)
            return b"\xff" if fate is Fate.NULL else b"\x7f"
        kafka_type = f.metadata["kafka_type"]
        if kafka_type in _SIZES:
            return bytes(_SIZES[kafka_type])
        fate = self._fate(where, may_be_null, flexible)
        if fate is Fate.VALID:
            return self._primitive(f, flexible)
        width = 2 if kafka_type == "string" else 4
        return self._length(self._bad_length(fate, _OVERLONG), flexible, width)

    def _primitive(self, f: Any, flexible: bool) -> bytes:
        """One valid value of a string, bytes or fixed-size field (or array element)."""
        kafka_type = f.metadata["kafka_type"]
        if kafka_type in _SIZES:
            return bytes(_SIZES[kafka_type])
        if kafka_type == "string":
            return self._length(1, flexible, 2) + b"t"
        return self._length(0, flexible, 4)  # bytes, records: empty

    @staticmethod
    def _bad_length(fate: Fate, overlong: int) -> int:
        return {Fate.NULL: -1, Fate.NEGATIVE: -2, Fate.OVERLONG: overlong}[fate]

    @staticmethod
    def _length(n: int, flexible: bool, width: int) -> bytes:
        if flexible:
            return uvarint(n + 1)
        return struct.pack(">h" if width == 2 else ">i", n)


def non_null_violations(cls: type, value: Any, where: str = "") -> list[str]:
    """Paths of non-nullable fields that decoded as None (by kio's annotations of `cls`)."""
    bad: list[str] = []
    for f in fields(cls):
        v = getattr(value, f.name)
        path = f"{where}{cls.__name__}.{f.name}"
        if v is None:
            if not nullable(f):
                bad.append(path)
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            for item in v:
                bad += non_null_violations(kind.type_, item, path + "/")
        elif isinstance(kind, PrimitiveTupleField):
            bad += [path + "[]" for item in v if item is None]
        elif isinstance(kind, EntityField):
            bad += non_null_violations(kind.type_, v, path + "/")
    return bad
