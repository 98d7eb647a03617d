"""KIP-853 on real processes, as far as kavka serves it yet: a standalone dynamic quorum.

A node formatted with `kavka storage format --standalone` runs its quorum with kraft.version 1:
its first leader writes the bootstrap voter set (this node and its metadata dir's directory id)
into the metadata log, and the node serves metadata (topic creation, a restart) as a static one
does. Quorums of several initial controllers, or a controller formatted to join one, need
controller.quorum.bootstrap.servers and the AddRaftVoter/RemoveRaftVoter APIs, which are not
served yet: such a node refuses to start and says why.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kavka.raft.file_log import FileReplicatedLog
from kavka.raft.voters import VoterNode, VoterSet, voters_in
from kavka.storage.meta_properties import read_meta_properties
from tests.wait import wait_until


def _create(admin: AdminClient, *names: str) -> None:
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(20)


def _listed(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def _voter_sets_in_log(metadata_dir: Path) -> list[VoterSet]:
    log = FileReplicatedLog.open(metadata_dir, now_ms=int(time.time() * 1000))
    try:
        entries = log.read(0, 10_000)
    finally:
        log.close()
    return [vs for e in entries if e.control and (vs := voters_in(e.key, e.value)) is not None]


def test_a_standalone_dynamic_quorum_serves_metadata_and_keeps_its_voter_set(broker_factory) -> None:  # noqa: ANN001
    b = broker_factory()
    b.format_args = ["--standalone"]
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    _create(admin, "dq-a", "dq-b")
    assert {"dq-a", "dq-b"} <= _listed(admin)
    assert b.stop() == 0
    meta = b.log_dirs[0]
    directory_id = read_meta_properties(meta).directory_id
    # The first leader wrote the bootstrap set into the log, so any node fetching it learns it.
    assert _voter_sets_in_log(meta) == [VoterSet.of([VoterNode(1, directory_id)])]
    b.start()
    _create(admin, "dq-c")
    wait_until(lambda: {"dq-a", "dq-b", "dq-c"} <= _listed(admin), message="all three topics listed after a restart")
    assert b.stop() == 0
    assert len(_voter_sets_in_log(meta)) == 1  # written once: later leaders find it in the log


def test_a_dynamic_quorum_of_several_controllers_is_refused_at_startup(broker_factory) -> None:  # noqa: ANN001
    for args in (["--initial-controllers", "1@127.0.0.1:1:AAAAAAAAAAAAAAAAAAAAAQ,2@127.0.0.1:2:AAAAAAAAAAAAAAAAAAAAAg"],
                 ["--no-initial-controllers"]):
        b = broker_factory()
        b.format_args = args
        b.start(wait=False)
        assert b.proc is not None and b.proc.wait(30) != 0
        out = b.log_text()
        assert "kavka runs only a standalone dynamic quorum yet" in out, out
