"""The differential oracle's machinery: one scenario, run against kavka and against a real Apache
Kafka (tests/kafka_reference.py), gives two answers that must be equal.

A scenario is a function `(side, topic) -> answer`, registered with `@scenario`: it sends requests
to one `Side` (raw requests built from kio's schemas with `side.call`, or a client's calls at the
side's `bootstrap`) and returns a plain, comparable value: dicts, lists, ints, strings, error
names. `plain` turns a kio response into that value and drops what legitimately differs between
two brokers: throttle times, cluster ids, host names and ports; a non-zero UUID (a topic id, a
directory id) becomes "uuid"; an error message's text becomes "<message>" (null stays null). Anything else that differs only by identity or time (member ids,
timestamps of now) is normalised inside the scenario, next to the reason.

`topic` is a fresh topic name, the same on both sides, so answers that name it compare equal.

A scenario whose answers differ on purpose is registered with a `Divergence`: Kafka's answer and
kavka's answer, both exact (so the scenario still fails when either changes), and the reason,
which README.md's "Differences from Apache Kafka" repeats.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from enum import Enum
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from kavka.protocol import api
from kavka.protocol.api import ApiKey
from tests.raw_client import RawClient
from tests.wait import wait_until

# Fields whose values differ between any two brokers and say nothing of behaviour.
DROPPED = frozenset({"throttle_time", "cluster_id", "host", "port", "client_host"})
# Error messages are compared for presence only: a null message and a text differ, two texts do
# not (kavka's wording is its own; README.md, "Differences from Apache Kafka").
MESSAGES = frozenset({"error_message"})
MESSAGE = "<message>"


def build(cls: type, values: dict[str, Any]) -> Any:
    """A kio entity of `cls` from plain values: nested entities as dicts (or lists of dicts),
    durations as int milliseconds; a field left out takes its default, else null or empty or
    zero. A name `cls` does not have is an error (a scenario pins its versions)."""
    unknown = set(values) - {f.name for f in fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__module__}.{cls.__name__} has no field {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if f.name not in values:
            if f.default is not MISSING:
                continue
            if isinstance(kind, EntityTupleField | PrimitiveTupleField):
                kwargs[f.name] = None if is_optional(f) else ()
            elif is_optional(f):
                kwargs[f.name] = None
            elif isinstance(kind, EntityField):
                kwargs[f.name] = build(kind.type_, {})
            else:
                kwargs[f.name] = _zero(kind.type_)
            continue
        v = values[f.name]
        if v is None:
            kwargs[f.name] = None
        elif isinstance(kind, EntityTupleField):
            kwargs[f.name] = tuple(x if is_dataclass(x) else build(kind.type_, x) for x in v)
        elif isinstance(kind, EntityField) and isinstance(v, dict):
            kwargs[f.name] = build(kind.type_, v)
        elif isinstance(kind, PrimitiveTupleField):
            kwargs[f.name] = tuple(v)
        elif isinstance(kind, PrimitiveField) and _is_duration(kind.type_) and isinstance(v, int):
            kwargs[f.name] = datetime.timedelta(milliseconds=v)
        else:
            kwargs[f.name] = v
    return cls(**kwargs)


def _is_duration(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, datetime.timedelta)


def _zero(t: Any) -> Any:
    if _is_duration(t):
        return datetime.timedelta(0)
    if t is uuid.UUID:
        return uuid.UUID(int=0)
    if t is bool:
        return False
    if isinstance(t, type) and issubclass(t, str):
        return ""
    if isinstance(t, type) and issubclass(t, bytes):
        return b""
    return 0


def plain(x: Any) -> Any:
    """A kio entity as plain data, without what differs between any two brokers (DROPPED)."""
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: MESSAGE if f.name in MESSAGES and getattr(x, f.name) is not None else plain(getattr(x, f.name))
                for f in fields(x) if f.name not in DROPPED}
    if isinstance(x, tuple | list):
        return [plain(i) for i in x]
    if isinstance(x, ErrorCode):
        return x.name
    if isinstance(x, Enum):
        return x.value
    if isinstance(x, datetime.timedelta):
        return int(x.total_seconds() * 1000)
    if isinstance(x, uuid.UUID):
        return "zero-uuid" if x.int == 0 else "uuid"
    return x


@dataclasses.dataclass
class Side:
    """One broker under test: kavka or the reference Kafka."""

    name: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def request(self, key: ApiKey, version: int, values: dict[str, Any]) -> Any:
        return build(api.request_schema(key, version), values)

    def call_raw(self, key: ApiKey, version: int, **values: Any) -> Any:
        """One request over a fresh connection; the decoded kio response."""
        with RawClient(self.port, timeout=30, client_id="oracle") as c:
            return c.call(key, version, self.request(key, version, values))

    def call(self, key: ApiKey, version: int, **values: Any) -> Any:
        """`call_raw`, as plain data (see `plain`)."""
        return plain(self.call_raw(key, version, **values))

    def closes(self, frame: bytes) -> bool:
        """Whether the broker closes the connection on `frame` (True) or answers it (False)."""
        with RawClient(self.port, timeout=30, client_id="oracle") as c:
            c.send_bytes(frame)
            try:
                c.read_frame()
            except ConnectionError:
                return True
            return False

    # -- setup steps shared by scenarios (their results are checked, not compared) --------------

    def create_topic(self, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        resp = self.call_raw(ApiKey.CREATE_TOPICS, 7, timeout=30000, topics=[{
            "name": topic, "num_partitions": partitions, "replication_factor": 1,
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}])
        assert resp.topics[0].error_code == ErrorCode.none, f"{self.name}: {resp.topics[0]}"
        self.wait_leaders(topic, partitions)

    def wait_leaders(self, topic: str, partitions: int) -> None:
        def led() -> bool:
            md = self.call_raw(ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
            t = md.topics[0]
            return (t.error_code == ErrorCode.none and len(t.partitions) == partitions
                    and all(p.leader_id >= 0 and p.error_code == ErrorCode.none for p in t.partitions))
        wait_until(led, timeout=30, message=f"{self.name}: leaders of {topic}")

    def produce(self, topic: str, batch: bytes, partition: int = 0, acks: int = -1, version: int = 9) -> Any:
        """One Produce of `batch` to one partition; that partition's plain answer. A leader not
        ready yet (NOT_LEADER_OR_FOLLOWER just after CreateTopics: Metadata may name the leader a
        moment before its replica manager leads, on either broker) is retried, as clients do."""
        def once() -> Any:
            resp = self.call_raw(ApiKey.PRODUCE, version, acks=acks, timeout=30000, topic_data=[{
                "name": topic, "partition_data": [{"index": partition, "records": batch}]}])
            return plain(resp.responses[0].partition_responses[0])
        answers: list[Any] = []
        wait_until(lambda: answers.append(once()) or answers[-1]["error_code"] != "not_leader_or_follower",
                   timeout=30, message=f"{self.name}: a leader for {topic}-{partition}")
        return answers[-1]


@dataclasses.dataclass(frozen=True)
class Divergence:
    kafka: Any
    kavka: Any
    reason: str


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Side, str], Any]
    divergence: Divergence | None = None


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str | None = None, *, divergence: Divergence | None = None) -> Callable:
    def register(fn: Callable[[Side, str], Any]) -> Callable[[Side, str], Any]:
        key = name or fn.__name__.removeprefix("s_")
        assert key not in SCENARIOS, f"two scenarios named {key}"
        SCENARIOS[key] = Scenario(key, fn, divergence)
        return fn
    return register


def now_ms() -> int:
    return int(time.time() * 1000)


def differences(kavka: Any, kafka: Any, path: str = "") -> list[str]:
    """Where two plain answers differ, one line a place: `path: kavka != kafka`."""
    if isinstance(kavka, dict) and isinstance(kafka, dict):
        out = []
        for k in list(kafka) + [k for k in kavka if k not in kafka]:
            if k not in kavka:
                out.append(f"{path}/{k}: missing in kavka (Kafka: {kafka[k]!r})")
            elif k not in kafka:
                out.append(f"{path}/{k}: only in kavka ({kavka[k]!r})")
            else:
                out += differences(kavka[k], kafka[k], f"{path}/{k}")
        return out
    if isinstance(kavka, list | tuple) and isinstance(kafka, list | tuple) and len(kavka) == len(kafka):
        return [d for i, (a, b) in enumerate(zip(kavka, kafka, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if kavka == kafka else [f"{path or '/'}: kavka {kavka!r} != Kafka {kafka!r}"]
