"""Shared builders for the controller's unit tests: the controller's managers with predictable ids,
records replayed into an image, and an image of n registered, unfenced brokers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from kavka.config import BrokerConfig, build_config
from kavka.controller.cluster_control import ClusterControlManager
from kavka.controller.configuration_control import ConfigurationControlManager
from kavka.controller.replication_control import ReplicationControlManager
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage


@dataclass(frozen=True, slots=True)
class Managers:
    """The controller's managers, composed as QuorumController composes them."""

    replication: ReplicationControlManager
    cluster: ClusterControlManager
    configuration: ConfigurationControlManager


def compose(config: BrokerConfig, new_uuid: Callable[[], str]) -> Managers:
    replication = ReplicationControlManager(config, new_uuid=new_uuid)
    return Managers(replication, ClusterControlManager(replication), ConfigurationControlManager(config))


def logic(**props) -> Managers:  # noqa: ANN003
    ids = (f"id{i}" for i in itertools.count())
    return compose(build_config({"node.id": "1", **props}), lambda: next(ids))


def apply(image: MetadataImage, records: list) -> MetadataImage:
    d = MetadataDelta(image)
    for i, r in enumerate(records):
        d.replay(r, image.offset + 1 + i)
    return d.apply()


def cluster(n: int) -> MetadataImage:
    recs = [
        mr.RegisterBrokerRecord(i, f"inc{i}", (("PLAINTEXT", "h", 9000 + i),), fenced=False) for i in range(1, n + 1)
    ]
    return apply(MetadataImage(), recs)
