"""The authorizer log (broker.authorization.DenialLog): denial lines on `kavka.authorizer`, at
most N per principal per second, the dropped ones counted on the next line; clock injected."""

from __future__ import annotations

import logging

from kavka.broker.authorization import DenialLog, authorized_operations, to_32bit_field
from kavka.common import AclOperation, ResourceType


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _deny(dl: DenialLog, principal: str = "User:mallory") -> bool:
    return dl.denied(principal, "10.0.0.9", AclOperation.WRITE, ResourceType.TOPIC, "t", "Produce")


def test_a_denial_names_principal_host_operation_resource_and_api(caplog) -> None:
    dl = DenialLog(per_second=3, clock=Clock())
    with caplog.at_level(logging.INFO, logger="kavka.authorizer"):
        assert _deny(dl)
    [rec] = caplog.records
    assert rec.name == "kavka.authorizer" and rec.levelno == logging.INFO
    msg = rec.getMessage()
    for part in ("User:mallory", "10.0.0.9", "Write", "Topic:LITERAL:t", "Produce"):
        assert part in msg, msg


def test_at_most_n_lines_per_second_per_principal_and_the_rest_are_counted(caplog) -> None:
    clock = Clock()
    dl = DenialLog(per_second=3, clock=clock)
    with caplog.at_level(logging.INFO, logger="kavka.authorizer"):
        written = [_deny(dl) for _ in range(100)]
        assert written.count(True) == 3
        assert _deny(dl, "User:other")  # another principal has its own budget
        clock.now += 0.99
        assert not _deny(dl)
        clock.now += 0.02
        assert _deny(dl)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 5
    assert "98 more denials" in lines[-1], lines[-1]
    assert "more denials" not in lines[0]


def test_authorized_operations_is_kafkas_32_bit_field() -> None:
    assert to_32bit_field([AclOperation.READ, AclOperation.DESCRIBE]) == (1 << 3) | (1 << 8)

    class NoAuthorizer:
        def authorizer(self) -> None:
            return None

    # no authorizer: every operation the resource type supports (Kafka's AclEntry.supportedOperations)
    group = authorized_operations(NoAuthorizer(), None, ResourceType.GROUP, "g")  # type: ignore[arg-type]
    assert group == to_32bit_field([AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS])
