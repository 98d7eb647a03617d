"""Shared builders for the controller's unit tests: a ControllerLogic with predictable ids, records
replayed into an image, and an image of n registered, unfenced brokers."""

from __future__ import annotations

import itertools

from kavka.config import build_config
from kavka.controller.controller import ControllerLogic
from kavka.metadata import records as mr
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage


def logic(**props) -> ControllerLogic:  # noqa: ANN003
    ids = (f"id{i}" for i in itertools.count())
    return ControllerLogic(build_config({"node.id": "1", **props}), new_uuid=lambda: next(ids))


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
