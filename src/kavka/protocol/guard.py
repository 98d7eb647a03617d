"""Structural pre-check of request bodies before kio decodes them.

Why: kio's native decoder reserves memory for an array from its declared
length before reading the elements; a 5-byte body can claim 2**32 elements and
the allocation failure aborts the whole process (seen with a fuzzed Metadata
request). A client's bytes must never stop the broker, so every body is
walked here first, following the same kio schema, checking that each length
(strings, bytes, arrays, tagged fields) fits in the bytes that remain. It
allocates nothing and raises ProtocolError on the first violation; after it
passes, every length kio will read is bounded by the frame size.

Schemas are compiled once per message class into a tree of small closures.
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


def _fixed(n: int) -> Step:
    return lambda b, p, e: _need(p, n, e, "field")


def _string(flexible: bool) -> Step:
    if flexible:
        def compact(b: memoryview, p: int, e: int) -> int:
            n, p = read_uvarint(b, p)
            return p if n == 0 else _need(p, n - 1, e, "string")
        return compact

    def legacy(b: memoryview, p: int, e: int) -> int:
        _need(p, 2, e, "string length")
        (n,) = _I16.unpack_from(b, p)
        return p + 2 if n == -1 else _need(p + 2, n, e, "string")
    return legacy


def _bytes(flexible: bool) -> Step:
    if flexible:
        def compact(b: memoryview, p: int, e: int) -> int:
            n, p = read_uvarint(b, p)
            return p if n == 0 else _need(p, n - 1, e, "bytes")
        return compact

    def legacy(b: memoryview, p: int, e: int) -> int:
        _need(p, 4, e, "bytes length")
        (n,) = _I32.unpack_from(b, p)
        return p + 4 if n == -1 else _need(p + 4, n, e, "bytes")
    return legacy


def _primitive(kafka_type: str, flexible: bool) -> Step:
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type])
    if kafka_type == "string":
        return _string(flexible)
    if kafka_type in ("bytes", "records"):
        return _bytes(flexible)
    raise TypeError(f"unknown kafka_type {kafka_type}")


def _array(item: Step, flexible: bool) -> Step:
    def run(b: memoryview, p: int, e: int) -> int:
        if flexible:
            n, p = read_uvarint(b, p)
            n -= 1
        else:
            _need(p, 4, e, "array length")
            (n,) = _I32.unpack_from(b, p)
            p += 4
        if n < 0:
            return p  # null array
        # Every element takes at least one byte: a longer claim is a lie.
        _need(p, n, e, "array")
        for _ in range(n):
            p = item(b, p, e)
        return p
    return run


def _inner(tp: Any) -> Any:
    if get_origin(tp) is UnionType:
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0]
    return tp


def _field_step(f: Any, flexible: bool) -> Step:
    tp = _inner(f.type)
    if get_origin(tp) is tuple:
        elem = _inner(get_args(tp)[0])
        if is_dataclass(elem):
            return _array(compile_entity(elem), flexible)
        return _array(_primitive(f.metadata["kafka_type"], flexible), flexible)
    if is_dataclass(tp):
        return compile_entity(tp)
    return _primitive(f.metadata["kafka_type"], flexible)


@cache
def compile_entity(cls: type) -> Step:
    flexible = bool(cls.__flexible__)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for f in fields(cls):
        tag = f.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _field_step(f, flexible)
        else:
            steps.append(_field_step(f, flexible))

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
