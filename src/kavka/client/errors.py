"""Client-side exceptions.

Three kinds, kept apart as h11 keeps local misuse apart from remote
misbehaviour:

- `KafkaConnectionError`: the broker could not be reached, or the connection
  broke or timed out mid-request. Retrying on another broker may help.
- `KafkaProtocolError`: the broker answered with bytes we cannot use (wrong
  correlation id, undecodable body) or no version of an API is shared.
- `KafkaError`: the broker understood and refused; carries Kafka's error code
  and its name as Kafka spells it (``TOPIC_ALREADY_EXISTS``), from kio's
  generated `ErrorCode` table.
"""

from __future__ import annotations

from functools import cache

from kio.schema.errors import ErrorCode

# Errors after which the partition's leader may have moved (or its metadata has
# not reached this broker yet): refresh metadata, then send the same request again.
LEADER_MAY_HAVE_MOVED: frozenset[int] = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.kafka_storage_error,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
    }
)


class KafkaConnectionError(Exception):
    """Connecting, sending or receiving failed."""


class KafkaProtocolError(Exception):
    """The broker's answer breaks the protocol, or no API version is shared."""


def error_name(code: int) -> str:
    """Kafka's name for an error code, e.g. 36 -> ``TOPIC_ALREADY_EXISTS``."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def error_description(code: int) -> str:
    """Kafka's one-line description of an error code (kio keeps them as member docs)."""
    try:
        member = ErrorCode(code)
    except ValueError:
        return ""
    return _descriptions().get(member.name, "")


@cache
def _descriptions() -> dict[str, str]:
    # kio writes each member's description as a string literal after it; the
    # enum does not keep them, so read them from the generated source once.
    import ast
    import inspect

    import kio.schema.errors as mod

    out: dict[str, str] = {}
    try:
        tree = ast.parse(inspect.getsource(mod))
    except (OSError, TypeError):  # pragma: no cover - source not shipped
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ErrorCode":
            prev: str | None = None
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    prev = stmt.targets[0].id
                elif (
                    prev
                    and isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ):
                    out[prev] = stmt.value.value.strip()
                    prev = None
    return out


class KafkaError(Exception):
    """The broker refused a request (or part of one) with a Kafka error code."""

    def __init__(
        self,
        code: int,
        name: str | None = None,
        message: str | None = None,
        *,
        resource: str | None = None,
    ) -> None:
        self.code = int(code)
        self.name = name or error_name(code)
        self.message = message or error_description(code)
        self.resource = resource
        where = f"{resource}: " if resource else ""
        super().__init__(
            f"{where}{self.name}: {self.message}" if self.message else f"{where}{self.name}"
        )

    @property
    def retriable(self) -> bool:
        try:
            return bool(ErrorCode(self.code).retriable)
        except ValueError:
            return False


def raise_for_error(code: int, message: str | None = None, *, resource: str | None = None) -> None:
    """Raise `KafkaError` unless `code` is NONE (0)."""
    if code:
        raise KafkaError(int(code), message=message, resource=resource)
