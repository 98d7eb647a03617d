"""A broker's start and stop gates: it serves clients only once its own metadata shows it
unfenced, and at its stop it waits for the controller's grant only while another broker is live.

The CI failures this pins down: a client connected as soon as a fresh broker's port was bound,
its first Metadata answer listed no brokers (the broker was still fenced in its own image) and
named that broker as controller; librdkafka then waited for a controller it could not find until
its admin request timed out. Kafka binds early but accepts only after the broker is unfenced
(SocketServer.enableRequestProcessing); kavka's KafkaServer does the same, and the node waits
for its image (BrokerMetadataPublisher.wait_for), not only the controller's heartbeat answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from kavka.broker.metadata_publisher import BrokerMetadataPublisher
from kavka.broker.node import _no_other_live_broker, _unfenced_in
from kavka.broker.server import KafkaServer
from kavka.metadata.delta import MetadataDelta
from kavka.metadata.image import MetadataImage
from kavka.metadata.records import BrokerRegistrationChangeRecord, RegisterBrokerRecord


async def _until(predicate: Any, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


def test_a_gated_server_accepts_only_after_enable_request_processing() -> None:
    async def main() -> None:
        server = KafkaServer(handlers={}, api_versions_response=lambda v, e: None, max_request_size=1 << 20,
                             accepting=False)
        port = await server.listen("127.0.0.1", 0, listener="PLAINTEXT")
        client = socket.create_connection(("127.0.0.1", port))  # completes in the kernel's backlog
        try:
            for _ in range(20):  # the loop runs its accept task many times over: nothing is taken
                await asyncio.sleep(0.005)
            assert not server.connections
            server.enable_request_processing()
            await _until(lambda: len(server.connections) == 1)
        finally:
            client.close()
            await server.close()

    asyncio.run(main())


def test_an_ungated_server_accepts_at_once() -> None:
    async def main() -> None:
        server = KafkaServer(handlers={}, api_versions_response=lambda v, e: None, max_request_size=1 << 20)
        port = await server.listen("127.0.0.1", 0, listener="PLAINTEXT")
        client = socket.create_connection(("127.0.0.1", port))
        try:
            await _until(lambda: len(server.connections) == 1)
        finally:
            client.close()
            await server.close()

    asyncio.run(main())


class _NoLogs:
    """The log manager of a broker that hosts no replicas: the publisher's slices still batch."""

    @staticmethod
    def placement_batch(*, background: bool = False) -> contextlib.nullcontext:
        return contextlib.nullcontext()


def _publish(publisher: BrokerMetadataPublisher, image: MetadataImage, *records: Any) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, r in enumerate(records, start=image.offset + 1):
        delta.replay(r, offset)
    new = delta.apply()
    publisher.publish(delta, new)
    return new


def test_the_node_waits_for_its_own_image_to_show_it_unfenced() -> None:
    async def main() -> None:
        publisher = BrokerMetadataPublisher(node_id=2, replica_manager=None, log_manager=_NoLogs(),  # type: ignore[arg-type]
                                            resolver=None, online_dir_ids=list)  # type: ignore[arg-type]
        image = _publish(publisher, MetadataImage(), RegisterBrokerRecord(2, "inc", (("PLAINTEXT", "h", 1),)))
        epoch = image.brokers[2].epoch
        waiting = asyncio.ensure_future(publisher.wait_for(lambda im: _unfenced_in(im, 2, epoch), 5.0))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # registered, still fenced
        image = _publish(publisher, image, BrokerRegistrationChangeRecord(3, image.brokers[2].epoch, fenced=False))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # another broker's change
        _publish(publisher, image, BrokerRegistrationChangeRecord(2, epoch, fenced=False))
        assert await asyncio.wait_for(waiting, 5.0) is True
        assert not publisher._waiters
        # Already true: answered at once; never true: False at the timeout, the waiter removed.
        assert await publisher.wait_for(lambda im: _unfenced_in(im, 2, epoch), 0.01) is True
        assert await publisher.wait_for(lambda im: _unfenced_in(im, 2, epoch + 1), 0.01) is False
        assert not publisher._waiters

    asyncio.run(main())


def test_a_stopping_broker_stops_waiting_for_the_grant_when_no_other_broker_is_live() -> None:
    """When a whole cluster stops at once, the last voters cannot commit the grant: a broker whose
    metadata shows every other broker fenced or shutting down has nowhere to move a leadership."""
    publisher = BrokerMetadataPublisher(node_id=1, replica_manager=None, log_manager=_NoLogs(),  # type: ignore[arg-type]
                                        resolver=None, online_dir_ids=list)  # type: ignore[arg-type]
    image = _publish(publisher, MetadataImage(), *(RegisterBrokerRecord(i, f"inc{i}", (("PLAINTEXT", "h", i),)) for i in (1, 2, 3)))
    image = _publish(publisher, image, *(BrokerRegistrationChangeRecord(i, image.brokers[i].epoch, fenced=False) for i in (1, 2, 3)))
    assert not _no_other_live_broker(image, 1)
    image = _publish(publisher, image, BrokerRegistrationChangeRecord(2, image.brokers[2].epoch, in_controlled_shutdown=True))
    assert not _no_other_live_broker(image, 1)  # broker 3 can still take leaderships
    image = _publish(publisher, image, BrokerRegistrationChangeRecord(3, image.brokers[3].epoch, fenced=True))
    assert _no_other_live_broker(image, 1)
    assert not _no_other_live_broker(image, 2)  # broker 1 is live, from broker 2's point of view
    assert _no_other_live_broker(MetadataImage(), 1)  # a single broker: nobody to hand over to
