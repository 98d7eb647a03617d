"""Built-in RemoteStorageManagers and the loader that picks one.

``remote.log.storage.manager.class.name`` is either a built-in short name (``local``, ``s3``) or
``module:Class`` naming an importable class that satisfies ``RemoteStorageManager``; the loader
instantiates it with no arguments and calls ``configure`` with the ``rsm.config.*`` keys, prefix
removed (KIP-405: "remote.log.storage.manager.impl.prefix", default ``rsm.config.``). Called once
by whoever owns the remote log manager, at broker start.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kavka.tiered.api import RemoteStorageManager

RSM_CONFIG_PREFIX = "rsm.config."
BUILTINS = {
    "local": "kavka.tiered.backends.local_dir:LocalDirRemoteStorageManager",
    "s3": "kavka.tiered.backends.s3:S3RemoteStorageManager",
}


class PluginLoadError(ValueError):
    pass


def rsm_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """The ``rsm.config.*`` keys of a broker config, prefix removed."""
    n = len(RSM_CONFIG_PREFIX)
    return {k[n:]: v for k, v in configs.items() if k.startswith(RSM_CONFIG_PREFIX)}


def load_remote_storage_manager(class_name: str,
                                configs: Mapping[str, str]) -> RemoteStorageManager:
    target = BUILTINS.get(class_name, class_name)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise PluginLoadError(
            f"remote.log.storage.manager.class.name={class_name!r}: expected one of "
            f"{sorted(BUILTINS)} or module:Class")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise PluginLoadError(
            f"remote.log.storage.manager.class.name={class_name!r}: {e}") from e
    rsm = cls()
    if not isinstance(rsm, RemoteStorageManager):
        raise PluginLoadError(
            f"remote.log.storage.manager.class.name={class_name!r}: {target} does not implement "
            "RemoteStorageManager")
    rsm.configure(configs)
    return rsm
