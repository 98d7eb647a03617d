"""Pure parts of the JBOD tools: the balance planner and the reassignment JSON parser."""

from __future__ import annotations

import json

import pytest

from kavka.cli.reassign import parse_reassignment
from kavka.operations import plan_balance


def spread(dirs: dict[str, list[tuple[str, int, int]]], moves) -> int:  # noqa: ANN001
    load = {d: sum(s for *_, s in reps) for d, reps in dirs.items()}
    for m in moves:
        load[m.source] -= m.size
        load[m.destination] += m.size
    return max(load.values()) - min(load.values())


def test_balance_moves_the_replica_closest_to_half_the_gap() -> None:
    dirs = {"/a": [("t", 0, 900), ("t", 2, 700)], "/b": [("t", 1, 100), ("t", 3, 100)]}
    moves = plan_balance(dirs)
    assert [(m.topic, m.partition, m.source, m.destination) for m in moves] == [("t", 2, "/a", "/b")]
    assert spread(dirs, moves) == 0  # 1600 vs 200 -> 900 vs 900


def test_balance_over_three_dirs_never_widens_and_terminates() -> None:
    dirs = {"/a": [("t", i, 100 + i) for i in range(30)], "/b": [], "/c": [("u", 0, 5)]}
    moves = plan_balance(dirs)
    assert spread(dirs, moves) < 200
    assert len({(m.topic, m.partition) for m in moves}) == len(moves)  # each replica moves once


def test_balance_of_even_dirs_is_empty() -> None:
    assert plan_balance({"/a": [("t", 0, 10)], "/b": [("t", 1, 10)]}) == []
    assert plan_balance({"/a": [("t", 0, 10)]}) == []


def test_reassignment_json_with_log_dirs() -> None:
    doc = {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d1", "any"]},
        {"topic": "t", "partition": 1, "replicas": [1]},
    ]}
    assert parse_reassignment(json.dumps(doc)) == [("t", 0, [1, 2], ["/d1", "any"]), ("t", 1, [1], ["any"])]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("nope", "not JSON"),
        ('{"partitions": [{"topic": "t"}]}', "needs topic, partition and replicas"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/a", "/b"]}]}', "one entry per replica"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["rel/dir"]}]}', "absolute path"),
    ],
)
def test_reassignment_json_errors(doc: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_reassignment(doc)
