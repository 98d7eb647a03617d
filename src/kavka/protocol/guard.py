"""Structural pre-check of request bodies before kio decodes them.

Why: kio's native decoder reserves memory for an array from its declared
length before reading the elements; a 5-byte body can claim 2**32 elements and
the allocation failure aborts the whole process (seen with a fuzzed Metadata
request). And kio reads a null (length -1) into any field, nullable or not, so
a request could reach its handler with None where Kafka's schema promises an
array or a string (issue 25: Produce `topic_data` null raised TypeError in the
handler). A client's bytes must never stop the broker nor reach a handler in a
shape the schema forbids, so every body is walked here first, following the
same kio schema, and checked against the invariants the schema states:

- each length (strings, bytes, arrays, tagged fields) fits in the bytes that
  remain; an array claims no more elements than bytes remain (each takes one);
- null (length -1, compact 0; a nullable struct's int8 marker -1, KIP-893)
  only where the field is nullable in that version; kio's annotation says
  which: `X | None` is nullable, anything else is not (the Java classes
  Kafka generates from the same JSON refuse a null for a non-nullable field:
  "non-nullable field ... was serialized as null");
- no negative length other than -1 (the protocol encodes null as -1 only;
  Kafka's readers take any negative length as null, kavka refuses the rest,
  which no client writes), and no compact string over 0x7fff bytes (Kafka's
  generated readers: "string field ... had invalid length").

It allocates nothing and raises ProtocolError on the first violation, naming
the schema, version and field; after it passes, every length kio will read is
bounded by the frame size and every non-nullable field is decoded non-null.

Schemas are compiled once per message class into a tree of small closures;
nullability is decided at compile time, so a valid length costs no more than
before (one comparison more for a compact string), and runs of fixed-size
fields are checked as one step (bench/decode_request.py measures the walk).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from kavka.protocol.framing import ProtocolError, read_uvarint

# A step takes (buffer, position, end) and returns the new position.
Step = Callable[[memoryview, int, int], int]

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise ProtocolError(f"{what} of {n} bytes overruns the request ({end - pos} left)")
    return pos + n


class _Field:
    """Where a step is in the schema, for the error message (built only when one is raised)."""

    __slots__ = ("cls", "name")

    def __init__(self, cls: type, name: str) -> None:
        self.cls = cls
        self.name = name

    def __str__(self) -> str:
        return f"{self.cls.__name__}.{self.name} (v{self.cls.__version__})"


def _null_or_negative(n: int, nullable: bool, where: _Field) -> None:
    """A negative length read where the schema allows `nullable`: null passes, all else raises."""
    if n == -1:
        if not nullable:
            raise ProtocolError(f"null in non-nullable field {where}")
        return
    raise ProtocolError(f"negative length {n} in field {where}")


def _fixed(n: int) -> Step:
    return lambda b, p, e: _need(p, n, e, "field")


def _string(flexible: bool, nullable: bool, where: _Field) -> Step:
    if flexible:
        def compact(b: memoryview, p: int, e: int) -> int:
            n, p = read_uvarint(b, p)
            if n == 0:
                _null_or_negative(-1, nullable, where)
                return p
            # A string is at most 0x7fff bytes, compact or not (its legacy length is an int16).
            if n > 0x8000:
                raise ProtocolError(f"string of {n - 1} bytes in field {where}")
            return _need(p, n - 1, e, "string")
        return compact

    def legacy(b: memoryview, p: int, e: int) -> int:
        _need(p, 2, e, "string length")
        (n,) = _I16.unpack_from(b, p)
        if n < 0:
            _null_or_negative(n, nullable, where)
            return p + 2
        return _need(p + 2, n, e, "string")
    return legacy


def _bytes(flexible: bool, nullable: bool, where: _Field) -> Step:
    if flexible:
        def compact(b: memoryview, p: int, e: int) -> int:
            n, p = read_uvarint(b, p)
            if n == 0:
                _null_or_negative(-1, nullable, where)
                return p
            return _need(p, n - 1, e, "bytes")
        return compact

    def legacy(b: memoryview, p: int, e: int) -> int:
        _need(p, 4, e, "bytes length")
        (n,) = _I32.unpack_from(b, p)
        if n < 0:
            _null_or_negative(n, nullable, where)
            return p + 4
        return _need(p + 4, n, e, "bytes")
    return legacy


def _primitive(kafka_type: str, flexible: bool, nullable: bool, where: _Field) -> Step:
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type])
    if kafka_type == "string":
        return _string(flexible, nullable, where)
    if kafka_type in ("bytes", "records"):
        return _bytes(flexible, nullable, where)
    raise TypeError(f"unknown kafka_type {kafka_type}")


def _array(item: Step, flexible: bool, nullable: bool, where: _Field) -> Step:
    def run(b: memoryview, p: int, e: int) -> int:
        if flexible:
            n, p = read_uvarint(b, p)
            n -= 1
        else:
            _need(p, 4, e, "array length")
            (n,) = _I32.unpack_from(b, p)
            p += 4
        if n < 0:
            _null_or_negative(n, nullable, where)
            return p
        # Every element takes at least one byte: a longer claim is a lie.
        _need(p, n, e, "array")
        for _ in range(n):
            p = item(b, p, e)
        return p
    return run


def _nullable_struct(entity: Step, where: _Field) -> Step:
    """KIP-893: a nullable struct field is an int8 marker, -1 (null) or 1 (present), then the struct."""
    def run(b: memoryview, p: int, e: int) -> int:
        _need(p, 1, e, "struct marker")
        marker = b[p]
        if marker == 0xFF:
            return p + 1
        if marker != 1:
            raise ProtocolError(f"struct marker {marker} in field {where}")
        return entity(b, p + 1, e)
    return run


def _nullable(tp: Any) -> bool:
    return get_origin(tp) is UnionType and NoneType in get_args(tp)


def _inner(tp: Any) -> Any:
    if get_origin(tp) is UnionType:
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0]
    return tp


def _field_step(cls: type, f: Any, flexible: bool) -> Step:
    where = _Field(cls, f.name)
    nullable = _nullable(f.type)
    tp = _inner(f.type)
    if get_origin(tp) is tuple:
        elem = _inner(get_args(tp)[0])
        if is_dataclass(elem):
            return _array(compile_entity(elem), flexible, nullable, where)
        # Elements of a primitive array are nullable only if annotated so (none in Kafka's JSON).
        item = _primitive(f.metadata["kafka_type"], flexible, _nullable(get_args(tp)[0]), where)
        return _array(item, flexible, nullable, where)
    if is_dataclass(tp):
        entity = compile_entity(tp)
        return _nullable_struct(entity, where) if nullable else entity
    return _primitive(f.metadata["kafka_type"], flexible, nullable, where)


def _fixed_size(f: Any) -> int:
    """Bytes of a fixed-size scalar field, 0 for anything else (arrays, structs, lengths)."""
    tp = _inner(f.type)
    if get_origin(tp) is tuple or is_dataclass(tp):
        return 0
    return _FIXED.get(f.metadata["kafka_type"], 0)


@cache
def compile_entity(cls: type) -> Step:
    flexible = bool(cls.__flexible__)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    run_of_fixed = 0  # consecutive fixed-size fields are checked as one step (acks + timeout, ...)
    for f in fields(cls):
        tag = f.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _field_step(cls, f, flexible)
        elif _fixed_size(f):
            run_of_fixed += _fixed_size(f)
        else:
            if run_of_fixed:
                steps.append(_fixed(run_of_fixed))
                run_of_fixed = 0
            steps.append(_field_step(cls, f, flexible))
    if run_of_fixed:
        steps.append(_fixed(run_of_fixed))

    def run(b: memoryview, p: int, e: int) -> int:
        for step in steps:
            p = step(b, p, e)
        if flexible:
            count, p = read_uvarint(b, p)
            _need(p, count, e, "tagged fields")
            for _ in range(count):
                tag, p = read_uvarint(b, p)
                size, p = read_uvarint(b, p)
                stop = _need(p, size, e, "tagged field")
                known = tagged.get(tag)
                if known is not None:
                    known(b, p, stop)
                p = stop
        return p

    return run


def check_body(cls: type, frame: memoryview | bytes, pos: int) -> None:
    """Raise ProtocolError unless the body at `pos` is structurally sound for `cls`."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    compile_entity(cls)(buf, pos, len(buf))
