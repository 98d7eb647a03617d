"""Generate kio-style schema modules for the old API versions kio (Kafka 4) lacks.

Dev-time tool, not imported by the broker. Reads Apache Kafka 3.9's message
JSON (clients/src/main/resources/common/message) from the git mirror and, for
every request/response version below kio's lowest, writes one module
src/kavka/protocol/legacy_schema/<api>/v<N>/{request,response}.py holding
frozen dataclasses that kio's own entity reader/writer (and protocol.guard)
handle like its generated ones. Field names and Python types follow kio: a
field that kio's lowest version of the same entity also has is typed exactly
as kio types it (so `throttle_time_ms` becomes kio's `throttle_time`
timedelta); fields only old versions have (ListOffsets v0 `max_num_offsets`,
DescribeConfigs v0 `is_default`) are typed from the JSON.

Usage: .venv/bin/python scripts/gen_legacy_schemas.py [kafka-ref]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial._introspect import is_optional

MIRROR = "/work/.mirror/apache+kafka/repo"
MSG_DIR = "clients/src/main/resources/common/message"
OUT = Path(__file__).resolve().parent.parent / "src" / "kavka" / "protocol" / "legacy_schema"

_PY = {
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint16": "u16", "float64": "f64",
    "string": "str", "bool": "bool", "bytes": "bytes", "records": "Records", "uuid": "uuid.UUID",
    "error_code": "ErrorCode", "timedelta_i32": "i32Timedelta", "timedelta_i64": "i64Timedelta",
    "datetime_i64": "TZAware",
}
_IMPORTS = """import datetime
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import (
    TZAware,
    Records,
    f64,
    i8,
    i16,
    i32,
    i32Timedelta,
    i64,
    i64Timedelta,
    u16,
)
"""


def _versions(spec: str | None) -> range:
    if not spec or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 1000)
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _load_json(ref: str, name: str) -> dict:
    text = subprocess.run(["git", "-C", MIRROR, "show", f"{ref}:{MSG_DIR}/{name}.json"], check=True,
                          capture_output=True, text=True).stdout
    return json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))


def _kio_classes(api_key: int, kind: str) -> dict[str, dict[str, object]]:
    """Entity name -> {field name -> dataclass Field} from kio's lowest version (the reference typing)."""
    lowest = min(v for v in schema_name_map[api_key_map[api_key]] if isinstance(v, int))
    root = (load_request_schema if kind == "request" else load_response_schema)(api_key, lowest)
    mod = sys.modules[root.__module__]
    return {n: {f.name: f for f in fields(c)} for n, c in vars(mod).items()
            if isinstance(c, type) and getattr(c, "__module__", "") == mod.__name__}


def rf_optional(f: object) -> bool:
    return f is not None and is_optional(f)  # type: ignore[arg-type]


def _default_literal(ftype: str, default: object, kt: str) -> str:
    if "timedelta_" in kt:
        return f"datetime.timedelta(milliseconds={int(str(default), 0)})"
    if ftype == "bool":
        return "True" if str(default).lower() == "true" else "False"
    if ftype in ("int8", "int16", "int32", "int64", "uint16"):
        return f"{_PY[ftype]}({int(str(default), 0)})"
    if ftype == "float64":
        return f"f64({float(str(default))})"
    return repr(default)


class _Gen:
    def __init__(self, msg: dict, version: int, kind: str, ref: dict[str, dict[str, object]]) -> None:
        self.msg, self.version, self.kind, self.ref = msg, version, kind, ref
        self.common = {s["name"]: s for s in msg.get("commonStructs", [])}
        self.classes: list[str] = []
        self.done: set[str] = set()

    def entity(self, name: str, field_specs: list[dict], entity_type: str) -> None:
        if name in self.done:
            return
        self.done.add(name)
        ref = self.ref.get(name, {})
        lines = []
        for spec in field_specs:
            if self.version not in _versions(spec.get("versions")):
                # The nested class still exists (as in Kafka's generated code), so a
                # handler can name it; it is simply never sent in this version.
                inner = spec["type"].removeprefix("[]")
                if inner not in _PY and inner != "records":
                    self.entity(inner, spec.get("fields") or self.common[inner]["fields"], "nested")
                continue
            if spec.get("taggedVersions"):
                continue  # tags exist only in flexible versions; none are generated here
            lines.append(self.field(spec, ref))
        head = [
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {name}:",
            f"    __type__: ClassVar = EntityType.{entity_type}",
            f"    __version__: ClassVar[i16] = i16({self.version})",
            "    __flexible__: ClassVar[bool] = False",
            f"    __api_key__: ClassVar[i16] = i16({self.msg['apiKey']})",
        ]
        self.classes.append("\n".join(head + lines) + "\n")

    def field(self, spec: dict, ref: dict[str, object]) -> str:
        ftype: str = spec["type"]
        nullable = self.version in _versions(spec.get("nullableVersions"))
        snake = _snake(spec["name"])
        if ftype.startswith("[]"):
            inner = ftype[2:]
            if inner in _PY:
                kt = "error_code" if (inner == "int16" and spec["name"] == "ErrorCode") else inner
                py, meta = f"tuple[{_PY[kt]}, ...]", f'metadata={{"kafka_type": "{kt}"}}'
            else:
                sub = spec.get("fields") or self.common[inner]["fields"]
                self.entity(inner, sub, "nested")
                py, meta = f"tuple[{inner}, ...]", ""
            name = snake
        else:
            kt = ftype
            name = snake
            rf = ref.get(snake)
            if rf is None and snake.endswith("_ms") and snake[:-3] in ref:
                name, rf = snake[:-3], ref[snake[:-3]]
            if rf is not None:
                kt = rf.metadata["kafka_type"]  # type: ignore[attr-defined]
            elif ftype == "int16" and spec["name"] == "ErrorCode":
                kt = "error_code"
            py, meta = _PY[kt], f'metadata={{"kafka_type": "{kt}"}}'
            if ftype not in _PY and ftype != "records":
                sub = spec.get("fields") or self.common[ftype]["fields"]
                self.entity(ftype, sub, "nested")
                py, meta = ftype, ""
        args = [meta] if meta else []
        if not nullable and not ftype.startswith("[]") and rf_optional(ref.get(name)):
            nullable = True  # kio's own typing: e.g. a -1 timestamp is None (datetime_i64)
        if nullable:
            py += " | None"
        if "default" in spec and not ftype.startswith("[]") and ftype in _PY and not nullable:
            if not (ftype == "string" and spec["default"] == "null"):
                args.append("default=" + _default_literal(ftype, spec["default"], meta))
        elif name in ref and ref[name].default is not MISSING and not ftype.startswith("[]") and not nullable:  # type: ignore[attr-defined]
            args.append(f"default={ref[name].default!r}")  # type: ignore[attr-defined]
        if nullable and ftype == "string" and spec.get("default") == "null":
            args.append("default=None")
        return f"    {name}: {py}" + (f" = field({', '.join(args)})" if args else "")


def generate(ref: str = "3.9.0-rc3") -> list[tuple[str, int, str]]:
    made = []
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    (OUT / "__init__.py").write_text('"""Generated by scripts/gen_legacy_schemas.py from Kafka\'s message JSON; do not edit."""\n')
    for api_key, api_name in sorted(api_key_map.items()):
        kio_versions = [v for v in schema_name_map[api_name] if isinstance(v, int)]
        camel = "".join(p.capitalize() for p in api_name.split("_"))
        for kind in ("request", "response"):
            try:
                msg = _load_json(ref, f"{camel}{kind.capitalize()}")
            except subprocess.CalledProcessError:
                continue
            flexible = _versions(msg.get("flexibleVersions"))
            ref_classes = _kio_classes(api_key, kind)
            for version in _versions(msg["validVersions"]):
                if version >= min(kio_versions) or version in flexible:
                    continue
                gen = _Gen(msg, version, kind, ref_classes)
                gen.entity(msg["name"], msg["fields"], kind)
                pkg = OUT / api_name / f"v{version}"
                pkg.mkdir(parents=True, exist_ok=True)
                (OUT / api_name / "__init__.py").write_text("")
                (pkg / "__init__.py").write_text("")
                doc = f'"""Generated from Kafka {ref} {MSG_DIR}/{msg["name"]}.json, version {version}; do not edit."""\n\n'
                (pkg / f"{kind}.py").write_text(doc + "# ruff: noqa\n" + _IMPORTS + "\n\n" + "\n\n".join(gen.classes))
                made.append((api_name, version, kind))
    return made


if __name__ == "__main__":
    for row in generate(*sys.argv[1:]):
        print(*row)
