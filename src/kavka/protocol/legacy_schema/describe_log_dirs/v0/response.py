"""Generated from Kafka 3.9.0-rc3 clients/src/main/resources/common/message/DescribeLogDirsResponse.json, version 0; do not edit."""

# ruff: noqa
import datetime
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


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    partition_size: i64 = field(metadata={"kafka_type": "int64"})
    offset_lag: i64 = field(metadata={"kafka_type": "int64"})
    is_future_key: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[DescribeLogDirsPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    log_dir: str = field(metadata={"kafka_type": "string"})
    topics: tuple[DescribeLogDirsTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DescribeLogDirsResult, ...]
