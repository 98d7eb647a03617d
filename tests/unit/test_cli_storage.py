"""`kavka storage format` / `random-uuid` / `server start` config errors, through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kavka.cli.main import cli
from kavka.storage.meta_properties import is_valid_uuid, read_meta_properties


def run(*args: str):  # noqa: ANN201
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    f = tmp_path / "server.properties"
    f.write_text(
        f"node.id=4\nlog.dirs={tmp_path / 'a'},{tmp_path / 'b'}\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    return f


def test_format_writes_meta_properties_into_every_dir(config: Path, tmp_path: Path) -> None:
    res = run("storage", "format", "--config", str(config), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["cluster_id_generated"] is True and is_valid_uuid(out["cluster_id"])
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "meta"]
    assert [w["dir"] for w in out["formatted"]] == [str(d) for d in dirs]
    props = [read_meta_properties(d) for d in dirs]
    assert {(p.version, p.cluster_id, p.node_id) for p in props} == {(1, out["cluster_id"], 4)}
    ids = [p.directory_id for p in props]
    assert len(set(ids)) == 3 and all(
        is_valid_uuid(i) for i in ids
    )  # a fresh directory.id each (KIP-858)
    assert ids == [w["directory_id"] for w in out["formatted"]]


def test_format_uses_the_given_cluster_id_and_prints_it(config: Path, tmp_path: Path) -> None:
    cid = run("storage", "random-uuid").stdout.strip()
    assert is_valid_uuid(cid)
    res = run("storage", "format", "--config", str(config), "--cluster-id", cid)
    assert res.exit_code == 0, res.output
    assert cid in res.stdout and "Generated" not in res.stdout
    assert read_meta_properties(tmp_path / "b").cluster_id == cid


def test_reformat_is_refused_naming_the_dir_and_changes_nothing(
    config: Path, tmp_path: Path
) -> None:
    assert run("storage", "format", "--config", str(config)).exit_code == 0
    before = (tmp_path / "a" / "meta.properties").read_text()
    res = run("storage", "format", "--config", str(config))
    assert res.exit_code == 1
    assert str(tmp_path / "a") in res.stderr and "already formatted" in res.stderr
    assert "Traceback" not in res.output and res.stdout == ""
    assert (tmp_path / "a" / "meta.properties").read_text() == before


def test_ignore_formatted_formats_only_new_dirs_into_the_same_cluster(
    config: Path, tmp_path: Path
) -> None:
    first = json.loads(run("storage", "format", "--config", str(config), "--json").stdout)
    (tmp_path / "b" / "meta.properties").unlink()
    res = run("storage", "format", "--config", str(config), "--ignore-formatted", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [w["dir"] for w in out["formatted"]] == [str(tmp_path / "b")]
    assert out["skipped"] == [str(tmp_path / "a"), str(tmp_path / "meta")]
    assert read_meta_properties(tmp_path / "b").cluster_id == first["cluster_id"]
    res = run("storage", "format", "--config", str(config), "-g")
    assert res.exit_code == 0 and "already formatted" in res.stdout


def test_a_conflicting_cluster_id_is_refused(config: Path) -> None:
    assert run("storage", "format", "--config", str(config)).exit_code == 0
    other = run("storage", "random-uuid").stdout.strip()
    res = run("storage", "format", "--config", str(config), "-g", "--cluster-id", other)
    assert res.exit_code == 1 and "differs" in res.stderr


def test_invalid_cluster_id_is_refused(config: Path, tmp_path: Path) -> None:
    res = run("storage", "format", "--config", str(config), "--cluster-id", "not-a-uuid")
    assert res.exit_code == 1 and "not-a-uuid" in res.stderr
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("node.id=many\nlog.dirs=/x\n", "node.id"),
        ("log.dirs=/x\n", "node.id"),
        ("node.id=1\nlisteners=nonsense\n", "listeners"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    f = tmp_path / "bad.properties"
    f.write_text(text)
    for cmd in (["storage", "format"], ["server", "start"]):
        res = run(*cmd, "--config", str(f))
        assert res.exit_code == 1, res.output
        assert res.stderr.startswith("error: invalid config: ") and key in res.stderr
        assert "Traceback" not in res.output


def test_missing_config_file_is_reported(tmp_path: Path) -> None:
    res = run("storage", "format", "--config", str(tmp_path / "nope.properties"))
    assert res.exit_code == 1 and "nope.properties" in res.stderr


def test_server_start_passes_overrides_and_returns_the_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kavka.broker.main

    seen = []

    def fake_run_server(config) -> int:  # noqa: ANN001
        seen.append(config)
        return 3

    monkeypatch.setattr(kavka.broker.main, "run_server", fake_run_server)
    f = tmp_path / "s.properties"
    f.write_text(f"node.id=1\nlog.dirs={tmp_path}\n")
    res = run("server", "start", "--config", str(f), "--override", "num.partitions=6")
    assert res.exit_code == 3
    assert seen[0]["num.partitions"] == 6
    res = run("server", "start", "--config", str(f), "--override", "num.partitions")
    assert res.exit_code == 1 and "--override" in res.stderr


# KIP-853: the bootstrap checkpoint of a dynamic controller quorum.


def test_format_standalone_writes_kafkas_bootstrap_checkpoint(config: Path, tmp_path: Path) -> None:
    from kavka.raft.bootstrap import read_quorum_bootstrap
    from kavka.raft.voters import VoterNode

    res = run("storage", "format", "--config", str(config), "--standalone", "--json")
    assert res.exit_code == 0, res.output
    meta_dir_id = read_meta_properties(tmp_path / "meta").directory_id
    assert json.loads(res.stdout)["initial_controllers"] == [{"id": 4, "directory_id": meta_dir_id}]
    assert (tmp_path / "meta" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").is_file()
    bootstrap = read_quorum_bootstrap(tmp_path / "meta")
    assert bootstrap is not None and bootstrap.kraft_version == 1
    assert bootstrap.voters is not None and bootstrap.voters.voters == (VoterNode(4, meta_dir_id, ()),)
    assert read_quorum_bootstrap(tmp_path / "a") is None  # only the metadata log dir holds it


def test_format_initial_controllers_uses_this_nodes_directory_id(config: Path, tmp_path: Path) -> None:
    from kavka.raft.bootstrap import read_quorum_bootstrap

    ids = [run("storage", "random-uuid").stdout.strip() for _ in range(3)]
    spec = ",".join(f"{n}@127.0.0.1:{9090 + n}:{d}" for n, d in zip((4, 5, 6), ids, strict=True))
    res = run("storage", "format", "--config", str(config), "--initial-controllers", spec)
    assert res.exit_code == 0, res.output
    assert read_meta_properties(tmp_path / "meta").directory_id == ids[0]
    assert read_meta_properties(tmp_path / "a").directory_id != ids[0]
    bootstrap = read_quorum_bootstrap(tmp_path / "meta")
    assert bootstrap is not None and bootstrap.voters is not None
    assert [(v.node_id, v.directory_id, v.endpoints[0].port) for v in bootstrap.voters.voters] == [
        (4, ids[0], 9094), (5, ids[1], 9095), (6, ids[2], 9096)
    ]


def test_format_no_initial_controllers_records_only_the_kraft_version(config: Path, tmp_path: Path) -> None:
    from kavka.raft.bootstrap import read_quorum_bootstrap

    assert run("storage", "format", "--config", str(config), "--no-initial-controllers").exit_code == 0
    bootstrap = read_quorum_bootstrap(tmp_path / "meta")
    assert bootstrap is not None and bootstrap.kraft_version == 1 and bootstrap.voters is None


@pytest.mark.parametrize(
    ("args", "extra", "message"),
    [
        (["--standalone", "--no-initial-controllers"], "", "exclude each other"),
        (["--standalone"], "controller.quorum.voters=4@127.0.0.1:9093\n", "controller.quorum.voters is set"),
        (["--standalone"], "process.roles=broker\ncontroller.quorum.voters=1@127.0.0.1:9093\n", "no controller role"),
        (["--initial-controllers", "5@h:1:AAAAAAAAAAAAAAAAAAAAAQ"], "", "does not name this node"),
        (["--initial-controllers", "4@h:1"], "", "expected id@host:port:directory-id"),
        (["--initial-controllers", "4@h:1:nope"], "", "is not a directory id"),
    ],
)
def test_format_refuses_a_bad_dynamic_quorum(config: Path, tmp_path: Path, args: list[str], extra: str, message: str) -> None:
    config.write_text(config.read_text() + extra)
    res = run("storage", "format", "--config", str(config), *args)
    assert res.exit_code != 0 and message in res.output, res.output
    assert not (tmp_path / "meta" / "meta.properties").exists()
