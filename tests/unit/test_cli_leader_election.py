"""`kavka leader-election` without a broker: options as kafka-leader-election.sh checks them, the
replica election JSON, and the three outcomes in the table, the JSON and the exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kavka.cli import leader_election
from kavka.cli.main import cli


class FakeAdmin:
    def __init__(self, results: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        self.results = results
        self.calls: list[tuple[int, Any]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def elect_leaders(self, election_type: int, partitions: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
        self.calls.append((election_type, partitions))
        return self.results


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin({
        ("t", 0): (0, None),
        ("t", 1): (84, "Leader election not needed for topic partition."),
        ("u", 2): (80, "The preferred leader was not available."),
    })
    monkeypatch.setattr(leader_election, "admin_client", lambda bootstrap: fake)
    return fake


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["leader-election", "--bootstrap-server", "h:1", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "One and only one of the following options is required"),
        (("--all-topic-partitions", "--topic", "t", "--partition", "0"), "One and only one"),
        (("--topic", "t"), "Missing required option(s): --partition"),
        (("--all-topic-partitions", "--partition", "0"), "Option --partition is only allowed if --topic is used"),
    ],
)
def test_option_rules_are_kafkas(admin: FakeAdmin, args: tuple[str, ...], message: str) -> None:
    res = _run("--election-type", "preferred", *args)
    assert res.exit_code == 2 and message in res.output
    assert admin.calls == []


def test_election_type_is_required_and_checked(admin: FakeAdmin) -> None:
    assert _run("--all-topic-partitions").exit_code == 2
    assert _run("--election-type", "dirty", "--all-topic-partitions").exit_code == 2
    assert admin.calls == []


def test_outcomes_table_summary_and_exit_code(admin: FakeAdmin) -> None:
    res = _run("--election-type", "PREFERRED", "--all-topic-partitions")
    assert admin.calls == [(0, None)]
    assert res.exit_code == 1
    assert "Successfully completed leader election (PREFERRED) for partitions t-0" in res.output
    assert "Valid replica already elected for partitions t-1" in res.output
    assert "PREFERRED_LEADER_NOT_AVAILABLE: The preferred leader was not available." in res.output
    assert "1 replica(s) could not be elected" in res.output


def test_json_output(admin: FakeAdmin) -> None:
    res = _run("--election-type", "unclean", "--topic", "t", "--partition", "0", "--json")
    assert admin.calls == [(1, [("t", 0)])]
    data = json.loads(res.stdout)
    assert data["election_type"] == "UNCLEAN"
    assert data["succeeded"] == [{"topic": "t", "partition": 0}]
    assert data["not_needed"] == [{"topic": "t", "partition": 1}]
    assert data["failed"] == [{"topic": "u", "partition": 2, "error": "PREFERRED_LEADER_NOT_AVAILABLE",
                               "error_code": 80, "message": "The preferred leader was not available."}]


def test_path_to_json_file(admin: FakeAdmin, tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 1}, {"topic": "u", "partition": 0}]}))
    _run("--election-type", "preferred", "--path-to-json-file", str(f))
    assert admin.calls == [(0, [("t", 1), ("u", 0)])]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[", "not JSON"),
        ('{"version": 1}', 'missing "partitions" field'),
        ('{"partitions": [{"topic": "t"}]}', 'partitions[0] needs "topic"'),
        ('{"partitions": [{"topic": "t", "partition": "1"}]}', 'partitions[0] needs "topic"'),
        ('{"partitions": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 1}]}',
         "contains duplicate partitions: t-1"),
    ],
)
def test_bad_json_files_are_refused(admin: FakeAdmin, tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "e.json"
    f.write_text(text)
    res = _run("--election-type", "preferred", "--path-to-json-file", str(f))
    assert res.exit_code == 1 and message in res.output
    assert admin.calls == []
