"""Tiered storage (KIP-405): the remote storage plugin seam, its built-in backends and the seed's
remote index.

``api`` holds the protocols and value objects; ``backends`` the built-in RemoteStorageManagers
(``local``, ``s3``) and the loader that picks one by ``remote.log.storage.manager.class.name``;
``remote_index`` the seed's remoteLogIndex / .remoteOffsetIndex / .remoteTimeIndex formats.
``storage/`` never imports this package (ARCHITECTURE.md).
"""
