"""A small Kafka client built on `kavka.protocol` (no librdkafka).

Layers, bottom up: `errors` (exception types, Kafka error names),
`negotiation` (sans-I/O: ApiVersions handshake, version picking, framing of
one request/response), `connection` (a blocking socket transport for the CLI
and Spark executors), `admin` (admin API calls returning frozen dataclasses).
An asyncio transport can reuse `negotiation` unchanged.
"""

from kavka.client.admin import (
    AdminClient,
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ConfigSynonym,
    CreatedTopic,
    ListOffsetsResult,
    NewTopic,
    PartitionInfo,
    TopicDescription,
    TopicListing,
)
from kavka.client.connection import BlockingConnection
from kavka.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError

__all__ = [
    "AdminClient",
    "BlockingConnection",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigSynonym",
    "CreatedTopic",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "ListOffsetsResult",
    "NewTopic",
    "PartitionInfo",
    "TopicDescription",
    "TopicListing",
]
