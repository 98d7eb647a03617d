"""The console's pure parts: how record bytes render, the rack tree, and the parsing of what a
user types (a readable UserError, never a traceback)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from kavka.client.admin import BrokerInfo  # noqa: E402
from kavka.console.views import (  # noqa: E402
    Throughput,
    UserError,
    parse_int,
    parse_timestamp,
    parse_topic_form,
    rack_tree,
    render_bytes,
)


@pytest.mark.parametrize(("data", "kind", "text"), [
    (None, "null", "null"),
    (b"hello", "text", "hello"),
    (b'{"a":[1,2]}', "json", '{\n  "a": [\n    1,\n    2\n  ]\n}'),
    (b"{not json", "text", "{not json"),
    (b"\x00\xff\x10", "hex", "00 ff 10"),
    (b"bell\x07", "hex", "62 65 6c 6c 07"),
    (b"two\nlines\tok", "text", "two\nlines\tok"),
    ("zaž".encode(), "text", "zaž"),
])
def test_bytes_render_as_null_json_text_or_hex(data: bytes | None, kind: str, text: str) -> None:
    assert render_bytes(data) == {"kind": kind, "text": text}


def test_racks_form_a_tree_by_their_path() -> None:
    brokers = [BrokerInfo(1, "h", 1, "/dc1/r1"), BrokerInfo(2, "h", 2, "/dc1/r2"), BrokerInfo(3, "h", 3, "/dc1/r1"),
               BrokerInfo(4, "h", 4, None)]
    assert rack_tree(brokers) == {"dc1": {"r1": {"brokers": [1, 3]}, "r2": {"brokers": [2]}}, "(no rack)": {"brokers": [4]}}


def test_timestamps_are_milliseconds_or_iso_8601_utc_by_default() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    assert parse_timestamp("2023-11-14T22:13:20") == 1700000000000
    assert parse_timestamp("2023-11-14T23:13:20.5+01:00") == 1700000000500
    with pytest.raises(UserError, match="ISO-8601"):
        parse_timestamp("yesterday")


def test_bad_numbers_and_forms_are_user_errors_with_a_message() -> None:
    assert parse_int(" 42 ", "offset", minimum=0) == 42
    with pytest.raises(UserError, match="The offset must be a whole number, got '4x'."):
        parse_int("4x", "offset")
    with pytest.raises(UserError, match="at least 0, got -1"):
        parse_int("-1", "offset", minimum=0)
    t = parse_topic_form({"name": " t1 ", "partitions": "3", "replication_factor": "", "configs": "a=1\n\n b = 2 "})
    assert (t.name, t.partitions, t.replication_factor, t.configs) == ("t1", 3, -1, {"a": "1", "b": "2"})
    with pytest.raises(UserError, match="needs a name"):
        parse_topic_form({"name": " "})
    with pytest.raises(UserError, match="key=value"):
        parse_topic_form({"name": "t", "configs": "oops"})
    with pytest.raises(UserError, match="at least 1"):
        parse_topic_form({"name": "t", "partitions": "0"})


def test_throughput_is_the_log_end_difference_over_the_window() -> None:
    t = Throughput()
    t.add(100.0, {("a", 0): 10, ("a", 1): 5})
    assert t.rates({("a", 0): 1, ("a", 1): 2}) is None  # one sample: nothing to compare yet
    t.add(102.0, {("a", 0): 30, ("a", 1): 5, ("b", 0): 4})  # b is new: it started at 0
    r = t.rates({("a", 0): 1, ("a", 1): 2, ("b", 0): 2})
    assert r == {"seconds": 2.0,
                 "topics": [{"name": "a", "records": 20, "rate": 10.0}, {"name": "b", "records": 4, "rate": 2.0}],
                 "brokers": [{"id": 1, "records": 20, "rate": 10.0}, {"id": 2, "records": 4, "rate": 2.0}]}
    t.add(200.0, {("a", 0): 40})  # samples older than the window are dropped, the newest two kept
    assert [s[0] for s in t.samples] == [102.0, 200.0]


def test_a_sasl_command_config_without_credentials_is_the_console_log_in_mode_and_refused_elsewhere() -> None:
    from kavka.client_properties import CommandConfigError, client_security

    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}
    base = client_security(props, login=True)
    assert (base.protocol, base.mechanism, base.sasl) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", None)
    with pytest.raises(CommandConfigError, match="sasl.jaas.config: missing"):
        client_security(props)  # the CLI and the Spark connector still need the credentials
    from kavka.console.app import with_credentials

    user = with_credentials(base, "sid", "pw")
    assert (user.protocol, user.mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512") and user.sasl is not None
    assert "pw" not in repr(user)
