"""``meta.properties`` of a log dir, as Kafka (KRaft) writes it, and Kafka Uuids.

Format: a Java properties file. Kafka writes (``PropertiesUtils``)::

    #
    #<date>
    cluster.id=<22-char Uuid>
    directory.id=<22-char Uuid>      (KIP-858)
    node.id=<int>
    version=1

Version 1 is KRaft (``node.id``), version 0 the ZooKeeper era (``broker.id``,
read only). A missing file raises FileNotFoundError; anything malformed raises
InvalidMetaPropertiesError (a ValueError) naming the dir and the reason.
Called at startup and by ``kavka storage format``; no clock, no randomness
except :func:`generate_uuid`.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

from kavka.storage.checkpoints import write_atomically

META_PROPERTIES = "meta.properties"

__all__ = [
    "META_PROPERTIES",
    "InvalidMetaPropertiesError",
    "MetaProperties",
    "generate_uuid",
    "is_valid_uuid",
    "read_meta_properties",
    "write_meta_properties",
]


class InvalidMetaPropertiesError(ValueError):
    def __init__(self, log_dir: Path, reason: str) -> None:
        super().__init__(f"{Path(log_dir) / META_PROPERTIES}: {reason}")
        self.log_dir = Path(log_dir)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str | None
    node_id: int | None
    directory_id: str | None = None
    version: int = 1


# Kafka reserves the first 100 Uuids (DirectoryId.RESERVED: UNASSIGNED, LOST,
# MIGRATING, ...) and never hands out one whose string starts with '-', which
# would read as a command-line flag (Uuid.randomUuid).
_RESERVED_BELOW = 100


def generate_uuid() -> str:
    """A random Kafka Uuid as Kafka prints it: 22 chars of unpadded base64url."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        if int.from_bytes(raw, "big") >= _RESERVED_BELOW and not text.startswith("-"):
            return text


def is_valid_uuid(text: str) -> bool:
    if len(text) != 22:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        return False
    return len(raw) == 16


def _parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        # Java splits at the first unescaped '=' or ':'; our values never
        # contain escapes except '\:' / '\=' which Properties.store emits.
        key_end = len(line)
        for i, ch in enumerate(line):
            if ch in "=:" and (i == 0 or line[i - 1] != "\\"):
                key_end = i
                break
        key = line[:key_end].strip()
        value = line[key_end + 1 :].strip() if key_end < len(line) else ""
        props[key.replace("\\", "")] = value.replace("\\:", ":").replace("\\=", "=")
    return props


def read_meta_properties(log_dir: Path | str) -> MetaProperties:
    log_dir = Path(log_dir)
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError:
        raise InvalidMetaPropertiesError(log_dir, "not UTF-8 text") from None
    props = _parse_properties(text)
    if "version" not in props:
        raise InvalidMetaPropertiesError(log_dir, "no version")
    try:
        version = int(props["version"])
    except ValueError:
        raise InvalidMetaPropertiesError(
            log_dir, f"version {props['version']!r} is not an int"
        ) from None
    if version not in (0, 1):
        raise InvalidMetaPropertiesError(log_dir, f"unsupported version {version}")
    id_key = "node.id" if version == 1 else "broker.id"
    node_id: int | None = None
    if id_key in props:
        try:
            node_id = int(props[id_key])
        except ValueError:
            raise InvalidMetaPropertiesError(
                log_dir, f"{id_key} {props[id_key]!r} is not an int"
            ) from None
        if node_id < 0:
            raise InvalidMetaPropertiesError(log_dir, f"{id_key} {node_id} is negative")
    elif version == 1:
        raise InvalidMetaPropertiesError(log_dir, "version 1 requires node.id")
    cluster_id = props.get("cluster.id")
    if version == 1 and not cluster_id:
        raise InvalidMetaPropertiesError(log_dir, "version 1 requires cluster.id")
    directory_id = props.get("directory.id")
    if directory_id is not None and not is_valid_uuid(directory_id):
        raise InvalidMetaPropertiesError(log_dir, f"directory.id {directory_id!r} is not a Uuid")
    return MetaProperties(
        cluster_id=cluster_id, node_id=node_id, directory_id=directory_id, version=version
    )


def write_meta_properties(log_dir: Path | str, props: MetaProperties) -> None:
    log_dir = Path(log_dir)
    if props.version != 1:
        raise InvalidMetaPropertiesError(log_dir, "only version 1 (KRaft) can be written")
    if props.cluster_id is None or props.node_id is None:
        raise InvalidMetaPropertiesError(log_dir, "cluster.id and node.id are required")
    lines = ["#", "#Written by kavka", f"cluster.id={props.cluster_id}"]
    if props.directory_id is not None:
        lines.append(f"directory.id={props.directory_id}")
    lines += [f"node.id={props.node_id}", f"version={props.version}"]
    log_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(log_dir / META_PROPERTIES, ("\n".join(lines) + "\n").encode("utf-8"))
