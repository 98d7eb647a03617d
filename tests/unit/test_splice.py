"""protocol.splice: a Fetch response sent as buffers must be byte-identical to kio's own encoding."""

from __future__ import annotations

import os

import pytest
from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.framing import encode_entity
from kavka.protocol.messages import NO_THROTTLE, make, nested, uuid_from_str
from kavka.protocol.splice import SplicedResponse, encode_spliced


def _fetch_response(version: int, records: list[bytes], spliced: SplicedResponse | None):  # noqa: ANN202
    cls = api.response_schema(api.ApiKey.FETCH, version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    part_cls = nested(cls, "PartitionData")

    def topic(name: str):  # noqa: ANN202
        parts = tuple(
            make(part_cls, partition_index=i, error_code=ErrorCode.none, high_watermark=100, last_stable_offset=100,
                 log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                 records=(spliced.add(r) if spliced is not None and r else r))
            for i, r in enumerate(records)
        )
        return make(topic_cls, topic=name, topic_id=uuid_from_str("J8aAPcfLQt2bqs1JT_rMgQ"), partitions=parts)

    return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0,
                responses=(topic("t.x-1"), topic("t_2")))


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 17])
def test_spliced_fetch_response_is_byte_identical(version):
    # Sizes around varint boundaries (127/128, 16383/16384) and an empty partition.
    records = [os.urandom(n) for n in (1, 127, 128, 0, 16383, 16384, 300_000)]
    plain = encode_entity(_fetch_response(version, records, None))
    s = SplicedResponse(None, api.is_flexible(api.ApiKey.FETCH, version))
    s.entity = _fetch_response(version, records, s)
    buffers = encode_spliced(s)
    assert isinstance(buffers, list)
    assert b"".join(bytes(b) for b in buffers) == plain
    # Each non-empty record chunk is handed over as is (twice: the topic appears twice), never copied.
    assert sum(1 for b in buffers for r in records if r and b is r) == 2 * sum(1 for r in records if r)


def test_a_plain_entity_is_encoded_as_usual():
    resp = _fetch_response(12, [b""], None)
    assert encode_spliced(resp) == encode_entity(resp)
