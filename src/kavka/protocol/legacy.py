"""Produce v0-v2: message format v0/v1 producers, converted to record batch v2 and appended.

Why advertise versions kavka will never append with: librdkafka before 2.8
(Debian's kcat is built on 2.0.2) decides whether a broker "supports" gzip,
snappy and lz4 by asking whether it speaks Produce *v0*
(confluentinc/librdkafka#4956); against a broker whose Produce starts at v3 --
Kafka 4.0 after KIP-896, and kavka -- it silently sends every batch
uncompressed. Advertising v0-v2 restores compression for those clients, who
then use v3+ anyway.

A v0-v2 request (schema generated from Kafka 3.9's JSON, protocol.legacy_schema)
carries message sets of magic 0/1; `as_produce_v3` converts each partition's set
to one record batch v2 (protocol.message_format, as Kafka's LogValidator does
for a v2 log) and re-shapes the request as v3 (transactional_id null), so the
ordinary Produce handler appends it. A set that cannot be parsed is passed on
as no records (the partition is answered INVALID_RECORD, nothing written).
Responses are written here (v0: no throttle time; v1: no log append time;
v2 has the v3 layout).
"""

from __future__ import annotations

import struct
from typing import Any

from kavka.protocol.message_format import MessageFormatError, up_convert
from kavka.protocol.messages import make, nested

LEGACY_PRODUCE_VERSIONS = range(0, 3)
_NULL_STRING = b"\xff\xff"
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43


def as_produce_v3(req: Any, v3_cls: type) -> Any:
    """A decoded Produce v0-v2 request as a v3 entity whose records are batch v2."""
    topic_cls = nested(v3_cls, "TopicProduceData")
    part_cls = nested(v3_cls, "PartitionProduceData")

    def convert(records: Any) -> bytes | None:
        if not records:
            return None
        try:
            return up_convert(bytes(records))
        except (MessageFormatError, ValueError, struct.error):
            return None
        except Exception:  # a codec library's own error on a client's bad compressed bytes
            return None

    return make(
        v3_cls,
        transactional_id=None,
        acks=req.acks,
        timeout=req.timeout,
        topic_data=tuple(
            make(topic_cls, name=t.name, partition_data=tuple(
                make(part_cls, index=pd.index, records=convert(pd.records)) for pd in t.partition_data))
            for t in req.topic_data
        ),
    )


def as_produce_v3_body(frame: memoryview | bytes, header_size: int) -> bytes:
    """A Produce v0-v2 body re-laid as v3 (transactional_id = null)."""
    return _NULL_STRING + bytes(frame[header_size:])


def encode_legacy_produce_response(version: int, resp: Any) -> bytes:
    """Encode a Produce response (protocol.produce_wire.ProduceResponse: v3-shaped) as Produce v0, v1 or v2."""
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
