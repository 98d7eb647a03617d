"""The per-API authorization declarations (broker.api_authorization): one for every API the
broker serves, and the whole-request error responses they answer with."""

from __future__ import annotations

import pytest

from kavka.broker.api_authorization import NEEDS, Checked, denied_response
from kavka.broker.apis import KafkaApis
from kavka.common import ErrorCode, ResourceType
from kavka.protocol import api
from kavka.protocol.framing import encode_entity
from tests.raw_client import minimal


class _Node:
    pass


def test_every_served_api_declares_what_it_needs() -> None:
    served = set(KafkaApis(_Node())._table)  # type: ignore[arg-type]
    assert served - set(NEEDS) == set(), "an API without an authorization declaration"
    assert set(NEEDS) - served == set(), "a declaration for an API kavka does not serve"


def test_only_the_authentication_apis_need_nothing() -> None:
    none = {k for k, n in NEEDS.items() if n.checked is Checked.NONE}
    assert none == {api.ApiKey.API_VERSIONS, api.ApiKey.SASL_HANDSHAKE, api.ApiKey.SASL_AUTHENTICATE}


def test_cluster_checked_apis_name_an_operation_on_the_cluster() -> None:
    for key, need in NEEDS.items():
        if need.checked is Checked.CLUSTER:
            assert need.resource_type is ResourceType.CLUSTER and need.operation is not None, key
            assert need.error == ErrorCode.cluster_authorization_failed, key


def _codes(entity: object) -> list[int]:
    """Every error_code in a response, nested ones included."""
    out: list[int] = []
    for name in getattr(entity, "__dataclass_fields__", {}):
        v = getattr(entity, name)
        if name == "error_code":
            out.append(int(v))
        for item in v if isinstance(v, tuple) else (v,):
            if hasattr(item, "__dataclass_fields__"):
                out.extend(_codes(item))
    return out


CLUSTER_KEYS = [(k, v) for k, n in sorted(NEEDS.items()) if n.checked is Checked.CLUSTER
                for v in range(api.SUPPORTED[k][0], api.SUPPORTED[k][1] + 1)]


@pytest.mark.parametrize(("key", "version"), CLUSTER_KEYS)
def test_denied_response_carries_the_error_and_encodes(key: int, version: int) -> None:
    request = minimal(api.request_schema(key, version))
    resp = denied_response(key, api.response_schema(key, version), request)
    codes = _codes(resp)
    if key == api.ApiKey.DESCRIBE_LOG_DIRS and version < 3:
        # No error code before v3: Kafka answers an unauthorized DescribeLogDirs with no results.
        assert resp.results == ()
        return
    assert codes and set(codes) == {ErrorCode.cluster_authorization_failed}, (key, version, resp)
    encode_entity(resp)
