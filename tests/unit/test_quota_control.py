"""Client quotas in the metadata log: ClientQuotaRecord through MetadataDelta and snapshots,
AlterClientQuotas validated with Kafka's errors, DescribeClientQuotas's filter semantics, and
the eight-level precedence of Kafka's DefaultQuotaCallback (controller.quota_control, kavka.quota), and Kafka's throttle time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kavka.controller.quota_control import (
    MatchType,
    QuotaAlteration,
    QuotaFilterError,
    alter_client_quotas,
    describe_client_quotas,
)
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.snapshot import image_records
from kavka.quota import ClientQuotaManager, ConnectionRateQuotaManager, quota_entity_for
from tests.unit.test_quota_request_mutation import LEVELS

P = "producer_byte_rate"
C = "consumer_byte_rate"


def replay(image: MetadataImage, records) -> MetadataImage:
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(mr.decode(*mr.encode(r)), image.offset + 1 + i)  # through the on-disk form
    return d.apply()


def alter(image: MetadataImage, *alts: QuotaAlteration) -> tuple[MetadataImage, list]:
    records, results = alter_client_quotas(image, alts)
    return replay(image, records), results


def test_set_change_remove_and_snapshot():
    image, results = alter(
        MetadataImage(),
        QuotaAlteration((("client-id", "app"), ("user", "alice")), ((P, 1048576.0), (C, 2097152.0))),
        QuotaAlteration((("user", None),), ((P, 500.0),)),
    )
    assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
    both = (("client-id", "app"), ("user", "alice"))
    assert dict(image.client_quotas[both]) == {P: 1048576.0, C: 2097152.0}
    assert dict(image.client_quotas[(("user", None),)]) == {P: 500.0}
    # The same value again writes nothing; a removal of an unset key writes nothing.
    records, results = alter_client_quotas(
        image, [QuotaAlteration((("user", "alice"), ("client-id", "app")), ((P, 1048576.0), ("consumer_byte_rate", None)))]
    )
    assert results[0].error == ErrorCode.none and [r.remove for r in records] == [True]
    image = replay(image, records)
    assert dict(image.client_quotas[both]) == {P: 1048576.0}
    # A snapshot rebuilds the same quotas.
    assert replay(MetadataImage(), image_records(image)).client_quotas == image.client_quotas
    # Removing the last key removes the entity.
    image, _ = alter(image, QuotaAlteration(both, ((P, None),)))
    assert both not in image.client_quotas


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ((), ((P, 1.0),), "Invalid empty client quota entity"),
        ((("user", "a"), ("user", "b")), ((P, 1.0),), "Invalid client quota entity, duplicate entity entry user"),
        ((("group", "a"),), ((P, 1.0),), "Unhandled client quota entity type: group"),
        ((("user", ""),), ((P, 1.0),), "Empty user not supported"),
        ((("ip", "1.2.3.4"), ("user", "a")), ((P, 1.0),), "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        ((("ip", "not an ip"),), (("connection_creation_rate", 1.0),), "not an ip is not a valid IP or resolvable host."),
        ((("user", "a"),), (("connection_creation_rate", 1.0),), "Invalid configuration key connection_creation_rate"),
        ((("ip", None),), ((P, 1.0),), "Invalid configuration key producer_byte_rate"),
        ((("user", "a"),), ((P, 0.0),), "Quota producer_byte_rate must be greater than 0"),
        ((("user", "a"),), ((P, 1.5),), "producer_byte_rate cannot be a fractional value."),
        ((("user", "a"),), ((P, 2.0**64),), "Proposed value for producer_byte_rate is too large for a LONG."),
        ((("user", "a"),), ((P, 1.0), (P, 2.0)), "Duplicate quota key producer_byte_rate not updating quota for this entity ClientQuotaEntity(entries={user=a})"),
        ((("user", "a"),), (("request_percentage", 0.0),), "Quota request_percentage must be greater than 0"),
        ((("user", None),), (("controller_mutation_rate", -5.0),), "Quota controller_mutation_rate must be greater than 0"),
        ((("ip", None),), (("request_percentage", 5.0),), "Invalid configuration key request_percentage"),
        ((("ip", "::1"),), (("connection_creation_rate", 2.5),), "connection_creation_rate cannot be a fractional value."),
        ((("ip", None),), (("connection_creation_rate", 2.0**31),), "Proposed value for connection_creation_rate is too large for an INT."),
    ],
)
def test_kafkas_validation_errors(entity, ops, message):
    records, results = alter_client_quotas(MetadataImage(), [QuotaAlteration(entity, ops)])
    assert records == []
    assert results[0].error == ErrorCode.invalid_request
    assert results[0].message.startswith(message)


def test_the_double_quotas_take_fractions():
    # Kafka's QuotaConfig: request_percentage and controller_mutation_rate are DOUBLE.
    entity = (("client-id", "c"), ("user", "u"))
    records, results = alter_client_quotas(
        MetadataImage(), [QuotaAlteration(entity, (("request_percentage", 12.5), ("controller_mutation_rate", 0.5)))]
    )
    assert [r.error for r in results] == [ErrorCode.none]
    assert records == [
        mr.ClientQuotaRecord(entity, "request_percentage", 12.5),
        mr.ClientQuotaRecord(entity, "controller_mutation_rate", 0.5),
    ]


def test_the_largest_long_is_compared_as_a_double_as_kafka_does():
    # (double) Long.MAX_VALUE == 2^63, so Kafka's `value > Long.MAX_VALUE` lets 2^63 through.
    records, results = alter_client_quotas(MetadataImage(), [QuotaAlteration((("user", "a"),), ((P, 2.0**63),))])
    assert results[0].error == ErrorCode.none
    assert records == [mr.ClientQuotaRecord((("user", "a"),), P, 2.0**63)]


def test_a_bad_entry_fails_alone_and_a_duplicate_entity_is_ignored():
    ok = QuotaAlteration((("user", "a"),), ((P, 10.0),))
    bad = QuotaAlteration((("client-id", "x"),), (("nope", 1.0),))
    records, results = alter_client_quotas(MetadataImage(), [ok, bad, QuotaAlteration((("user", "a"),), ((C, 5.0),))])
    assert [r.error for r in results] == [ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert results[0].message == "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"
    assert records == [mr.ClientQuotaRecord((("user", "a"),), P, 10.0)]


def _image() -> MetadataImage:
    image, _ = alter(
        MetadataImage(),
        QuotaAlteration((("user", "alice"),), ((P, 1.0),)),
        QuotaAlteration((("user", None),), ((P, 2.0),)),
        QuotaAlteration((("user", "alice"), ("client-id", "app")), ((P, 3.0),)),
        QuotaAlteration((("client-id", "app"),), ((P, 4.0),)),
        QuotaAlteration((("client-id", None),), ((P, 5.0),)),
    )
    return image


def _names(found) -> list:
    return sorted((tuple(e) for e, _ in found), key=repr)


def test_describe_filters():
    image = _image()
    E, D, S = MatchType.EXACT, MatchType.DEFAULT, MatchType.SPECIFIED
    assert len(describe_client_quotas(image, [], strict=False)) == 5
    assert describe_client_quotas(image, [], strict=True) == []
    assert _names(describe_client_quotas(image, [("user", E, "alice")], strict=False)) == [
        (("client-id", "app"), ("user", "alice")),
        (("user", "alice"),),
    ]
    assert _names(describe_client_quotas(image, [("user", E, "alice")], strict=True)) == [(("user", "alice"),)]
    assert _names(describe_client_quotas(image, [("user", D, None)], strict=True)) == [(("user", None),)]
    assert _names(describe_client_quotas(image, [("client-id", S, None)], strict=True)) == [
        (("client-id", "app"),),
        (("client-id", None),),
    ]
    found = describe_client_quotas(image, [("user", S, None), ("client-id", E, "app")], strict=True)
    assert [(e, dict(v)) for e, v in found] == [((("client-id", "app"), ("user", "alice")), {P: 3.0})]
    for components, error in [
        ([("user", E, None)], ErrorCode.invalid_request),
        ([("user", D, "x")], ErrorCode.invalid_request),
        ([("user", S, "x")], ErrorCode.invalid_request),
        ([("user", 7, None)], ErrorCode.invalid_request),
        ([("user", S, None), ("user", S, None)], ErrorCode.invalid_request),
        ([("", S, None)], ErrorCode.invalid_request),
        ([("group", S, None)], ErrorCode.unsupported_version),
        ([("ip", S, None), ("user", S, None)], ErrorCode.invalid_request),
    ]:
        with pytest.raises(QuotaFilterError) as e:
            describe_client_quotas(image, components, strict=False)
        assert e.value.error == error


def test_eight_level_precedence():
    """Each level is removed in turn: the next one in Kafka's order takes over, with the rate
    shared as Kafka's quota metric tags say."""
    levels = LEVELS
    image, results = alter(MetadataImage(), *[QuotaAlteration(e, ((P, float(i + 1)),)) for i, (e, _) in enumerate(levels)])
    assert all(r.error == ErrorCode.none for r in results)
    for i, (entity, tags) in enumerate(levels):
        assert quota_entity_for(image.client_quotas, P, "alice", "app") == (entity, tags)
        assert image.client_quotas[entity][P] == i + 1
        assert quota_entity_for(image.client_quotas, C, "alice", "app") is None  # another key
        image, _ = alter(image, QuotaAlteration(entity, ((P, None),)))
    assert quota_entity_for(image.client_quotas, P, "alice", "app") is None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttle_time_is_kafkas():
    """Kafka's QuotaUtils.throttleTime: (rate - quota) / quota * window size, the window being at
    least num_windows - 1 whole windows (Rate.windowSize)."""
    clock = Clock()
    image, _ = alter(MetadataImage(), QuotaAlteration((("user", "alice"),), ((P, 1000.0),)))
    m = ClientQuotaManager(P, num_windows=3, window_s=1.0, clock=clock)
    # 1500 bytes at once: measured over 2 windows (3 - 1): 750 B/s, under 1000.
    assert m.record(image.client_quotas, "alice", "app", 1500) == 0
    # 1500 more: 3000 B over 2 s = 1500 B/s; throttle (1500 - 1000) / 1000 * 2 s = 1000 ms.
    assert m.record(image.client_quotas, "alice", "app", 1500) == 1000
    # Another client of alice's shares the user-level rate (Kafka's quota metric tags (alice, "")).
    clock.now += 1.0
    assert m.rate(("alice", "")) == 1500.0  # 3000 B over 2 s: now one whole window in, still 2
    assert m.record(image.client_quotas, "alice", "other", 0) == 1000
    # No quota for bob: nothing recorded, never throttled.
    assert m.record(image.client_quotas, "bob", "app", 10**9) == 0 and m.rate(("bob", "")) == 0.0
    # An unrecorded (throttled, unsent) response takes its bytes back.
    m.unrecord(image.client_quotas, "alice", "app", 3000)
    assert m.record(image.client_quotas, "alice", "app", 0) == 0
    # The largest response the quota admits at once: quota * (num_windows - 1) windows.
    assert m.max_value_in_window(image.client_quotas, "alice", "x") == 2000
    assert m.max_value_in_window(image.client_quotas, "bob", "x") is None
    # After the windows pass, the rate is back to nothing.
    clock.now += 10.0
    assert m.record(image.client_quotas, "alice", "app", 100) == 0


def test_idle_rates_expire():
    clock = Clock()
    image, _ = alter(MetadataImage(), QuotaAlteration((("client-id", None),), ((C, 10.0),)))
    m = ClientQuotaManager(C, num_windows=2, window_s=1.0, clock=clock, expire_s=5.0)
    m.record(image.client_quotas, "u", "a", 5)
    clock.now += 10.0
    m.record(image.client_quotas, "u", "b", 5)
    assert m.rate(("", "a")) == 0.0 and m.rate(("", "b")) > 0


_names_st = st.one_of(st.none(), st.sampled_from(["", "alice", "app", "1.2.3.4", "::1", "host.example"]), st.text(max_size=8))
_types_st = st.sampled_from(["user", "client-id", "ip", "", "group", "USER"])
_keys_st = st.sampled_from([P, C, "request_percentage", "controller_mutation_rate", "connection_creation_rate", "", "x"])
_values_st = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1.0, 1.5, 2.0**63, 1048576.0])
)


@settings(max_examples=300, deadline=None)
@given(
    alterations=st.lists(
        st.builds(
            QuotaAlteration,
            st.lists(st.tuples(_types_st, _names_st), max_size=4).map(tuple),
            st.lists(st.tuples(_keys_st, _values_st), max_size=4).map(tuple),
        ),
        max_size=5,
    ),
    components=st.lists(st.tuples(_types_st, st.integers(-1, 4), _names_st), max_size=4),
    strict=st.booleans(),
)
def test_malformed_alterations_and_filters_are_answered_never_raised(alterations, components, strict):
    """Whatever AlterClientQuotas and DescribeClientQuotas carry, the answer is a result per
    entity (or a QuotaFilterError), and the image only ever holds valid, positive quotas."""
    records, results = alter_client_quotas(MetadataImage(), alterations)
    assert len(results) <= len(alterations) and (alterations == [] or results)
    image = replay(MetadataImage(), records)
    for entity, values in image.client_quotas.items():
        types = [t for t, _ in entity]
        assert types == sorted(set(types)) and (set(types) <= {"user", "client-id"} or types == ["ip"])
        keys = {"connection_creation_rate"} if types == ["ip"] else {P, C, "request_percentage", "controller_mutation_rate"}
        integral = {"connection_creation_rate", P, C}  # the DOUBLE keys take fractions (Kafka's QuotaConfig)
        assert all(k in keys and v > 0 and (k not in integral or v == int(v)) for k, v in values.items())
    try:
        found = describe_client_quotas(image, components, strict=strict)
    except QuotaFilterError as e:
        assert e.error in (ErrorCode.invalid_request, ErrorCode.unsupported_version)
    else:
        assert all(entity in image.client_quotas for entity, _ in found)


def test_connection_creation_rate_per_ip():
    """KIP-612: an IP's own quota, else the default IP's; a throttled connection is not counted,
    and its throttle time is at most one window."""
    clock = Clock()
    image, results = alter(
        MetadataImage(),
        QuotaAlteration((("ip", None),), (("connection_creation_rate", 2.0),)),
        QuotaAlteration((("ip", "0:0::1"),), (("connection_creation_rate", 100.0),)),
    )
    assert [r.error for r in results] == [ErrorCode.none, ErrorCode.none]
    m = ConnectionRateQuotaManager(num_windows=2, window_s=1.0, clock=clock)
    # Two connections within the first window: 2 per (at least) 1 s, at the quota.
    assert [m.record(image.client_quotas, "10.0.0.1") for _ in range(2)] == [0, 0]
    # The third: 3/s, (3 - 2) / 2 * 1 s = 500 ms; taken back out, so the fourth is the same.
    assert m.record(image.client_quotas, "10.0.0.1") == 500
    assert m.record(image.client_quotas, "10.0.0.1") == 500
    # Another IP has its own rate; ::1 has its own quota (the entity matched as an address).
    assert m.record(image.client_quotas, "10.0.0.2") == 0
    assert all(m.record(image.client_quotas, "::1") == 0 for _ in range(50))
    # Two windows later the rate has room again.
    clock.now += 2.0
    assert m.record(image.client_quotas, "10.0.0.1") == 0
    # Without any connection quota nothing is throttled.
    assert ConnectionRateQuotaManager(2, 1.0, clock).record(MetadataImage().client_quotas, "10.0.0.1") == 0
