"""The vectorised default partitioner equals the producer's murmur2 partitioner on every key."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kavka.client.producer import default_partition  # noqa: E402
from kavka.spark.partitioner import key_partitions  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60),
    st.integers(1, 1000),
    st.integers(0, 5),
)
def test_matches_default_partition(keys: list[bytes | None], partitions: int, skip: int) -> None:
    arr = pa.array([b"x"] * skip + keys, pa.binary()).slice(skip)  # a non-zero array offset
    got = key_partitions(arr, partitions).tolist()
    want = [-1 if k is None else default_partition(k, partitions) for k in keys]
    assert got == want


def test_string_keys_hash_their_utf8_bytes() -> None:
    keys = ["k\u00e9y-1", "", "abcdefg"]
    got = key_partitions(pa.array(keys, pa.string()), 7).tolist()
    assert got == [default_partition(k.encode(), 7) for k in keys]
