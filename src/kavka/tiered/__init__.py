"""Tiered storage (KIP-405): the remote log manager, its pure rules, the remote storage plugin
seam and its built-in backends, remote segment metadata, remote reads and the seed's remote index.

``remote_log_manager`` is Kafka's RemoteLogManager, the owner of the background work (copy,
expiration, clean-up) and of remote reads; ``remote_log_rules`` its decisions as pure functions;
``api`` holds the protocols and value objects; ``backends`` the built-in RemoteStorageManagers
(``local``, ``s3``) and the loader that picks one by ``remote.log.storage.manager.class.name``;
``metadata`` the remote segment metadata events and the cache they are replayed into;
``topic_metadata`` the RemoteLogMetadataManager over ``__remote_log_metadata``;
``remote_reader`` reads below the local log start offset; ``follower`` a follower's rebuild of
its local tail (KIP-405 "follower fetch"); ``remote_index`` the seed's remoteLogIndex /
.remoteOffsetIndex / .remoteTimeIndex formats.
``storage/`` never imports this package (ARCHITECTURE.md).
"""
