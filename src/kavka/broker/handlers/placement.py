"""CreateReplicaPlacement (kavka's api key 1000, KIP-879): where would the placer put a topic?

Every broker answers it by asking the active controller (`node.controller`, which forwards over
the controller listener when this node is not the controller); the controller runs the configured
`broker.replica.placer` over the current image and creates nothing. The message layout is in
`protocol.kavka_schema`. Called on the event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kavka.controller.quorum_controller import UNAVAILABLE, unavailable_result
from kavka.controller.results import ApiResult
from kavka.protocol.kavka_schema import (
    CreateReplicaPlacementRequest,
    CreateReplicaPlacementResponse,
    PartitionPlacement,
)

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


def placement_response(result: ApiResult, assignment: Sequence[Sequence[int]]) -> CreateReplicaPlacementResponse:
    return CreateReplicaPlacementResponse(
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        error_message=result.message,
        partitions=tuple(PartitionPlacement(partition_index=p, replicas=tuple(r)) for p, r in enumerate(assignment)),
    )


async def handle_create_replica_placement(node: BrokerNode, ctx: RequestContext, req: CreateReplicaPlacementRequest) -> Any:
    timeout_s = req.timeout.total_seconds()
    try:
        result, assignment = await node.controller.create_replica_placement(
            req.num_partitions,
            req.replication_factor,
            force_simple=req.force_simple_placement,
            node_ids=list(req.node_ids),
            timeout_s=timeout_s if timeout_s > 0 else None,
        )
    except UNAVAILABLE as e:
        result, assignment = unavailable_result(e), []
    return placement_response(result, assignment)
