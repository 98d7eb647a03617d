"""QuorumController: commits the controller's records to the metadata quorum and publishes images.

Every change goes the same way: ControllerLogic decides (pure) -> the records
are appended to the metadata log as one batch (atomic) -> they are replayed
into a MetadataDelta -> the new MetadataImage is published to every
registered listener (the broker's metadata publisher creates and deletes logs,
updates configs). Startup replays the whole committed log the same way, so
the image is always a function of the log. Runs on the event-loop thread.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from kavka.config import BrokerConfig
from kavka.controller import records as mr
from kavka.controller.controller import ApiResult, ControllerLogic, CreatedTopic, NewTopic
from kavka.controller.image import MetadataDelta, MetadataImage, TopicImage
from kavka.raft.quorum import SingleVoterQuorum
from kavka.storage.meta_properties import generate_uuid

log = logging.getLogger("kavka.controller")

Listener = Callable[[MetadataDelta, MetadataImage], None]


class QuorumController:
    def __init__(
        self,
        config: BrokerConfig,
        quorum: SingleVoterQuorum,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.quorum = quorum
        self._clock = clock
        rng = rng or random.Random()
        self.logic = ControllerLogic(
            config, new_uuid=generate_uuid, start_index=lambda n: rng.randrange(max(n, 1))
        )
        self.image = MetadataImage()
        self._listeners: list[Listener] = []

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def load(self) -> MetadataImage:
        """Replay the committed metadata log into the image (startup)."""
        delta = MetadataDelta(self.image)
        n = 0
        for offset, key, value in self.quorum.read_committed(0):
            delta.replay(mr.decode(key, value), offset)
            n += 1
        self.image = delta.apply()
        log.info("replayed %d metadata records up to offset %d", n, self.image.offset)
        self._publish(delta)
        return self.image

    def _publish(self, delta: MetadataDelta) -> None:
        for listener in self._listeners:
            listener(delta, self.image)

    def commit(self, records: Sequence[Any]) -> MetadataImage:
        if not records:
            return self.image
        last = self.quorum.append([mr.encode(r) for r in records], now_ms=self._now_ms())
        delta = MetadataDelta(self.image)
        first = last - len(records) + 1
        for i, r in enumerate(records):
            delta.replay(r, first + i)
        self.image = delta.apply()
        self._publish(delta)
        return self.image

    # ----------------------------------------------------------- operations

    def register_broker(self, *, broker_id: int, endpoints: Sequence[tuple[str, str, int]], rack: str | None, log_dirs: Sequence[str]) -> None:
        current = self.image.brokers.get(broker_id)
        wanted = (tuple(tuple(e) for e in endpoints), rack, tuple(log_dirs))
        if current is not None and (current.endpoints, current.rack, current.log_dirs) == wanted:
            return
        self.commit([mr.RegisterBrokerRecord(broker_id, generate_uuid(), wanted[0], rack, wanted[2])])  # type: ignore[arg-type]

    def allocate_producer_ids(self, broker_id: int, block_size: int = 1000) -> tuple[int, int]:
        """A fresh block [start, end) of producer ids (Kafka's AllocateProducerIds, KIP-730)."""
        start = self.image.next_producer_id
        self.commit([mr.ProducerIdsRecord(broker_id, start + block_size)])
        return start, start + block_size

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False) -> list[CreatedTopic]:
        records, results = self.logic.create_topics(self.image, topics, validate_only=validate_only)
        self.commit(records)
        return results

    def delete_topics(self, topics: Sequence[TopicImage]) -> None:
        self.commit(self.logic.delete_topics(self.image, topics))

    def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None, *, validate_only: bool) -> ApiResult:
        records, result = self.logic.create_partitions(self.image, name, count, assignments)
        if result.ok and not validate_only:
            self.commit(records)
        return result

    def alter_configs(
        self,
        resource_type: int,
        resource_name: str,
        ops: Sequence[tuple[str, int, str | None]],
        *,
        incremental: bool,
        validate_only: bool,
    ) -> ApiResult:
        records, result = self.logic.alter_configs(self.image, resource_type, resource_name, ops, incremental=incremental)
        if result.ok and not validate_only:
            self.commit(records)
        return result
