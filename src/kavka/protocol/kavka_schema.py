"""kavka's own wire messages: APIs Kafka does not have, declared the way kio declares Kafka's.

CreateReplicaPlacement (KIP-879, which Kafka never shipped): "where would the cluster's replica
placer put N partitions of replication factor R?", answered by the active controller without
creating anything. The KIP asked for api key 68, which Kafka has since given to
ConsumerGroupHeartbeat (KIP-848). kavka uses key 1000: the key is an int16 in the request header,
Kafka's keys end below 100 today and grow by one per API, so 1000 stays clear of every future
Kafka API for a long time, and a Kafka broker answers it as an unknown API (it closes the
connection) instead of misreading it. Version 0 only, flexible (compact strings and arrays, tagged
fields, request header v2 / response header v1), like every new Kafka API since KIP-482.

    CreateReplicaPlacementRequest (v0)
      NumPartitions         int32    partitions to place (>= 1)
      ReplicationFactor     int16    replicas per partition (>= 1)
      ForceSimplePlacement  bool     use the rack-unaware `simple` placer (kafka-reassign-partitions
                                     --disable-rack-aware) instead of the configured one
      NodeIds               []int32  brokers to place on; empty: every unfenced broker
      TimeoutMs             int32    how long the forwarding broker waits for the controller
    CreateReplicaPlacementResponse (v0)
      ThrottleTimeMs        int32
      ErrorCode             int16    INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS,
                                     INVALID_REPLICA_ASSIGNMENT, BROKER_NOT_AVAILABLE, NOT_CONTROLLER...
      ErrorMessage          string?  why, when ErrorCode is not NONE
      Partitions            []       one per partition, in order
        PartitionIndex      int32
        Replicas            []int32  preferred leader first

`SCHEMAS` maps (api key, version) -> (request class, response class); `protocol.api` serves them
next to kio's. Pure data: imported by the protocol layer, the broker and the CLI client.
"""

# No `from __future__ import annotations`: kio reads the field types at run time.
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta

CREATE_REPLICA_PLACEMENT = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateReplicaPlacementRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CREATE_REPLICA_PLACEMENT)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    replication_factor: i16 = field(metadata={"kafka_type": "int16"})
    force_simple_placement: bool = field(metadata={"kafka_type": "bool"}, default=False)
    node_ids: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionPlacement:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CREATE_REPLICA_PLACEMENT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateReplicaPlacementResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CREATE_REPLICA_PLACEMENT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    partitions: tuple[PartitionPlacement, ...] = ()


SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (CREATE_REPLICA_PLACEMENT, 0): (CreateReplicaPlacementRequest, CreateReplicaPlacementResponse),
}
