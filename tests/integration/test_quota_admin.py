"""Client quotas administered on a real `kavka server` (KIP-546): AlterClientQuotas (API 49) and
DescribeClientQuotas (API 48) over the wire with Kafka's schemas (neither confluent-kafka 2.16 nor
kafka-python has these calls, so raw requests), and the `kavka configs` CLI with kafka-configs.sh's
entity flags. The quotas live in the metadata log: they survive a restart.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from kio.schema.errors import ErrorCode

from kavka.protocol.api import ApiKey
from tests.broker_harness import KAVKA, BrokerProcess
from tests.raw_client import RawClient

P = "producer_byte_rate"
C = "consumer_byte_rate"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quota-admin"))
    b.format()
    b.start()
    yield b
    assert b.stop() == 0, b.log_text()


def kavka_configs(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KAVKA, "configs", *args, "--bootstrap-server", b.bootstrap], capture_output=True, text=True, timeout=60)


def alter(b: BrokerProcess, entries, *, validate_only: bool = False, version: int = 1):
    from kio.schema.alter_client_quotas.v1 import request as r

    req = r.AlterClientQuotasRequest(
        entries=tuple(
            r.EntryData(
                entity=tuple(r.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(r.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    )
    with RawClient(b.port) as c:
        if version == 1:
            return c.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, req)
        return c.call(ApiKey.ALTER_CLIENT_QUOTAS, 0, entries=req.entries, validate_only=validate_only)


def describe(b: BrokerProcess, components, *, strict: bool = False, version: int = 0):
    with RawClient(b.port) as c:
        from kavka.protocol import api
        from kavka.protocol.messages import nested

        comp = nested(api.request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version), "ComponentData")
        resp = c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version,
                      components=tuple(comp(entity_type=t, match_type=m, match=n) for t, m, n in components), strict=strict)
    if resp.error_code:
        return resp.error_code, resp.error_message
    return sorted(
        (tuple((e.entity_type, e.entity_name) for e in entry.entity), {v.key: v.value for v in entry.values})
        for entry in resp.entries
    ), None


def test_advertised_altered_and_described_over_the_wire(broker):
    with RawClient(broker.port) as c:
        versions = {k.api_key: (k.min_version, k.max_version) for k in c.call(ApiKey.API_VERSIONS, 0).api_keys}
    assert versions[ApiKey.DESCRIBE_CLIENT_QUOTAS] == (0, 1) and versions[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1)
    resp = alter(broker, [
        ((("user", "wire-alice"), ("client-id", "wire-app")), ((P, 1048576.0), (C, 2097152.0))),
        ((("user", "wire-bob"),), ((P, 1000.0),)),
        ((("user", "wire-carol"),), (("request_percentage", 50.0), ("controller_mutation_rate", 2.5))),
        ((("user", "wire-erin"),), (("request_percentage", 0.0),)),
        ((("client-id", "wire-x"), ("ip", "1.2.3.4")), ((P, 1.0),)),
    ])
    assert [(e.error_code, e.error_message) for e in resp.entries] == [
        (ErrorCode.none, None),
        (ErrorCode.none, None),
        (ErrorCode.none, None),
        (ErrorCode.invalid_request, "Quota request_percentage must be greater than 0"),
        (ErrorCode.invalid_request, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ]
    # validate_only checks and writes nothing; v0 is served too.
    resp = alter(broker, [((("user", "wire-dave"),), ((P, 10.0),))], validate_only=True, version=0)
    assert resp.entries[0].error_code == ErrorCode.none
    found, _ = describe(broker, [("user", 0, "wire-alice")])
    assert found == [((("client-id", "wire-app"), ("user", "wire-alice")), {P: 1048576.0, C: 2097152.0})]
    assert describe(broker, [("user", 0, "wire-alice")], strict=True) == ([], None)
    found, _ = describe(broker, [("user", 0, "wire-carol")], strict=True)
    assert found == [((("user", "wire-carol"),), {"request_percentage": 50.0, "controller_mutation_rate": 2.5})]
    assert describe(broker, [("user", 0, "wire-dave")], version=1) == ([], None)
    found, _ = describe(broker, [("user", 0, "wire-bob")], strict=True, version=1)
    assert found == [((("user", "wire-bob"),), {P: 1000.0})]
    assert describe(broker, [("user", 1, "x")]) == (
        ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
    # Removing the last key removes the entity.
    alter(broker, [((("user", "wire-bob"),), ((P, None),))])
    assert describe(broker, [("user", 0, "wire-bob")]) == ([], None)


def test_the_configs_cli(broker):
    both = ["--entity-type", "users", "--entity-name", "cli-alice", "--entity-type", "clients", "--entity-default"]
    res = kavka_configs(broker, "--alter", *both, "--add-config", f"{P}=1048576,{C}=2097152", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"entity": {"user": "cli-alice", "client-id": None}, "set": {P: 1048576.0, C: 2097152.0}, "deleted": []}
    res = kavka_configs(broker, "alter", "--entity-type", "users", "--entity-name", "cli-alice", "--add-config", f"{P}=500")
    assert res.returncode == 0 and "Completed updating config for user 'cli-alice'." in res.stdout, res.stdout + res.stderr
    res = kavka_configs(broker, "--describe", *both, "--json")
    assert json.loads(res.stdout) == [{"entity": {"client-id": None, "user": "cli-alice"}, "quotas": {C: 2097152.0, P: 1048576.0}}]
    # A type without a name lists every entity of that shape (kafka-configs.sh's strict filter).
    res = kavka_configs(broker, "describe", "--entity-type", "users", "--entity-type", "clients", "--json")
    assert {"entity": {"client-id": None, "user": "cli-alice"}, "quotas": {C: 2097152.0, P: 1048576.0}} in json.loads(res.stdout)
    res = kavka_configs(broker, "describe", "--entity-type", "users", "--entity-name", "cli-alice", "--json")
    assert json.loads(res.stdout) == [{"user": "cli-alice", "credentials": [], "quotas": {P: 500.0}}], res.stderr
    res = kavka_configs(broker, "describe", *both)
    assert "producer_byte_rate" in res.stdout and "1048576" in res.stdout and "client-id <default>" in res.stdout, res.stdout
    res = kavka_configs(broker, "alter", *both, "--delete-config", C)
    assert res.returncode == 0, res.stderr
    res = kavka_configs(broker, "describe", *both, "--json")
    assert json.loads(res.stdout)[0]["quotas"] == {P: 1048576.0}
    # Kafka's errors come back; the CLI's own checks stop it before a request.
    res = kavka_configs(broker, "alter", "--entity-type", "clients", "--entity-name", "x", "--add-config", f"{P}=1.5")
    assert res.returncode != 0 and "INVALID_REQUEST" in res.stderr and "producer_byte_rate cannot be a fractional value." in res.stderr
    carol = ["--entity-type", "users", "--entity-name", "cli-carol"]
    res = kavka_configs(broker, "alter", *carol, "--add-config", "request_percentage=12.5,controller_mutation_rate=0.5")
    assert res.returncode == 0, res.stderr
    res = kavka_configs(broker, "describe", *carol, "--json")
    assert json.loads(res.stdout)[0]["quotas"] == {"request_percentage": 12.5, "controller_mutation_rate": 0.5}, res.stdout
    res = kavka_configs(broker, "alter", *carol, "--add-config", "controller_mutation_rate=0")
    assert res.returncode != 0 and "Quota controller_mutation_rate must be greater than 0" in res.stderr
    res = kavka_configs(broker, "alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=10")
    assert res.returncode == 0, res.stderr
    res = kavka_configs(broker, "describe", "--entity-type", "ips", "--json")
    assert json.loads(res.stdout) == [{"entity": {"ip": "10.1.2.3"}, "quotas": {"connection_creation_rate": 10.0}}]
    res = kavka_configs(broker, "alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "a", "--add-config", f"{P}=1")
    assert res.returncode == 2 and "must be specified with each --entity-type" in res.stderr


def test_quotas_survive_a_restart(broker):
    alter(broker, [((("client-id", "durable"),), ((P, 4096.0),))])
    assert broker.stop() == 0
    broker.start()
    assert describe(broker, [("client-id", 0, "durable")]) == ([((("client-id", "durable"),), {P: 4096.0})], None)
