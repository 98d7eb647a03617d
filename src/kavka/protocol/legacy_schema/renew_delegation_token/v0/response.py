"""Generated from Kafka 3.9.0-rc3 clients/src/main/resources/common/message/RenewDelegationTokenResponse.json, version 0; do not edit."""

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
class RenewDelegationTokenResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(39)
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    expiry_timestamp: TZAware = field(metadata={"kafka_type": "datetime_i64"})
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
