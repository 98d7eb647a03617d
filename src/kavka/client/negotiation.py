"""Sans-I/O client protocol: ApiVersions handshake, version picking, one exchange.

No sockets here, so the blocking transport (`connection`) and a later asyncio
transport share it. Invariants:

- The version of a request is the version of its kio class
  (``entity.__version__``); callers pick it with `pick_version` -- the highest
  version both this client (`CLIENT_VERSIONS`) and the broker (its ApiVersions
  answer) speak -- and build the entity with `request_class(key, version)`.
- ApiVersions (KIP-511): the client sends its newest version; a broker that
  does not know it answers with a *v0* body carrying UNSUPPORTED_VERSION and
  its own version list. ApiVersions responses always use response header v0.
  `decode_api_versions` reads the list from either form.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kavka.client.errors import KafkaProtocolError
from kavka.protocol import api
from kavka.protocol.framing import ProtocolError, encode_entity, encode_request, read_response
from kavka.protocol.messages import make

API_VERSIONS = int(api.ApiKey.API_VERSIONS)
# The ApiVersions version sent first; kio carries schemas up to v4, but v3 is
# what every broker since Kafka 2.4 knows (KIP-511), so brokers rarely refuse.
HANDSHAKE_VERSION = 3
CLIENT_SOFTWARE_NAME = api.OWN_CLIENT_SOFTWARE_NAME  # kavka's own APIs are advertised to this name
CLIENT_SOFTWARE_VERSION = "0.1.0"

# What this client can build and parse: the same table the broker serves,
# since both are bounded by the kio schemas kavka has tested.
# Produce v0-v2 are advertised by the broker only for old clients' sake
# (protocol.legacy); this client never sends them.
CLIENT_VERSIONS: Mapping[int, tuple[int, int]] = {
    **api.SUPPORTED,
    api.ApiKey.PRODUCE: (max(api.SUPPORTED[api.ApiKey.PRODUCE][0], 3), api.SUPPORTED[api.ApiKey.PRODUCE][1]),
}

BrokerVersions = Mapping[int, tuple[int, int]]


def request_class(api_key: int, version: int) -> type:
    """kio's request class for (api_key, version)."""
    return api.request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type:
    return api.response_schema(api_key, version)


def pick_version(
    broker: BrokerVersions,
    api_key: int,
    wanted_max: int | None = None,
    *,
    client: BrokerVersions = CLIENT_VERSIONS,
) -> int:
    """Highest version in client ∩ broker (∩ [.., wanted_max]); KafkaProtocolError if none."""
    ours = client.get(api_key)
    theirs = broker.get(api_key)
    name = _api_name(api_key)
    if ours is None:
        raise KafkaProtocolError(f"this client does not implement {name} (api key {api_key})")
    if theirs is None:
        raise KafkaProtocolError(f"the broker does not support {name} (api key {api_key})")
    hi = min(ours[1], theirs[1], wanted_max if wanted_max is not None else ours[1])
    lo = max(ours[0], theirs[0])
    if hi < lo:
        raise KafkaProtocolError(
            f"no common version of {name}: client {ours[0]}-{ours[1]}"
            f"{f' (at most {wanted_max})' if wanted_max is not None else ''}, broker {theirs[0]}-{theirs[1]}"
        )
    return hi


def _api_name(api_key: int) -> str:
    try:
        return api.ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def api_versions_request(version: int) -> Any:
    return make(
        request_class(API_VERSIONS, version),
        client_software_name=CLIENT_SOFTWARE_NAME,
        client_software_version=CLIENT_SOFTWARE_VERSION,
    )


def encode(entity: Any, *, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame (size prefix, header v1/v2, body) for a kio request entity."""
    key, version = int(entity.__api_key__), int(entity.__version__)
    return encode_request(
        api_key=key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
        body=encode_entity(entity),
        flexible=api.is_flexible(key, version),
    )


def decode(frame: bytes | memoryview, api_key: int, version: int, *, correlation_id: int) -> Any:
    """Decode a response frame (without its size prefix) to the request's version."""
    try:
        got, body = read_response(
            frame,
            response_class(api_key, version),
            flexible_header=api.response_header_flexible(api_key, version),
        )
    except ProtocolError as e:
        raise KafkaProtocolError(
            f"cannot decode {_api_name(api_key)} v{version} response: {e}"
        ) from e
    except struct.error as e:
        raise KafkaProtocolError(f"truncated {_api_name(api_key)} response: {e}") from e
    if got != correlation_id:
        raise KafkaProtocolError(f"response correlation id {got}, expected {correlation_id}")
    return body


def decode_api_versions(
    frame: bytes | memoryview, version: int, *, correlation_id: int
) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error_code, {api_key: (min, max)}) from an ApiVersions response frame.

    The body starts with error_code in every version; on UNSUPPORTED_VERSION
    the broker writes the body as v0 whatever we asked (KIP-511).
    """
    if len(frame) < 6:
        raise KafkaProtocolError("ApiVersions response too short")
    (error_code,) = struct.unpack_from(">h", frame, 4)
    body_version = 0 if error_code == ErrorCode.unsupported_version else version
    resp = decode(frame, API_VERSIONS, body_version, correlation_id=correlation_id)
    table = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
    return int(resp.error_code), table


def retry_api_versions_version(broker: BrokerVersions) -> int:
    """ApiVersions version to retry with after UNSUPPORTED_VERSION: the newest
    both speak if the refusal listed ApiVersions' range, else v0."""
    try:
        return pick_version(broker, API_VERSIONS, HANDSHAKE_VERSION)
    except KafkaProtocolError:
        return 0
