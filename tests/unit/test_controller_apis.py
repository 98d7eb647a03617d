"""The controller listener's table: every RPC in RPCS has exactly one handler, and handle()
dispatches by api key (the heartbeat gets the connection it came over)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from kio.schema.broker_heartbeat.v1 import request as bh_req

from kavka.broker.controller_apis import RPCS, ControllerApis
from kavka.common import ErrorCode
from kavka.controller.quorum_controller import HeartbeatReply


class _FakeController:
    def __init__(self) -> None:
        self.heartbeats: list[dict[str, Any]] = []

    async def broker_heartbeat(self, **kwargs: Any) -> HeartbeatReply:
        self.heartbeats.append(kwargs)
        return HeartbeatReply(ErrorCode.none, is_caught_up=True, is_fenced=False)


def test_every_rpc_has_one_handler_and_nothing_else_does() -> None:
    apis = ControllerApis(_FakeController(), cluster_id="c")  # type: ignore[arg-type]
    assert set(apis.handlers) == set(RPCS)
    for key, handler in apis.handlers.items():
        assert inspect.iscoroutinefunction(handler), key


def test_rpcs_are_keyed_by_their_messages_api_key() -> None:
    for key, (req, resp) in RPCS.items():
        assert req.__api_key__ == resp.__api_key__ == key
        assert req.__version__ == resp.__version__


def test_a_heartbeat_is_dispatched_with_its_connection() -> None:
    qc = _FakeController()
    apis = ControllerApis(qc, cluster_id="c")  # type: ignore[arg-type]
    req = bh_req.BrokerHeartbeatRequest(
        broker_id=2,
        broker_epoch=7,
        current_metadata_offset=10,
        want_fence=False,
        want_shut_down=False,
        offline_log_dirs=(),
    )
    conn = object()
    resp = asyncio.run(apis.handle(req.__api_key__, req, connection=conn))
    assert (resp.error_code, resp.is_caught_up, resp.is_fenced) == (ErrorCode.none, True, False)
    [call] = qc.heartbeats
    assert (call["broker_id"], call["broker_epoch"], call["connection"]) == (2, 7, conn)
