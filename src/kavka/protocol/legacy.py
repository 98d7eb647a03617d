"""Produce v0-v2: advertised so older librdkafka compresses, answered without appending.

Why advertise versions kavka will never append with: librdkafka before 2.8
(Debian's kcat is built on 2.0.2) decides whether a broker "supports" gzip,
snappy and lz4 by asking whether it speaks Produce *v0*
(confluentinc/librdkafka#4956); against a broker whose Produce starts at v3 --
Kafka 4.0 after KIP-896, and kavka -- it silently sends every batch
uncompressed. Advertising v0-v2 restores compression for those clients, who
then use v3+ anyway.

A client that really sends v0-v2 carries message format v0/v1 (magic 0/1),
which kavka does not store: every partition is answered
UNSUPPORTED_FOR_MESSAGE_FORMAT and nothing is written. The request bodies
have the layout of v3 without its leading transactional_id, so they are
decoded with the v3 schema (and its structure guard) after prefixing a null
string; the responses are written here (v0: no throttle time; v1: no log
append time; v2 has the v3 layout).
"""

from __future__ import annotations

import struct
from typing import Any

from kavka.protocol.messages import make, nested

LEGACY_PRODUCE_VERSIONS = range(0, 3)
_NULL_STRING = b"\xff\xff"
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43


def as_produce_v3_body(frame: memoryview | bytes, header_size: int) -> bytes:
    """A Produce v0-v2 body re-laid as v3 (transactional_id = null)."""
    return _NULL_STRING + bytes(frame[header_size:])


def refuse_legacy_produce(req: Any, resp_cls: type) -> Any:
    """The v3-shaped response refusing every partition of a v0-v2 request."""
    topic_cls = nested(resp_cls, "TopicProduceResponse")
    part_cls = nested(resp_cls, "PartitionProduceResponse")
    return make(
        resp_cls,
        responses=tuple(
            make(
                topic_cls,
                name=t.name,
                partition_responses=tuple(
                    make(part_cls, index=pd.index, error_code=UNSUPPORTED_FOR_MESSAGE_FORMAT,
                         base_offset=-1, log_append_time=None)
                    for pd in t.partition_data
                ),
            )
            for t in req.topic_data
        ),
    )


def encode_legacy_produce_response(version: int, resp: Any) -> bytes:
    """Encode a (v3-shaped) Produce response entity as Produce v0, v1 or v2."""
    out = [struct.pack(">i", len(resp.responses))]
    for t in resp.responses:
        name = t.name.encode()
        out.append(struct.pack(">h", len(name)) + name)
        out.append(struct.pack(">i", len(t.partition_responses)))
        for p in t.partition_responses:
            out.append(struct.pack(">ihq", p.index, int(p.error_code), p.base_offset))
            if version >= 2:
                out.append(struct.pack(">q", -1))  # log_append_time_ms: nothing appended
    if version >= 1:
        out.append(struct.pack(">i", 0))  # throttle_time_ms
    return b"".join(out)
