"""The bootstrap checkpoint of a dynamic quorum (KIP-853), written by `kavka storage format`.

Format (Kafka's, as kafka-storage.sh format writes it): the snapshot file
`<metadata.log.dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`
(raft/snapshot.py) holding no metadata records, only a KRaftVersionRecord with
kraft.version 1 and, for `--standalone` or `--initial-controllers`, a VotersRecord
with the initial voters (node id, directory id, the controller listener's
endpoint). `--no-initial-controllers` writes the KRaftVersionRecord alone: the node
joins a quorum that exists and learns its voters from the leader's log. Without
the file the quorum is static (controller.quorum.voters, kraft.version 0).

`--initial-controllers` takes Kafka's `id@host:port:directory-id,...`; the
directory id of this node's own entry becomes its metadata log dir's
directory.id (so the voter set names the disk that holds the log).

Small file helpers; called by the CLI and at node startup (no event loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kavka.raft import snapshot
from kavka.raft.api import SnapshotId
from kavka.raft.quorum import METADATA_DIR_NAME
from kavka.raft.voters import VoterEndpoint, VoterNode, VoterSet
from kavka.storage.meta_properties import is_valid_uuid

BOOTSTRAP_SNAPSHOT = SnapshotId(0, 0)


@dataclass(frozen=True, slots=True)
class QuorumBootstrap:
    kraft_version: int  # 1 when the file exists
    voters: VoterSet | None  # None: --no-initial-controllers


def parse_initial_controllers(text: str, listener: str) -> VoterSet:
    """`id@host:port:directory-id,...` -> a VoterSet (ValueError naming the bad entry)."""
    nodes = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        vid, sep, rest = entry.partition("@")
        hostport, colon, directory = rest.rpartition(":")
        host, colon2, port = hostport.rpartition(":")
        if not (sep and colon and colon2 and vid.isdigit() and host and port.isdigit()):
            raise ValueError(f"invalid controller {entry!r}: expected id@host:port:directory-id")
        if not is_valid_uuid(directory):
            raise ValueError(f"invalid controller {entry!r}: {directory!r} is not a directory id (a Kafka Uuid)")
        nodes.append(VoterNode(int(vid), directory, (VoterEndpoint(listener, host.strip("[]"), int(port)),)))
    if not nodes:
        raise ValueError("no controller given")
    return VoterSet.of(nodes)


def write_quorum_bootstrap(metadata_log_dir: Path, voters: VoterSet | None) -> Path:
    directory = Path(metadata_log_dir) / METADATA_DIR_NAME
    directory.mkdir(parents=True, exist_ok=True)
    data = snapshot.encode(BOOTSTRAP_SNAPSHOT, [], voters=voters, kraft_version=1)
    return snapshot.write(directory, BOOTSTRAP_SNAPSHOT, data)


def read_quorum_bootstrap(metadata_log_dir: Path) -> QuorumBootstrap | None:
    """The bootstrap checkpoint's quorum (None without one); CorruptSnapshotError if unreadable."""
    path = Path(metadata_log_dir) / METADATA_DIR_NAME / snapshot.file_name(BOOTSTRAP_SNAPSHOT)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    kraft_version = snapshot.decode_kraft_version(data)
    if kraft_version < 1:
        return None
    return QuorumBootstrap(kraft_version, snapshot.decode_voters(data))
