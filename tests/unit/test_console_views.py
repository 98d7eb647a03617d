"""The console's pure parts: how record bytes render, the rack tree, and the parsing of what a
user types (a readable UserError, never a traceback)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from kavka.client.admin import BrokerInfo  # noqa: E402
from kavka.console.views import (  # noqa: E402
    LagHistory,
    Scraped,
    Throughput,
    UserError,
    broker_state,
    parse_int,
    parse_metrics_urls,
    parse_timestamp,
    parse_topic_form,
    rack_tree,
    render_bytes,
    sparkline,
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
    assert r == {"seconds": 2.0, "bytes": False, "unreachable": [],
                 "topics": [{"name": "a", "records": 20, "rate": 10.0}, {"name": "b", "records": 4, "rate": 2.0}],
                 "brokers": [{"id": 1, "records": 20, "rate": 10.0}, {"id": 2, "records": 4, "rate": 2.0}]}
    t.add(200.0, {("a", 0): 40})  # samples older than the window are dropped, the newest two kept
    assert [s[0] for s in t.samples] == [102.0, 200.0]


def test_byte_rates_are_the_scraped_counters_difference_per_topic_and_broker() -> None:
    t = Throughput()
    t.add(10.0, {}, {1: {("in", "a"): 1000, ("out", "a"): 50}, 2: {("in", "b"): 70}, 3: None})
    t.add(12.0, {}, {1: {("in", "a"): 3000, ("out", "a"): 450}, 2: {("in", "b"): 20}, 3: {("in", "a"): 9}})
    r = t.rates({})
    assert r is not None and r["bytes"] and r["unreachable"] == [3]  # 3 was not scraped in the first sample
    # Broker 2 restarted (its counter went down): what it counted since is the rate.
    assert {x["name"]: (x["bytes_in"], x["bytes_out"], x["bytes_in_rate"]) for x in r["topics"]} == {
        "a": (2000, 400, 1000.0), "b": (20, 0, 10.0)}
    assert [(x["id"], x["bytes_in"], x["bytes_out"]) for x in r["brokers"]] == [(1, 2000, 400), (2, 20, 0)]
    t.add(14.0, {("c", 0): 5}, {1: {("in", "a"): 3000}, 3: {("in", "a"): 9}})  # 2 stopped: not asked any more
    r = t.rates({("c", 0): 2})
    assert r is not None and r["unreachable"] == [2, 3]
    # c's records were counted, its bytes were not scraped (its leader's endpoint is out of reach): 0, not missing.
    assert [(x["name"], x["records"], x["bytes_in"]) for x in r["topics"] if x["name"] == "c"] == [("c", 5, 0)]
    # No log end offsets this time (a leader cannot tell them yet): the bytes still move on, the
    # records span the samples that had offsets.
    t.add(16.0, None, {1: {("in", "a"): 5000}, 3: {("in", "a"): 9}})
    r = t.rates({("c", 0): 2})
    assert r is not None and r["seconds"] == 6.0 and [x["bytes_in"] for x in r["brokers"] if x["id"] == 1] == [4000]
    assert [(x["name"], x["records"], x["rate"]) for x in r["topics"] if x["name"] == "c"] == [("c", 5, 1.2)]


def test_a_brokers_state_is_fenced_from_the_controller_else_its_own_broker_state_gauge() -> None:
    running, pending = Scraped({}, 3, None), Scraped({}, 6, None)
    assert broker_state(True, pending) == "fenced"
    assert broker_state(False, pending) == "controlled shutdown"
    assert broker_state(False, Scraped({}, 7, None)) == "shutting down"
    assert broker_state(False, running) == broker_state(False, None) == broker_state(False, Scraped({}, None, None)) == "running"
def test_metrics_urls_name_a_broker_and_an_http_url() -> None:
    assert parse_metrics_urls(["1=http://h:9404/metrics", "2=https://x/m"]) == {1: "http://h:9404/metrics", 2: "https://x/m"}
    for bad in ("http://h:9404/metrics", "one=http://h/m", "1=file:///etc/passwd"):
        with pytest.raises(ValueError, match="BROKER_ID=http"):
            parse_metrics_urls([bad])


def test_lag_history_keeps_the_window_and_merges_samples_too_close() -> None:
    h = LagHistory()
    h.add("g", 0.0, {("t", 0): 5})
    h.add("g", 0.5, {("t", 0): 6})  # a second tab half a second later replaces the sample
    samples = h.add("g", 10.0, {("t", 0): 9, ("t", 1): 1})
    assert [(ts, lags.get(("t", 0))) for ts, lags in samples] == [(0.5, 6), (10.0, 9)]
    assert [ts for ts, _ in h.add("g", 11.0 + h.WINDOW_S, {})] == [11.0 + h.WINDOW_S]  # older than the window: dropped
    for i in range(h.GROUPS + 5):
        h.add(f"other-{i}", 1.0, {})
    assert len(h.groups) == h.GROUPS and "g" not in h.groups  # the groups looked at least recently go first
    assert sparkline([0, None, 10], width=100, height=24) == "0.0,22.0 100.0,2.0"
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


def test_a_malformed_metrics_url_is_a_usage_error_naming_the_option() -> None:
    from click.testing import CliRunner

    from kavka.cli.console import console

    result = CliRunner().invoke(console, ["--bootstrap-server", "127.0.0.1:1", "--metrics-url", "localhost:9404"])
    assert result.exit_code == 2 and "--metrics-url" in result.output and "BROKER_ID=http" in result.output, result.output
