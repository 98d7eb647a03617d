"""Names of the metadata log, as Kafka's KRaft writes it.

    <metadata.log.dir>/__cluster_metadata-0/               the log (raft.file_log)
    <metadata.log.dir>/__cluster_metadata-0/quorum-state   epoch, leader, vote (raft.state)
    <metadata.log.dir>/__cluster_metadata-0/<offset>-<epoch>.checkpoint   snapshots (raft.snapshot)

The quorum itself is `raft.client.RaftClient`, driven by
`broker.raft_driver.RaftDriver` and used by `controller.quorum_controller`.
"""

from __future__ import annotations

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's fixed METADATA_TOPIC_ID (Uuid 0,1)
METADATA_DIR_NAME = f"{METADATA_TOPIC}-0"
